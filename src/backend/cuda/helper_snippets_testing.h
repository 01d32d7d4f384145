#pragma once
// Fixtures shared by backend_cuda_tests (helper_snippets_test.cpp: every kernel below compiles
// and plans for an H100, no GPU needed) and backend_cuda_gpu_tests (helper_snippets_gpu_test.cpp:
// every kernel passes peak's validation on the GPU).
//
// The hand-written helper snippets that transformations insert into CUDA kernels (the
// `[[helpers]]` of transformations/matmul/*.md: cp-async, wmma, cp-async-16, tma, wgmma,
// setmaxnreg, cluster) are tested exactly as shipped: each case loads the transformation files
// with the library's parser, inserts the named helpers the way peak does before a
// transformation's first pass (insert_helpers: "// peak helper: NAME" and the snippet's code at
// the start of the device region), and wraps them in a minimal matmul candidate C = A * B for an
// examples/ context that uses the snippet in the simplest way its comment documents.
#include <ostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "context/context.h"
#include "transform/reply.h"
#include "transform/transformation.h"
#include "util/fs.h"
#include "util/result.h"

namespace peak::testing {

inline const fs::path kMatmulTransformationsDir =
    fs::path(PEAK_SOURCE_DIR) / "transformations" / "matmul";

// A helper of a shipped transformation: transformations/matmul/<file>.md, [[helpers]] name.
struct SnippetUse {
  std::string file;
  std::string helper;
};

struct HelperCase {
  std::string name;     // the test's name: "WgmmaN128Fp16"
  std::string context;  // examples/<context>
  std::vector<SnippetUse> helpers;
  std::string required_arch;         // what the snippets need ("sm_80", "sm_90", "sm_90a")
  std::string macros, device, host;  // the regions' text, before the helpers are inserted
  std::vector<Shape> shapes;         // the shapes validated (see shapes_note)
  std::string shapes_note;
};
inline void PrintTo(const HelperCase& c, std::ostream* os) { *os << c.name; }

inline Shape snippet_shape(int64_t m, int64_t n, int64_t k) {
  return Shape{{{"M", m}, {"N", n}, {"K", k}}};
}

// The element type of A and B in a context, as macros of the macros region: IN_T, TO_F(x) (to
// float) and FROM_F(x) (from float).
struct InputType {
  std::string context;  // "matmul-cuda-fp16"
  std::string suffix;   // "Fp16", for test names
  std::string macros;
};

inline InputType fp32_input() {
  return {"matmul-cuda-fp32", "Fp32",
          "#define IN_T float\n#define TO_F(x) (x)\n#define FROM_F(x) (x)\n"};
}
inline InputType fp16_input() {
  return {"matmul-cuda-fp16", "Fp16",
          "#define IN_T __half\n#define TO_F(x) __half2float(x)\n"
          "#define FROM_F(x) __float2half(x)\n"};
}
inline InputType bf16_input() {
  return {"matmul-cuda-bf16", "Bf16",
          "#define IN_T __nv_bfloat16\n#define TO_F(x) __bfloat162float(x)\n"
          "#define FROM_F(x) __float2bfloat16(x)\n"};
}

// Shapes for kernels that handle any shape: the contexts' validation shapes and a hidden one
// with odd sizes.
inline std::vector<Shape> any_shapes() {
  return {snippet_shape(256, 256, 256), snippet_shape(384, 320, 200), snippet_shape(257, 511, 129)};
}
// Shapes for kernels whose 16-byte copies or TMA strides need K % 8 == 0 && N % 8 == 0 (the
// transformations' `valid`): a multiple of every tile, a larger one, and one that is ragged in
// M, N and K (partial tiles everywhere: zeros must arrive outside the matrices).
inline std::vector<Shape> aligned_shapes() {
  return {snippet_shape(128, 256, 192), snippet_shape(256, 512, 256), snippet_shape(200, 136, 72)};
}
inline constexpr const char* kAnyShapesNote =
    "any shape (M x N x K): the validation shapes and 257 x 511 x 129";
inline constexpr const char* kAlignedShapesNote =
    "K % 8 == 0 && N % 8 == 0 (16-byte copies / TMA strides), M x N x K: 128 x 256 x 192, "
    "256 x 512 x 256 and the ragged 200 x 136 x 72";

// ---- The cases ----

// cp-async (pipelining.md, 4-byte cp.async) with the FP32 context: three stages of 16 x 16 tiles
// of A and B, each element copied by cp_async_4 (zeros outside the matrices), two tiles in flight
// (cp_async_wait<1>); one thread per element of C, products from shared memory.
inline HelperCase cp_async_case() {
  HelperCase c;
  InputType in = fp32_input();
  c.name = "CpAsync" + in.suffix;
  c.context = in.context;
  c.helpers = {{"pipelining", "cp-async"}};
  c.required_arch = "sm_80";
  c.macros = in.macros + "#define TILE 16\n#define STAGES 3\n";
  c.device =
      R"cu(// Three stages of 16 x 16 tiles of A and B filled by cp_async_4; tile t + 2 is
// copied while tile t is used.
__global__ void matmul(const IN_T* A, const IN_T* B, float* C, int M, int N, int K) {
  __shared__ IN_T As[STAGES][TILE][TILE];
  __shared__ IN_T Bs[STAGES][TILE][TILE];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  const int k_tiles = (K + TILE - 1) / TILE;
  // The copies of K tile t into stage t % STAGES: one group per tile, also when empty.
  auto copy_tile = [&](int t) {
    if (t < k_tiles) {
      const int s = t % STAGES, k0 = t * TILE;
      if (row < M && k0 + tx < K) cp_async_4(&As[s][ty][tx], &A[row * K + k0 + tx], true);
      else cp_async_4(&As[s][ty][tx], A, false);
      if (k0 + ty < K && col < N) cp_async_4(&Bs[s][ty][tx], &B[(k0 + ty) * N + col], true);
      else cp_async_4(&Bs[s][ty][tx], B, false);
    }
    cp_async_commit();
  };
  copy_tile(0);
  copy_tile(1);
  float acc = 0.0f;
  for (int t = 0; t < k_tiles; ++t) {
    cp_async_wait<STAGES - 2>();  // this thread's copies of tile t have landed
    __syncthreads();              // everyone's; and stage (t + 2) % STAGES is no longer read
    copy_tile(t + 2);
    const int s = t % STAGES;
    for (int k = 0; k < TILE; ++k) acc += TO_F(As[s][ty][k]) * TO_F(Bs[s][k][tx]);
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
)cu";
  c.host = R"(launch matmul
  grid = (ceil_div(N, TILE), ceil_div(M, TILE))
  block = (TILE, TILE)
  args = (A, B, C, M, N, K)
)";
  c.shapes = any_shapes();
  c.shapes_note = kAnyShapesNote;
  return c;
}

// wmma (tensor-core.md): one warp per 16 x 16 tile of C. Each 16-deep K step the warp copies the
// 16 x 16 tiles of A and B into 32-byte aligned shared memory (zeros outside the matrices),
// loads them into row-major fragments and multiplies them; the accumulator goes to C through
// shared memory.
inline HelperCase wmma_case(const InputType& in) {
  HelperCase c;
  c.name = "Wmma" + in.suffix;
  c.context = in.context;
  c.helpers = {{"tensor-core", "wmma"}};
  c.required_arch = "sm_80";
  c.macros = in.macros;
  c.device = R"cu(// One warp per 16 x 16 tile of C, through shared memory.
__global__ void matmul(const IN_T* A, const IN_T* B, float* C, int M, int N, int K) {
  __shared__ __align__(32) IN_T As[16 * 16];
  __shared__ __align__(32) IN_T Bs[16 * 16];
  __shared__ __align__(32) float Cs[16 * 16];
  const int lane = threadIdx.x;
  const int row0 = blockIdx.y * 16, col0 = blockIdx.x * 16;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int k0 = 0; k0 < K; k0 += 16) {
    for (int e = lane; e < 16 * 16; e += 32) {
      const int r = e / 16, c = e % 16;
      As[e] = (row0 + r < M && k0 + c < K) ? A[(row0 + r) * K + k0 + c] : FROM_F(0.0f);
      Bs[e] = (k0 + r < K && col0 + c < N) ? B[(k0 + r) * N + col0 + c] : FROM_F(0.0f);
    }
    __syncwarp();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, IN_T, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, IN_T, wmma::row_major> b;
    wmma::load_matrix_sync(a, As, 16);
    wmma::load_matrix_sync(b, Bs, 16);
    wmma::mma_sync(acc, a, b, acc);
    __syncwarp();
  }
  wmma::store_matrix_sync(Cs, acc, 16, wmma::mem_row_major);
  __syncwarp();
  for (int e = lane; e < 16 * 16; e += 32) {
    const int r = row0 + e / 16, c = col0 + e % 16;
    if (r < M && c < N) C[r * N + c] = Cs[e];
  }
}
)cu";
  c.host = R"(launch matmul
  grid = (ceil_div(N, 16), ceil_div(M, 16))
  block = (32)
  args = (A, B, C, M, N, K)
)";
  c.shapes = any_shapes();
  c.shapes_note = kAnyShapesNote;
  return c;
}

