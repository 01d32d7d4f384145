// `peak bench`: a checkpoint's best configuration (or, with a dispatch table, each class's)
// timed over its context's shape suite, the vendor library timed in the same runner task at every
// shape (docs/cli.md, "peak bench"); `peak tune --classes`: the dispatch table.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>

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

// The checkpoint's best configuration (its result's), or its default values when it has none.
Config best_config(const json& result, const KernelContext& ctx, bool* defaults) {
  if (result.contains("best") && result["best"].is_object() && result["best"].contains("config")) {
    if (defaults) *defaults = false;
    return config_from(result["best"]["config"]);
  }
  if (defaults) *defaults = true;
  Config config;
  for (const auto& p : ctx.tuning) config[p.name] = p.default_value;
  return config;
}

}  // namespace

// The checkpoint's context with its suite: the checkpoint's own, or, for a checkpoint made before
// its context had one, the working kernel.toml's (the suite and its class rules say how to
// measure, not what the kernel is). `command` names the command in the error.
Result<std::pair<KernelContext, std::string>> Workspace::suite_context(
    int64_t id, std::string* suite_from, const std::string& command) const {
  auto files = checkpoint_files(id);
  if (!files) return files.status();
  KernelContext& ctx = files->first;
  *suite_from = fmt::format("checkpoint {}'s kernel.toml", id);
  if (ctx.suite.empty() && ctx.suite_small.empty()) {
    auto working = load_context(root_);
    if (working && (!working->suite.empty() || !working->suite_small.empty()) &&
        same_scalars(*working, ctx)) {
      ctx.suite = working->suite;
      ctx.suite_small = working->suite_small;
      if (ctx.classes.empty()) ctx.classes = working->classes;
      *suite_from = "the working kernel.toml";
    }
  }
  if (ctx.suite.empty() && ctx.suite_small.empty())
    return make_error(
        fmt::format("checkpoint {}'s kernel context has no shape suite: add a [suite] table to "
                    "kernel.toml (and set format = {}), with named shapes of the classes square, "
                    "irregular, large-k, small-k, small-m and wide, as "
                    "examples/matmul-cuda-fp32/kernel.toml does (docs/kernel-context.md, "
                    "\"[suite]\"); `{}` then reads it from the working kernel.toml",
                    id, kContextFormatSuite, command),
        ErrorKind::input);
  return files;
}

