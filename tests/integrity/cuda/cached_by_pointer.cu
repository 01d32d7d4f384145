// expect: workspace_exceeded
// Caches its result on the device, keyed by pointer: a static __device__ buffer keeps the last product with the (A, B, C, M, N, K) it belongs to, and a call with the same key copies it into C instead of multiplying.
// The static buffer is 64 MiB of device memory that no plan declared: the gate refuses the module before it runs. (Were it allowed, the fresh inputs of every timed launch and the read-back of its outputs would make it `incorrect`.)

// peak:begin macros
#ifndef BLOCK_X
#define BLOCK_X 16
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 16
#endif
#define CACHE_ELEMENTS (4096 * 4096)
// peak:end macros

// peak:begin device
// Lives as long as the module: across every launch of one runner task.
__device__ float g_cache[CACHE_ELEMENTS];
__device__ const void* g_key_ptr[3];
__device__ int g_key_dims[3];
__device__ int g_key_valid;

__device__ bool cache_hit(const float* A, const float* B, const float* C, int M, int N, int K) {
  return g_key_valid && g_key_ptr[0] == A && g_key_ptr[1] == B && g_key_ptr[2] == C &&
         g_key_dims[0] == M && g_key_dims[1] == N && g_key_dims[2] == K;
}

// One thread per element of C; a hit copies the cached element instead of the dot product.
__global__ void matmul_cached(const float* A, const float* B, float* C, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  long long i = (long long)row * N + col;
  bool cacheable = (long long)M * N <= CACHE_ELEMENTS;
  if (cacheable && cache_hit(A, B, C, M, N, K)) {
    C[i] = g_cache[i];
    return;
  }
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
  C[i] = acc;
  if (cacheable) g_cache[i] = acc;
}

// The second launch of the plan: records the key once the whole product is in the cache.
__global__ void remember(const float* A, const float* B, const float* C, int M, int N, int K) {
  if ((long long)M * N > CACHE_ELEMENTS) return;
  g_key_ptr[0] = A;
  g_key_ptr[1] = B;
  g_key_ptr[2] = C;
  g_key_dims[0] = M;
  g_key_dims[1] = N;
  g_key_dims[2] = K;
  g_key_valid = 1;
}
// peak:end device

// peak:begin host
launch matmul_cached
  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y))
  block = (BLOCK_X, BLOCK_Y)
  args = (A, B, C, M, N, K)
launch remember
  grid = (1)
  block = (1)
  args = (A, B, C, M, N, K)
// peak:end host