// cp-async-16 (tensor-pipelining.md; fp8-pipelining.md borrows it): three stages of 64 x 32 tiles
// of A and 32 x 64 tiles of B in 128-byte aligned shared memory, each thread copying one 16-byte
// chunk (8 elements) of each per stage with cp_async_16 (16 zero bytes outside the matrices), two
// tiles in flight; each of the 256 threads computes 4 x 4 elements of the 64 x 64 block tile from
// shared memory.
inline HelperCase cp_async_16_case(const InputType& in) {
  HelperCase c;
  c.name = "CpAsync16" + in.suffix;
  c.context = in.context;
  c.helpers = {{"tensor-pipelining", "cp-async-16"}};
  c.required_arch = "sm_80";
  c.macros = in.macros +
             "#define BM 64\n#define BN 64\n#define BK 32\n#define STAGES 3\n"
             "#define THREADS 256\n";
  c.device =
      R"cu(// Three stages of 64 x 32 (A) and 32 x 64 (B) tiles filled by cp_async_16; tile t + 2 is
// copied while tile t is used. A chunk is valid when its first element is inside the matrix
// (K % 8 == 0 and N % 8 == 0: then all 8 are).
__global__ void __launch_bounds__(THREADS) matmul(const IN_T* A, const IN_T* B, float* C, int M,
                                                  int N, int K) {
  __shared__ __align__(128) IN_T As[STAGES][BM][BK];
  __shared__ __align__(128) IN_T Bs[STAGES][BK][BN];
  const int tid = threadIdx.x;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const int k_tiles = (K + BK - 1) / BK;
  // This thread's chunk of each tile: A has BK / 8 chunks per row, B has BN / 8.
  const int a_r = tid / (BK / 8), a_c = (tid % (BK / 8)) * 8;
  const int b_r = tid / (BN / 8), b_c = (tid % (BN / 8)) * 8;
  auto copy_tile = [&](int t) {
    if (t < k_tiles) {
      const int s = t % STAGES, k0 = t * BK;
      if (row0 + a_r < M && k0 + a_c < K)
        cp_async_16(&As[s][a_r][a_c], &A[(row0 + a_r) * K + k0 + a_c], true);
      else
        cp_async_16(&As[s][a_r][a_c], A, false);
      if (k0 + b_r < K && col0 + b_c < N)
        cp_async_16(&Bs[s][b_r][b_c], &B[(k0 + b_r) * N + col0 + b_c], true);
      else
        cp_async_16(&Bs[s][b_r][b_c], B, false);
    }
    cp_async_commit();
  };
  const int ty = tid / 16, tx = tid % 16;  // rows ty + 16 i, columns tx + 16 j
  float acc[4][4] = {};
  copy_tile(0);
  copy_tile(1);
  for (int t = 0; t < k_tiles; ++t) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    copy_tile(t + 2);
    const int s = t % STAGES;
    for (int k = 0; k < BK; ++k)
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          acc[i][j] += TO_F(As[s][ty + 16 * i][k]) * TO_F(Bs[s][k][tx + 16 * j]);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
      if (r < M && c < N) C[r * N + c] = acc[i][j];
    }
}
)cu";
  c.host = R"(require K % 8 == 0 && N % 8 == 0
