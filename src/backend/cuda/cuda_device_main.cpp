// The CUDA device of the peak-runner-cuda executable (runner/device.h): device buffers on one
// stream created at start-up, candidates loaded with dlopen and called through their generated
// `peak_entry`, launches timed with events around the call and a full device synchronization,
// the cuBLAS baseline, L2 flushing and an FP32 FMA-throughput microbenchmark (PTX through the
// driver API). Compiled only into peak-runner-cuda; docs/backend-cuda.md describes it.
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "backend/cuda/fma_bench_ptx.h"
#include "runner/device.h"
#include "runner/execute.h"

#if __has_include("runner/nvml.h")
#include "runner/nvml.h"
#define PEAK_HAVE_NVML 1
#endif

namespace peak {
namespace {

using EntryFn = int (*)(void* const*, const long long*, cudaStream_t);
using Clock = std::chrono::steady_clock;

constexpr int kInvalidConfig = -1;  // PEAK_INVALID_CONFIG
constexpr size_t kCublasWorkspaceBytes = 32u << 20;

// The driver API, loaded at run time: the runner starts (and says clearly that there is no GPU)
// on machines without the NVIDIA driver, and libcuda is loaded RTLD_GLOBAL so that candidates
// may call driver functions (cuTensorMapEncodeTiled, ...) directly.
struct DriverApi {
  void* lib = nullptr;
  decltype(&::cuInit) Init = nullptr;
  decltype(&::cuGetErrorName) GetErrorName = nullptr;
  decltype(&::cuGetErrorString) GetErrorString = nullptr;
  decltype(&::cuModuleLoadData) ModuleLoadData = nullptr;
  decltype(&::cuModuleGetFunction) ModuleGetFunction = nullptr;
  decltype(&::cuModuleUnload) ModuleUnload = nullptr;
  decltype(&::cuLaunchKernel) LaunchKernel = nullptr;
  decltype(&::cuMemsetD32Async) MemsetD32Async = nullptr;
  decltype(&::cuMemsetD8Async) MemsetD8Async = nullptr;

  Status load() {
    lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib == nullptr) {
      const char* why = ::dlerror();
      return Status::error(fmt::format(
          "no CUDA device (the NVIDIA driver library libcuda.so.1 cannot be loaded: {})",
          why ? why : "dlopen failed"));
    }
    std::string missing;
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, name));
      if (fn == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(name);
    };
    get(Init, "cuInit");
    get(GetErrorName, "cuGetErrorName");
    get(GetErrorString, "cuGetErrorString");
    get(ModuleLoadData, "cuModuleLoadData");
    get(ModuleGetFunction, "cuModuleGetFunction");
    get(ModuleUnload, "cuModuleUnload");
    get(LaunchKernel, "cuLaunchKernel");
    get(MemsetD32Async, "cuMemsetD32Async");
    get(MemsetD8Async, "cuMemsetD8Async");
    if (!missing.empty())
      return Status::error(
          fmt::format("the NVIDIA driver library lacks {}: update the driver", missing));
    return Status::ok();
  }
};

DriverApi g_cu;

std::string err_text(cudaError_t e) {
  return fmt::format("{}: {}", cudaGetErrorName(e), cudaGetErrorString(e));
}

std::string cu_text(CUresult r) {
  const char* name = nullptr;
  const char* str = nullptr;
  if (g_cu.GetErrorName) g_cu.GetErrorName(r, &name);
  if (g_cu.GetErrorString) g_cu.GetErrorString(r, &str);
  return fmt::format("{}: {}", name ? name : "CUDA_ERROR", str ? str : "unknown error");
}

const char* cublas_text(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_(unknown)";
}

// Errors after which the context is unusable: every later call fails the same way.
bool is_sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorMisalignedAddress:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorContextIsDestroyed:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

