// The report as text (a terminal) and as Markdown.
#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "report/report.h"

namespace peak {

namespace {

// The cross-reference in one line: the vendor library's rate on the same GPU at each bench shape,
// where it comes from, and the tip's rate as a share of it.
std::string cross_reference_line(const Report& r) {
  if (r.cross_reference.empty()) return "";
  const StepRow* tip = nullptr;
  for (const auto& s : r.steps)
    if (s.checkpoint == r.tip) tip = &s;
  const CrossReference& first = r.cross_reference.front();
  std::string out = fmt::format("{} on the same GPU, from {} ({} checkpoint {}, {}):",
                                first.baseline, first.source, first.kernel, first.checkpoint,
                                first.measured_at.substr(0, 10));
  for (size_t i = 0; i < r.cross_reference.size(); ++i) {
    const CrossReference& c = r.cross_reference[i];
    out += fmt::format("{} {:.1f} GFLOP/s at {}", i ? ";" : "", c.gflops, c.shape);
    if (tip)
      for (const auto& b : tip->bench)
        if (b.shape == c.shape && b.gflops > 0 && c.gflops > 0)
          out += fmt::format(" (the tip: {:.1f}%)", 100.0 * b.gflops / c.gflops);
  }
  return out;
}

std::string num(double v, const char* f = "{:.1f}") {
  return v > 0 ? fmt::format(fmt::runtime(f), v) : "-";
}

std::string pct(double spread) { return spread > 0 ? fmt::format("{:.1f}%", 100 * spread) : "-"; }

std::string step_label(const StepRow& s) {
  return s.checkpoint ? std::to_string(s.checkpoint) : "-";
}

// The bench table's measure columns, in text and Markdown names: GFLOP/s with its shares of the
// vendor library and the peak; or, for a memory-bound headline, GB/s with its shares of the
// same-run copy, the documented bandwidth and the vendor library, and GFLOP/s where the context
// gives flops. Then the speedups and the spread.
struct MeasureColumns {
  bool bytes = false, flops = false;
  explicit MeasureColumns(const Report& r) : bytes(bytes_headlined(r)) {
    for (const auto& s : r.steps)
      for (const auto& b : s.bench) flops |= b.gflops > 0;
  }
  std::vector<std::string> names(bool markdown) const {
    std::vector<std::string> out;
    if (bytes) {
      out = markdown
                ? std::vector<std::string>{"GB/s", "% of copy", "% of bandwidth", "% of vendor"}
                : std::vector<std::string>{"GB/s", "%copy", "%bandwidth", "%vendor"};
      if (flops) out.push_back("GFLOP/s");
    } else {
      out = markdown ? std::vector<std::string>{"GFLOP/s", "% of vendor", "% of peak"}
                     : std::vector<std::string>{"GFLOP/s", "%vendor", "%peak"};
    }
    const std::vector<std::string> tail =
        markdown ? std::vector<std::string>{"speedup vs seed", "vs parent", "spread"}
                 : std::vector<std::string>{"x seed", "x parent", "spread"};
    out.insert(out.end(), tail.begin(), tail.end());
    return out;
  }
  std::vector<std::string> cells(const BenchRow& b) const {
    std::vector<std::string> out;
    if (bytes) {
      out = {num(b.gbs), num(b.pct_of_copy), num(b.pct_of_bandwidth), num(b.pct_of_baseline)};
      if (flops) out.push_back(num(b.gflops));
    } else {
      out = {num(b.gflops), num(b.pct_of_baseline), num(b.pct_of_peak)};
    }
    for (std::string c :
         {num(b.speedup_vs_seed, "{:.2f}"), num(b.speedup_vs_parent, "{:.2f}"), pct(b.spread)})
      out.push_back(std::move(c));
    return out;
  }
};

// One row per (step, shape) after the header: checkpoint, step, disposition, best configuration,
// shape, then the measure columns (a step without bench rows leaves them empty).
std::vector<std::vector<std::string>> bench_table(const Report& r, bool markdown) {
  const MeasureColumns cols(r);
  std::vector<std::vector<std::string>> rows;
  rows.push_back(markdown ? std::vector<std::string>{"checkpoint", "step", "disposition",
                                                     "best configuration", "shape"}
                          : std::vector<std::string>{"ckpt", "step", "disposition",
                                                     "best configuration", "shape"});
  for (auto& n : cols.names(markdown)) rows[0].push_back(std::move(n));
  const size_t width = rows[0].size();
  for (const auto& s : r.steps) {
    if (s.bench.empty()) {
      rows.push_back({step_label(s), s.transformation, s.disposition, s.best_config});
      rows.back().resize(width);
      continue;
    }
    bool first = true;
    for (const auto& b : s.bench) {
      const bool head = first || markdown;  // Markdown repeats the step on every row
      std::string config = markdown ? "`" + s.best_config + "`" : s.best_config;
      rows.push_back({head ? step_label(s) : "", head ? s.transformation : "",
                      head ? s.disposition : "", head ? config : "", b.shape});
      for (auto& c : cols.cells(b)) rows.back().push_back(std::move(c));
      first = false;
    }
  }
  return rows;
}

// The memory-bound headline's reference: the documented bandwidth % of bandwidth is of.
std::string bandwidth_line(const Report& r) {
  if (!bytes_headlined(r) || r.provenance.memory_gbs <= 0) return "";
  return fmt::format("{:.0f} GB/s (documented memory bandwidth of {})", r.provenance.memory_gbs,
                     r.provenance.device);
}

// "passed 9, incorrect 2, pruned 420"
std::string search_words(const StepRow& s) {
  std::string out;
  for (const auto& [d, n] : s.config_dispositions)
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", d, n);
  if (s.pruned > 0)
    out += fmt::format("{}pruned by tuning_valid {}", out.empty() ? "" : ", ", s.pruned);
  return out;
}

std::string cost_words(const PhaseCosts& c) {
  std::vector<std::string> parts;
  if (c.llm_calls > 0)
    parts.push_back(fmt::format("LLM {:.1f} s ({} calls, {} + {} tokens)", c.llm_s, c.llm_calls,
                                c.prompt_tokens, c.completion_tokens));
  if (c.recorded)
    parts.push_back(fmt::format("compile {:.1f} s, validate {:.1f} s, tune {:.1f} s, time {:.1f} s",
                                c.compile_s, c.validate_s, c.tune_s, c.bench_s));
  else if (c.compile_cpu_s > 0)
    parts.push_back(fmt::format("compile {:.1f} s (sum of builds)", c.compile_cpu_s));
  if (c.gpu_s > 0) parts.push_back(fmt::format("GPU {:.3f} s", c.gpu_s));
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? "; " : "") + parts[i];
  return out;
}

}  // namespace

