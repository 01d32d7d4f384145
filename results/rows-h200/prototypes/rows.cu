// Standalone prototype of the softmax (fp32) row kernels: the paths of the cluster-rows
// checkpoint (cluster-v3, checkpoint 12) that the long rows and the rows of 128 take, against
// variants, each timed against a 16-byte vector copy of the same bytes in the same process.
// Not part of peak. Protocol: before every timed launch a 256 MiB buffer is written (the L2 is
// flushed) and the next of several input copies (together past the L2) is used; CUDA events
// around each launch; the median of 15 launches after 2 warm-ups. Every variant's Y is checked
// against a float64 softmax of sampled rows.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#define CHECK(x)                                                               \
  do {                                                                         \
    cudaError_t e = (x);                                                       \
    if (e != cudaSuccess) {                                                    \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

namespace cg = cooperative_groups;
constexpr int VEC = 4;

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ void combine(float& m, float& s, float m2, float s2) {
  if (s2 == 0.0f) return;
  if (s == 0.0f) { m = m2; s = s2; return; }
  const float M = fmaxf(m, m2);
  s = s * expf(m - M) + s2 * expf(m2 - M);
  m = M;
}
__device__ __forceinline__ void online_update(float& m, float& s, float x) {
  if (x > m) { s = s * expf(m - x) + 1.0f; m = x; } else { s += expf(x - m); }
}
template <int BLOCK>
__device__ __forceinline__ void block_max_sum(float& m, float& s, float* rm, float* rs) {
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
    combine(m, s, m2, s2);
  }
  if ((threadIdx.x & 31) == 0) { rm[threadIdx.x >> 5] = m; rs[threadIdx.x >> 5] = s; }
  __syncthreads();
  m = -INFINITY; s = 0.0f;
#pragma unroll
  for (int w = 0; w < BLOCK / 32; ++w) combine(m, s, rm[w], rs[w]);
  __syncthreads();
}

// The checkpoint's looping path (aligned rows only here: N % 4 == 0 in the shapes this times, or
// the scalar fallback for others): persistent blocks take rows from a counter, the row read twice,
// one float4 per thread per iteration and an online update per element.
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) loop_v1(const float* X, float* Y, int* counter, int R, int N) {
  __shared__ float rm[BLOCK / 32], rs[BLOCK / 32];
  __shared__ int unit;
  for (;;) {
    if (threadIdx.x == 0) unit = atomicAdd(counter, 1);
    __syncthreads();
    const int row = unit;
    if (row >= R) break;
    const float* x = X + (size_t)row * N;
    float* y = Y + (size_t)row * N;
    const int nb = N / VEC;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    float m = -INFINITY, s = 0.0f;
    for (int v = threadIdx.x; v < nb; v += BLOCK) {
      const float4 a = x4[v];
      online_update(m, s, a.x); online_update(m, s, a.y);
      online_update(m, s, a.z); online_update(m, s, a.w);
    }
    block_max_sum<BLOCK>(m, s, rm, rs);
    const float inv = 1.0f / s;
    for (int v = threadIdx.x; v < nb; v += BLOCK) {
      const float4 a = x4[v];
      y4[v] = make_float4(expf(a.x - m) * inv, expf(a.y - m) * inv, expf(a.z - m) * inv,
                          expf(a.w - m) * inv);
    }
    __syncthreads();
  }
}