launch matmul
  grid = (ceil_div(N, BN), ceil_div(M, BM))
  block = (THREADS)
  args = (A, B, C, M, N, K)
)";
  c.shapes = aligned_shapes();
  c.shapes_note = kAlignedShapesNote;
  return c;
}

// tma (tma-loads.md) without swizzle: per K tile, thread 0 announces both boxes' bytes
// (mbar_expect_tx) and issues tma_load_2d of the 64 x 32 box of A and the 32 x 64 box of B into
// dynamic shared memory aligned by smem_align_1024; thread 32 adds the barrier's second arrival
// (mbar_arrive); every thread waits for the phase (parity 0, 1, 0, ...) and computes 4 x 4
// elements of the 64 x 64 block tile from shared memory.
inline HelperCase tma_case(const InputType& in) {
  HelperCase c;
  c.name = "Tma" + in.suffix;
  c.context = in.context;
  c.helpers = {{"tma-loads", "tma"}};
  c.required_arch = "sm_90";
  c.macros = in.macros + R"(#define BM 64
#define BN 64
#define BK 32
#define THREADS 256
// Bytes of the two boxes, and the dynamic shared memory: both, 1024 to align them, the barrier.
#define A_BOX_BYTES (BM * BK * 2)
#define B_BOX_BYTES (BK * BN * 2)
#define SMEM_BYTES (A_BOX_BYTES + B_BOX_BYTES + 1024 + 8)
)";
  c.device =
      R"cu(// One shared stage filled by two TMA copies per K tile, completing on one barrier of two
// arrivals.
__global__ void __launch_bounds__(THREADS)
    matmul(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
           float* C, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_align_1024(smem_raw);
  const IN_T* As = reinterpret_cast<const IN_T*>(smem);                // BM x BK
  const IN_T* Bs = reinterpret_cast<const IN_T*>(smem + A_BOX_BYTES);  // BK x BN
  unsigned long long* bar =
      reinterpret_cast<unsigned long long*>(smem + A_BOX_BYTES + B_BOX_BYTES);
  const int tid = threadIdx.x;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  if (tid == 0) {
    mbar_init(bar, 2);
    mbar_fence_init();
  }
  __syncthreads();
  const int ty = tid / 16, tx = tid % 16;  // rows ty + 16 i, columns tx + 16 j
  float acc[4][4] = {};
  const int k_tiles = (K + BK - 1) / BK;
  for (int t = 0; t < k_tiles; ++t) {
    if (tid == 0) {
      mbar_expect_tx(bar, A_BOX_BYTES + B_BOX_BYTES);
      tma_load_2d(smem, &a_map, bar, t * BK, row0);
      tma_load_2d(smem + A_BOX_BYTES, &b_map, bar, col0, t * BK);
    } else if (tid == 32) {
      mbar_arrive(bar);
    }
    mbar_wait(bar, t & 1);  // phase t: both arrivals and both boxes
    for (int k = 0; k < BK; ++k)
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          acc[i][j] += TO_F(As[(ty + 16 * i) * BK + k]) * TO_F(Bs[k * BN + tx + 16 * j]);
    __syncthreads();  // every thread is done with the tiles before the next copies
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
      if (r < M && c < N) C[r * N + c] = acc[i][j];
    }
}
)cu";
  c.host = R"(require K % 8 == 0 && N % 8 == 0
