// Prototype: Hopper (sm_90a) attention forward with warpgroup MMA (wgmma), FlashAttention-3 style,
// plus a host harness that checks it against the project's mma.sync kernel and a CPU reference.
//
// Q, K, V, O: fp16, [batch, heads, seq, head_dim] row-major.
// O[b,h,i,:] = sum_j P[i,j] V[b,h,j,:], P = softmax_j(Q_i . K_j / sqrt(D)); with CAUSAL = 1 the
// keys j > i + SKV - SQ are masked (bottom-right aligned); a row with no key outputs 0.
//
// Build: see build.sh. Tuning macros (defaults below): BLOCK_KV, NUM_STAGES, CONSUMER_WGS, OVERLAP.
// See NOTES.md for the design, the layouts and the descriptors.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

// ------------------------------------------------------------------------------------------------
// Tuning macros of the wgmma kernel.
// ------------------------------------------------------------------------------------------------
#ifndef BLOCK_KV
#define BLOCK_KV 128  // keys per K/V tile (64 or 128): the N of S = Q K^T
#endif
#ifndef NUM_STAGES
#define NUM_STAGES 2  // K/V ring-buffer stages in shared memory
#endif
#ifndef CONSUMER_WGS
#define CONSUMER_WGS 2  // consumer warpgroups (64 query rows each): 1 or 2
#endif
#ifndef OVERLAP
#define OVERLAP 1  // 1: issue S(t) and P(t-1) V(t-1) together, softmax(t) overlaps P V (FA3)
#endif
#ifndef WGMMA_WATCHDOG
#define WGMMA_WATCHDOG 1  // trap instead of hanging when an mbarrier wait exceeds ~4e9 cycles
#endif

// ------------------------------------------------------------------------------------------------
// Small PTX helpers: mbarrier, cp.async, proxy fence, named barrier.
// ------------------------------------------------------------------------------------------------
__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}
__device__ __forceinline__ void mbar_fence_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("{\n .reg .b64 state;\n mbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(bar)
               : "memory");
}
// Returns once the phase of `bar` with parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  unsigned done = 0;
#if WGMMA_WATCHDOG
  const long long start = clock64();
#endif
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
#if WGMMA_WATCHDOG
    if (!done && clock64() - start > 4000000000ll) __trap();
#endif
  } while (!done);
}
// 16-byte asynchronous copy global -> shared; src_bytes = 0 writes 16 zero bytes (zero fill).
__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src, unsigned src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}
// Arrives on `bar` once all prior cp.async of this thread have completed; .noinc: the arrival
// counts toward the barrier's expected arrivals (init count = number of such threads).
__device__ __forceinline__ void cp_async_mbar_arrive(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}
// Makes this thread's completed generic-proxy writes to shared memory (cp.async, st.shared)
// visible to later async-proxy reads (wgmma operands), once ordered by an mbarrier / bar.sync.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Barrier over `threads` threads with hardware barrier id `id` (0 is __syncthreads').
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Register reallocation between warpgroups (setmaxnreg, sm_90a): every thread of a warpgroup
// executes the same one; needs __launch_bounds__(THREADS, 1). With 3 warpgroups ptxas compiles
// for 168 registers per thread at entry; after regs_claim<232>() the consumer code may use 232
// (40 * 128 + 232 * 256 <= 65536).
template <int N>
__device__ __forceinline__ void regs_release() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void regs_claim() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
// ------------------------------------------------------------------------------------------------
// wgmma helpers (same descriptor construction as the project's recorded wgmma matmul kernels).
// ------------------------------------------------------------------------------------------------
// Shared-memory matrix descriptor, 128-byte swizzle (bits 62-63 = 1), base offset 0 (every
// swizzle atom starts on 1024 bytes): start address >> 4 in bits 0-13, LBO >> 4 in bits 16-29,
// SBO >> 4 in bits 32-45 (the same fields as the project's wgmma matmul helper wgmma_desc). The
// high word (SBO = 1024, swizzle) is a constant inside the asm wrappers; desc_lo() is the low word.
// A k-step's descriptor is desc_lo(tile) + (byte offset >> 4): the offsets stay inside the
// 14-bit address field because shared memory is < 256 KiB.
__device__ __forceinline__ unsigned desc_lo(unsigned addr, unsigned lbo) {
  return ((addr & 0x3FFFF) >> 4) | (((lbo & 0x3FFFF) >> 4) << 16);
}
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Keeps the compiler from moving accesses of these registers across a wgmma wait.
template <int R>
__device__ __forceinline__ void fence_regs(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int R, int C>
__device__ __forceinline__ void fence_regs(unsigned (&d)[R][C]) {
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int j = 0; j < C; ++j) asm volatile("" : "+r"(d[i][j])::"memory");
}
template <int PENDING, int R>
__device__ __forceinline__ void wgmma_wait(float (&d)[R]) {
  fence_regs(d);
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
  fence_regs(d);
}

// The four instruction forms used (generated; see wgmma_ops.inc):
//   wgmma_ss_n64 / wgmma_ss_n128: S (+)= Q K^T, both operands K-major in shared memory.
//   wgmma_rs_n64 / wgmma_rs_n128: O += P V, P from registers, V MN-major (tnspB = 1).
#include "wgmma_ops.inc"
template <int AOFF, int BOFF>
__device__ __forceinline__ void wgmma_ss_n96(float (&d)[48], unsigned a_lo, unsigned b_lo,
                                             int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\n.reg .b32 la, lb, hi;\n.reg .b64 da, db;\n"
      "setp.ne.b32 p, %50, 0;\n"
      "add.u32 la, %48, %51;\nadd.u32 lb, %49, %52;\nmov.b32 hi, 0x40000040;\n"
      "mov.b64 da, {la, hi};\nmov.b64 db, {lb, hi};\n"
      "wgmma.mma_async.sync.aligned.m64n96k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, "
      "da, db, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
      : "r"(a_lo), "r"(b_lo), "r"(scale_d), "n"(AOFF), "n"(BOFF));
}


template <int N, int AOFF, int BOFF>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], unsigned a_lo, unsigned b_lo,
                                         int scale_d) {
  static_assert(N == 64 || N == 96 || N == 128, "N is 64, 96 or 128");
  if constexpr (N == 96) wgmma_ss_n96<AOFF, BOFF>(d, a_lo, b_lo, scale_d);
  else if constexpr (N == 64) wgmma_ss_n64<AOFF, BOFF>(d, a_lo, b_lo, scale_d);
  else wgmma_ss_n128<AOFF, BOFF>(d, a_lo, b_lo, scale_d);
}
template <int N, int BOFF>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const unsigned (&a)[4],
                                         unsigned b_lo) {
  static_assert(N == 64 || N == 128, "N is 64 or 128");
  if constexpr (N == 64) wgmma_rs_n64<BOFF>(d, a, b_lo);
  else wgmma_rs_n128<BOFF>(d, a, b_lo);
}

