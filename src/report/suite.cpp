#include "report/suite.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

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

void finish_suite(SuiteResult& s) {
  std::vector<double> ratios;
  for (auto& r : s.rows) {
    r.ratio = 0;
    if (r.disposition != "passed" || !(r.gflops > 0)) continue;
    if (!s.baseline.empty()) {
      if (r.baseline_gflops > 0) r.ratio = r.gflops / r.baseline_gflops;
    } else if (s.peak_tflops > 0) {
      r.ratio = r.gflops / (s.peak_tflops * 1e3);
    }
    if (r.ratio > 0) ratios.push_back(r.ratio);
  }
  s.rated = static_cast<int>(ratios.size());
  s.geomean = geometric_mean(ratios);
}

std::string suite_ratio_basis(const SuiteResult& s) {
  return s.baseline.empty() ? "of peak" : "of " + s.baseline;
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
    if (!r.config.empty()) {
      j["config"] = r.config;
      j["dispatched_class"] = r.dispatched_class;
    }
    rows.push_back(std::move(j));
  }
  return {{"kind", "peak-suite"},
          {"format", kSuiteFormatVersion},
          {"checkpoint", s.checkpoint},
          {"evaluation", s.evaluation},
          {"created_at", s.created_at},
          {"device", s.device},
          {"config", s.config},
          {"default_config", s.default_config},
          {"dispatch", s.dispatch},
          {"dispatch_note", s.dispatch_note},
          {"baseline", s.baseline},
          {"ratio_of", s.baseline.empty() ? "peak" : s.baseline},
          {"peak_tflops", s.peak_tflops},
          {"peak_source", s.peak_source},
          {"small", s.small},
          {"dims_names", s.dims_names},
          {"rows", rows},
          {"geomean", s.geomean},
          {"rated", s.rated}};
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
      row.spread = r.value("spread", 0.0);
      row.baseline_median_ms = r.value("baseline_median_ms", 0.0);
      row.samples_ms = doubles(r, "samples_ms");
      row.baseline_samples_ms = doubles(r, "baseline_samples_ms");
      row.config = r.value("config", "");
      row.dispatched_class = r.value("dispatched_class", "");
      s.rows.push_back(std::move(row));
    }
  finish_suite(s);  // the ratios follow from the numbers, whoever wrote them
  return s;
}

namespace {

std::string num(double v) { return v > 0 ? fmt::format("{:.1f}", v) : "-"; }
std::string ratio_text(double r) { return r > 0 ? fmt::format("{:.3f}", r) : "-"; }

// The first line of a message, for a table cell.
std::string cell(const std::string& m) {
  std::string s = m.substr(0, m.find('\n'));
  return s.size() > 120 ? s.substr(0, 117) + "..." : s;
}

std::vector<std::vector<std::string>> table(const SuiteResult& s) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"shape", "class", s.dims_names, "GFLOP/s",
                  s.baseline.empty() ? "vendor GFLOP/s" : s.baseline + " GFLOP/s",
                  "ratio " + suite_ratio_basis(s), "disposition"});
  if (s.dispatch > 0) rows.back().push_back("configuration (dispatched class)");
  for (const auto& r : s.rows) {
    std::string d = r.disposition;
    if (r.disposition != "passed" && !r.message.empty()) d += ": " + cell(r.message);
    rows.push_back(
        {r.name, r.cls, r.dims, num(r.gflops), num(r.baseline_gflops), ratio_text(r.ratio), d});
    if (s.dispatch > 0)
      rows.back().push_back(
          r.config.empty()
              ? "-"
              : fmt::format("{} ({})", r.config,
                            r.dispatched_class.empty() ? "no class" : r.dispatched_class));
  }
  return rows;
}

std::string geomean_line(const SuiteResult& s) {
  if (s.rated == 0)
    return fmt::format("geometric mean: - (no shape has a ratio {})", suite_ratio_basis(s));
  return fmt::format("geometric mean of the ratios {}: {:.3f} ({:.1f}%) over {} of {} shapes",
                     suite_ratio_basis(s), s.geomean, 100 * s.geomean, s.rated, s.rows.size());
}

std::string heading(const SuiteResult& s) {
  std::string h = s.dispatch > 0
                      ? fmt::format(
                            "checkpoint {}, one configuration per shape class (dispatch table of "
                            "evaluation {}; other shapes {})",
                            s.checkpoint, s.dispatch,
                            s.config.empty() ? "have no tuning parameters" : "run " + s.config)
                      : fmt::format("checkpoint {}, {}{}", s.checkpoint,
                                    s.config.empty() ? "no tuning parameters" : s.config,
                                    s.default_config ? " (its default values: never tuned)" : "");
  if (!s.dispatch_note.empty()) h += " [" + s.dispatch_note + "]";
  if (!s.device.empty()) h += ", on " + s.device;
  if (s.small) h += ", small suite";
  if (s.baseline.empty())
    h += s.peak_tflops > 0
             ? fmt::format("; no vendor library: ratios of the peak, {:.3g} TFLOP/s ({})",
                           s.peak_tflops, s.peak_source)
             : "; no vendor library and no peak known: no ratios";
  if (!s.created_at.empty()) h += " (" + s.created_at + ")";
  return h;
}

}  // namespace

std::string suite_text(const SuiteResult& s) {
  std::ostringstream o;
  o << heading(s) << "\n";
  auto rows = table(s);
  std::vector<size_t> w(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i + 1 < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      bool right = i >= 3 && i <= 5;
      if (i + 1 == row.size())
        line += row[i];
      else
        line +=
            (right ? fmt::format("{:>{}}", row[i], w[i]) : fmt::format("{:<{}}", row[i], w[i])) +
            "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    o << "  " << line << "\n";
  }
  o << geomean_line(s) << "\n";
  return o.str();
}

std::string suite_markdown(const SuiteResult& s) {
  std::ostringstream o;
  o << heading(s) << "\n\n";
  auto rows = table(s);
  for (size_t i = 0; i < rows.size(); ++i) {
    o << "|";
    for (const auto& c : rows[i]) {
      std::string t = c;
      size_t at = 0;
      while ((at = t.find('|', at)) != std::string::npos) {
        t.replace(at, 1, "\\|");
        at += 2;
      }
      o << " " << t << " |";
    }
    o << "\n";
    if (i == 0) o << "|---|---|---|---:|---:|---:|---|\n";
  }
  o << "\n" << geomean_line(s) << "\n";
  return o.str();
}

std::optional<std::pair<EvaluationRecord, json>> latest_summary_part(const Store& store,
                                                                     int64_t checkpoint,
                                                                     std::string_view kind,
                                                                     std::string_view key,
                                                                     bool passed_only) {
  auto ev = store.evaluations(checkpoint);
  if (!ev) return std::nullopt;
  for (auto it = ev->rbegin(); it != ev->rend(); ++it) {
    if (it->kind != kind || (passed_only && it->disposition != "passed")) continue;
    auto blob = store.get_blob(it->summary_blob);
    if (!blob) continue;
    json s = json::parse(*blob, nullptr, false);
    if (!s.is_object() || !s.contains(key)) continue;
    return std::make_pair(*it, s[std::string(key)]);
  }
  return std::nullopt;
}

std::optional<SuiteResult> latest_suite(const Store& store, int64_t checkpoint) {
  auto part = latest_summary_part(store, checkpoint, kSuiteEvaluationKind, "suite");
  if (!part) return std::nullopt;
  SuiteResult r = suite_from_json(part->second);
  r.evaluation = part->first.id;
  r.created_at = part->first.created_at;
  return r;
}

}  // namespace peak