// Variant: U float4 per thread loaded before any arithmetic (U loads in flight per thread), the
// chunk's maximum first and one rescale of the running sum per chunk (one expf per element),
// the second pass unrolled the same way. Rows handed out by blockIdx (a row per block at a time,
// grid = min(R, resident)) so that the rows in flight, read a second time, are still in the L2.
template <int BLOCK, int U>
__global__ void __launch_bounds__(BLOCK) loop_v2(const float* X, float* Y, int* counter, int R, int N) {
  __shared__ float rm[BLOCK / 32], rs[BLOCK / 32];
  __shared__ int unit;
  for (;;) {
    if (threadIdx.x == 0) unit = atomicAdd(counter, 1);
    __syncthreads();
    const int row = unit;
    if (row >= R) break;
    const float4* x4 = reinterpret_cast<const float4*>(X + (size_t)row * N);
    float4* y4 = reinterpret_cast<float4*>(Y + (size_t)row * N);
    const int nb = N / VEC;
    float m = -INFINITY, s = 0.0f;
    for (int v0 = threadIdx.x; v0 < nb; v0 += BLOCK * U) {
      float4 a[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int v = v0 + u * BLOCK;
        a[u] = v < nb ? x4[v] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
      }
      float cm = -INFINITY;
#pragma unroll
      for (int u = 0; u < U; ++u) cm = fmaxf(cm, fmaxf(fmaxf(a[u].x, a[u].y), fmaxf(a[u].z, a[u].w)));
      if (cm == -INFINITY) continue;
      const float M = fmaxf(m, cm);
      float cs = 0.0f;
#pragma unroll
      for (int u = 0; u < U; ++u)
        cs += expf(a[u].x - M) + expf(a[u].y - M) + expf(a[u].z - M) + expf(a[u].w - M);
      s = (s == 0.0f ? 0.0f : s * expf(m - M)) + cs;
      m = M;
    }
    block_max_sum<BLOCK>(m, s, rm, rs);
    const float inv = 1.0f / s;
    for (int v0 = threadIdx.x; v0 < nb; v0 += BLOCK * U) {
      float4 a[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int v = v0 + u * BLOCK;
        if (v < nb) a[u] = x4[v];
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int v = v0 + u * BLOCK;
        if (v < nb)
          y4[v] = make_float4(expf(a[u].x - m) * inv, expf(a[u].y - m) * inv,
                              expf(a[u].z - m) * inv, expf(a[u].w - m) * inv);
      }
    }
    __syncthreads();
  }
}

// The checkpoint's short-row kernel (aligned rows, SHORT_VECS vectors per lane): a warp per row,
// persistent blocks taking groups of SHORT_THREADS / 32 rows from a counter.
template <int THREADS, int SV>
__global__ void short_v1(const float* X, float* Y, int* counter, int R, int N) {
  __shared__ int unit;
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  const int units = (R + THREADS / 32 - 1) / (THREADS / 32);
  for (;;) {
    if (threadIdx.x == 0) unit = atomicAdd(counter, 1);
    __syncthreads();
    const int group = unit;
    if (group >= units) break;
    const int row = group * (THREADS / 32) + w;
    if (row < R) {
      const float4* x4 = reinterpret_cast<const float4*>(X + (size_t)row * N);
      float4* y4 = reinterpret_cast<float4*>(Y + (size_t)row * N);
      const int nb = N / VEC;
      float4 v[SV];
      float m = -INFINITY;
#pragma unroll
      for (int i = 0; i < SV; ++i)
        if (l + i * 32 < nb) {
          v[i] = x4[l + i * 32];
          m = fmaxf(m, fmaxf(fmaxf(v[i].x, v[i].y), fmaxf(v[i].z, v[i].w)));
        }
      m = warp_max(m);
      float s = 0.0f;
#pragma unroll
      for (int i = 0; i < SV; ++i)
        if (l + i * 32 < nb) {
          v[i] = make_float4(expf(v[i].x - m), expf(v[i].y - m), expf(v[i].z - m), expf(v[i].w - m));
          s += v[i].x + v[i].y + v[i].z + v[i].w;
        }
      s = warp_sum(s);
      const float inv = 1.0f / s;
#pragma unroll
      for (int i = 0; i < SV; ++i)
        if (l + i * 32 < nb)
          y4[l + i * 32] = make_float4(v[i].x * inv, v[i].y * inv, v[i].z * inv, v[i].w * inv);
    }
    __syncthreads();
  }
}