// ------------------------------------------------------------------------------------------------
// Shared-memory layout.
//
// Every tile (Q, K, V) of R rows x HD halves is stored as HD / 64 "atoms"; atom a holds columns
// 64a .. 64a + 63 of all R rows as R rows of 128 bytes, with the 128-byte swizzle: the 16-byte
// chunk c (0..7) of row r sits at chunk position c ^ (r % 8). This is exactly what a TMA copy
// with CU_TENSOR_MAP_SWIZZLE_128B and a box of 64 columns writes, and what the project's wgmma
// matmul kernels describe with descriptors. Atoms are R * 128 bytes (a multiple of 1024) apart
// and every tile starts on 1024 bytes.
//
//   Q (A operand of S, K-major): k-step kk (16 d) starts at atom kk / 4, + 32 (kk % 4) bytes;
//     SBO = 1024 (8 rows of 128 bytes), LBO unused (16).
//   K (B operand of S, stored [key][d] = [n][k]: K-major, tnspB = 0): same as Q.
//   V (B operand of P V, stored [key][d] = [k][n]: MN-major, tnspB = 1): k-step kk (16 keys)
//     starts 2048 kk bytes into atom 0 (16 rows of 128 bytes); LBO = bytes of one atom (the
//     step to the next 64 columns of n), SBO = 1024 (the step to the next 8 keys).
// ------------------------------------------------------------------------------------------------
__device__ __forceinline__ unsigned swizzled_offset(int row, int chunk16, int rows) {
  return (unsigned)((chunk16 >> 3) * rows * 128 + row * 128 + (((chunk16 & 7) ^ (row & 7)) << 4));
}

template <int HD, int BKV, int NS, int NCW>
struct AttnCfg {
  static constexpr int ATOMS = HD / 64;
  static constexpr int BQ = 64 * NCW;                  // query rows per CTA
  static constexpr int THREADS = 128 * (NCW + 1);      // consumer warpgroups + 1 producer
  static constexpr int Q_WG_BYTES = ATOMS * 64 * 128;  // one consumer's 64 rows of Q
  static constexpr int TILE_BYTES = ATOMS * BKV * 128; // one K or V tile
  static constexpr int Q_OFF = 0;
  static constexpr int K_OFF = Q_OFF + NCW * Q_WG_BYTES;
  static constexpr int V_OFF = K_OFF + NS * TILE_BYTES;
  static constexpr int BAR_OFF = V_OFF + NS * TILE_BYTES;  // 4 NS mbarriers of 8 bytes
  static constexpr int SMEM_BYTES = 1024 + BAR_OFF + 4 * NS * 8;  // + 1024 to align the base
  static_assert(HD == 64 || HD == 128, "HD is 64 or 128");
  static_assert(BKV == 64 || BKV == 96 || BKV == 128, "BLOCK_KV is 64, 96 or 128");
  static_assert(NCW == 1 || NCW == 2, "CONSUMER_WGS is 1 or 2");
};

// Copies rows [row0, row0 + ROWS) of a [n_rows][HD] matrix into a swizzled tile of ROWS rows
// (rows past n_rows are zero-filled), 16 bytes per cp.async. Thread t of NTHREADS always takes
// the same 16-byte column chunk c = t % (HD / 8), in rows t / (HD / 8) + RSTEP k. The swizzle
// repeats every 8 rows, so the KPG offsets within an 8-row group are computed once and the loop
// walks groups (kept rolled-ish so that the producer does not hoist 64 addresses into registers).
template <int HD, int ROWS, int NTHREADS>
__device__ __forceinline__ void load_tile_async(unsigned dst, const __half* src, int row0,
                                                int n_rows, int t) {
  constexpr int CPR = HD / 8;  // 16-byte chunks per row
  static_assert(NTHREADS % CPR == 0, "a thread keeps one column chunk");
  constexpr int RSTEP = NTHREADS / CPR;              // rows between a thread's chunks
  constexpr int KPG = RSTEP >= 8 ? 1 : 8 / RSTEP;    // a thread's chunks per group
  constexpr int GROUP = KPG * RSTEP;                 // rows per group (a multiple of 8)
  static_assert(ROWS % GROUP == 0 && GROUP % 8 == 0, "whole groups");
  const int c = t % CPR, r0 = t / CPR;
  unsigned off[KPG];
#pragma unroll
  for (int i = 0; i < KPG; ++i) off[i] = swizzled_offset(r0 + i * RSTEP, c, ROWS);
  const __half* g = src + ((size_t)row0 + r0) * HD + c * 8;
#pragma unroll 2
  for (int k0 = 0; k0 < ROWS; k0 += GROUP) {
#pragma unroll
    for (int i = 0; i < KPG; ++i) {
      const int r = r0 + k0 + i * RSTEP;  // r % 8 == (r0 + i RSTEP) % 8
      const bool ok = row0 + r < n_rows;
      cp_async_16(dst + k0 * 128 + off[i], ok ? g + (size_t)(k0 + i * RSTEP) * HD : src,
                  ok ? 16u : 0u);
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Consumer pieces. Accumulator layout of m64nN (per warpgroup; PTX ISA "wgmma D fragments"):
// thread t (warp w = t / 32, lane l, g = l / 4, q = l % 4) holds for j = 0 .. N/8 - 1
//   d[4j + 0], d[4j + 1]: row 16w + g,     columns 8j + 2q, 8j + 2q + 1
//   d[4j + 2], d[4j + 3]: row 16w + g + 8, the same columns
// i.e. the m16n8 C-fragment repeated over N / 8. The register A fragment of m64nNk16 (f16) is the
// m16n8k16 A fragment per warp (rows 16w .. 16w + 15), so the S accumulators of keys
// 16kk .. 16kk + 15 (j = 2kk, 2kk + 1), packed in fp16 pairs, are P's A fragment for k-step kk.
// ------------------------------------------------------------------------------------------------

// S = Q K^T for this warpgroup's 64 rows and the BKV keys of a K tile: k-steps KK .. HD/16 - 1.
// Step kk reads 16 columns of d: atom kk / 4 of Q (64 rows) and of K (BKV rows), 32 (kk % 4)
// bytes into their 128-byte rows. LBO 16 (unused for swizzled K-major), SBO 1024.
template <int HD, int BKV, int KK = 0>
__device__ __forceinline__ void issue_qk(float (&s)[BKV / 2], unsigned q_tile, unsigned k_tile) {
  if constexpr (KK < HD / 16) {
    constexpr int AOFF = ((KK / 4) * 64 * 128 + (KK % 4) * 32) >> 4;
    constexpr int BOFF = ((KK / 4) * BKV * 128 + (KK % 4) * 32) >> 4;
    wgmma_ss<BKV, AOFF, BOFF>(s, desc_lo(q_tile, 16), desc_lo(k_tile, 16), KK > 0 ? 1 : 0);
    issue_qk<HD, BKV, KK + 1>(s, q_tile, k_tile);
  }
}

// O += P V: P (fp16 A fragments, BKV / 16 k-steps) times the BKV x HD V tile. Step kk reads keys
// 16kk .. 16kk + 15: 2048 kk bytes into the tile (16 rows of 128 bytes); LBO = one atom
// (BKV * 128 bytes, the step to the next 64 columns of n), SBO 1024 (the next 8 keys).
template <int HD, int BKV, int KK = 0>
__device__ __forceinline__ void issue_pv(float (&o)[HD / 2], const unsigned (&p)[BKV / 16][4],
                                         unsigned v_tile) {
  if constexpr (KK < BKV / 16) {
    constexpr int BOFF = KK * 2048 / 16;
    wgmma_rs<HD, BOFF>(o, p[KK], desc_lo(v_tile, BKV * 128));
    issue_pv<HD, BKV, KK + 1>(o, p, v_tile);
  }
}

__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<unsigned*>(&h);
}

// P's fp16 A fragments from the (exponentiated) S accumulators.
template <int BKV>
__device__ __forceinline__ void pack_p(unsigned (&p)[BKV / 16][4], const float (&s)[BKV / 2]) {
#pragma unroll
  for (int kk = 0; kk < BKV / 16; ++kk) {
    p[kk][0] = pack_half2(s[8 * kk + 0], s[8 * kk + 1]);  // row g,     keys 16kk + 2q ..
    p[kk][1] = pack_half2(s[8 * kk + 2], s[8 * kk + 3]);  // row g + 8, keys 16kk + 2q ..
    p[kk][2] = pack_half2(s[8 * kk + 4], s[8 * kk + 5]);  // row g,     keys 16kk + 8 + 2q ..
    p[kk][3] = pack_half2(s[8 * kk + 6], s[8 * kk + 7]);  // row g + 8, keys 16kk + 8 + 2q ..
  }
}

// Running softmax state of this thread's two rows (a = g, b = g + 8 of its warp's 16 rows):
// maxima in base-2 units of the scaled scores, this thread's part of the sums.
struct RowState {
  float m_a, m_b, l_a, l_b;
};

// Masks S (keys >= SKV, and past the causal diagonal when causal), updates the running maxima
// and sums, and turns S into exp2(s * scale_log2 - m) in place. Returns in c_a / c_b the factor
// for what was accumulated before (0 while a row had no key).
template <int BKV>
__device__ __forceinline__ void softmax_tile(float (&s)[BKV / 2], RowState& st, float& c_a,
                                             float& c_b, bool need_mask, int k0, int row_a,
                                             int SKV, int diag, int causal, int lane,
                                             float scale_log2) {
  if (need_mask) {
#pragma unroll
    for (int j = 0; j < BKV / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + 8 * j + 2 * (lane % 4) + (e & 1);
        const int row = e < 2 ? row_a : row_a + 8;
        const bool keep = key < SKV && (causal == 0 || key <= row + diag);
        if (!keep) s[4 * j + e] = -INFINITY;
      }
  }
  float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
  for (int j = 0; j < BKV / 8; ++j) {
    mx_a = fmaxf(mx_a, fmaxf(s[4 * j + 0], s[4 * j + 1]));
    mx_b = fmaxf(mx_b, fmaxf(s[4 * j + 2], s[4 * j + 3]));
  }
  // The quad (4 lanes) holds a row's BKV keys.
  mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 1));
  mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 2));
  mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 1));
  mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 2));
  // In base-2 units (scale_log2 > 0, so the max commutes with the scaling).
  const float mn_a = fmaxf(st.m_a, mx_a * scale_log2);
  const float mn_b = fmaxf(st.m_b, mx_b * scale_log2);
  // A row with no key so far keeps the reference 0: exp2 of -inf is 0, never NaN.
  const float ref_a = mn_a == -INFINITY ? 0.0f : mn_a;
  const float ref_b = mn_b == -INFINITY ? 0.0f : mn_b;
  c_a = exp2f(st.m_a - ref_a);
  c_b = exp2f(st.m_b - ref_b);
  st.m_a = mn_a;
  st.m_b = mn_b;
  float sum_a = 0.0f, sum_b = 0.0f;
