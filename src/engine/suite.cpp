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
#include "family/family.h"
#include "peak/version.h"
#include "tune/measure.h"
#include "tune/tuner.h"
#include "util/fault.h"
#include "util/fs.h"
#include "util/sandbox.h"
#include "validate/path_shapes.h"
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

bool same_scalars(const KernelContext& a, const KernelContext& b) {
  if (a.scalars.size() != b.scalars.size()) return false;
  for (size_t i = 0; i < a.scalars.size(); ++i)
    if (a.scalars[i].name != b.scalars[i].name) return false;
  return true;
}

// The checkpoint's best configuration (its result's), or its default values when it has none.
Config best_config(const json& result_json, const KernelContext& ctx, bool* defaults) {
  if (EvalSummary result = summary_or_empty(result_json); result.best && result.best->config) {
    if (defaults) *defaults = false;
    return config_from_json(*result.best->config);
  }
  if (defaults) *defaults = true;
  Config config;
  for (const auto& p : ctx.tuning) config[p.name] = p.default_value;
  return config;
}

}  // namespace

Result<Workspace::SuiteCheckpoint> Workspace::suite_checkpoint(int64_t id,
                                                               const std::string& command) const {
  auto cp = store_->checkpoint(id);
  if (!cp) return cp.status();
  auto files = checkpoint_files(id);
  if (!files) return files.status();
  SuiteCheckpoint out{*cp, files->first, files->second,
                      fmt::format("checkpoint {}'s kernel.toml", id)};
  KernelContext& ctx = out.ctx;
  if (ctx.suite.empty() && ctx.suite_small.empty()) {
    auto working = load_context(root_);
    if (working && (!working->suite.empty() || !working->suite_small.empty()) &&
        same_scalars(*working, ctx)) {
      ctx.suite = working->suite;
      ctx.suite_small = working->suite_small;
      if (ctx.classes.empty()) ctx.classes = working->classes;
      out.suite_from = "the working kernel.toml";
    }
  }
  if (ctx.suite.empty() && ctx.suite_small.empty())
    return make_error(
        fmt::format("checkpoint {}'s kernel context has no shape suite: add a [suite] table to "
                    "kernel.toml (and set format = {}), with named shapes of its family's "
                    "classes, as examples/matmul-cuda-fp32/kernel.toml (square, irregular, "
                    "large-k, small-k, small-m, wide) or examples/softmax-cuda-fp32/kernel.toml "
                    "(decode, short-rows, long-rows, regular) does (docs/kernel-context.md, "
                    "\"[suite]\"); `{}` then reads it from the working kernel.toml",
                    id, kContextFormatSuite, command),
        ErrorKind::input);
  return out;
}

namespace {

// The evaluation just recorded for checkpoint `id`, when it is of `kind`.
std::optional<EvaluationRecord> recorded_evaluation(Store& store, int64_t id,
                                                    const std::string& kind) {
  auto ev = store.evaluations(id);
  if (!ev || ev->empty() || ev->back().kind != kind) return std::nullopt;
  return ev->back();
}

// The evaluation options of `peak bench` and `peak tune --classes`, taken under the workspace
// lock (both record their result in the store): never the checkpoint's result (docs/store.md,
// "Results").
Result<EvalOptions> suite_options(Workspace& ws, const EvalChoices& choices) {
  if (auto s = ws.lock(); !s) return s;
  auto eo = ws.eval_options(choices);
  if (!eo) return eo.status();
  EvalOptions opts = *eo;
  opts.standard = false;
  return opts;
}

// The suite these options measure; a context with a small suite only is an input error that says
// to `verb` it with --small.
Result<const std::vector<SuiteShape>*> suite_shapes(const KernelContext& ctx,
                                                    const EvalOptions& opts,
                                                    const std::string& suite_from,
                                                    const std::string& verb) {
  const std::vector<SuiteShape>& suite = suite_for(ctx, opts.small);
  if (suite.empty())
    return make_error(
        fmt::format("{} has a small suite only; {} it with --small", suite_from, verb),
        ErrorKind::input);
  return &suite;
}

// A dispatch table tuned on this device for the checkpoint (none with `single`): each shape runs
// the configuration of its class. A table tuned on another device is not used; `note` says so.
std::optional<DispatchTable> usable_dispatch(const Store& store, int64_t id, bool single,
                                             const std::string& device, std::string& note) {
  std::optional<DispatchTable> table = single ? std::nullopt : latest_dispatch(store, id);
  if (table && table->device != device) {
    note = fmt::format(
        "the dispatch table of evaluation {} was tuned on {}, not on {}: every shape runs the "
        "best configuration; `peak tune --classes` tunes one here",
        table->evaluation, table->device, device);
    table.reset();
  }
  return table;
}

// The builds of a checkpoint's source, each configuration built once, when a shape first needs it.
class SuiteBuilds {
 public:
  SuiteBuilds(const KernelContext& ctx, const std::string& source, int64_t id,
              const detail::EvalSetup& setup, Progress& progress)
      : ctx_(ctx), source_(source), id_(id), setup_(setup), progress_(progress) {}
  Result<const BuildResult*> build_for(const Config& c) {
    const std::string text = config_text(c);
    if (auto it = builds_.find(text); it != builds_.end()) return &it->second;
    progress_.status(fmt::format("building checkpoint {} ({})", id_, text), true);
    BuildResult b = setup_.be->build(BuildRequest{&ctx_, source_, c, setup_.dev, setup_.cache});
    progress_.clear();
    if (b.disposition != Disposition::passed)
      return make_error(fmt::format("checkpoint {} does not build with {} ({}):\n{}", id_, text,
                                    to_string(b.disposition), b.log),
                        ErrorKind::failed);
    return &builds_.emplace(text, std::move(b)).first->second;
  }

