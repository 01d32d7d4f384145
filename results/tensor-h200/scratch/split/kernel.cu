// C = A * B with FP16 inputs, FP32 accumulation and an FP32 output (row-major): A is M x K,
// B is K x N, C is M x N.
// The device region is compiled as device code only; the host region is the launch plan that
// peak evaluates for each shape and configuration (docs/launch-plan.md).

// peak:begin macros
// NUM_STAGES, WG_M, WG_N and GROUP_M are tuning parameters: peak defines them (BLOCK_X, BLOCK_Y, TILE_K,
// WARPS_M, WARPS_N, WARP_TILES_M and WARP_TILES_N are kept at one value and unused).

// Row-major accessor of C (M x N).
#define C_AT(row, col) (C[(row) * N + (col)])

// Block tile of C: WG_M consumer warpgroups, each computing 64 rows x WG_N columns with warpgroup
// MMAs, and one producer warpgroup (warpgroup 0) that issues the TMA copies.
#define BLOCK_TILE_M (64 * (WG_M))
#define BLOCK_TILE_N (WG_N)
#define THREADS_PER_BLOCK (128 * ((WG_M) + 1))

// Registers per thread after reallocation: the producer gives registers up, the consumers take
// them (the block's total stays within the 64K registers of a multiprocessor).
#define PRODUCER_REGS 40
#define CONSUMER_REGS 232

// The K depth of a shared stage: 64 two-byte elements, one 128-byte swizzled row.
#define WG_TILE_K 64
#define K_TILES (((K) + (WG_TILE_K) - 1) / (WG_TILE_K))

// Output tiles of C: TILES_M x TILES_N block tiles, visited by a persistent grid of at most one
// block per multiprocessor in groups of GROUP_M tile rows (column by column within a group).
#define TILES_M (((M) + (BLOCK_TILE_M) - 1) / (BLOCK_TILE_M))
#define TILES_N (((N) + (BLOCK_TILE_N) - 1) / (BLOCK_TILE_N))

// Bytes of a stage: the A tile (BLOCK_TILE_M rows of 128 bytes), and the B tile as
// BLOCK_TILE_N / 64 chunks of WG_TILE_K rows x 64 columns (128 bytes per row).
#define A_STAGE_BYTES ((BLOCK_TILE_M) * (WG_TILE_K) * 2)
#define B_CHUNK_BYTES ((WG_TILE_K) * 64 * 2)
#define B_STAGE_BYTES ((BLOCK_TILE_N) * (WG_TILE_K) * 2)
#define STAGE_BYTES ((A_STAGE_BYTES) + (B_STAGE_BYTES))

// Split-K: a tile with few tiles beside it has its K tiles split into `splits` ranges (the launch
// plan chooses splits per shape), each a work unit of its own; split s of a tile takes K tiles
// SPLIT_T0(s) .. SPLIT_T1(s) - 1. At most SPLIT_K_MAX splits, each of at least MIN_SPLIT_K_TILES
// K tiles.
#define SPLIT_K_MAX 64
#define MIN_SPLIT_K_TILES 4
#define SPLIT_T0(s) ((s) * (K_TILES) / (splits))
#define SPLIT_T1(s) (((s) + 1) * (K_TILES) / (splits))

// Row-major accessor of the scratch buffer of partial tiles: split s, row, col of C.
#define PARTIAL_AT(s, row, col) (partial[((size_t)(s) * (M) + (row)) * (N) + (col)])

// Dynamic shared memory of a block: NUM_STAGES stages, 1024 bytes to align them, two 8-byte
// barriers per stage (full and empty).
#define SMEM_BYTES ((NUM_STAGES) * (STAGE_BYTES) + 1024 + 16 * (NUM_STAGES))
// peak:end macros

