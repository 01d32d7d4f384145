// An independent timing of the cuBLAS calls that peak uses as its baseline, to compare with
// peak's own timing of them (CudaGpuTest.CublasRatesAsPeakTimesThem). Nothing of peak is used:
// plain CUDA runtime and cuBLAS, events recorded tight around one call on the stream cuBLAS runs
// on, the L2 flushed before each sample. The cuBLAS set-up and the calls copy peak's
// (src/backend/cuda/cuda_device_main.cpp: CudaDevice::init and CudaDevice::baseline):
//   handle: cublasCreate, cublasSetStream(one stream from cudaStreamCreate),
//           cublasSetMathMode(CUBLAS_DEFAULT_MATH) (no TF32 for fp32), a 32 MiB workspace set
//           with cublasSetWorkspace
//   fp32:   cublasSgemm(N, N, n, m, k, 1, B, n, A, k, 0, C, n)
//   fp16/bf16 in, fp32 out:
//           cublasGemmEx(N, N, n, m, k, 1, B, in, n, A, in, k, 0, C, CUDA_R_32F, n,
//                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
// (row-major C[M,N] = A[M,K] B[K,N] computed as column-major C^T = B^T A^T).
//
// Usage: timer-tight OUT.json
// Prints one line per case and writes every raw sample to OUT.json. Exits non-zero on any
// CUDA or cuBLAS error (or a wrong result).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

void fail(const char* what, const char* detail, const char* file, int line) {
  std::fprintf(stderr, "timer-tight: %s failed: %s (%s:%d)\n", what, detail, file, line);
  std::exit(1);
}

#define CUDA_CHECK(x)                                                 \
  do {                                                                \
    cudaError_t e_ = (x);                                             \
    if (e_ != cudaSuccess) fail(#x, cudaGetErrorString(e_), __FILE__, __LINE__); \
  } while (0)

#define CUBLAS_CHECK(x)                                                  \
  do {                                                                   \
    cublasStatus_t s_ = (x);                                             \
    if (s_ != CUBLAS_STATUS_SUCCESS) fail(#x, cublasGetStatusString(s_), __FILE__, __LINE__); \
  } while (0)

constexpr int kWarmup = 5;
constexpr int kSamples = 50;
constexpr size_t kCublasWorkspaceBytes = 32u << 20;  // as peak

// Peak's quantile (src/tune/measure.cpp): linear interpolation between the sorted samples.
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  double pos = q * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  double f = pos - static_cast<double>(lo);
  return sorted[lo] * (1 - f) + sorted[hi] * f;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return quantile(v, 0.5);
}

// uniform(-1, 1) from a 64-bit generator (splitmix64), the distribution of peak's contexts.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>((next() >> 40) * (2.0 / 16777216.0) - 1.0); }
};

enum class Kind { fp32, fp16, bf16 };
const char* kind_name(Kind k) { return k == Kind::fp32 ? "fp32" : k == Kind::fp16 ? "fp16" : "bf16"; }
size_t in_size(Kind k) { return k == Kind::fp32 ? 4 : 2; }

// The inputs in the device type, and as the floats they round to (for the spot check).
void make_input(Kind k, size_t count, uint64_t seed, std::vector<unsigned char>& bytes,
                std::vector<float>& rounded) {
  Rng rng(seed);
  bytes.resize(count * in_size(k));
  rounded.resize(count);
  for (size_t i = 0; i < count; ++i) {
    float x = rng.uniform();
    if (k == Kind::fp32) {
      reinterpret_cast<float*>(bytes.data())[i] = x;
      rounded[i] = x;
    } else if (k == Kind::fp16) {
      __half h = __float2half_rn(x);
      reinterpret_cast<__half*>(bytes.data())[i] = h;
      rounded[i] = __half2float(h);
    } else {
      __nv_bfloat16 h = __float2bfloat16_rn(x);
      reinterpret_cast<__nv_bfloat16*>(bytes.data())[i] = h;
      rounded[i] = __bfloat162float(h);
    }
  }
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else {
      o += c;
    }
  }
  return o;
}

