// The rows of a store read once for a report, and what one evaluation's rows say: its
// configurations and, where no summary holds them, its final timings.
#include "report/build_rows.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "util/fs.h"

namespace peak {

using json = nlohmann::json;

namespace report_build {

json parse_object(const std::string& text) {
  if (text.empty()) return json::object();
  json j = json::parse(text, nullptr, false);
  return j.is_object() ? j : json::object();
}

double finite_or_zero(double v) { return std::isfinite(v) ? v : 0.0; }

std::string first_line(const std::string& s, size_t max) {
  std::string line = s.substr(0, s.find('\n'));
  if (line.size() > max) line = line.substr(0, max - 3) + "...";
  return line;
}

// The first lines of a message, for attempt tables.
std::string first_lines(const std::string& s, size_t lines, size_t max) {
  auto all = split_lines(s);
  std::string out;
  for (size_t i = 0; i < all.size() && i < lines; ++i) out += (i ? "\n" : "") + all[i];
  if (all.size() > lines) out += "\n...";
  if (out.size() > max) out = out.substr(0, max - 3) + "...";
  return out;
}

// "BLOCK_X=16 BLOCK_Y=8" from a configuration object (keys in order).
std::string config_words(const json& c) {
  std::string out;
  if (!c.is_object()) return out;
  for (const auto& [k, v] : c.items())
    out += (out.empty() ? "" : " ") + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
  return out;
}

std::string config_words(const std::string& config_json) {
  return config_words(parse_object(config_json));
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double pos = q * static_cast<double>(v.size() - 1);
  size_t i = static_cast<size_t>(pos);
  double f = pos - static_cast<double>(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

std::vector<double> samples_of(const std::string& samples_json) {
  std::vector<double> out;
  json j = json::parse(samples_json.empty() ? "[]" : samples_json, nullptr, false);
  if (!j.is_array()) return out;
  for (const auto& v : j)
    if (v.is_number()) out.push_back(v.get<double>());
  return out;
}

double sum_seconds(const std::vector<double>& ms) {
  double s = 0;
  for (double v : ms) s += v;
  return s / 1000.0;
}

// Compiler resources of a build (CUDA: ptxas; HLSL: SPIR-V reflection; HIP: the AMD names),
// in words.
std::string describe_resources(const json& r) {
  if (!r.is_object()) return "";
  std::vector<std::string> parts;
  auto num = [&](const char* k) { return r.contains(k) && r[k].is_number(); };
  // A module of several kernels: each kernel's registers (its maximum is no kernel's count).
  std::vector<std::string> per_kernel;
  if (r.contains("kernels") && r["kernels"].is_object() && r["kernels"].size() > 1)
    for (const auto& [name, k] : r["kernels"].items())
      if (k.is_object() && k.contains("registers") && k["registers"].is_number())
        per_kernel.push_back(fmt::format("{} {}", name, k["registers"].get<int64_t>()));
  const bool several = per_kernel.size() > 1;
  if (several) {
    constexpr size_t kShown = 6;
    std::string list;
    for (size_t i = 0; i < std::min(per_kernel.size(), kShown); ++i)
      list += (i ? ", " : "") + per_kernel[i];
    if (per_kernel.size() > kShown) list += fmt::format(" and {} more", per_kernel.size() - kShown);
    parts.push_back("registers per kernel: " + list);
  } else if (num("max_registers")) {
    parts.push_back(fmt::format("{} registers", r.value("max_registers", 0)));
  }
  if (num("vgprs")) parts.push_back(fmt::format("{} VGPRs", r.value("vgprs", 0)));
  if (num("sgprs")) parts.push_back(fmt::format("{} SGPRs", r.value("sgprs", 0)));
  int64_t shared = r.value("max_shared_bytes", r.value("shared_bytes", int64_t{-1}));
  if (shared >= 0)
    parts.push_back(fmt::format("{}{:.1f} KiB shared", several ? "up to " : "",
                                static_cast<double>(shared) / 1024.0));
  if (num("lds_bytes"))
    parts.push_back(fmt::format("{:.1f} KiB LDS", r.value("lds_bytes", 0.0) / 1024.0));
  if (num("scratch_bytes"))
    parts.push_back(fmt::format("{} B scratch", r.value("scratch_bytes", 0)));
  if (num("max_local_bytes"))
    parts.push_back(fmt::format("{} B local memory per thread", r.value("max_local_bytes", 0)));
  if (num("occupancy")) parts.push_back(fmt::format("occupancy {}", r.value("occupancy", 0)));
  if (num("threads")) parts.push_back(fmt::format("{} threads/group", r.value("threads", 0)));
  if (r.contains("spills")) parts.push_back(r.value("spills", false) ? "SPILLS" : "no spills");
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  // A build also compiled for targets it does not run on (HIP: AMD gfx90a, gfx1030) carries each
  // target's report under "targets", with its own "summary", shown after the run target's.
  if (r.contains("targets") && r["targets"].is_object())
    for (const auto& [target, t] : r["targets"].items())
      if (t.is_object() && t.contains("summary") && t["summary"].is_string() &&
          !t["summary"].get<std::string>().empty())
        out += fmt::format("{}{} (compiled, not run): {}", out.empty() ? "" : "; ", target,
                           t["summary"].get<std::string>());
  return out;
}

namespace {
// Moves the rows a store query returned into `into`; its error when it failed.
template <typename T>
Status take(Result<std::vector<T>> rows, std::vector<T>& into) {
  if (!rows) return Error{rows.error()};
  into = std::move(*rows);
  return Status::ok();
}
}  // namespace

Result<Rows> read_rows(const Store& store) {
  Rows rows;
  Status st = take(store.checkpoints(), rows.checkpoints);
  if (st) st = take(store.attempts(), rows.attempts);
  if (st) st = take(store.builds(), rows.builds);
  if (st) st = take(store.validations(), rows.validations);
  if (st) st = take(store.measurements(), rows.measurements);
  if (st) st = take(store.workflows(), rows.workflows);
  if (!st) return st;
  return rows;
}

EvalRows eval_rows(const Rows& rows, const std::set<int64_t>& attempt_ids, int64_t checkpoint,
                   const std::string& source_hash) {
  EvalRows e;
  auto mine = [&](const std::optional<int64_t>& a, const std::optional<int64_t>& c) {
    return (a && attempt_ids.count(*a)) || (c && *c == checkpoint);
  };
  for (const auto& b : rows.builds)
    if ((b.attempt_id && attempt_ids.count(*b.attempt_id)) ||
        (!b.attempt_id && attempt_ids.empty() && !source_hash.empty() &&
         b.source_hash == source_hash))
      e.builds.push_back(&b);
  for (const auto& v : rows.validations)
    if (mine(v.attempt_id, v.checkpoint_id)) e.validations.push_back(&v);
  for (const auto& m : rows.measurements) {
    if (!mine(m.attempt_id, m.checkpoint_id)) continue;
    // A class's search (`peak tune --classes`) timed the suite's shapes, not the checkpoint's.
    if (m.what.rfind(kClassMeasurementPrefix, 0) == 0) continue;
    if (m.what == "screening")
      e.screening.push_back(&m);
    else
      e.final_timing.push_back(&m);
  }
  return e;
}

std::vector<ConfigRow> config_rows(const EvalRows& e, const EvalSummary& summary) {
  std::vector<ConfigRow> out;
  std::map<std::string, size_t> index;  // config text -> row
  auto row = [&](const std::string& config_json) -> ConfigRow& {
    std::string key = config_words(config_json);
    auto it = index.find(key);
    if (it != index.end()) return out[it->second];
    index[key] = out.size();
    out.push_back(ConfigRow{});
    out.back().config = key;
    out.back().disposition = "not_run";
    return out.back();
  };
  for (const auto* b : e.builds) {
    ConfigRow& c = row(b->config_json);
    c.compile_s += finite_or_zero(b->seconds);
    c.cached = b->cached;
    c.resources = describe_resources(parse_object(b->resources_json));
    c.disposition = b->disposition;
    if (b->disposition != "passed") c.message = fmt::format("compiler exit code {}", b->exit_code);
  }
  for (const auto* v : e.validations) {
    ConfigRow& c = row(v->config_json);
    c.checks++;
    if (v->disposition != "passed") {
      if (c.failed_checks == 0 && (c.disposition == "passed" || c.disposition == "not_run")) {
        c.disposition = v->disposition;
        c.message = first_line(v->message);
      }
      c.failed_checks++;
    } else if (c.disposition == "not_run") {
      c.disposition = "passed";
    }
  }
  for (const auto* m : e.screening) {
    ConfigRow& c = row(m->config_json);
    auto samples = samples_of(m->samples_json);
    c.shape = m->shape;
    c.score_ms = finite_or_zero(m->median_ms);
    c.score_gflops = finite_or_zero(m->gflops);
    c.spread = finite_or_zero(m->spread);
    c.gpu_s += sum_seconds(samples);
    if (m->disposition != "passed" && (c.disposition == "passed" || c.disposition == "not_run")) {
      c.disposition = m->disposition;
      c.message = "timing on the tuning shape";
    } else if (c.disposition == "not_run") {
      c.disposition = m->disposition;
    }
  }
  if (summary.top)
    for (const auto& t : *summary.top) {
      ConfigRow& c = row(t.config.value_or(json::object()).dump());
      c.top = true;
      if (c.score_ms == 0) c.score_ms = t.score_ms.value_or(0.0);
      if (c.disposition == "not_run") c.disposition = "passed";
    }
  if (summary.best && summary.best->config) {
    ConfigRow& c = row(summary.best->config->dump());
    c.best = true;
  }
  return out;
}

namespace {

// The fields a bench row takes from the summary as they are (0 or "" where absent).
template <typename T>
using SummaryField = std::pair<std::optional<T> SummaryBench::*, T BenchRow::*>;

constexpr SummaryField<std::string> kSummaryTexts[] = {
    {&SummaryBench::shape, &BenchRow::shape},
    {&SummaryBench::disposition, &BenchRow::disposition},
    {&SummaryBench::baseline, &BenchRow::baseline},
    {&SummaryBench::copy_method, &BenchRow::copy_method}};

constexpr SummaryField<double> kSummaryNumbers[] = {
    {&SummaryBench::median_ms, &BenchRow::median_ms},
    {&SummaryBench::spread, &BenchRow::spread},
    {&SummaryBench::gflops, &BenchRow::gflops},
    {&SummaryBench::pct_of_peak, &BenchRow::pct_of_peak},
    {&SummaryBench::baseline_gflops, &BenchRow::baseline_gflops},
    {&SummaryBench::baseline_median_ms, &BenchRow::baseline_median_ms},
    {&SummaryBench::baseline_spread, &BenchRow::baseline_spread},
    {&SummaryBench::pct_of_baseline, &BenchRow::pct_of_baseline},
    {&SummaryBench::speedup_vs_seed, &BenchRow::speedup_vs_seed},
    {&SummaryBench::speedup_vs_parent, &BenchRow::speedup_vs_parent},
    {&SummaryBench::clock_mhz_before, &BenchRow::clock_mhz_before},
    {&SummaryBench::clock_mhz_after, &BenchRow::clock_mhz_after},
    {&SummaryBench::bytes, &BenchRow::bytes},
    {&SummaryBench::gbs, &BenchRow::gbs},
    {&SummaryBench::pct_of_bandwidth, &BenchRow::pct_of_bandwidth},
    {&SummaryBench::copy_median_ms, &BenchRow::copy_median_ms},
    {&SummaryBench::copy_gbs, &BenchRow::copy_gbs},
    {&SummaryBench::pct_of_copy, &BenchRow::pct_of_copy}};

template <typename T, size_t N>
void take_fields(const SummaryBench& m, const SummaryField<T> (&fields)[N], BenchRow& b) {
  for (const auto& [from, to] : fields) b.*to = (m.*from).value_or(T{});
}

// A rate's error bars: the rate at the 75th and at the 25th percentile time (the rate itself where
// one is unknown).
void rate_bars(const BenchRow& b, double rate, double& low, double& high) {
  if (!(rate > 0) || !(b.median_ms > 0)) return;
  low = b.p75_ms > 0 ? rate * b.median_ms / b.p75_ms : rate;
  high = b.p25_ms > 0 ? rate * b.median_ms / b.p25_ms : rate;
}

}  // namespace

BenchRow bench_from_summary(const SummaryBench& m) {
  BenchRow b;
  take_fields(m, kSummaryTexts, b);
  take_fields(m, kSummaryNumbers, b);
  b.throttled = m.throttled.value_or(false);
  b.bytes_headline = m.bytes_headline();
  if (m.samples_ms) b.samples_ms = *m.samples_ms;
  if (m.baseline_samples_ms) b.baseline_samples_ms = *m.baseline_samples_ms;
  b.samples = b.samples_ms.size();
  b.p25_ms = m.p25_ms.value_or(percentile(b.samples_ms, 0.25));
  b.p75_ms = m.p75_ms.value_or(percentile(b.samples_ms, 0.75));
  if (b.bytes > 0 && b.gflops > 0 && b.median_ms > 0)
    b.intensity = b.gflops * 1e9 * (b.median_ms * 1e-3) / b.bytes;
  return b;
}

void finish_bench(BenchRow& b) {
  rate_bars(b, b.gflops, b.gflops_low, b.gflops_high);
  rate_bars(b, b.gbs, b.gbs_low, b.gbs_high);
  if (b.baseline_gflops > 0 && b.baseline_median_ms > 0 && !b.baseline_samples_ms.empty()) {
    double p25 = percentile(b.baseline_samples_ms, 0.25),
           p75 = percentile(b.baseline_samples_ms, 0.75);
    b.baseline_gflops_low = p75 > 0 ? b.baseline_gflops * b.baseline_median_ms / p75 : 0;
    b.baseline_gflops_high = p25 > 0 ? b.baseline_gflops * b.baseline_median_ms / p25 : 0;
  }
}

std::vector<BenchRow> bench_from_measurements(const EvalRows& e, bool seed, EvalSummary& summary) {
  std::map<std::string, BenchRow> by_shape;
  std::vector<std::string> order;
  for (const auto* m : e.final_timing) {
    if (!by_shape.count(m->shape)) order.push_back(m->shape);
    BenchRow& b = by_shape[m->shape];
    b.shape = m->shape;
    json dj = parse_object(m->device_json);
    if (m->what == "candidate") {
      b.disposition = m->disposition;
      b.samples_ms = samples_of(m->samples_json);
      b.samples = b.samples_ms.size();
      b.median_ms = finite_or_zero(m->median_ms);
      b.spread = finite_or_zero(m->spread);
      b.gflops = finite_or_zero(m->gflops);
      b.p25_ms = percentile(b.samples_ms, 0.25);
      b.p75_ms = percentile(b.samples_ms, 0.75);
      b.clock_mhz_before = dj.value("clock_mhz_before", 0.0);
      b.clock_mhz_after = dj.value("clock_mhz_after", 0.0);
      if (!summary.device) summary.device = device_from_json(dj);
      if (!summary.best) {
        summary.best.emplace();
        summary.best->config = parse_object(m->config_json);
      }
    } else if (m->what.rfind("baseline:", 0) == 0) {
      b.baseline = m->what.substr(9);
      b.baseline_samples_ms = samples_of(m->samples_json);
      b.baseline_median_ms = finite_or_zero(m->median_ms);
      b.baseline_spread = finite_or_zero(m->spread);
      b.baseline_gflops = finite_or_zero(m->gflops);
    }
  }
  std::vector<BenchRow> out;
  for (const auto& shape : order) {
    BenchRow& b = by_shape[shape];
    if (b.baseline_gflops > 0 && b.gflops > 0)
      b.pct_of_baseline = 100.0 * b.gflops / b.baseline_gflops;
    if (seed) b.speedup_vs_seed = b.speedup_vs_parent = b.gflops > 0 ? 1.0 : 0.0;
    out.push_back(b);
  }
  return out;
}

}  // namespace report_build

using report_build::describe_resources;
using report_build::parse_object;

std::string resources_text(const json& resources) { return describe_resources(resources); }

std::string instruction_mix_text(const json& resources) {
  if (!resources.is_object() || !resources.contains("sass") || !resources["sass"].is_object())
    return "";
  const json& sass = resources["sass"];
  if (!sass.contains("kernels") || !sass["kernels"].is_object()) return "";
  std::map<std::string, int64_t> opcodes;
  int64_t total = 0;
  size_t kernels = 0;
  for (const auto& [name, k] : sass["kernels"].items()) {
    if (!k.is_object()) continue;
    ++kernels;
    if (k.contains("instructions") && k["instructions"].is_number_integer())
      total += k["instructions"].get<int64_t>();
    if (k.contains("opcodes") && k["opcodes"].is_object())
      for (const auto& [op, n] : k["opcodes"].items())
        if (n.is_number_integer()) opcodes[op] += n.get<int64_t>();
  }
  if (kernels == 0) return "";
  auto count = [&](const std::string& op) {
    auto it = opcodes.find(op);
    return it == opcodes.end() ? int64_t{0} : it->second;
  };
  std::vector<std::string> parts;
  // Tensor cores: Hopper's warpgroup MMA and the warp-level MMA always, the others when used
  // (IMMA, QGMMA, then any other *MMA: IGMMA, DMMA, Blackwell's UTC*MMA, ...).
  std::vector<std::string> mma = {"HGMMA", "HMMA"};
  for (const char* op : {"IMMA", "QGMMA"})
    if (count(op) > 0) mma.push_back(op);
  for (const auto& [op, n] : opcodes)
    if (n > 0 && op.size() > 3 && op.compare(op.size() - 3, 3, "MMA") == 0 &&
        std::find(mma.begin(), mma.end(), op) == mma.end())
      mma.push_back(op);
  for (const auto& op : mma) parts.push_back(fmt::format("{} {}", op, count(op)));
  for (const char* op : {"FFMA", "LDS", "LDG", "STS", "STG", "BAR"})
    parts.push_back(fmt::format("{} {}", op, count(op)));
  std::string out = "SASS: ";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  out += fmt::format(" of {} instructions", total);
  if (kernels > 1) out += fmt::format(" in {} kernels", kernels);
  return out;
}

}  // namespace peak
