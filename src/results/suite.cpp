#include "results/suite.h"

#include <algorithm>
#include <cmath>

namespace peak {

using json = nlohmann::json;

double geometric_mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  // Sum of logarithms: a product of many small ratios would underflow.
  double sum = 0;
  for (double x : v) {
    if (!(x > 0) || !std::isfinite(x)) return 0;
    sum += std::log(x);
  }
  return std::exp(sum / static_cast<double>(v.size()));
}

namespace {

bool any_copy(const SuiteResult& s) {
  for (const auto& r : s.rows)
    if (r.pct_of_copy > 0) return true;
  return false;
}

// A passed row's ratio, of its headline rate (GB/s for a bytes headline, else GFLOP/s): over the
// vendor library's, else (memory-bound, a copy timed) the copy's share, else over the device's
// ceiling (the documented bandwidth, or the peak); 0 where there is none.
double row_ratio(const SuiteResult& s, const SuiteRow& r, bool copy) {
  const bool bytes = s.bytes_headline;
  const double rate = bytes ? r.gbs : r.gflops;
  if (r.disposition != "passed" || !(rate > 0)) return 0;
  if (!s.baseline.empty()) {
    const double vendor = bytes ? r.baseline_gbs : r.baseline_gflops;
    return vendor > 0 ? rate / vendor : 0;
  }
  if (bytes && copy) return r.pct_of_copy / 100;
  const double ceiling = bytes ? s.memory_gbs : s.peak_tflops * 1e3;
  return ceiling > 0 ? rate / ceiling : 0;
}

}  // namespace

void finish_suite(SuiteResult& s) {
  std::vector<double> ratios;
  const bool copy = any_copy(s);
  for (auto& r : s.rows) {
    r.ratio = row_ratio(s, r, copy);
    if (r.ratio > 0) ratios.push_back(r.ratio);
  }
  s.rated = static_cast<int>(ratios.size());
  s.geomean = geometric_mean(ratios);
}

std::string suite_ratio_basis(const SuiteResult& s) {
  if (!s.baseline.empty()) return "of " + s.baseline;
  if (s.bytes_headline) return any_copy(s) ? "of copy" : "of bandwidth";
  return "of peak";
}

json suite_json(const SuiteResult& s) {
  json rows = json::array();
  for (const auto& r : s.rows) {
    json j{{"name", r.name},
           {"class", r.cls},
           {"dims", r.dims},
           {"shape", r.shape},
           {"disposition", r.disposition},
           {"gflops", r.gflops},
           {"baseline_gflops", r.baseline_gflops},
           {"pct_of_peak", r.pct_of_peak},
           {"ratio", r.ratio},
           {"median_ms", r.median_ms},
           {"spread", r.spread},
           {"baseline_median_ms", r.baseline_median_ms},
           {"samples_ms", r.samples_ms},
           {"baseline_samples_ms", r.baseline_samples_ms}};
    if (!r.message.empty()) j["message"] = r.message;
    if (s.bytes_headline || r.gbs > 0) {  // absent from the suites of GFLOP/s families
      j["gbs"] = r.gbs;
      j["baseline_gbs"] = r.baseline_gbs;
      j["pct_of_bandwidth"] = r.pct_of_bandwidth;
      j["pct_of_copy"] = r.pct_of_copy;
    }
    if (!r.config.empty()) {
      j["config"] = r.config;
      j["dispatched_class"] = r.dispatched_class;
    }
    rows.push_back(std::move(j));
  }
  json out = {{"kind", "peak-suite"},         {"format", kSuiteFormatVersion},
              {"checkpoint", s.checkpoint},   {"evaluation", s.evaluation},
              {"created_at", s.created_at},   {"device", s.device},
              {"config", s.config},           {"default_config", s.default_config},
              {"dispatch", s.dispatch},       {"dispatch_note", s.dispatch_note},
              {"baseline", s.baseline},       {"peak_tflops", s.peak_tflops},
              {"peak_source", s.peak_source}, {"small", s.small},
              {"dims_names", s.dims_names},   {"rows", rows},
              {"geomean", s.geomean},         {"rated", s.rated}};
  out["shapes"] = std::max<int>(s.shapes, static_cast<int>(s.rows.size()));
  if (s.partial()) out["partial"] = true;
  if (s.bytes_headline) {
    out["headline"] = "bytes";
    out["memory_gbs"] = s.memory_gbs;
  }
  out["ratio_of"] = suite_ratio_basis(s).substr(3);
  return out;
}

namespace {
std::vector<double> doubles(const json& j, const char* key) {
  std::vector<double> out;
  if (j.contains(key) && j[key].is_array())
    for (const auto& v : j[key])
      if (v.is_number()) out.push_back(v.get<double>());
  return out;
}
}  // namespace

SuiteResult suite_from_json(const json& j) {
  SuiteResult s;
  if (!j.is_object()) return s;
  s.checkpoint = j.value("checkpoint", int64_t{0});
  s.evaluation = j.value("evaluation", int64_t{0});
  s.created_at = j.value("created_at", "");
  s.device = j.value("device", "");
  s.config = j.value("config", "");
  s.default_config = j.value("default_config", false);
  s.dispatch = j.value("dispatch", int64_t{0});
  s.dispatch_note = j.value("dispatch_note", "");
  s.baseline = j.value("baseline", "");
  s.peak_tflops = j.value("peak_tflops", 0.0);
  s.peak_source = j.value("peak_source", "");
  s.small = j.value("small", false);
  s.bytes_headline = j.value("headline", "") == "bytes";
  s.memory_gbs = j.value("memory_gbs", 0.0);
  s.dims_names = j.value("dims_names", "MxNxK");
  if (j.contains("rows") && j["rows"].is_array())
    for (const auto& r : j["rows"]) {
      if (!r.is_object()) continue;
      SuiteRow row;
      row.name = r.value("name", "");
      row.cls = r.value("class", "");
      row.dims = r.value("dims", "");
      row.shape = r.value("shape", "");
      row.disposition = r.value("disposition", "not_run");
      row.message = r.value("message", "");
      row.gflops = r.value("gflops", 0.0);
      row.baseline_gflops = r.value("baseline_gflops", 0.0);
      row.pct_of_peak = r.value("pct_of_peak", 0.0);
      row.median_ms = r.value("median_ms", 0.0);
      row.gbs = r.value("gbs", 0.0);
      row.baseline_gbs = r.value("baseline_gbs", 0.0);
      row.pct_of_bandwidth = r.value("pct_of_bandwidth", 0.0);
      row.pct_of_copy = r.value("pct_of_copy", 0.0);
      row.spread = r.value("spread", 0.0);
      row.baseline_median_ms = r.value("baseline_median_ms", 0.0);
      row.samples_ms = doubles(r, "samples_ms");
      row.baseline_samples_ms = doubles(r, "baseline_samples_ms");
      row.config = r.value("config", "");
      row.dispatched_class = r.value("dispatched_class", "");
      s.rows.push_back(std::move(row));
    }
  s.shapes = std::max<int>(j.value("shapes", 0), static_cast<int>(s.rows.size()));
  finish_suite(s);  // the ratios follow from the numbers, whoever wrote them
  return s;
}

}  // namespace peak