tensor_map a_map
  array = A
  dims = (K, M)
  box = (BK, BM)
tensor_map b_map
  array = B
  dims = (N, K)
  box = (BN, BK)
launch matmul
  grid = (ceil_div(N, BN), ceil_div(M, BM))
  block = (THREADS)
  shared = SMEM_BYTES
  args = (a_map, b_map, C, M, N, K)
)";
  c.shapes = aligned_shapes();
  c.shapes_note = kAlignedShapesNote;
  return c;
}

// wgmma (wgmma.md) with tma (tma-loads.md): one warpgroup per 64 x n block tile; per K tile of
// 64, thread 0 loads the 64 x 64 box of A and the n / 64 boxes (64 x 64) of B with the 128-byte
// swizzle into 1024-aligned dynamic shared memory, completing on one barrier; the warpgroup
// runs four wgmma_m64k16<n, T> on descriptors as the snippet documents them (A: + 32 bytes per
// 16 K, lbo 16, sbo 1024; B: + 2048 bytes per 16 K, lbo = one chunk's bytes, sbo 1024) and
// stores its accumulators by the documented fragment layout.
inline HelperCase wgmma_case(int n, const InputType& in) {
  HelperCase c;
  c.name = fmt::format("WgmmaN{}{}", n, in.suffix);
  c.context = in.context;
  c.helpers = {{"tma-loads", "tma"}, {"wgmma", "wgmma"}};
  c.required_arch = "sm_90a";
  c.macros = in.macros + fmt::format("#define WG_N {}\n", n) + R"(#define TILE_K 64
// Bytes of the A tile (64 rows of 128 bytes), of one B chunk (TILE_K rows x 64 columns) and of
// the B tile (WG_N / 64 chunks); the dynamic shared memory: both, 1024 to align them, the barrier.
#define A_TILE_BYTES (64 * TILE_K * 2)
#define B_CHUNK_BYTES (TILE_K * 64 * 2)
#define B_TILE_BYTES (WG_N * TILE_K * 2)
#define SMEM_BYTES (A_TILE_BYTES + B_TILE_BYTES + 1024 + 8)
)";
  c.device =
      R"cu(// One warpgroup computes the 64 x WG_N block tile with warpgroup MMAs from
// 128-byte swizzled shared tiles that TMA fills.
__global__ void __launch_bounds__(128)
    matmul(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
           float* C, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_align_1024(smem_raw);
  unsigned char* a_tile = smem;
  unsigned char* b_tile = smem + A_TILE_BYTES;
  unsigned long long* bar =
      reinterpret_cast<unsigned long long*>(smem + A_TILE_BYTES + B_TILE_BYTES);
  const int tid = threadIdx.x;
  const int row0 = blockIdx.y * 64, col0 = blockIdx.x * WG_N;
  if (tid == 0) {
    mbar_init(bar, 1);
    mbar_fence_init();
  }
  __syncthreads();
  float acc[WG_N / 2];
#pragma unroll
  for (int i = 0; i < WG_N / 2; ++i) acc[i] = 0.0f;
  const int k_tiles = (K + TILE_K - 1) / TILE_K;
  for (int t = 0; t < k_tiles; ++t) {
    if (tid == 0) {
      mbar_expect_tx(bar, A_TILE_BYTES + B_TILE_BYTES);
      tma_load_2d(a_tile, &a_map, bar, t * TILE_K, row0);
#pragma unroll
      for (int c = 0; c < WG_N / 64; ++c)
        tma_load_2d(b_tile + c * B_CHUNK_BYTES, &b_map, bar, col0 + c * 64, t * TILE_K);
    }
    mbar_wait(bar, t & 1);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < TILE_K / 16; ++kk)
      wgmma_m64k16<WG_N, IN_T>(acc, wgmma_desc(a_tile + kk * 32, 16, 1024),
                               wgmma_desc(b_tile + kk * 2048, B_CHUNK_BYTES, 1024));
    wgmma_commit();
    wgmma_wait<0>(acc);
    __syncthreads();  // the warpgroup is done with the tiles before the next copies
  }
  // Thread t holds rows 16 (t / 32) + (t % 32) / 4 (+ 8) and columns 8 j + 2 (t % 4) (+ 1).
  const int warp = tid / 32, lane = tid % 32;
  const int r = row0 + 16 * warp + lane / 4;
#pragma unroll
  for (int j = 0; j < WG_N / 8; ++j) {
    const int c = col0 + 8 * j + 2 * (lane % 4);
    if (r < M && c < N) C[r * N + c] = acc[4 * j];
    if (r < M && c + 1 < N) C[r * N + c + 1] = acc[4 * j + 1];
    if (r + 8 < M && c < N) C[(r + 8) * N + c] = acc[4 * j + 2];
    if (r + 8 < M && c + 1 < N) C[(r + 8) * N + c + 1] = acc[4 * j + 3];
  }
}
)cu";
  c.host = R"(require K % 8 == 0 && N % 8 == 0
