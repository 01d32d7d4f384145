// The CUDA device of the peak-runner-cuda executable (runner/device.h): device buffers on one
// stream created at start-up; candidates are cubins (device code only) loaded with
// cuModuleLoadData, and their evaluated launch plans run with cuLaunchKernelEx on that stream
// (TMA tensor maps made with cuTensorMapEncodeTiled, dynamic shared memory limits raised,
// clusters as launch attributes). Timed samples are events recorded on the stream tight around
// the plan's steps; the cuBLAS baseline and the same-traffic copy (cudaMemcpyAsync, and a vector
// copy kernel in PTX) are timed the same way. Also L2 flushing and an FP32 FMA-throughput
// microbenchmark (PTX through the driver API). No candidate code runs on the host. Compiled only
// into peak-runner-cuda; docs/backend-cuda.md describes it.
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
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "backend/cuda/copy_kernel_ptx.h"
#include "backend/cuda/cublaslt_device.h"
#include "backend/cuda/cudnn_baseline.h"
#include "backend/cuda/dl_library.h"
#include "backend/cuda/fma_bench_ptx.h"
#include "backend/cuda/generate_ptx.h"
#include "family/family.h"
#include "runner/device.h"
#include "runner/execute.h"
#include "util/fs.h"

#if __has_include("runner/nvml.h")
#include "runner/nvml.h"
#define PEAK_HAVE_NVML 1
#endif

namespace peak {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kCublasWorkspaceBytes = 32u << 20;

// The driver API, loaded at run time: the runner starts (and says clearly that there is no GPU)
// on machines without the NVIDIA driver.
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
  decltype(&::cuLaunchKernelEx) LaunchKernelEx = nullptr;
  decltype(&::cuFuncSetAttribute) FuncSetAttribute = nullptr;
  decltype(&::cuFuncGetAttribute) FuncGetAttribute = nullptr;
  decltype(&::cuTensorMapEncodeTiled) TensorMapEncodeTiled = nullptr;
  decltype(&::cuFuncGetParamInfo) FuncGetParamInfo = nullptr;  // optional (CUDA 12.4+)

  Status load() {
    lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
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
    get(LaunchKernelEx, "cuLaunchKernelEx");
    get(FuncSetAttribute, "cuFuncSetAttribute");
    get(FuncGetAttribute, "cuFuncGetAttribute");
    get(TensorMapEncodeTiled, "cuTensorMapEncodeTiled");
    FuncGetParamInfo =
        reinterpret_cast<decltype(FuncGetParamInfo)>(::dlsym(lib, "cuFuncGetParamInfo"));
    if (!missing.empty())
      return Status::error(
          fmt::format("the NVIDIA driver library lacks {}: update the driver", missing));
    return Status::ok();
  }
};

DriverApi g_cu;

// cuBLAS, loaded when a job needs it (its baseline, or the probe that reports it): linking it
// would make every runner start map and initialize the library (tens of milliseconds), also the
// validation and screening jobs that never call it.
struct CublasApi {
  decltype(&::cublasCreate_v2) Create = nullptr;
  decltype(&::cublasDestroy_v2) Destroy = nullptr;
  decltype(&::cublasSetStream_v2) SetStream = nullptr;
  decltype(&::cublasSetMathMode) SetMathMode = nullptr;
  decltype(&::cublasSetWorkspace_v2) SetWorkspace = nullptr;
  decltype(&::cublasSgemm_v2) Sgemm = nullptr;
  // cublasGemmEx has C++ overloads: the C entry point's type, spelled out.
  cublasStatus_t (*GemmEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                           const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                           int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                           cublasGemmAlgo_t) = nullptr;
  cuda::DlLibrary lib;
  Status load() {
    return lib.load(fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR), [&](auto get) {
      get(Create, "cublasCreate_v2");
      get(Destroy, "cublasDestroy_v2");
      get(SetStream, "cublasSetStream_v2");
      get(SetMathMode, "cublasSetMathMode");
      get(SetWorkspace, "cublasSetWorkspace_v2");
      get(Sgemm, "cublasSgemm_v2");
      get(GemmEx, "cublasGemmEx");
    });
  }
};

CublasApi g_cublas;

// Whether a task of the job has the baseline `name` (timed beside the candidate, or run for
// reference outputs). cuBLAS is loaded for the probe too, which says whether it is ready.
bool job_times_baseline(const RunnerJob& job, std::string_view name) {
  return std::any_of(job.tasks.begin(), job.tasks.end(),
                     [&](const RunnerTask& t) { return t.baseline == name; });
}
bool job_needs_cublas(const RunnerJob& job) {
  return job.mode == "probe" || job_times_baseline(job, "cublas");
}

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

// Launch errors of the driver API that mean "this configuration cannot run here".
bool is_config_result(CUresult r) {
  switch (r) {
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
    case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
    case CUDA_ERROR_INVALID_CLUSTER_SIZE:
      return true;
    default:
      return false;
  }
}

// Loads one of the runner's own PTX modules (the driver compiles it for the device) and its
// kernel `name`; `what` names it in errors.
Status load_ptx(const std::string& ptx, const char* name, const char* what, CUmodule& module,
                CUfunction& fn) {
  if (CUresult r = g_cu.ModuleLoadData(&module, ptx.c_str()); r != CUDA_SUCCESS)
    return Status::error(fmt::format("cannot load {}: {}", what, cu_text(r)));
  if (CUresult r = g_cu.ModuleGetFunction(&fn, module, name); r != CUDA_SUCCESS) {
    fn = nullptr;
    return Status::error(fmt::format("cannot find the kernel of {}: {}", what, cu_text(r)));
  }
  return Status::ok();
}

// A loaded cubin: the module and, per kernel symbol, its function and parameter sizes.
class CudaKernel final : public LoadedKernel {
 public:
  CudaKernel(CUmodule module, const bool* lost) : module_(module), lost_(lost) {}
  ~CudaKernel() override {
    // After a sticky error the driver may not cope, and the process is about to exit anyway.
    if (module_ && !*lost_) g_cu.ModuleUnload(module_);
  }
  struct Function {
    CUfunction fn = nullptr;
    std::vector<size_t> param_sizes;  // empty when the driver cannot tell
    bool param_info = false;
  };
  std::map<std::string, Function> functions;