#pragma unroll
  for (int j = 0; j < BKV / 8; ++j) {
    s[4 * j + 0] = exp2f(fmaf(s[4 * j + 0], scale_log2, -ref_a));
    s[4 * j + 1] = exp2f(fmaf(s[4 * j + 1], scale_log2, -ref_a));
    s[4 * j + 2] = exp2f(fmaf(s[4 * j + 2], scale_log2, -ref_b));
    s[4 * j + 3] = exp2f(fmaf(s[4 * j + 3], scale_log2, -ref_b));
    sum_a += s[4 * j + 0] + s[4 * j + 1];
    sum_b += s[4 * j + 2] + s[4 * j + 3];
  }
  st.l_a = st.l_a * c_a + sum_a;
  st.l_b = st.l_b * c_b + sum_b;
}

template <int HD>
__device__ __forceinline__ void rescale_o(float (&o)[HD / 2], float c_a, float c_b) {
#pragma unroll
  for (int j = 0; j < HD / 8; ++j) {
    o[4 * j + 0] *= c_a;
    o[4 * j + 1] *= c_a;
    o[4 * j + 2] *= c_b;
    o[4 * j + 3] *= c_b;
  }
}

// O = acc / l in fp16 (0 for a row that attended no key); rows past SQ are not written.
template <int HD>
__device__ __forceinline__ void store_o(__half* Ob, const float (&o)[HD / 2], RowState st,
                                        int row_a, int SQ, int lane) {
  float l_a = st.l_a, l_b = st.l_b;
  l_a += __shfl_xor_sync(0xffffffffu, l_a, 1);
  l_a += __shfl_xor_sync(0xffffffffu, l_a, 2);
  l_b += __shfl_xor_sync(0xffffffffu, l_b, 1);
  l_b += __shfl_xor_sync(0xffffffffu, l_b, 2);
  const float inv_a = l_a > 0.0f ? 1.0f / l_a : 0.0f;
  const float inv_b = l_b > 0.0f ? 1.0f / l_b : 0.0f;
  const int row_b = row_a + 8;
#pragma unroll
  for (int j = 0; j < HD / 8; ++j) {
    const int col = 8 * j + 2 * (lane % 4);
    if (row_a < SQ)
      *reinterpret_cast<__half2*>(Ob + (size_t)row_a * HD + col) =
          __floats2half2_rn(o[4 * j + 0] * inv_a, o[4 * j + 1] * inv_a);
    if (row_b < SQ)
      *reinterpret_cast<__half2*>(Ob + (size_t)row_b * HD + col) =
          __floats2half2_rn(o[4 * j + 2] * inv_b, o[4 * j + 3] * inv_b);
  }
}

// Barriers of the K/V ring: full_k[s] / full_v[s] (64 arrivals, one per producer thread of K or
// V, each triggered when that thread's cp.async of the tile have landed: the stage holds tile t), empty_k[s] / empty_v[s] (one arrival per consumer warpgroup: the stage may be
// refilled). Tile t uses stage t % NS; its n-th use (n = t / NS) waits for phase parity n & 1.
// Waits for a full stage, then orders its (generic-proxy, cp.async) contents before this
// thread's async-proxy reads (wgmma).
__device__ __forceinline__ void wait_full(unsigned bar, unsigned parity) {
  mbar_wait(bar, parity);
  fence_proxy_async();
}

struct Bars {
  unsigned base;
  int ns;
  __device__ unsigned full_k(int s) const { return base + 8 * s; }
  __device__ unsigned full_v(int s) const { return base + 8 * (ns + s); }
  __device__ unsigned empty_k(int s) const { return base + 8 * (2 * ns + s); }
  __device__ unsigned empty_v(int s) const { return base + 8 * (3 * ns + s); }
};