tensor_map a_map
  array = A
  dims = (K, M)
  box = (TILE_K, 64)
  swizzle = 128
tensor_map b_map
  array = B
  dims = (N, K)
  box = (64, TILE_K)
  swizzle = 128
launch matmul
  grid = (ceil_div(N, WG_N), ceil_div(M, 64))
  block = (128)
  shared = SMEM_BYTES
  args = (a_map, b_map, C, M, N, K)
)";
  c.shapes = aligned_shapes();
  c.shapes_note = kAlignedShapesNote;
  return c;
}

// wgmma-e4m3 (fp8-wgmma.md, with the tma and wgmma helpers it borrows) with the fp8 context: one
// warpgroup per 64 x N tile, both operands K-major (A and Bt) in 128-byte swizzled tiles of 128
// one-byte elements that TMA fills, four m64nNk32 MMAs per K tile, the scaled result stored as
// BF16.
inline HelperCase wgmma_e4m3_case(int n) {
  HelperCase c;
  c.name = fmt::format("WgmmaE4m3N{}", n);
  c.context = "matmul-cuda-fp8";
  c.helpers = {{"tma-loads", "tma"}, {"wgmma", "wgmma"}, {"fp8-wgmma", "wgmma-e4m3"}};
  c.required_arch = "sm_90a";
  // The fp8 type comes from cuda_fp8.h, which the context's kernel includes above its regions.
  c.macros = fmt::format("#include <cuda_fp8.h>\n#define WG_N {}\n", n) + R"(#define TILE_K 128
// Bytes of the A tile (64 rows of 128 bytes) and of the B tile (WG_N rows of Bt, 128 bytes each);
// the dynamic shared memory: both, 1024 to align them, the barrier.
#define A_TILE_BYTES (64 * TILE_K)
#define B_TILE_BYTES (WG_N * TILE_K)
#define SMEM_BYTES (A_TILE_BYTES + B_TILE_BYTES + 1024 + 8)
)";
  c.device =
      R"cu(// One warpgroup computes the 64 x WG_N block tile with fp8 warpgroup MMAs from
// 128-byte swizzled K-major shared tiles that TMA fills.
__global__ void __launch_bounds__(128)
    matmul(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
           const float* A_scale, const float* B_scale, __nv_bfloat16* C, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_align_1024(smem_raw);
  unsigned char* a_tile = smem;
  unsigned char* b_tile = smem + A_TILE_BYTES;
  unsigned long long* bar =
      reinterpret_cast<unsigned long long*>(smem + A_TILE_BYTES + B_TILE_BYTES);
  const int tid = threadIdx.x;
  const int row0 = blockIdx.y * 64, col0 = blockIdx.x * WG_N;
  if (tid == 0) {
    mbar_init(bar, 1);
    mbar_fence_init();
  }
  __syncthreads();
  float acc[WG_N / 2];
#pragma unroll
  for (int i = 0; i < WG_N / 2; ++i) acc[i] = 0.0f;
  const int k_tiles = (K + TILE_K - 1) / TILE_K;
  for (int t = 0; t < k_tiles; ++t) {
    if (tid == 0) {
      mbar_expect_tx(bar, A_TILE_BYTES + B_TILE_BYTES);
      tma_load_2d(a_tile, &a_map, bar, t * TILE_K, row0);
      tma_load_2d(b_tile, &b_map, bar, t * TILE_K, col0);
    }
    mbar_wait(bar, t & 1);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < TILE_K / 32; ++kk)
      wgmma_m64k32<WG_N>(acc, wgmma_desc(a_tile + kk * 32, 16, 1024),
                         wgmma_desc(b_tile + kk * 32, 16, 1024));
    wgmma_commit();
    wgmma_wait<0>(acc);
    __syncthreads();  // the warpgroup is done with the tiles before the next copies
  }
  // Thread t holds rows 16 (t / 32) + (t % 32) / 4 (+ 8) and columns 8 j + 2 (t % 4) (+ 1).
  const float scale = A_scale[0] * B_scale[0];
  const int warp = tid / 32, lane = tid % 32;
  const int r = row0 + 16 * warp + lane / 4;
#pragma unroll
  for (int j = 0; j < WG_N / 8; ++j) {
    const int c = col0 + 8 * j + 2 * (lane % 4);
    if (r < M && c < N) C[r * N + c] = __float2bfloat16(acc[4 * j] * scale);
    if (r < M && c + 1 < N) C[r * N + c + 1] = __float2bfloat16(acc[4 * j + 1] * scale);
    if (r + 8 < M && c < N) C[(r + 8) * N + c] = __float2bfloat16(acc[4 * j + 2] * scale);
    if (r + 8 < M && c + 1 < N) C[(r + 8) * N + c + 1] = __float2bfloat16(acc[4 * j + 3] * scale);
  }
}
)cu";
  c.host = R"(require K % 16 == 0
tensor_map a_map
  array = A
  dims = (K, M)
  box = (TILE_K, 64)
  swizzle = 128
tensor_map b_map
  array = Bt
  dims = (K, N)
  box = (TILE_K, WG_N)
  swizzle = 128
