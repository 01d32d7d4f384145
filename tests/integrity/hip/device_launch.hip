// expect: compile_failed
// Launches a child kernel from device code: work the plan does not declare. HIP has no device-side launch; hipcc refuses it for AMD (and nvcc would without -rdc), so the build fails.

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
__global__ void matmul_child(const float* A, const float* B, float* C, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
  C[row * N + col] = acc;
}

// The only kernel the plan launches: one thread that launches the real work.
__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  dim3 block(BLOCK_X, BLOCK_Y);
  dim3 grid((N + BLOCK_X - 1) / BLOCK_X, (M + BLOCK_Y - 1) / BLOCK_Y);
  matmul_child<<<grid, block>>>(A, B, C, M, N, K);
}
// peak:end device

// peak:begin host
launch matmul
  grid = (1)
  block = (1)
  args = (A, B, C, M, N, K)
// peak:end host
