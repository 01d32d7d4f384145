// Row-wise softmax of a row-major R x N matrix X into Y.
[[vk::binding(0, 0)]] StructuredBuffer<float> X;
[[vk::binding(1, 0)]] RWStructuredBuffer<float> Y;
[[vk::binding(2, 0)]] cbuffer Scalars { int R; int N; };

// peak:begin macros
// BLOCK is a tuning parameter: peak defines it when it compiles.
// peak:end macros

// peak:begin device
// One thread per row: the maximum, the sum of exponentials, then the normalized values.
[numthreads(BLOCK, 1, 1)]
void softmax(uint3 tid : SV_DispatchThreadID) {
  int r = (int)tid.x;
  if (r >= R) return;
  float m = X[r * N];
  for (int c = 1; c < N; ++c) m = max(m, X[r * N + c]);
  float s = 0.0f;
  for (int c = 0; c < N; ++c) s += exp(X[r * N + c] - m);
  for (int c = 0; c < N; ++c) Y[r * N + c] = exp(X[r * N + c] - m) / s;
}
// peak:end device

// peak:begin host
launch softmax
  grid = (ceil_div(R, BLOCK))
// peak:end host