launch matmul
  grid = (ceil_div(N, WG_N), ceil_div(M, 64))
  block = (128)
  shared = SMEM_BYTES
  args = (a_map, b_map, A_scale, B_scale, C, M, N, K)
)";
  c.shapes = {snippet_shape(128, 256, 192), snippet_shape(256, 512, 256),
              snippet_shape(200, 136, 80)};
  c.shapes_note =
      "K % 16 == 0 (TMA strides of one-byte rows), M x N x K: 128 x 256 x 192, 256 x 512 x 256 "
      "and the ragged 200 x 136 x 80";
  return c;
}

// tma-store (tma-store-epilogue.md) on the e4m3 case with N = 128: the BF16 results go through
// two 64 x 64 staging buffers in the 128-byte swizzled layout, each written to C by a TMA store
// (nothing outside C), the next buffer written while the previous store may still read its own.
inline HelperCase tma_store_case() {
  HelperCase c = wgmma_e4m3_case(128);
  c.name = "TmaStoreE4m3";
  c.helpers.push_back({"tma-store-epilogue", "tma-store"});
  const std::string old_smem = "#define SMEM_BYTES (A_TILE_BYTES + B_TILE_BYTES + 1024 + 8)\n";
  c.macros.replace(
      c.macros.find(old_smem), old_smem.size(),
      "#define EPI_BUF_BYTES 8192\n"
      "#define SMEM_BYTES (A_TILE_BYTES + B_TILE_BYTES + 2 * EPI_BUF_BYTES + 1024 + 8)\n");
  const std::string sig = "const float* A_scale";
  c.device.replace(c.device.find(sig), sig.size(),
                   "const __grid_constant__ CUtensorMap c_map, const float* A_scale");
  const std::string bar = "smem + A_TILE_BYTES + B_TILE_BYTES);";
  c.device.replace(c.device.find(bar), bar.size(),
                   "smem + A_TILE_BYTES + B_TILE_BYTES + 2 * EPI_BUF_BYTES);");
  const size_t store = c.device.find("  // Thread t holds rows");
  c.device =
      c.device.substr(0, store) +
      R"cu(  // Thread t holds rows 16 (t / 32) + (t % 32) / 4 (+ 8) and columns 8 j + 2 (t % 4) (+ 1):
  // chunk c (64 columns) goes into buffer c % 2, swizzled, and a TMA store writes it to C.
  const float scale = A_scale[0] * B_scale[0];
  const int warp = tid / 32, lane = tid % 32;
  for (int c = 0; c < WG_N / 64; ++c) {
    unsigned char* buf = b_tile + WG_N * TILE_K + (c % 2) * EPI_BUF_BYTES;
    if (tid == 0) tma_store_wait_read<1>();
    warpgroup_barrier(1);
    for (int jj = 0; jj < 8; ++jj) {
      const int j = c * 8 + jj;
      for (int h = 0; h < 2; ++h) {
        const int r = 16 * warp + lane / 4 + 8 * h, b = 16 * jj + 4 * (lane % 4);
        *reinterpret_cast<__nv_bfloat162*>(buf + r * 128 + (((b / 16) ^ (r % 8)) * 16) + b % 16) =
            __floats2bfloat162_rn(acc[4 * j + 2 * h] * scale, acc[4 * j + 2 * h + 1] * scale);
      }
    }
    tma_store_fence();
    warpgroup_barrier(1);
    if (tid == 0) {
      tma_store_2d(&c_map, buf, col0 + 64 * c, row0);
      tma_store_commit();
    }
  }
  if (tid == 0) tma_store_wait<0>();
}
)cu";
  const std::string tiles = "launch matmul";
  c.host.replace(c.host.find(tiles), tiles.size(),
                 "tensor_map c_map\n  array = C\n  dims = (N, M)\n  box = (64, 64)\n"
                 "  swizzle = 128\nlaunch matmul");
  const std::string args = "args = (a_map, b_map, A_scale";
  c.host.replace(c.host.find(args), args.size(), "args = (a_map, b_map, c_map, A_scale");
  c.host = "require N % 8 == 0\n" + c.host;
  c.shapes = {snippet_shape(128, 256, 192), snippet_shape(256, 512, 256),
              snippet_shape(200, 136, 80)};
  c.shapes_note =
      "K % 16 == 0 and N % 8 == 0 (TMA strides), M x N x K: 128 x 256 x 192, 256 x 512 x 256 and "
      "the ragged 200 x 136 x 80";
  return c;
}

// setmaxnreg (warp-specialization.md): a block of 1 + `consumers` warpgroups declared with
// __launch_bounds__(THREADS, 1); warpgroup 0 calls regs_release<40>() and does nothing else, the
// others call regs_claim<232>() and each computes a naive 32 x 64 tile (16 accumulators per
// thread, operands from global memory). With one consumer (256 threads) ptxas already gives
// every thread 232 registers, so the claim raises nothing; with two (384 threads, 168 registers
// at entry, as in a warp-specialized kernel) the claim needs the registers the producer released.
inline HelperCase setmaxnreg_case(const InputType& in, int consumers) {
  HelperCase c;
  c.name =
      (consumers == 1 ? "Setmaxnreg" : fmt::format("Setmaxnreg{}Consumers", consumers)) + in.suffix;
  c.context = in.context;
  c.helpers = {{"warp-specialization", "setmaxnreg"}};
  c.required_arch = "sm_90a";
  c.macros = in.macros + fmt::format("#define CONSUMERS {}\n", consumers) +
             R"(#define THREADS (128 * (1 + CONSUMERS))
#define TILE_M (32 * CONSUMERS)
#define TILE_N 64
)";
  c.device =
      R"cu(// Warpgroup 0 gives registers up and stops; each other warpgroup claims
