
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
__device__ __forceinline__ void attention_tc_block(const __half* __restrict__ Q,
                                                   const __half* __restrict__ K,
                                                   const __half* __restrict__ V,
                                                   __half* __restrict__ O, int SQ, int SKV,
                                                   int CAUSAL) {
  constexpr int LD = HD + TC_PAD;  // halves per shared row
  constexpr int CHUNKS = HD / 8;   // 16-byte chunks per row
  constexpr int NT_S = BLOCK_KV / 8;  // 8-key tiles of S per warp
  constexpr int NT_O = HD / 8;        // 8-column tiles of O per warp
  extern __shared__ __align__(16) unsigned char tc_smem[];
  __half* sQ = reinterpret_cast<__half*>(tc_smem);  // BLOCK_Q rows
  __half* sK = sQ + BLOCK_Q * LD;                   // BLOCK_KV rows
  __half* sV = sK + BLOCK_KV * LD;                  // BLOCK_KV rows

  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int q0 = blockIdx.x * BLOCK_Q;
  const size_t bh = blockIdx.y;
  const __half* Qb = Q + bh * (size_t)SQ * HD;
  const __half* Kb = K + bh * (size_t)SKV * HD;
  const __half* Vb = V + bh * (size_t)SKV * HD;
  __half* Ob = O + bh * (size_t)SQ * HD;

  // Q's tile, rows past SQ zero-filled, then this warp's 16 rows as A fragments (HD / 16 of them).
  for (int c = tid; c < BLOCK_Q * CHUNKS; c += TC_THREADS) {
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
  const int last_row = min(q0 + BLOCK_Q, SQ) - 1;
  const int kv_end = CAUSAL ? max(0, min(SKV, last_row + SKV - SQ + 1)) : SKV;
  for (int k0 = 0; k0 < kv_end; k0 += BLOCK_KV) {
    __syncthreads();  // every warp is done with the previous tiles (and Q's)
    for (int c = tid; c < BLOCK_KV * CHUNKS; c += TC_THREADS) {
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

    // S = Q K^T for the warp's 16 rows and the BLOCK_KV keys: K's rows are B's columns.
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
    for (int kk = 0; kk < BLOCK_KV / 16; ++kk) {
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

// One kernel per head_dim (the launch plan picks it): the grid is (ceil_div(SQ, BLOCK_Q), B * H),
// BLOCK_Q rows of one (batch, head) per block, TC_THREADS threads, the tiles in dynamic shared
// memory.
__global__ void __launch_bounds__(TC_THREADS)
    attention_tc_d64(const __half* Q, const __half* K, const __half* V, __half* O, int B, int H,
                     int SQ, int SKV, int D, int CAUSAL) {
  attention_tc_block<64>(Q, K, V, O, SQ, SKV, CAUSAL);
}

__global__ void __launch_bounds__(TC_THREADS)
    attention_tc_d128(const __half* Q, const __half* K, const __half* V, __half* O, int B, int H,
                      int SQ, int SKV, int D, int CAUSAL) {
  attention_tc_block<128>(Q, K, V, O, SQ, SKV, CAUSAL);
}
