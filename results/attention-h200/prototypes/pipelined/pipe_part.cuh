// ---- pipelined variant: cp.async K and V tiles, V_j loading under S_j, K_{j+1} under P V_j ----
__device__ __forceinline__ void tp_cp16(void* dst, const void* src) {
  unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void tp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void tp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
template <int HD, int ROWS>
__device__ __forceinline__ void tp_load_rows(__half* dst, const __half* src, int r0, int nrows,
                                             int tid) {
  constexpr int LD = HD + TC_PAD, CHUNKS = HD / 8;
  for (int c = tid; c < ROWS * CHUNKS; c += TC_THREADS) {
    const int r = c / CHUNKS, col = (c % CHUNKS) * 8;
    __half* d = dst + r * LD + col;
    if (r0 + r < nrows)
      tp_cp16(d, src + (size_t)(r0 + r) * HD + col);
    else
      *reinterpret_cast<uint4*>(d) = make_uint4(0u, 0u, 0u, 0u);
  }
}

template <int HD>
__device__ __forceinline__ void attention_tp_block(const __half* __restrict__ Q,
                                                   const __half* __restrict__ K,
                                                   const __half* __restrict__ V,
                                                   __half* __restrict__ O, int SQ, int SKV,
                                                   int CAUSAL) {
  constexpr int LD = HD + TC_PAD;
  constexpr int NT_S = BLOCK_KV / 8;
  constexpr int NT_O = HD / 8;
  extern __shared__ __align__(16) unsigned char tc_smem[];
  __half* sQ = reinterpret_cast<__half*>(tc_smem);
  __half* sK = sQ + BLOCK_Q * LD;
  __half* sV = sK + BLOCK_KV * LD;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int q0 = blockIdx.x * BLOCK_Q;
  const size_t bh = blockIdx.y;
  const __half* Qb = Q + bh * (size_t)SQ * HD;
  const __half* Kb = K + bh * (size_t)SKV * HD;
  const __half* Vb = V + bh * (size_t)SKV * HD;
  __half* Ob = O + bh * (size_t)SQ * HD;
  const int last_row = min(q0 + BLOCK_Q, SQ) - 1;
  const int kv_end = CAUSAL ? max(0, min(SKV, last_row + SKV - SQ + 1)) : SKV;

  tp_load_rows<HD, BLOCK_Q>(sQ, Qb, q0, SQ, tid);
  if (kv_end > 0) tp_load_rows<HD, BLOCK_KV>(sK, Kb, 0, SKV, tid);
  tp_commit();
  tp_wait<0>();
  __syncthreads();
  unsigned qf[HD / 16][4];
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk)
    tc_ldmatrix_x4(qf[kk], sQ + (warp * 16 + lane % 16) * LD + kk * 16 + (lane / 16) * 8);

  const int row_a = q0 + warp * 16 + lane / 4, row_b = row_a + 8;
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;
  float o[NT_O][4];
#pragma unroll
  for (int n = 0; n < NT_O; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  const float scale_log2 = 1.4426950408889634f / sqrtf((float)HD);

  for (int k0 = 0; k0 < kv_end; k0 += BLOCK_KV) {
    __syncthreads();  // every warp is done with V's previous tile
    tp_load_rows<HD, BLOCK_KV>(sV, Vb, k0, SKV, tid);
    tp_commit();
    tp_wait<1>();  // this thread's copies of K's tile have landed
    __syncthreads();

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

    __syncthreads();  // every warp is done with K's tile: the next one may overwrite it
    if (k0 + BLOCK_KV < kv_end) tp_load_rows<HD, BLOCK_KV>(sK, Kb, k0 + BLOCK_KV, SKV, tid);
    tp_commit();

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

    tp_wait<1>();  // V's tile has landed (K's next one may still be in flight)
    __syncthreads();
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
  tp_wait<0>();

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
__global__ void __launch_bounds__(TC_THREADS)
    attention_tp_d64(const __half* Q, const __half* K, const __half* V, __half* O, int B, int H,
                     int SQ, int SKV, int D, int CAUSAL) {
  attention_tp_block<64>(Q, K, V, O, SQ, SKV, CAUSAL);
}
__global__ void __launch_bounds__(TC_THREADS)
    attention_tp_d128(const __half* Q, const __half* K, const __half* V, __half* O, int B, int H,
                      int SQ, int SKV, int D, int CAUSAL) {
  attention_tp_block<128>(Q, K, V, O, SQ, SKV, CAUSAL);
}