// Producer warpgroup: warps 0-1 stream the K tiles, warps 2-3 the V tiles, with cp.async into
// the swizzled layout. They never wait for their copies: cp.async.mbarrier.arrive.noinc makes
// each thread's arrival on full_k / full_v fire when that thread's copies have landed. They only
// wait for a stage to be released by the consumers.
template <int HD, int BKV, int NS>
__device__ __forceinline__ void producer(const __half* Kb, const __half* Vb, unsigned sK,
                                         unsigned sV, Bars bars, int n_tiles, int SKV, int ptid) {
  using C = AttnCfg<HD, BKV, NS, 1>;
  const bool is_v = ptid >= 64;
  const int t64 = ptid % 64;
  const __half* src = is_v ? Vb : Kb;
  const unsigned tiles = is_v ? sV : sK;
  for (int t = 0; t < n_tiles; ++t) {
    const int s = t % NS;
    // Stage s is free once the consumers released tile t - NS.
    if (t >= NS) mbar_wait(is_v ? bars.empty_v(s) : bars.empty_k(s), ((t / NS) - 1) & 1);
    load_tile_async<HD, BKV, 64>(tiles + s * C::TILE_BYTES, src, t * BKV, SKV, t64);
    cp_async_mbar_arrive(is_v ? bars.full_v(s) : bars.full_k(s));
  }
  // Do not leave with copies in flight.
  cp_async_commit();
  cp_async_wait_all();
}

// One consumer warpgroup: 64 query rows [row0, row0 + 64).
template <int HD, int BKV, int NS, int NCW, bool OVL>
__device__ __forceinline__ void consumer(const __half* Qb, __half* Ob, unsigned sQw, unsigned sK,
                                         unsigned sV, Bars bars, int n_tiles, int row0, int cw,
                                         int SQ, int SKV, int causal) {
  using C = AttnCfg<HD, BKV, NS, NCW>;
  const int ctid = threadIdx.x % 128;
  const int warp = ctid / 32, lane = ctid % 32;
  const bool leader = ctid == 0;  // arrives on the empty barriers for the warpgroup

  // This warpgroup's 64 rows of Q (zero past SQ), visible to wgmma after the named barrier.
  load_tile_async<HD, 64, 128>(sQw, Qb, row0, SQ, ctid);
  cp_async_commit();
  cp_async_wait_all();
  fence_proxy_async();
  named_barrier(1 + cw, 128);

  const int row_a = row0 + 16 * warp + lane / 4;
  const int diag = SKV - SQ;  // key j is attended by row i when j <= i + diag
  const float scale_log2 = 1.4426950408889634f / sqrtf((float)HD);
  // Tiles whose keys may be masked for some row of this warpgroup: past SKV, or (causal) past
  // the diagonal of the warpgroup's first row.
  auto need_mask = [&](int k0) {
    return k0 + BKV > SKV || (causal != 0 && k0 + BKV - 1 > row0 + diag);
  };

  RowState st{-INFINITY, -INFINITY, 0.0f, 0.0f};
  float o[HD / 2];
#pragma unroll
  for (int i = 0; i < HD / 2; ++i) o[i] = 0.0f;
  float s[BKV / 2];
  unsigned p[BKV / 16][4];
  float c_a, c_b;

  if constexpr (!OVL) {
    // Simple order: S(t); softmax(t); O += P(t) V(t).
    for (int t = 0; t < n_tiles; ++t) {
      const int stg = t % NS;
      const unsigned ph = (t / NS) & 1;
      wait_full(bars.full_k(stg), ph);
      wgmma_fence();
      issue_qk<HD, BKV>(s, sQw, sK + stg * C::TILE_BYTES);
      wgmma_commit();
      wgmma_wait<0>(s);
      if (leader) mbar_arrive(bars.empty_k(stg));
      softmax_tile<BKV>(s, st, c_a, c_b, need_mask(t * BKV), t * BKV, row_a, SKV, diag, causal,
                        lane, scale_log2);
      rescale_o<HD>(o, c_a, c_b);
      pack_p<BKV>(p, s);
      wait_full(bars.full_v(stg), ph);
      wgmma_fence();
      issue_pv<HD, BKV>(o, p, sV + stg * C::TILE_BYTES);
      wgmma_commit();
      wgmma_wait<0>(o);
      fence_regs(p);
      if (leader) mbar_arrive(bars.empty_v(stg));
    }
  } else if (n_tiles > 0) {
    // FA3 intra-warpgroup overlap: S(t) and P(t-1) V(t-1) are issued together; softmax(t) runs
    // while P(t-1) V(t-1) is in flight; O is rescaled once P(t-1) V(t-1) has landed.
    wait_full(bars.full_k(0), 0);
    wgmma_fence();
    issue_qk<HD, BKV>(s, sQw, sK);
    wgmma_commit();
    wgmma_wait<0>(s);
    if (leader) mbar_arrive(bars.empty_k(0));
    softmax_tile<BKV>(s, st, c_a, c_b, need_mask(0), 0, row_a, SKV, diag, causal, lane,
                      scale_log2);
    pack_p<BKV>(p, s);
    for (int t = 1; t < n_tiles; ++t) {
      const int stg = t % NS, prv = (t - 1) % NS;
      wait_full(bars.full_k(stg), (t / NS) & 1);
      wgmma_fence();
      issue_qk<HD, BKV>(s, sQw, sK + stg * C::TILE_BYTES);
      wgmma_commit();
      wait_full(bars.full_v(prv), ((t - 1) / NS) & 1);
      issue_pv<HD, BKV>(o, p, sV + prv * C::TILE_BYTES);
      wgmma_commit();
      wgmma_wait<1>(s);  // S(t) done; P(t-1) V(t-1) may still run
      if (leader) mbar_arrive(bars.empty_k(stg));
      softmax_tile<BKV>(s, st, c_a, c_b, need_mask(t * BKV), t * BKV, row_a, SKV, diag, causal,
                        lane, scale_log2);
      wgmma_wait<0>(o);
      fence_regs(p);
      if (leader) mbar_arrive(bars.empty_v(prv));
      rescale_o<HD>(o, c_a, c_b);
      pack_p<BKV>(p, s);
    }
    const int last = (n_tiles - 1) % NS;
    wait_full(bars.full_v(last), ((n_tiles - 1) / NS) & 1);
    wgmma_fence();
    issue_pv<HD, BKV>(o, p, sV + last * C::TILE_BYTES);
    wgmma_commit();
    wgmma_wait<0>(o);
    fence_regs(p);
    if (leader) mbar_arrive(bars.empty_v(last));
  }
  store_o<HD>(Ob, o, st, row_a, SQ, lane);
}

// The whole CTA: grid (ceil_div(SQ, 64 NCW), B * H), 128 (NCW + 1) threads, C::SMEM_BYTES of
// dynamic shared memory.
template <int HD, int BKV, int NS, int NCW, bool OVL>
__device__ __forceinline__ void attention_wgmma_block(const __half* Q, const __half* K,
                                                      const __half* V, __half* O, int SQ,
                                                      int SKV, int causal) {
  using C = AttnCfg<HD, BKV, NS, NCW>;
  extern __shared__ __align__(1024) unsigned char wg_smem[];
  const unsigned base = (smem_u32(wg_smem) + 1023u) & ~1023u;
  const unsigned sQ = base + C::Q_OFF, sK = base + C::K_OFF, sV = base + C::V_OFF;
  const Bars bars{base + C::BAR_OFF, NS};

  // Causal: the heaviest query blocks (largest rows) first.
  const int qb = causal ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
  const int q0 = qb * C::BQ;
  const size_t bh = blockIdx.y;
  const __half* Qb = Q + bh * (size_t)SQ * HD;
  const __half* Kb = K + bh * (size_t)SKV * HD;
  const __half* Vb = V + bh * (size_t)SKV * HD;
  __half* Ob = O + bh * (size_t)SQ * HD;

  // Keys the CTA reads: all, or (causal) up to the last one its last row attends.
  const int last_row = min(q0 + C::BQ, SQ) - 1;
  const int kv_end = causal ? max(0, min(SKV, last_row + SKV - SQ + 1)) : SKV;
  const int n_tiles = (kv_end + BKV - 1) / BKV;

  if (threadIdx.x == 0) {
    for (int s = 0; s < NS; ++s) {
      mbar_init(bars.full_k(s), 64);
      mbar_init(bars.full_v(s), 64);
      mbar_init(bars.empty_k(s), NCW);
      mbar_init(bars.empty_v(s), NCW);
    }
    mbar_fence_init();
  }
  __syncthreads();

  // Warpgroups 0 .. NCW - 1: the consumers; warpgroup NCW: the producer.
  // Warp-uniform (the shuffle tells the compiler so).
  const int wg = __shfl_sync(0xffffffffu, (int)threadIdx.x / 128, 0);
  if (wg == NCW) {
    if constexpr (NCW == 2) regs_release<40>();
    producer<HD, BKV, NS>(Kb, Vb, sK, sV, bars, n_tiles, SKV, threadIdx.x % 128);
  } else {
    if constexpr (NCW == 2) regs_claim<232>();
    const int cw = wg;
    consumer<HD, BKV, NS, NCW, OVL>(Qb, Ob, sQ + cw * C::Q_WG_BYTES, sK, sV, bars, n_tiles,
                                    q0 + 64 * cw, cw, SQ, SKV, causal);
  }
}