std::string nvidia_driver_version() {
  FILE* f = std::fopen("/proc/driver/nvidia/version", "r");
  if (!f) return "";
  char line[512] = {0};
  std::string s;
  if (std::fgets(line, sizeof line, f)) s = line;
  std::fclose(f);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

struct Case {
  Kind kind;
  int n;
  std::vector<double> samples_ms;  // device time, events tight around the call
  std::vector<double> flush_ms;    // device time of the flush before each sample
  std::vector<double> enqueue_ms;  // host time from the flush's enqueue to the end event's
  int exposed = 0;                 // samples where enqueue_ms >= flush_ms (host time possibly
                                   // inside the window)
  double median = 0, p25 = 0, p75 = 0, tflops = 0, max_err = 0;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.json\n", argv[0]);
    return 2;
  }
  const char* json_path = argv[1];
  FILE* f = std::fopen(json_path, "w");  // opened first: a bad path fails before the timing
  if (!f) {
    std::fprintf(stderr, "timer-tight: cannot write %s\n", json_path);
    return 1;
  }

  // Device 0 (the device peak's runner takes without a selection; CUDA_VISIBLE_DEVICES applies).
  CUDA_CHECK(cudaSetDevice(0));
  CUDA_CHECK(cudaFree(nullptr));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  int driver = 0, runtime = 0;
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  int cublas_version = 0;
  CUBLAS_CHECK(cublasGetProperty(MAJOR_VERSION, &cublas_version));
  int cublas_minor = 0, cublas_patch = 0;
  CUBLAS_CHECK(cublasGetProperty(MINOR_VERSION, &cublas_minor));
  CUBLAS_CHECK(cublasGetProperty(PATCH_LEVEL, &cublas_patch));
  std::string cublas_lib = "?";
  {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&cublasCreate_v2), &info) && info.dli_fname)
      cublas_lib = info.dli_fname;
  }
  const char* tf32_env = std::getenv("NVIDIA_TF32_OVERRIDE");
  const std::string nv_driver = nvidia_driver_version();
  std::printf("device: %s (cc %d.%d, %d SMs, L2 %d bytes)\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, prop.l2CacheSize);
  std::printf("CUDA driver API %d.%d, runtime %d.%d, cuBLAS %d.%d.%d (%s)\n", driver / 1000,
              (driver % 1000) / 10, runtime / 1000, (runtime % 1000) / 10, cublas_version,
              cublas_minor, cublas_patch, cublas_lib.c_str());
  if (!nv_driver.empty()) std::printf("%s\n", nv_driver.c_str());
  if (tf32_env) std::printf("NVIDIA_TF32_OVERRIDE=%s\n", tf32_env);
  std::fflush(stdout);

  // The stream, handle and workspace as peak sets them up.
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  cublasHandle_t handle;
  CUBLAS_CHECK(cublasCreate(&handle));
  CUBLAS_CHECK(cublasSetStream(handle, stream));
  CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));  // no TF32 for fp32
  void* workspace = nullptr;
  CUDA_CHECK(cudaMalloc(&workspace, kCublasWorkspaceBytes));
  CUBLAS_CHECK(cublasSetWorkspace(handle, workspace, kCublasWorkspaceBytes));

  const size_t flush_bytes = 2 * static_cast<size_t>(prop.l2CacheSize > 0 ? prop.l2CacheSize : (32 << 20));
  void* flush_buf = nullptr;
  CUDA_CHECK(cudaMalloc(&flush_buf, flush_bytes));
  cudaEvent_t flushed, start, stop;
  CUDA_CHECK(cudaEventCreate(&flushed));
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  int flush_round = 0;

  std::vector<Case> cases;
  for (Kind kind : {Kind::fp32, Kind::fp16, Kind::bf16}) {
    for (int n : {2048, 4096, 8192}) {
      Case c;
      c.kind = kind;
      c.n = n;
      const int m = n, k = n;  // square: M = N = K = n
      const size_t count = static_cast<size_t>(n) * n;
      std::vector<unsigned char> ha, hb;
      std::vector<float> ra, rb;
      make_input(kind, count, 0xA000 + n, ha, ra);
      make_input(kind, count, 0xB000 + n, hb, rb);
      void *A = nullptr, *B = nullptr, *C = nullptr;
      CUDA_CHECK(cudaMalloc(&A, ha.size()));
      CUDA_CHECK(cudaMalloc(&B, hb.size()));
      CUDA_CHECK(cudaMalloc(&C, count * sizeof(float)));  // fp32 output in every case
      CUDA_CHECK(cudaMemcpy(A, ha.data(), ha.size(), cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemcpy(B, hb.data(), hb.size(), cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemset(C, 0, count * sizeof(float)));
      CUDA_CHECK(cudaDeviceSynchronize());

      const float alpha = 1.0f, beta = 0.0f;
      const cudaDataType in_type = kind == Kind::bf16 ? CUDA_R_16BF : CUDA_R_16F;
      auto call = [&]() {
        if (kind == Kind::fp32) {
          CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha,
                                   static_cast<const float*>(B), n, static_cast<const float*>(A),
                                   k, &beta, static_cast<float*>(C), n));
        } else {
          CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, B, in_type,
                                    n, A, in_type, k, &beta, C, CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT));
        }
      };

      for (int w = 0; w < kWarmup; ++w) call();
      CUDA_CHECK(cudaStreamSynchronize(stream));
      CUDA_CHECK(cudaGetLastError());

      // Spot check of the warm-up's output (so that a call that does nothing cannot pass):
      // a few elements against a double-precision dot product of the rounded inputs.
      {
        const int pos[][2] = {{0, 0}, {n - 1, n - 1}, {n / 3, 2 * n / 3}, {n - 7, 5}, {11, n - 13}};
        const double tol = 2e-3 * std::sqrt(static_cast<double>(k));  // |C| ~ sqrt(k / 9)
        for (const auto& p : pos) {
          const int i = p[0], j = p[1];
          double ref = 0;
          for (int l = 0; l < k; ++l)
            ref += static_cast<double>(ra[static_cast<size_t>(i) * k + l]) *
                   rb[static_cast<size_t>(l) * n + j];
          float got = 0;
          CUDA_CHECK(cudaMemcpy(&got, static_cast<float*>(C) + static_cast<size_t>(i) * n + j,
                                sizeof got, cudaMemcpyDeviceToHost));
          double err = std::fabs(got - ref);
          if (!(err <= tol)) {
            std::fprintf(stderr,
                         "timer-tight: %s n=%d: C[%d][%d] = %g, expected %g (|error| %g > %g)\n",
                         kind_name(kind), n, i, j, got, ref, err, tol);
            return 1;
          }
          c.max_err = std::max(c.max_err, err);
        }
      }

      for (int s = 0; s < kSamples; ++s) {
        // The flush, then the start event, the one call and the end event, all on the stream
        // cuBLAS uses. The flush (a device write of 2 x L2) is still running on the device while
        // the host enqueues the start event, the call and the end event, so the start event
        // fires when the flush ends, with the call already queued behind it. Checked: the host
        // time from before the flush's enqueue to after the end event's is under the flush's
        // device time in every sample not counted in `exposed` (the device cannot start the
        // flush before it is enqueued, so those samples' windows hold no host time).
        const int value = (flush_round++ & 1) ? 0x5A : 0xA5;  // as peak
        auto h0 = std::chrono::steady_clock::now();
        CUDA_CHECK(cudaEventRecord(flushed, stream));
        CUDA_CHECK(cudaMemsetAsync(flush_buf, value, flush_bytes, stream));
        CUDA_CHECK(cudaEventRecord(start, stream));
        call();
        CUDA_CHECK(cudaEventRecord(stop, stream));
        auto h1 = std::chrono::steady_clock::now();
        CUDA_CHECK(cudaEventSynchronize(stop));
        float ms = 0, flush_ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
        CUDA_CHECK(cudaEventElapsedTime(&flush_ms, flushed, start));
        double enq = std::chrono::duration<double, std::milli>(h1 - h0).count();
        c.samples_ms.push_back(ms);
        c.flush_ms.push_back(flush_ms);
        c.enqueue_ms.push_back(enq);
        if (enq >= flush_ms) ++c.exposed;
      }
      CUDA_CHECK(cudaStreamSynchronize(stream));
      CUDA_CHECK(cudaGetLastError());

      std::vector<double> sorted = c.samples_ms;
      std::sort(sorted.begin(), sorted.end());
      c.median = quantile(sorted, 0.5);
      c.p25 = quantile(sorted, 0.25);
      c.p75 = quantile(sorted, 0.75);
      c.tflops = 2.0 * n * static_cast<double>(n) * n / (c.median * 1e-3) / 1e12;
      std::printf(
          "[ tight ] cublas %s n=%d: %.3f TFLOP/s (median %.6f ms, p25 %.6f, p75 %.6f, spread "
          "%.5f; flush %.4f ms, enqueue %.4f ms, %d of %d samples with the enqueue exposed)\n",
          kind_name(kind), n, c.tflops, c.median, c.p25, c.p75,
          c.median > 0 ? (c.p75 - c.p25) / c.median : 0.0, median_of(c.flush_ms),
          median_of(c.enqueue_ms), c.exposed, kSamples);
      std::fflush(stdout);
      CUDA_CHECK(cudaFree(A));
      CUDA_CHECK(cudaFree(B));
      CUDA_CHECK(cudaFree(C));
      cases.push_back(std::move(c));
    }
  }

  std::fprintf(f, "{\"format\":1,\"method\":\"tight events around one cuBLAS call, L2 flushed before each sample\",");
  std::fprintf(f, "\"device\":\"%s\",\"compute_capability\":\"%d.%d\",\"sms\":%d,\"l2_bytes\":%d,",
               json_escape(prop.name).c_str(), prop.major, prop.minor, prop.multiProcessorCount,
               prop.l2CacheSize);
  std::fprintf(f, "\"nvidia_driver\":\"%s\",\"cuda_driver_api\":%d,\"cuda_runtime\":%d,",
               json_escape(nv_driver).c_str(), driver, runtime);
  std::fprintf(f, "\"cublas\":\"%d.%d.%d\",\"cublas_library\":\"%s\",", cublas_version, cublas_minor,
               cublas_patch, json_escape(cublas_lib).c_str());
  std::fprintf(f, "\"math_mode\":\"CUBLAS_DEFAULT_MATH\",\"workspace_bytes\":%zu,", kCublasWorkspaceBytes);
  std::fprintf(f, "\"nvidia_tf32_override\":%s%s%s,", tf32_env ? "\"" : "",
               tf32_env ? json_escape(tf32_env).c_str() : "null", tf32_env ? "\"" : "");
  std::fprintf(f, "\"flush_bytes\":%zu,\"warmup\":%d,\"samples\":%d,\"cases\":[", flush_bytes, kWarmup,
               kSamples);
  auto list = [&](const std::vector<double>& v) {
    std::fputc('[', f);
    for (size_t i = 0; i < v.size(); ++i) std::fprintf(f, "%s%.6f", i ? "," : "", v[i]);
    std::fputc(']', f);
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    std::fprintf(f, "%s\n{\"dtype\":\"%s\",\"n\":%d,\"call\":\"%s\",\"samples_ms\":", i ? "," : "",
                 kind_name(c.kind), c.n,
                 c.kind == Kind::fp32 ? "cublasSgemm" : "cublasGemmEx CUBLAS_COMPUTE_32F CUBLAS_GEMM_DEFAULT, C fp32");
    list(c.samples_ms);
    std::fprintf(f, ",\"median_ms\":%.6f,\"p25_ms\":%.6f,\"p75_ms\":%.6f,\"tflops\":%.4f,", c.median,
                 c.p25, c.p75, c.tflops);
    std::fprintf(f, "\"flush_ms\":");
    list(c.flush_ms);
    std::fprintf(f, ",\"enqueue_ms\":");
    list(c.enqueue_ms);
    std::fprintf(f, ",\"enqueue_exposed\":%d,\"spot_check_max_abs_err\":%.3g}", c.exposed, c.max_err);
  }
  std::fprintf(f, "\n]}\n");
  if (std::fclose(f) != 0) {
    std::fprintf(stderr, "timer-tight: cannot write %s\n", json_path);
    return 1;
  }

  CUDA_CHECK(cudaEventDestroy(flushed));
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  CUDA_CHECK(cudaFree(flush_buf));
  CUBLAS_CHECK(cublasDestroy(handle));
  CUDA_CHECK(cudaFree(workspace));
  CUDA_CHECK(cudaStreamDestroy(stream));
  std::printf("wrote %s\n", json_path);
  return 0;
}
