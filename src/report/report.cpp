#include "report/report.h"

#include <algorithm>
#include <map>
#include <sstream>

#include <fmt/format.h>

namespace peak {

using json = nlohmann::json;

namespace {
// Compiler resource report of a build (CUDA: ptxas; HLSL: SPIR-V reflection), in words. A build
// also compiled for targets it does not run on (HIP: AMD gfx90a, gfx1030) carries each target's
// report under "targets", with its own "summary"; those are shown after the run target's.
std::string describe_resources(const json& r) {
  if (!r.is_object()) return "";
  std::vector<std::string> parts;
  if (r.contains("max_registers"))
    parts.push_back(fmt::format("{} registers", r.value("max_registers", 0)));
  int64_t shared = r.value("max_shared_bytes", r.value("shared_bytes", int64_t{-1}));
  if (shared >= 0)
    parts.push_back(fmt::format("{:.1f} KiB shared", static_cast<double>(shared) / 1024.0));
  if (r.contains("threads"))
    parts.push_back(fmt::format("{} threads/group", r.value("threads", 0)));
  if (r.contains("spills")) parts.push_back(r.value("spills", false) ? "SPILLS" : "no spills");
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  if (r.contains("targets") && r["targets"].is_object())
    for (const auto& [target, t] : r["targets"].items())
      if (t.is_object() && !t.value("summary", "").empty())
        out += fmt::format("{}{} (compiled, not run): {}", out.empty() ? "" : "; ", target,
                           t.value("summary", ""));
  return out;
}
}  // namespace

Report build_report(const std::string& workspace, const std::string& kernel,
                    const std::vector<std::pair<CheckpointRecord, json>>& chain,
                    const std::vector<AttemptRecord>& attempts) {
  Report r;
  r.workspace = workspace;
  r.kernel = kernel;
  std::map<int64_t, std::pair<int, int>> per_parent;  // (attempt rows, failed rows) by parent+name
  for (const auto& [cp, s] : chain) {
    StepRow row;
    row.checkpoint = cp.id;
    row.parent = cp.parent;
    row.transformation = cp.transformation.empty() ? "seed" : cp.transformation;
    row.message = cp.message;
    row.disposition = s.value("disposition", s.contains("bench") ? "passed" : "not_run");
    if (s.contains("best")) {
      row.best_config = s["best"].value("config_text", "");
      row.resources = describe_resources(s["best"].value("resources", json::object()));
    }
    if (s.contains("device") && r.device.empty()) {
      r.device = s["device"].value("name", "");
      r.backend = s["device"].value("backend", "");
      r.measured_fp32_tflops = s["device"].value("measured_fp32_tflops", 0.0);
    }
    if (s.contains("peak") && r.peak_tflops == 0) {
      r.peak_tflops = s["peak"].value("tflops", 0.0);
      r.peak_source = s["peak"].value("source", "");
    }
    if (s.contains("bench"))
      for (const auto& m : s["bench"]) {
        BenchRow b;
        b.shape = m.value("shape", "");
        b.disposition = m.value("disposition", "");
        b.median_ms = m.value("median_ms", 0.0);
        b.spread = m.value("spread", 0.0);
        b.gflops = m.value("gflops", 0.0);
        b.pct_of_peak = m.value("pct_of_peak", 0.0);
        b.baseline = m.value("baseline", "");
        b.baseline_gflops = m.value("baseline_gflops", 0.0);
        b.baseline_median_ms = m.value("baseline_median_ms", 0.0);
        b.pct_of_baseline = m.value("pct_of_baseline", 0.0);
        b.speedup_vs_seed = m.value("speedup_vs_seed", 0.0);
        b.speedup_vs_parent = m.value("speedup_vs_parent", 0.0);
        b.samples = m.contains("samples_ms") ? m["samples_ms"].size() : 0;
        if (m.contains("samples_ms")) b.samples_ms = m["samples_ms"].get<std::vector<double>>();
        if (m.contains("baseline_samples_ms"))
          b.baseline_samples_ms = m["baseline_samples_ms"].get<std::vector<double>>();
        b.clock_mhz_before = m.value("clock_mhz_before", 0.0);
        b.clock_mhz_after = m.value("clock_mhz_after", 0.0);
        row.bench.push_back(b);
      }
    if (cp.parent) {
      for (const auto& a : attempts) {
        if (!a.parent_checkpoint || *a.parent_checkpoint != *cp.parent) continue;
        if (a.transformation != cp.transformation) continue;
        if (a.pass_index == 0 && a.disposition == "not_run") continue;  // evaluation placeholder
        row.attempts++;
        if (a.disposition != "passed") row.failed_attempts++;
      }
    }
    r.steps.push_back(row);
  }
  for (const auto& a : attempts) {
    if (a.disposition == "passed" || a.disposition == "not_run") continue;
    FailureRow f;
    f.transformation = a.transformation;
    f.pass_index = a.pass_index;
    f.attempt = a.attempt;
    f.disposition = a.disposition;
    f.error = a.error.substr(0, a.error.find('\n'));
    if (f.error.size() > 160) f.error = f.error.substr(0, 157) + "...";
    r.failures.push_back(f);
  }
  return r;
}

namespace {
std::string num(double v, const char* f = "{:.1f}") {
  return v > 0 ? fmt::format(fmt::runtime(f), v) : "-";
}
}  // namespace

std::string render_text(const Report& r) {
  std::ostringstream o;
  o << fmt::format("peak report: {} ({})\n", r.kernel, r.workspace);
  o << fmt::format("device: {} [{}]\n", r.device.empty() ? "(not evaluated)" : r.device, r.backend);
  if (r.peak_tflops > 0)
    o << fmt::format("peak:   {:.3g} TFLOP/s ({})\n", r.peak_tflops, r.peak_source);
  if (r.measured_fp32_tflops > 0)
    o << fmt::format("measured FP32 FMA throughput: {:.3g} TFLOP/s\n", r.measured_fp32_tflops);
  o << "\n";
  // One row per (step, shape); columns sized to their content.
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"ckpt", "step", "disposition", "best configuration", "shape", "GFLOP/s",
                  "%vendor", "%peak", "x seed", "x parent", "spread"});
  for (const auto& s : r.steps) {
    if (s.bench.empty()) {
      rows.push_back({std::to_string(s.checkpoint), s.transformation, s.disposition, s.best_config,
                      "", "", "", "", "", "", ""});
      continue;
    }
    bool first = true;
    for (const auto& b : s.bench) {
      rows.push_back({first ? std::to_string(s.checkpoint) : "", first ? s.transformation : "",
                      first ? s.disposition : "", first ? s.best_config : "", b.shape,
                      num(b.gflops), num(b.pct_of_baseline), num(b.pct_of_peak),
                      num(b.speedup_vs_seed, "{:.2f}"), num(b.speedup_vs_parent, "{:.2f}"),
                      b.spread > 0 ? fmt::format("{:.1f}%", 100 * b.spread) : "-"});
      first = false;
    }
  }
  std::vector<size_t> w(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      bool right = i == 0 || i >= 5;
      line += right ? fmt::format("{:>{}}", row[i], w[i]) : fmt::format("{:<{}}", row[i], w[i]);
      if (i + 1 < row.size()) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    o << line << "\n";
  }
  bool any_resources = false;
  for (const auto& s : r.steps) any_resources |= !s.resources.empty();
  if (any_resources) {
    o << "\nresources of the best configuration:\n";
    for (const auto& s : r.steps)
      if (!s.resources.empty())
        o << fmt::format("  {:>4}  {:<14} {}\n", s.checkpoint, s.transformation, s.resources);
  }
  if (!r.failures.empty()) {
    o << fmt::format("\nfailed attempts ({}):\n", r.failures.size());
    for (const auto& f : r.failures)
      o << fmt::format(
          "  {} {} attempt {}: {}: {}\n", f.transformation,
          f.pass_index > 0 ? fmt::format("pass {}", f.pass_index) : std::string("evaluation"),
          f.attempt, f.disposition, f.error);
  }
  return o.str();
}