#define WG_THREADS (128 * (CONSUMER_WGS + 1))

// The kernels with the project's parameters, configured by the tuning macros.
__global__ void __launch_bounds__(WG_THREADS, 1)
    attention_wgmma_d64(const __half* Q, const __half* K, const __half* V, __half* O, int B,
                        int H, int SQ, int SKV, int D, int CAUSAL) {
  attention_wgmma_block<64, BLOCK_KV, NUM_STAGES, CONSUMER_WGS, OVERLAP != 0>(Q, K, V, O, SQ, SKV,
                                                                             CAUSAL);
}
__global__ void __launch_bounds__(WG_THREADS, 1)
    attention_wgmma_d128(const __half* Q, const __half* K, const __half* V, __half* O, int B,
                         int H, int SQ, int SKV, int D, int CAUSAL) {
  attention_wgmma_block<128, BLOCK_KV, NUM_STAGES, CONSUMER_WGS, OVERLAP != 0>(Q, K, V, O, SQ,
                                                                              SKV, CAUSAL);
}
// The non-overlapped variant with the same macros, for a correctness cross-check.
__global__ void __launch_bounds__(WG_THREADS, 1)
    attention_wgmma_simple_d64(const __half* Q, const __half* K, const __half* V, __half* O,
                               int B, int H, int SQ, int SKV, int D, int CAUSAL) {
  attention_wgmma_block<64, BLOCK_KV, NUM_STAGES, CONSUMER_WGS, false>(Q, K, V, O, SQ, SKV,
                                                                       CAUSAL);
}
__global__ void __launch_bounds__(WG_THREADS, 1)
    attention_wgmma_simple_d128(const __half* Q, const __half* K, const __half* V, __half* O,
                                int B, int H, int SQ, int SKV, int D, int CAUSAL) {
  attention_wgmma_block<128, BLOCK_KV, NUM_STAGES, CONSUMER_WGS, false>(Q, K, V, O, SQ, SKV,
                                                                        CAUSAL);
}

// Launch plan of the wgmma kernels (what the project's "peak:begin host" block would say).
template <int HD>
static size_t wgmma_smem_bytes() {
  return AttnCfg<HD, BLOCK_KV, NUM_STAGES, CONSUMER_WGS>::SMEM_BYTES;
}
static dim3 wgmma_grid(int B, int H, int SQ) {
  const int bq = 64 * CONSUMER_WGS;
  return dim3((SQ + bq - 1) / bq, B * H);
}

// ------------------------------------------------------------------------------------------------
// Reference: the project's mma.sync kernel (copied from the current best kernel.cu), with
// NUM_WARPS = 4 and BLOCK_KV = 128, its macros renamed REF_* so they do not clash.
// ------------------------------------------------------------------------------------------------
#define REF_NUM_WARPS 4
#define REF_BLOCK_KV 128
#define REF_BLOCK_Q (16 * REF_NUM_WARPS)
#define REF_TC_THREADS (32 * REF_NUM_WARPS)
#define REF_TC_PAD 8
// Tensor-core attention (FlashAttention-2 style) for the regular class: a block of REF_NUM_WARPS warps
// takes REF_BLOCK_Q = 16 * REF_NUM_WARPS query rows of one (batch, head), each warp 16 of them. Q's tile
// is loaded once into shared memory and kept in registers as MMA A fragments; K and V stream
// through shared memory REF_BLOCK_KV keys at a time. S = Q K^T and O += P V run on the tensor cores
// (mma.sync m16n8k16, fp16 inputs, fp32 accumulators); the online softmax works on the
// accumulator fragments, and P, rounded to fp16, is the A fragment of P V as it stands.

// Four 8 x 8 matrices of 16-bit elements from shared memory: lanes 8m .. 8m + 7 give the row
// addresses of matrix m (16-byte aligned), r[m] receives it (lane l: row l / 4, elements
// 2 (l % 4) and 2 (l % 4) + 1, the lower one in the low half).
__device__ __forceinline__ void tc_ldmatrix_x4(unsigned (&r)[4], const __half* p) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a)
               : "memory");
}

// The same, each matrix transposed (lane l: elements (2 (l % 4), l / 4) and (2 (l % 4) + 1, l / 4)
// of the stored matrix).
__device__ __forceinline__ void tc_ldmatrix_x4_trans(unsigned (&r)[4], const __half* p) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a)
               : "memory");
}

