// expect: compile_failed
// Declares 240000 bytes of static shared memory (LDS), more than the 64 KiB an AMD block may have and than any NVIDIA GPU gives one block: hipcc refuses it for gfx90a and gfx1030 ("local memory exceeds limit"), so the build fails.

// peak:begin macros
#ifndef BLOCK_X
#define BLOCK_X 16
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 16
#endif
#define STAGING_FLOATS 60000
// peak:end macros

// peak:begin device
#include <hip/hip_runtime.h>

// One thread per element of C, staging its result through a static shared array.
__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float staging[STAGING_FLOATS];
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int t = threadIdx.y * blockDim.x + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
  staging[(t * 997) % STAGING_FLOATS] = acc;
  C[row * N + col] = staging[(t * 997) % STAGING_FLOATS];
}
// peak:end device

// peak:begin host
launch matmul
  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y))
  block = (BLOCK_X, BLOCK_Y)
  args = (A, B, C, M, N, K)
// peak:end host