// registers and computes 32 rows x 64 columns of the block tile: thread u the column u % 64 of
// rows u / 64 + 2 i.
__global__ void __launch_bounds__(THREADS, 1)
    matmul(const IN_T* A, const IN_T* B, float* C, int M, int N, int K) {
  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    regs_release<40>();
  } else {
    regs_claim<232>();
    const int u = threadIdx.x % 128;
    const int col = blockIdx.x * TILE_N + u % 64;
    const int r0 = blockIdx.y * TILE_M + 32 * (wg - 1) + u / 64;
    float acc[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) acc[i] = 0.0f;
    if (col < N) {
      for (int k = 0; k < K; ++k) {
        const float b = TO_F(B[k * N + col]);
#pragma unroll
        for (int i = 0; i < 16; ++i)
          if (r0 + 2 * i < M) acc[i] += TO_F(A[(r0 + 2 * i) * K + k]) * b;
      }
#pragma unroll
      for (int i = 0; i < 16; ++i)
        if (r0 + 2 * i < M) C[(r0 + 2 * i) * N + col] = acc[i];
    }
  }
}
)cu";
  c.host = R"(launch matmul
  grid = (ceil_div(N, TILE_N), ceil_div(M, TILE_M))
  block = (THREADS)
  args = (A, B, C, M, N, K)
)";
  c.shapes = any_shapes();
  c.shapes_note = kAnyShapesNote;
  return c;
}

// cluster (cluster.md) with tma (tma-loads.md): clusters of `cluster` blocks along x (1 or 2; 1 is
// a launch without clusters). Block x computes the 64 x 64 tile of C at rows 64 * x, so the
// blocks of a cluster compute vertically adjacent tiles that share their 32 x 64 B box of every
// K tile. Per K tile, thread 0 of each block waits on its `empty` barrier (one arrival from each
// block of the cluster, mbar_arrive_cluster), announces both boxes' bytes on its `full` barrier,
// copies its A box with tma_load_2d and its slice of the B box (32 / cluster rows at rank *
// 32 / cluster) with tma_load_2d_multicast to every block; cluster_sync after the barriers are
// initialized and at the end; the block traps unless cluster_ctarank() is blockIdx.x % cluster.
// The shapes include three tile rows (the last cluster's second block lies entirely below M) and
// K tiles whose second B slice lies entirely below K.
inline HelperCase cluster_case(const InputType& in, int cluster) {
  HelperCase c;
  c.name = (cluster == 1 ? "ClusterOfOne" : fmt::format("Cluster{}", cluster)) + in.suffix;
  c.context = in.context;
  c.helpers = {{"tma-loads", "tma"}, {"cluster", "cluster"}};
  c.required_arch = "sm_90a";
  c.macros = in.macros + fmt::format("#define CLUSTER {}\n", cluster) + R"(#define BM 64
#define BN 64
#define BK 32
#define THREADS 256
// Each block of a cluster copies SLICE_ROWS rows of the B box (SLICE_BYTES) to every block.
#define SLICE_ROWS (BK / CLUSTER)
#define SLICE_BYTES (SLICE_ROWS * BN * 2)
// Bytes of the two boxes, and the dynamic shared memory: both, 1024 to align them, two barriers.
#define A_BOX_BYTES (BM * BK * 2)
#define B_BOX_BYTES (BK * BN * 2)
#define SMEM_BYTES (A_BOX_BYTES + B_BOX_BYTES + 1024 + 16)
)";
  c.device =
      R"cu(// One shared stage per block: its own A box and the cluster's B box, whose slices every