std::string render_text(const Report& r) {
  const Provenance& p = r.provenance;
  std::ostringstream o;
  o << fmt::format("peak report: {} ({})\n", r.kernel, r.source);
  o << fmt::format("device: {} [{}]\n", p.device.empty() ? "(not evaluated)" : p.device, p.backend);
  if (p.peak_tflops > 0)
    o << fmt::format("peak:   {:.3g} TFLOP/s ({})\n", p.peak_tflops, p.peak_source);
  if (auto bw = bandwidth_line(r); !bw.empty()) o << "bandwidth: " << bw << "\n";
  if (p.measured_fp32_tflops > 0)
    o << fmt::format("measured FP32 FMA throughput: {:.3g} TFLOP/s\n", p.measured_fp32_tflops);
  if (!r.cross_reference.empty()) o << "cross-reference: " << cross_reference_line(r) << "\n";
  for (const auto& n : r.notes) o << "note: " << n << "\n";
  o << "\n";
  // One row per (step, shape); columns sized to their content.
  const auto rows = bench_table(r, false);
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
  for (const auto& s : r.steps)
    if (s.suite)
      o << fmt::format("\nshape suite (peak bench) of {} {}: ", step_label(s), s.transformation)
        << suite_text(*s.suite);
  bool any_resources = false;
  for (const auto& s : r.steps) any_resources |= !s.resources.empty();
  if (any_resources) {
    o << "\nresources of the best configuration:\n";
    for (const auto& s : r.steps)
      if (!s.resources.empty())
        o << fmt::format("  {:>4}  {:<14} {}\n", step_label(s), s.transformation, s.resources);
  }
  bool any_mix = false;
  for (const auto& s : r.steps) any_mix |= !s.instruction_mix.empty();
  if (any_mix) {
    o << "\ninstruction mix of the best configuration:\n";
    for (const auto& s : r.steps)
      if (!s.instruction_mix.empty())
        o << fmt::format("  {:>4}  {:<14} {}\n", step_label(s), s.transformation,
                         s.instruction_mix);
  }
  bool any_search = false;
  for (const auto& s : r.steps) any_search |= !s.config_dispositions.empty();
  if (any_search) {
    o << "\ntuning configurations:\n";
    for (const auto& s : r.steps)
      if (!s.config_dispositions.empty())
        o << fmt::format("  {:>4}  {:<14} {}\n", step_label(s), s.transformation, search_words(s));
  }
  bool any_cost = false;
  for (const auto& s : r.steps) any_cost |= !cost_words(s.costs).empty();
  if (any_cost) {
    o << "\ncosts:\n";
    for (const auto& s : r.steps)
      if (!cost_words(s.costs).empty())
        o << fmt::format("  {:>4}  {:<14} {}\n", step_label(s), s.transformation,
                         cost_words(s.costs));
  }
  for (bool infra : {false, true}) {
    auto n = std::count_if(r.failures.begin(), r.failures.end(),
                           [&](const FailureRow& f) { return f.infrastructure == infra; });
    if (n == 0) continue;
    o << (infra ? fmt::format("\ninfrastructure failures ({}; not charged to the "
                              "transformations):\n",
                              n)
                : fmt::format("\nfailed attempts ({}):\n", n));
    for (const auto& f : r.failures)
      if (f.infrastructure == infra)
        o << fmt::format(
            "  {} {} attempt {}: {}: {}\n", f.transformation,
            f.pass_index > 0 ? fmt::format("pass {}", f.pass_index) : std::string("evaluation"),
            f.attempt, f.disposition, f.error);
  }
  if (r.live.running && !r.live.process_gone) {
    o << fmt::format("\nin progress: workflow {} ({})", r.live.workflow, r.live.kind);
    if (!r.live.transformation.empty())
      o << fmt::format(", {} attempt {} ({})", r.live.transformation, r.live.attempt, r.live.phase);
    o << "\n";
    if (!r.live.line.empty()) o << "  " << r.live.line << "\n";
    if (!r.live.status.empty()) o << "  " << r.live.status << "\n";
    if (!r.live.configs.empty())
      o << fmt::format("  {} configurations timed so far\n", r.live.configs.size());
  }
  return o.str();
}

