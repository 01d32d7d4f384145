// `peak bench`: a checkpoint's best configuration timed over its context's shape suite, the
// vendor library timed in the same runner task at every shape (docs/cli.md, "peak bench").
#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "engine/evaluate_internal.h"
#include "engine/workspace.h"
#include "peak/version.h"
#include "tune/measure.h"
#include "util/fs.h"
#include "util/sandbox.h"
#include "validate/task_timeout.h"

namespace peak {

namespace {

// "2048x2048x2048" and "MxNxK": the scalars in their declared order.
std::string dims_of(const KernelContext& ctx, const Shape& shape) {
  std::string out;
  for (const auto& s : ctx.scalars) {
    auto it = shape.values.find(s.name);
    if (it == shape.values.end()) continue;
    out += (out.empty() ? "" : "x") + std::to_string(it->second);
  }
  return out;
}

std::string dims_names_of(const KernelContext& ctx) {
  std::string out;
  for (const auto& s : ctx.scalars) out += (out.empty() ? "" : "x") + s.name;
  return out;
}

Config config_from(const json& j) {
  Config c;
  if (j.is_object())
    for (const auto& [k, v] : j.items())
      if (v.is_number_integer()) c[k] = v.get<int64_t>();
  return c;
}

bool same_scalars(const KernelContext& a, const KernelContext& b) {
  if (a.scalars.size() != b.scalars.size()) return false;
  for (size_t i = 0; i < a.scalars.size(); ++i)
    if (a.scalars[i].name != b.scalars[i].name) return false;
  return true;
}

}  // namespace

Result<SuiteResult> Workspace::bench_suite(int64_t id, const EvalChoices& choices) {
  auto cp = store_->checkpoint(id);
  if (!cp) return cp.status();
  auto files = checkpoint_files(id);
  if (!files) return files.status();
  KernelContext ctx = files->first;
  const std::string& source = files->second;

  // The suite is the checkpoint's; a checkpoint made before its context had one takes the suite
  // of the working kernel.toml (the suite says how to measure, not what the kernel is).
  std::string suite_from = fmt::format("checkpoint {}'s kernel.toml", id);
  if (ctx.suite.empty() && ctx.suite_small.empty()) {
    auto working = load_context(root_);
    if (working && (!working->suite.empty() || !working->suite_small.empty()) &&
        same_scalars(*working, ctx)) {
      ctx.suite = working->suite;
      ctx.suite_small = working->suite_small;
      suite_from = "the working kernel.toml";
    }
  }
  if (ctx.suite.empty() && ctx.suite_small.empty())
    return make_error(
        fmt::format("checkpoint {}'s kernel context has no shape suite: add a [suite] table to "
                    "kernel.toml (and set format = {}), with named shapes of the classes square, "
                    "irregular, large-k, small-k, small-m and wide, as "
                    "examples/matmul-cuda-fp32/kernel.toml does (docs/kernel-context.md, "
                    "\"[suite]\"); `peak bench` then reads it from the working kernel.toml",
                    id, kContextFormatSuite),
        ErrorKind::input);
  auto regions = split_regions(source, ctx.source_file);
  if (!regions) return make_error(regions.error(), ErrorKind::input);

  if (auto s = lock(); !s) return s;  // the benchmark is recorded in the store
  auto eo = eval_options(choices);
  if (!eo) return eo.status();
  EvalOptions opts = *eo;
  opts.standard = false;  // never the checkpoint's result (docs/store.md, "Results")
  const std::vector<SuiteShape>& suite = suite_for(ctx, opts.small);
  if (suite.empty())
    return make_error(fmt::format("{} has a small suite only; time it with --small", suite_from),
                      ErrorKind::input);

  auto b = backend();
  if (!b) return b.status();
  Backend& be = **b;
  auto dev = device(opts.device);
  if (!dev) return dev.status();
  detail::PeakInfo peak = detail::peak_for(ctx, *dev);

  SuiteResult r;
  r.checkpoint = id;
  r.device = dev->name;
  r.small = opts.small && !ctx.suite_small.empty();
  r.dims_names = dims_names_of(ctx);
  r.peak_tflops = peak.tflops;
  r.peak_source = peak.source;
  r.baseline = opts.baseline ? be.baseline(ctx, *dev) : "";

  // The configuration: the checkpoint's result's best one; its default values when it has none.
  json result = summary(*cp);
  Config config;
  if (result.contains("best") && result["best"].is_object() && result["best"].contains("config")) {
    config = config_from(result["best"]["config"]);
  } else {
    r.default_config = true;
    for (const auto& p : ctx.tuning) config[p.name] = p.default_value;
  }
  r.config = config_text(config);

  fs::path cache = root_ / ".peak" / "cache";
  progress_.status(fmt::format("building checkpoint {} ({})", id, r.config), true);
  BuildResult build = be.build(BuildRequest{&ctx, source, config, *dev, cache});
  progress_.clear();
  if (build.disposition != Disposition::passed)
    return make_error(fmt::format("checkpoint {} does not build with {} ({}):\n{}", id, r.config,
                                  to_string(build.disposition), build.log),
                      ErrorKind::failed);

  // The runner, the device lock and the reference, as Workspace::evaluate sets them up.
  RunnerOptions ro;
  ro.executable = be.runner();
  ro.task_timeout_s = opts.task_timeout_s;
  ro.device_lock = detail::device_lock_for(*dev);
  ro.device_lock->set_wait_notice([this](const std::string& m) { progress_.status(m, true); });
  struct NoticeScope {  // the lock outlives this workspace: it must not call back into it
    std::shared_ptr<DeviceLock> lock;
    ~NoticeScope() { lock->set_wait_notice({}); }
  } notice_scope{ro.device_lock};
  auto ref = detail::reference_source(*this, ctx, be, *dev, cache);
  if (!ref) return make_error(ref.error(), ErrorKind::environment);
  Validator validator(be, *dev, ro, *ref);

  // Deadlines from what the final timings of the seed and this checkpoint took here.
  std::vector<std::pair<std::string, TaskSeconds>> refs;
  if (result.contains("task_seconds"))
    refs.emplace_back(fmt::format("checkpoint {}", id),
                      TaskSeconds::from_json(result["task_seconds"]));
  if (auto seed = store_->find_tag("seed"); seed && *seed && **seed != id)
    if (auto sc = store_->checkpoint(**seed)) {
      json ss = summary(*sc);
      if (ss.contains("task_seconds"))
        refs.emplace_back("seed", TaskSeconds::from_json(ss["task_seconds"]));
    }
  const TaskBudget budget = task_budget(TaskKind::bench, dev->is_cpu, refs, opts.task_timeout_s * 4,
                                        timing_allowance(opts.policy, opts.baseline));
  MeasureOptions mo = detail::final_timing_options(opts, budget, peak);

  json rows = json::array();
  auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < suite.size(); ++i) {
    const SuiteShape& ss = suite[i];
    if (opts.cancelled && opts.cancelled())
      return make_error(kCancelledMessage, ErrorKind::environment);
    SuiteRow row;
    row.name = ss.name;
    row.cls = std::string(to_string(ss.cls));
    row.dims = dims_of(ctx, ss.shape);
    row.shape = ss.shape.text();
    // A shape the checkpoint's kernel does not accept is a row, not a failure of the bench.
    auto valid = shape_is_valid(ctx, ss.shape);
    if (!valid || !*valid) {
      row.disposition = std::string(to_string(Disposition::not_run));
      row.message =
          valid ? (ctx.supports.empty()
                       ? fmt::format("the kernel does not accept this shape (valid = \"{}\")",
                                     ctx.valid)
                       : fmt::format("the kernel does not support this shape (it supports {})",
                                     ctx.supports))
                : valid.error();
      r.rows.push_back(row);
      rows.push_back({{"suite", ss.name},
                      {"shape", row.shape},
                      {"disposition", row.disposition},
                      {"message", row.message}});
      continue;
    }
    progress_.status(fmt::format("  timing {} at {} ({}/{}: {})", r.config, ss.name, i + 1,
                                 suite.size(), row.dims),
                     true);
    // One runner per shape: a shape that takes the runner down (out of memory, a fault) costs
    // that shape alone.
    mo.seed = 0x5e1 + i;
    auto ms = measure(be, *dev, ro, validator, ctx, *regions, build, config, {ss.shape}, mo);
    progress_.clear();
    Measurement m = ms.empty() ? Measurement{} : ms.front();
    if (ms.empty()) m.message = "nothing was timed";
    if (peak.tflops > 0 && m.gflops > 0) m.pct_of_peak = 100.0 * m.gflops / (peak.tflops * 1e3);
    row.disposition = std::string(to_string(m.disposition));
    row.message = m.message;
    if (m.disposition == Disposition::passed) {
      row.gflops = m.gflops;
      row.pct_of_peak = m.pct_of_peak;
      row.median_ms = m.stats.median;
      row.spread = m.stats.rel_spread;
      row.samples_ms = m.samples_ms;
      if (!m.baseline_samples_ms.empty()) {
        row.baseline_gflops = m.baseline_gflops;
        row.baseline_median_ms = m.baseline_stats.median;
        row.baseline_samples_ms = m.baseline_samples_ms;
      }
    }
    json mj = detail::measurement_json(m);
    mj["suite"] = ss.name;
    mj["class"] = row.cls;
    rows.push_back(std::move(mj));
    r.rows.push_back(std::move(row));
  }
  finish_suite(r);