 private:
  CUmodule module_;
  const bool* lost_;
};

class CudaDevice final : public Device {
 public:
  ~CudaDevice() override;
  Status init(const RunnerJob& job);

  DeviceFacts facts() override;
  json startup_seconds() const override { return startup_; }
  double measure_fp32_tflops() override;
  Result<DeviceBuffer> alloc(size_t bytes) override;
  void free(DeviceBuffer& b) override;
  Status upload(DeviceBuffer& b, const void* data, size_t bytes) override;
  Status download(const DeviceBuffer& b, void* data, size_t bytes) override;
  Status fill_u32(DeviceBuffer& b, uint32_t word) override;
  // Fresh inputs by peak's generator kernel (generate_ptx.h); timed checks read their elements
  // alone.
  bool generates() override { return !lost_ && load_generate_module(false); }
  // e4m3 needs the fp8 module (sm_89 and newer); elsewhere the runner makes those bytes itself.
  bool can_generate(const InputGenerator& g, size_t) override {
    return g.dtype != DType::e4m3 || load_generate_module(true);
  }
  Status generate(DeviceBuffer& b, const InputGenerator& g, int64_t count,
                  const std::vector<uint8_t>& tail) override;
  Status read_elements(const DeviceBuffer& b, size_t element_bytes,
                       const std::vector<int64_t>& positions, std::vector<uint8_t>& out) override;
  Result<std::unique_ptr<LoadedKernel>> load(const RunnerTask& task, const RunnerJob& job,
                                             const LaunchPlan& plan) override;
  LaunchOutcome launch(LoadedKernel& k, const RunnerTask& task, const RunnerJob& job,
                       const LaunchPlan& plan, TaskBuffers& buffers, bool timed) override;
  LaunchOutcome baseline(const std::string& name, const RunnerTask& task, const RunnerJob& job,
                         std::vector<DeviceBuffer>& arrays, bool timed) override;
  // The same-traffic copy: cudaMemcpyAsync device to device, and peak's own 16-byte vector copy
  // kernel (copy_kernel_ptx.h); each timed by run() like a launch.
  std::vector<std::string> copy_methods() override { return {"memcpy", "vector-kernel"}; }
  LaunchOutcome copy(const std::string& method, const DeviceBuffer& src, DeviceBuffer& dst,
                     size_t bytes, bool timed) override;
  void flush_caches() override;
  double clock_mhz() override;
  int64_t memory_in_use() override {
    if (lost_) return -1;
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
      (void)cudaGetLastError();
      return -1;
    }
    return static_cast<int64_t>(total_b - free_b);
  }
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
  // Runs `enqueue` (which puts work on the runner's stream and returns CUDA_SUCCESS or the
  // failing launch's result) once: untimed, or timed with events recorded on the stream tight
  // around it. After the end event, outside the timed window, the whole device is synchronized:
  // errors surface there, and a device still busy afterwards is flagged (`outlived`).
  LaunchOutcome run(const std::function<CUresult()>& enqueue, bool timed, std::string_view what);
  LaunchOutcome cudnn_baseline(const RunnerTask& task, const RunnerJob& job,
                               std::vector<DeviceBuffer>& arrays, bool timed);
  LaunchOutcome cublaslt_baseline(const RunnerTask& task, const RunnerJob& job,
                                  std::vector<DeviceBuffer>& arrays, bool timed);
  Status load_fma_module();
  Status load_copy_module();
  // The input generator's module: [0] every dtype but e4m3, [1] e4m3 too (sm_89 and newer).
  bool load_generate_module(bool fp8);
  // Puts one launch of the vector copy kernel on the stream.
  CUresult enqueue_vector_copy(void* dst, const void* src, size_t bytes);
  // The gate kernel (fma_bench_ptx.h) and its host-mapped flag; false when unavailable (the
  // samples then include the host's enqueue time, and say so).
  bool gate_ready();

  int index_ = 0;
  std::string pci_bus_id_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  json startup_ = json::object();  // seconds per start-up step (init)
  cublasHandle_t cublas_ = nullptr;
  std::string cublas_error_;
  std::unique_ptr<CudnnBaselines> cudnn_;  // on the stream; its handle only for its families
  cuda::CublasLtFp8 cublaslt_;             // fp8 matmul; opened by the jobs that time it
  void* workspace_ = nullptr;
  void* flush_buf_ = nullptr;
  size_t flush_bytes_ = 0;
  int flush_round_ = 0;
  CUmodule fma_module_ = nullptr;
  CUfunction fma_fn_ = nullptr;
  CUmodule gate_module_ = nullptr;
  CUfunction gate_fn_ = nullptr;
  CUmodule copy_module_ = nullptr;
  struct GenerateModule {
    CUmodule module = nullptr;
    CUfunction fn = nullptr;
    bool failed = false;
  };
  GenerateModule generate_[2];
  unsigned* nonzero_ = nullptr;  // the generator's flag: a nonzero element was written
  CUfunction copy_fn_ = nullptr;
  volatile unsigned* gate_flag_ = nullptr;  // [0] release, [1] the gate timed out
  bool gate_failed_ = false;
  bool lost_ = false;
};