 private:
  const KernelContext& ctx_;
  const std::string& source_;
  int64_t id_;
  const detail::EvalSetup& setup_;
  Progress& progress_;
  std::map<std::string, BuildResult> builds_;
};

// Deadlines of the suite's timings from what the final timings of the seed and this checkpoint
// took here.
TaskBudget suite_budget(Workspace& ws, int64_t id, const json& result, const EvalOptions& opts,
                        bool cpu) {
  std::vector<std::pair<std::string, TaskSeconds>> refs;
  detail::add_task_reference(refs, result, fmt::format("checkpoint {}", id));
  if (auto seed = ws.store().find_tag("seed"); seed && *seed && **seed != id)
    if (auto sc = ws.store().checkpoint(**seed))
      detail::add_task_reference(refs, ws.summary(*sc), "seed");
  return detail::task_budgets(refs, cpu, opts).bench;
}

// Timing the shapes of a suite one at a time (the final timing, tune/final_timing.h), each a row
// of the result (`r.rows`) and of the evaluation's measurements (`rows`).
struct SuiteTimer {
  const KernelContext& ctx;
  FinalTimer& final_timer;
  SuiteBuilds& builds;
  Progress& progress;
  const Config& config;                       // every shape's, without a dispatch table
  const std::optional<DispatchTable>& table;  // each class's configuration