  // The evaluation: the suite's result, the measurements with their raw samples, the facts.
  json s;
  s["format"] = kSummaryFormatVersion;
  s["kind"] = kSuiteEvaluationKind;
  s["peak_version"] = PEAK_VERSION;
  s["device"] = {{"name", dev->name},
                 {"backend", be.name()},
                 {"driver", dev->driver},
                 {"api", dev->api_version},
                 {"arch", dev->arch},
                 {"is_cpu", dev->is_cpu},
                 {"measured_fp32_tflops", dev->measured_fp32_tflops}};
  s["peak"] = {{"tflops", peak.tflops}, {"source", peak.source}};
  json tc = json::object();
  for (const auto& [k, v] : be.toolchain()) tc[k] = v;
  s["toolchain"] = tc;
  s["sandbox"] = sandbox_status();
  s["suite_from"] = suite_from;
  s["config"] = config_json(config);
  s["measurements"] = rows;
  s["phases"] = {
      {"bench_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()}};
  const bool any = r.rated > 0 || std::any_of(r.rows.begin(), r.rows.end(), [](const SuiteRow& x) {
                     return x.disposition == "passed";
                   });
  s["disposition"] = any ? "passed" : (r.rows.empty() ? "not_run" : r.rows.front().disposition);
  s["message"] = r.rated > 0 ? fmt::format("geometric mean {:.3f} {} over {} of {} shapes",
                                           r.geomean, suite_ratio_basis(r), r.rated, r.rows.size())
                             : "no shape of the suite has a ratio";
  s["suite"] = suite_json(r);
  record_evaluation(id, std::nullopt, kSuiteEvaluationKind, opts, s);
  if (auto ev = store_->evaluations(id);
      ev && !ev->empty() && ev->back().kind == kSuiteEvaluationKind) {
    r.evaluation = ev->back().id;
    r.created_at = ev->back().created_at;
  }
  return r;
}

}  // namespace peak