// peak:begin device
// peak helper: setmaxnreg
// Register reallocation between warpgroups (setmaxnreg, sm_90a). Every thread of a warpgroup
// calls the same one with the same count (a multiple of 8, 24..256); it takes effect only in a
// kernel declared with __launch_bounds__(THREADS, 1). regs_release<N>() lowers this warpgroup's
// registers per thread to N, regs_claim<N>() raises them to N (waiting until released registers
// are available).
template <int N>
__device__ __forceinline__ void regs_release() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void regs_claim() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
// end of helper setmaxnreg
// peak helper: wgmma
// Warpgroup MMA (wgmma, sm_90a) from shared memory, fp32 accumulators. A warpgroup is 4
// consecutive warps starting at a warp index divisible by 4; all 128 threads call every function
// below together.
// wgmma_desc(tile, lbo, sbo): the shared-memory matrix descriptor of an operand tile stored in
// the 128-byte swizzled layout that a TMA copy with `swizzle = 128` writes (each row 128 bytes,
// the tile 1024-byte aligned). For A (M x K, K contiguous): lbo = 16 (unused), sbo = 1024 (8 rows
// of 128 bytes); the next 16 K elements start 32 bytes further. For B (K x N, N contiguous,
// "transposed"): the tile is stored as 64-column chunks of [rows of K][64 N]; lbo = the bytes of
// one chunk, sbo = 1024; the next 16 K rows start 2048 bytes further.
__device__ __forceinline__ unsigned long long wgmma_desc(const void* tile, unsigned lbo,
                                                         unsigned sbo) {
  const unsigned long long a = static_cast<unsigned>(__cvta_generic_to_shared(tile));
  return ((a & 0x3FFFF) >> 4) | (static_cast<unsigned long long>((lbo & 0x3FFFF) >> 4) << 16) |
         (static_cast<unsigned long long>((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}
// Orders the accumulator registers and shared memory before the first wgmma of a batch.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
// Closes the batch of wgmma issued since the last commit.
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Keeps the compiler from moving reads or writes of the accumulators across a wait.
template <int R>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// Waits until at most PENDING committed batches are in flight; their accumulators are then final.
template <int PENDING, int R>
__device__ __forceinline__ void wgmma_wait(float (&d)[R]) {
  wgmma_fence_operands(d);
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
  wgmma_fence_operands(d);
}

__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], unsigned long long a_desc,
                                                 unsigned long long b_desc, __half) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, 1, 1, 1, 0, 1;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a_desc), "l"(b_desc));
}
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], unsigned long long a_desc,
                                                 unsigned long long b_desc, __nv_bfloat16) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, 1, 1, 1, 0, 1;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a_desc), "l"(b_desc));
}
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], unsigned long long a_desc,
                                                 unsigned long long b_desc, __half) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, 1, 1, 1, 0, 1;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a_desc), "l"(b_desc));
}
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], unsigned long long a_desc,
                                                 unsigned long long b_desc, __nv_bfloat16) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, 1, 1, 1, 0, 1;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a_desc), "l"(b_desc));
}
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], unsigned long long a_desc,
                                                 unsigned long long b_desc, __half) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, 1, 1, 1, 0, 1;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(a_desc), "l"(b_desc));
}
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], unsigned long long a_desc,
                                                 unsigned long long b_desc, __nv_bfloat16) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, 1, 1, 1, 0, 1;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(a_desc), "l"(b_desc));
}
// One m64nNk16 MMA of a warpgroup: d (N / 2 accumulators per thread) += A (64 x 16, from a_desc)
// * B (16 x N, from b_desc), inputs of type T (__half or __nv_bfloat16), N = 64, 128 or 256.
// Thread t of the warpgroup holds, for j = 0 .. N / 8 - 1, the elements at row
// 16 * (t / 32) + (t % 32) / 4 (+ 8 for d[4j + 2], d[4j + 3]) and columns 8j + 2 * (t % 4) (+ 1 for
// d[4j + 1], d[4j + 3]) of the 64 x N result.
template <int N, class T>
__device__ __forceinline__ void wgmma_m64k16(float (&d)[N / 2], unsigned long long a_desc,
                                             unsigned long long b_desc) {
  static_assert(N == 64 || N == 128 || N == 256, "wgmma_m64k16: N is 64, 128 or 256");
  if constexpr (N == 64) wgmma_m64n64k16(d, a_desc, b_desc, T());
  else if constexpr (N == 128) wgmma_m64n128k16(d, a_desc, b_desc, T());
  else wgmma_m64n256k16(d, a_desc, b_desc, T());
}
// end of helper wgmma
// peak helper: tma
// TMA copies completing on mbarriers (sm_90). A barrier is an `unsigned long long` in shared
// memory. mbar_init(bar, n): n arrivals complete a phase (one thread initializes, then
// mbar_fence_init() and a block barrier before any use). mbar_expect_tx(bar, bytes): one arrival
// that also announces `bytes` of copies completing on bar. mbar_arrive(bar): one arrival.
// mbar_wait(bar, parity): returns once the phase with that parity (0 for the first phase, then
// 1, 0, ...) has completed. tma_load_2d(dst, &map, bar, x, y): copies the box of `map` whose first
// element is at (x innermost, y) into shared memory at dst (aligned as the map's swizzle needs:
// 128 bytes, 1024 for swizzle = 128); elements outside the array arrive as zeros, and the whole
// box's bytes count on bar. smem_align_1024(p): p rounded up to a multiple of 1024 bytes.
__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(arrivals)
               : "memory");
}
__device__ __forceinline__ void mbar_fence_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_expect_tx(unsigned long long* bar, unsigned bytes) {
  asm volatile(
      "{\n .reg .b64 state;\n mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(
          smem_u32(bar)),
      "r"(bytes)
      : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned long long* bar) {
  asm volatile("{\n .reg .b64 state;\n mbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(
                   smem_u32(bar))
               : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_u32(bar)), "r"(parity)
        : "memory");
  } while (!done);
}
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map,
                                            unsigned long long* bar, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(smem_u32(dst)),
      "l"(map), "r"(x), "r"(y), "r"(smem_u32(bar))
      : "memory");
}
__device__ __forceinline__ unsigned char* smem_align_1024(unsigned char* p) {
  const unsigned a = smem_u32(p);
  return p + ((1024 - (a & 1023)) & 1023);
}
// end of helper tma
// The block tile that the tile index `tile` names: tile rows are taken GROUP_M at a time and,
// within a group, tile indices run down a column of the group before moving to the next column,
// so that blocks running at the same time share rows of A and columns of B in the L2 cache.
__device__ __forceinline__ void tile_origin(int tile, int M, int N, int& row0, int& col0) {
  const int per_group = GROUP_M * TILES_N;
  const int first_m = (tile / per_group) * GROUP_M;
  const int rows = min(TILES_M - first_m, GROUP_M);
  const int in_group = tile % per_group;
  row0 = (first_m + in_group % rows) * BLOCK_TILE_M;
  col0 = (in_group / rows) * BLOCK_TILE_N;
}