// Launch errors that mean "this configuration cannot run here" rather than a broken candidate.
bool is_config_error(cudaError_t e) {
  switch (e) {
    case cudaErrorInvalidConfiguration:
    case cudaErrorLaunchOutOfResources:
    case cudaErrorInvalidValue:
    case cudaErrorCooperativeLaunchTooLarge:
    case cudaErrorInvalidClusterSize:
      return true;
    default:
      return false;
  }
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The NVIDIA kernel module's version ("580.159.04") from /proc/driver/nvidia/version; "" when
// it cannot be read. The line reads "NVRM version: NVIDIA UNIX [Open ]Kernel Module [for
// x86_64]  580.159.04  Release Build ...".
std::string nvidia_driver_version() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  size_t at = line.find("Kernel Module");
  if (at == std::string::npos) return "";
  std::istringstream words(line.substr(at));
  std::string w;
  while (words >> w) {
    bool digits_and_dots =
        std::all_of(w.begin(), w.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
    if (digits_and_dots && w.find('.') != std::string::npos && w[0] != '.') return w;
  }
  return "";
}

class CudaKernel final : public LoadedKernel {
 public:
  CudaKernel(void* handle, EntryFn entry, const bool* lost)
      : handle_(handle), entry_(entry), lost_(lost) {}
  ~CudaKernel() override {
    // Unloading unregisters the module; after a sticky error the driver may not cope, and the
    // process is about to exit anyway.
    if (handle_ && !*lost_) ::dlclose(handle_);
  }
  EntryFn entry() const { return entry_; }

 private:
  void* handle_;
  EntryFn entry_;
  const bool* lost_;
};

class CudaDevice final : public Device {
 public:
  ~CudaDevice() override;
  Status init(const RunnerJob& job);

  DeviceFacts facts() override;
  double measure_fp32_tflops() override;
  Result<DeviceBuffer> alloc(size_t bytes) override;
  void free(DeviceBuffer& b) override;
  Status upload(DeviceBuffer& b, const void* data, size_t bytes) override;
  Status download(const DeviceBuffer& b, void* data, size_t bytes) override;
  Status fill_u32(DeviceBuffer& b, uint32_t word) override;
  Result<std::unique_ptr<LoadedKernel>> load(const RunnerTask& task, const RunnerJob& job) override;
  LaunchOutcome launch(LoadedKernel& k, const RunnerTask& task, const RunnerJob& job,
                       std::vector<DeviceBuffer>& arrays, bool timed) override;
  LaunchOutcome baseline(const std::string& name, const RunnerTask& task, const RunnerJob& job,
                         std::vector<DeviceBuffer>& arrays, bool timed) override;
  void flush_caches() override;
  double clock_mhz() override;
  bool lost() override { return lost_; }

 private:
  int attr(cudaDeviceAttr a) const {
    int v = 0;
    if (cudaDeviceGetAttribute(&v, a, index_) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return v;
  }
  // Notes a failed runtime call: marks the device lost when the error is sticky or the context
  // no longer answers.
  void check_alive(cudaError_t e) {
    if (e == cudaSuccess) return;
    (void)cudaGetLastError();
    if (is_sticky(e)) {
      lost_ = true;
      return;
    }
    if (cudaDeviceSynchronize() != cudaSuccess) lost_ = true;
    (void)cudaGetLastError();
  }
  Status fail_status(cudaError_t e, std::string_view what) {
    check_alive(e);
    return Status::error(fmt::format("{} failed: {}", what, err_text(e)));
  }
  // Runs `call` (which launches work) once: untimed, or timed with events recorded on the
  // runner's stream around the call plus a full device synchronization, so that work the call
  // leaves running, on any stream, is inside the interval. `call` returns the host function's
  // return code.
  LaunchOutcome run(const std::function<int()>& call, bool timed, std::string_view what);
  Status load_fma_module();

  int index_ = 0;
  std::string pci_bus_id_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::string cublas_error_;
  void* workspace_ = nullptr;
  void* flush_buf_ = nullptr;
  size_t flush_bytes_ = 0;
  int flush_round_ = 0;
  CUmodule fma_module_ = nullptr;
  CUfunction fma_fn_ = nullptr;
  bool lost_ = false;
};

Status CudaDevice::init(const RunnerJob& job) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess)
    return Status::error(fmt::format("no CUDA device (cudaGetDeviceCount: {})", err_text(e)));
  if (count == 0) return Status::error("no CUDA device (cudaGetDeviceCount: 0 devices)");
  index_ = -1;
  const std::string& sel = job.device;
  if (sel.empty()) {
    index_ = 0;
  } else if (all_digits(sel)) {
    index_ = std::stoi(sel);
    if (index_ >= count)
      return Status::error(
          fmt::format("CUDA device {} does not exist: this machine has {} (indices 0 to {})", sel,
                      count, count - 1));
  } else {
    std::vector<std::string> names;
    for (int i = 0; i < count; ++i) {
      char name[256] = {0};
      cudaDeviceProp p{};
      if (cudaGetDeviceProperties(&p, i) == cudaSuccess)
        std::snprintf(name, sizeof name, "%s", p.name);
      names.push_back(name);
      if (index_ < 0 && lower(name).find(lower(sel)) != std::string::npos) index_ = i;
    }
    if (index_ < 0)
      return Status::error(
          fmt::format("no CUDA device matches '{}' (devices: {})", sel, fmt::join(names, ", ")));
  }
  if ((e = cudaSetDevice(index_)) != cudaSuccess)
    return Status::error(fmt::format("cannot use CUDA device {}: {}", index_, err_text(e)));
  if ((e = cudaFree(nullptr)) != cudaSuccess)
    return Status::error(
        fmt::format("cannot create a context on CUDA device {}: {}", index_, err_text(e)));
  if (Status s = g_cu.load(); !s) return s;
  if (CUresult r = g_cu.Init(0); r != CUDA_SUCCESS)
    return Status::error(fmt::format("cuInit failed: {}", cu_text(r)));
  char pci[64] = {0};
  if (cudaDeviceGetPCIBusId(pci, sizeof pci, index_) == cudaSuccess) pci_bus_id_ = pci;
  if ((e = cudaStreamCreate(&stream_)) != cudaSuccess)
    return Status::error(fmt::format("cudaStreamCreate failed: {}", err_text(e)));
  if ((e = cudaEventCreate(&start_)) != cudaSuccess || (e = cudaEventCreate(&stop_)) != cudaSuccess)
    return Status::error(fmt::format("cudaEventCreate failed: {}", err_text(e)));

  // The baseline library is ready before any candidate is loaded.
  if (cublasStatus_t s = cublasCreate(&cublas_); s != CUBLAS_STATUS_SUCCESS) {
    cublas_ = nullptr;
    cublas_error_ = fmt::format("cublasCreate failed: {}", cublas_text(s));
  } else {
    cublasSetStream(cublas_, stream_);
    cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH);  // no TF32 for fp32
    if (cudaMalloc(&workspace_, kCublasWorkspaceBytes) == cudaSuccess) {
      cublasSetWorkspace(cublas_, workspace_, kCublasWorkspaceBytes);
    } else {
      (void)cudaGetLastError();
      workspace_ = nullptr;
    }
  }

  int l2 = attr(cudaDevAttrL2CacheSize);
  flush_bytes_ = 2 * static_cast<size_t>(l2 > 0 ? l2 : (32 << 20));
  if (cudaMalloc(&flush_buf_, flush_bytes_) != cudaSuccess) {
    (void)cudaGetLastError();
    flush_buf_ = nullptr;
  }
  if ((e = cudaDeviceSynchronize()) != cudaSuccess)
    return Status::error(fmt::format("CUDA device {} failed at start-up: {}", index_, err_text(e)));
  return Status::ok();
}

