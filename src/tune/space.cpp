#include "tune/space.h"

#include <algorithm>

#include <fmt/format.h>

#include "util/fs.h"

namespace peak {

namespace {

// More configurations than this are not enumerated (narrow the value sets instead).
constexpr size_t kEnumerateLimit = size_t{1} << 20;

// The top-level conjuncts of an expression ("a && (b || c) && d" -> a, (b || c), d), or the whole
// text when it has a top-level || or ?: (splitting would change its meaning).
std::vector<std::string> conjuncts(const std::string& text) {
  std::vector<std::string> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth != 0) continue;
    if (c == '?' || (c == '|' && i + 1 < text.size() && text[i + 1] == '|')) return {text};
    if (c == '&' && i + 1 < text.size() && text[i + 1] == '&') {
      parts.push_back(trim(text.substr(start, i - start)));
      start = i + 2;
      ++i;
    }
  }
  parts.push_back(trim(text.substr(start)));
  return parts;
}

}  // namespace

size_t TuningSpace::linear(const std::vector<int>& coords) const {
  size_t k = 0;
  for (size_t p = params_.size(); p-- > 0;)
    k = k * params_[p].values.size() + static_cast<size_t>(coords[p]);
  return k;
}

Result<TuningSpace> TuningSpace::build(std::vector<SpaceParam> params, const std::string& valid,
                                       const expr::Env& env) {
  TuningSpace s;
  s.total_ = 1;
  for (auto& p : params) {
    std::sort(p.values.begin(), p.values.end());
    p.values.erase(std::unique(p.values.begin(), p.values.end()), p.values.end());
    if (p.values.empty()) p.values = {p.default_value};
    s.total_ *= p.values.size();
    if (s.total_ > kEnumerateLimit)
      return make_error(
          fmt::format("the tuning space has more than {} configurations; narrow the value sets "
                      "(a sequence step's [step.tuning], or `--tune NAME=V1,V2,...` on the "
                      "command line)",
                      kEnumerateLimit));
  }
  s.params_ = std::move(params);
  s.valid_ = trim(valid);
  // Each conjunct separately, so that a pruned configuration names the part that failed.
  std::vector<expr::Expression> parts;
  if (!s.valid_.empty()) {
    auto whole = expr::Expression::parse(s.valid_);
    if (!whole) return make_error("tuning_valid: " + whole.error());
    for (const auto& text : conjuncts(s.valid_)) {
      auto e = expr::Expression::parse(text);
      if (!e) return make_error("tuning_valid: " + e.error());
      parts.push_back(std::move(*e));
    }
  }
  s.slot_.assign(s.total_, -1);
  std::vector<int> idx(s.params_.size(), 0);
  for (size_t n = 0; n < s.total_; ++n) {
    Config c;
    for (size_t i = 0; i < s.params_.size(); ++i)
      c[s.params_[i].name] = s.params_[i].values[static_cast<size_t>(idx[i])];
    expr::Env e = env;
    for (const auto& [k, v] : c) e[k] = v;
    std::string reason;
    for (const auto& part : parts) {
      auto r = part.eval(e);
      if (!r) return make_error("tuning_valid: " + r.error());
      if (*r != 0) continue;
      std::vector<std::string> values;
      for (const auto& id : part.identifiers())
        if (auto it = e.find(id); it != e.end())
          values.push_back(fmt::format("{}={}", id, it->second));
      reason = fmt::format("tuning_valid: `{}` is false ({})", part.text(), join(values, " "));
      break;
    }
    if (reason.empty()) {
      s.slot_[s.linear(idx)] = static_cast<int32_t>(s.configs_.size());
      s.configs_.push_back(std::move(c));
      s.coords_.push_back(idx);
    } else {
      s.pruned_.push_back({std::move(c), std::move(reason)});
    }
    for (size_t i = 0; i < s.params_.size(); ++i) {
      if (++idx[i] < static_cast<int>(s.params_[i].values.size())) break;
      idx[i] = 0;
    }
  }
  return s;
}

std::optional<size_t> TuningSpace::find_coords(const std::vector<int>& coords) const {
  if (coords.size() != params_.size()) return std::nullopt;
  for (size_t p = 0; p < params_.size(); ++p)
    if (coords[p] < 0 || coords[p] >= static_cast<int>(params_[p].values.size()))
      return std::nullopt;
  int32_t v = slot_[linear(coords)];
  if (v < 0) return std::nullopt;
  return static_cast<size_t>(v);
}

std::optional<size_t> TuningSpace::find(const Config& c) const {
  std::vector<int> coords(params_.size());
  for (size_t p = 0; p < params_.size(); ++p) {
    auto it = c.find(params_[p].name);
    if (it == c.end()) return std::nullopt;
    const auto& vals = params_[p].values;
    auto v = std::lower_bound(vals.begin(), vals.end(), it->second);
    if (v == vals.end() || *v != it->second) return std::nullopt;
    coords[p] = static_cast<int>(v - vals.begin());
  }
  return find_coords(coords);
}

std::optional<size_t> TuningSpace::default_index() const {
  Config d;
  for (const auto& p : params_) d[p.name] = p.default_value;
  return find(d);
}

std::vector<size_t> TuningSpace::neighbors(size_t i, bool adjacent) const {
  std::vector<size_t> out;
  std::vector<int> c = coords_[i];
  for (size_t p = 0; p < params_.size(); ++p) {
    const int here = c[p];
    const int n = static_cast<int>(params_[p].values.size());
    for (int v = 0; v < n; ++v) {
      if (v == here || (adjacent && std::abs(v - here) != 1)) continue;
      c[p] = v;
      if (auto j = find_coords(c)) out.push_back(*j);
    }
    c[p] = here;
  }
  return out;
}

nlohmann::json TuningSpace::definition() const {
  nlohmann::json ps = nlohmann::json::array();
  for (const auto& p : params_)
    ps.push_back({{"name", p.name}, {"values", p.values}, {"default", p.default_value}});
  return {{"parameters", ps}, {"valid", valid_}, {"total", total_}, {"size", configs_.size()}};
}

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

Result<TuningSpace> space_for(const KernelContext& ctx, const DeviceFacts& device,
                              const std::map<std::string, std::vector<int64_t>>& overrides) {
  std::vector<SpaceParam> params;
  for (const auto& t : ctx.tuning) {
    SpaceParam p{t.name, t.values, t.default_value};
    if (auto it = overrides.find(t.name); it != overrides.end() && !it->second.empty())
      p.values = it->second;
    params.push_back(std::move(p));
  }
  for (const auto& [name, vals] : overrides) {
    bool known = std::any_of(params.begin(), params.end(),
                             [&](const SpaceParam& p) { return p.name == name; });
    if (!known) {
      std::vector<std::string> names;
      for (const auto& p : params) names.push_back(p.name);
      return make_error(fmt::format("tuning override for unknown parameter {} (known: {})", name,
                                    join(names, ", ")));
    }
  }
  auto s = TuningSpace::build(std::move(params), ctx.tuning_valid, device_env(device));
  if (!s) return make_error("kernel.toml " + s.error());
  return s;
}

}  // namespace peak
