#include "results/summary.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace peak {

using json = nlohmann::json;

namespace {

// Reading: a key of the type the field has moves from `rest` into the field; a key of another
// type stays in `rest` (and so is written back as it was).
bool take(json& rest, const char* key, std::optional<std::string>& out) {
  auto it = rest.find(key);
  if (it == rest.end() || !it->is_string()) return false;
  out = it->get<std::string>();
  rest.erase(it);
  return true;
}

bool take(json& rest, const char* key, std::optional<double>& out) {
  auto it = rest.find(key);
  if (it == rest.end() || !it->is_number()) return false;
  out = it->get<double>();
  rest.erase(it);
  return true;
}

bool take(json& rest, const char* key, std::optional<bool>& out) {
  auto it = rest.find(key);
  if (it == rest.end() || !it->is_boolean()) return false;
  out = it->get<bool>();
  rest.erase(it);
  return true;
}

bool take(json& rest, const char* key, std::optional<int64_t>& out) {
  auto it = rest.find(key);
  if (it == rest.end() || !(it->is_number_integer() || it->is_number_unsigned())) return false;
  out = it->get<int64_t>();
  rest.erase(it);
  return true;
}

bool take(json& rest, const char* key, std::optional<std::vector<double>>& out) {
  auto it = rest.find(key);
  if (it == rest.end() || !it->is_array()) return false;
  std::vector<double> v;
  for (const auto& x : *it) {
    if (!x.is_number()) return false;
    v.push_back(x.get<double>());
  }
  out = std::move(v);
  rest.erase(it);
  return true;
}

// An object-valued key, taken whole.
bool take_object(json& rest, const char* key, std::optional<json>& out) {
  auto it = rest.find(key);
  if (it == rest.end() || !it->is_object()) return false;
  out = std::move(*it);
  rest.erase(it);
  return true;
}

template <class T>
void put(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

// The object under `key` read by `read` (T::from), if the key holds an object.
template <class T, class Read>
std::optional<T> take_part(json& rest, const char* key, Read read) {
  std::optional<json> part;
  if (!take_object(rest, key, part)) return std::nullopt;
  return read(std::move(*part));
}

SummaryBench bench_from(json rest) {
  SummaryBench b;
  take(rest, "shape", b.shape);
  take(rest, "disposition", b.disposition);
  take(rest, "message", b.message);
  take(rest, "median_ms", b.median_ms);
  take(rest, "p25_ms", b.p25_ms);
  take(rest, "p75_ms", b.p75_ms);
  take(rest, "min_ms", b.min_ms);
  take(rest, "spread", b.spread);
  take(rest, "gflops", b.gflops);
  take(rest, "pct_of_peak", b.pct_of_peak);
  take(rest, "samples_ms", b.samples_ms);
  take(rest, "baseline", b.baseline);
  take(rest, "baseline_median_ms", b.baseline_median_ms);
  take(rest, "baseline_spread", b.baseline_spread);
  take(rest, "baseline_gflops", b.baseline_gflops);
  take(rest, "pct_of_baseline", b.pct_of_baseline);
  take(rest, "baseline_samples_ms", b.baseline_samples_ms);
  take(rest, "speedup_vs_seed", b.speedup_vs_seed);
  take(rest, "speedup_vs_parent", b.speedup_vs_parent);
  take(rest, "clock_mhz_before", b.clock_mhz_before);
  take(rest, "clock_mhz_after", b.clock_mhz_after);
  take(rest, "throttled", b.throttled);
  take(rest, "device", b.device);
  take(rest, "headline", b.headline);
  take(rest, "bytes", b.bytes);
  take(rest, "gbs", b.gbs);
  take(rest, "pct_of_bandwidth", b.pct_of_bandwidth);
  take(rest, "copy_method", b.copy_method);
  take(rest, "copy_median_ms", b.copy_median_ms);
  take(rest, "copy_gbs", b.copy_gbs);
  take(rest, "pct_of_copy", b.pct_of_copy);
  take(rest, "copy_samples_ms", b.copy_samples_ms);
  b.extra = std::move(rest);
  return b;
}

SummaryTop top_from(json rest) {
  SummaryTop t;
  take_object(rest, "config", t.config);
  take(rest, "score_ms", t.score_ms);
  t.extra = std::move(rest);
  return t;
}

SummaryBest best_from(json rest) {
  SummaryBest b;
  take_object(rest, "config", b.config);
  take(rest, "config_text", b.config_text);
  take_object(rest, "resources", b.resources);
  take(rest, "validation", b.validation);
  b.extra = std::move(rest);
  return b;
}

SummaryConfigs configs_from(json rest) {
  SummaryConfigs c;
  take(rest, "space", c.space);
  take(rest, "rejected_by_constraint", c.rejected_by_constraint);
  take(rest, "evaluated", c.evaluated);
  take(rest, "pruned", c.pruned);
  take(rest, "reused", c.reused);
  take(rest, "tuning_run", c.tuning_run);
  take(rest, "sampled", c.sampled);
  take(rest, "strategy", c.strategy);
  take(rest, "budget", c.budget);
  take(rest, "stop", c.stop);
  if (auto it = rest.find("dispositions"); it != rest.end() && it->is_object()) {
    std::map<std::string, int64_t> d;
    bool ints = true;
    for (const auto& [k, v] : it->items()) {
      if (!v.is_number_integer())
        ints = false;
      else
        d[k] = v.get<int64_t>();
    }
    if (ints) {
      c.dispositions = std::move(d);
      rest.erase(it);
    }
  }
  c.extra = std::move(rest);
  return c;
}

SummaryPhases phases_from(json rest) {
  SummaryPhases p;
  take(rest, "compile_s", p.compile_s);
  take(rest, "validate_s", p.validate_s);
  take(rest, "tune_s", p.tune_s);
  take(rest, "bench_s", p.bench_s);
  p.extra = std::move(rest);
  return p;
}

SummaryDevice device_from(json rest) {
  SummaryDevice d;
  take(rest, "name", d.name);
  take(rest, "backend", d.backend);
  take(rest, "driver", d.driver);
  take(rest, "api", d.api);
  take(rest, "arch", d.arch);
  take(rest, "is_cpu", d.is_cpu);
  take(rest, "measured_fp32_tflops", d.measured_fp32_tflops);
  d.extra = std::move(rest);
  return d;
}

SummaryPeak peak_from(json rest) {
  SummaryPeak p;
  take(rest, "tflops", p.tflops);
  take(rest, "documented_fp32_tflops", p.documented_fp32_tflops);
  take(rest, "documented_memory_gbs", p.documented_memory_gbs);
  take(rest, "source", p.source);
  p.extra = std::move(rest);
  return p;
}

SummaryTaskSeconds task_seconds_from(json rest) {
  SummaryTaskSeconds t;
  take(rest, "validate", t.validate);
  take(rest, "screen", t.screen);
  take(rest, "bench", t.bench);
  t.extra = std::move(rest);
  return t;
}

SummarySanitizer sanitizer_from(json rest) {
  SummarySanitizer s;
  take(rest, "config", s.config);
  take(rest, "report", s.report);
  s.extra = std::move(rest);
  return s;
}

// An array of objects under `key`, each read by `read`; an array holding anything else stays in
// `rest`.
template <class T, class Read>
std::optional<std::vector<T>> take_list(json& rest, const char* key, Read read) {
  auto it = rest.find(key);
  if (it == rest.end() || !it->is_array()) return std::nullopt;
  for (const auto& e : *it)
    if (!e.is_object()) return std::nullopt;
  std::vector<T> out;
  for (auto& e : *it) out.push_back(read(std::move(e)));
  rest.erase(it);
  return out;
}

std::optional<std::map<std::string, std::string>> take_toolchain(json& rest) {
  auto it = rest.find("toolchain");
  if (it == rest.end() || !it->is_object()) return std::nullopt;
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : it->items()) {
    if (!v.is_string()) return std::nullopt;
    out[k] = v.get<std::string>();
  }
  rest.erase(it);
  return out;
}

EvalSummary summary_from(json rest) {
  EvalSummary s;
  std::optional<int64_t> format;
  if (take(rest, "format", format)) s.format = static_cast<int>(*format);
  take(rest, "kind", s.kind);
  take(rest, "peak_version", s.peak_version);
  take(rest, "disposition", s.disposition);
  take(rest, "message", s.message);
  s.device = take_part<SummaryDevice>(rest, "device", device_from);
  s.peak = take_part<SummaryPeak>(rest, "peak", peak_from);
  s.toolchain = take_toolchain(rest);
  s.best = take_part<SummaryBest>(rest, "best", best_from);
  s.top = take_list<SummaryTop>(rest, "top", top_from);
  s.configs = take_part<SummaryConfigs>(rest, "configs", configs_from);
  s.phases = take_part<SummaryPhases>(rest, "phases", phases_from);
  s.bench = take_list<SummaryBench>(rest, "bench", bench_from);
  if (auto it = rest.find("validation_seed");
      it != rest.end() &&
      (it->is_number_unsigned() || (it->is_number_integer() && it->get<int64_t>() >= 0))) {
    s.validation_seed = it->get<uint64_t>();
    rest.erase(it);
  }
  s.task_seconds = take_part<SummaryTaskSeconds>(rest, "task_seconds", task_seconds_from);
  s.sanitizer = take_part<SummarySanitizer>(rest, "sanitizer", sanitizer_from);
  take(rest, "compile_only", s.compile_only);
  take(rest, "attempts", s.attempts);
  take_object(rest, "transformation", s.transformation);
  take_object(rest, "suite", s.suite);
  take_object(rest, "dispatch", s.dispatch_table);
  s.extra = std::move(rest);
  return s;
}

json with_extra(const json& extra) { return extra.is_object() ? extra : json::object(); }

json part_json(const SummaryDevice& d) {
  json j = with_extra(d.extra);
  put(j, "name", d.name);
  put(j, "backend", d.backend);
  put(j, "driver", d.driver);
  put(j, "api", d.api);
  put(j, "arch", d.arch);
  put(j, "is_cpu", d.is_cpu);
  put(j, "measured_fp32_tflops", d.measured_fp32_tflops);
  return j;
}

json part_json(const SummaryPeak& p) {
  json j = with_extra(p.extra);
  put(j, "tflops", p.tflops);
  put(j, "documented_fp32_tflops", p.documented_fp32_tflops);
  put(j, "documented_memory_gbs", p.documented_memory_gbs);
  put(j, "source", p.source);
  return j;
}

json part_json(const SummaryBest& b) {
  json j = with_extra(b.extra);
  put(j, "config", b.config);
  put(j, "config_text", b.config_text);
  put(j, "resources", b.resources);
  put(j, "validation", b.validation);
  return j;
}

json part_json(const SummaryTop& t) {
  json j = with_extra(t.extra);
  put(j, "config", t.config);
  put(j, "score_ms", t.score_ms);
  return j;
}

json part_json(const SummaryConfigs& c) {
  json j = with_extra(c.extra);
  put(j, "space", c.space);
  put(j, "rejected_by_constraint", c.rejected_by_constraint);
  put(j, "evaluated", c.evaluated);
  put(j, "pruned", c.pruned);
  put(j, "reused", c.reused);
  put(j, "tuning_run", c.tuning_run);
  put(j, "sampled", c.sampled);
  put(j, "strategy", c.strategy);
  put(j, "budget", c.budget);
  put(j, "stop", c.stop);
  put(j, "dispositions", c.dispositions);
  return j;
}

json part_json(const SummaryPhases& p) {
  json j = with_extra(p.extra);
  put(j, "compile_s", p.compile_s);
  put(j, "validate_s", p.validate_s);
  put(j, "tune_s", p.tune_s);
  put(j, "bench_s", p.bench_s);
  return j;
}

json part_json(const SummaryTaskSeconds& t) {
  json j = with_extra(t.extra);
  put(j, "validate", t.validate);
  put(j, "screen", t.screen);
  put(j, "bench", t.bench);
  return j;
}

json part_json(const SummarySanitizer& s) {
  json j = with_extra(s.extra);
  put(j, "config", s.config);
  put(j, "report", s.report);
  return j;
}

json part_json(const SummaryBench& b) { return to_json(b); }

template <class T>
void put_part(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = part_json(*v);
}

template <class T>
void put_list(json& j, const char* key, const std::optional<std::vector<T>>& v) {
  if (!v) return;
  json a = json::array();
  for (const auto& e : *v) a.push_back(part_json(e));
  j[key] = std::move(a);
}

}  // namespace