CudaDevice::~CudaDevice() {
  if (lost_) return;  // the context is unusable; the process exits
  cudaDeviceSynchronize();
  if (fma_module_) g_cu.ModuleUnload(fma_module_);
  if (cublas_) cublasDestroy(cublas_);
  if (workspace_) cudaFree(workspace_);
  if (flush_buf_) cudaFree(flush_buf_);
  if (start_) cudaEventDestroy(start_);
  if (stop_) cudaEventDestroy(stop_);
  if (stream_) cudaStreamDestroy(stream_);
}

DeviceFacts CudaDevice::facts() {
  DeviceFacts f;
  f.backend = "cuda";
  f.vendor = "NVIDIA";
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, index_) == cudaSuccess) {
    f.name = p.name;
    f.memory_bytes = static_cast<int64_t>(p.totalGlobalMem);
    f.shared_memory_per_group = static_cast<int64_t>(p.sharedMemPerBlock);
    f.shared_memory_per_group_optin = static_cast<int64_t>(p.sharedMemPerBlockOptin);
  } else {
    (void)cudaGetLastError();
  }
  int major = attr(cudaDevAttrComputeCapabilityMajor);
  int minor = attr(cudaDevAttrComputeCapabilityMinor);
  f.arch = fmt::format("sm_{}{}{}", major, minor, (major == 9 && minor == 0) ? "a" : "");
  f.compute_units = attr(cudaDevAttrMultiProcessorCount);
  f.subgroup_size = attr(cudaDevAttrWarpSize);
  f.max_threads_per_group = attr(cudaDevAttrMaxThreadsPerBlock);
  f.l2_bytes = attr(cudaDevAttrL2CacheSize);
  if (f.shared_memory_per_group == 0)
    f.shared_memory_per_group = attr(cudaDevAttrMaxSharedMemoryPerBlock);
  if (f.shared_memory_per_group_optin == 0)
    f.shared_memory_per_group_optin = attr(cudaDevAttrMaxSharedMemoryPerBlockOptin);
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  std::string cuda_driver = fmt::format("{}.{}", drv / 1000, (drv % 1000) / 10);
  std::string kernel_module = nvidia_driver_version();
  f.driver = kernel_module.empty() ? cuda_driver : kernel_module;
  f.api_version = fmt::format("{}.{}", rt / 1000, (rt % 1000) / 10);
  double max_clock = attr(cudaDevAttrClockRate) / 1000.0;
  double now = clock_mhz();
  f.clock_mhz = now > 0 ? now : max_clock;

  auto& x = f.extra;
  x["compute_capability"] = fmt::format("{}.{}", major, minor);
  x["cuda_driver"] = cuda_driver;
  if (!kernel_module.empty()) x["nvidia_driver"] = kernel_module;
  x["cuda_runtime"] = f.api_version;
  x["cuda_device_index"] = std::to_string(index_);
  if (!pci_bus_id_.empty()) x["pci_bus_id"] = pci_bus_id_;
  x["max_sm_clock_mhz"] = fmt::format("{:.0f}", max_clock);
  x["memory_clock_mhz"] = fmt::format("{:.0f}", attr(cudaDevAttrMemoryClockRate) / 1000.0);
  x["memory_bus_width_bits"] = std::to_string(attr(cudaDevAttrGlobalMemoryBusWidth));
  x["shared_memory_per_sm"] = std::to_string(attr(cudaDevAttrMaxSharedMemoryPerMultiprocessor));
  x["registers_per_block"] = std::to_string(attr(cudaDevAttrMaxRegistersPerBlock));
  x["registers_per_sm"] = std::to_string(attr(cudaDevAttrMaxRegistersPerMultiprocessor));
  x["max_threads_per_sm"] = std::to_string(attr(cudaDevAttrMaxThreadsPerMultiProcessor));
  x["max_persisting_l2_bytes"] = std::to_string(attr(cudaDevAttrMaxPersistingL2CacheSize));
  x["ecc"] = attr(cudaDevAttrEccEnabled) ? "on" : "off";
  x["cublas"] = cublas_ ? "ready" : cublas_error_;
