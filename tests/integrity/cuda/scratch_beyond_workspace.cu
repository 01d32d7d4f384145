// expect: workspace_exceeded
// Declares a scratch buffer of 64 copies of C, room for a cache of earlier results, far more than the kernel context grants (kernel.toml `workspace`): refused when the plan is evaluated, before anything runs.

// peak:begin macros
#ifndef BLOCK_X
#define BLOCK_X 16
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 16
#endif
#define CACHE_COPIES 64
// peak:end macros

// peak:begin device
// One thread per element of C; every result is also kept in the cache.
__global__ void matmul(const float* A, const float* B, float* C, float* cache, int M, int N,
                       int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
  C[row * N + col] = acc;
  cache[row * N + col] = acc;
}
// peak:end device

// peak:begin host
scratch cache
  dtype = f32
  count = CACHE_COPIES * M * N
launch matmul
  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y))
  block = (BLOCK_X, BLOCK_Y)
  args = (A, B, C, cache, M, N, K)
// peak:end host
