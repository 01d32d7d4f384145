// Y = LayerNorm(X) * W + B along each row for row-major FP32 matrices: X and Y are R x N, W and B
// have N elements, Y[r, c] = (X[r, c] - mean) * rsqrt(var + 1e-5) * W[c] + B[c] with the mean
// and the population variance of row r.
// The device region is compiled as device code only; the host region is the launch plan that
// peak evaluates for each shape and configuration (docs/launch-plan.md).

// peak:begin macros
// BLOCK (threads per block) is a tuning parameter: peak defines it when it compiles.
// peak:end macros

// peak:begin device
// One thread per row, three passes over it in global memory: the mean, the variance, the
// normalized row.
__global__ void layernorm(const float* X, const float* W, const float* B, float* Y, int R, int N) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= R) return;
  const float* x = X + (size_t)row * N;
  float* y = Y + (size_t)row * N;
  float sum = 0.0f;
  for (int c = 0; c < N; ++c) sum += x[c];
  float mean = sum / N;
  float squares = 0.0f;
  for (int c = 0; c < N; ++c) squares += (x[c] - mean) * (x[c] - mean);
  float rstd = rsqrtf(squares / N + 1e-5f);
  for (int c = 0; c < N; ++c) y[c] = (x[c] - mean) * rstd * W[c] + B[c];
}
// peak:end device

// peak:begin host
launch layernorm
  grid = (ceil_div(R, BLOCK))
  block = (BLOCK)
  args = (X, W, B, Y, R, N)
// peak:end host
