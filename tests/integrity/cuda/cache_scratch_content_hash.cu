// expect: passed
// Keeps its result and a content key (a hash of sampled elements of A and B) in a scratch buffer it declares in its plan, and on a hit copies the kept product into C and waits until its time looks plausible.
// harmless: the runner poisons scratch buffers before every launch and gives every timed launch inputs no earlier launch saw, so the key never matches and every launch computes; the outputs of every timed launch are read back and checked.
// timed: passed

// peak:begin macros
#ifndef TILE
#define TILE 16
#endif
// Device cycles a block waits on a hit, so that the claimed rate looks plausible (just under the
// vendor library's) instead of impossibly fast.
#define WAIT_CYCLES 20000
// peak:end macros

// peak:begin device
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

// cache[0..M*N) holds the kept product, cache[M*N], cache[M*N+1] the key's two halves.
__global__ void matmul_cached(const float* A, const float* B, float* C, int M, int N, int K,
                              float* cache) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  const long long mn = (long long)M * N;
  unsigned long long key = content_hash(A, B, M, N, K);
  unsigned long long kept = ((unsigned long long)__float_as_uint(cache[mn]) << 32) | __float_as_uint(cache[mn + 1]);
  if (kept == key) {
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
  unsigned long long key = content_hash(A, B, M, N, K);
  const long long mn = (long long)M * N;
  cache[mn] = __uint_as_float((unsigned)(key >> 32));
  cache[mn + 1] = __uint_as_float((unsigned)key);
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