  // Shape `i` of `suite`; an error ends the benchmark.
  Status time_shape(const std::vector<SuiteShape>& suite, size_t i, SuiteResult& r, json& rows);
  // A shape the checkpoint's kernel does not accept is a row, not a failure of the bench.
  static bool unsupported(const KernelContext& ctx, const SuiteShape& ss, SuiteRow& row,
                          SuiteResult& r, json& rows);
};

bool SuiteTimer::unsupported(const KernelContext& ctx, const SuiteShape& ss, SuiteRow& row,
                             SuiteResult& r, json& rows) {
  auto valid = shape_is_valid(ctx, ss.shape);
  if (valid && *valid) return false;
  row.disposition = std::string(to_string(Disposition::not_run));
  row.message =
      valid
          ? (ctx.supports.empty()
                 ? fmt::format("the kernel does not accept this shape (valid = \"{}\")", ctx.valid)
                 : fmt::format("the kernel does not support this shape (it supports {})",
                               ctx.supports))
          : valid.error();
  r.rows.push_back(row);
  rows.push_back({{"suite", ss.name},
                  {"shape", row.shape},
                  {"disposition", row.disposition},
                  {"message", row.message}});
  return true;
}

Status SuiteTimer::time_shape(const std::vector<SuiteShape>& suite, size_t i, SuiteResult& r,
                              json& rows) {
  const SuiteShape& ss = suite[i];
  SuiteRow row;
  row.name = ss.name;
  row.cls = std::string(to_string(ss.cls));
  row.dims = dims_of(ctx, ss.shape);
  row.shape = ss.shape.text();
  if (unsupported(ctx, ss, row, r, rows)) return Status::ok();
  Config shape_config = config;
  if (table) {
    auto cls = classify_shape(ctx, ss.shape);
    if (!cls) return make_error(cls.error(), ErrorKind::input);
    if (*cls) row.dispatched_class = std::string(to_string(**cls));
    shape_config = dispatch_config(*table, row.dispatched_class);
    row.config = config_text(shape_config);
  }
  auto build = builds.build_for(shape_config);
  if (!build) return build.status();
  progress.status(fmt::format("  timing {} at {} ({}/{}: {})", config_text(shape_config), ss.name,
                              i + 1, suite.size(), row.dims),
                  true);
  // One runner per shape: a shape that takes the runner down (out of memory, a fault) costs
  // that shape alone.
  auto ms = final_timer.time(**build, shape_config, {ss.shape}, 0x5e1 + i);
  progress.clear();
  Measurement m = ms.empty() ? Measurement{} : ms.front();
  if (ms.empty()) m.message = "nothing was timed";
  row.disposition = std::string(to_string(m.disposition));
  row.message = m.message;
  if (m.disposition == Disposition::passed) {
    row.gflops = m.gflops;
    row.pct_of_peak = m.pct_of_peak;
    row.median_ms = m.stats.median;
    row.spread = m.stats.rel_spread;
    row.samples_ms = m.samples_ms;
    row.gbs = m.gbs;
    row.pct_of_bandwidth = m.pct_of_bandwidth;
    row.pct_of_copy = m.pct_of_copy;
    if (!m.baseline_samples_ms.empty()) {
      if (m.baseline_stats.median > 0)
        row.baseline_gbs = giga_per_second(m.bytes, m.baseline_stats.median);
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
  return Status::ok();
}

}  // namespace

Result<SuiteResult> Workspace::bench_suite(int64_t id, const EvalChoices& choices, bool single,
                                           const SuiteProgress& on_shape) {
  auto sc = suite_checkpoint(id, "peak bench");
  if (!sc) return sc.status();
  const KernelContext& ctx = sc->ctx;
  const std::string& source = sc->source;
  const std::string& suite_from = sc->suite_from;
  auto regions = split_regions(source, ctx.source_file);
  if (!regions) return make_error(regions.error(), ErrorKind::input);
  auto eo = suite_options(*this, choices);
  if (!eo) return eo.status();
  const EvalOptions& opts = *eo;
  auto suite = suite_shapes(ctx, opts, suite_from, "time");
  if (!suite) return suite.status();
  auto setup = detail::eval_setup(*this, ctx, opts.device);
  if (!setup) return setup.status();
  const DeviceFacts& dev = setup->dev;

  SuiteResult r;
  r.checkpoint = id;
  r.device = dev.name;
  r.small = opts.small && !ctx.suite_small.empty();
  r.dims_names = dims_names_of(ctx);
  r.shapes = static_cast<int>((*suite)->size());
  r.peak_tflops = setup->peak.tflops;
  r.peak_source = setup->peak.source;
  r.bytes_headline = headlines_bytes(ctx);
  r.memory_gbs = setup->peak.memory_gbs;
  r.baseline = opts.baseline ? setup->be->baseline(ctx, dev) : "";
  // The configuration: the checkpoint's result's best one; its default values when it has none.
  json result = summary(sc->record);
  const Config config = best_config(result, ctx, &r.default_config);
  r.config = config_text(config);
  const std::optional<DispatchTable> table =
      usable_dispatch(*store_, id, single, dev.name, r.dispatch_note);
  if (table) r.dispatch = table->evaluation;
  SuiteBuilds builds(ctx, source, id, *setup, progress_);
  if (auto b = builds.build_for(config); !b) return b.status();

  // The runner, the device lock and the reference, as Workspace::evaluate sets them up.
  detail::EvalLanes lanes;
  lanes.selectors = {opts.device};
  lanes.facts = {dev};
  if (auto s = lanes.open(*this, ctx, *setup, opts.device, opts.task_timeout_s); !s)
    return make_error(s.message(), ErrorKind::environment);
  FinalTimer final_timer(*setup->be, dev, lanes.runners.front(), *lanes.validators.front(), ctx,
                         *regions,
                         detail::final_timing_options(
                             opts, suite_budget(*this, id, result, opts, dev.is_cpu), setup->peak));
  SuiteTimer timer{ctx, final_timer, builds, progress_, config, table};
  json rows = json::array();
  auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < (*suite)->size(); ++i) {
    if (opts.cancelled && opts.cancelled())
      return make_error(kCancelledMessage, ErrorKind::environment);
    if (auto s = timer.time_shape(**suite, i, r, rows); !s) return s;
    if (on_shape) {
      SuiteResult so_far = r;
      finish_suite(so_far);
      on_shape(so_far);
    }
    fault_point("bench.shape-timed");  // a test's kill -9 after a shape (PEAK_FAULT)
  }
  finish_suite(r);

  // The evaluation: the suite's result, the measurements with their raw samples, the facts.
  EvalSummary s;
  s.format = kEvalSummaryFormatVersion;
  s.kind = kSuiteEvaluationKind;
  s.peak_version = PEAK_VERSION;
  detail::describe_setup(s, *setup, false);
  s.extra["suite_from"] = suite_from;
  s.extra["config"] = config_json(config);
  if (table) s.extra["dispatch"] = table->evaluation;
  s.extra["measurements"] = rows;
  s.phases.emplace().bench_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const bool any = r.rated > 0 || std::any_of(r.rows.begin(), r.rows.end(), [](const SuiteRow& x) {
                     return x.disposition == "passed";
                   });
  s.disposition = any ? "passed" : (r.rows.empty() ? "not_run" : r.rows.front().disposition);
  s.message = r.rated > 0 ? fmt::format("geometric mean {:.3f} {} over {} of {} shapes", r.geomean,
                                        suite_ratio_basis(r), r.rated, r.rows.size())
                          : "no shape of the suite has a ratio";
  s.suite = suite_json(r);
  record_evaluation(id, std::nullopt, kSuiteEvaluationKind, opts, to_json(s));
  if (auto e = recorded_evaluation(*store_, id, kSuiteEvaluationKind)) {
    r.evaluation = e->id;
    r.created_at = e->created_at;
  }
  return r;
}

namespace {

// How a class came by its entry of a dispatch table in this call. A class left out of the search
// is written with its own disposition (DispatchVariant::disposition, as the table's JSON has it).
enum class ClassEntry { searched, kept, not_searched };

const char* disposition_text(ClassEntry e) {
  return e == ClassEntry::kept ? "kept" : "not_searched";
}

ClassEntry entry_of(const DispatchVariant& v) {
  if (v.disposition == disposition_text(ClassEntry::kept)) return ClassEntry::kept;
  if (v.disposition == disposition_text(ClassEntry::not_searched)) return ClassEntry::not_searched;
  return ClassEntry::searched;
}

// The class rules of checkpoint `id`'s context; `only` must name classes of them.
Result<std::vector<ClassRule>> checked_rules(const KernelContext& ctx, int64_t id,
                                             const std::vector<std::string>& only) {
  std::vector<ClassRule> rules = class_rules(ctx);
  if (rules.empty())
    return make_error(
        fmt::format(
            "checkpoint {}'s kernel context has no class rules: add suite.classes to "
            "kernel.toml (format = {}), e.g. classes = [{{ class = \"small-m\", when = "
            "\"M <= 32\" }}, {{ class = \"irregular\" }}] (docs/kernel-context.md); "
            "the families matmul, softmax, rmsnorm, layernorm and attention have default rules",
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
  return rules;
}

using ShapesByClass = std::map<std::string, std::vector<const SuiteShape*>>;

// The suite's shapes by the class the rules give them (not their labels); the shapes the kernel
// does not support are left out (named in `left_out`), and a class without a shape is not tuned.
Result<ShapesByClass> shapes_by_class(const KernelContext& ctx,
                                      const std::vector<SuiteShape>& suite,
                                      std::vector<std::string>& left_out) {
  ShapesByClass by_class;
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
  return by_class;
}

// A class left out by the caller: the configuration the newest table (`earlier`) found for it
// stays (so that searching one class at a time builds up the table); without one (`before`), its
// shapes run the checkpoint's best configuration. Says so on `progress` (none: silently).
void leave_unsearched(DispatchVariant& v, const DispatchVariant* before,
                      const std::optional<DispatchTable>& earlier, const DispatchTable& t,
                      Progress* progress) {
  if (before) {
    v.config = before->config;
    v.config_text = before->config_text;
    v.space = before->space;
    v.gflops = before->gflops;
    v.baseline_gflops = before->baseline_gflops;
    v.bytes_headline = before->bytes_headline;
    v.gbs = before->gbs;
    v.baseline_gbs = before->baseline_gbs;
    v.pct_of_copy = before->pct_of_copy;
    v.disposition = disposition_text(ClassEntry::kept);
    v.message = fmt::format("not searched; kept from dispatch table {}", earlier->evaluation);
    if (progress)
      progress->print(fmt::format("class {}: not searched, keeps dispatch table {}'s {}", v.cls,
                                  earlier->evaluation, v.config_text));
  } else {
    v.disposition = disposition_text(ClassEntry::not_searched);
    v.message = "not searched (peak tune --classes --class names the classes searched)";
    if (progress)
      progress->print(fmt::format("class {}: not searched, runs {}", v.cls, t.fallback_text));
  }
}

// What a class's search found, from its evaluation.
void read_class_search(DispatchVariant& v, const Evaluation& ev) {
  v.disposition = std::string(to_string(ev.disposition));
  v.message = ev.message;
  const EvalSummary s = summary_or_empty(ev.summary);
  if (s.configs) {
    v.evaluated = static_cast<size_t>(s.configs->evaluated.value_or(0));
    v.space = static_cast<size_t>(s.configs->space.value_or(0) -
                                  s.configs->rejected_by_constraint.value_or(0));
  }
  if (ev.disposition == Disposition::passed && s.best) {
    v.config = config_from_json(s.best->config.value_or(json()));
    v.config_text = config_text(v.config);
  }
  if (const SummaryBench* b = s.first_bench()) {
    v.gflops = b->gflops.value_or(0.0);
    v.baseline_gflops = b->baseline_gflops.value_or(0.0);
    v.bytes_headline = b->bytes_headline();
    v.gbs = b->gbs.value_or(0.0);
    v.pct_of_copy = b->pct_of_copy.value_or(0.0);
    // The vendor's GB/s at the same traffic: the candidate's rate scaled by the time ratio.
    const double ms = b->median_ms.value_or(0.0), vendor_ms = b->baseline_median_ms.value_or(0.0);
    if (v.gbs > 0 && ms > 0 && vendor_ms > 0) v.baseline_gbs = v.gbs * ms / vendor_ms;
  }
}

// One class's search: a tuning evaluation over its shapes, starting from `start` and from what the
// newest table found for it (`before`, from `earlier`).
Result<json> search_class(Workspace& ws, int64_t id, const KernelContext& ctx,
                          const std::string& source, EvalOptions co,
                          const std::vector<const SuiteShape*>& shapes,
                          const DispatchVariant* before,
                          const std::optional<DispatchTable>& earlier, DispatchVariant& v) {
  for (const SuiteShape* ss : shapes) co.shapes.push_back(ss->shape);
  if (before) {
    co.must_include.insert(co.must_include.begin(), before->config);
    ws.progress().print(fmt::format("  starting from dispatch table {}'s configuration: {}",
                                    earlier->evaluation, config_text(before->config)));
  }
  auto c0 = std::chrono::steady_clock::now();
  Evaluation ev = ws.evaluate(ctx, source, co, std::nullopt, id);
  v.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
  if (co.cancelled && co.cancelled()) return make_error(kCancelledMessage, ErrorKind::environment);
  read_class_search(v, ev);
  ws.progress().print(fmt::format("  {}: {} ({} of {} configurations evaluated, {:.1f} s)", v.cls,
                                  v.config.empty()
                                      ? fmt::format("none found ({}: {})", v.disposition,
                                                    v.message.substr(0, v.message.find('\n')))
                                      : v.config_text,
                                  v.evaluated, v.space, v.seconds));
  json cj = ev.summary;
  cj["class"] = v.cls;
  return cj;
}

// The summary of a `tune --classes` call's table, and, when no class searched found a
// configuration, the error the call ends with (after the table is recorded); an input error when
// no class was searched.
struct DispatchSummary {
  json summary;
  std::string none_found;
};
Result<DispatchSummary> dispatch_summary(const DispatchTable& t, const DeviceFacts& dev,
                                         const std::string& suite_from,
                                         const std::vector<std::string>& left_out,
                                         const json& classes,
                                         std::chrono::steady_clock::time_point t0) {
  if (t.variants.empty())
    return make_error(fmt::format("no shape of the suite{} is one the kernel supports{}",
                                  t.small ? " (small variant)" : "",
                                  left_out.empty() ? "" : " (" + join(left_out, ", ") + ")"),
                      ErrorKind::input);
  auto was_searched = [](const DispatchVariant& v) { return entry_of(v) == ClassEntry::searched; };
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

  DispatchSummary d;
  EvalSummary s;
  s.format = kEvalSummaryFormatVersion;
  s.kind = kDispatchKind;
  s.peak_version = PEAK_VERSION;
  SummaryDevice& sd = s.device.emplace();
  sd.name = dev.name;
  sd.arch = dev.arch;
  sd.is_cpu = dev.is_cpu;
  s.extra["suite_from"] = suite_from;
  if (!left_out.empty()) s.extra["not_supported"] = left_out;
  s.dispatch_table = dispatch_json(t);
  s.extra["classes"] = classes;
  s.phases.emplace().tune_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.disposition = any ? "passed" : searched->disposition;
  const auto kept = std::count_if(t.variants.begin(), t.variants.end(),
                                  [](const auto& v) { return entry_of(v) == ClassEntry::kept; });
  s.message =
      fmt::format("{} of {} classes tuned{}, {} configurations evaluated", found, t.variants.size(),
                  kept ? fmt::format(", {} kept", kept) : "", dispatch_evaluations(t));
  if (!any)
    d.none_found = fmt::format("no class found a configuration that passes; the first: {}: {}",
                               searched->disposition, searched->message);
  d.summary = to_json(s);
  return d;
}

// A class of the table, in rule order: its variant (rule and shapes), its suite shapes, what
// the newest table found for it where that is not the best configuration, and whether this call
// searches it (`only` names it, or is empty).
struct ClassPlan {
  DispatchVariant v;
  const std::vector<const SuiteShape*>* shapes = nullptr;
  const DispatchVariant* before = nullptr;
  bool searched = false;
};

std::vector<ClassPlan> class_plans(const std::vector<ClassRule>& rules,
                                   const ShapesByClass& by_class,
                                   const std::optional<DispatchTable>& earlier,
                                   const Config& fallback, const std::vector<std::string>& only) {
  std::vector<ClassPlan> plans;
  for (const auto& rule : rules) {
    const std::string cls(to_string(rule.cls));
    auto it = by_class.find(cls);
    if (it == by_class.end() ||
        std::any_of(plans.begin(), plans.end(), [&](const ClassPlan& p) { return p.v.cls == cls; }))
      continue;
    ClassPlan p;
    p.v.cls = cls;
    p.v.when = rule.when;
    for (const SuiteShape* ss : it->second) p.v.shapes.push_back(ss->name);
    p.shapes = &it->second;
    p.before = earlier ? dispatch_variant(*earlier, cls) : nullptr;
    if (p.before && p.before->config == fallback) p.before = nullptr;
    p.searched = only.empty() || std::find(only.begin(), only.end(), cls) != only.end();
    plans.push_back(std::move(p));
  }
  return plans;
}

// The table while searches remain (the classes from `next` on not searched yet, as the newest
// table had them), recorded so that a call interrupted in a later search keeps the earlier ones.
DispatchTable partial_table(const DispatchTable& t, const std::vector<ClassPlan>& plans,
                            size_t next, const std::optional<DispatchTable>& earlier) {
  DispatchTable partial = t;
  for (size_t j = next; j < plans.size(); ++j) {
    DispatchVariant v = plans[j].v;
    // Silently: the classes left are printed once, when they are reached.
    leave_unsearched(v, plans[j].before, earlier, partial, nullptr);
    if (plans[j].searched && !plans[j].before)
      v.message = "not searched yet when this table was recorded";
    partial.variants.push_back(std::move(v));
  }
  return partial;
}

}  // namespace

Result<DispatchTable> Workspace::tune_classes(int64_t id, const EvalChoices& choices,
                                              const std::vector<std::string>& only) {
  auto sc = suite_checkpoint(id, "peak tune --classes");
  if (!sc) return sc.status();
  const KernelContext& ctx = sc->ctx;
  const std::string& source = sc->source;
  const std::string& suite_from = sc->suite_from;
  auto rules = checked_rules(ctx, id, only);
  if (!rules) return rules.status();
  if (auto s = check_tuning_overrides(choices.tuning, tuning_names(ctx),
                                      fmt::format("checkpoint {}", id));
      !s)
    return s;
  auto eo = suite_options(*this, choices);  // the searches are recorded in the store
  if (!eo) return eo.status();
  const EvalOptions& opts = *eo;
  if (opts.compile_only)
    return make_error("--classes times every class's shapes; it cannot be --compile-only",
                      ErrorKind::input);
  auto suite = suite_shapes(ctx, opts, suite_from, "tune");
  if (!suite) return suite.status();
  auto dev = device(opts.device);
  if (!dev) return dev.status();

  DispatchTable t;
  t.checkpoint = id;
  t.device = dev->name;
  t.small = opts.small && !ctx.suite_small.empty();
  json result = summary(sc->record);
  t.fallback = best_config(result, ctx, nullptr);
  t.fallback_text = config_text(t.fallback);
  // Every class's search starts from the checkpoint's best configurations, and a class that the
  // newest table of this checkpoint (tuned on this device, same suite variant) found a
  // configuration for first from that one: tuning again refines the table instead of starting
  // over.
  EvalOptions co = opts;
  // Every class's search validates on the same hidden shapes (one seed, recorded with each), so
  // that a binary one search validated is only screened by the others.
  if (co.validation_seed == 0) co.validation_seed = random_validation_seed();
  co.validation_memo = std::make_shared<ValidationMemo>();
  co.must_include = {t.fallback};
  for (const Config& c : detail::top_configs(result, ctx)) co.must_include.push_back(c);
  std::optional<DispatchTable> earlier = latest_dispatch(*store_, id);
  if (earlier && (earlier->device != dev->name || earlier->small != t.small)) earlier.reset();

  std::vector<std::string> left_out;
  auto by_class = shapes_by_class(ctx, **suite, left_out);
  if (!by_class) return by_class.status();
  json classes = json::array();
  auto t0 = std::chrono::steady_clock::now();
  // Every class there came from a rule; `only` names known classes.
  std::vector<ClassPlan> plans = class_plans(*rules, *by_class, earlier, t.fallback, only);
  const size_t n_classes = static_cast<size_t>(
      std::count_if(plans.begin(), plans.end(), [](const ClassPlan& p) { return p.searched; }));
  size_t done = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    ClassPlan& p = plans[i];
    if (!p.searched) {
      leave_unsearched(p.v, p.before, earlier, t, &progress_);
      t.variants.push_back(std::move(p.v));
      continue;
    }
    progress_.print(fmt::format("class {} ({}/{}): tuning on {}", p.v.cls, ++done, n_classes,
                                join(p.v.shapes, ", ")));
    auto cj = search_class(*this, id, ctx, source, co, *p.shapes, p.before, earlier, p.v);
    if (!cj) return cj.status();
    classes.push_back(std::move(*cj));
    t.variants.push_back(std::move(p.v));
    if (done == n_classes) continue;
    auto pd = dispatch_summary(partial_table(t, plans, i + 1, earlier), *dev, suite_from, left_out,
                               classes, t0);
    if (!pd) return pd.status();
    pd->summary["message"] = fmt::format("after {} of {} searches: {}", done, n_classes,
                                         pd->summary.value("message", std::string()));
    record_evaluation(id, std::nullopt, kDispatchKind, opts, pd->summary);
  }
  auto d = dispatch_summary(t, *dev, suite_from, left_out, classes, t0);
  if (!d) return d.status();
  record_evaluation(id, std::nullopt, kDispatchKind, opts, d->summary);
  if (auto e = recorded_evaluation(*store_, id, kDispatchKind)) {
    t.evaluation = e->id;
    t.created_at = e->created_at;
  }
  if (!d->none_found.empty()) return make_error(d->none_found, ErrorKind::failed);
  return t;
}

}  // namespace peak
