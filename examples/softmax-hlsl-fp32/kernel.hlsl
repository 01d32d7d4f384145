// Y = softmax(X) along each row for row-major FP32 matrices: X and Y are R x N,
// Y[r, c] = exp(X[r, c] - max(X[r, :])) / sum over c of exp(X[r, c] - max(X[r, :])).
// Bindings follow the array order of kernel.toml; the scalars share one cbuffer after them.
[[vk::binding(0, 0)]] StructuredBuffer<float> X;
[[vk::binding(1, 0)]] RWStructuredBuffer<float> Y;
[[vk::binding(2, 0)]] cbuffer Scalars { int R; int N; };

// peak:begin macros
// BLOCK (threads per group) is a tuning parameter: peak defines it when it compiles.
// peak:end macros

// peak:begin device
// One thread per row, three passes over it in global memory: the maximum, the sum of
// exponentials, the quotients.
[numthreads(BLOCK, 1, 1)]
void softmax(uint3 tid : SV_DispatchThreadID) {
  int row = (int)tid.x;
  if (row >= R) return;
  int base = row * N;
  float m = X[base];
  for (int c = 1; c < N; ++c) m = max(m, X[base + c]);
  float s = 0.0f;
  for (int c = 0; c < N; ++c) s += exp(X[base + c] - m);
  for (int c = 0; c < N; ++c) Y[base + c] = exp(X[base + c] - m) / s;
}
// peak:end device

// peak:begin host
// The launch plan, evaluated by peak (docs/launch-plan.md): thread groups of [numthreads].
launch softmax
  grid = (ceil_div(R, BLOCK))
// peak:end host
