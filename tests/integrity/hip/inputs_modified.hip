// expect: inputs_modified
// Computes C correctly, then a second launch of the plan clears A (an input used as scratch space).

// peak:begin macros
#ifndef BLOCK_X
#define BLOCK_X 16
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 16
#endif
// peak:end macros

// peak:begin device
#include <hip/hip_runtime.h>

// One thread per element of C.
__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
  C[row * N + col] = acc;
}

// Clears A after use.
__global__ void scrub(float* A, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) A[i] = 0.0f;
}
// peak:end device

// peak:begin host
launch matmul
  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y))
  block = (BLOCK_X, BLOCK_Y)
  args = (A, B, C, M, N, K)
launch scrub
  grid = (ceil_div(M * K, 256))
  block = (256)
  args = (A, M * K)
// peak:end host