// block of the cluster multicasts; the stage is refilled once every block has released it.
__global__ void __launch_bounds__(THREADS)
    matmul(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
           float* C, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_align_1024(smem_raw);
  const IN_T* As = reinterpret_cast<const IN_T*>(smem);                // BM x BK
  const IN_T* Bs = reinterpret_cast<const IN_T*>(smem + A_BOX_BYTES);  // BK x BN
  unsigned long long* full =
      reinterpret_cast<unsigned long long*>(smem + A_BOX_BYTES + B_BOX_BYTES);
  unsigned long long* empty = full + 1;
  const int tid = threadIdx.x;
  const unsigned rank = cluster_ctarank();
  if (rank != blockIdx.x % CLUSTER) __trap();
  const int row0 = blockIdx.x * BM, col0 = blockIdx.y * BN;
  if (tid == 0) {
    mbar_init(full, 1);
    mbar_init(empty, CLUSTER);
    mbar_fence_init();
  }
  cluster_sync();  // every block's barriers are initialized before anyone copies or arrives
  const int ty = tid / 16, tx = tid % 16;  // rows ty + 16 i, columns tx + 16 j
  float acc[4][4] = {};
  const int k_tiles = (K + BK - 1) / BK;
  for (int t = 0; t < k_tiles; ++t) {
    if (tid == 0) {
      if (t > 0) mbar_wait(empty, (t - 1) & 1);  // every block is done with K tile t - 1
      mbar_expect_tx(full, A_BOX_BYTES + B_BOX_BYTES);
      tma_load_2d(smem, &a_map, full, t * BK, row0);
      tma_load_2d_multicast(smem + A_BOX_BYTES + rank * SLICE_BYTES, &b_map, full, col0,
                            t * BK + rank * SLICE_ROWS, (1u << CLUSTER) - 1);
    }
    mbar_wait(full, t & 1);  // this block's A box and every block's B slice
    for (int k = 0; k < BK; ++k)
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          acc[i][j] += TO_F(As[(ty + 16 * i) * BK + k]) * TO_F(Bs[k * BN + tx + 16 * j]);
    __syncthreads();  // every thread of this block is done with the stage
    if (tid == 0)
      for (unsigned r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(empty, r);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
      if (r < M && c < N) C[r * N + c] = acc[i][j];
    }
  cluster_sync();  // no block exits while another may still arrive on its barrier
}
)cu";
  c.host = R"(require K % 8 == 0 && N % 8 == 0
tensor_map a_map
  array = A
  dims = (K, M)
  box = (BK, BM)
tensor_map b_map
  array = B
  dims = (N, K)
  box = (BN, SLICE_ROWS)
launch matmul
  grid = (CLUSTER * ceil_div(M, CLUSTER * BM), ceil_div(N, BN))
  block = (THREADS)
  shared = SMEM_BYTES
  cluster = (CLUSTER)
  args = (a_map, b_map, C, M, N, K)
)";
  // Whole clusters; ragged M, N and K (the second B slice of the last K tile below K); three
  // tile rows (the second block of the last cluster entirely below M).
  c.shapes = {snippet_shape(128, 256, 192), snippet_shape(200, 136, 72),
              snippet_shape(136, 264, 200)};
  c.shapes_note =
      "K % 8 == 0 && N % 8 == 0, M x N x K: 128 x 256 x 192, the ragged 200 x 136 x 72 and "
      "136 x 264 x 200 (three tile rows)";
  return c;
}

inline std::vector<HelperCase> helper_cases() {
  std::vector<HelperCase> cases = {cp_async_case()};
  for (const InputType& in : {fp16_input(), bf16_input()}) {
    cases.push_back(wmma_case(in));
    cases.push_back(cp_async_16_case(in));
    cases.push_back(tma_case(in));
    for (int n : {64, 128, 256}) cases.push_back(wgmma_case(n, in));
    cases.push_back(setmaxnreg_case(in, 1));
  }
  cases.push_back(setmaxnreg_case(fp16_input(), 2));
  for (int cluster : {2, 1})
    for (const InputType& in : {fp16_input(), bf16_input()})
      cases.push_back(cluster_case(in, cluster));
  for (int n : {64, 128, 256}) cases.push_back(wgmma_e4m3_case(n));
  cases.push_back(tma_store_case());
  return cases;
}

inline Result<HelperCase> find_helper_case(const std::string& name) {
  for (HelperCase& c : helper_cases())
    if (c.name == name) return std::move(c);
  return make_error("no helper-snippet case named " + name);
}

// The helper as shipped: [[helpers]] `name` of transformations/matmul/<file>.md, loaded with the
// library's loader (a borrowed helper holds its source's code).
inline Result<HelperSnippet> shipped_helper(const SnippetUse& use) {
  // Loaded once per test process: every case asks for several helpers.
  static const Result<std::vector<Transformation>> lib = load_library(kMatmulTransformationsDir);
  if (!lib) return make_error(lib.error());
  auto t = find_transformation(*lib, use.file);
  if (!t) return make_error(t.error());
  for (const HelperSnippet& h : t->helpers)
    if (h.name == use.helper && (h.backend.empty() || h.backend == "cuda")) return h;
  return make_error(fmt::format("{} has no CUDA helper named {}", t->path.string(), use.helper));
}

// The whole kernel source of a case: its regions, then each helper inserted as peak inserts it
// (insert_helpers with a transformation holding that helper alone).
inline Result<std::string> helper_case_source(const HelperCase& c) {
  const std::string text =
      "// helper-snippet test kernel " + c.name + " for examples/" + c.context + "\n" +
      begin_marker(Region::macros) + "\n" + c.macros + end_marker(Region::macros) + "\n" +
      begin_marker(Region::device) + "\n" + c.device + end_marker(Region::device) + "\n" +
      begin_marker(Region::host) + "\n" + c.host + end_marker(Region::host) + "\n";
  auto regions = split_regions(text, "kernel.cu");
  if (!regions) return make_error(regions.error());
  SourceRegions r = *regions;
  for (const SnippetUse& use : c.helpers) {
    auto h = shipped_helper(use);
    if (!h) return make_error(h.error());
    Transformation t;
    t.name = use.file;
    t.helpers = {*h};
    r = insert_helpers(t, "cuda", r);
  }
  return join_regions(r);
}

}  // namespace peak::testing
