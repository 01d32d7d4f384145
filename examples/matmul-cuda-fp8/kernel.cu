// C = A_scale * B_scale * A * B with E4M3 inputs, FP32 accumulation and a BF16 output (row-major):
// A is M x K, Bt is N x K (B stored K-major: Bt[n * K + k] is B's element (k, n)), C is M x N;
// A_scale and B_scale hold one float each.
// The device region is compiled as device code only; the host region is the launch plan that
// peak evaluates for each shape and configuration (docs/launch-plan.md).
#include <cuda_fp8.h>

// peak:begin macros
// BLOCK_X and BLOCK_Y are tuning parameters: peak defines them when it compiles.
// peak:end macros

// peak:begin device
// One thread per element of C; products and sums in FP32, scaled once at the end.
__global__ void matmul(const __nv_fp8_e4m3* A, const __nv_fp8_e4m3* Bt, const float* A_scale,
                       const float* B_scale, __nv_bfloat16* C, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += float(A[row * K + k]) * float(Bt[col * K + k]);
  C[row * N + col] = __float2bfloat16(acc * (A_scale[0] * B_scale[0]));
}
// peak:end device

// peak:begin host
launch matmul
  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y))
  block = (BLOCK_X, BLOCK_Y)
  args = (A, Bt, A_scale, B_scale, C, M, N, K)
// peak:end host
