// Candidate rewrites of the small-M kernel, compiled after the recorded one (extract.py) for the
// decode bench. Not peak's code: they try what a transformation of the small-M kernel could ask
// for before one is written.

#ifndef SMALL_M_UNROLL
#define SMALL_M_UNROLL 1
#endif

// The body of both candidates. kRowsTogether: V2's loads of A (every row's quad before the
// multiplications) in place of V1's (each row's inside its own multiplications).
template <bool kRowsTogether>
__device__ __forceinline__ void small_m_body(const float* A, const float* B, float* C,
                                             float* small_partial, int M, int N, int K) {
  __shared__ __align__(16) float red[SMALL_M_ROWS * SMALL_M_COLS];
  const int lane = (int)threadIdx.x;
  const int warp = (int)threadIdx.y;
  const int split = (int)blockIdx.y;
  const int col = (int)blockIdx.x * SMALL_M_COLS + lane * 4;
  const int k0 = SMALL_K0(split);
  const int k1 = SMALL_K1(split);
  const bool b_vec = N % 4 == 0 && col < N;
  float acc[SMALL_M_ROWS][4];
#pragma unroll
  for (int r = 0; r < SMALL_M_ROWS; ++r)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[r][j] = 0.0f;
  constexpr int STEP = 4 * SMALL_M_WARPS;
  for (int k = k0 + 4 * warp; k < k1; k += STEP * SMALL_M_UNROLL) {
    float4 b[SMALL_M_UNROLL][4];
#pragma unroll
    for (int u = 0; u < SMALL_M_UNROLL; ++u)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int kq = k + u * STEP + q;
        if (kq < k1 && b_vec) {
          b[u][q] = __ldg(&B_VEC_AT(kq, col));
        } else {
          b[u][q] = make_float4((kq < k1 && col < N) ? __ldg(&B_AT(kq, col)) : 0.0f,
                                (kq < k1 && col + 1 < N) ? __ldg(&B_AT(kq, col + 1)) : 0.0f,
                                (kq < k1 && col + 2 < N) ? __ldg(&B_AT(kq, col + 2)) : 0.0f,
                                (kq < k1 && col + 3 < N) ? __ldg(&B_AT(kq, col + 3)) : 0.0f);
        }
      }
#pragma unroll
    for (int u = 0; u < SMALL_M_UNROLL; ++u) {
      const int ku = k + u * STEP;
      const bool a_vec = K % 4 == 0 && ku + 4 <= k1;
      if constexpr (kRowsTogether) {
        // Every row's A quad first (rows at or past M read row M - 1: a valid address, unused),
        // so that the loads are in flight together; then the multiplications.
        float4 a[SMALL_M_ROWS];
#pragma unroll
        for (int r = 0; r < SMALL_M_ROWS; ++r) {
          const int rr = r < M ? r : M - 1;
          if (a_vec) {
            a[r] = __ldg(&A_VEC_AT(rr, ku));
          } else {
            a[r] = make_float4(ku < k1 ? __ldg(&A_AT(rr, ku)) : 0.0f,
                               ku + 1 < k1 ? __ldg(&A_AT(rr, ku + 1)) : 0.0f,
                               ku + 2 < k1 ? __ldg(&A_AT(rr, ku + 2)) : 0.0f,
                               ku + 3 < k1 ? __ldg(&A_AT(rr, ku + 3)) : 0.0f);
          }
        }
#pragma unroll
        for (int r = 0; r < SMALL_M_ROWS; ++r) {
          if (r < M) {
            acc[r][0] +=
                a[r].x * b[u][0].x + a[r].y * b[u][1].x + a[r].z * b[u][2].x + a[r].w * b[u][3].x;
            acc[r][1] +=
                a[r].x * b[u][0].y + a[r].y * b[u][1].y + a[r].z * b[u][2].y + a[r].w * b[u][3].y;
            acc[r][2] +=
                a[r].x * b[u][0].z + a[r].y * b[u][1].z + a[r].z * b[u][2].z + a[r].w * b[u][3].z;
            acc[r][3] +=
                a[r].x * b[u][0].w + a[r].y * b[u][1].w + a[r].z * b[u][2].w + a[r].w * b[u][3].w;
          }
        }
      } else {
#pragma unroll
        for (int r = 0; r < SMALL_M_ROWS; ++r) {
          if (r < M) {
            float4 a;
            if (a_vec) {
              a = __ldg(&A_VEC_AT(r, ku));
            } else {
              a = make_float4(ku < k1 ? __ldg(&A_AT(r, ku)) : 0.0f,
                              ku + 1 < k1 ? __ldg(&A_AT(r, ku + 1)) : 0.0f,
                              ku + 2 < k1 ? __ldg(&A_AT(r, ku + 2)) : 0.0f,
                              ku + 3 < k1 ? __ldg(&A_AT(r, ku + 3)) : 0.0f);
            }
            acc[r][0] += a.x * b[u][0].x + a.y * b[u][1].x + a.z * b[u][2].x + a.w * b[u][3].x;
            acc[r][1] += a.x * b[u][0].y + a.y * b[u][1].y + a.z * b[u][2].y + a.w * b[u][3].y;
            acc[r][2] += a.x * b[u][0].z + a.y * b[u][1].z + a.z * b[u][2].z + a.w * b[u][3].z;
            acc[r][3] += a.x * b[u][0].w + a.y * b[u][1].w + a.z * b[u][2].w + a.w * b[u][3].w;
          }
        }
      }
    }
  }
  for (int w = 0; w < SMALL_M_WARPS; ++w) {
    if (warp == w) {
#pragma unroll
      for (int r = 0; r < SMALL_M_ROWS; ++r) {
        float4* p = reinterpret_cast<float4*>(&red[r * SMALL_M_COLS + lane * 4]);
        float4 v = w == 0 ? make_float4(0.0f, 0.0f, 0.0f, 0.0f) : *p;
        *p = make_float4(v.x + acc[r][0], v.y + acc[r][1], v.z + acc[r][2], v.w + acc[r][3]);
      }
    }
    __syncthreads();
  }
  for (int q = warp * 32 + lane; q < SMALL_M_ROWS * (SMALL_M_COLS / 4); q += SMALL_M_THREADS) {
    const int r = q / (SMALL_M_COLS / 4);
    const int c = (int)blockIdx.x * SMALL_M_COLS + (q % (SMALL_M_COLS / 4)) * 4;
    if (r >= M || c >= N) continue;
    const float4 v = *reinterpret_cast<const float4*>(&red[r * SMALL_M_COLS + (c % SMALL_M_COLS)]);
    if (SMALL_M_SPLITS == 1) {
      if (N % 4 == 0) {
        C_VEC(r, c) = v;
      } else {
        C_AT(r, c) = v.x;
        if (c + 1 < N) C_AT(r, c + 1) = v.y;
        if (c + 2 < N) C_AT(r, c + 2) = v.z;
        if (c + 3 < N) C_AT(r, c + 3) = v.w;
      }
    } else {
      SMALL_PARTIAL_AT(split, r, c) = v.x;
      if (c + 1 < N) SMALL_PARTIAL_AT(split, r, c + 1) = v.y;
      if (c + 2 < N) SMALL_PARTIAL_AT(split, r, c + 2) = v.z;
      if (c + 3 < N) SMALL_PARTIAL_AT(split, r, c + 3) = v.w;
    }
  }
}

// V1: each warp reads SMALL_M_UNROLL quads of rows of B (SMALL_M_UNROLL * 4 16-byte loads per
// lane) before it multiplies any, so that many loads are in flight per warp.
extern "C" __global__ void __launch_bounds__(SMALL_M_THREADS)
    small_m_unroll(const float* A, const float* B, float* C, float* small_partial, int M, int N,
                   int K) {
  small_m_body<false>(A, B, C, small_partial, M, N, K);
}

// V2: as V1, with the A quads of all rows loaded together before the multiplications.
extern "C" __global__ void __launch_bounds__(SMALL_M_THREADS)
    small_m_rows(const float* A, const float* B, float* C, float* small_partial, int M, int N,
                 int K) {
  small_m_body<true>(A, B, C, small_partial, M, N, K);
}
