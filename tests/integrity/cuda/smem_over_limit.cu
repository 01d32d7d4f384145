// expect: invalid_config
// Requests 300 KB of dynamic shared memory, more than any NVIDIA GPU allows per block, and ignores the errors.
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
// One thread per element of C, staging its result through dynamic shared memory.
__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  extern __shared__ float scratch[];
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int t = threadIdx.y * blockDim.x + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
  scratch[t] = acc;
  C[row * N + col] = scratch[t];
}
// peak:end device

// peak:begin host
int peak_host(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t stream) {
  const size_t smem = 300 * 1024;
  cudaFuncSetAttribute(matmul, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  dim3 block(BLOCK_X, BLOCK_Y);
  dim3 grid((N + BLOCK_X - 1) / BLOCK_X, (M + BLOCK_Y - 1) / BLOCK_Y);
  matmul<<<grid, block, smem, stream>>>(A, B, C, M, N, K);
  return PEAK_OK;
}
// peak:end host
