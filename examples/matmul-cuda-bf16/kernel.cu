// C = A * B with BF16 inputs, FP32 accumulation and an FP32 output (row-major): A is M x K,
// B is K x N, C is M x N.
// The device region is compiled as device code only; the host region is the launch plan that
// peak evaluates for each shape and configuration (docs/launch-plan.md).

// peak:begin macros
// BLOCK_X and BLOCK_Y are tuning parameters: peak defines them when it compiles.
// peak:end macros

// peak:begin device
// One thread per element of C; products and sums in FP32.
__global__ void matmul(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += __bfloat162float(A[row * K + k]) * __bfloat162float(B[k * N + col]);
  C[row * N + col] = acc;
}
// peak:end device

// peak:begin host
launch matmul
  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y))
  block = (BLOCK_X, BLOCK_Y)
  args = (A, B, C, M, N, K)
// peak:end host