std::string render_markdown(const Report& r) {
  std::ostringstream o;
  o << fmt::format("# peak report: {}\n\n", r.kernel);
  o << fmt::format("- Device: {} ({} backend)\n", r.device, r.backend);
  if (r.peak_tflops > 0)
    o << fmt::format("- Peak used for % of peak: {:.3g} TFLOP/s ({})\n", r.peak_tflops, r.peak_source);
  if (r.measured_fp32_tflops > 0)
    o << fmt::format("- Measured FP32 FMA throughput: {:.3g} TFLOP/s\n", r.measured_fp32_tflops);
  o << "\n| checkpoint | step | disposition | best configuration | shape | GFLOP/s | % of vendor | "
       "% of peak | speedup vs seed | vs parent | spread |\n";
  o << "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& s : r.steps) {
    if (s.bench.empty())
      o << fmt::format("| {} | {} | {} | {} | | | | | | | |\n", s.checkpoint, s.transformation,
                       s.disposition, s.best_config);
    for (const auto& b : s.bench)
      o << fmt::format("| {} | {} | {} | `{}` | {} | {} | {} | {} | {} | {} | {} |\n", s.checkpoint,
                       s.transformation, s.disposition, s.best_config, b.shape, num(b.gflops),
                       num(b.pct_of_baseline), num(b.pct_of_peak), num(b.speedup_vs_seed, "{:.2f}"),
                       num(b.speedup_vs_parent, "{:.2f}"),
                       b.spread > 0 ? fmt::format("{:.1f}%", 100 * b.spread) : "-");
  }
  bool any_resources = false;
  for (const auto& s : r.steps) any_resources |= !s.resources.empty();
  if (any_resources) {
    o << "\n## Resources of the best configuration\n\n| checkpoint | step | resources "
         "|\n|---|---|---|\n";
    for (const auto& s : r.steps)
      if (!s.resources.empty())
        o << fmt::format("| {} | {} | {} |\n", s.checkpoint, s.transformation, s.resources);
  }
  if (!r.failures.empty()) {
    o << "\n## Failed attempts\n\n| transformation | pass | attempt | disposition | message "
         "|\n|---|---|---|---|---|\n";
    for (const auto& f : r.failures)
      o << fmt::format("| {} | {} | {} | {} | {} |\n", f.transformation,
                       f.pass_index > 0 ? std::to_string(f.pass_index) : "evaluation", f.attempt,
                       f.disposition, f.error);
  }
  return o.str();
}