Result<SuiteResult> Workspace::bench_suite(int64_t id, const EvalChoices& choices, bool single) {
  auto cp = store_->checkpoint(id);
  if (!cp) return cp.status();
  std::string suite_from;
  auto files = suite_context(id, &suite_from, "peak bench");
  if (!files) return files.status();
  const KernelContext& ctx = files->first;
  const std::string& source = files->second;
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
  const Config config = best_config(result, ctx, &r.default_config);
  r.config = config_text(config);
  // A dispatch table tuned on this device: each shape runs the configuration of its class.
  std::optional<DispatchTable> table = single ? std::nullopt : latest_dispatch(*store_, id);
  if (table && table->device != dev->name) {
    r.dispatch_note = fmt::format(
        "the dispatch table of evaluation {} was tuned on {}, not on {}: every shape runs the "
        "best configuration; `peak tune --classes` tunes one here",
        table->evaluation, table->device, dev->name);
    table.reset();
  }
  if (table) r.dispatch = table->evaluation;

  // Each configuration is built once, when a shape first needs it.
  fs::path cache = root_ / ".peak" / "cache";
  std::map<std::string, BuildResult> builds;
  auto build_for = [&](const Config& c) -> Result<const BuildResult*> {
    const std::string text = config_text(c);
    if (auto it = builds.find(text); it != builds.end()) return &it->second;
    progress_.status(fmt::format("building checkpoint {} ({})", id, text), true);
    BuildResult b = be.build(BuildRequest{&ctx, source, c, *dev, cache});
    progress_.clear();
    if (b.disposition != Disposition::passed)
      return make_error(fmt::format("checkpoint {} does not build with {} ({}):\n{}", id, text,
                                    to_string(b.disposition), b.log),
                        ErrorKind::failed);
    return &builds.emplace(text, std::move(b)).first->second;
  };
  if (auto b = build_for(config); !b) return b.status();

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
    Config shape_config = config;
    if (table) {
      auto cls = classify_shape(ctx, ss.shape);
      if (!cls) return make_error(cls.error(), ErrorKind::input);
      if (*cls) row.dispatched_class = std::string(to_string(**cls));
      shape_config = dispatch_config(*table, row.dispatched_class);
      row.config = config_text(shape_config);
    }
    auto build = build_for(shape_config);
    if (!build) return build.status();
    progress_.status(fmt::format("  timing {} at {} ({}/{}: {})", config_text(shape_config),
                                 ss.name, i + 1, suite.size(), row.dims),
                     true);
    // One runner per shape: a shape that takes the runner down (out of memory, a fault) costs
    // that shape alone.
    mo.seed = 0x5e1 + i;
    auto ms =
        measure(be, *dev, ro, validator, ctx, *regions, **build, shape_config, {ss.shape}, mo);
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
    if (table) mj["dispatched_class"] = row.dispatched_class;
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
  if (table) s["dispatch"] = table->evaluation;
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

Result<DispatchTable> Workspace::tune_classes(int64_t id, const EvalChoices& choices,
                                              const std::vector<std::string>& only) {
  auto cp = store_->checkpoint(id);
  if (!cp) return cp.status();
  std::string suite_from;
  auto files = suite_context(id, &suite_from, "peak tune --classes");
  if (!files) return files.status();
  const KernelContext& ctx = files->first;
  const std::string& source = files->second;
  const std::vector<ClassRule> rules = class_rules(ctx);
  if (rules.empty())
    return make_error(
        fmt::format("checkpoint {}'s kernel context has no class rules: add suite.classes to "
                    "kernel.toml (format = {}), e.g. classes = [{{ class = \"small-m\", when = "
                    "\"M <= 32\" }}, {{ class = \"irregular\" }}] (docs/kernel-context.md); "
                    "family \"matmul\" has default rules",
                    id, kContextFormatClasses),
        ErrorKind::input);
  for (const std::string& name : only) {
    const bool known = std::any_of(rules.begin(), rules.end(),
                                   [&](const ClassRule& r) { return to_string(r.cls) == name; });
    if (!known) {
      std::vector<std::string> names;
      for (const auto& r : rules) names.emplace_back(to_string(r.cls));
      return make_error(fmt::format("--class {}: not a class of checkpoint {}'s rules ({})", name,
                                    id, join(names, ", ")),
                        ErrorKind::input);
    }
  }
  if (auto s = check_tuning_overrides(choices.tuning, tuning_names(ctx),
                                      fmt::format("checkpoint {}", id));
      !s)
    return s;
  if (auto s = lock(); !s) return s;  // the searches are recorded in the store
  auto eo = eval_options(choices);
  if (!eo) return eo.status();
  EvalOptions opts = *eo;
  opts.standard = false;  // never the checkpoint's result (docs/store.md, "Results")
  if (opts.compile_only)
    return make_error("--classes times every class's shapes; it cannot be --compile-only",
                      ErrorKind::input);
  const std::vector<SuiteShape>& suite = suite_for(ctx, opts.small);
  if (suite.empty())
    return make_error(fmt::format("{} has a small suite only; tune it with --small", suite_from),
                      ErrorKind::input);
  auto dev = device(opts.device);
  if (!dev) return dev.status();

  DispatchTable t;
  t.checkpoint = id;
  t.device = dev->name;
  t.small = opts.small && !ctx.suite_small.empty();
  json result = summary(*cp);
  t.fallback = best_config(result, ctx, nullptr);
  t.fallback_text = config_text(t.fallback);
  // Every class's search starts from the checkpoint's best configurations, and a class that the
  // newest table of this checkpoint (tuned on this device, same suite variant) found a
  // configuration for first from that one: tuning again refines the table instead of starting
  // over.
  std::vector<Config> start = {t.fallback};
  for (const Config& c : detail::top_configs(result, ctx)) start.push_back(c);
  std::optional<DispatchTable> earlier = latest_dispatch(*store_, id);
  if (earlier && (earlier->device != dev->name || earlier->small != t.small)) earlier.reset();

  // The suite's shapes by the class the rules give them (not their labels); the shapes the kernel
  // does not support are left out, and a class without a shape is not tuned.
  std::map<std::string, std::vector<const SuiteShape*>> by_class;
  std::vector<std::string> left_out;
  for (const auto& ss : suite) {
    auto valid = shape_is_valid(ctx, ss.shape);
    if (!valid) return make_error(valid.error(), ErrorKind::input);
    if (!*valid) {
      left_out.push_back(ss.name);
      continue;
    }
    auto cls = classify_shape(ctx, ss.shape);
    if (!cls) return make_error(cls.error(), ErrorKind::input);
    if (*cls) by_class[std::string(to_string(**cls))].push_back(&ss);
  }
  json classes = json::array();
  auto t0 = std::chrono::steady_clock::now();
  // Every class there came from a rule; `only` names known classes.
  auto searched_class = [&](const std::string& cls) {
    return only.empty() || std::find(only.begin(), only.end(), cls) != only.end();
  };
  const size_t n_classes = static_cast<size_t>(std::count_if(
      by_class.begin(), by_class.end(), [&](const auto& kv) { return searched_class(kv.first); }));
  size_t done = 0;
  std::set<std::string> tuned;
  for (const auto& rule : rules) {
    const std::string cls(to_string(rule.cls));
    auto it = by_class.find(cls);
    if (it == by_class.end() || !tuned.insert(cls).second) continue;
    DispatchVariant v;
    v.cls = cls;
    v.when = rule.when;
    for (const SuiteShape* ss : it->second) v.shapes.push_back(ss->name);
    // What the newest table found for this class, where that is not the best configuration.
    const DispatchVariant* before = earlier ? dispatch_variant(*earlier, cls) : nullptr;
    if (before && before->config == t.fallback) before = nullptr;
    if (!searched_class(cls)) {
      // Left out by the caller: the configuration the newest table found for it stays (so that
      // searching one class at a time builds up the table); without one, its shapes run the
      // checkpoint's best configuration.
      if (before) {
        v.config = before->config;
        v.config_text = before->config_text;
        v.space = before->space;
        v.gflops = before->gflops;
        v.baseline_gflops = before->baseline_gflops;
        v.disposition = "kept";
        v.message = fmt::format("not searched; kept from dispatch table {}", earlier->evaluation);
        progress_.print(fmt::format("class {}: not searched, keeps dispatch table {}'s {}", cls,
                                    earlier->evaluation, v.config_text));
      } else {
        v.disposition = "not_searched";
        v.message = "not searched (peak tune --classes --class names the classes searched)";
        progress_.print(fmt::format("class {}: not searched, runs {}", cls, t.fallback_text));
      }
      t.variants.push_back(std::move(v));
      continue;
    }
    EvalOptions co = opts;
    co.must_include = start;
    for (const SuiteShape* ss : it->second) co.shapes.push_back(ss->shape);
    progress_.print(fmt::format("class {} ({}/{}): tuning on {}", cls, ++done, n_classes,
                                join(v.shapes, ", ")));
    if (before) {
      co.must_include.insert(co.must_include.begin(), before->config);
      progress_.print(fmt::format("  starting from dispatch table {}'s configuration: {}",
                                  earlier->evaluation, config_text(before->config)));
    }
    auto c0 = std::chrono::steady_clock::now();
    Evaluation ev = evaluate(ctx, source, co, std::nullopt, id);
    v.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    if (opts.cancelled && opts.cancelled())
      return make_error(kCancelledMessage, ErrorKind::environment);
    v.disposition = std::string(to_string(ev.disposition));
    v.message = ev.message;
    const json& s = ev.summary;
    if (s.contains("configs")) {
      v.evaluated = s["configs"].value("evaluated", size_t{0});
      v.space = s["configs"].value("space", size_t{0}) -
                s["configs"].value("rejected_by_constraint", size_t{0});
    }
    if (ev.disposition == Disposition::passed && s.contains("best")) {
      v.config = config_from(s["best"]["config"]);
      v.config_text = config_text(v.config);
    }
    if (s.contains("bench") && s["bench"].is_array() && !s["bench"].empty()) {
      v.gflops = s["bench"][0].value("gflops", 0.0);
      v.baseline_gflops = s["bench"][0].value("baseline_gflops", 0.0);
    }
    progress_.print(fmt::format("  {}: {} ({} of {} configurations evaluated, {:.1f} s)", cls,
                                v.config.empty()
                                    ? fmt::format("none found ({}: {})", v.disposition,
                                                  v.message.substr(0, v.message.find('\n')))
                                    : v.config_text,
                                v.evaluated, v.space, v.seconds));
    json cj = s;
    cj["class"] = cls;
    classes.push_back(std::move(cj));
    t.variants.push_back(std::move(v));
  }
  if (t.variants.empty())
    return make_error(fmt::format("no shape of the suite{} is one the kernel supports{}",
                                  t.small ? " (small variant)" : "",
                                  left_out.empty() ? "" : " (" + join(left_out, ", ") + ")"),
                      ErrorKind::input);
  auto was_searched = [](const DispatchVariant& v) {
    return v.disposition != "not_searched" && v.disposition != "kept";
  };
  // The classes whose search in this call found a configuration (a kept one says nothing about
  // them).
  const auto found = std::count_if(t.variants.begin(), t.variants.end(), [&](const auto& v) {
    return was_searched(v) && !v.config.empty();
  });
  const bool any = found > 0;
  // The first class searched (an unsearched class says nothing about the kernel).
  auto searched = std::find_if(t.variants.begin(), t.variants.end(), was_searched);
  if (searched == t.variants.end())
    return make_error("--class names no class that has a shape in the suite", ErrorKind::input);

  json s;
  s["format"] = kSummaryFormatVersion;
  s["kind"] = kDispatchKind;
  s["peak_version"] = PEAK_VERSION;
  s["device"] = {{"name", dev->name}, {"arch", dev->arch}, {"is_cpu", dev->is_cpu}};
  s["suite_from"] = suite_from;
  if (!left_out.empty()) s["not_supported"] = left_out;
  s["dispatch"] = dispatch_json(t);
  s["classes"] = classes;
  s["phases"] = {
      {"tune_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()}};
  s["disposition"] = any ? "passed" : searched->disposition;
  const auto kept = std::count_if(t.variants.begin(), t.variants.end(),
                                  [](const auto& v) { return v.disposition == "kept"; });
  s["message"] =
      fmt::format("{} of {} classes tuned{}, {} configurations evaluated", found, t.variants.size(),
                  kept ? fmt::format(", {} kept", kept) : "", dispatch_evaluations(t));
  record_evaluation(id, std::nullopt, kDispatchKind, opts, s);
  if (auto ev = store_->evaluations(id); ev && !ev->empty() && ev->back().kind == kDispatchKind) {
    t.evaluation = ev->back().id;
    t.created_at = ev->back().created_at;
  }
  if (!any)
    return make_error(fmt::format("no class found a configuration that passes; the first: {}: {}",
                                  searched->disposition, searched->message),
                      ErrorKind::failed);
  return t;
}

}  // namespace peak
