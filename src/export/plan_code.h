#pragma once
// The launch plan as C: the host region of a kernel, evaluated at run time by code that peak
// writes once, for an export (docs/export.md). The generated functions do what
// plan/plan_language.h's evaluator does for one tuning configuration, with the shape and the
// device facts known only when the library is called: they compute the plan's names, check its
// `require` lines and limits, and fill a `pk_plan` (scratch buffers, tensor maps, memsets and
// launches) that the backend's runtime (export/runtime.h) carries out. Nothing here runs a model
// or a device; the text is deterministic for its inputs.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "context/context.h"
#include "plan/plan_language.h"
#include "util/result.h"

namespace peak::exporter {

// Status codes the generated functions return (the public header's PEAK_* codes).
inline constexpr int kStatusOk = 0;
inline constexpr int kStatusInvalidShape = 1;  // valid/supports/require, or no launch runs
inline constexpr int kStatusWorkspace = 2;     // missing or too small workspace
inline constexpr int kStatusDevice = 3;        // not built for this device
inline constexpr int kStatusDeviceLimits = 4;  // the configuration exceeds this device's limits
inline constexpr int kStatusLaunch = 5;        // the GPU API refused a call
inline constexpr int kStatusArgument = 6;      // a null pointer where an array is needed

// A kernel the plan launches, as the built device code names it.
struct KernelSymbol {
  std::string symbol;                // mangled name (CUDA, HIP) / entry point (HLSL)
  std::vector<int64_t> param_bytes;  // bytes of each parameter (-1: unknown); empty: no args
};

// The capacities of `pk_plan` (the most any configuration's plan may need).
struct PlanCapacity {
  size_t scratch = 1, tensor_maps = 1, steps = 1, args = 1;
};

// The capacities a parsed plan needs.
PlanCapacity plan_capacity(const ParsedPlan& plan);
PlanCapacity max_capacity(const PlanCapacity& a, const PlanCapacity& b);

// The C declarations shared by every plan function of one export: `pk_shape` (the scalars and
// the array sizes), `pk_dev` (the device facts plans read), `pk_plan` and its parts.
std::string plan_types(const KernelContext& ctx, const PlanCapacity& cap);

// `static int NAME(const pk_shape* s, pk_shape_ok)`: fills the array sizes from the scalars and
// checks `valid` and `supports` (kStatusInvalidShape when they do not hold).
Result<std::string> shape_function(const KernelContext& ctx, const std::string& name);

// `static int NAME(const pk_shape* s)`: the index of the class rule the shape falls in (the
// rules' order), -1 when none holds.
Result<std::string> class_function(const KernelContext& ctx, const std::vector<ClassRule>& rules,
                                   const std::string& name);

struct PlanFunctionInput {
  const KernelContext* ctx = nullptr;
  const SourceRegions* regions = nullptr;
  const ParsedPlan* plan = nullptr;
  PlanDialect dialect;
  std::map<std::string, int64_t> config;  // the configuration baked in
  // Index of each launched kernel (ParsedPlan::kernels() order) and its symbol.
  std::vector<KernelSymbol> kernels;
  std::string name;  // the C function's name
};

// `static int NAME(const pk_shape* s, const pk_dev* d, pk_plan* p)`: the plan for one
// configuration. Names the plan may not read (an unknown identifier, a missing attribute) are
// errors here, at export time, as they are compile_failed for peak's evaluator.
Result<std::string> plan_function(const PlanFunctionInput& in);

// A name as a C identifier: "matmul-cuda-fp32" -> "matmul_cuda_fp32".
std::string c_identifier(const std::string& name);

}  // namespace peak::exporter