// Persistent and warp-specialized: each block loops over the work units blockIdx.x,
// blockIdx.x + gridDim.x, ... of the grid; unit u is split u / tiles of tile u % tiles (all splits
// of one tile have the same tile number, so the units running at the same time share the tile
// scheduler's groups). Warpgroup 0 is the producer, whose thread 0 issues the TMA copies
// (128-byte swizzle) of every K tile of every unit of the block into a free stage; warpgroups
// 1 .. WG_M are the consumers, each computing 64 x BLOCK_TILE_N outputs of the unit with warpgroup
// MMAs from shared memory, accumulating in FP32 registers, then storing them (to C when the shape
// has one split, else to the unit's split of `partial`) while the producer already fills the
// stages with the next unit. Stages and barrier phases run on across units.
__global__ void __launch_bounds__(THREADS_PER_BLOCK, 1)
    matmul(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
           float* C, float* partial, int M, int N, int K, int splits) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_align_1024(smem_raw);
  unsigned long long* full =
      reinterpret_cast<unsigned long long*>(smem + NUM_STAGES * STAGE_BYTES);
  unsigned long long* empty = full + NUM_STAGES;
  const int tid = threadIdx.x;
  const int wg = tid / 128;
  const int tiles = TILES_M * TILES_N;
  const int units = tiles * splits;
  if (tid == 0) {
    for (int s = 0; s < NUM_STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], WG_M);
    }
    mbar_fence_init();
  }
  __syncthreads();
  if (wg == 0) {
    // Producer: the it-th K tile of the block (counted across its units) goes into stage
    // it % NUM_STAGES once the consumers have released the tile that was there.
    regs_release<PRODUCER_REGS>();
    if (tid == 0) {
      int it = 0;
      for (int u = blockIdx.x; u < units; u += gridDim.x) {
        const int tile = u % tiles, split = u / tiles;
        int row0, col0;
        tile_origin(tile, M, N, row0, col0);
        for (int t = SPLIT_T0(split); t < SPLIT_T1(split); ++t, ++it) {
          const int s = it % NUM_STAGES;
          if (it >= NUM_STAGES) mbar_wait(&empty[s], ((it / NUM_STAGES) - 1) & 1);
          unsigned char* a_stage = smem + s * STAGE_BYTES;
          unsigned char* b_stage = a_stage + A_STAGE_BYTES;
          mbar_expect_tx(&full[s], STAGE_BYTES);
          tma_load_2d(a_stage, &a_map, &full[s], t * WG_TILE_K, row0);
#pragma unroll
          for (int c = 0; c < BLOCK_TILE_N / 64; ++c)
            tma_load_2d(b_stage + c * B_CHUNK_BYTES, &b_map, &full[s], col0 + c * 64,
                        t * WG_TILE_K);
        }
      }
    }
  } else {
    // Consumer warpgroup cw computes rows 64 * cw .. 64 * cw + 63 of each unit's tile.
    regs_claim<CONSUMER_REGS>();
    const int cw = wg - 1;
    const int lane = tid % 32, warp = (tid % 128) / 32;
    int it = 0;
    for (int u = blockIdx.x; u < units; u += gridDim.x) {
      const int tile = u % tiles, split = u / tiles;
      int row0, col0;
      tile_origin(tile, M, N, row0, col0);
      float acc[BLOCK_TILE_N / 2];
#pragma unroll
      for (int i = 0; i < BLOCK_TILE_N / 2; ++i) acc[i] = 0.0f;
      for (int t = SPLIT_T0(split); t < SPLIT_T1(split); ++t, ++it) {
        const int s = it % NUM_STAGES;
        mbar_wait(&full[s], (it / NUM_STAGES) & 1);  // the K tile has landed in stage s
        const unsigned char* a_tile = smem + s * STAGE_BYTES + cw * 64 * 128;
        const unsigned char* b_tile = smem + s * STAGE_BYTES + A_STAGE_BYTES;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < WG_TILE_K / 16; ++kk)
          wgmma_m64k16<BLOCK_TILE_N, __half>(acc, wgmma_desc(a_tile + kk * 32, 16, 1024),
                                             wgmma_desc(b_tile + kk * 2048, B_CHUNK_BYTES, 1024));
        wgmma_commit();
        wgmma_wait<0>(acc);
        if (tid % 128 == 0) mbar_arrive(&empty[s]);  // this warpgroup is done with stage s
      }
      // Thread t of a warpgroup holds rows 16 * warp + lane / 4 (+ 8) and columns
      // 8j + 2 * (lane % 4) (+ 1) of its 64 x BLOCK_TILE_N result; only elements inside C are
      // stored (N is even), to C with one split and to the split's partial tile otherwise.
      const int row = row0 + cw * 64 + warp * 16 + lane / 4;
#pragma unroll
      for (int j = 0; j < BLOCK_TILE_N / 8; ++j) {
        const int col = col0 + 8 * j + 2 * (lane % 4);
        if (col < N) {
          if (splits == 1) {
            if (row < M)
              *reinterpret_cast<float2*>(&C_AT(row, col)) = make_float2(acc[4 * j], acc[4 * j + 1]);
            if (row + 8 < M)
              *reinterpret_cast<float2*>(&C_AT(row + 8, col)) =
                  make_float2(acc[4 * j + 2], acc[4 * j + 3]);
          } else {
            if (row < M)
              *reinterpret_cast<float2*>(&PARTIAL_AT(split, row, col)) =
                  make_float2(acc[4 * j], acc[4 * j + 1]);
            if (row + 8 < M)
              *reinterpret_cast<float2*>(&PARTIAL_AT(split, row + 8, col)) =
                  make_float2(acc[4 * j + 2], acc[4 * j + 3]);
          }
        }
      }
    }
  }
}