#ifdef PEAK_HAVE_NVML
  x["nvml"] = nvml_available() ? "yes" : "no";
  if (nvml_available() && !pci_bus_id_.empty())
    x["throttle_reasons"] = fmt::format("0x{:x}", nvml_throttle_reasons_pci(pci_bus_id_));
#else
  x["nvml"] = "no";
#endif
  return f;
}

double CudaDevice::clock_mhz() {
#ifdef PEAK_HAVE_NVML
  if (!pci_bus_id_.empty()) {
    double c = nvml_sm_clock_mhz_pci(pci_bus_id_);
    if (c > 0) return c;
  }
  return nvml_sm_clock_mhz(index_);
#else
  return 0;
#endif
}

Result<DeviceBuffer> CudaDevice::alloc(size_t bytes) {
  if (lost_) return make_error("the CUDA device was lost (sticky error)");
  void* p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 4)); e != cudaSuccess) {
    check_alive(e);
    return make_error(fmt::format("cudaMalloc({}) failed: {}", bytes, err_text(e)));
  }
  return DeviceBuffer{p, bytes};
}

void CudaDevice::free(DeviceBuffer& b) {
  if (b.handle && !lost_) {
    if (cudaError_t e = cudaFree(b.handle); e != cudaSuccess) check_alive(e);
  }
  b.handle = nullptr;
  b.bytes = 0;
}

