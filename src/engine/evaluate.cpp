// Evaluating a kernel: the setup (context, device, runners, deadlines, reference), the tuning
// search, the final timing of the best configuration, and the summary that records them
// (docs/tuning.md, docs/validation.md). Workspace::EvalRun holds one evaluation's state; each
// phase is one of its methods.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "engine/evaluate_internal.h"
#include "engine/workspace.h"
#include "peak/version.h"
#include "tune/record.h"
#include "tune/strategy.h"
#include "util/device_lock.h"
#include "util/fs.h"
#include "util/sandbox.h"
#include "util/sha256.h"
#include "validate/path_shapes.h"
#include "validate/task_timeout.h"

namespace peak {

// Shared with the suite benchmark (engine/evaluate_internal.h).
namespace detail {

PeakInfo peak_for(const KernelContext& ctx, const DeviceFacts& dev) {
  PeakInfo p;
  // The documented peak of the inputs' precision: the narrowest input element (e4m3 1 byte,
  // f16 and bf16 2, f32 and i32 4) names the fastest rate the kernel may feed.
  size_t element_bytes = 4;
  for (const ArraySpec& a : ctx.arrays)
    if (!a.output) element_bytes = std::min(element_bytes, dtype_size(a.dtype));
  if (auto doc = documented_peaks(dev.name)) {
    p.memory_gbs = doc->memory_gbs;
    const PrecisionPeak rate = precision_peak(*doc, element_bytes);
    p.tflops = rate.tflops;
    p.source = fmt::format("documented {} peak of {} ({})", rate.name, doc->device, doc->source);
    // An fp32 kernel may legitimately not exceed the FP32 rate; the limit is the documented peak.
    p.limit = p.tflops;
    if (p.tflops > 0) return p;
  }
  if (dev.measured_fp32_tflops > 0) {
    p.tflops = dev.measured_fp32_tflops;
    p.source = "measured FP32 FMA throughput (no documented peak for this device)";
    // The microbenchmark may fall short of the true peak; on a CPU device (lavapipe) it is
    // measured once, and a machine busy with other work at that moment can give a fraction of
    // what the cores deliver a minute later, so the limit there is wider.
    p.limit = dev.measured_fp32_tflops * (dev.is_cpu ? 4.0 : 1.5);
  }
  return p;
}

// The workspace's backend, the device and its peak.
Result<EvalSetup> eval_setup(Workspace& ws, const KernelContext& ctx, const std::string& device) {
  EvalSetup s;
  auto b = ws.backend();
  if (!b) return b.status();
  s.be = *b;
  auto dev = ws.device(device);
  if (!dev) return dev.status();
  s.dev = *dev;
  s.peak = peak_for(ctx, s.dev);
  s.cache = ws.root() / ".peak" / "cache";
  return s;
}

void describe_setup(EvalSummary& summary, const EvalSetup& setup, bool documented_peak) {
  const DeviceFacts& dev = setup.dev;
  SummaryDevice& d = summary.device.emplace();
  d.name = dev.name;
  d.backend = setup.be->name();
  d.driver = dev.driver;
  d.api = dev.api_version;
  d.arch = dev.arch;
  d.is_cpu = dev.is_cpu;
  d.measured_fp32_tflops = dev.measured_fp32_tflops;
  SummaryPeak& p = summary.peak.emplace();
  p.tflops = setup.peak.tflops;
  p.source = setup.peak.source;
  if (documented_peak)
    if (auto doc = documented_peaks(dev.name)) p.documented_fp32_tflops = doc->fp32_tflops;
  if (setup.peak.memory_gbs > 0) p.documented_memory_gbs = setup.peak.memory_gbs;
  auto& tc = summary.toolchain.emplace();
  for (const auto& [k, v] : setup.be->toolchain()) tc[k] = v;
  summary.extra["sandbox"] = sandbox_status();
}

LockNotices::~LockNotices() {
  for (auto& l : locks_) l->set_wait_notice({});
}

RunnerOptions LockNotices::runner(const Backend& be, const DeviceFacts& dev,
                                  double task_timeout_s) {
  RunnerOptions r;
  r.executable = be.runner();
  r.task_timeout_s = task_timeout_s;
  r.device_lock = device_lock_for(dev);
  r.device_lock->set_wait_notice([this](const std::string& m) { progress_.status(m, true); });
  locks_.push_back(r.device_lock);
  return r;
}

void add_task_reference(std::vector<std::pair<std::string, TaskSeconds>>& refs, const json& summary,
                        const std::string& who) {
  if (EvalSummary s = summary_or_empty(summary); s.task_seconds)
    refs.emplace_back(
        who, TaskSeconds{s.task_seconds->validate.value_or(0), s.task_seconds->screen.value_or(0),
                         s.task_seconds->bench.value_or(0)});
}

// The device's lock (one timer per device) and its label for the waiting line.
std::shared_ptr<DeviceLock> device_lock_for(const DeviceFacts& dev) {
  auto pci = dev.extra.find("pci_bus_id");
  std::string bus = pci == dev.extra.end() ? "" : pci->second;
  std::string label = dev.is_cpu    ? fmt::format("the CPU ({})", dev.name)
                      : bus.empty() ? dev.name
                                    : fmt::format("{} ({})", dev.name, bus);
  return DeviceLock::for_device(device_lock_key(bus, dev.is_cpu, dev.name), label);
}

json lock_json(const DeviceLock& lock, const DeviceLockStats& s) {
  return {{"key", lock.key()},  {"file", lock.path().string()}, {"acquisitions", s.acquisitions},
          {"waits", s.waits},   {"waited_s", s.waited_s},       {"waited_for", s.waited_for},
          {"queued", s.queued}, {"queued_s", s.queued_s}};
}

json measurement_json(const Measurement& m) {
  json j;
  j["shape"] = m.shape.text();
  j["config"] = config_json(m.config);
  j["disposition"] = std::string(to_string(m.disposition));
  if (!m.message.empty()) j["message"] = m.message;
  if (!m.device.empty()) j["device"] = m.device;
  j["median_ms"] = m.stats.median;
  j["p25_ms"] = m.stats.p25;
  j["p75_ms"] = m.stats.p75;
  j["min_ms"] = m.stats.min;
  j["spread"] = m.stats.rel_spread;
  j["n"] = m.stats.n;
  j["gflops"] = m.gflops;
  j["pct_of_peak"] = m.pct_of_peak;
  j["samples_ms"] = m.samples_ms;
  j["host_ms"] = m.host_ms;
  if (!m.baseline.empty()) {
    j["baseline"] = m.baseline;
    j["baseline_median_ms"] = m.baseline_stats.median;
    j["baseline_spread"] = m.baseline_stats.rel_spread;
    j["baseline_gflops"] = m.baseline_gflops;
    j["pct_of_baseline"] = m.pct_of_baseline;
    j["baseline_samples_ms"] = m.baseline_samples_ms;
  }
  if (m.bytes_headline) j["headline"] = "bytes";
  if (m.bytes > 0) {
    j["bytes"] = m.bytes;
    j["gbs"] = m.gbs;
    if (m.pct_of_bandwidth > 0) j["pct_of_bandwidth"] = m.pct_of_bandwidth;
  }
  // Absent when the runner timed no copy: there is no number, not a zero.
  if (!m.copy_samples_ms.empty()) {
    j["copy_method"] = m.copy_method;
    j["copy_median_ms"] = m.copy_stats.median;
    j["copy_gbs"] = m.copy_gbs;
    j["pct_of_copy"] = m.pct_of_copy;
    j["copy_samples_ms"] = m.copy_samples_ms;
  }
  j["clock_mhz_before"] = m.clock_mhz_before;
  j["clock_mhz_after"] = m.clock_mhz_after;
  j["throttled"] = m.throttled;
  j["timed_launches_checked"] = m.timed_launches_checked;
  j["full_comparisons"] = m.full_comparisons;
  j["input_ms"] = m.input_ms;
  j["check_s"] = m.check_seconds;
  if (m.module_bytes >= 0) j["module_bytes"] = m.module_bytes;
  if (m.memory_growth_bytes >= 0) j["memory_growth_bytes"] = m.memory_growth_bytes;
  if (m.outlived) j["outlived"] = true;
  return j;
}

Result<ReferenceSource> reference_source(Workspace& ws, const KernelContext& ctx, Backend& be,
                                         const DeviceFacts& dev, const fs::path& cache) {
  ReferenceSource ref;
  ref.cache_dir = cache;
  if (ctx.reference != ReferenceKind::seed) return ref;
  // The seed kernel (root checkpoint) with its default configuration is the reference.
  auto seed_id = ws.store().find_tag("seed");
  if (!seed_id || !*seed_id) return make_error("no seed checkpoint to use as reference");
  auto seed_files = ws.checkpoint_files(**seed_id);
  if (!seed_files) return Error{seed_files.error()};
  auto seed_regions = split_regions(seed_files->second, seed_files->first.source_file);
  if (!seed_regions) return Error{seed_regions.error()};
  Config dc;
  for (const auto& p : seed_files->first.tuning) dc[p.name] = p.default_value;
  auto sb = be.build(BuildRequest{&seed_files->first, seed_files->second, dc, dev, cache});
  if (sb.disposition != Disposition::passed)
    return make_error("the seed kernel (the reference) does not build:\n" + sb.log);
  ref.seed_build = sb;
  ref.seed_config = dc;
  ref.seed_source = *seed_regions;
  return ref;
}

FinalTimingOptions final_timing_options(const EvalOptions& opts, const TaskBudget& budget,
                                        const PeakInfo& peak) {
  FinalTimingOptions fo;
  MeasureOptions& mo = fo.measure;
  mo.policy = opts.policy;
  mo.with_baseline = opts.baseline;
  mo.task_timeout_s = budget.timeout_s;
  mo.reference_task_s = budget.reference_s;
  mo.timeout_basis = budget.basis;
  mo.peak_tflops = peak.limit;
  mo.memory_gbs = peak.memory_gbs;
  fo.peak_tflops = peak.tflops;
  return fo;
}

TaskBudgets task_budgets(const std::vector<std::pair<std::string, TaskSeconds>>& refs, bool cpu,
                         const EvalOptions& opts) {
  TaskBudgets b;
  b.validate = task_budget(TaskKind::validate, cpu, refs, opts.task_timeout_s);
  b.screen = task_budget(TaskKind::screen, cpu, refs, opts.task_timeout_s * 2,
                         timing_allowance(opts.screening, false));
  b.bench = task_budget(TaskKind::bench, cpu, refs, opts.task_timeout_s * 4,
                        timing_allowance(opts.policy, opts.baseline));
  return b;
}

Status EvalLanes::open(Workspace& ws, const KernelContext& ctx, const EvalSetup& setup,
                       const std::string& device, double task_timeout_s) {
  Backend& be = *setup.be;
  notices.emplace(ws.progress());
  for (size_t i = 0; i < selectors.size(); ++i) {
    RunnerOptions r = notices->runner(be, facts[i], task_timeout_s);
    r.tally = runner_tally;
    r.device = several() ? runner_selector(facts[i], selectors[i]) : device;
    if (auto visible = cuda_visible_device(facts[i], std::getenv("CUDA_VISIBLE_DEVICES"))) {
      r.env["CUDA_VISIBLE_DEVICES"] = *visible;
      r.device = "0";
    }
    locks_before.push_back(r.device_lock->stats());
    runners.push_back(std::move(r));
  }
  auto ref_or = reference_source(ws, ctx, be, setup.dev, setup.cache);
  if (!ref_or) return make_error(ref_or.error());
  ref = std::move(*ref_or);
  for (size_t i = 0; i < selectors.size(); ++i) {
    validators.push_back(std::make_unique<Validator>(be, facts[i], runners[i], ref));
    lanes.push_back(DeviceLane{&facts[i], &runners[i], validators.back().get()});
  }
  return Status::ok();
}

// The shapes a run would validate and time (bench or small shapes first: the first is the
// tuning shape), each once: what a compile-only evaluation checks the launch plans for.
std::vector<Shape> compile_only_shapes(const KernelContext& ctx, const EvalOptions& opts) {
  std::vector<Shape> out;
  const std::vector<Shape>& bench = !opts.shapes.empty()                      ? opts.shapes
                                    : opts.small && !ctx.small_shapes.empty() ? ctx.small_shapes
                                                                              : ctx.bench_shapes;
  for (const auto* list : {&bench, &ctx.validation_shapes, &ctx.hidden_shapes})
    for (const Shape& s : *list)
      if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  return out;
}

// What a compile-only evaluation cannot check without the device (docs/cli.md).
std::vector<std::string> checks_without_device(const Backend& be) {
  std::vector<std::string> out = {
      "correctness (outputs against the reference on the listed, hidden and sampled shapes)",
      "timing", "allocation of the arrays and scratch buffers on the device"};
  if (be.name() == "hlsl") {
    out.push_back("pipeline creation by the Vulkan driver");
  } else {
    out.push_back("module load and the driver's launch checks");
    out.push_back(
        "the kernel parameters of extern \"C\" kernels (the others are checked from their "
        "mangled names)");
    if (be.name() == "cuda") out.push_back("tensor map encoding (cuTensorMapEncodeTiled)");
  }
  return out;
}

}  // namespace detail

// One evaluation under way. The phases run in order (Workspace::evaluate): resolve, then either
// the compile-only search or open_lanes, set_deadlines, plan_search, search, time_best and
// finish. A phase that fails sets the evaluation's disposition (fail) and returns false.
struct Workspace::EvalRun {
  EvalRun(Workspace& w, const KernelContext& c, const std::string& src, const EvalOptions& o,
          std::optional<int64_t> attempt, std::optional<int64_t> checkpoint)
      : ws(w), ctx(c), source(src), opts(o), attempt_id(attempt), checkpoint_id(checkpoint) {}

