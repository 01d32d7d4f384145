// expect: passed
// needs: sm_90
// Thread-block clusters of 2 and a TMA tensor map: the two blocks of a cluster compute neighbouring 32 x 32 tiles of C that share their rows of A; each block loads half of that A tile with cp.async.bulk.tensor (completing on an mbarrier) from a `const __grid_constant__ CUtensorMap`, and reads the other half from its partner's shared memory. A first launch copies A into a scratch buffer whose rows are padded to a multiple of 32, so that the map's row stride is a multiple of 16 bytes for every K.
#include <cooperative_groups.h>

// peak:begin macros
#define BM 32
#define BN 32
#define BK 32
#define HALF_M (BM / 2)
// peak:end macros

// peak:begin device
namespace cg = cooperative_groups;

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbarrier_init(unsigned long long* bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)),
               "r"(arrivals)
               : "memory");
}

// One arrival that also announces `bytes` of asynchronous copies completing on the barrier.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(unsigned long long* bar,
                                                          unsigned bytes) {
  asm volatile(
      "{\n"
      "  .reg .b64 state;\n"
      "  mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n"
      "}\n" ::"r"(shared_address(bar)),
      "r"(bytes)
      : "memory");
}

__device__ __forceinline__ void mbarrier_wait(unsigned long long* bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{\n"
        "  .reg .pred complete;\n"
        "  mbarrier.try_wait.parity.shared::cta.b64 complete, [%1], %2;\n"
        "  selp.u32 %0, 1, 0, complete;\n"
        "}\n"
        : "=r"(done)
        : "r"(shared_address(bar)), "r"(parity)
        : "memory");
  } while (!done);
}

// The box of `map` at element coordinates (x innermost, y) into shared memory at `dst`.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map,
                                            unsigned long long* bar, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(shared_address(dst)),
      "l"(map), "r"(x), "r"(y), "r"(shared_address(bar))
      : "memory");
}

// A (M x K) into A_padded (M x KP), zeros in the columns K..KP-1.
__global__ void pad_rows(const float* __restrict__ A, float* __restrict__ A_padded, int M, int K,
                         int KP) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  int r = blockIdx.y;
  if (c >= KP || r >= M) return;
  A_padded[(long long)r * KP + c] = c < K ? A[(long long)r * K + c] : 0.0f;
}

// 32 x 8 threads; each computes 4 elements of a 32 x 32 tile of C (rows ty, ty + 8, ...).
__global__ void __launch_bounds__(256)
    tma_cluster_matmul(const __grid_constant__ CUtensorMap a_map, const float* __restrict__ B,
                       float* __restrict__ C, int M, int N, int K) {
  __shared__ alignas(128) float a_half[HALF_M * BK];  // this block's half of the A tile
  __shared__ float b_tile[BK][BN];
  __shared__ alignas(8) unsigned long long bar;
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();  // 0 or 1: which half of the A tile it loads
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int tid = ty * 32 + tx;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  if (tid == 0) {
    mbarrier_init(&bar, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  cluster.sync();  // both blocks run before either reads the other's shared memory
  const float* halves[2] = {cluster.map_shared_rank(a_half, 0), cluster.map_shared_rank(a_half, 1)};
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  unsigned parity = 0;
  for (int k0 = 0; k0 < K; k0 += BK) {
    if (tid == 0) {
      mbarrier_arrive_expect_tx(&bar, HALF_M * BK * sizeof(float));
      tma_load_2d(a_half, &a_map, &bar, k0, row0 + static_cast<int>(rank) * HALF_M);
    }
    for (int i = tid; i < BK * BN; i += 256) {
      int r = i / BN, c = i % BN;
      b_tile[r][c] = (k0 + r < K && col0 + c < N) ? B[(long long)(k0 + r) * N + col0 + c] : 0.0f;
    }
    mbarrier_wait(&bar, parity);
    parity ^= 1;
    __syncthreads();
    cluster.sync();  // the partner's half has landed too
#pragma unroll 4
    for (int k = 0; k < BK; ++k) {
      float b = b_tile[k][tx];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        int r = ty + 8 * i;
        acc[i] += halves[r / HALF_M][(r % HALF_M) * BK + k] * b;
      }
    }
    cluster.sync();  // both blocks are done reading before the next copies overwrite
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    int r = row0 + ty + 8 * i, c = col0 + tx;
    if (r < M && c < N) C[(long long)r * N + c] = acc[i];
  }
}
// peak:end device

// peak:begin host
KP = round_up(K, BK)
scratch a_padded
  dtype = f32
  count = M * KP
tensor_map a_map
  array = a_padded
  dims = (KP, M)
  box = (BK, HALF_M)
launch pad_rows
  grid = (ceil_div(KP, 256), M)
  block = (256)
  args = (A, a_padded, M, K, KP)
launch tma_cluster_matmul
  grid = (round_up(ceil_div(N, BN), 2), ceil_div(M, BM))
  block = (32, 8)
  cluster = (2, 1, 1)
  args = (a_map, B, C, M, N, K)
// peak:end host