Status CudaDevice::init(const RunnerJob& job) {
  auto mark = std::chrono::steady_clock::now();
  auto step = [&](const char* name) {  // the seconds since the previous step
    auto now = std::chrono::steady_clock::now();
    startup_[name] = std::chrono::duration<double>(now - mark).count();
    mark = now;
  };
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
  step("select");
  if ((e = cudaFree(nullptr)) != cudaSuccess)
    return Status::error(
        fmt::format("cannot create a context on CUDA device {}: {}", index_, err_text(e)));
  step("context");
  if (Status s = g_cu.load(); !s) return s;
  if (CUresult r = g_cu.Init(0); r != CUDA_SUCCESS)
    return Status::error(fmt::format("cuInit failed: {}", cu_text(r)));
  char pci[64] = {0};
  if (cudaDeviceGetPCIBusId(pci, sizeof pci, index_) == cudaSuccess) pci_bus_id_ = pci;
  if ((e = cudaStreamCreate(&stream_)) != cudaSuccess)
    return Status::error(fmt::format("cudaStreamCreate failed: {}", err_text(e)));
  if ((e = cudaEventCreate(&start_)) != cudaSuccess || (e = cudaEventCreate(&stop_)) != cudaSuccess)
    return Status::error(fmt::format("cudaEventCreate failed: {}", err_text(e)));

  step("driver");
  // The baseline library is ready before any candidate is loaded.
  if (!job_needs_cublas(job)) {
    cublas_error_ = "cuBLAS is not loaded for this job (no task has the cuBLAS baseline)";
  } else if (Status st = g_cublas.load(); !st) {
    cublas_error_ = st.message();
  } else if (cublasStatus_t s = g_cublas.Create(&cublas_); s != CUBLAS_STATUS_SUCCESS) {
    cublas_ = nullptr;
    cublas_error_ = fmt::format("cublasCreate failed: {}", cublas_text(s));
  } else {
    g_cublas.SetStream(cublas_, stream_);
    g_cublas.SetMathMode(cublas_, CUBLAS_DEFAULT_MATH);  // no TF32 for fp32
    if (cudaMalloc(&workspace_, kCublasWorkspaceBytes) == cudaSuccess) {
      g_cublas.SetWorkspace(cublas_, workspace_, kCublasWorkspaceBytes);
    } else {
      (void)cudaGetLastError();
      workspace_ = nullptr;
    }
  }
  step("cublas");
  if (job_times_baseline(job, "cublaslt"))
    (void)cublaslt_.open();  // its error() says why, where it fails
  cudnn_ = std::make_unique<CudnnBaselines>(
      process_cudnn(),
      CudnnMemory{[this](size_t n) { return alloc(n); }, [this](DeviceBuffer& b) { free(b); }});
  cudnn_->open(job.family, stream_);

  step("cudnn");
  int l2 = attr(cudaDevAttrL2CacheSize);
  flush_bytes_ = 2 * static_cast<size_t>(l2 > 0 ? l2 : (32 << 20));
  if (cudaMalloc(&flush_buf_, flush_bytes_) != cudaSuccess) {
    (void)cudaGetLastError();
    flush_buf_ = nullptr;
  }
  if ((e = cudaDeviceSynchronize()) != cudaSuccess)
    return Status::error(fmt::format("CUDA device {} failed at start-up: {}", index_, err_text(e)));
  step("buffers");
  return Status::ok();
}

