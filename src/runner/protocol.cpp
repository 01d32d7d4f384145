#include "runner/protocol.h"

#include <cmath>
#include <limits>

#include <limits>
#include <set>
#include <type_traits>

#include <fmt/format.h>

namespace peak {
namespace {

std::string_view type_name(const json& v) {
  if (v.is_number_unsigned() || v.is_number_integer()) return "an integer";
  if (v.is_number_float()) return "a number";
  return v.type_name();
}

// Reads fields of one JSON object. A missing field keeps the caller's default; a mistyped one
// keeps it too and, when `errors` is given, records "WHERE.KEY: expected ..., got ...".
class Reader {
 public:
  Reader(const json& j, std::string where, std::vector<std::string>* errors)
      : j_(j), where_(std::move(where)), errors_(errors) {
    if (!j_.is_object()) {
      error(fmt::format("{}: expected an object, got {}", where_, type_name(j_)));
      ok_ = false;
    }
  }

  const std::string& where() const { return where_; }
  std::string at(std::string_view key) const {
    return where_.empty() ? std::string(key) : fmt::format("{}.{}", where_, key);
  }
  const json* find(const char* key) const {
    if (!ok_) return nullptr;
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  void error(std::string message) const {
    if (errors_) errors_->push_back(std::move(message));
  }
  void mistyped(const char* key, std::string_view expected, const json& got) const {
    error(fmt::format("{}: expected {}, got {}", at(key), expected, type_name(got)));
  }

  void str(const char* key, std::string& out) const {
    if (const json* v = find(key)) {
      if (v->is_string())
        out = v->get<std::string>();
      else
        mistyped(key, "a string", *v);
    }
  }
  void boolean(const char* key, bool& out) const {
    if (const json* v = find(key)) {
      if (v->is_boolean())
        out = v->get<bool>();
      else
        mistyped(key, "true or false", *v);
    }
  }
  template <typename Int>
  void integer(const char* key, Int& out) const {
    const json* v = find(key);
    if (!v) return;
    if (!v->is_number_integer()) return mistyped(key, "an integer", *v);
    if constexpr (std::is_unsigned_v<Int>) {
      if (!v->is_number_unsigned())
        return error(
            fmt::format("{}: expected a non-negative integer, got {}", at(key), v->get<int64_t>()));
      uint64_t x = v->get<uint64_t>();
      if (x > std::numeric_limits<Int>::max())
        return error(fmt::format("{}: {} is too large", at(key), x));
      out = static_cast<Int>(x);
    } else {
      if (v->is_number_unsigned() &&
          v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return error(fmt::format("{}: {} is too large", at(key), v->get<uint64_t>()));
      int64_t x = v->get<int64_t>();
      if (x < std::numeric_limits<Int>::min() || x > std::numeric_limits<Int>::max())
        return error(fmt::format("{}: {} is out of range", at(key), x));
      out = static_cast<Int>(x);
    }
  }
  void number(const char* key, double& out) const {
    if (const json* v = find(key)) {
      if (v->is_number())
        out = v->get<double>();
      else
        mistyped(key, "a number", *v);
    }
  }
  void numbers(const char* key, std::vector<double>& out) const {
    const json* v = find(key);
    if (!v) return;
    if (!v->is_array()) return mistyped(key, "an array of numbers", *v);
    std::vector<double> r;
    for (const auto& x : *v) {
      if (x.is_number()) {
        r.push_back(x.get<double>());
      } else if (x.is_null()) {  // NaN and infinities are written as null
        r.push_back(std::numeric_limits<double>::quiet_NaN());
      } else {
        return mistyped(key, "an array of numbers", *v);
      }
    }
    out = std::move(r);
  }
  void int_map(const char* key, std::map<std::string, int64_t>& out) const {
    const json* v = find(key);
    if (!v) return;
    if (!v->is_object()) return mistyped(key, "an object of integers", *v);
    std::map<std::string, int64_t> r;
    for (const auto& [k, x] : v->items()) {
      if (!x.is_number_integer() ||
          (x.is_number_unsigned() &&
           x.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
        return error(fmt::format("{}.{}: expected an integer, got {}", at(key), k,
                                 x.is_number_integer() ? "a number too large" : type_name(x)));
      r[k] = x.get<int64_t>();
    }
    out = std::move(r);
  }
  void str_map(const char* key, std::map<std::string, std::string>& out) const {
    const json* v = find(key);
    if (!v) return;
    if (!v->is_object()) return mistyped(key, "an object of strings", *v);
    std::map<std::string, std::string> r;
    for (const auto& [k, x] : v->items()) r[k] = x.is_string() ? x.get<std::string>() : x.dump();
    out = std::move(r);
  }
  void any(const char* key, json& out) const {
    if (const json* v = find(key)) out = *v;
  }
  // Calls f(element, where) for every element of an array field.
  template <typename F>
  void each(const char* key, F&& f) const {
    const json* v = find(key);
    if (!v) return;
    if (!v->is_array()) return mistyped(key, "an array", *v);
    for (size_t i = 0; i < v->size(); ++i) f((*v)[i], fmt::format("{}[{}]", at(key), i));
  }
  void disposition(const char* key, Disposition& out) const {
    const json* v = find(key);
    if (!v) return;
    if (!v->is_string()) return mistyped(key, "a disposition name", *v);
    auto d = disposition_from_string(v->get<std::string>());
    if (!d)
      return error(fmt::format("{}: unknown disposition \"{}\"", at(key), v->get<std::string>()));
    out = *d;
  }
  void dtype(const char* key, DType& out) const {
    const json* v = find(key);
    if (!v) return;
    if (!v->is_string()) return mistyped(key, "a dtype name (f32, f16, i32)", *v);
    auto d = dtype_from_string(v->get<std::string>());
    if (!d)
      return error(fmt::format("{}: unknown dtype \"{}\" (expected f32, f16 or i32)", at(key),
                               v->get<std::string>()));
    out = *d;
  }

 private:
  const json& j_;
  std::string where_;
  std::vector<std::string>* errors_;
  bool ok_ = true;
};

constexpr std::pair<Initializer::Kind, std::string_view> kInitKinds[] = {
    {Initializer::Kind::uniform, "uniform"}, {Initializer::Kind::normal, "normal"},
    {Initializer::Kind::ones, "ones"},       {Initializer::Kind::zeros, "zeros"},
    {Initializer::Kind::iota, "iota"},
};

std::string_view init_kind_name(Initializer::Kind k) {
  for (const auto& [kind, name] : kInitKinds)
    if (kind == k) return name;
  return "uniform";
}

// ---- parsers shared by the lenient (errors == nullptr) and strict forms ----

Shape parse_shape(const json& j, const std::string& where, std::vector<std::string>* errors) {
  Shape s;
  if (!j.is_object()) {
    if (errors) errors->push_back(fmt::format("{}: expected an object of integers", where));
    return s;
  }
  for (const auto& [k, v] : j.items()) {
    if (v.is_number_integer() &&
        !(v.is_number_unsigned() &&
          v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
      s.values[k] = v.get<int64_t>();
    else if (errors)
      errors->push_back(fmt::format("{}.{}: expected an integer, got {}", where, k, type_name(v)));
  }
  return s;
}

Initializer parse_initializer_json(const json& j, const std::string& where,
                                   std::vector<std::string>* errors) {
  Initializer init;
  Reader r(j, where, errors);
  std::string kind(init_kind_name(init.kind));
  r.str("kind", kind);
  bool known = false;
  for (const auto& [k, name] : kInitKinds)
    if (name == kind) init.kind = k, known = true;
  if (!known)
    r.error(
        fmt::format("{}: unknown initializer \"{}\" (expected uniform, normal, ones, zeros "
                    "or iota)",
                    r.at("kind"), kind));
  r.number("a", init.a);
  r.number("b", init.b);
  return init;
}

ArraySpec parse_array_spec(const json& j, const std::string& where,
                           std::vector<std::string>* errors) {
  ArraySpec a;
  Reader r(j, where, errors);
  r.str("name", a.name);
  r.dtype("dtype", a.dtype);
  r.str("size", a.size);
  if (const json* init = r.find("init"))
    a.init = parse_initializer_json(*init, r.at("init"), errors);
  r.boolean("output", a.output);
  return a;
}

ScalarSpec parse_scalar_spec(const json& j, const std::string& where,
                             std::vector<std::string>* errors) {
  ScalarSpec s;
  Reader r(j, where, errors);
  r.str("name", s.name);
  r.dtype("dtype", s.dtype);
  if (const json* v = r.find("values")) {
    if (!v->is_array()) {
      r.mistyped("values", "an array of integers", *v);
    } else {
      for (const auto& x : *v) {
        if (!x.is_number_integer()) {
          r.mistyped("values", "an array of integers", *v);
          s.values.clear();
          break;
        }
        s.values.push_back(x.get<int64_t>());
      }
    }
  }
  r.integer("range_lo", s.range_lo);
  r.integer("range_hi", s.range_hi);
  r.integer("range_step", s.range_step);
  return s;
}

DeviceFacts parse_facts(const json& j, const std::string& where, std::vector<std::string>* errors) {
  DeviceFacts f;
  Reader r(j, where, errors);
  r.str("backend", f.backend);
  r.str("name", f.name);
  r.str("vendor", f.vendor);
  r.str("driver", f.driver);
  r.str("api_version", f.api_version);
  r.str("arch", f.arch);
  r.boolean("is_cpu", f.is_cpu);
  r.integer("compute_units", f.compute_units);
  r.integer("subgroup_size", f.subgroup_size);
  r.integer("shared_memory_per_group", f.shared_memory_per_group);
  r.integer("shared_memory_per_group_optin", f.shared_memory_per_group_optin);
  r.integer("max_threads_per_group", f.max_threads_per_group);
  r.integer("l2_bytes", f.l2_bytes);
  r.integer("memory_bytes", f.memory_bytes);
  r.number("clock_mhz", f.clock_mhz);
  r.number("measured_fp32_tflops", f.measured_fp32_tflops);
  r.str_map("extra", f.extra);
  return f;
}

TimingPolicy parse_timing(const json& j, const std::string& where,
                          std::vector<std::string>* errors) {
  TimingPolicy t;
  Reader r(j, where, errors);
  r.integer("warmup", t.warmup);
  r.integer("min_samples", t.min_samples);
  r.integer("max_samples", t.max_samples);
  r.number("max_seconds", t.max_seconds);
  r.number("target_rel_spread", t.target_rel_spread);
  r.boolean("flush_l2", t.flush_l2);
  r.boolean("fresh_inputs", t.fresh_inputs);
  r.integer("check_elements", t.check_elements);
  r.integer("full_checks", t.full_checks);
  return t;
}

RunnerTask parse_task(const json& j, const std::string& where, std::vector<std::string>* errors) {
  RunnerTask t;
  Reader r(j, where, errors);
  r.str("id", t.id);
  r.str("artifact", t.artifact);
  r.any("plan", t.plan);
  if (const json* s = r.find("shape")) t.shape = parse_shape(*s, r.at("shape"), errors);
  r.int_map("sizes", t.sizes);
  r.integer("seed", t.seed);
  r.integer("variant", t.variant);
  r.boolean("check", t.check);
  r.boolean("repeat", t.repeat);
  if (const json* tm = r.find("timing")) t.timing = parse_timing(*tm, r.at("timing"), errors);
  r.str("baseline", t.baseline);
  r.boolean("baseline_outputs", t.baseline_outputs);
  r.integer("copy_bytes", t.copy_bytes);
  r.str("output_dir", t.output_dir);
  return t;
}

// {entry: {statistic: number or boolean}}: what does not fit is an error (and left out).
json parse_kernel_statistics(const json& j, const std::string& where,
                             std::vector<std::string>* errors) {
  json out = json::object();
  auto error = [&](std::string m) {
    if (errors) errors->push_back(std::move(m));
  };
  if (!j.is_object()) {
    error(fmt::format("{}: expected an object, got {}", where, type_name(j)));
    return out;
  }
  if (j.size() > kMaxKernelStatistics)
    error(fmt::format("{}: {} entry points, at most {}", where, j.size(), kMaxKernelStatistics));
  for (const auto& [entry, stats] : j.items()) {
    if (out.size() >= kMaxKernelStatistics) break;
    const std::string at = fmt::format("{}.{}", where, entry);
    if (!stats.is_object()) {
      error(fmt::format("{}: expected an object, got {}", at, type_name(stats)));
      continue;
    }
    if (stats.size() > kMaxKernelStatistics)
      error(fmt::format("{}: {} statistics, at most {}", at, stats.size(), kMaxKernelStatistics));
    json kept = json::object();
    for (const auto& [name, v] : stats.items()) {
      if (kept.size() >= kMaxKernelStatistics) break;
      if (v.is_number() || v.is_boolean())
        kept[name] = v;
      else
        error(fmt::format("{}.{}: expected a number or true or false, got {}", at, name,
                          type_name(v)));
    }
    out[entry] = std::move(kept);
  }
  return out;
}

TaskResult parse_result(const json& j, const std::string& where, std::vector<std::string>* errors) {
  TaskResult t;
  Reader r(j, where, errors);
  r.str("id", t.id);
  r.disposition("disposition", t.disposition);
  r.str("message", t.message);
  r.boolean("nondeterministic", t.nondeterministic);
  r.str_map("outputs", t.outputs);
  r.str_map("timed_outputs", t.timed_outputs);
  r.str_map("repeat_outputs", t.repeat_outputs);
  r.numbers("samples_ms", t.samples_ms);
  r.numbers("host_ms", t.host_ms);
  r.numbers("baseline_samples_ms", t.baseline_samples_ms);
  r.numbers("baseline_host_ms", t.baseline_host_ms);
  r.numbers("copy_samples_ms", t.copy_samples_ms);
  r.str("copy_method", t.copy_method);
  r.number("clock_mhz_before", t.clock_mhz_before);
  r.number("clock_mhz_after", t.clock_mhz_after);
  r.integer("threads_before", t.threads_before);
  r.integer("threads_after", t.threads_after);
  r.boolean("guard_overwritten", t.guard_overwritten);
  r.boolean("outlived", t.outlived);
  r.number("seconds", t.seconds);
  r.number("input_ms", t.input_ms);
  r.number("load_ms", t.load_ms);
  r.integer("module_bytes", t.module_bytes);
  r.integer("memory_growth_bytes", t.memory_growth_bytes);
  if (const json* ks = r.find("kernel_statistics"))
    t.kernel_statistics = parse_kernel_statistics(*ks, r.at("kernel_statistics"), errors);
  json checks;
  r.any("timed_checks", checks);
  if (checks.is_array()) {
    for (const json& c : checks) {
      if (!c.is_object()) continue;
      TimedCheck tc;
      tc.sample = c.value("sample", 0);
      tc.seed = c.value("seed", uint64_t{0});
      if (c.contains("positions") && c["positions"].is_object())
        for (const auto& [name, v] : c["positions"].items())
          for (const json& x : v)
            if (x.is_number_integer()) tc.positions[name].push_back(x.get<int64_t>());
      if (c.contains("values") && c["values"].is_object())
        for (const auto& [name, v] : c["values"].items())
          for (const json& x : v)
            tc.values[name].push_back(x.is_number() ? x.get<double>()
                                                    : std::numeric_limits<double>::quiet_NaN());
      t.timed_checks.push_back(std::move(tc));
    }
  }
  json full;
  r.any("full_checks", full);
  if (full.is_array()) {
    for (const json& c : full) {
      if (!c.is_object()) continue;
      FullCheck fc;
      fc.sample = c.value("sample", 0);
      fc.seed = c.value("seed", uint64_t{0});
      if (c.contains("candidate") && c["candidate"].is_object())
        fc.candidate = c["candidate"].get<std::map<std::string, std::string>>();
      if (c.contains("baseline") && c["baseline"].is_object())
        fc.baseline = c["baseline"].get<std::map<std::string, std::string>>();
      t.full_checks.push_back(std::move(fc));
    }
  }
  return t;
}

std::string join_errors(std::string_view what, const std::vector<std::string>& errors) {
  std::string msg(what);
  size_t shown = std::min<size_t>(errors.size(), 5);
  for (size_t i = 0; i < shown; ++i) msg += (i ? "; " : ": ") + errors[i];
  if (errors.size() > shown) msg += fmt::format(" (and {} more)", errors.size() - shown);
  return msg;
}

}  // namespace

// ---- context types ----

json shape_to_json(const Shape& s) {
  json j = json::object();
  for (const auto& [k, v] : s.values) j[k] = v;
  return j;
}
Shape shape_from_json(const json& j) { return parse_shape(j, "shape", nullptr); }

json initializer_to_json(const Initializer& i) {
  return json{{"kind", init_kind_name(i.kind)}, {"a", i.a}, {"b", i.b}};
}
Initializer initializer_from_json(const json& j) {
  return parse_initializer_json(j, "init", nullptr);
}

json array_spec_to_json(const ArraySpec& a) {
  return json{{"name", a.name},
              {"dtype", std::string(to_string(a.dtype))},
              {"size", a.size},
              {"init", initializer_to_json(a.init)},
              {"output", a.output}};
}
ArraySpec array_spec_from_json(const json& j) { return parse_array_spec(j, "array", nullptr); }

json scalar_spec_to_json(const ScalarSpec& s) {
  json j{{"name", s.name}, {"dtype", std::string(to_string(s.dtype))}, {"values", s.values}};
  if (s.has_range()) {
    j["range_lo"] = s.range_lo;
    j["range_hi"] = s.range_hi;
    j["range_step"] = s.range_step;
  }
  return j;
}
ScalarSpec scalar_spec_from_json(const json& j) { return parse_scalar_spec(j, "scalar", nullptr); }

// ---- protocol structs ----

json DeviceFacts::to_json() const {
  return json{{"backend", backend},
              {"name", name},
              {"vendor", vendor},
              {"driver", driver},
              {"api_version", api_version},
              {"arch", arch},
              {"is_cpu", is_cpu},
              {"compute_units", compute_units},
              {"subgroup_size", subgroup_size},
              {"shared_memory_per_group", shared_memory_per_group},
              {"shared_memory_per_group_optin", shared_memory_per_group_optin},
              {"max_threads_per_group", max_threads_per_group},
              {"l2_bytes", l2_bytes},
              {"memory_bytes", memory_bytes},
              {"clock_mhz", clock_mhz},
              {"measured_fp32_tflops", measured_fp32_tflops},
              {"extra", extra}};
}
DeviceFacts DeviceFacts::from_json(const json& j) { return parse_facts(j, "device", nullptr); }

json TimingPolicy::to_json() const {
  return json{{"warmup", warmup},
              {"min_samples", min_samples},
              {"max_samples", max_samples},
              {"max_seconds", max_seconds},
              {"target_rel_spread", target_rel_spread},
              {"flush_l2", flush_l2},
              {"fresh_inputs", fresh_inputs},
              {"check_elements", check_elements},
              {"full_checks", full_checks}};
}
TimingPolicy TimingPolicy::from_json(const json& j) { return parse_timing(j, "timing", nullptr); }

json RunnerTask::to_json() const {
  json j{{"id", id},
         {"artifact", artifact},
         {"plan", plan.is_null() ? json::object() : plan},
         {"shape", shape_to_json(shape)},
         {"sizes", sizes},
         {"seed", seed},
         {"variant", variant},
         {"check", check},
         {"repeat", repeat},
         {"baseline", baseline},
         {"baseline_outputs", baseline_outputs},
         {"copy_bytes", copy_bytes},
         {"output_dir", output_dir}};
  j["timing"] = timing ? timing->to_json() : json(nullptr);
  return j;
}
RunnerTask RunnerTask::from_json(const json& j) { return parse_task(j, "task", nullptr); }

json RunnerJob::to_json() const {
  json a = json::array(), s = json::array(), t = json::array();
  for (const auto& x : arrays) a.push_back(array_spec_to_json(x));
  for (const auto& x : scalars) s.push_back(scalar_spec_to_json(x));
  for (const auto& x : tasks) t.push_back(x.to_json());
  json j{{"format", format}, {"mode", mode}, {"device", device}, {"microbench", microbench},
         {"family", family}, {"arrays", a},  {"scalars", s},     {"tasks", t}};
  if (hold) j["hold"] = true;
  return j;
}

Result<RunnerJob> RunnerJob::from_json(const json& j) {
  std::vector<std::string> errors;
  RunnerJob job;
  if (!j.is_object())
    return make_error(
        fmt::format("invalid runner job: expected a JSON object, got {}", type_name(j)));
  Reader r(j, "", &errors);
  if (!r.find("format"))
    return make_error("invalid runner job: no \"format\" field (expected format " +
                      std::to_string(kRunnerProtocolVersion) + ")");
  r.integer("format", job.format);
  if (!errors.empty()) return make_error(join_errors("invalid runner job", errors));
  if (job.format > kRunnerProtocolVersion)
    return make_error(fmt::format(
        "runner job format {} is newer than this runner understands (format {}); use the runner "
        "built with the same peak (rebuild peak-runner)",
        job.format, kRunnerProtocolVersion));
  if (job.format < kRunnerProtocolVersion)
    return make_error(fmt::format(
        "runner job format {} is older than this runner understands (format {}): jobs now carry "
        "evaluated launch plans; use the peak built with this runner",
        job.format, kRunnerProtocolVersion));

  r.str("mode", job.mode);
  if (job.mode != "run" && job.mode != "probe")
    errors.push_back(
        fmt::format("mode: \"{}\" is not a mode (expected \"run\" or \"probe\")", job.mode));
  r.str("device", job.device);
  r.boolean("microbench", job.microbench);
  r.boolean("hold", job.hold);
  r.str("family", job.family);
  r.each("arrays", [&](const json& e, const std::string& where) {
    job.arrays.push_back(parse_array_spec(e, where, &errors));
  });
  r.each("scalars", [&](const json& e, const std::string& where) {
    job.scalars.push_back(parse_scalar_spec(e, where, &errors));
  });
  r.each("tasks", [&](const json& e, const std::string& where) {
    job.tasks.push_back(parse_task(e, where, &errors));
  });

  std::set<std::string> names;
  for (size_t i = 0; i < job.arrays.size(); ++i) {
    const auto& a = job.arrays[i];
    if (a.name.empty())
      errors.push_back(fmt::format("arrays[{}]: the array has no name", i));
    else if (!names.insert(a.name).second)
      errors.push_back(fmt::format("arrays[{}]: array \"{}\" is declared twice", i, a.name));
  }
  std::set<std::string> ids;
  for (size_t i = 0; i < job.tasks.size(); ++i) {
    const auto& t = job.tasks[i];
    std::string where = fmt::format("tasks[{}]", i);
    if (t.id.empty())
      errors.push_back(where + ": the task has no id");
    else if (!ids.insert(t.id).second)
      errors.push_back(fmt::format("{}: task id \"{}\" is used twice", where, t.id));
    if (t.variant < 0) errors.push_back(fmt::format("{}.variant: must be >= 0", where));
    for (const auto& a : job.arrays) {
      auto it = t.sizes.find(a.name);
      if (it == t.sizes.end())
        errors.push_back(fmt::format("{}.sizes: no element count for array \"{}\"", where, a.name));
      else if (it->second < 0)
        errors.push_back(
            fmt::format("{}.sizes.{}: {} elements is negative", where, a.name, it->second));
    }
    for (const auto& [name, n] : t.sizes)
      if (!names.count(name))
        errors.push_back(fmt::format("{}.sizes: \"{}\" is not an array of the job", where, name));
    if (t.timing) {
      const TimingPolicy& p = *t.timing;
      if (p.warmup < 0) errors.push_back(where + ".timing.warmup: must be >= 0");
      if (p.min_samples < 1) errors.push_back(where + ".timing.min_samples: must be >= 1");
      if (p.max_samples < p.min_samples)
        errors.push_back(where + ".timing.max_samples: must be >= min_samples");
      if (!(p.max_seconds > 0)) errors.push_back(where + ".timing.max_seconds: must be > 0");
    }
    if (t.baseline_outputs && t.baseline.empty())
      errors.push_back(where + ": baseline_outputs is set but no baseline is named");
  }
  if (!errors.empty()) return make_error(join_errors("invalid runner job", errors));
  return job;
}

namespace {
json finite_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }
}  // namespace

json TaskResult::checks_json() const {
  json out = json::array();
  for (const TimedCheck& c : timed_checks) {
    json values = json::object();
    for (const auto& [name, v] : c.values) {
      json arr = json::array();
      for (double x : v) arr.push_back(finite_or_null(x));
      values[name] = arr;
    }
    out.push_back(
        {{"sample", c.sample}, {"seed", c.seed}, {"positions", c.positions}, {"values", values}});
  }
  return out;
}

json TaskResult::full_json() const {
  json out = json::array();
  for (const FullCheck& c : full_checks)
    out.push_back({{"sample", c.sample},
                   {"seed", c.seed},
                   {"candidate", c.candidate},
                   {"baseline", c.baseline}});
  return out;
}

json TaskResult::to_json() const {
  return json{{"id", id},
              {"disposition", std::string(to_string(disposition))},
              {"message", message},
              {"nondeterministic", nondeterministic},
              {"outputs", outputs},
              {"timed_outputs", timed_outputs},
              {"repeat_outputs", repeat_outputs},
              {"samples_ms", samples_ms},
              {"host_ms", host_ms},
              {"baseline_samples_ms", baseline_samples_ms},
              {"baseline_host_ms", baseline_host_ms},
              {"copy_samples_ms", copy_samples_ms},
              {"copy_method", copy_method},
              {"clock_mhz_before", clock_mhz_before},
              {"clock_mhz_after", clock_mhz_after},
              {"threads_before", threads_before},
              {"threads_after", threads_after},
              {"guard_overwritten", guard_overwritten},
              {"outlived", outlived},
              {"seconds", seconds},
              {"input_ms", input_ms},
              {"load_ms", load_ms},
              {"module_bytes", module_bytes},
              {"memory_growth_bytes", memory_growth_bytes},
              {"kernel_statistics", kernel_statistics},
              {"timed_checks", checks_json()},
              {"full_checks", full_json()}};
}
TaskResult TaskResult::from_json(const json& j) { return parse_result(j, "result", nullptr); }

Result<TaskResult> parse_task_result(const json& j) {
  std::vector<std::string> errors;
  TaskResult r = parse_result(j, "result", &errors);
  if (!errors.empty()) return make_error(join_errors("malformed runner result", errors));
  return r;
}

Result<DeviceFacts> parse_device_facts(const json& j) {
  std::vector<std::string> errors;
  DeviceFacts f = parse_facts(j, "device", &errors);
  if (!errors.empty()) return make_error(join_errors("malformed device facts", errors));
  return f;
}

}  // namespace peak