// Variant: LPR lanes per row (a power of two, at most 32), 32 / LPR rows per warp, RPW groups of
// them per warp loaded before any reduction (32 / LPR * RPW rows in flight per warp), a plain grid
// (no counter): warp g of the grid takes rows g * RW .. g * RW + RW - 1, RW = 32 / LPR * RPW.
template <int LPR, int SV, int RPW>
__global__ void short_v2(const float* X, float* Y, int R, int N) {
  constexpr int GROUPS = 32 / LPR;
  const int l = threadIdx.x & 31;
  const int sub = l / LPR, lane = l % LPR;
  const long warp = ((long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const long base = warp * (GROUPS * RPW);
  const int nb = N / VEC;
  float4 v[RPW][SV];
  float m[RPW];
#pragma unroll
  for (int j = 0; j < RPW; ++j) {
    const long row = base + j * GROUPS + sub;
    m[j] = -INFINITY;
    if (row < R) {
      const float4* x4 = reinterpret_cast<const float4*>(X + (size_t)row * N);
#pragma unroll
      for (int i = 0; i < SV; ++i)
        if (lane + i * LPR < nb) v[j][i] = x4[lane + i * LPR];
    }
  }
#pragma unroll
  for (int j = 0; j < RPW; ++j) {
    const long row = base + j * GROUPS + sub;
    if (row < R) {
#pragma unroll
      for (int i = 0; i < SV; ++i)
        if (lane + i * LPR < nb)
          m[j] = fmaxf(m[j], fmaxf(fmaxf(v[j][i].x, v[j][i].y), fmaxf(v[j][i].z, v[j][i].w)));
    }
    for (int o = LPR / 2; o > 0; o >>= 1) m[j] = fmaxf(m[j], __shfl_xor_sync(0xffffffffu, m[j], o));
  }
#pragma unroll
  for (int j = 0; j < RPW; ++j) {
    const long row = base + j * GROUPS + sub;
    float s = 0.0f;
    if (row < R) {
#pragma unroll
      for (int i = 0; i < SV; ++i)
        if (lane + i * LPR < nb) {
          v[j][i] = make_float4(expf(v[j][i].x - m[j]), expf(v[j][i].y - m[j]),
                                expf(v[j][i].z - m[j]), expf(v[j][i].w - m[j]));
          s += v[j][i].x + v[j][i].y + v[j][i].z + v[j][i].w;
        }
    }
    for (int o = LPR / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (row < R) {
      const float inv = 1.0f / s;
      float4* y4 = reinterpret_cast<float4*>(Y + (size_t)row * N);
#pragma unroll
      for (int i = 0; i < SV; ++i)
        if (lane + i * LPR < nb)
          y4[lane + i * LPR] =
              make_float4(v[j][i].x * inv, v[j][i].y * inv, v[j][i].z * inv, v[j][i].w * inv);
    }
  }
}


// The checkpoint's register path (aligned rows): persistent blocks taking rows from a counter
// (PERSIST 1) or a plain grid of one block per row (PERSIST 0); the row in ITEMS float4 per thread.
template <int BLOCK, int ITEMS, int PERSIST>
__global__ void __launch_bounds__(BLOCK) reg_rows(const float* X, float* Y, int* counter, int R, int N) {
  __shared__ float red[BLOCK / 32];
  __shared__ int unit;
  for (int it = 0;; ++it) {
    int row;
    if (PERSIST) {
      if (threadIdx.x == 0) unit = atomicAdd(counter, 1);
      __syncthreads();
      row = unit;
      if (row >= R) break;
    } else {
      if (it > 0) break;
      row = blockIdx.x;
    }
    const float4* x4 = reinterpret_cast<const float4*>(X + (size_t)row * N);
    float4* y4 = reinterpret_cast<float4*>(Y + (size_t)row * N);
    const int nb = N / VEC, t = threadIdx.x;
    float4 v[ITEMS];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
      if (t + i * BLOCK < nb) v[i] = x4[t + i * BLOCK];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
      if (t + i * BLOCK < nb) m = fmaxf(m, fmaxf(fmaxf(v[i].x, v[i].y), fmaxf(v[i].z, v[i].w)));
    m = warp_max(m);
    if ((t & 31) == 0) red[t >> 5] = m;
    __syncthreads();
    m = red[0];
#pragma unroll
    for (int w = 1; w < BLOCK / 32; ++w) m = fmaxf(m, red[w]);
    __syncthreads();
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
      if (t + i * BLOCK < nb) {
        v[i] = make_float4(expf(v[i].x - m), expf(v[i].y - m), expf(v[i].z - m), expf(v[i].w - m));
        s += v[i].x + v[i].y + v[i].z + v[i].w;
      }
    s = warp_sum(s);
    if ((t & 31) == 0) red[t >> 5] = s;
    __syncthreads();
    s = red[0];
#pragma unroll
    for (int w = 1; w < BLOCK / 32; ++w) s += red[w];
    const float inv = 1.0f / s;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
      if (t + i * BLOCK < nb)
        y4[t + i * BLOCK] = make_float4(v[i].x * inv, v[i].y * inv, v[i].z * inv, v[i].w * inv);
    if (PERSIST) __syncthreads();
  }
}

// The checkpoint's cluster path (aligned rows): a cluster of CL blocks per row, each its slice in
// ITEMS float4 per thread, the slices' statistics through distributed shared memory. SPLIT 1: the
// second cluster barrier split into an arrive after the remote reads and a wait before the block
// leaves, so that Y is written without waiting for the other blocks.
template <int BLOCK, int ITEMS, int CL, int SPLIT>
__global__ void __launch_bounds__(BLOCK) cluster_rows(const float* X, float* Y, int R, int N) {
  __shared__ float red[BLOCK / 32];
  __shared__ float stats[2];
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = (int)cluster.block_rank();
  const int row = blockIdx.x / CL;
  const int t = threadIdx.x;
  const float4* x4 = reinterpret_cast<const float4*>(X + (size_t)row * N);
  float4* y4 = reinterpret_cast<float4*>(Y + (size_t)row * N);
  const int nb = N / VEC;
  const int slice = (nb + CL - 1) / CL;
  const int b0 = min(rank * slice, nb), b1 = min(b0 + slice, nb);
  float4 v[ITEMS];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i)
    if (b0 + t + i * BLOCK < b1) v[i] = x4[b0 + t + i * BLOCK];
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i)
    if (b0 + t + i * BLOCK < b1) m = fmaxf(m, fmaxf(fmaxf(v[i].x, v[i].y), fmaxf(v[i].z, v[i].w)));
  m = warp_max(m);
  if ((t & 31) == 0) red[t >> 5] = m;
  __syncthreads();
  m = red[0];
#pragma unroll
  for (int w = 1; w < BLOCK / 32; ++w) m = fmaxf(m, red[w]);
  __syncthreads();
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i)
    if (b0 + t + i * BLOCK < b1) {
      v[i] = make_float4(expf(v[i].x - m), expf(v[i].y - m), expf(v[i].z - m), expf(v[i].w - m));
      s += v[i].x + v[i].y + v[i].z + v[i].w;
    }
  s = warp_sum(s);
  if ((t & 31) == 0) red[t >> 5] = s;
  __syncthreads();
  s = red[0];
#pragma unroll
  for (int w = 1; w < BLOCK / 32; ++w) s += red[w];
  if (t == 0) { stats[0] = m; stats[1] = s; }
  cluster.sync();
  float M = -INFINITY, S = 0.0f;
  for (int k = 0; k < CL; ++k) {
    const float* remote = cluster.map_shared_rank(stats, k);
    combine(M, S, remote[0], remote[1]);
  }
  if (SPLIT) cluster.barrier_arrive(); else cluster.sync();
  if (s != 0.0f) {
    const float scale = expf(m - M) / S;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
      if (b0 + t + i * BLOCK < b1)
        y4[b0 + t + i * BLOCK] = make_float4(v[i].x * scale, v[i].y * scale, v[i].z * scale, v[i].w * scale);
  }
  if (SPLIT) cluster.barrier_wait();
}

