// Y = RMSNorm(X) * W along each row, BF16 storage with FP32 accumulation: X and Y are R x N
// (row-major), W has N elements, Y[r, c] = X[r, c] * rsqrt(mean over c of X[r, c]^2 + 1e-6) * W[c].
// The device region is compiled as device code only; the host region is the launch plan that
// peak evaluates for each shape and configuration (docs/launch-plan.md).

// peak:begin macros
// BLOCK (threads per block) is a tuning parameter: peak defines it when it compiles.
// peak:end macros

// peak:begin device
// One thread per row, two passes over it in global memory: the sum of squares, the scaled row.
__global__ void rmsnorm(const __nv_bfloat16* X, const __nv_bfloat16* W, __nv_bfloat16* Y, int R,
                        int N) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= R) return;
  const __nv_bfloat16* x = X + (size_t)row * N;
  __nv_bfloat16* y = Y + (size_t)row * N;
  float squares = 0.0f;
  for (int c = 0; c < N; ++c) {
    float v = __bfloat162float(x[c]);
    squares += v * v;
  }
  float scale = rsqrtf(squares / N + 1e-6f);
  for (int c = 0; c < N; ++c)
    y[c] = __float2bfloat16(__bfloat162float(x[c]) * scale * __bfloat162float(W[c]));
}
// peak:end device

// peak:begin host
launch rmsnorm
  grid = (ceil_div(R, BLOCK))
  block = (BLOCK)
  args = (X, W, Y, R, N)
// peak:end host
