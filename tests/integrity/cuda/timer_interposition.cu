// expect: forbidden_api
// Defines cudaEventElapsedTime itself, hoping to replace the runner's timer with one that reports 1 microsecond.
#include <cuda_runtime.h>
#include <cuda_fp16.h>

// peak:begin macros
#ifndef BLOCK_X
#define BLOCK_X 16
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 16
#endif
// peak:end macros

// peak:begin device
// One thread per element of C.
__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
  C[row * N + col] = acc;
}
// peak:end device

// peak:begin host
extern "C" cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  (void)start;
  (void)end;
  *ms = 0.001f;
  return cudaSuccess;
}

int peak_host(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t stream) {
  dim3 block(BLOCK_X, BLOCK_Y);
  dim3 grid((N + BLOCK_X - 1) / BLOCK_X, (M + BLOCK_Y - 1) / BLOCK_Y);
  matmul<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
  return PEAK_OK;
}
// peak:end host
