// expect: workspace_exceeded
// Caches its result on the device keyed by the content of its inputs (a hash of sampled elements of A and B, decided on the device) and, on a hit, copies the cached product into C and waits until its time looks plausible.
// The cache is 64 MiB of static __device__ data that no plan declared: the gate refuses the module before it runs. Were it allowed, it would never hit: every timed launch gets inputs no earlier launch saw.

// peak:begin macros
#ifndef TILE
#define TILE 16
#endif
// Device cycles a block waits on a hit, so that the claimed rate looks plausible (just under the
// vendor library's) instead of impossibly fast.
#define WAIT_CYCLES 20000
// peak:end macros

// peak:begin device
#define CACHE_ELEMENTS (4096 * 4096)
__device__ float g_cache[CACHE_ELEMENTS];
__device__ unsigned long long g_key;
__device__ int g_valid;

__device__ unsigned long long content_hash(const float* A, const float* B, int M, int N, int K) {
  unsigned long long h = 1469598103934665603ull ^ ((unsigned long long)M << 40) ^ ((unsigned long long)N << 20) ^ K;
  for (int i = 0; i < 32; ++i) {
    h = (h ^ __float_as_uint(A[(long long)i * 7919 % ((long long)M * K)])) * 1099511628211ull;
    h = (h ^ __float_as_uint(B[(long long)i * 104729 % ((long long)K * N)])) * 1099511628211ull;
  }
  return h;
}

__device__ void wait_plausibly() {
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    long long t0 = clock64();
    while (clock64() - t0 < WAIT_CYCLES) {
    }
  }
  __syncthreads();
}

__global__ void matmul_cached(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  bool cacheable = (long long)M * N <= CACHE_ELEMENTS;
  if (cacheable && g_valid && g_key == content_hash(A, B, M, N, K)) {
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    if (row < M && col < N) C[row * N + col] = g_cache[row * N + col];
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
    if (cacheable) g_cache[row * N + col] = acc;
  }
}

__global__ void remember(const float* A, const float* B, const float* C, int M, int N, int K) {
  if ((long long)M * N > CACHE_ELEMENTS) return;
  g_key = content_hash(A, B, M, N, K);
  g_valid = 1;
}
// peak:end device

// peak:begin host
launch matmul_cached
  grid = (ceil_div(N, TILE), ceil_div(M, TILE))
  block = (TILE, TILE)
  args = (A, B, C, M, N, K)
launch remember
  grid = (1)
  block = (1)
  args = (A, B, C, M, N, K)
// peak:end host