json to_json(const SummaryBench& b) {
  json j = with_extra(b.extra);
  put(j, "shape", b.shape);
  put(j, "disposition", b.disposition);
  put(j, "message", b.message);
  put(j, "median_ms", b.median_ms);
  put(j, "p25_ms", b.p25_ms);
  put(j, "p75_ms", b.p75_ms);
  put(j, "min_ms", b.min_ms);
  put(j, "spread", b.spread);
  put(j, "gflops", b.gflops);
  put(j, "pct_of_peak", b.pct_of_peak);
  put(j, "samples_ms", b.samples_ms);
  put(j, "baseline", b.baseline);
  put(j, "baseline_median_ms", b.baseline_median_ms);
  put(j, "baseline_spread", b.baseline_spread);
  put(j, "baseline_gflops", b.baseline_gflops);
  put(j, "pct_of_baseline", b.pct_of_baseline);
  put(j, "baseline_samples_ms", b.baseline_samples_ms);
  put(j, "speedup_vs_seed", b.speedup_vs_seed);
  put(j, "speedup_vs_parent", b.speedup_vs_parent);
  put(j, "clock_mhz_before", b.clock_mhz_before);
  put(j, "clock_mhz_after", b.clock_mhz_after);
  put(j, "throttled", b.throttled);
  put(j, "device", b.device);
  put(j, "headline", b.headline);
  put(j, "bytes", b.bytes);
  put(j, "gbs", b.gbs);
  put(j, "pct_of_bandwidth", b.pct_of_bandwidth);
  put(j, "copy_method", b.copy_method);
  put(j, "copy_median_ms", b.copy_median_ms);
  put(j, "copy_gbs", b.copy_gbs);
  put(j, "pct_of_copy", b.pct_of_copy);
  put(j, "copy_samples_ms", b.copy_samples_ms);
  return j;
}