Status CudaDevice::upload(DeviceBuffer& b, const void* data, size_t bytes) {
  if (lost_) return Status::error("the CUDA device was lost (sticky error)");
  if (bytes > b.bytes)
    return Status::error(fmt::format("upload of {} bytes into a buffer of {}", bytes, b.bytes));
  cudaError_t e = cudaMemcpyAsync(b.handle, data, bytes, cudaMemcpyHostToDevice, stream_);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);
  if (e != cudaSuccess) return fail_status(e, "cudaMemcpy (upload)");
  return Status::ok();
}

Status CudaDevice::download(const DeviceBuffer& b, void* data, size_t bytes) {
  if (lost_) return Status::error("the CUDA device was lost (sticky error)");
  if (bytes > b.bytes)
    return Status::error(fmt::format("download of {} bytes from a buffer of {}", bytes, b.bytes));
  cudaError_t e = cudaMemcpyAsync(data, b.handle, bytes, cudaMemcpyDeviceToHost, stream_);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);
  if (e != cudaSuccess) return fail_status(e, "cudaMemcpy (download)");
  return Status::ok();
}

Status CudaDevice::fill_u32(DeviceBuffer& b, uint32_t word) {
  if (lost_) return Status::error("the CUDA device was lost (sticky error)");
  auto base = reinterpret_cast<CUdeviceptr>(b.handle);
  auto stream = reinterpret_cast<CUstream>(stream_);
  size_t words = b.bytes / 4;
  CUresult r = CUDA_SUCCESS;
  if (words > 0) r = g_cu.MemsetD32Async(base, word, words, stream);
  for (size_t o = words * 4; r == CUDA_SUCCESS && o < b.bytes; ++o)
    r = g_cu.MemsetD8Async(base + o, static_cast<unsigned char>(word >> (8 * (o % 4))), 1, stream);
  if (r != CUDA_SUCCESS) {
    (void)cudaGetLastError();
    if (cudaDeviceSynchronize() != cudaSuccess) lost_ = true;
    return Status::error(fmt::format("cuMemsetD32Async failed: {}", cu_text(r)));
  }
  if (cudaError_t e = cudaStreamSynchronize(stream_); e != cudaSuccess)
    return fail_status(e, "poisoning a buffer");
  return Status::ok();
}

Result<std::unique_ptr<LoadedKernel>> CudaDevice::load(const RunnerTask& task, const RunnerJob&) {
  if (lost_) return load_error(Disposition::crashed, "the CUDA device was lost (sticky error)");
  (void)cudaGetLastError();
  ::dlerror();
  void* h = ::dlopen(task.artifact.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* why = ::dlerror();
    return load_error(Disposition::launch_failed, fmt::format("cannot load {}: {}", task.artifact,
                                                              why ? why : "dlopen failed"));
  }
  void* sym = ::dlsym(h, "peak_entry");
  if (sym == nullptr) {
    ::dlclose(h);
    return load_error(
        Disposition::launch_failed,
        fmt::format("{} does not export peak_entry (was it built by peak?)", task.artifact));
  }
  // Static initializers of the candidate ran inside dlopen; they must not have broken anything.
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
    check_alive(e);
    if (lost_)
      return load_error(Disposition::crashed, fmt::format("loading {} left a sticky error: {}",
                                                          task.artifact, err_text(e)));
  }
  return std::unique_ptr<LoadedKernel>(
      std::make_unique<CudaKernel>(h, reinterpret_cast<EntryFn>(sym), &lost_));
}

