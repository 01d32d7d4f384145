#pragma once
// The CUDA backend (docs/backend-cuda.md): candidates are CUDA C++ files whose host region
// defines `int peak_host(<arrays>, <scalars>, cudaStream_t)`. build() compiles the source, a
// generated prelude and a generated trampoline `peak_entry` into a shared object with nvcc
// (pinned flags, content-addressed cache), reads per-kernel resources from ptxas, and refuses
// artifacts that reference forbidden APIs (vendor libraries, streams, threads, graphs, ...).
// The runner side lives in cuda_device_main.cpp (the peak-runner-cuda executable).
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"

namespace peak {

std::unique_ptr<Backend> make_cuda_backend();

namespace cuda {

// Name of the exported trampoline every artifact defines.
inline constexpr const char* kEntrySymbol = "peak_entry";
// Value `peak_host` returns when the configuration cannot run on this device.
inline constexpr int kInvalidConfig = -1;

// The C++ spelling of a host-function parameter for an array or scalar ("const float*", "int").
std::string array_param_type(const ArraySpec& a);
std::string scalar_param_type(const ScalarSpec& s);
// The host function's expected signature, e.g.
// "int peak_host(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t
// stream)".
std::string host_signature(const KernelContext& ctx);
// The generated `extern "C" int peak_entry(void* const*, const long long*, cudaStream_t)`
// that casts and forwards to ctx.entry.
std::string trampoline(const KernelContext& ctx);
// Prelude + source + trampoline: the text handed to nvcc. `source_name` is the file name that
// diagnostics for the candidate's lines carry (`#line 1 "kernel.cu"`).
std::string compile_unit(const KernelContext& ctx, std::string_view source,
                         std::string_view source_name);

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
// "kernel.cu(12): error" -> "kernel.cu:12: error" (file:line, as every other peak message).
std::string normalize_diagnostics(std::string_view log);

// A forbidden `#include` (cuBLAS, cuBLASLt, cuDNN) in a source: a message naming the line,
// or nullopt.
std::optional<std::string> forbidden_include(std::string_view source, std::string_view source_name);

struct ElfSymbol {
  std::string name;
  bool defined = false;
};
// The dynamic symbol table of a shared object (what `nm -D` lists).
Result<std::vector<ElfSymbol>> dynamic_symbols(const std::filesystem::path& so);
// Why `name` may not appear in a candidate's artifact ("cuBLAS", "stream creation", ...), or
// nullopt when it is allowed. `defined`: the artifact defines it (interposing a CUDA API).
std::optional<std::string> forbidden_symbol_reason(std::string_view name, bool defined);
// Every forbidden symbol of an artifact, "symbol (reason)"; empty when clean.
Result<std::vector<std::string>> forbidden_symbols(const std::filesystem::path& so);

}  // namespace cuda
}  // namespace peak
