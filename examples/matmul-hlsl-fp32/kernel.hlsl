// C = A * B for row-major FP32 matrices: A is M x K, B is K x N, C is M x N.
// Bindings follow the array order of kernel.toml; the scalars share one cbuffer after them.
[[vk::binding(0, 0)]] StructuredBuffer<float> A;
[[vk::binding(1, 0)]] StructuredBuffer<float> B;
[[vk::binding(2, 0)]] RWStructuredBuffer<float> C;
[[vk::binding(3, 0)]] cbuffer Scalars { int M; int N; int K; };

// peak:begin macros
// BLOCK_X and BLOCK_Y are tuning parameters: peak defines them when it compiles.
// peak:end macros

// peak:begin device
// One thread per element of C.
[numthreads(BLOCK_X, BLOCK_Y, 1)]
void main(uint3 tid : SV_DispatchThreadID) {
  int col = (int)tid.x;
  int row = (int)tid.y;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
  C[row * N + col] = acc;
}
// peak:end device

// peak:begin host
// The launch plan, evaluated by peak (docs/launch-plan.md): thread groups of [numthreads].
launch main
  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y))
// peak:end host
