// Y = softmax(X) along each row for row-major FP32 matrices: X and Y are R x N, in HIP,
// Y[r, c] = exp(X[r, c] - max(X[r, :])) / sum over c of exp(X[r, c] - max(X[r, :])).
// The device region is compiled as device code only, for AMD (hipcc: gfx90a, gfx1030) and for
// NVIDIA (nvcc through peak's HIP-to-CUDA mapping header); the host region is the launch plan
// that peak evaluates for each shape and configuration (docs/launch-plan.md).

// peak:begin macros
// BLOCK (threads per block) is a tuning parameter: peak defines it when it compiles.
// peak:end macros

// peak:begin device
#include <hip/hip_runtime.h>

// One thread per row, three passes over it in global memory: the maximum, the sum of
// exponentials, the quotients.
__global__ void softmax(const float* X, float* Y, int R, int N) {
  int row = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
  if (row >= R) return;
  const float* x = X + (size_t)row * N;
  float* y = Y + (size_t)row * N;
  float m = x[0];
  for (int c = 1; c < N; ++c) m = fmaxf(m, x[c]);
  float s = 0.0f;
  for (int c = 0; c < N; ++c) s += expf(x[c] - m);
  for (int c = 0; c < N; ++c) y[c] = expf(x[c] - m) / s;
}
// peak:end device

// peak:begin host
launch softmax
  grid = (ceil_div(R, BLOCK))
  block = (BLOCK)
  args = (X, Y, R, N)
// peak:end host
