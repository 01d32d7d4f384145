// expect: passed
// 64 x 64 tiles of C with a K step of 192: 48 KiB each of A and B tiles, 96 KiB of dynamic shared memory per block (`extern __shared__`, `shared = SMEM_BYTES` in the plan), above the 48 KiB that needs no opt-in.

// peak:begin macros
#define BM 64
#define BN 64
#define BK 192
#define THREADS_X 16
#define THREADS_Y 16
#define SMEM_BYTES ((BM * BK + BK * BN) * 4)
// peak:end macros

// peak:begin device
// Each of the 16 x 16 threads computes a 4 x 4 block of the 64 x 64 tile of C.
__global__ void matmul_big_tiles(const float* __restrict__ A, const float* __restrict__ B,
                                 float* __restrict__ C, int M, int N, int K) {
  extern __shared__ float smem[];
  float* As = smem;            // BM x BK, row-major
  float* Bs = smem + BM * BK;  // BK x BN, row-major
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int tid = ty * THREADS_X + tx;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = tid; i < BM * BK; i += THREADS_X * THREADS_Y) {
      int r = i / BK, c = i % BK;
      As[i] = (row0 + r < M && k0 + c < K) ? A[(long long)(row0 + r) * K + k0 + c] : 0.0f;
    }
    for (int i = tid; i < BK * BN; i += THREADS_X * THREADS_Y) {
      int r = i / BN, c = i % BN;
      Bs[i] = (k0 + r < K && col0 + c < N) ? B[(long long)(k0 + r) * N + col0 + c] : 0.0f;
    }
    __syncthreads();
    for (int k = 0; k < BK; ++k) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = As[(ty + 16 * i) * BK + k];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = Bs[k * BN + tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
      if (r < M && c < N) C[(long long)r * N + c] = acc[i][j];
    }
}
// peak:end device

// peak:begin host
launch matmul_big_tiles
  grid = (ceil_div(N, BN), ceil_div(M, BM))
  block = (THREADS_X, THREADS_Y)
  shared = SMEM_BYTES
  args = (A, B, C, M, N, K)
// peak:end host
