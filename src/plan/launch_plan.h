#pragma once
// A concrete launch plan: what a runner executes for one shape and one tuning configuration.
// It is the evaluated form of a kernel's host region (plan/plan_language.h; the language is
// documented in docs/launch-plan.md), and the same for every backend: scratch buffers, TMA tensor
// maps, and steps (memsets and kernel launches) run in order on one stream or queue.
//
// Nothing in it is code: a runner validates every field it uses, and a plan cannot name memory
// other than the task's arrays and the scratch buffers it declares.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "context/context.h"
#include "util/result.h"

namespace peak {

inline constexpr int kLaunchPlanFormatVersion = 1;

// A buffer a plan refers to: one of the task's arrays (kernel.toml order) or a scratch buffer.
struct PlanBufferRef {
  enum class Kind { array, scratch };
  Kind kind = Kind::array;
  int index = 0;
  bool operator==(const PlanBufferRef&) const = default;
};

// One kernel argument.
struct PlanArg {
  enum class Kind { array, scratch, tensor_map, value };
  Kind kind = Kind::value;
  int index = 0;      // array / scratch / tensor map index
  int64_t value = 0;  // Kind::value: an integer (passed as 4 or 8 bytes, as the parameter is)
  std::string text;   // the argument as written, for messages
  bool operator==(const PlanArg&) const = default;
};

struct PlanScratch {
  std::string name;
  DType dtype = DType::f32;
  int64_t count = 0;  // elements
  int64_t bytes = 0;  // count * element size
  bool operator==(const PlanScratch&) const = default;
};

// A TMA tensor map (CUDA, sm_90): created by the runner with cuTensorMapEncodeTiled over the
// buffer's address and passed by value as a `const __grid_constant__ CUtensorMap` parameter.
struct PlanTensorMap {
  std::string name;
  PlanBufferRef buffer;
  DType dtype = DType::f32;
  std::vector<int64_t> dims;             // elements, innermost first
  std::vector<int64_t> box;              // elements per dimension of one copy
  std::vector<int64_t> element_strides;  // traversal strides (1 = every element)
  std::vector<int64_t> global_strides;   // bytes, for dims 1.. (packed by default)
  int swizzle = 0;                       // 0, 32, 64 or 128 (bytes)
  bool operator==(const PlanTensorMap&) const = default;
};

struct PlanStep {
  enum class Op { memset, launch };
  Op op = Op::launch;
  int line = 0;  // the plan line that declared the step (for messages)
  // memset: every byte of the buffer (without its guard zone) set to `value`.
  PlanBufferRef target;
  int value = 0;
  // launch
  std::string kernel;  // as named in the plan
  std::string symbol;  // resolved by the backend: the mangled name (CUDA) / entry point (HLSL)
  std::string module;  // resolved by the backend: the file holding the kernel ("" = the artifact)
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{0, 0, 0};  // 0 0 0: fixed by the kernel (HLSL [numthreads])
  std::array<int64_t, 3> cluster{1, 1, 1};
  int64_t shared = 0;  // dynamic shared memory bytes
  std::vector<PlanArg> args;
  bool operator==(const PlanStep&) const = default;
};

struct LaunchPlan {
  int format = kLaunchPlanFormatVersion;
  std::vector<PlanScratch> scratch;
  std::vector<PlanTensorMap> tensor_maps;
  std::vector<PlanStep> steps;
  bool operator==(const LaunchPlan&) const = default;

  int64_t scratch_bytes() const;
  int launches() const;
  nlohmann::json to_json() const;
  // Strict: an unknown format, a mistyped field or an index out of range (given the number of
  // arrays) is an error naming the field.
  static Result<LaunchPlan> from_json(const nlohmann::json& j, size_t arrays);
};

std::string_view to_string(PlanArg::Kind k);

}  // namespace peak