CudaDevice::~CudaDevice() {
  if (lost_) {  // the context is unusable; the process exits
    (void)cudnn_.release();
    return;
  }
  cudaDeviceSynchronize();
  cudnn_.reset();  // before the stream and the buffers it uses
  if (fma_module_) g_cu.ModuleUnload(fma_module_);
  if (gate_module_) g_cu.ModuleUnload(gate_module_);
  if (copy_module_) g_cu.ModuleUnload(copy_module_);
  for (GenerateModule& g : generate_)
    if (g.module) g_cu.ModuleUnload(g.module);
  if (nonzero_) cudaFree(nonzero_);
  if (gate_flag_) cudaFreeHost(const_cast<unsigned*>(gate_flag_));
  if (cublas_) g_cublas.Destroy(cublas_);
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
  if (cublaslt_.ready()) x["cublaslt"] = "ready";
  x["cudnn"] = process_cudnn().describe();  // "9.14.0", or "none: <why>"
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

bool CudaDevice::load_generate_module(bool fp8) {
  GenerateModule& g = generate_[fp8 ? 1 : 0];
  if (g.fn) return true;
  if (g.failed) return false;
  g.failed = true;  // until everything below succeeds
  if (!nonzero_) {
    void* flag = nullptr;
    if (cudaMalloc(&flag, sizeof(unsigned)) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    nonzero_ = static_cast<unsigned*>(flag);
  }
  if (!load_ptx(cuda::generate_ptx(fp8), cuda::kGenerateName,
                fp8 ? "the e4m3 input generator" : "the input generator", g.module, g.fn))
    return false;
  g.failed = false;
  return true;
}

Status CudaDevice::generate(DeviceBuffer& b, const InputGenerator& g, int64_t count,
                            const std::vector<uint8_t>& tail) {
  if (lost_) return Status::error("the CUDA device was lost (sticky error)");
  const bool fp8 = g.dtype == DType::e4m3;
  if (!load_generate_module(fp8))
    return Status::error(fp8 ? "the e4m3 input generator could not be loaded (it needs sm_89 or "
                               "newer and a driver of CUDA 12.1 or newer)"
                             : "the input generator could not be loaded");
  const size_t es = dtype_size(g.dtype);
  const size_t bytes = static_cast<size_t>(count) * es;
  if (count < 0 || bytes + tail.size() > b.bytes)
    return Status::error(fmt::format("{} generated bytes and a guard of {} into a buffer of {}",
                                     bytes, tail.size(), b.bytes));
  const int sms = std::max(1, attr(cudaDevAttrMultiProcessorCount));
  const auto blocks = static_cast<unsigned>(std::max<int64_t>(
      1, std::min<int64_t>((count + cuda::kGenerateThreads - 1) / cuda::kGenerateThreads,
                           int64_t{sms} * 8)));
  auto out = reinterpret_cast<CUdeviceptr>(b.handle);
  auto flag = reinterpret_cast<CUdeviceptr>(nonzero_);
  unsigned long long n = static_cast<unsigned long long>(count), stream = g.stream,
                     period = static_cast<unsigned long long>(std::max<int64_t>(g.period, 1));
  unsigned kind = static_cast<unsigned>(g.kind);
  unsigned dtype = g.dtype == DType::f32    ? 0
                   : g.dtype == DType::f16  ? 1
                   : g.dtype == DType::bf16 ? 2
                   : g.dtype == DType::e4m3 ? 4
                                            : 3;
  double a = g.a, d = g.d;
  void* args[] = {&out, &n, &stream, &period, &flag, &kind, &dtype, &a, &d};
  cudaError_t e = cudaMemsetAsync(nonzero_, 0, sizeof(unsigned), stream_);
  if (e != cudaSuccess) return fail_status(e, "cudaMemsetAsync (the generator's flag)");
  if (CUresult r =
          g_cu.LaunchKernel(generate_[fp8 ? 1 : 0].fn, blocks, 1, 1, cuda::kGenerateThreads, 1, 1,
                            0, reinterpret_cast<CUstream>(stream_), args, nullptr);
      r != CUDA_SUCCESS) {
    (void)cudaGetLastError();
    return Status::error(fmt::format("the input generator could not be launched: {}", cu_text(r)));
  }
  if (!tail.empty())
    e = cudaMemcpyAsync(static_cast<uint8_t*>(b.handle) + bytes, tail.data(), tail.size(),
                        cudaMemcpyHostToDevice, stream_);
  unsigned nonzero = 0;
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(&nonzero, nonzero_, sizeof nonzero, cudaMemcpyDeviceToHost, stream_);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);
  if (e == cudaSuccess && g.random && nonzero == 0 && count > 0)
    e = cudaMemcpy(static_cast<uint8_t*>(b.handle) + static_cast<size_t>(g.zero_fix_index) * es,
                   g.zero_fix.data(), es, cudaMemcpyHostToDevice);
  if (e != cudaSuccess) return fail_status(e, "the input generator");
  return Status::ok();
}

Status CudaDevice::read_elements(const DeviceBuffer& b, size_t element_bytes,
                                 const std::vector<int64_t>& positions, std::vector<uint8_t>& out) {
  if (lost_) return Status::error("the CUDA device was lost (sticky error)");
  out.assign(positions.size() * element_bytes, 0);
  cudaError_t e = cudaSuccess;
  for (size_t k = 0; k < positions.size() && e == cudaSuccess; ++k) {
    const auto at = static_cast<size_t>(positions[k]) * element_bytes;
    if (positions[k] < 0 || at + element_bytes > b.bytes)
      return Status::error(
          fmt::format("element {} is outside a buffer of {} bytes", positions[k], b.bytes));
    e = cudaMemcpyAsync(out.data() + k * element_bytes, static_cast<const uint8_t*>(b.handle) + at,
                        element_bytes, cudaMemcpyDeviceToHost, stream_);
  }
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);
  if (e != cudaSuccess) return fail_status(e, "cudaMemcpy (elements)");
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

Result<std::unique_ptr<LoadedKernel>> CudaDevice::load(const RunnerTask& task, const RunnerJob&,
                                                       const LaunchPlan& plan) {
  if (lost_) return load_error(Disposition::crashed, "the CUDA device was lost (sticky error)");
  std::ifstream in(task.artifact, std::ios::binary);
  std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof())
    return load_error(Disposition::launch_failed,
                      fmt::format("cannot read the cubin {}", task.artifact));
  if (image.empty())
    return load_error(Disposition::launch_failed, fmt::format("{} is empty", task.artifact));
  (void)cudaGetLastError();
  CUmodule module = nullptr;
  if (CUresult r = g_cu.ModuleLoadData(&module, image.data()); r != CUDA_SUCCESS)
    return load_error(Disposition::launch_failed,
                      fmt::format("cannot load the cubin {}: {}", task.artifact, cu_text(r)));
  auto k = std::make_unique<CudaKernel>(module, &lost_);
  // Dynamic shared memory each function needs at most (its limit is raised to that), and its
  // largest cluster (more than 8 blocks, the portable limit, is allowed for the function).
  std::map<std::string, int64_t> shared, cluster;
  for (const PlanStep& st : plan.steps)
    if (st.op == PlanStep::Op::launch) {
      shared[st.symbol] = std::max(shared[st.symbol], st.shared);
      cluster[st.symbol] =
          std::max(cluster[st.symbol], st.cluster[0] * st.cluster[1] * st.cluster[2]);
    }
  for (const auto& [symbol, bytes] : shared) {
    CudaKernel::Function f;
    if (CUresult r = g_cu.ModuleGetFunction(&f.fn, module, symbol.c_str()); r != CUDA_SUCCESS)
      return load_error(Disposition::launch_failed,
                        fmt::format("the cubin has no kernel {}: {}", symbol, cu_text(r)));
    // The attributes its launches need: more than 48 KiB of dynamic shared memory, clusters
    // past the portable 8 blocks.
    struct Raise {
      bool needed;
      CUfunction_attribute attr;
      int value;
      std::string what;
    };
    const Raise raises[] = {
        {bytes > 48 * 1024, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
         static_cast<int>(bytes), fmt::format("{} bytes of dynamic shared memory", bytes)},
        {cluster[symbol] > 8, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1,
         fmt::format("clusters of {} blocks (non-portable)", cluster[symbol])}};
    for (const Raise& a : raises) {
      if (!a.needed) continue;
      if (CUresult r = g_cu.FuncSetAttribute(f.fn, a.attr, a.value); r != CUDA_SUCCESS)
        return load_error(
            is_config_result(r) ? Disposition::invalid_config : Disposition::launch_failed,
            fmt::format("cannot allow {} for {}: {}", a.what, symbol, cu_text(r)));
    }
    if (g_cu.FuncGetParamInfo) {
      f.param_info = true;
      for (size_t i = 0;; ++i) {
        size_t offset = 0, size = 0;
        if (g_cu.FuncGetParamInfo(f.fn, i, &offset, &size) != CUDA_SUCCESS) break;
        f.param_sizes.push_back(size);
      }
    }
    k->functions[symbol] = std::move(f);
  }
  return std::unique_ptr<LoadedKernel>(std::move(k));
}

