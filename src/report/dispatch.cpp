#include "report/dispatch.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "report/suite.h"
#include "util/fs.h"

namespace peak {

using json = nlohmann::json;

std::optional<DispatchTable> latest_dispatch(const Store& store, int64_t checkpoint) {
  auto part =
      latest_summary_part(store, checkpoint, kDispatchKind, &EvalSummary::dispatch_table, true);
  if (!part) return std::nullopt;
  DispatchTable t = dispatch_from_json(part->second);
  t.evaluation = part->first.id;
  t.created_at = part->first.created_at;
  return t;
}

std::string dispatch_text(const DispatchTable& t) {
  std::ostringstream o;
  o << fmt::format("checkpoint {}: one configuration per shape class{}{}", t.checkpoint,
                   t.device.empty() ? "" : ", on " + t.device, t.small ? ", small suite" : "");
  if (t.evaluation > 0) o << fmt::format(" (evaluation {}, {})", t.evaluation, t.created_at);
  o << "\n";
  // The family's headline: GB/s with the share of the same-run copy, or GFLOP/s.
  const bool bytes = std::any_of(t.variants.begin(), t.variants.end(),
                                 [](const DispatchVariant& v) { return v.bytes_headline; });
  std::vector<std::vector<std::string>> rows = {
      {"class", "rule", "tuned on", "configuration", "evaluated", "seconds"}};
  for (const char* h : bytes ? std::vector<const char*>{"GB/s", "% of copy", "vendor GB/s"}
                             : std::vector<const char*>{"GFLOP/s", "vendor GFLOP/s"})
    rows[0].push_back(h);
  auto num = [](double v) { return v > 0 ? fmt::format("{:.1f}", v) : std::string("-"); };
  for (const auto& v : t.variants) {
    std::string config = v.config.empty()
                             ? fmt::format("(none found: {}; runs the fallback)", v.disposition)
                             : v.config_text;
    rows.push_back({v.cls, v.when.empty() ? "(any other shape)" : v.when, join(v.shapes, ", "),
                    config, fmt::format("{} of {}", v.evaluated, v.space),
                    fmt::format("{:.1f}", v.seconds)});
    for (double x : bytes ? std::vector<double>{v.gbs, v.pct_of_copy, v.baseline_gbs}
                          : std::vector<double>{v.gflops, v.baseline_gflops})
      rows.back().push_back(num(x));
  }
  std::vector<size_t> w(rows[0].size(), 0);
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      bool right = i >= 4;
      line += (right ? fmt::format("{:>{}}", r[i], w[i]) : fmt::format("{:<{}}", r[i], w[i]));
      if (i + 1 < r.size()) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    o << "  " << line << "\n";
  }
  o << fmt::format("evaluations over all classes: {}; other shapes run the fallback, {}\n",
                   dispatch_evaluations(t),
                   t.fallback_text.empty() ? "no tuning parameters" : t.fallback_text);
  return o.str();
}

}  // namespace peak