// c (16 x 8, fp32) += a (16 x 16, fp16, row) * b (16 x 8, fp16, col) for the warp.
__device__ __forceinline__ void tc_mma(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                       unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats as one register of two fp16 values (lo in the low half), rounded to nearest.
__device__ __forceinline__ unsigned tc_pack_half2(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<unsigned*>(&h);
}

// Fragment layouts of m16n8k16 for lane l, g = l / 4, t = l % 4:
//   A (16 x 16): a[0] = (g, 2t..2t+1), a[1] = (g + 8, 2t..), a[2] = (g, 2t + 8..), a[3] = (g + 8, 2t + 8..)
//   B (16 x 8):  b0 = (k 2t..2t+1, n g), b1 = (k 2t + 8..2t + 9, n g)
//   C (16 x 8):  c[0], c[1] = (g, 2t..2t+1), c[2], c[3] = (g + 8, 2t..2t+1)
// so the C fragments of two adjacent 8-key tiles of S are, packed in pairs, the A fragment of the
// 16 keys for P V.
template <int HD>
__device__ __forceinline__ void ref_attention_tc_block(const __half* __restrict__ Q,
                                                   const __half* __restrict__ K,
                                                   const __half* __restrict__ V,
                                                   __half* __restrict__ O, int SQ, int SKV,
                                                   int CAUSAL) {
  constexpr int LD = HD + REF_TC_PAD;  // halves per shared row
  constexpr int CHUNKS = HD / 8;   // 16-byte chunks per row
  constexpr int NT_S = REF_BLOCK_KV / 8;  // 8-key tiles of S per warp
  constexpr int NT_O = HD / 8;        // 8-column tiles of O per warp
  extern __shared__ __align__(16) unsigned char tc_smem[];
  __half* sQ = reinterpret_cast<__half*>(tc_smem);  // REF_BLOCK_Q rows
  __half* sK = sQ + REF_BLOCK_Q * LD;                   // REF_BLOCK_KV rows
  __half* sV = sK + REF_BLOCK_KV * LD;                  // REF_BLOCK_KV rows

  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int q0 = blockIdx.x * REF_BLOCK_Q;
  const size_t bh = blockIdx.y;
  const __half* Qb = Q + bh * (size_t)SQ * HD;
  const __half* Kb = K + bh * (size_t)SKV * HD;
  const __half* Vb = V + bh * (size_t)SKV * HD;
  __half* Ob = O + bh * (size_t)SQ * HD;

  // Q's tile, rows past SQ zero-filled, then this warp's 16 rows as A fragments (HD / 16 of them).
  for (int c = tid; c < REF_BLOCK_Q * CHUNKS; c += REF_TC_THREADS) {
    const int r = c / CHUNKS, col = (c % CHUNKS) * 8;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (q0 + r < SQ) v = *reinterpret_cast<const uint4*>(Qb + (size_t)(q0 + r) * HD + col);
    *reinterpret_cast<uint4*>(sQ + r * LD + col) = v;
  }
  __syncthreads();
  unsigned qf[HD / 16][4];
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk)
    tc_ldmatrix_x4(qf[kk], sQ + (warp * 16 + lane % 16) * LD + kk * 16 + (lane / 16) * 8);

  // This thread's two rows (g and g + 8 of the warp's 16) and their running statistics: the
  // maximum m of the scores (in base-2 units), this thread's part l of the sum of exponentials,
  // and O's accumulators.
  const int row_a = q0 + warp * 16 + lane / 4, row_b = row_a + 8;
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;
  float o[NT_O][4];
#pragma unroll
  for (int n = 0; n < NT_O; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  // Scores in base 2: exp(s / sqrt(D)) = exp2(s * log2(e) / sqrt(D)).
  const float scale_log2 = 1.4426950408889634f / sqrtf((float)HD);

  // The keys the block reads: all of them, or with CAUSAL those up to the last one its last row
  // attends (key j is attended by row i when j <= i + SKV - SQ).
  const int last_row = min(q0 + REF_BLOCK_Q, SQ) - 1;
  const int kv_end = CAUSAL ? max(0, min(SKV, last_row + SKV - SQ + 1)) : SKV;
  for (int k0 = 0; k0 < kv_end; k0 += REF_BLOCK_KV) {
    __syncthreads();  // every warp is done with the previous tiles (and Q's)
    for (int c = tid; c < REF_BLOCK_KV * CHUNKS; c += REF_TC_THREADS) {
      const int r = c / CHUNKS, col = (c % CHUNKS) * 8;
      uint4 kv = make_uint4(0u, 0u, 0u, 0u), vv = make_uint4(0u, 0u, 0u, 0u);
      if (k0 + r < SKV) {
        kv = *reinterpret_cast<const uint4*>(Kb + (size_t)(k0 + r) * HD + col);
        vv = *reinterpret_cast<const uint4*>(Vb + (size_t)(k0 + r) * HD + col);
      }
      *reinterpret_cast<uint4*>(sK + r * LD + col) = kv;
      *reinterpret_cast<uint4*>(sV + r * LD + col) = vv;
    }
    __syncthreads();

    // S = Q K^T for the warp's 16 rows and the REF_BLOCK_KV keys: K's rows are B's columns.
    float s[NT_S][4];
#pragma unroll
    for (int n = 0; n < NT_S; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
#pragma unroll
      for (int np = 0; np < NT_S / 2; ++np) {
        unsigned b[4];
        tc_ldmatrix_x4(b, sK + (np * 16 + lane % 8 + (lane / 16) * 8) * LD + kk * 16 +
                              ((lane / 8) % 2) * 8);
        tc_mma(s[2 * np], qf[kk], b[0], b[1]);
        tc_mma(s[2 * np + 1], qf[kk], b[2], b[3]);
      }
    }

    // Scale, mask (keys past SKV, and past the causal diagonal), and the tile's row maxima
    // across the four threads of a quad.
    float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
    for (int n = 0; n < NT_S; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + n * 8 + (lane % 4) * 2 + (e & 1);
        const int row = e < 2 ? row_a : row_b;
        const bool keep = key < SKV && (CAUSAL == 0 || key <= row + SKV - SQ);
        s[n][e] = keep ? s[n][e] * scale_log2 : -INFINITY;
      }
      mx_a = fmaxf(mx_a, fmaxf(s[n][0], s[n][1]));
      mx_b = fmaxf(mx_b, fmaxf(s[n][2], s[n][3]));
    }
    mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 1));
    mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 2));
    mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 1));
    mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 2));

    // Online softmax: the new maximum, the factor for what was accumulated (0 while the row had
    // no key), the exponentials. A row with no key so far keeps the reference 0, so exp2 of its
    // masked scores is 0, never NaN.
    const float mn_a = fmaxf(m_a, mx_a), mn_b = fmaxf(m_b, mx_b);
    const float ref_a = mn_a == -INFINITY ? 0.0f : mn_a;
    const float ref_b = mn_b == -INFINITY ? 0.0f : mn_b;
    const float c_a = exp2f(m_a - ref_a), c_b = exp2f(m_b - ref_b);
    m_a = mn_a;
    m_b = mn_b;
    l_a *= c_a;
    l_b *= c_b;
#pragma unroll
    for (int n = 0; n < NT_O; ++n) {
      o[n][0] *= c_a;
      o[n][1] *= c_a;
      o[n][2] *= c_b;
      o[n][3] *= c_b;
    }
#pragma unroll
    for (int n = 0; n < NT_S; ++n) {
      s[n][0] = exp2f(s[n][0] - ref_a);
      s[n][1] = exp2f(s[n][1] - ref_a);
      s[n][2] = exp2f(s[n][2] - ref_b);
      s[n][3] = exp2f(s[n][3] - ref_b);
      l_a += s[n][0] + s[n][1];
      l_b += s[n][2] + s[n][3];
    }

    // O += P V: P's fragments of keys 16 kk .. 16 kk + 15 in fp16 are the A operand; V's rows
    // are B's rows (k), so ldmatrix transposes them.
#pragma unroll
    for (int kk = 0; kk < REF_BLOCK_KV / 16; ++kk) {
      unsigned pa[4];
      pa[0] = tc_pack_half2(s[2 * kk][0], s[2 * kk][1]);
      pa[1] = tc_pack_half2(s[2 * kk][2], s[2 * kk][3]);
      pa[2] = tc_pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pa[3] = tc_pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int np = 0; np < NT_O / 2; ++np) {
        unsigned b[4];
        tc_ldmatrix_x4_trans(b, sV + (kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * LD +
                                    np * 16 + (lane / 16) * 8);
        tc_mma(o[2 * np], pa, b[0], b[1]);
        tc_mma(o[2 * np + 1], pa, b[2], b[3]);
      }
    }
  }

  // The rows' sums across the quad, then O = acc / l rounded to fp16 once (0 for a row that
  // attended no key); rows past SQ are not written.
  l_a += __shfl_xor_sync(0xffffffffu, l_a, 1);
  l_a += __shfl_xor_sync(0xffffffffu, l_a, 2);
  l_b += __shfl_xor_sync(0xffffffffu, l_b, 1);
  l_b += __shfl_xor_sync(0xffffffffu, l_b, 2);
  const float inv_a = l_a > 0.0f ? 1.0f / l_a : 0.0f;
  const float inv_b = l_b > 0.0f ? 1.0f / l_b : 0.0f;