__global__ void copy4(const float4* __restrict__ a, float4* __restrict__ b, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    b[i] = a[i];
}

struct Bench {
  int R, N, sms;
  size_t elems;
  std::vector<float*> xs;
  float *y, *flush;
  int* counter;
  cudaEvent_t e0, e1;
  Bench(int r, int n) : R(r), N(n), elems((size_t)r * n) {
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const size_t bytes = elems * 4;
    const int copies = std::max<size_t>(2, std::min<size_t>(8, (size_t)(512u << 20) / bytes + 1));
    std::vector<float> h(elems);
    for (int c = 0; c < copies; ++c) {
      unsigned st = 12345u + c;
      for (auto& v : h) { st = st * 1664525u + 1013904223u; v = ((st >> 8) / 16777216.0f) * 20.0f - 10.0f; }
      float* d;
      CHECK(cudaMalloc(&d, bytes));
      CHECK(cudaMemcpy(d, h.data(), bytes, cudaMemcpyHostToDevice));
      xs.push_back(d);
    }
    CHECK(cudaMalloc(&y, bytes));
    CHECK(cudaMalloc(&flush, 256u << 20));
    CHECK(cudaMalloc(&counter, 4));
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
  }
  ~Bench() {
    for (auto d : xs) cudaFree(d);
    cudaFree(y); cudaFree(flush); cudaFree(counter);
  }
  // fn(x) launches one run on input x (including any memset it needs).
  double time(const std::function<void(const float*)>& fn) {
    std::vector<float> ms;
    for (int i = 0; i < 17; ++i) {
      CHECK(cudaMemsetAsync(flush, i, 256u << 20));
      const float* x = xs[i % xs.size()];
      CHECK(cudaEventRecord(e0));
      fn(x);
      CHECK(cudaEventRecord(e1));
      CHECK(cudaEventSynchronize(e1));
      CHECK(cudaGetLastError());
      float t;
      CHECK(cudaEventElapsedTime(&t, e0, e1));
      if (i >= 2) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
  // Y of input 0 against a float64 softmax of a few rows; the largest absolute error.
  double check(const std::function<void(const float*)>& fn) {
    CHECK(cudaMemset(y, 0, elems * 4));
    fn(xs[0]);
    CHECK(cudaDeviceSynchronize());
    double worst = 0;
    std::vector<float> xr(N), yr(N);
    for (int r : {0, R / 2, R - 1}) {
      CHECK(cudaMemcpy(xr.data(), xs[0] + (size_t)r * N, N * 4, cudaMemcpyDeviceToHost));
      CHECK(cudaMemcpy(yr.data(), y + (size_t)r * N, N * 4, cudaMemcpyDeviceToHost));
      double mx = -1e300, s = 0;
      for (float v : xr) mx = std::max(mx, (double)v);
      for (float v : xr) s += std::exp(v - mx);
      for (int c = 0; c < N; ++c) worst = std::max(worst, std::fabs(std::exp(xr[c] - mx) / s - yr[c]));
    }
    return worst;
  }
};

#ifndef ROWS_NO_MAIN
int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "all";
  cudaDeviceProp p;
  CHECK(cudaGetDeviceProperties(&p, 0));
  std::printf("# %s, %d SMs, L2 %d bytes\n", p.name, p.multiProcessorCount, p.l2CacheSize);
  std::printf("shape,variant,ms,copy_ms,pct_of_copy,gbs,max_abs_err\n");
  auto run = [&](Bench& b, const std::string& name, const std::function<void(const float*)>& fn, double copy_ms) {
    const double err = b.check(fn);
    const double ms = b.time(fn);
    std::printf("%dx%d,%s,%.4f,%.4f,%.1f,%.1f,%.2e\n", b.R, b.N, name.c_str(), ms, copy_ms,
                100.0 * copy_ms / ms, 2.0 * b.elems * 4 / ms / 1e6, err);
    std::fflush(stdout);
  };
  auto copy_time = [&](Bench& b) {
    const size_t n4 = b.elems / 4;
    double best = 1e30;
    for (int g : {b.sms * 4, b.sms * 8, b.sms * 16}) {
      best = std::min(best, b.time([&](const float* x) {
        copy4<<<g, 512>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(b.y), n4);
      }));
    }
    best = std::min(best, b.time([&](const float* x) {
      CHECK(cudaMemcpyAsync(b.y, x, b.elems * 4, cudaMemcpyDeviceToDevice));
    }));
    return best;
  };
  if (which == "all" || which == "long") {
    for (auto [R, N] : std::vector<std::pair<int, int>>{{4096, 32000}, {2048, 50256}, {512, 128256}, {2048, 128256}, {64, 50256}}) {
      Bench b(R, N);
      const double c = copy_time(b);
      std::printf("%dx%d,copy,%.4f,%.4f,100.0,%.1f,0\n", R, N, c, c, 2.0 * b.elems * 4 / c / 1e6);
      auto v1 = [&](auto kern, int bpc, int block) {
        return [&, kern, bpc, block](const float* x) {
          CHECK(cudaMemsetAsync(b.counter, 0, 4));
          kern<<<std::min(R, b.sms * bpc), block>>>(x, b.y, b.counter, R, N);
        };
      };
      for (int bpc : {1, 2, 4, 8}) {
        run(b, "loop_v1_b256_bpc" + std::to_string(bpc), v1(loop_v1<256>, bpc, 256), c);
        run(b, "loop_v1_b1024_bpc" + std::to_string(bpc > 2 ? 2 : bpc), v1(loop_v1<1024>, bpc > 2 ? 2 : bpc, 1024), c);
      }
      for (int bpc : {1, 2, 3, 4}) {
        run(b, "loop_v2_b1024_u4_bpc" + std::to_string(bpc > 2 ? 2 : bpc), v1(loop_v2<1024, 4>, bpc > 2 ? 2 : bpc, 1024), c);
        run(b, "loop_v2_b512_u4_bpc" + std::to_string(bpc), v1(loop_v2<512, 4>, bpc, 512), c);
        run(b, "loop_v2_b512_u8_bpc" + std::to_string(bpc), v1(loop_v2<512, 8>, bpc, 512), c);
        run(b, "loop_v2_b256_u8_bpc" + std::to_string(bpc * 2), v1(loop_v2<256, 8>, bpc * 2, 256), c);
      }
    }
  }
  if (which == "all" || which == "short") {
    for (auto [R, N] : std::vector<std::pair<int, int>>{{65536, 128}, {4096, 1024}, {65536, 1024}}) {
      Bench b(R, N);
      const double c = copy_time(b);
      std::printf("%dx%d,copy,%.4f,%.4f,100.0,%.1f,0\n", R, N, c, c, 2.0 * b.elems * 4 / c / 1e6);
      for (int bpc : {8, 16}) {
        run(b, "short_v1_t128_bpc" + std::to_string(bpc), [&, bpc](const float* x) {
          CHECK(cudaMemsetAsync(b.counter, 0, 4));
          short_v1<128, 8><<<std::min((R + 3) / 4, b.sms * bpc), 128>>>(x, b.y, b.counter, R, N);
        }, c);
      }
      auto v2 = [&](auto kern, int rows_per_warp, const char* name) {
        for (int threads : {128, 256, 512}) {
          const long warps = (R + rows_per_warp - 1) / rows_per_warp;
          const long blocks = (warps * 32 + threads - 1) / threads;
          run(b, std::string(name) + "_t" + std::to_string(threads), [&, kern, threads, blocks](const float* x) {
            kern<<<blocks, threads>>>(x, b.y, R, N);
          }, c);
        }
      };
      if (N == 128) {
        v2(short_v2<32, 1, 1>, 1, "short_v2_lpr32_rpw1");
        v2(short_v2<32, 1, 2>, 2, "short_v2_lpr32_rpw2");
        v2(short_v2<32, 1, 4>, 4, "short_v2_lpr32_rpw4");
        v2(short_v2<16, 2, 1>, 2, "short_v2_lpr16_rpw1");
        v2(short_v2<16, 2, 2>, 4, "short_v2_lpr16_rpw2");
        v2(short_v2<8, 4, 1>, 4, "short_v2_lpr8_rpw1");
        v2(short_v2<8, 4, 2>, 8, "short_v2_lpr8_rpw2");
      } else {
        v2(short_v2<32, 8, 1>, 1, "short_v2_lpr32_rpw1");
        v2(short_v2<32, 8, 2>, 2, "short_v2_lpr32_rpw2");
      }
    }
  }
  if (which == "all" || which == "regular") {
    for (auto [R, N] : std::vector<std::pair<int, int>>{{1024, 4096}, {4096, 4096}, {65536, 4096}, {256, 8192}, {8192, 8192}}) {
      Bench b(R, N);
      const double c = copy_time(b);
      std::printf("%dx%d,copy,%.4f,%.4f,100.0,%.1f,0\n", R, N, c, c, 2.0 * b.elems * 4 / c / 1e6);
      auto reg = [&](auto kern, int block, bool persist, int bpc, const std::string& name) {
        run(b, name, [&, kern, block, persist, bpc](const float* x) {
          if (persist) CHECK(cudaMemsetAsync(b.counter, 0, 4));
          kern<<<persist ? std::min(R, b.sms * bpc) : R, block>>>(x, b.y, b.counter, R, N);
        }, c);
      };
      if (N == 4096) {
        reg(reg_rows<256, 4, 1>, 256, true, 8, "reg_persist_b256_bpc8");
        reg(reg_rows<256, 4, 0>, 256, false, 0, "reg_grid_b256");
        reg(reg_rows<512, 2, 0>, 512, false, 0, "reg_grid_b512");
        reg(reg_rows<1024, 1, 0>, 1024, false, 0, "reg_grid_b1024");
        reg(reg_rows<128, 8, 0>, 128, false, 0, "reg_grid_b128");
      } else {
        reg(reg_rows<256, 8, 1>, 256, true, 8, "reg_persist_b256_bpc8");
        reg(reg_rows<256, 8, 0>, 256, false, 0, "reg_grid_b256");
        reg(reg_rows<512, 4, 0>, 512, false, 0, "reg_grid_b512");
        reg(reg_rows<1024, 2, 0>, 1024, false, 0, "reg_grid_b1024");
      }
    }
  }
  if (which == "all" || which == "cluster") {
    for (auto [R, N] : std::vector<std::pair<int, int>>{{1, 4096}, {16, 8192}, {16, 32000}, {4, 50256}, {1, 128256}, {64, 50256}, {2048, 50256}, {4096, 32000}, {512, 128256}}) {
      Bench b(R, N);
      const double c = copy_time(b);
      std::printf("%dx%d,copy,%.4f,%.4f,100.0,%.1f,0\n", R, N, c, c, 2.0 * b.elems * 4 / c / 1e6);
      auto clu = [&](auto kern, int block, int cl, int items, const std::string& name) {
        if ((long)cl * block * items * 4 < N) return;
        if (cl > 8) CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
        run(b, name, [&, kern, block, cl](const float* x) {
          cudaLaunchConfig_t cfg = {};
          cfg.gridDim = dim3(cl * R);
          cfg.blockDim = dim3(block);
          cudaLaunchAttribute a[1];
          a[0].id = cudaLaunchAttributeClusterDimension;
          a[0].val.clusterDim.x = cl; a[0].val.clusterDim.y = 1; a[0].val.clusterDim.z = 1;
          cfg.attrs = a; cfg.numAttrs = 1;
          CHECK(cudaLaunchKernelEx(&cfg, kern, (const float*)x, b.y, R, N));
        }, c);
      };
      clu(cluster_rows<256, 1, 4, 0>, 256, 4, 1, "cl4_b256_i1");
      clu(cluster_rows<256, 1, 4, 1>, 256, 4, 1, "cl4_b256_i1_split");
      clu(cluster_rows<256, 2, 8, 0>, 256, 8, 2, "cl8_b256_i2");
      clu(cluster_rows<256, 2, 8, 1>, 256, 8, 2, "cl8_b256_i2_split");
      clu(cluster_rows<256, 8, 8, 0>, 256, 8, 8, "cl8_b256_i8");
      clu(cluster_rows<256, 8, 8, 1>, 256, 8, 8, "cl8_b256_i8_split");
      clu(cluster_rows<512, 4, 8, 0>, 512, 8, 4, "cl8_b512_i4");
      clu(cluster_rows<512, 4, 8, 1>, 512, 8, 4, "cl8_b512_i4_split");
      clu(cluster_rows<1024, 4, 8, 1>, 1024, 8, 4, "cl8_b1024_i4_split");
      clu(cluster_rows<512, 4, 16, 1>, 512, 16, 4, "cl16_b512_i4_split");
      clu(cluster_rows<1024, 2, 16, 1>, 1024, 16, 2, "cl16_b1024_i2_split");
      clu(cluster_rows<256, 4, 16, 1>, 256, 16, 4, "cl16_b256_i4_split");
      clu(cluster_rows<256, 8, 16, 1>, 256, 16, 8, "cl16_b256_i8_split");
      clu(cluster_rows<512, 8, 4, 1>, 512, 4, 8, "cl4_b512_i8_split");
      clu(cluster_rows<1024, 8, 2, 1>, 1024, 2, 8, "cl2_b1024_i8_split");
    }
  }
  return 0;
}
#endif  // ROWS_NO_MAIN