LaunchOutcome CudaDevice::run(const std::function<int()>& call, bool timed, std::string_view what) {
  LaunchOutcome o;
  if (lost_) {
    o.disposition = Disposition::crashed;
    o.message = "the CUDA device was lost (sticky error) before this launch";
    return o;
  }
  (void)cudaGetLastError();  // nothing stale is charged to this call
  auto h0 = Clock::now();
  if (timed) {
    if (cudaError_t e = cudaEventRecord(start_, stream_); e != cudaSuccess) {
      check_alive(e);
      o.disposition = lost_ ? Disposition::crashed : Disposition::launch_failed;
      o.message = fmt::format("cudaEventRecord failed before {}: {}", what, err_text(e));
      return o;
    }
  }
  int rc = call();
  cudaError_t launch_err = cudaGetLastError();
  cudaError_t sync_err = cudaDeviceSynchronize();
  bool stop_recorded = false;
  if (timed && launch_err == cudaSuccess && sync_err == cudaSuccess) {
    cudaError_t e = cudaEventRecord(stop_, stream_);
    if (e == cudaSuccess) e = cudaEventSynchronize(stop_);
    if (e != cudaSuccess) sync_err = e;
    stop_recorded = e == cudaSuccess;
  }
  auto h1 = Clock::now();
  o.host_ms = std::chrono::duration<double, std::milli>(h1 - h0).count();

  cudaError_t err = launch_err != cudaSuccess ? launch_err : sync_err;
  if (is_sticky(sync_err)) err = sync_err;
  if (err != cudaSuccess) {
    bool sticky = is_sticky(err);
    check_alive(err);
    if (sticky || lost_) {
      lost_ = true;
      o.disposition = Disposition::crashed;
      o.message = fmt::format("{} caused a sticky CUDA error: {} (the context is lost)", what,
                              err_text(err));
    } else if (is_config_error(err)) {
      o.disposition = Disposition::invalid_config;
      o.message = fmt::format("{} cannot run with this configuration: {}", what, err_text(err));
    } else {
      o.disposition = Disposition::launch_failed;
      o.message = fmt::format("{} failed: {}", what, err_text(err));
    }
    return o;
  }
  if (rc == kInvalidConfig) {
    o.disposition = Disposition::invalid_config;
    o.message = fmt::format("{} returned PEAK_INVALID_CONFIG", what);
    return o;
  }
  if (rc != 0) {
    o.disposition = Disposition::launch_failed;
    o.message = fmt::format("{} returned {} (expected 0, or PEAK_INVALID_CONFIG)", what, rc);
    return o;
  }
  if (timed && stop_recorded) {
    float ms = 0;
    if (cudaError_t e = cudaEventElapsedTime(&ms, start_, stop_); e != cudaSuccess) {
      check_alive(e);
      o.disposition = lost_ ? Disposition::crashed : Disposition::launch_failed;
      o.message = fmt::format("cudaEventElapsedTime failed: {}", err_text(e));
      return o;
    }
    o.device_ms = ms;
  }
  return o;
}