  // Setup.
  bool resolve();
  void plan_tuning();
  bool open_lanes();
  void set_deadlines();
  bool plan_search();
  // The search.
  Evaluation compile_only();
  bool search();
  void summarize_search(const TuneResult& tr, std::optional<int64_t> run_id);
  void rank(const TuneResult& tr);
  // The final timing and the summary.
  bool time_best();
  Evaluation finish();
  // The phases in order; the evaluation with its summary's JSON form.
  Evaluation run();
  bool fail(Disposition d, std::string msg);
  void record_locks();

  Workspace& ws;
  const KernelContext& ctx;
  const std::string& source;
  const EvalOptions& opts;
  std::optional<int64_t> attempt_id, checkpoint_id;
  Evaluation ev;
  EvalSummary sum;  // ev.summary's typed form, written to it when the evaluation ends
  // resolve, plan_tuning
  SourceRegions regions;
  detail::EvalSetup setup;
  TuneOptions to;
  std::vector<std::string> lane_selectors;  // one per device that validates and times
  bool several = false;
  bool per_class = false;  // a class's search (`peak tune --classes`)
  // The observers of the search and the final timing: the status line, and the store recorder,
  // which files what they measured under `target` (from search on).
  std::optional<StatusObserver> status;
  RecordTarget target;
  std::optional<StoreRecorder> recorder;
  // open_lanes: one runner, lock and validator per device.
  detail::EvalLanes devices;
  std::vector<json> lane_json;  // the device as each measurement records it
  // set_deadlines, plan_search
  TaskBudget validate_budget, screen_budget, bench_budget;
  TaskSeconds measured;
  std::vector<Shape> bench;
  TuningCache known;
  // search, time_best
  TuneResult tuned;
  const ConfigOutcome* best = nullptr;  // in tuned.outcomes
  std::vector<Measurement> ms;
};

Evaluation Workspace::evaluate(const KernelContext& ctx, const std::string& source,
                               const EvalOptions& opts, std::optional<int64_t> attempt_id,
                               std::optional<int64_t> checkpoint_id) {
  EvalRun r(*this, ctx, source, opts, attempt_id, checkpoint_id);
  Evaluation ev = r.run();
  ev.summary = to_json(r.sum);
  return ev;
}

Evaluation Workspace::EvalRun::run() {
  if (!resolve()) return ev;
  plan_tuning();
  if (opts.compile_only) return compile_only();
  if (!open_lanes()) return ev;
  set_deadlines();
  if (!plan_search() || !search() || !time_best()) return ev;
  return finish();
}

bool Workspace::EvalRun::fail(Disposition d, std::string msg) {
  ev.disposition = d;
  ev.message = std::move(msg);
  sum.disposition = std::string(to_string(d));
  sum.message = ev.message;
  return false;
}

// The source's regions, the backend, the device and its peak.
bool Workspace::EvalRun::resolve() {
  sum.format = kEvalSummaryFormatVersion;
  sum.peak_version = PEAK_VERSION;
  auto r = split_regions(source, ctx.source_file);
  if (!r) return fail(Disposition::region_violation, r.error());
  regions = *r;
  auto s = detail::eval_setup(ws, ctx, opts.device);
  if (!s) return fail(Disposition::not_run, s.error());
  setup = *s;
  detail::describe_setup(sum, setup, true);
  return true;
}

// The tuning search: its options, a status line, and what the store recorder files it under.
void Workspace::EvalRun::plan_tuning() {
  const Backend& be = *setup.be;
  to.strategy = opts.strategy.empty() ? std::string(kDefaultStrategy) : opts.strategy;
  to.budget = opts.budget;
  to.start = opts.must_include;
  to.overrides = opts.tuning_overrides;
  to.top_k = opts.top_k;
  to.jobs = opts.jobs;
  to.cache_dir = setup.cache;
  // Several devices of one host (--devices): the search spreads over them; the first makes the
  // final timing. Nothing runs with --compile-only: it compiles for the first.
  lane_selectors = opts.devices.size() > 1 && !opts.compile_only
                       ? opts.devices
                       : std::vector<std::string>{opts.device};
  several = lane_selectors.size() > 1;
  // A batch ends when its last configuration is judged: with several devices, each takes a
  // batch's worth so that as few wait at its end.
  to.batch *= lane_selectors.size();
  // A strategy that does not wait for outcomes (exhaustive, random) gains nothing from a batch's
  // end and loses the devices' idle time there: four times as many per batch.
  to.steady_batch = 4 * to.batch;
  status.emplace([this](const std::string& line) { ws.progress_.status(line); },
                 lane_selectors.size());
  status->announce_plan([this](const std::string& line) { ws.progress_.print(line); },
                        to.budget.seconds);
  target.attempt_id = attempt_id;
  target.checkpoint_id = checkpoint_id;
  target.source_hash = sha256_hex(source);
  target.kernel = ctx.name;
  target.device = setup.dev;
  target.jobs = opts.jobs > 0 ? opts.jobs
                              : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (const auto& [k, v] : be.toolchain())
    if (k != "runner")  // a path on this machine
      target.toolchain += (target.toolchain.empty() ? "" : ", ") + k + " " + v;
  target.options = {{"budget", to.budget.text()},
                    {"seed", to.seed},
                    {"batch", to.batch},
                    {"steady_batch", to.steady_batch}};
  // A class's search (`peak tune --classes`) is no search of the checkpoint's bench shapes: it
  // tunes on its class's shapes, ranked by the geometric mean of their times; `peak
  // export-space` without --run passes over its run (tune/record.h, latest_tuning_run) and its
  // measurement rows are tagged.
  per_class = !opts.shapes.empty();
  if (per_class) target.options["per_class"] = true;
}

// Every configuration the strategy picks is compiled (in parallel), nothing is run; the launch
// plans of the shapes a run would use are checked against each build and the device facts as a
// run checks them before it runs anything.
Evaluation Workspace::EvalRun::compile_only() {
  Backend& be = *setup.be;
  to.compile_only = true;
  to.cancelled = opts.cancelled;
  to.plan_shapes = detail::compile_only_shapes(ctx, opts);
  if (!to.plan_shapes.empty()) to.tune_shapes = {to.plan_shapes.front()};
  Validator unused(be, setup.dev, RunnerOptions{}, ReferenceSource{});
  target.build_rows = false;
  recorder.emplace(*ws.store_, target);
  auto tr = tune(be, setup.dev, RunnerOptions{}, unused, ctx, regions, to, {&*status, &*recorder});
  ws.progress_.clear();
  if (opts.cancelled && opts.cancelled()) {
    fail(Disposition::not_run, kCancelledMessage);
    return ev;
  }
  if (tr.disposition != Disposition::passed) {
    fail(tr.disposition, tr.message);
    return ev;
  }
  const std::vector<std::string> unchecked = detail::checks_without_device(be);
  ev.disposition = Disposition::passed;
  ev.message = fmt::format(
      "{}; launch plans checked on {} shapes; not checked without a device: "
      "{}",
      tr.message, to.plan_shapes.size(), join(unchecked, "; "));
  sum.disposition = "passed";
  sum.compile_only = true;
  sum.extra["compile_only_unchecked"] = unchecked;
  sum.message = ev.message;
  return ev;
}

// The devices of the search, all of one model, each with what its measurements record of it;
// then one runner, lock and validator per device (detail::EvalLanes).
bool Workspace::EvalRun::open_lanes() {
  const DeviceFacts& dev = setup.dev;
  devices.selectors = lane_selectors;
  for (const auto& sel : lane_selectors) {
    auto f = sel == opts.device ? Result<DeviceFacts>(dev) : ws.device(sel);
    if (!f) return fail(Disposition::not_run, f.error());
    if (f->name != dev.name)
      return fail(Disposition::not_run,
                  fmt::format("devices {} ({}) and {} ({}) are of different models: their times "
                              "do not rank against each other; pick devices of one model",
                              lane_selectors.front(), dev.name, sel, f->name));
    devices.facts.push_back(*f);
    json dj = to_json(sum.device.value_or(SummaryDevice{}));
    if (several) {
      dj["selector"] = sel;
      if (auto pci = f->extra.find("pci_bus_id"); pci != f->extra.end())
        dj["pci_bus_id"] = pci->second;
    }
    lane_json.push_back(dj);
  }
  if (auto s = devices.open(ws, ctx, setup, opts.device, opts.task_timeout_s); !s)
    return fail(Disposition::not_run, s.message());
  if (several) {
    json all = json::array();
    for (const auto& dj : lane_json) all.push_back(dj);
    sum.extra["devices"] = all;
  }
  return true;
}

// The runners started and the device locks' waits so far, in the summary.
void Workspace::EvalRun::record_locks() {
  const std::vector<RunnerOptions>& lane_runners = devices.runners;
  const std::vector<DeviceLockStats>& locks_before = devices.locks_before;
  const RunnerTally& tally = *devices.runner_tally;
  const RunnerOptions& ro = lane_runners.front();
  sum.extra["runner_starts"] = tally.starts.load();
  // Of those, the runners started ahead of the device lock and let go once it was theirs, since a
  // configuration had hung meanwhile (or the search was cancelled): they ran nothing.
  sum.extra["runners_abandoned"] = tally.abandoned.load();
  // Where the runners' time went: starting (process, sandbox, device), running tasks, and of
  // the tasks' time, loading kernels.
  sum.extra["runner_seconds"] = {{"startup", tally.startup_seconds()},
                                 {"tasks", tally.task_seconds()},
                                 {"load", tally.load_seconds()}};
  {
    std::lock_guard<std::mutex> lock(devices.runner_tally->mu);
    if (!tally.startup_steps.empty()) sum.extra["runner_seconds"]["steps"] = tally.startup_steps;
  }
  sum.extra["device_lock"] =
      detail::lock_json(*ro.device_lock, ro.device_lock->stats().since(locks_before.front()));
  if (!several) return;
  json all = json::array();
  for (size_t i = 0; i < lane_runners.size(); ++i) {
    json l = detail::lock_json(*lane_runners[i].device_lock,
                               lane_runners[i].device_lock->stats().since(locks_before[i]));
    l["selector"] = lane_selectors[i];
    all.push_back(l);
  }
  sum.extra["device_locks"] = all;
}

// Deadlines from what the reference kernels took per task on this device (the seed, the parent
// and this kernel's own last evaluation), so that a slow machine is not taken for a hung kernel.
void Workspace::EvalRun::set_deadlines() {
  std::vector<std::pair<std::string, TaskSeconds>> refs;
  auto add_ref = [&](std::optional<int64_t> id, const std::string& who) {
    if (!id) return;
    if (auto c = ws.store_->checkpoint(*id))
      detail::add_task_reference(refs, ws.summary(*c), fmt::format("{} (checkpoint {})", who, *id));
  };
  if (auto seed = ws.store_->find_tag("seed"); seed && *seed) add_ref(**seed, "seed");
  if (checkpoint_id) {
    add_ref(checkpoint_id, "last evaluation");
    if (auto c = ws.store_->checkpoint(*checkpoint_id); c && c->parent)
      add_ref(c->parent, "parent");
  } else if (auto h = ws.head()) {
    add_ref(h->id, "parent");  // a candidate (apply, commit) is evaluated on top of HEAD
  }
  const detail::TaskBudgets budgets = detail::task_budgets(refs, setup.dev.is_cpu, opts);
  validate_budget = budgets.validate;
  screen_budget = budgets.screen;
  bench_budget = budgets.bench;
  sum.extra["task_timeouts"] = {{"validate", validate_budget.to_json()},
                                {"screen", screen_budget.to_json()},
                                {"bench", bench_budget.to_json()}};
}

// The shapes, the validation and screening options of the search, and what it reuses.
bool Workspace::EvalRun::plan_search() {
  bench = per_class                                 ? opts.shapes
          : opts.small && !ctx.small_shapes.empty() ? ctx.small_shapes
                                                    : ctx.bench_shapes;
  if (bench.empty()) return fail(Disposition::not_run, "kernel.toml lists no bench shapes");
  // The bench shapes rank by the first; a class's shapes by the geometric mean of their times.
  to.tune_shapes = per_class ? bench : std::vector<Shape>{bench.front()};
  // A GPU starts the next configuration's runner while it runs one (more at once only contend
  // for the driver's start-up); on a CPU device a start would take the cores the timed kernel
  // runs on.
  to.workers_per_device = setup.dev.is_cpu ? 1 : 2;
  to.validation.seeds = opts.seeds;
  // The hidden shapes of this evaluation: from a seed no candidate can know, recorded so that
  // `--validation-seed` draws them again.
  to.validation.shape_seed =
      opts.validation_seed != 0 ? opts.validation_seed : random_validation_seed();
  sum.validation_seed = to.validation.shape_seed;
  to.validation_memo = opts.validation_memo;
  to.validation.sanitize = opts.sanitize;
  to.validation.task_timeout_s = validate_budget.timeout_s;
  to.validation.reference_task_s = validate_budget.reference_s;
  to.validation.timeout_basis = validate_budget.basis;
  to.screening.policy = opts.screening;
  to.screening.task_timeout_s = screen_budget.timeout_s;
  to.screening.reference_task_s = screen_budget.reference_s;
  to.screening.timeout_basis = screen_budget.basis;
  to.screening.peak_tflops = setup.peak.limit;
  to.screening.memory_gbs = setup.peak.memory_gbs;
  // Screening ranks configurations by their time; the copy is timed once, in the final timing.
  to.screening.with_copy = false;
  // A class's search ranks by the sum over its shapes: its runs name them all, so that
  // --reuse-measurements never mixes its scores with a search of the first shape alone.
  target.shape = bench.front().text();
  for (size_t i = 1; i < to.tune_shapes.size(); ++i)
    target.shape += "; " + to.tune_shapes[i].text();
  target.work = work_of(ctx, bench.front());
  if (opts.reuse_measurements) {
    auto k = recorded_outcomes(*ws.store_, target.source_hash, target.shape, setup.dev.name);
    if (!k) return fail(Disposition::not_run, k.error());
    known = std::move(*k);
    to.reuse = &known;
  }
  // Reports keep a class's measurement rows apart from the checkpoint's own numbers.
  target.what_prefix = per_class ? kClassMeasurementPrefix : "";
  target.devices = lane_json;
  to.cancelled = opts.cancelled;
  return true;
}

// The search over the tuning space (the store recorder records it as it goes); its best
// configurations ranked.
bool Workspace::EvalRun::search() {
  recorder.emplace(*ws.store_, target);
  tuned = tune(*setup.be, devices.lanes, ctx, regions, to, {&*status, &*recorder});
  const TuneResult& tr = tuned;
  ws.progress_.clear();
  record_locks();
  for (const auto& o : tr.outcomes) {
    for (const auto& c : o.validation.checks)
      if (c.disposition == Disposition::passed)
        measured.validate = std::max(measured.validate, c.seconds);
    for (const auto& m : o.measurements)
      if (m.disposition == Disposition::passed)
        measured.screen = std::max(measured.screen, m.seconds);
  }
  sum.task_seconds = SummaryTaskSeconds{measured.validate, measured.screen, measured.bench, {}};
  if (opts.cancelled && opts.cancelled()) return fail(Disposition::not_run, kCancelledMessage);
  summarize_search(tr, recorder->run_id());
  if (tr.disposition != Disposition::passed) {
    std::string msg = tr.message;
    return fail(tr.disposition, msg.empty() ? std::string(describe(tr.disposition)) : msg);
  }
  rank(tr);
  return true;
}

// What the search covered ("configs") and how long its phases took ("phases").
void Workspace::EvalRun::summarize_search(const TuneResult& tr, std::optional<int64_t> run_id) {
  std::map<std::string, int64_t> counts;
  for (const auto& o : tr.outcomes) counts[std::string(to_string(o.disposition))]++;
  size_t pruned = tr.space.invalid;
  for (const auto& o : tr.outcomes) pruned += o.pruned();
  SummaryConfigs& c = sum.configs.emplace();
  c.space = static_cast<int64_t>(tr.space.total);
  c.rejected_by_constraint = static_cast<int64_t>(tr.space.invalid);
  c.evaluated = static_cast<int64_t>(tr.outcomes.size());
  c.sampled = tr.space.sampled;
  c.pruned = static_cast<int64_t>(pruned);
  c.strategy = tr.strategy;
  c.budget = to.budget.text();
  c.stop = tr.stop;
  c.reused = static_cast<int64_t>(tr.reused);
  c.dispositions = counts;
  if (run_id) c.tuning_run = *run_id;
  SummaryPhases& ph = sum.phases.emplace();
  ph.compile_s = tr.compile_seconds;
  ph.validate_s = tr.validate_seconds;
  ph.tune_s = tr.time_seconds;
}

// The passing configurations, fastest first ("top"), and the best one ("best").
void Workspace::EvalRun::rank(const TuneResult& tr) {
  auto& top = sum.top.emplace();
  for (size_t i : tr.ranking)
    top.push_back({config_json(tr.outcomes[i].config), tr.outcomes[i].score_ms, json::object()});
  best = &tr.outcomes[tr.ranking.front()];
  sum.best = SummaryBest{config_json(best->config), config_text(best->config),
                         best->build.resources, best->validation.message, json::object()};
  for (const auto& o : tr.outcomes)
    if (!o.validation.sanitizer.empty())
      sum.sanitizer = SummarySanitizer{config_text(o.config), o.validation.sanitizer, {}};
}

// The final timing of the best configuration on every bench shape, against the baseline: with
// several devices the shapes are dealt over them (each against the baseline on its own device),
// else on the one; every measurement recorded (StoreRecorder::on_final).
bool Workspace::EvalRun::time_best() {
  Backend& be = *setup.be;
  auto t0 = std::chrono::steady_clock::now();
  const FinalTimingOptions fo = detail::final_timing_options(opts, bench_budget, setup.peak);
  const std::vector<TuneObserver*> observers = {&*status, &*recorder};
  const size_t spread = several ? std::min(lane_selectors.size(), bench.size()) : 1;
  std::vector<std::unique_ptr<FinalTimer>> timers;
  for (size_t d = 0; d < spread; ++d)
    timers.push_back(std::make_unique<FinalTimer>(
        be, d == 0 ? setup.dev : devices.facts[d], devices.runners[d], *devices.validators[d], ctx,
        regions, fo, spread > 1 ? std::vector<TuneObserver*>{} : observers));
  ws.progress_.status(
      fmt::format("  timing {} on {} shape(s){}", config_text(best->config), bench.size(),
                  spread > 1 ? fmt::format(" on {} devices", spread) : ""),
      true);
  // A configuration whose outcome was reused (--reuse-measurements) was not built by this
  // process, and its build may be gone (a workspace packed without .peak/cache and unpacked
  // elsewhere): build it again; the compiler cache makes this free when the build is still there.
  BuildResult best_build = best->build;
  if (std::error_code ec; best_build.artifact.empty() || !fs::exists(best_build.artifact, ec)) {
    best_build = be.build(BuildRequest{&ctx, source, best->config, setup.dev, setup.cache});
    if (best_build.disposition != Disposition::passed)
      return fail(best_build.disposition,
                  fmt::format("the best configuration ({}) does not build again:\n{}",
                              config_text(best->config), best_build.log));
  }
  if (spread > 1) {
    std::vector<FinalTimer*> each;
    for (auto& t : timers) each.push_back(t.get());
    ms = time_spread(each, lane_selectors, best_build, best->config, bench, observers);
  } else {
    ms = timers.front()->time(best_build, best->config, bench);
  }
  ws.progress_.clear();
  record_locks();
  for (const auto& m : ms)
    if (m.disposition == Disposition::passed) measured.bench = std::max(measured.bench, m.seconds);
  sum.task_seconds = SummaryTaskSeconds{measured.validate, measured.screen, measured.bench, {}};
  if (!sum.phases) sum.phases.emplace();
  sum.phases->bench_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto& rows = sum.bench.emplace();
  for (const auto& m : ms) rows.push_back(bench_from_json(detail::measurement_json(m)));
  ev.disposition = Disposition::passed;
  for (const auto& m : ms)
    if (m.disposition != Disposition::passed)
      return fail(m.disposition, fmt::format("timing at {}: {}", m.shape.text(), m.message));
  return true;
}

// A passed evaluation's disposition and message.
Evaluation Workspace::EvalRun::finish() {
  sum.disposition = "passed";
  ev.message = fmt::format(
      "best {}: {}", config_text(best->config),
      ms.empty() ? ""
                 : fmt::format("{} at {}",
                               headline_rate(bench_from_json(detail::measurement_json(ms.front()))),
                               ms.front().shape.text()));
  sum.message = ev.message;
  return ev;
}

}  // namespace peak
