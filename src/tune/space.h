#pragma once
// The search space of a kernel's tuning parameters: the cartesian product of their value sets,
// filtered by the context's tuning_valid expression over the values and the device limits.
#include <map>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "expr/expr.h"

namespace peak {

struct SpaceOptions {
  size_t budget = 64;  // at most this many configurations; random sample beyond
  uint64_t seed = 0x7u;
  std::vector<Config> must_include;                       // e.g. the parent's top configurations
  std::map<std::string, std::vector<int64_t>> overrides;  // per-parameter value sets
};

struct Space {
  std::vector<Config> configs;  // valid ones, in evaluation order
  size_t total = 0;             // size of the full cartesian product
  size_t invalid = 0;           // rejected by tuning_valid
  bool sampled = false;
};

// Environment names available to tuning_valid: the tuning values and the device limits
// max_threads, shared_memory, shared_memory_optin, subgroup_size, compute_units.
expr::Env device_env(const DeviceFacts& d);
Result<Space> enumerate_space(const KernelContext& ctx, const DeviceFacts& device,
                              const SpaceOptions& opts);

}  // namespace peak