#pragma unroll
  for (int n = 0; n < NT_O; ++n) {
    const int col = n * 8 + (lane % 4) * 2;
    if (row_a < SQ)
      *reinterpret_cast<__half2*>(Ob + (size_t)row_a * HD + col) =
          __floats2half2_rn(o[n][0] * inv_a, o[n][1] * inv_a);
    if (row_b < SQ)
      *reinterpret_cast<__half2*>(Ob + (size_t)row_b * HD + col) =
          __floats2half2_rn(o[n][2] * inv_b, o[n][3] * inv_b);
  }
}

// One kernel per head_dim (the launch plan picks it): the grid is (ceil_div(SQ, REF_BLOCK_Q), B * H),
// REF_BLOCK_Q rows of one (batch, head) per block, REF_TC_THREADS threads, the tiles in dynamic shared
// memory.
__global__ void __launch_bounds__(REF_TC_THREADS)
    ref_attention_tc_d64(const __half* Q, const __half* K, const __half* V, __half* O, int B, int H,
                     int SQ, int SKV, int D, int CAUSAL) {
  ref_attention_tc_block<64>(Q, K, V, O, SQ, SKV, CAUSAL);
}

__global__ void __launch_bounds__(REF_TC_THREADS)
    ref_attention_tc_d128(const __half* Q, const __half* K, const __half* V, __half* O, int B, int H,
                      int SQ, int SKV, int D, int CAUSAL) {
  ref_attention_tc_block<128>(Q, K, V, O, SQ, SKV, CAUSAL);
}

// ------------------------------------------------------------------------------------------------
// Host harness.
// ------------------------------------------------------------------------------------------------
#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      printf("FATAL CUDA error %s at %s:%d: %s\n", #x, __FILE__, __LINE__,                 \
             cudaGetErrorString(e_));                                                      \
      fflush(stdout);                                                                      \
      exit(2);                                                                             \
    }                                                                                      \
  } while (0)

typedef void (*AttnKernel)(const __half*, const __half*, const __half*, __half*, int, int, int,
                           int, int, int);

struct Shape {
  int B, H, SQ, SKV, D, CAUSAL;
};

struct Launch {
  const char* name;
  AttnKernel kernel;
  dim3 grid, block;
  size_t smem;
};

// Fixed-seed LCG, uniform(-1, 1) rounded to fp16.
static void fill_uniform(std::vector<__half>& v, uint64_t seed) {
  uint64_t st = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& x : v) {
    st = st * 6364136223846793005ull + 1442695040888963407ull;
    const float u = (float)((st >> 40) & 0xFFFFFF) / 16777216.0f;
    x = __float2half(2.0f * u - 1.0f);
  }
}

static Launch ref_launch(const Shape& s) {
  Launch l;
  l.name = s.D == 64 ? "ref_tc_d64(mma.sync)" : "ref_tc_d128(mma.sync)";
  l.kernel = s.D == 64 ? ref_attention_tc_d64 : ref_attention_tc_d128;
  l.grid = dim3((s.SQ + REF_BLOCK_Q - 1) / REF_BLOCK_Q, s.B * s.H);
  l.block = dim3(REF_TC_THREADS);
  l.smem = (size_t)2 * (REF_BLOCK_Q + 2 * REF_BLOCK_KV) * (s.D + REF_TC_PAD);
  return l;
}

static Launch wgmma_launch(const Shape& s, bool simple) {
  Launch l;
  if (s.D == 64) {
    l.name = simple ? "wgmma_simple_d64" : "wgmma_d64";
    l.kernel = simple ? attention_wgmma_simple_d64 : attention_wgmma_d64;
    l.smem = wgmma_smem_bytes<64>();
  } else {
    l.name = simple ? "wgmma_simple_d128" : "wgmma_d128";
    l.kernel = simple ? attention_wgmma_simple_d128 : attention_wgmma_d128;
    l.smem = wgmma_smem_bytes<128>();
  }
  l.grid = wgmma_grid(s.B, s.H, s.SQ);
  l.block = dim3(WG_THREADS);
  return l;
}

static void launch(const Launch& l, const Shape& s, const __half* Q, const __half* K,
                   const __half* V, __half* O) {
  l.kernel<<<l.grid, l.block, l.smem>>>(Q, K, V, O, s.B, s.H, s.SQ, s.SKV, s.D, s.CAUSAL);
}

// Runs once and checks for launch / execution errors (a trap or fault is fatal for the context).
static bool run_checked(const Launch& l, const Shape& s, const __half* Q, const __half* K,
                        const __half* V, __half* O) {
  launch(l, s, Q, K, V, O);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    printf("FATAL %s: kernel error: %s (a trap here may be the mbarrier watchdog: a hang)\n",
           l.name, cudaGetErrorString(e));
    fflush(stdout);
    return false;
  }
  return true;
}

// 3 warm-ups, then 20 launches each timed with events; the median in ms.
static float time_median_ms(const Launch& l, const Shape& s, const __half* Q, const __half* K,
                            const __half* V, __half* O) {
  for (int i = 0; i < 3; ++i) launch(l, s, Q, K, V, O);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    CK(cudaEventRecord(a));
    launch(l, s, Q, K, V, O);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float t = 0.0f;
    CK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  CK(cudaGetLastError());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return 0.5f * (ms[9] + ms[10]);
}

// Counts |out - ref| > 2e-2 + 2e-2 |ref| (NaN counts as bad) and the maximum |diff|.
static void compare(const std::vector<__half>& out, const std::vector<__half>& ref, double& maxd,
                    size_t& bad) {
  maxd = 0.0;
  bad = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double r = __half2float(ref[i]), o = __half2float(out[i]);
    const double d = std::fabs(o - r);
    if (!(d <= 2e-2 + 2e-2 * std::fabs(r))) ++bad;
    if (!(d <= maxd)) maxd = std::isnan(d) ? INFINITY : d;
  }
}

// float64 CPU reference of row i of head bh, compared with out; updates maxd / bad.
static void cpu_check_row(const Shape& s, const std::vector<__half>& Q,
                          const std::vector<__half>& K, const std::vector<__half>& V,
                          const std::vector<__half>& out, size_t bh, int i, double& maxd,
                          size_t& bad) {
  const int D = s.D;
  const int keys = s.CAUSAL ? std::min(s.SKV, i + s.SKV - s.SQ + 1) : s.SKV;
  std::vector<double> sc(std::max(keys, 0)), acc(D, 0.0);
  double mx = -INFINITY;
  for (int j = 0; j < keys; ++j) {
    double dot = 0.0;
    for (int e = 0; e < D; ++e)
      dot += (double)__half2float(Q[(bh * s.SQ + i) * D + e]) *
             (double)__half2float(K[(bh * s.SKV + j) * D + e]);
    sc[j] = dot / std::sqrt((double)D);
    mx = std::max(mx, sc[j]);
  }
  double l = 0.0;
  for (int j = 0; j < keys; ++j) {
    const double p = std::exp(sc[j] - mx);
    l += p;
    for (int e = 0; e < D; ++e) acc[e] += p * (double)__half2float(V[(bh * s.SKV + j) * D + e]);
  }
  for (int e = 0; e < D; ++e) {
    const double r = keys > 0 ? acc[e] / l : 0.0;
    const double o = __half2float(out[(bh * s.SQ + i) * D + e]);
    const double d = std::fabs(o - r);
    if (!(d <= 2e-2 + 2e-2 * std::fabs(r))) ++bad;
    if (!(d <= maxd)) maxd = std::isnan(d) ? INFINITY : d;
  }
}

