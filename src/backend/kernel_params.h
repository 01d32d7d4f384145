#pragma once
// Kernel parameters known without a device: a C++ kernel's mangled name (the Itanium ABI, as nvcc
// and hipcc emit it) carries its parameter types, so a launch plan's `args` can be checked against
// them on a machine without the GPU, by the rules the CUDA runner applies with the driver's
// parameter sizes at launch.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "plan/launch_plan.h"

namespace peak {

// The byte size of each parameter of the kernel whose mangled name is `mangled` (-1 for a type
// of unknown size, e.g. a struct), or nullopt when the name carries no parameter types (an
// `extern "C"` kernel) or cannot be demangled.
std::optional<std::vector<int64_t>> mangled_param_sizes(const std::string& mangled);

// Every launch of `plan` against its kernel's parameters as the build's resources name them
// (kernels.<name>.mangled): launch_failed, naming the plan line, when the number of arguments
// or an argument's size does not match, as the CUDA runner refuses it. `unchecked` (when given)
// receives the kernels whose names carry no parameter types.
PlanResult check_plan_args(const LaunchPlan& plan, const BuildResult& build,
                           std::vector<std::string>* unchecked = nullptr);

}  // namespace peak
