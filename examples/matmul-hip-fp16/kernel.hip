// C = A * B with FP16 inputs, FP32 accumulation and an FP32 output (row-major): A is M x K,
// B is K x N, C is M x N, in HIP.
// The device region is compiled as device code only, for AMD (hipcc: gfx90a, gfx1030) and for
// NVIDIA (nvcc through peak's HIP-to-CUDA mapping header); the host region is the launch plan
// that peak evaluates for each shape and configuration (docs/launch-plan.md).

// peak:begin macros
// BLOCK_X and BLOCK_Y are tuning parameters: peak defines them when it compiles.
// peak:end macros

// peak:begin device
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>

// One thread per element of C; products and sums in FP32.
__global__ void matmul(const __half* A, const __half* B, float* C, int M, int N, int K) {
  int col = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
  int row = hipBlockIdx_y * hipBlockDim_y + hipThreadIdx_y;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += __half2float(A[row * K + k]) * __half2float(B[k * N + col]);
  C[row * N + col] = acc;
}
// peak:end device

// peak:begin host
launch matmul
  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y))
  block = (BLOCK_X, BLOCK_Y)
  args = (A, B, C, M, N, K)
// peak:end host
