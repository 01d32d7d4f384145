#pragma once
// The search space of a kernel's tuning parameters: the cartesian product of their value sets,
// filtered by the context's tuning_valid expression over the values and the device limits.
// Configurations the expression rules out are kept with the reason (the first conjunct of the
// expression that is false), so that every pruned configuration can be recorded with why.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "expr/expr.h"

namespace peak {

// One parameter of a space: its values in ascending order and its default.
struct SpaceParam {
  std::string name;
  std::vector<int64_t> values;  // ascending, distinct
  int64_t default_value = 0;
  bool operator==(const SpaceParam&) const = default;
};

// A configuration ruled out before anything runs, and why.
struct PrunedConfig {
  Config config;
  std::string reason;
};

class TuningSpace {
 public:
  // The configurations of `params` for which `valid` (an expression over the parameters and the
  // names of `env`; "" = every configuration) holds. Values are sorted and made distinct.
  static Result<TuningSpace> build(std::vector<SpaceParam> params, const std::string& valid,
                                   const expr::Env& env);

  const std::vector<SpaceParam>& params() const { return params_; }
  const std::string& valid() const { return valid_; }
  size_t size() const { return configs_.size(); }  // valid configurations
  size_t total() const { return total_; }          // the whole cartesian product
  const Config& config(size_t i) const { return configs_[i]; }
  // The position of each parameter's value in its value list.
  const std::vector<int>& coords(size_t i) const { return coords_[i]; }
  std::optional<size_t> find(const Config& c) const;
  std::optional<size_t> find_coords(const std::vector<int>& coords) const;
  // The defaults' configuration when it is valid.
  std::optional<size_t> default_index() const;
  // Ruled out by `valid`, in cartesian order, each with the reason.
  const std::vector<PrunedConfig>& pruned() const { return pruned_; }
  // Valid configurations that differ from `i` in the value of exactly one parameter: any other
  // value (`adjacent` false), or the next smaller or larger one (`adjacent` true).
  std::vector<size_t> neighbors(size_t i, bool adjacent) const;
  // The space's definition (parameters and validity) as JSON.
  nlohmann::json definition() const;

 private:
  std::vector<SpaceParam> params_;
  std::string valid_;
  size_t total_ = 0;
  std::vector<Config> configs_;
  std::vector<std::vector<int>> coords_;
  std::vector<int32_t> slot_;  // cartesian (mixed-radix) index -> valid index, -1 when pruned
  std::vector<PrunedConfig> pruned_;
  size_t linear(const std::vector<int>& coords) const;
};

// Environment names available to tuning_valid: the tuning values and the device limits
// max_threads, shared_memory, shared_memory_optin, subgroup_size, compute_units.
expr::Env device_env(const DeviceFacts& d);
// The space of a context's tuning parameters on a device; `overrides` replace value sets (an
// unknown name is an error).
Result<TuningSpace> space_for(const KernelContext& ctx, const DeviceFacts& device,
                              const std::map<std::string, std::vector<int64_t>>& overrides = {});

}  // namespace peak
