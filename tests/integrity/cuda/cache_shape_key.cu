// expect: nondeterministic|unwritten_output|incorrect
// Keys a kept product by the shape (M, N, K) in a few bytes of static __device__ data, keeps the product in a scratch buffer of its plan, and on a hit copies it into C and waits until its time looks plausible.
// The runner poisons scratch buffers before every launch: the second checked run finds its key and copies poison into C, so the two checked runs on the same inputs differ (nondeterministic). Were the first one skipped, the copy would still be wrong for the next inputs.

// peak:begin macros
#ifndef TILE
#define TILE 16
#endif
// Device cycles a block waits on a hit, so that the claimed rate looks plausible (just under the
// vendor library's) instead of impossibly fast.
#define WAIT_CYCLES 20000
// peak:end macros

// peak:begin device
__device__ int g_shape[3];
__device__ int g_valid;
__device__ void wait_plausibly() {
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    long long t0 = clock64();
    while (clock64() - t0 < WAIT_CYCLES) {
    }
  }
  __syncthreads();
}

__global__ void matmul_cached(const float* A, const float* B, float* C, int M, int N, int K,
                              float* cache) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  if (g_valid && g_shape[0] == M && g_shape[1] == N && g_shape[2] == K) {
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    if (row < M && col < N) C[row * N + col] = cache[row * N + col];
    wait_plausibly();
    return;
  }
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE + ty;
  int col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int t = 0; t < K; t += TILE) {
    As[ty][tx] = (row < M && t + tx < K) ? A[row * K + t + tx] : 0.0f;
    Bs[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) {
    C[row * N + col] = acc;
    cache[row * N + col] = acc;
  }
}

__global__ void remember(const float* A, const float* B, const float* C, int M, int N, int K,
                         float* cache) {
  g_shape[0] = M;
  g_shape[1] = N;
  g_shape[2] = K;
  g_valid = 1;
}
// peak:end device

// peak:begin host
scratch cache
  dtype = f32
  count = M * N + 64
launch matmul_cached
  grid = (ceil_div(N, TILE), ceil_div(M, TILE))
  block = (TILE, TILE)
  args = (A, B, C, M, N, K, cache)
launch remember
  grid = (1)
  block = (1)
  args = (A, B, C, M, N, K, cache)
// peak:end host
