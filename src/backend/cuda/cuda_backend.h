#pragma once
// The CUDA backend (docs/backend-cuda.md). A candidate is device code plus a launch plan: build()
// compiles the source with its host region blanked (the plan is not C++) into a cubin with nvcc
// (pinned flags, content-addressed cache), reads per-kernel resources from ptxas, and checks the
// artifact: an sm_XX cubin holding the kernels the plan launches and nothing the runner does not
// provide (no device-side allocation, no device-side launches). The runner
// (cuda_device_main.cpp, the peak-runner-cuda executable) loads it with cuModuleLoadData and runs
// the evaluated plan with cuLaunchKernelEx: no candidate code ever runs on the host.
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"

namespace peak {

std::unique_ptr<Backend> make_cuda_backend();

// A source dialect nvcc compiles through the CUDA backend's build, cache, artifact checks and
// runner: CUDA itself, or HIP through a vendor-mapping header (docs/backend-hip.md).
struct NvccDialect {
  std::string name = "cuda";      // the backend's name
  std::string extension = ".cu";  // its sources' extension
  std::string prelude;            // lines before the source ("" = the CUDA headers)
  // Headers peak owns, by relative path ("hip/hip_runtime.h"): written into a folder of the
  // build cache that nvcc searches first (-I), so that a source's own #include lines resolve.
  std::map<std::string, std::string> include_files;
};
std::unique_ptr<Backend> make_cuda_backend(const NvccDialect& dialect);

namespace cuda {

// The CUDA prelude: cuda.h (CUtensorMap), cuda_fp16.h, cuda_bf16.h.
std::string_view default_prelude();
// The text handed to nvcc: the prelude (the CUDA headers when empty), then the source with every
// host-region line blanked, under `#line 1 "<source_name>"` so that diagnostics carry the file's
// own line numbers.
std::string compile_unit(const SourceRegions& source, std::string_view source_name,
                         std::string_view prelude = {});

// The CUDA backend's checks of a cubin build against a device, for backends that run cubins:
// static shared memory and __device__ data (check_resources) and each launch of an evaluated plan
// (resolve_plan: the kernel's mangled symbol, shared memory, registers, grid, clusters, TMA).
PlanResult check_build_resources(const BuildResult& build, const DeviceFacts& device);
PlanResult resolve_plan_for_build(LaunchPlan& plan, const BuildResult& build,
                                  const DeviceFacts& device);

// "sm_90a" -> "-gencode=arch=compute_90a,code=sm_90a"; empty or malformed -> sm_90a.
std::string gencode_flag(std::string_view arch);
// The pinned nvcc flags (without defines, input and output).
std::vector<std::string> pinned_flags(std::string_view arch);
// nvcc: $PEAK_NVCC, else $CUDA_HOME/bin/nvcc, else /usr/local/cuda/bin/nvcc, else PATH.
// Empty when none is found.
std::filesystem::path find_nvcc();

// Resources from `ptxas -v` output: {"kernels": {name: {"registers", "shared_bytes",
// "spill_stores", "spill_loads", "stack_frame", "barriers", "mangled"}}, "max_registers",
// "max_shared_bytes", "spills"}.
nlohmann::json parse_ptxas_resources(std::string_view log);
// The instruction mix of `cuobjdump -sass` output: for each function (its "Function : NAME"
// header, the mangled name), the number of instructions and of each opcode, the first word of an
// instruction without its predicate and modifiers ("@!P0 BRA 0x120" -> BRA,
// "HGMMA.64x128x16.F32 ..." -> HGMMA): {NAME: {"instructions": N, "opcodes": {"BRA": n, ...}}}.
nlohmann::json parse_sass_mix(std::string_view sass);
// cuobjdump: $PEAK_CUOBJDUMP (when set, it or nothing), else the cuobjdump beside find_nvcc(), so
// that the disassembler is the compiler's. Empty when none is found.
std::filesystem::path find_cuobjdump();
// The instruction mix of a cubin as a build's resources keep it ("sass"): {"format": 1,
// "kernels": {NAME: {"mangled", "instructions", "opcodes"}}}, kernels named as in
// resources["kernels"] (functions that are no entry kernel by their short demangled name).
// `cuobjdump -sass` runs sandboxed like nvcc (scratch: the cubin's folder) with a deadline;
// nullopt when cuobjdump is missing, fails or prints no instruction.
std::optional<nlohmann::json> cubin_sass_mix(const std::filesystem::path& cubin,
                                             const nlohmann::json& resources);
// "kernel.cu(12): error" -> "kernel.cu:12: error" (file:line, as every other peak message).
std::string normalize_diagnostics(std::string_view log);
// "void gemm<128, 8>(float const*, int)" -> "gemm<128, 8>"; "mm(float*)" -> "mm".
std::string short_kernel_name(const std::string& demangled);
// The C++ name of a mangled symbol (the symbol itself when it does not demangle).
std::string demangle(const std::string& mangled);

// What an artifact holds, read from its ELF headers and symbol table.
struct CubinInfo {
  bool cuda = false;                   // ELF machine EM_CUDA (a device-code object)
  int sm = 0;                          // 90 for sm_90/sm_90a (from e_flags)
  std::vector<std::string> kernels;    // mangled names of the entry functions
  std::vector<std::string> undefined;  // symbols the module needs from the driver
  // Static data the module holds in device memory (bytes, saturated at INT64_MAX): every global
  // section, initialized (.nv.global.init) or not (.nv.global, NOBITS), and the __constant__ bank
  // (.nv.constant3). Each section counts the largest of its header's size, the sum of its data
  // symbols' sizes and the end of its last symbol: section sizes and ptxas's "bytes gmem" wrap at
  // 4 GiB, symbol sizes do not.
  int64_t static_data_bytes = 0;
};
Result<CubinInfo> inspect_cubin(const std::filesystem::path& path);
// Why an undefined symbol of a cubin is refused ("device-side allocation", ...), or nullopt when
// the driver's provision of it is harmless (printf, assert).
std::optional<std::string> forbidden_device_symbol(std::string_view name);

}  // namespace cuda
}  // namespace peak
