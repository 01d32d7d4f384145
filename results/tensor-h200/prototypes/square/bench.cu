// Times exported variants of the fp16 tensor-core checkpoint beside cublasGemmEx in one process:
// C = A B, fp16 in, fp32 out, row-major, as peak's runner calls both. Every sample flushes the L2
// (a 256 MiB memset) before a launch timed with CUDA events; the variants and cuBLAS take turns
// in every round, so that clock drift touches them alike. Before timing, each variant's C is
// compared with cuBLAS's (variants marked "timing only" compute no valid C by design).
//   bench [--rounds R] [--profile] M,N,K ...
// --profile: one untimed launch of each variant (for ncu), no flush, no check.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "variants.h"

#define CHECK(x)                                                                       \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

typedef int (*Entry)(const void*, const void*, float*, int, int, int, void*, size_t, cudaStream_t);
typedef size_t (*WsSize)(int, int, int);
struct Variant {
  const char* name;
  Entry run;
  WsSize ws;
  bool checked;  // false: a timing-only variant whose C is not the product
};

__global__ void fill_half(__half* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    p[i] = __float2half(((h & 0xffff) / 65535.0f) * 2.0f - 1.0f);
  }
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char** argv) {
  int rounds = 30;
  bool profile = false;
  std::vector<std::array<int, 3>> shapes;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
      rounds = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--profile")) {
      profile = true;
    } else {
      std::array<int, 3> s{};
      if (sscanf(argv[i], "%d,%d,%d", &s[0], &s[1], &s[2]) != 3) {
        fprintf(stderr, "usage: bench [--rounds R] [--profile] M,N,K ...\n");
        return 2;
      }
      shapes.push_back(s);
    }
  }
  const std::vector<Variant> variants = PROTO_VARIANTS;
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  printf("device: %s, %d multiprocessors\n", prop.name, prop.multiProcessorCount);
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  cublasSetStream(handle, stream);
  const size_t flush_bytes = 256u << 20;
  void* flush;
  CHECK(cudaMalloc(&flush, flush_bytes));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  for (auto [M, N, K] : shapes) {
    __half *A, *B;
    float *C, *R;
    CHECK(cudaMalloc(&A, (size_t)M * K * 2));
    CHECK(cudaMalloc(&B, (size_t)K * N * 2));
    CHECK(cudaMalloc(&C, (size_t)M * N * 4));
    CHECK(cudaMalloc(&R, (size_t)M * N * 4));
    fill_half<<<1024, 256, 0, stream>>>(A, (size_t)M * K, 1u);
    fill_half<<<1024, 256, 0, stream>>>(B, (size_t)K * N, 2u);
    size_t ws_bytes = 0;
    for (auto& v : variants) ws_bytes = std::max(ws_bytes, v.ws(M, N, K));
    void* ws = nullptr;
    if (ws_bytes) CHECK(cudaMalloc(&ws, ws_bytes));
    if (ws_bytes) CHECK(cudaMemset(ws, 0, ws_bytes));  // flags start at 0 (for "once" variants)
    const float alpha = 1.0f, beta = 0.0f;
    auto cublas = [&](float* out) {
      if (cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, B, CUDA_R_16F, N, A,
                       CUDA_R_16F, K, &beta, out, CUDA_R_32F, N, CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasGemmEx failed\n");
        exit(1);
      }
    };
    auto launch = [&](int i) {
      if (i < 0) return cublas(C);
      int st = variants[i].run(A, B, C, M, N, K, ws, ws_bytes, stream);
      if (st != 0) {
        fprintf(stderr, "%s: status %d at %dx%dx%d\n", variants[i].name, st, M, N, K);
        exit(1);
      }
    };
    const int nv = static_cast<int>(variants.size());
    if (profile) {
      for (int i = -1; i < nv; ++i) launch(i);
      CHECK(cudaStreamSynchronize(stream));
      continue;
    }
    cublas(R);
    std::vector<float> ref((size_t)M * N), got((size_t)M * N);
    CHECK(cudaMemcpyAsync(ref.data(), R, ref.size() * 4, cudaMemcpyDeviceToHost, stream));
    CHECK(cudaStreamSynchronize(stream));
    double scale = 0;
    for (float x : ref) scale = std::max(scale, (double)std::fabs(x));
    for (int i = 0; i < nv; ++i) {
      for (int w = 0; w < 3; ++w) launch(i);
      CHECK(cudaMemcpyAsync(got.data(), C, got.size() * 4, cudaMemcpyDeviceToHost, stream));
      CHECK(cudaStreamSynchronize(stream));
      double worst = 0;
      for (size_t j = 0; j < got.size(); ++j)
        worst = std::max(worst, (double)std::fabs(got[j] - ref[j]));
      if (std::isnan(worst)) worst = INFINITY;
      printf("%dx%dx%d %-10s max |C - cuBLAS| / max |C| = %.3g%s\n", M, N, K, variants[i].name,
             worst / scale, variants[i].checked ? (worst / scale < 1e-3 ? "" : "  WRONG") :
                                                  "  (timing only)");
    }
    std::vector<std::vector<double>> ms(nv + 1);
    for (int r = 0; r < rounds; ++r)
      for (int i = -1; i < nv; ++i) {
        CHECK(cudaMemsetAsync(flush, r & 0xff, flush_bytes, stream));
        CHECK(cudaEventRecord(e0, stream));
        launch(i);
        CHECK(cudaEventRecord(e1, stream));
        CHECK(cudaEventSynchronize(e1));
        float t;
        CHECK(cudaEventElapsedTime(&t, e0, e1));
        ms[i + 1].push_back(t);
      }
    const double flop = 2.0 * M * N * K;
    const double base = median(ms[0]);
    for (int i = -1; i < nv; ++i) {
      const auto& s = ms[i + 1];
      double med = median(s);
      printf("%dx%dx%d %-10s median %.4f ms  min %.4f ms  %.1f TFLOP/s  %.1f %% of cuBLAS  samples",
             M, N, K, i < 0 ? "cublas" : variants[i].name, med, *std::min_element(s.begin(), s.end()),
             flop / med * 1e-9, 100.0 * base / med);
      for (double x : s) printf(" %.4f", x);
      printf("\n");
    }
    cudaFree(A), cudaFree(B), cudaFree(C), cudaFree(R);
    if (ws) cudaFree(ws);
  }
  return 0;
}