LaunchOutcome CudaDevice::launch(LoadedKernel& k, const RunnerTask& task, const RunnerJob& job,
                                 std::vector<DeviceBuffer>& arrays, bool timed) {
  LaunchOutcome bad;
  bad.disposition = Disposition::launch_failed;
  auto* ck = dynamic_cast<CudaKernel*>(&k);
  if (ck == nullptr) {
    bad.message = "internal: the kernel was not loaded by the CUDA device";
    return bad;
  }
  if (arrays.size() != job.arrays.size()) {
    bad.message =
        fmt::format("internal: {} buffers for {} arrays", arrays.size(), job.arrays.size());
    return bad;
  }
  std::vector<void*> ptrs;
  for (auto& b : arrays) ptrs.push_back(b.handle);
  std::vector<long long> scalars;
  for (const ScalarSpec& s : job.scalars) {
    auto it = task.shape.values.find(s.name);
    if (it == task.shape.values.end()) {
      bad.message = fmt::format("the task gives no value for scalar '{}'", s.name);
      return bad;
    }
    scalars.push_back(static_cast<long long>(it->second));
  }
  EntryFn entry = ck->entry();
  cudaStream_t stream = stream_;
  return run([&] { return entry(ptrs.data(), scalars.data(), stream); }, timed, "peak_host");
}

LaunchOutcome CudaDevice::baseline(const std::string& name, const RunnerTask& task,
                                   const RunnerJob& job, std::vector<DeviceBuffer>& arrays,
                                   bool timed) {
  LaunchOutcome no;
  no.disposition = Disposition::not_run;
  if (name != "cublas") {
    no.message = fmt::format("unknown baseline '{}' (the CUDA runner knows 'cublas')", name);
    return no;
  }
  if (job.family != "matmul") {
    no.message = fmt::format("cuBLAS is a baseline only for family matmul, not '{}'", job.family);
    return no;
  }
  if (cublas_ == nullptr) {
    no.message = cublas_error_.empty() ? "cuBLAS is not available" : cublas_error_;
    return no;
  }
  int ia = -1, ib = -1, ic = -1;
  for (size_t i = 0; i < job.arrays.size(); ++i) {
    if (job.arrays[i].name == "A") ia = static_cast<int>(i);
    if (job.arrays[i].name == "B") ib = static_cast<int>(i);
    if (job.arrays[i].name == "C") ic = static_cast<int>(i);
  }
  if (ia < 0 || ib < 0 || ic < 0 || arrays.size() != job.arrays.size()) {
    no.message = "the cuBLAS baseline needs arrays A, B and C";
    return no;
  }
  auto dim = [&](const char* s) -> int64_t {
    auto it = task.shape.values.find(s);
    return it == task.shape.values.end() ? -1 : it->second;
  };
  int64_t M = dim("M"), N = dim("N"), K = dim("K");
  if (M <= 0 || N <= 0 || K <= 0 || M > INT32_MAX || N > INT32_MAX || K > INT32_MAX) {
    no.message = "the cuBLAS baseline needs scalars M, N and K (positive)";
    return no;
  }
  DType ta = job.arrays[ia].dtype, tb = job.arrays[ib].dtype, tc = job.arrays[ic].dtype;
  bool fp32 = ta == DType::f32 && tb == DType::f32 && tc == DType::f32;
  bool fp16 = ta == DType::f16 && tb == DType::f16 && (tc == DType::f32 || tc == DType::f16);
  if (!fp32 && !fp16) {
    no.message = "the cuBLAS baseline covers f32 x f32 -> f32 and f16 x f16 -> f32/f16";
    return no;
  }
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
  void* A = arrays[ia].handle;
  void* B = arrays[ib].handle;
  void* C = arrays[ic].handle;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  const float alpha = 1.0f, beta = 0.0f;
  // Row-major C[M,N] = A[M,K] B[K,N] is column-major C^T[N,M] = B^T[N,K] A^T[K,M].
  auto call = [&]() -> int {
    if (fp32) {
      status = cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha,
                           static_cast<const float*>(B), n, static_cast<const float*>(A), k, &beta,
                           static_cast<float*>(C), n);
    } else {
      status = cublasGemmEx(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, B, CUDA_R_16F, n, A,
                            CUDA_R_16F, k, &beta, C, tc == DType::f32 ? CUDA_R_32F : CUDA_R_16F, n,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
    return 0;
  };
  LaunchOutcome o = run(call, timed, fp32 ? "cublasSgemm" : "cublasGemmEx");
  if (o.disposition == Disposition::passed && status != CUBLAS_STATUS_SUCCESS) {
    o.disposition = Disposition::launch_failed;
    o.message =
        fmt::format("{} failed: {}", fp32 ? "cublasSgemm" : "cublasGemmEx", cublas_text(status));
  }
  return o;
}

void CudaDevice::flush_caches() {
  if (lost_ || flush_buf_ == nullptr) return;
  int value = (flush_round_++ & 1) ? 0x5A : 0xA5;
  cudaError_t e = cudaMemsetAsync(flush_buf_, value, flush_bytes_, stream_);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);
  if (e != cudaSuccess) check_alive(e);
}