// CPU check of every row for small problems, else of a few rows (first / last heads, first, middle
// and last rows).
static void cpu_check(const Shape& s, const std::vector<__half>& Q, const std::vector<__half>& K,
                     const std::vector<__half>& V, const std::vector<__half>& out, double& maxd,
                     size_t& bad, size_t& rows_checked) {
  maxd = 0.0;
  bad = 0;
  rows_checked = 0;
  const size_t BH = (size_t)s.B * s.H;
  const bool all = (double)BH * s.SQ * s.SKV * s.D <= 2e8;
  if (all) {
    for (size_t bh = 0; bh < BH; ++bh)
      for (int i = 0; i < s.SQ; ++i, ++rows_checked) cpu_check_row(s, Q, K, V, out, bh, i, maxd, bad);
    return;
  }
  const size_t heads[2] = {0, BH - 1};
  const int rows[5] = {0, 1, s.SQ / 2, s.SQ - 2, s.SQ - 1};
  for (size_t bh : heads)
    for (int i : rows) {
      cpu_check_row(s, Q, K, V, out, bh, i, maxd, bad);
      ++rows_checked;
    }
}

static void print_kernel_attrs(const char* name, AttnKernel k) {
  cudaFuncAttributes a;
  CK(cudaFuncGetAttributes(&a, k));
  printf("kernel %-24s regs=%d local(spill/stack)=%zuB static_smem=%zuB max_threads=%d\n", name,
         a.numRegs, (size_t)a.localSizeBytes, (size_t)a.sharedSizeBytes, a.maxThreadsPerBlock);
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device: %s, sm_%d%d, %d SMs, smem optin %zu B\n", prop.name, prop.major, prop.minor,
         prop.multiProcessorCount, (size_t)prop.sharedMemPerBlockOptin);
  printf("config: BLOCK_KV=%d NUM_STAGES=%d CONSUMER_WGS=%d OVERLAP=%d threads=%d smem d64=%zu "
         "d128=%zu\n",
         BLOCK_KV, NUM_STAGES, CONSUMER_WGS, OVERLAP, WG_THREADS, wgmma_smem_bytes<64>(),
         wgmma_smem_bytes<128>());
  const AttnKernel all_k[6] = {attention_wgmma_d64,        attention_wgmma_d128,
                               attention_wgmma_simple_d64, attention_wgmma_simple_d128,
                               ref_attention_tc_d64,       ref_attention_tc_d128};
  const char* all_n[6] = {"wgmma_d64",        "wgmma_d128",  "wgmma_simple_d64",
                          "wgmma_simple_d128", "ref_tc_d64", "ref_tc_d128"};
  const size_t all_smem[6] = {wgmma_smem_bytes<64>(), wgmma_smem_bytes<128>(),
                              wgmma_smem_bytes<64>(), wgmma_smem_bytes<128>(),
                              (size_t)2 * (REF_BLOCK_Q + 2 * REF_BLOCK_KV) * (64 + REF_TC_PAD),
                              (size_t)2 * (REF_BLOCK_Q + 2 * REF_BLOCK_KV) * (128 + REF_TC_PAD)};
  for (int i = 0; i < 6; ++i) {
    CK(cudaFuncSetAttribute(all_k[i], cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)all_smem[i]));
    print_kernel_attrs(all_n[i], all_k[i]);
  }

  // Small odd shapes first (correctness), then the benchmark shapes.
  const Shape shapes[] = {
      {1, 2, 77, 77, 128, 0},     {1, 2, 77, 77, 128, 1},      {1, 1, 100, 300, 128, 1},
      {2, 3, 130, 257, 128, 0},   {2, 3, 130, 257, 64, 0},     {1, 2, 77, 77, 64, 1},
      {1, 1, 300, 100, 128, 1},   {2, 2, 64, 64, 64, 0},       {1, 4, 256, 256, 64, 1},
      {1, 16, 8192, 8192, 128, 0}, {4, 16, 2048, 2048, 128, 1}, {16, 16, 512, 512, 128, 0},
      {2, 32, 4096, 4096, 64, 1},
  };
  bool failed = false;
  for (const Shape& s : shapes) {
    const size_t nq = (size_t)s.B * s.H * s.SQ * s.D, nk = (size_t)s.B * s.H * s.SKV * s.D;
    std::vector<__half> hQ(nq), hK(nk), hV(nk), hRef(nq), hOut(nq);
    fill_uniform(hQ, 1);
    fill_uniform(hK, 2);
    fill_uniform(hV, 3);
    __half *dQ, *dK, *dV, *dO;
    CK(cudaMalloc(&dQ, nq * 2));
    CK(cudaMalloc(&dK, nk * 2));
    CK(cudaMalloc(&dV, nk * 2));
    CK(cudaMalloc(&dO, nq * 2));
    CK(cudaMemcpy(dQ, hQ.data(), nq * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dK, hK.data(), nk * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dV, hV.data(), nk * 2, cudaMemcpyHostToDevice));
    const double flops = (s.CAUSAL ? 2.0 : 4.0) * s.B * s.H * (double)s.SQ * s.SKV * s.D;
    char tag[96];
    snprintf(tag, sizeof tag, "B=%d H=%d SQ=%d SKV=%d D=%d CAUSAL=%d", s.B, s.H, s.SQ, s.SKV, s.D,
             s.CAUSAL);

    const Launch runs[3] = {ref_launch(s), wgmma_launch(s, false), wgmma_launch(s, true)};
    for (int r = 0; r < 3; ++r) {
      const Launch& l = runs[r];
      CK(cudaMemset(dO, 0xFF, nq * 2));  // NaN pattern: unwritten outputs are caught
      if (!run_checked(l, s, dQ, dK, dV, dO)) {
        printf("[%s] %-22s FAILED (kernel error)\n", tag, l.name);
        return 3;
      }
      std::vector<__half>& dst = r == 0 ? hRef : hOut;
      CK(cudaMemcpy(dst.data(), dO, nq * 2, cudaMemcpyDeviceToHost));
      double md_ref = 0.0, md_cpu = 0.0;
      size_t bad_ref = 0, bad_cpu = 0, rows_cpu = 0;
      if (r > 0) compare(hOut, hRef, md_ref, bad_ref);
      cpu_check(s, hQ, hK, hV, dst, md_cpu, bad_cpu, rows_cpu);
      const float ms = time_median_ms(l, s, dQ, dK, dV, dO);
      const bool ok = bad_ref == 0 && bad_cpu == 0;
      if (!ok) failed = true;
      printf("[%s] %-22s %9.4f ms %7.1f TFLOP/s | vs_ref maxdiff=%.3e bad=%zu | vs_cpu(%zu rows) "
             "maxdiff=%.3e bad=%zu | %s\n",
             tag, l.name, ms, flops / (ms * 1e-3) / 1e12, md_ref, bad_ref, rows_cpu, md_cpu,
             bad_cpu, ok ? "OK" : "MISMATCH");
      fflush(stdout);
    }
    CK(cudaFree(dQ));
    CK(cudaFree(dK));
    CK(cudaFree(dV));
    CK(cudaFree(dO));
  }
  printf(failed ? "RESULT: MISMATCH\n" : "RESULT: ALL OK\n");
  return failed ? 1 : 0;
}