std::string render_markdown(const Report& r) {
  const Provenance& p = r.provenance;
  std::ostringstream o;
  o << fmt::format("# peak report: {}\n\n", r.kernel);
  o << fmt::format("- Device: {} ({} backend)\n", p.device, p.backend);
  if (p.peak_tflops > 0)
    o << fmt::format("- Peak used for % of peak: {:.3g} TFLOP/s ({})\n", p.peak_tflops,
                     p.peak_source);
  if (auto bw = bandwidth_line(r); !bw.empty())
    o << "- Bandwidth used for % of bandwidth: " << bw << "\n";
  if (p.measured_fp32_tflops > 0)
    o << fmt::format("- Measured FP32 FMA throughput: {:.3g} TFLOP/s\n", p.measured_fp32_tflops);
  if (!r.cross_reference.empty()) o << "- Cross-reference: " << cross_reference_line(r) << "\n";
  for (const auto& n : r.notes) o << "- Note: " << n << "\n";
  const auto rows = bench_table(r, true);
  o << "\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    std::string line = "|";
    for (size_t k = 0; k < rows[i].size(); ++k)  // a step's empty measures as bare bars
      line += k >= 4 && rows[i][k].empty() ? " |" : " " + rows[i][k] + " |";
    o << line << "\n";
    if (i == 0) {  // left-aligned names, right-aligned numbers
      o << "|---|---|---|---|---|";
      for (size_t k = 5; k < rows[0].size(); ++k) o << "---:|";
      o << "\n";
    }
  }
  bool any_suite = false;
  for (const auto& s : r.steps) any_suite |= s.suite.has_value();
  if (any_suite) {
    o << "\n## Shape suite (`peak bench`)\n";
    for (const auto& s : r.steps)
      if (s.suite)
        o << fmt::format("\n### {} {}\n\n", step_label(s), s.transformation)
          << suite_markdown(*s.suite);
  }
  bool any_resources = false;
  for (const auto& s : r.steps) any_resources |= !s.resources.empty();
  if (any_resources) {
    o << "\n## Resources of the best configuration\n\n| checkpoint | step | resources "
         "|\n|---|---|---|\n";
    for (const auto& s : r.steps)
      if (!s.resources.empty())
        o << fmt::format("| {} | {} | {} |\n", step_label(s), s.transformation, s.resources);
  }
  bool any_mix = false;
  for (const auto& s : r.steps) any_mix |= !s.instruction_mix.empty();
  if (any_mix) {
    o << "\n## Instruction mix of the best configuration\n\n| checkpoint | step | instruction "
         "mix |\n|---|---|---|\n";
    for (const auto& s : r.steps)
      if (!s.instruction_mix.empty())
        o << fmt::format("| {} | {} | {} |\n", step_label(s), s.transformation, s.instruction_mix);
  }
  bool any_search = false;
  for (const auto& s : r.steps) any_search |= !s.config_dispositions.empty();
  if (any_search) {
    o << "\n## Tuning configurations\n\n| checkpoint | step | evaluated | by disposition |\n"
         "|---|---|---:|---|\n";
    for (const auto& s : r.steps)
      if (!s.config_dispositions.empty()) {
        int n = 0;
        for (const auto& [d, c] : s.config_dispositions) n += c;
        o << fmt::format("| {} | {} | {} | {} |\n", step_label(s), s.transformation, n,
                         search_words(s));
      }
  }
  bool any_cost = false;
  for (const auto& s : r.steps) any_cost |= !cost_words(s.costs).empty();
  if (any_cost) {
    o << "\n## Costs\n\n| checkpoint | step | where the time went |\n|---|---|---|\n";
    for (const auto& s : r.steps)
      if (!cost_words(s.costs).empty())
        o << fmt::format("| {} | {} | {} |\n", step_label(s), s.transformation,
                         cost_words(s.costs));
  }
  for (bool infra : {false, true}) {
    if (std::none_of(r.failures.begin(), r.failures.end(),
                     [&](const FailureRow& f) { return f.infrastructure == infra; }))
      continue;
    o << (infra ? "\n## Infrastructure failures (not charged to the transformations)\n\n"
                : "\n## Failed attempts\n\n");
    o << "| transformation | pass | attempt | disposition | message |\n|---|---|---|---|---|\n";
    for (const auto& f : r.failures)
      if (f.infrastructure == infra)
        o << fmt::format("| {} | {} | {} | {} | {} |\n", f.transformation,
                         f.pass_index > 0 ? std::to_string(f.pass_index) : "evaluation",
                         f.attempt, f.disposition, f.error);
  }
  return o.str();
}

}  // namespace peak