json to_json(const EvalSummary& s) {
  json j = with_extra(s.extra);
  put(j, "format", s.format);
  put(j, "kind", s.kind);
  put(j, "peak_version", s.peak_version);
  put(j, "disposition", s.disposition);
  put(j, "message", s.message);
  put_part(j, "device", s.device);
  put_part(j, "peak", s.peak);
  put(j, "toolchain", s.toolchain);
  put_part(j, "best", s.best);
  put_list(j, "top", s.top);
  put_part(j, "configs", s.configs);
  put_part(j, "phases", s.phases);
  put_list(j, "bench", s.bench);
  put(j, "validation_seed", s.validation_seed);
  put_part(j, "task_seconds", s.task_seconds);
  put_part(j, "sanitizer", s.sanitizer);
  put(j, "compile_only", s.compile_only);
  put(j, "attempts", s.attempts);
  put(j, "transformation", s.transformation);
  put(j, "suite", s.suite);
  put(j, "dispatch", s.dispatch_table);
  return j;
}

SummaryBench bench_from_json(const json& j) {
  return j.is_object() ? bench_from(j) : SummaryBench{};
}

json to_json(const SummaryDevice& d) { return part_json(d); }

SummaryDevice device_from_json(const json& j) {
  return j.is_object() ? device_from(j) : SummaryDevice{};
}

