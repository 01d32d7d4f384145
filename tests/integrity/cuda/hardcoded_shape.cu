// expect: incorrect
// Hard-codes a shape assumption: the K loop is unrolled by 8 with no remainder, right for 2048 and every visible shape, wrong for the hidden ones.
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
// One thread per element of C; K is assumed to be a multiple of 8.
__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k + 8 <= K; k += 8) {
#pragma unroll
    for (int u = 0; u < 8; ++u) acc += A[row * K + k + u] * B[(k + u) * N + col];
  }
  C[row * N + col] = acc;
}
// peak:end device

// peak:begin host
int peak_host(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t stream) {
  dim3 block(BLOCK_X, BLOCK_Y);
  dim3 grid((N + BLOCK_X - 1) / BLOCK_X, (M + BLOCK_Y - 1) / BLOCK_Y);
  matmul<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
  return PEAK_OK;
}
// peak:end host
