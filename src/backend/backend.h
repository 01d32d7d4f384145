#pragma once
// Parent-side backend interface: compile candidates, derive launch plans, probe devices. The
// engine sees only this; CUDA, HIP and HLSL plug in without changes to the core.
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "context/context.h"
#include "expr/expr.h"
#include "plan/plan_language.h"
#include "runner/client.h"
#include "runner/protocol.h"
#include "util/disposition.h"

namespace peak {

using Config = std::map<std::string, int64_t>;  // tuning values
std::string config_text(const Config& c);       // "TILE=16 TK=8"
nlohmann::json config_json(const Config& c);
// The integer values of a JSON object (config_json's form); anything else reads as empty.
Config config_from_json(const nlohmann::json& j);

struct BuildRequest {
  const KernelContext* context = nullptr;
  std::string source;  // the whole source file (regions joined)
  Config defines;      // tuning values, injected as preprocessor defines
  DeviceFacts device;
  std::filesystem::path cache_dir;  // content-addressed build cache
};

struct BuildResult {
  Disposition disposition = Disposition::not_run;  // passed, compile_failed, forbidden_api
  std::filesystem::path artifact;
  std::string log;        // compiler diagnostics
  std::string command;    // the command line (or in-process compiler options)
  std::string toolchain;  // "shaderc 2023.2 / glslang 12", "nvcc 13.0.88"
  nlohmann::json resources = nlohmann::json::object();  // registers, shared memory, spills
  double seconds = 0;
  bool cached = false;
};

// Adds what the driver said of the code it made of each entry point (the runner's
// TaskResult::kernel_statistics, by the driver's own names) to a build's resources: all of it as
// kernels.<entry>.driver_statistics, and the statistics known by name as the fields the pruning
// rules, the performance model and the reports read (NVIDIA's "Register Count": the entry's
// `registers` and `max_registers`; its "Local Memory Size": `local_bytes` per thread and
// `max_local_bytes`). Fields the compiler already reported are kept.
void add_driver_statistics(nlohmann::json& resources, const nlohmann::json& statistics);

struct PlanResult {
  // passed, invalid_config, compile_failed, workspace_exceeded
  Disposition disposition = Disposition::passed;
  std::string message;
  nlohmann::json plan = nlohmann::json::object();  // LaunchPlan::to_json() when passed
};

// The device facts a launch plan may read: compute_units, max_threads, shared_memory,
// shared_memory_optin, subgroup_size, l2_bytes.
expr::Env device_plan_env(const DeviceFacts& d);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;              // "hlsl", "cuda"
  virtual std::string source_extension() const = 0;  // ".hlsl", ".cu"
  // Phrase -> spelling for prompts ("thread index in the block" -> "threadIdx" /
  // "SV_GroupThreadID").
  virtual std::map<std::string, std::string> translation_table() const = 0;
  virtual std::filesystem::path runner() const = 0;
  virtual std::vector<std::pair<std::string, std::string>> toolchain() const = 0;
  // Probes through the runner; `selector` picks a device by index or name substring.
  virtual Result<DeviceFacts> probe(const std::string& selector, bool microbench) = 0;
  // Thread-safe: the tuner compiles configurations in parallel. The device region (with the
  // macros region and the fixed text) is compiled; the host region is a launch plan and is
  // parsed, not compiled (a plan that does not parse fails the build).
  virtual BuildResult build(const BuildRequest& req) = 0;
  // What this backend's launch plans may use.
  virtual PlanDialect plan_dialect() const = 0;
  // The device facts shown in prompts (name, limits under the names plans read them by, and
  // what the architecture offers).
  virtual std::vector<std::pair<std::string, std::string>> prompt_facts(
      const DeviceFacts& device) const;
  // The launch plan of a built candidate for one shape and configuration: the host region
  // evaluated (one evaluator for every backend), then checked against this device and resolved
  // against the build (kernel symbols, modules, resource limits) by resolve_plan.
  PlanResult plan(const KernelContext& ctx, const SourceRegions& source, const Shape& shape,
                  const Config& config, const DeviceFacts& device, const BuildResult& build);
  // Checks a build's resources (threads per group, shared memory) against the device limits;
  // invalid_config with a message naming the limit when they do not fit.
  virtual PlanResult check_resources(const BuildResult& build, const DeviceFacts& device) {
    (void)build;
    (void)device;
    return {};
  }
  // The vendor-library baseline for this context on this device ("cublas", "" = none).
  virtual std::string baseline(const KernelContext& ctx, const DeviceFacts& device) const = 0;

 protected:
  // The API-specific part of plan(): fills each launch's symbol and module from the build and
  // refuses what this device cannot run (invalid_config) or what the build lacks
  // (compile_failed: a kernel the plan names but the device region does not define).
  virtual PlanResult resolve_plan(LaunchPlan& plan, const BuildResult& build,
                                  const DeviceFacts& device) = 0;
};

// "hlsl", "cuda" (the CUDA backend is always present; it fails to probe without a GPU).
// Defined in engine/backends.cpp (the one place that knows every backend).
Result<std::unique_ptr<Backend>> make_backend(const std::string& name);
std::vector<std::string> backend_names();

// Documented peaks of known devices (datasheet numbers), matched by device-name substring.
struct DevicePeaks {
  std::string device;  // the table row's name
  double fp32_tflops = 0;
  double tf32_tflops = 0;
  double fp16_tflops = 0;  // dense, fp32 accumulation
  double fp8_tflops = 0;   // dense (Hopper, Ada); 0 where the device has no fp8 tensor cores
  double memory_gbs = 0;
  std::string source;  // where the number comes from
};
// The documented dense rate of inputs of `element_bytes` bytes (1: FP8, 2: FP16 or BF16, else
// FP32) and its name ("FP8", "FP16", "FP32"): what "% of peak", the faster-than-peak gate and the
// tuning model's ridge point use.
struct PrecisionPeak {
  double tflops = 0;
  std::string_view name;
};
PrecisionPeak precision_peak(const DevicePeaks& peaks, size_t element_bytes);
std::optional<DevicePeaks> documented_peaks(const std::string& device_name);

}  // namespace peak
