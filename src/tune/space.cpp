#include "tune/space.h"

#include <algorithm>
#include <optional>
#include <random>

#include <fmt/format.h>

#include "util/fs.h"

namespace peak {

expr::Env device_env(const DeviceFacts& d) {
  expr::Env env;
  env["max_threads"] = d.max_threads_per_group > 0 ? d.max_threads_per_group : 1024;
  env["shared_memory"] = d.shared_memory_per_group > 0 ? d.shared_memory_per_group : 32768;
  env["shared_memory_optin"] =
      d.shared_memory_per_group_optin > 0 ? d.shared_memory_per_group_optin : env["shared_memory"];
  env["subgroup_size"] = d.subgroup_size > 0 ? d.subgroup_size : 32;
  env["compute_units"] = d.compute_units;
  return env;
}

Result<Space> enumerate_space(const KernelContext& ctx, const DeviceFacts& device,
                              const SpaceOptions& opts) {
  Space space;
  std::vector<TuningParam> params = ctx.tuning;
  for (auto& p : params) {
    auto it = opts.overrides.find(p.name);
    if (it != opts.overrides.end() && !it->second.empty()) p.values = it->second;
  }
  for (const auto& [name, vals] : opts.overrides) {
    bool known = std::any_of(params.begin(), params.end(),
                             [&](const TuningParam& p) { return p.name == name; });
    if (!known)
      return make_error(
          fmt::format("tuning override for unknown parameter {} (known: {})", name, [&] {
            std::vector<std::string> n;
            for (const auto& p : params) n.push_back(p.name);
            return join(n, ", ");
          }()));
  }
  std::optional<expr::Expression> constraint;
  if (!ctx.tuning_valid.empty()) {
    auto e = expr::Expression::parse(ctx.tuning_valid);
    if (!e) return make_error("kernel.toml tuning_valid: " + e.error());
    constraint = std::move(*e);
  }
  space.total = 1;
  for (const auto& p : params) space.total *= std::max<size_t>(p.values.size(), 1);
  const size_t kEnumerateLimit = 1u << 20;
  if (space.total > kEnumerateLimit)
    return make_error(
        fmt::format("the tuning space has {} configurations; narrow the value sets", space.total));
  expr::Env base = device_env(device);
  std::vector<Config> valid;
  std::vector<size_t> idx(params.size(), 0);
  for (size_t n = 0; n < space.total; ++n) {
    Config c;
    for (size_t i = 0; i < params.size(); ++i)
      if (!params[i].values.empty()) c[params[i].name] = params[i].values[idx[i]];
    bool ok = true;
    if (constraint) {
      expr::Env env = base;
      for (const auto& [k, v] : c) env[k] = v;
      auto r = constraint->eval(env);
      if (!r) return make_error("kernel.toml tuning_valid: " + r.error());
      ok = *r != 0;
    }
    if (ok)
      valid.push_back(std::move(c));
    else
      ++space.invalid;
    for (size_t i = 0; i < params.size(); ++i) {
      if (++idx[i] < std::max<size_t>(params[i].values.size(), 1)) break;
      idx[i] = 0;
    }
  }
  // Defaults first, then configurations the caller insists on, then the rest.
  Config defaults;
  for (const auto& p : params) defaults[p.name] = p.default_value;
  std::vector<Config> ordered;
  auto add = [&](const Config& c) {
    if (std::find(ordered.begin(), ordered.end(), c) != ordered.end()) return;
    if (std::find(valid.begin(), valid.end(), c) == valid.end()) return;
    ordered.push_back(c);
  };
  add(defaults);
  for (const auto& c : opts.must_include) add(c);
  if (valid.size() > opts.budget) {
    space.sampled = true;
    std::mt19937_64 rng(opts.seed);
    std::shuffle(valid.begin(), valid.end(), rng);
  }
  for (const auto& c : valid) {
    if (ordered.size() >= std::max<size_t>(opts.budget, 1)) break;
    add(c);
  }
  space.configs = std::move(ordered);
  return space;
}

}  // namespace peak