json top_json(const EvalSummary& s) {
  json j = json::object();
  put_list(j, "top", s.top);
  return j.contains("top") ? j["top"] : json::array();
}

std::string headline_rate(const SummaryBench& b, int width) {
  if (!b.bytes_headline()) return fmt::format("{:{}.1f} GFLOP/s", b.gflops.value_or(0.0), width);
  std::vector<std::string> shares;
  if (b.pct_of_copy) shares.push_back(fmt::format("{:.0f}% of copy", *b.pct_of_copy));
  if (b.pct_of_bandwidth)
    shares.push_back(fmt::format("{:.0f}% of bandwidth", *b.pct_of_bandwidth));
  std::string out = fmt::format("{:{}.1f} GB/s", b.gbs.value_or(0.0), width);
  if (!shares.empty()) out += fmt::format(" ({})", fmt::join(shares, ", "));
  return out;
}

std::string EvalSummary::disposition_or_default() const {
  return disposition.value_or(timed() ? "passed" : "not_run");
}

bool EvalSummary::empty() const { return to_json(*this).empty(); }

Result<EvalSummary> summary_from_json(const json& j) {
  if (!j.is_object()) return make_error("an evaluation summary is a JSON object");
  if (auto it = j.find("format");
      it != j.end() && it->is_number_integer() && it->get<int64_t>() > kEvalSummaryFormatVersion)
    return make_error(
        fmt::format("the evaluation summary has format {}; this peak reads format {} and older",
                    it->get<int64_t>(), kEvalSummaryFormatVersion));
  return summary_from(j);
}

EvalSummary summary_or_empty(const json& j) {
  auto s = summary_from_json(j);
  return s ? std::move(*s) : EvalSummary{};
}

EvalSummary parse_summary(const std::string& text) {
  return summary_or_empty(json::parse(text.empty() ? "{}" : text, nullptr, false));
}

}  // namespace peak