json render_json(const Report& r) {
  json j;
  j["format"] = kReportFormatVersion;
  j["workspace"] = r.workspace;
  j["kernel"] = r.kernel;
  j["device"] = r.device;
  j["backend"] = r.backend;
  j["peak_tflops"] = r.peak_tflops;
  j["peak_source"] = r.peak_source;
  j["measured_fp32_tflops"] = r.measured_fp32_tflops;
  j["steps"] = json::array();
  for (const auto& s : r.steps) {
    json sj{{"checkpoint", s.checkpoint},   {"transformation", s.transformation},
            {"message", s.message},         {"disposition", s.disposition},
            {"attempts", s.attempts},       {"failed_attempts", s.failed_attempts},
            {"best_config", s.best_config}, {"resources", s.resources}};
    if (s.parent) sj["parent"] = *s.parent;
    sj["bench"] = json::array();
    for (const auto& b : s.bench)
      sj["bench"].push_back({{"shape", b.shape},
                             {"disposition", b.disposition},
                             {"median_ms", b.median_ms},
                             {"spread", b.spread},
                             {"gflops", b.gflops},
                             {"pct_of_peak", b.pct_of_peak},
                             {"baseline", b.baseline},
                             {"baseline_gflops", b.baseline_gflops},
                             {"baseline_median_ms", b.baseline_median_ms},
                             {"pct_of_baseline", b.pct_of_baseline},
                             {"speedup_vs_seed", b.speedup_vs_seed},
                             {"speedup_vs_parent", b.speedup_vs_parent},
                             {"samples", b.samples},
                             {"samples_ms", b.samples_ms},
                             {"baseline_samples_ms", b.baseline_samples_ms},
                             {"clock_mhz_before", b.clock_mhz_before},
                             {"clock_mhz_after", b.clock_mhz_after}});
    j["steps"].push_back(sj);
  }
  j["failures"] = json::array();
  for (const auto& f : r.failures)
    j["failures"].push_back({{"transformation", f.transformation},
                             {"pass", f.pass_index},
                             {"attempt", f.attempt},
                             {"disposition", f.disposition},
                             {"error", f.error}});
  return j;
}

}  // namespace peak