LaunchOutcome CudaDevice::run(const std::function<CUresult()>& enqueue, bool timed,
                              std::string_view what) {
  LaunchOutcome o;
  if (lost_) {
    o.disposition = Disposition::crashed;
    o.message = "the CUDA device was lost (sticky error) before this launch";
    return o;
  }
  (void)cudaGetLastError();  // nothing stale is charged to this call
  // Timed samples: the stream waits at the gate while the start event, the work and the end
  // event are enqueued, so the window holds the device's work and nothing of the host's.
  const bool gated = timed && gate_ready();
  if (gated) {
    gate_flag_[0] = 0;
    gate_flag_[1] = 0;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    CUdeviceptr flag = 0;
    if (cudaHostGetDevicePointer(reinterpret_cast<void**>(&flag), const_cast<unsigned*>(gate_flag_),
                                 0) != cudaSuccess) {
      (void)cudaGetLastError();
      flag = reinterpret_cast<CUdeviceptr>(gate_flag_);
    }
    unsigned long long limit_ns = 2'000'000'000ull;
    void* args[] = {&flag, &limit_ns};
    if (g_cu.LaunchKernel(gate_fn_, 1, 1, 1, 1, 1, 1, 0, reinterpret_cast<CUstream>(stream_), args,
                          nullptr) != CUDA_SUCCESS) {
      (void)cudaGetLastError();
      gate_failed_ = true;
      o.disposition = Disposition::launch_failed;
      o.message = "the runner's timing gate could not be launched";
      return o;
    }
  }
  auto release = [&] {
    if (!gated) return;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    gate_flag_[0] = 1;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
  };
  auto h0 = Clock::now();
  if (timed) {
    if (cudaError_t e = cudaEventRecord(start_, stream_); e != cudaSuccess) {
      release();
      check_alive(e);
      o.disposition = lost_ ? Disposition::crashed : Disposition::launch_failed;
      o.message = fmt::format("cudaEventRecord failed before {}: {}", what, err_text(e));
      return o;
    }
  }
  CUresult launched = enqueue();
  cudaError_t sync_err = cudaSuccess;
  if (timed && launched == CUDA_SUCCESS) {
    cudaError_t e = cudaEventRecord(stop_, stream_);
    release();
    if (e == cudaSuccess) e = cudaEventSynchronize(stop_);
    if (e != cudaSuccess) sync_err = e;
  }
  release();
  auto h1 = Clock::now();
  // Outside the timed window: the whole device, so that errors (and anything still running)
  // surface here.
  cudaError_t dev_err = cudaDeviceSynchronize();
  auto h2 = Clock::now();
  o.host_ms = std::chrono::duration<double, std::milli>((timed ? h1 : h2) - h0).count();
  if (timed && std::chrono::duration<double, std::milli>(h2 - h1).count() > 1.0) o.outlived = true;
  if (sync_err == cudaSuccess) sync_err = dev_err;
  if (launched != CUDA_SUCCESS) {
    (void)cudaGetLastError();
    if (sync_err != cudaSuccess && is_sticky(sync_err)) {
      lost_ = true;
      o.disposition = Disposition::crashed;
      o.message = fmt::format("{} caused a sticky CUDA error: {} (the context is lost)", what,
                              err_text(sync_err));
    } else if (is_config_result(launched)) {
      o.disposition = Disposition::invalid_config;
      o.message = fmt::format("{} cannot run with this configuration: {}", what, cu_text(launched));
    } else {
      o.disposition = Disposition::launch_failed;
      o.message = fmt::format("{} failed: {}", what, cu_text(launched));
    }
    return o;
  }
  cudaError_t err = sync_err != cudaSuccess ? sync_err : cudaGetLastError();
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
  if (gated && gate_flag_[1] != 0) {
    o.disposition = Disposition::launch_failed;
    o.message =
        fmt::format("the timing gate before {} timed out before the host released it", what);
    return o;
  }
  if (timed) {
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

namespace {

CUtensorMapDataType tensor_map_type(DType t) {
  switch (t) {
    case DType::f32:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    case DType::f16:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case DType::bf16:
      return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case DType::i32:
      return CU_TENSOR_MAP_DATA_TYPE_INT32;
    case DType::e4m3:
      return CU_TENSOR_MAP_DATA_TYPE_UINT8;  // TMA moves bytes; the MMA reads them as e4m3
  }
  return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
}

CUtensorMapSwizzle tensor_map_swizzle(int bytes) {
  switch (bytes) {
    case 32:
      return CU_TENSOR_MAP_SWIZZLE_32B;
    case 64:
      return CU_TENSOR_MAP_SWIZZLE_64B;
    case 128:
      return CU_TENSOR_MAP_SWIZZLE_128B;
    default:
      return CU_TENSOR_MAP_SWIZZLE_NONE;
  }
}

// The buffers of one task as a launch plan names them.
struct PlanBuffers {
  const RunnerTask& task;
  const RunnerJob& job;
  const LaunchPlan& plan;
  TaskBuffers& buffers;

  const DeviceBuffer& of(PlanBufferRef r) const {
    return r.kind == PlanBufferRef::Kind::array ? buffers.arrays[static_cast<size_t>(r.index)]
                                                : buffers.scratch[static_cast<size_t>(r.index)];
  }
  // Bytes a plan may touch in a buffer: the array's elements (the guard zone stays the runner's).
  size_t logical_bytes(PlanBufferRef r) const {
    if (r.kind == PlanBufferRef::Kind::scratch)
      return static_cast<size_t>(plan.scratch[static_cast<size_t>(r.index)].bytes);
    const ArraySpec& a = job.arrays[static_cast<size_t>(r.index)];
    auto it = task.sizes.find(a.name);
    return it == task.sizes.end() ? 0 : static_cast<size_t>(it->second) * dtype_size(a.dtype);
  }
};

// Tensor maps over this task's buffers (host-side encoding, before the timed window). False, with
// the reason in `bad`, when one cannot be made.
bool encode_tensor_maps(const PlanBuffers& pb, std::vector<CUtensorMap>& maps, LaunchOutcome& bad) {
  const LaunchPlan& plan = pb.plan;
  maps.resize(plan.tensor_maps.size());
  for (size_t i = 0; i < plan.tensor_maps.size(); ++i) {
    const PlanTensorMap& t = plan.tensor_maps[i];
    std::vector<cuuint64_t> dims(t.dims.begin(), t.dims.end());
    std::vector<cuuint64_t> strides(t.global_strides.begin(), t.global_strides.end());
    std::vector<cuuint32_t> box(t.box.begin(), t.box.end());
    std::vector<cuuint32_t> estr(t.element_strides.begin(), t.element_strides.end());
    // The map may not reach past the buffer's elements.
    uint64_t extent = dtype_size(t.dtype);
    for (size_t d = 0; d < dims.size(); ++d)
      extent =
          std::max<uint64_t>(extent, (d == 0 ? dtype_size(t.dtype) : strides[d - 1]) * dims[d]);
    if (extent > pb.logical_bytes(t.buffer)) {
      bad.disposition = Disposition::invalid_config;
      bad.message = fmt::format("tensor_map `{}` spans {} bytes; its buffer holds {}", t.name,
                                extent, pb.logical_bytes(t.buffer));
      return false;
    }
    CUresult r = g_cu.TensorMapEncodeTiled(
        &maps[i], tensor_map_type(t.dtype), static_cast<cuuint32_t>(dims.size()),
        pb.of(t.buffer).handle, dims.data(), strides.data(), box.data(), estr.data(),
        CU_TENSOR_MAP_INTERLEAVE_NONE, tensor_map_swizzle(t.swizzle),
        CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
      bad.disposition = Disposition::invalid_config;
      bad.message =
          fmt::format("cuTensorMapEncodeTiled refused tensor_map `{}`: {}", t.name, cu_text(r));
      return false;
    }
  }
  return true;
}

// Parameter storage of one launch step.
struct PreparedStep {
  CUfunction fn = nullptr;
  std::vector<std::vector<unsigned char>> storage;
  std::vector<void*> params;
};

// The bytes of argument `a` of launch step `st` (`want`: the kernel's parameter size, 0 when the
// driver cannot tell) and, in `what`, what they are. False, with the reason in `bad`, when the
// value does not fit.
bool pack_arg(const PlanStep& st, size_t a, size_t want, const PlanBuffers& pb,
              const std::vector<CUtensorMap>& maps, std::vector<unsigned char>& bytes,
              std::string& what, LaunchOutcome& bad) {
  const PlanArg& arg = st.args[a];
  auto put = [&](const void* src, size_t n) {
    bytes.assign(static_cast<const unsigned char*>(src),
                 static_cast<const unsigned char*>(src) + n);
  };
  switch (arg.kind) {
    case PlanArg::Kind::array:
    case PlanArg::Kind::scratch: {
      PlanBufferRef r{arg.kind == PlanArg::Kind::array ? PlanBufferRef::Kind::array
                                                       : PlanBufferRef::Kind::scratch,
                      arg.index};
      void* ptr = pb.of(r).handle;
      put(&ptr, sizeof ptr);
      what = "a pointer (8 bytes)";
      break;
    }
    case PlanArg::Kind::tensor_map:
      put(&maps[static_cast<size_t>(arg.index)], sizeof(CUtensorMap));
      what = "a CUtensorMap (128 bytes)";
      break;
    case PlanArg::Kind::value: {
      if (want == 8) {
        long long v = arg.value;
        put(&v, 8);
      } else {
        if (arg.value < INT32_MIN || arg.value > INT32_MAX) {
          bad.message = fmt::format(
              "line {}: argument {} of `{}` ({} = {}) does not fit in a "
              "32-bit parameter",
              st.line, a + 1, st.kernel, arg.text, arg.value);
          return false;
        }
        int v = static_cast<int>(arg.value);
        put(&v, 4);
      }
      what = "an integer";
      break;
    }
  }
  return true;
}

// The function and parameters of launch step `st`. False, with the reason in `bad`, when the
// plan's arguments do not match the kernel's parameters.
bool prepare_step(const PlanStep& st, const CudaKernel& ck, const PlanBuffers& pb,
                  const std::vector<CUtensorMap>& maps, PreparedStep& p, LaunchOutcome& bad) {
  auto fit = ck.functions.find(st.symbol);
  if (fit == ck.functions.end()) {
    bad.message = fmt::format("internal: kernel `{}` was not loaded", st.kernel);
    return false;
  }
  const CudaKernel::Function& f = fit->second;
  if (f.param_info && f.param_sizes.size() != st.args.size()) {
    bad.message = fmt::format("line {}: kernel `{}` takes {} parameters; the plan's args pass {}",
                              st.line, st.kernel, f.param_sizes.size(), st.args.size());
    return false;
  }
  p.fn = f.fn;
  for (size_t a = 0; a < st.args.size(); ++a) {
    const PlanArg& arg = st.args[a];
    size_t want = f.param_info ? f.param_sizes[a] : 0;
    std::vector<unsigned char> bytes;
    std::string what;
    if (!pack_arg(st, a, want, pb, maps, bytes, what, bad)) return false;
    if (f.param_info && want != bytes.size() &&
        !(arg.kind == PlanArg::Kind::value && (want == 4 || want == 8))) {
      bad.message = fmt::format(
          "line {}: argument {} of `{}` (`{}`) is {}, but the kernel's "
          "parameter {} takes {} bytes",
          st.line, a + 1, st.kernel, arg.text, what, a + 1, want);
      return false;
    }
    p.storage.push_back(std::move(bytes));
  }
  for (auto& b : p.storage) p.params.push_back(b.data());
  return true;
}

// Puts one step of the plan on `stream`: a memset, or a launch (with its cluster shape).
CUresult enqueue_step(const PlanStep& st, PreparedStep& p, const PlanBuffers& pb, CUstream stream) {
  if (st.op == PlanStep::Op::memset) {
    auto base = reinterpret_cast<CUdeviceptr>(pb.of(st.target).handle);
    return g_cu.MemsetD8Async(base, static_cast<unsigned char>(st.value),
                              pb.logical_bytes(st.target), stream);
  }
  CUlaunchConfig cfg{};
  cfg.gridDimX = static_cast<unsigned>(st.grid[0]);
  cfg.gridDimY = static_cast<unsigned>(st.grid[1]);
  cfg.gridDimZ = static_cast<unsigned>(st.grid[2]);
  cfg.blockDimX = static_cast<unsigned>(st.block[0]);
  cfg.blockDimY = static_cast<unsigned>(st.block[1]);
  cfg.blockDimZ = static_cast<unsigned>(st.block[2]);
  cfg.sharedMemBytes = static_cast<unsigned>(st.shared);
  cfg.hStream = stream;
  CUlaunchAttribute attr{};
  if (st.cluster[0] * st.cluster[1] * st.cluster[2] > 1) {
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = static_cast<unsigned>(st.cluster[0]);
    attr.value.clusterDim.y = static_cast<unsigned>(st.cluster[1]);
    attr.value.clusterDim.z = static_cast<unsigned>(st.cluster[2]);
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
  }
  return g_cu.LaunchKernelEx(&cfg, p.fn, p.params.data(), nullptr);
}

}  // namespace

LaunchOutcome CudaDevice::launch(LoadedKernel& k, const RunnerTask& task, const RunnerJob& job,
                                 const LaunchPlan& plan, TaskBuffers& buffers, bool timed) {
  LaunchOutcome bad;
  bad.disposition = Disposition::launch_failed;
  auto* ck = dynamic_cast<CudaKernel*>(&k);
  if (ck == nullptr) {
    bad.message = "internal: the kernel was not loaded by the CUDA device";
    return bad;
  }
  if (buffers.arrays.size() != job.arrays.size() || buffers.scratch.size() != plan.scratch.size()) {
    bad.message = fmt::format("internal: {} buffers for {} arrays, {} for {} scratch buffers",
                              buffers.arrays.size(), job.arrays.size(), buffers.scratch.size(),
                              plan.scratch.size());
    return bad;
  }
  const PlanBuffers pb{task, job, plan, buffers};
  std::vector<CUtensorMap> maps;
  if (!encode_tensor_maps(pb, maps, bad)) return bad;
  std::vector<PreparedStep> prepared(plan.steps.size());
  for (size_t s = 0; s < plan.steps.size(); ++s)
    if (plan.steps[s].op == PlanStep::Op::launch &&
        !prepare_step(plan.steps[s], *ck, pb, maps, prepared[s], bad))
      return bad;
  auto stream = reinterpret_cast<CUstream>(stream_);
  std::string failing;
  auto enqueue = [&]() -> CUresult {
    for (size_t s = 0; s < plan.steps.size(); ++s) {
      const PlanStep& st = plan.steps[s];
      CUresult r = enqueue_step(st, prepared[s], pb, stream);
      if (r != CUDA_SUCCESS) {
        failing = st.op == PlanStep::Op::memset
                      ? fmt::format("memset (line {})", st.line)
                      : fmt::format("launch `{}` (line {})", st.kernel, st.line);
        return r;
      }
    }
    return CUDA_SUCCESS;
  };
  LaunchOutcome o = run(enqueue, timed, "the launch plan");
  if (!failing.empty() && o.disposition != Disposition::passed)
    o.message = replace_all(o.message, "the launch plan", failing);
  return o;
}

LaunchOutcome CudaDevice::baseline(const std::string& name, const RunnerTask& task,
                                   const RunnerJob& job, std::vector<DeviceBuffer>& arrays,
                                   bool timed) {
  if (name == "cudnn") return cudnn_baseline(task, job, arrays, timed);
  if (name == "cublaslt") return cublaslt_baseline(task, job, arrays, timed);
  LaunchOutcome no;
  no.disposition = Disposition::not_run;
  if (name != "cublas") {
    no.message = fmt::format(
        "unknown baseline '{}' (the CUDA runner knows 'cublas', 'cublaslt' and 'cudnn')", name);
    return no;
  }
  if (!find_family(job.family).has_baseline(name, "cuda")) {
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
  bool fp16 =
      ((ta == DType::f16 && tb == DType::f16) || (ta == DType::bf16 && tb == DType::bf16)) &&
      (tc == DType::f32 || tc == ta);
  const cudaDataType in_type = ta == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
  const cudaDataType out_type =
      tc == DType::f32 ? CUDA_R_32F : (tc == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F);
  if (!fp32 && !fp16) {
    no.message =
        "the cuBLAS baseline covers f32 x f32 -> f32, f16 x f16 -> f32/f16 and bf16 x bf16 -> "
        "f32/bf16";
    return no;
  }
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
  void* A = arrays[ia].handle;
  void* B = arrays[ib].handle;
  void* C = arrays[ic].handle;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  const float alpha = 1.0f, beta = 0.0f;
  // Row-major C[M,N] = A[M,K] B[K,N] is column-major C^T[N,M] = B^T[N,K] A^T[K,M].
  auto call = [&]() -> CUresult {
    if (fp32) {
      status = g_cublas.Sgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha,
                              static_cast<const float*>(B), n, static_cast<const float*>(A), k,
                              &beta, static_cast<float*>(C), n);
    } else {
      status = g_cublas.GemmEx(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, B, in_type, n, A,
                               in_type, k, &beta, C, out_type, n, CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT);
    }
    return CUDA_SUCCESS;
  };
  LaunchOutcome o = run(call, timed, fp32 ? "cublasSgemm" : "cublasGemmEx");
  if (o.disposition == Disposition::passed && status != CUBLAS_STATUS_SUCCESS) {
    o.disposition = Disposition::launch_failed;
    o.message =
        fmt::format("{} failed: {}", fp32 ? "cublasSgemm" : "cublasGemmEx", cublas_text(status));
  }
  return o;
}

LaunchOutcome CudaDevice::cublaslt_baseline(const RunnerTask& task, const RunnerJob& job,
                                            std::vector<DeviceBuffer>& arrays, bool timed) {
  LaunchOutcome no;
  no.disposition = Disposition::not_run;
  if (!find_family(job.family).has_baseline("cublaslt", "cuda")) {
    no.message = fmt::format("cublasLt's fp8 GEMM is a baseline only for family matmul, not '{}'",
                             job.family);
    return no;
  }
  if (!cublaslt_.ready()) {
    no.message = cublaslt_.error();
    return no;
  }
  std::map<std::string, int> at;
  for (size_t i = 0; i < job.arrays.size() && i < arrays.size(); ++i)
    at[job.arrays[i].name] = static_cast<int>(i);
  for (const char* name : {"A", "Bt", "C", "A_scale", "B_scale"})
    if (!at.count(name) || arrays.size() != job.arrays.size()) {
      no.message = "the cublasLt fp8 baseline needs arrays A, Bt, C, A_scale and B_scale";
      return no;
    }
  auto dim = [&](const char* s) -> int64_t {
    auto it = task.shape.values.find(s);
    return it == task.shape.values.end() ? -1 : it->second;
  };
  cuda::Fp8Gemm g;
  g.m = dim("M");
  g.n = dim("N");
  g.k = dim("K");
  g.c_type = job.arrays[at["C"]].dtype;
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || job.arrays[at["A"]].dtype != DType::e4m3 ||
      job.arrays[at["Bt"]].dtype != DType::e4m3 ||
      (g.c_type != DType::bf16 && g.c_type != DType::f32)) {
    no.message =
        "the cublasLt fp8 baseline covers e4m3 A (M x K) and Bt (N x K) into a bf16 or f32 C, "
        "with positive M, N and K";
    return no;
  }
  g.a = arrays[at["A"]].handle;
  g.bt = arrays[at["Bt"]].handle;
  g.a_scale = static_cast<const float*>(arrays[at["A_scale"]].handle);
  g.b_scale = static_cast<const float*>(arrays[at["B_scale"]].handle);
  g.c = arrays[at["C"]].handle;
  if (Status st = cublaslt_.prepare(g); !st) {
    no.message = st.message();
    return no;
  }
  Status status = Status::ok();
  auto call = [&]() -> CUresult {
    status = cublaslt_.enqueue(g, stream_);
    return CUDA_SUCCESS;
  };
  LaunchOutcome o = run(call, timed, "cublasLtMatmul");
  if (o.disposition == Disposition::passed && !status) {
    o.disposition = Disposition::launch_failed;
    o.message = status.message();
  }
  return o;
}

Status CudaDevice::load_copy_module() {
  if (copy_fn_) return Status::ok();
  return load_ptx(cuda::copy_kernel_ptx(), cuda::kCopyKernelName, "the vector copy kernel",
                  copy_module_, copy_fn_);
}

CUresult CudaDevice::enqueue_vector_copy(void* dst, const void* src, size_t bytes) {
  // Enough blocks to fill every SM at full occupancy, fewer when there is less to copy.
  const int sms = std::max(1, attr(cudaDevAttrMultiProcessorCount));
  const int per_sm = std::max(cuda::kCopyThreads, attr(cudaDevAttrMaxThreadsPerMultiProcessor));
  const size_t vectors = std::max<size_t>(1, bytes / 16);
  const size_t wanted = (vectors + cuda::kCopyThreads - 1) / cuda::kCopyThreads;
  const auto blocks = static_cast<unsigned>(
      std::min<size_t>(wanted, static_cast<size_t>(sms) * (per_sm / cuda::kCopyThreads)));
  auto d = reinterpret_cast<CUdeviceptr>(dst);
  auto s = reinterpret_cast<CUdeviceptr>(src);
  unsigned long long n = bytes;
  void* args[] = {&d, &s, &n};
  return g_cu.LaunchKernel(copy_fn_, blocks, 1, 1, cuda::kCopyThreads, 1, 1, 0,
                           reinterpret_cast<CUstream>(stream_), args, nullptr);
}

LaunchOutcome CudaDevice::copy(const std::string& method, const DeviceBuffer& src,
                               DeviceBuffer& dst, size_t bytes, bool timed) {
  LaunchOutcome bad;
  bad.disposition = Disposition::launch_failed;
  if (bytes > src.bytes || bytes > dst.bytes) {
    bad.message = fmt::format("internal: a copy of {} bytes between buffers of {} and {}", bytes,
                              src.bytes, dst.bytes);
    return bad;
  }
  if (method == "vector-kernel") {
    if (Status st = load_copy_module(); !st) {
      bad.message = st.message();
      return bad;
    }
    return run([&] { return enqueue_vector_copy(dst.handle, src.handle, bytes); }, timed,
               "the vector copy kernel");
  }
  if (method != "memcpy") return Device::copy(method, src, dst, bytes, timed);
  cudaError_t copied = cudaSuccess;
  LaunchOutcome o = run(
      [&] {
        copied = cudaMemcpyAsync(dst.handle, src.handle, bytes, cudaMemcpyDeviceToDevice, stream_);
        return copied == cudaSuccess ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN;
      },
      timed, "cudaMemcpyAsync (device to device)");
  if (copied != cudaSuccess && o.disposition == Disposition::launch_failed)
    o.message = fmt::format("cudaMemcpyAsync (device to device) failed: {}", err_text(copied));
  return o;
}

// The cuDNN baseline of the row families (cudnn_baseline.h), its call timed like a candidate.
LaunchOutcome CudaDevice::cudnn_baseline(const RunnerTask& task, const RunnerJob& job,
                                         std::vector<DeviceBuffer>& arrays, bool timed) {
  auto timer = [&](const std::function<void()>& enqueue, std::string_view what) {
    return run(
        [&]() -> CUresult {
          enqueue();
          return CUDA_SUCCESS;
        },
        timed, what);
  };
  return cudnn_->run(task, job, arrays, timer);
}

void CudaDevice::flush_caches() {
  if (lost_ || flush_buf_ == nullptr) return;
  int value = (flush_round_++ & 1) ? 0x5A : 0xA5;
  cudaError_t e = cudaMemsetAsync(flush_buf_, value, flush_bytes_, stream_);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);
  if (e != cudaSuccess) check_alive(e);
}

bool CudaDevice::gate_ready() {
  if (gate_fn_) return true;
  if (gate_failed_ || lost_) return false;
  gate_failed_ = true;  // until everything below succeeds
  void* flag = nullptr;
  if (cudaHostAlloc(&flag, 2 * sizeof(unsigned), cudaHostAllocMapped) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  gate_flag_ = static_cast<volatile unsigned*>(flag);
  if (!load_ptx(cuda::gate_ptx(), cuda::kGateName, "the timing gate", gate_module_, gate_fn_))
    return false;
  gate_failed_ = false;
  return true;
}

Status CudaDevice::load_fma_module() {
  if (fma_fn_) return Status::ok();
  return load_ptx(cuda::fma_bench_ptx(), cuda::kFmaBenchName, "the FMA benchmark", fma_module_,
                  fma_fn_);
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
