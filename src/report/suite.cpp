#include "report/suite.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

namespace peak {

using json = nlohmann::json;

namespace {

std::string num(double v) { return v > 0 ? fmt::format("{:.1f}", v) : "-"; }
std::string ratio_text(double r) { return r > 0 ? fmt::format("{:.3f}", r) : "-"; }

// The first line of a message, for a table cell.
std::string cell(const std::string& m) {
  std::string s = m.substr(0, m.find('\n'));
  return s.size() > 120 ? s.substr(0, 117) + "..." : s;
}

// The measure columns: GFLOP/s and the vendor's; for a bytes headline GB/s, % of copy, % of
// bandwidth and the vendor's GB/s.
std::vector<std::string> measure_names(const SuiteResult& s) {
  const std::string vendor = s.baseline.empty() ? "vendor" : s.baseline;
  if (s.bytes_headline) return {"GB/s", "%copy", "%bandwidth", vendor + " GB/s"};
  return {"GFLOP/s", vendor + " GFLOP/s"};
}

std::vector<std::string> measures(const SuiteResult& s, const SuiteRow& r) {
  if (s.bytes_headline)
    return {num(r.gbs), num(r.pct_of_copy), num(r.pct_of_bandwidth), num(r.baseline_gbs)};
  return {num(r.gflops), num(r.baseline_gflops)};
}

std::vector<std::vector<std::string>> table(const SuiteResult& s) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"shape", "class", s.dims_names});
  for (auto& n : measure_names(s)) rows.back().push_back(std::move(n));
  rows.back().push_back("ratio " + suite_ratio_basis(s));
  rows.back().push_back("disposition");
  if (s.dispatch > 0) rows.back().push_back("configuration (dispatched class)");
  for (const auto& r : s.rows) {
    std::string d = r.disposition;
    if (r.disposition != "passed" && !r.message.empty()) d += ": " + cell(r.message);
    rows.push_back({r.name, r.cls, r.dims});
    for (auto& m : measures(s, r)) rows.back().push_back(std::move(m));
    rows.back().push_back(ratio_text(r.ratio));
    rows.back().push_back(d);
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
  const std::string partial =
      s.partial() ? fmt::format(" (partial: {} of the suite's {} shapes timed so far)",
                                s.rows.size(), s.shapes)
                  : "";
  if (s.rated == 0)
    return fmt::format("geometric mean: - (no shape has a ratio {}){}", suite_ratio_basis(s),
                       partial);
  return fmt::format("geometric mean of the ratios {}: {:.3f} ({:.1f}%) over {} of {} shapes{}",
                     suite_ratio_basis(s), s.geomean, 100 * s.geomean, s.rated, s.rows.size(),
                     partial);
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
  if (s.baseline.empty() && s.bytes_headline)
    h += suite_ratio_basis(s) == "of copy"
             ? std::string("; no vendor library: ratios of the same-traffic copy of the same run")
         : s.memory_gbs > 0
             ? fmt::format(
                   "; no vendor library and no copy timed: ratios of the documented "
                   "memory bandwidth, {:.0f} GB/s",
                   s.memory_gbs)
             : "; no vendor library, no copy timed and no bandwidth known: no ratios";
  else if (s.baseline.empty())
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
  const size_t numbers_end = 3 + measure_names(s).size();  // the ratio's column
  std::vector<size_t> w(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i + 1 < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      bool right = i >= 3 && i <= numbers_end;
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
    if (i == 0) {
      o << "|---|---|---|";
      for (size_t k = 0; k <= measure_names(s).size(); ++k) o << "---:|";
      o << "---|\n";
    }
  }
  o << "\n" << geomean_line(s) << "\n";
  return o.str();
}

std::optional<std::pair<EvaluationRecord, json>> latest_summary_part(
    const Store& store, int64_t checkpoint, std::string_view kind,
    std::optional<json> EvalSummary::*part, bool passed_only) {
  auto ev = store.evaluations(checkpoint);
  if (!ev) return std::nullopt;
  for (auto it = ev->rbegin(); it != ev->rend(); ++it) {
    if (it->kind != kind || (passed_only && it->disposition != "passed")) continue;
    auto blob = store.get_blob(it->summary_blob);
    if (!blob) continue;
    EvalSummary s = parse_summary(*blob);
    if (!(s.*part)) continue;
    return std::make_pair(*it, *(s.*part));
  }
  return std::nullopt;
}

std::optional<SuiteResult> latest_suite(const Store& store, int64_t checkpoint) {
  auto part = latest_summary_part(store, checkpoint, kSuiteEvaluationKind, &EvalSummary::suite);
  if (!part) return std::nullopt;
  SuiteResult r = suite_from_json(part->second);
  r.evaluation = part->first.id;
  r.created_at = part->first.created_at;
  return r;
}

}  // namespace peak