// The sum of the splits: one thread per element of C adds its partial values in split order
// (0, 1, ..., splits - 1), so the result does not depend on the order in which units ran.
__global__ void reduce_splits(const float* partial, float* C, int M, int N, int splits) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t count = static_cast<size_t>(M) * N;
  if (i >= count) return;
  float sum = partial[i];
  for (int s = 1; s < splits; ++s) sum += partial[static_cast<size_t>(s) * count + i];
  C[i] = sum;
}
// peak:end device

// peak:begin host
tensor_map a_map
  array = A
  dims = (K, M)
  box = (WG_TILE_K, BLOCK_TILE_M)
  swizzle = 128
tensor_map b_map
  array = B
  dims = (N, K)
  box = (64, WG_TILE_K)
  swizzle = 128
tiles = ceil_div(M, BLOCK_TILE_M) * ceil_div(N, BLOCK_TILE_N)
k_tiles = ceil_div(K, WG_TILE_K)
splits = max(1, min(SPLIT_K_MAX, min(compute_units / tiles, k_tiles / MIN_SPLIT_K_TILES)))
scratch partial
  dtype = f32
  count = splits > 1 ? splits * M * N : 1
launch matmul
  grid = (min(tiles * splits, compute_units))
  block = (THREADS_PER_BLOCK)
  shared = SMEM_BYTES
  args = (a_map, b_map, C, partial, M, N, K, splits)
launch reduce_splits
  grid = (ceil_div(M * N, 256))
  block = (256)
  args = (partial, C, M, N, splits)
  when = splits > 1
// peak:end host