Status CudaDevice::load_fma_module() {
  if (fma_fn_) return Status::ok();
  std::string ptx = cuda::fma_bench_ptx();
  if (CUresult r = g_cu.ModuleLoadData(&fma_module_, ptx.c_str()); r != CUDA_SUCCESS)
    return Status::error(fmt::format("cannot load the FMA benchmark: {}", cu_text(r)));
  if (CUresult r = g_cu.ModuleGetFunction(&fma_fn_, fma_module_, cuda::kFmaBenchName);
      r != CUDA_SUCCESS)
    return Status::error(fmt::format("cannot find the FMA benchmark kernel: {}", cu_text(r)));
  return Status::ok();
}

double CudaDevice::measure_fp32_tflops() {
  if (lost_) return 0;
  if (!load_fma_module()) return 0;
  const int threads = 256;
  int sms = std::max(1, attr(cudaDevAttrMultiProcessorCount));
  int per_sm = std::max(threads, attr(cudaDevAttrMaxThreadsPerMultiProcessor));
  int blocks = sms * (per_sm / threads);
  size_t total_threads = static_cast<size_t>(blocks) * threads;
  void* out = nullptr;
  if (cudaMalloc(&out, total_threads * sizeof(float)) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  auto stream = reinterpret_cast<CUstream>(stream_);
  float a = 0.999f, b = 0.001f;
  // Seconds for one launch of `iters` iterations, or a negative value on failure.
  auto time_once = [&](int iters) -> double {
    CUdeviceptr p = reinterpret_cast<CUdeviceptr>(out);
    void* args[] = {&p, &iters, &a, &b};
    if (cudaEventRecord(start_, stream_) != cudaSuccess) return -1;
    if (g_cu.LaunchKernel(fma_fn_, static_cast<unsigned>(blocks), 1, 1, threads, 1, 1, 0, stream,
                          args, nullptr) != CUDA_SUCCESS)
      return -1;
    if (cudaEventRecord(stop_, stream_) != cudaSuccess) return -1;
    if (cudaEventSynchronize(stop_) != cudaSuccess) return -1;
    float ms = 0;
    if (cudaEventElapsedTime(&ms, start_, stop_) != cudaSuccess) return -1;
    return ms / 1e3;
  };
  double best = 0;
  int iters = 64;
  double t = time_once(iters);  // warm-up (module load, clocks)
  while (t >= 0 && t < 0.02 && iters < (1 << 22)) {
    iters *= 4;
    t = time_once(iters);
  }
  for (int rep = 0; t >= 0 && rep < 5; ++rep) {
    t = time_once(iters);
    if (t > 0) {
      double flops = 2.0 * cuda::kFmaPerIteration * static_cast<double>(iters) *
                     static_cast<double>(total_threads);
      best = std::max(best, flops / t / 1e12);
    }
  }
  if (t < 0) check_alive(cudaDeviceSynchronize());
  cudaFree(out);
  (void)cudaGetLastError();
  return best;
}

}  // namespace

Result<std::unique_ptr<Device>> make_device(const RunnerJob& job) {
  auto d = std::make_unique<CudaDevice>();
  if (Status s = d->init(job); !s) return make_error(s.message());
  return std::unique_ptr<Device>(std::move(d));
}

}  // namespace peak
