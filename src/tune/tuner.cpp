#include "tune/tuner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "plan/plan_language.h"
#include "tune/prune.h"
#include "tune/simulation.h"
#include "util/fs.h"

namespace peak {

namespace {
double elapsed(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

BackendRunner::BackendRunner(Backend& backend, const DeviceFacts& device,
                             const RunnerOptions& runner, Validator& validator,
                             const KernelContext& ctx, const SourceRegions& source,
                             const TuneOptions& opts)
    : BackendRunner(backend, {DeviceLane{&device, &runner, &validator}}, ctx, source, opts) {}

BackendRunner::BackendRunner(Backend& backend, std::vector<DeviceLane> lanes,
                             const KernelContext& ctx, const SourceRegions& source,
                             const TuneOptions& opts)
    : backend_(backend),
      lanes_(std::move(lanes)),
      device_(*lanes_.at(0).device),
      ctx_(ctx),
      source_(source),
      opts_(opts),
      full_source_(join_regions(source)),
      parsed_plan_([&]() -> std::optional<ParsedPlan> {
        auto p = parse_plan(source, ctx.source_file.empty() ? "kernel" + backend.source_extension()
                                                            : ctx.source_file);
        if (!p) return std::nullopt;
        return std::move(*p);
      }()),
      t0_(std::chrono::steady_clock::now()) {}

ValidationOutcome BackendRunner::validate_on(size_t lane, const ConfigOutcome& o,
                                             const ValidationOptions& vo) {
  return lanes_[lane].validator->validate(ctx_, source_, o.build, o.config, vo);
}

std::vector<Measurement> BackendRunner::time_on(size_t lane, const ConfigOutcome& o,
                                                const MeasureOptions& mo) {
  const DeviceLane& d = lanes_[lane];
  return measure(backend_, *d.device, *d.runner, *d.validator, ctx_, source_, o.build, o.config,
                 opts_.tune_shapes, mo);
}

void BackendRunner::spread(size_t count, const std::function<void(size_t, size_t)>& f) {
  if (lanes_.size() <= 1 || count <= 1) {
    for (size_t k = 0; k < count; ++k) f(0, k);
    return;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (size_t lane = 0; lane < std::min(lanes_.size(), count); ++lane)
    threads.emplace_back([&, lane] {
      for (size_t k = next.fetch_add(1); k < count; k = next.fetch_add(1)) f(lane, k);
    });
  for (auto& t : threads) t.join();
}

double BackendRunner::elapsed_seconds() const { return elapsed(t0_); }

bool BackendRunner::stopped() const { return opts_.cancelled && opts_.cancelled(); }

void BackendRunner::cancel(ConfigOutcome& o) {
  o.disposition = Disposition::not_run;
  o.message = std::string(kCancelledOutcome);
  o.score_ms = 0;
}

bool BackendRunner::skipped(ConfigOutcome& o) const {
  if (stopped()) {
    cancel(o);
    return true;
  }
  if (!hung_) return false;
  o.disposition = Disposition::not_run;
  o.message = std::string(kNotRunAfterTimeout);
  o.score_ms = 0;
  return true;
}

namespace {
// The indices of the configurations still to be evaluated further.
std::vector<size_t> still_going(const std::vector<uint8_t>& go) {
  std::vector<size_t> out;
  for (size_t i = 0; i < go.size(); ++i)
    if (go[i]) out.push_back(i);
  return out;
}
}  // namespace

// The launch plan of the tuning shape, evaluated before compiling: a requirement that fails or a
// size out of range rules the configuration out uncompiled. (A plan that does not parse fails
// every build, which says why.)
void BackendRunner::plan_uncompiled(const std::vector<Config>& batch,
                                    std::vector<ConfigOutcome>& out,
                                    std::vector<uint8_t>& go) const {
  for (size_t i = 0; i < batch.size(); ++i) {
    out[i].config = batch[i];
    if (opts_.tune_shapes.empty() || !parsed_plan_) continue;
    const Shape& shape = opts_.tune_shapes.front();
    expr::Env env = plan_env(ctx_, source_, shape, batch[i], device_plan_env(device_));
    PlanOutcome po = evaluate_plan(*parsed_plan_, backend_.plan_dialect(), ctx_, env);
    if (po.disposition == Disposition::invalid_config ||
        po.disposition == Disposition::workspace_exceeded) {
      out[i].disposition = po.disposition;
      out[i].stage = Stage::launch;
      out[i].message =
          fmt::format("{} (shape {}, {})", po.message, shape.text(), config_text(batch[i]));
      go[i] = 0;
    } else if (po.disposition == Disposition::passed) {
      out[i].launch = po.plan.to_json();
    }
  }
}

// Compiles the configurations `todo` in parallel.
void BackendRunner::compile(std::vector<ConfigOutcome>& out, const std::vector<size_t>& todo,
                            TuneObserver* observer) {
  const int jobs = opts_.jobs > 0
                       ? opts_.jobs
                       : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<size_t> next{0}, done{0};
  std::mutex mu;
  auto worker = [&] {
    for (;;) {
      size_t k = next.fetch_add(1);
      if (k >= todo.size() || stopped()) return;
      ConfigOutcome& o = out[todo[k]];
      BuildRequest req;
      req.context = &ctx_;
      req.source = full_source_;
      req.defines = o.config;
      req.device = device_;
      req.cache_dir = opts_.cache_dir;
      o.build = backend_.build(req);
      o.compile_seconds = o.build.seconds;
      size_t d = ++done;
      if (observer) {
        std::lock_guard<std::mutex> lock(mu);
        observer->on_phase("compile", d, todo.size());
      }
    }
  };
  std::vector<std::thread> pool;
  for (int j = 0; j < std::min<int>(jobs, static_cast<int>(todo.size())); ++j)
    pool.emplace_back(worker);
  for (auto& t : pool) t.join();
}

// The checks of a compiled configuration before it runs: the backend's own check of its
// resources, the rules against the device's limits, and its launch plan. False when it is ruled
// out (or, compiling only, when its evaluation ends here).
bool BackendRunner::check_built(ConfigOutcome& o, const DeviceLimits& limits) {
  if (stopped() && o.build.disposition == Disposition::not_run && o.build.log.empty()) {
    cancel(o);
    return false;
  }
  if (o.build.disposition != Disposition::passed) {
    o.disposition = o.build.disposition;
    o.stage = Stage::compile;
    o.message = o.build.log;
    return false;
  }
  PlanResult check = backend_.check_resources(o.build, device_);
  std::string why = check.disposition == Disposition::passed
                        ? resource_prune_reason(resource_usage(o.build.resources, o.launch), limits)
                        : check.message;
  if (check.disposition != Disposition::passed || !why.empty()) {
    o.disposition =
        check.disposition != Disposition::passed ? check.disposition : Disposition::invalid_config;
    o.stage = Stage::resources;
    o.message = why;
    return false;
  }
  // The plan resolved against the build: what this device cannot launch is ruled out here.
  if (!opts_.tune_shapes.empty()) {
    PlanResult plan =
        backend_.plan(ctx_, source_, opts_.tune_shapes.front(), o.config, device_, o.build);
    if (plan.disposition != Disposition::passed) {
      o.disposition = plan.disposition;
      o.stage = plan.disposition == Disposition::compile_failed ? Stage::compile : Stage::launch;
      o.message = plan.message;
      return false;
    }
    o.launch = plan.plan;
  }
  if (opts_.compile_only) {
    check_plans(o);
    return false;
  }
  return true;
}

// What a run would refuse before running anything, refused here for every shape it runs.
void BackendRunner::check_plans(ConfigOutcome& o) {
  o.disposition = Disposition::passed;
  o.stage = Stage::compile;
  for (const Shape& shape : opts_.plan_shapes) {
    auto valid = shape_is_valid(ctx_, shape);
    if (!valid || !*valid) continue;
    PlanResult plan = backend_.plan(ctx_, source_, shape, o.config, device_, o.build);
    if (plan.disposition == Disposition::passed) continue;
    o.disposition = plan.disposition;
    o.stage = plan.disposition == Disposition::compile_failed ? Stage::compile : Stage::launch;
    o.message = plan.message;
    break;
  }
}

// Validates the configurations still going, on every device at once when there are several.
// The outcome of each configuration is written by the one thread that took it; what the threads
// share (the observer, the count) is taken under `mu`.
void BackendRunner::validate_all(std::vector<ConfigOutcome>& out, std::vector<uint8_t>& go,
                                 TuneObserver* observer) {
  const std::vector<size_t> to_check = still_going(go);
  std::mutex mu;
  size_t checked = 0;
  // The sanitizer is slow: it checks one configuration (the first that builds: the defaults).
  const bool sanitize_first = opts_.validation.sanitize && !sanitized_ && !to_check.empty();
  spread(to_check.size(), [&](size_t lane, size_t k) {
    const size_t i = to_check[k];
    ConfigOutcome& o = out[i];
    if (skipped(o)) {
      go[i] = 0;
      return;
    }
    auto v0 = std::chrono::steady_clock::now();
    ValidationOptions vo = opts_.validation;
    vo.sanitize = sanitize_first && k == 0;
    o.validation = validate_on(lane, o, vo);
    o.validate_seconds = elapsed(v0);
    o.disposition = o.validation.disposition;
    o.stage = Stage::validate;
    o.message = o.validation.message;
    o.device = lane;
    if (o.disposition != Disposition::passed) go[i] = 0;
    if (o.disposition == Disposition::timeout) hung_ = true;
    std::lock_guard<std::mutex> lock(mu);
    ++checked;
    if (observer) observer->on_phase("validate", checked, to_check.size());
  });
  sanitized_ = sanitized_ || sanitize_first;
}

// Times one validated configuration on the tuning shapes on device `lane`: its score is the sum
// over the shapes. `mu` guards the observer, shared by the devices' threads.
void BackendRunner::screen(size_t lane, ConfigOutcome& o, std::mutex& mu, TuneObserver* observer) {
  MeasureOptions mo = opts_.screening;
  mo.with_baseline = false;
  o.measurements = time_on(lane, o, mo);
  // What the driver made of the code (Vulkan: registers) joins the compiler's report.
  for (const auto& m : o.measurements)
    if (!m.kernel_statistics.empty()) {
      add_driver_statistics(o.build.resources, m.kernel_statistics);
      break;
    }
  double total = 0;
  for (const auto& m : o.measurements) {
    if (m.disposition != Disposition::passed) {
      o.disposition = m.disposition;
      o.message = m.message;
      if (o.disposition == Disposition::timeout) hung_ = true;
      break;
    }
    // On a CPU device the kernel shares the cores with every other process, and contention
    // only ever adds time: the fastest sample ranks best. A GPU ranks by the median.
    total += device_.is_cpu ? m.stats.min : m.stats.median;
  }
  o.score_ms = total;
  if (observer) {
    std::lock_guard<std::mutex> lock(mu);
    observer->on_screened(o);
  }
}

// Times the survivors on the tuning shapes, each on the device that takes it.
void BackendRunner::time_all(std::vector<ConfigOutcome>& out, const std::vector<uint8_t>& go,
                             TuneObserver* observer) {
  const std::vector<size_t> to_time = still_going(go);
  std::mutex mu;
  size_t timed = 0;
  spread(to_time.size(), [&](size_t lane, size_t k) {
    ConfigOutcome& o = out[to_time[k]];
    if (skipped(o)) return;
    auto m0 = std::chrono::steady_clock::now();
    o.stage = Stage::time;
    o.device = lane;
    if (!opts_.tune_shapes.empty()) screen(lane, o, mu, observer);
    o.time_seconds = elapsed(m0);
    std::lock_guard<std::mutex> lock(mu);
    ++timed;
    if (observer) observer->on_phase("time", timed, to_time.size());
  });
}

std::vector<ConfigOutcome> BackendRunner::run(const std::vector<Config>& batch,
                                              TuneObserver* observer) {
  std::vector<ConfigOutcome> out(batch.size());
  std::vector<uint8_t> go(batch.size(), 1);  // still to be evaluated further
  plan_uncompiled(batch, out, go);

  auto t0 = std::chrono::steady_clock::now();
  const std::vector<size_t> todo = still_going(go);
  compile(out, todo, observer);
  compile_seconds += elapsed(t0);

  const DeviceLimits limits = device_limits(device_);
  for (size_t i : todo)
    if (!check_built(out[i], limits)) go[i] = 0;

  t0 = std::chrono::steady_clock::now();
  validate_all(out, go, observer);
  validate_seconds += elapsed(t0);

  t0 = std::chrono::steady_clock::now();
  time_all(out, go, observer);
  time_seconds += elapsed(t0);
  return out;
}

std::vector<ConfigOutcome> ReuseRunner::run(const std::vector<Config>& batch,
                                            TuneObserver* observer) {
  std::vector<ConfigOutcome> out(batch.size());
  std::vector<Config> misses;
  std::vector<size_t> where;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (const CacheEntry* e = known_.find(batch[i])) {
      out[i] = outcome_of(*e);
      ++reused;
    } else {
      misses.push_back(batch[i]);
      where.push_back(i);
    }
  }
  if (!misses.empty()) {
    std::vector<ConfigOutcome> ran = inner_.run(misses, observer);
    for (size_t k = 0; k < ran.size(); ++k) out[where[k]] = std::move(ran[k]);
  }
  return out;
}

TuneResult tune(Backend& backend, const DeviceFacts& device, const RunnerOptions& runner,
                Validator& validator, const KernelContext& ctx, const SourceRegions& source,
                const TuneOptions& opts, const std::vector<TuneObserver*>& observers) {
  return tune(backend, {DeviceLane{&device, &runner, &validator}}, ctx, source, opts, observers);
}

TuneResult tune(Backend& backend, const std::vector<DeviceLane>& lanes, const KernelContext& ctx,
                const SourceRegions& source, const TuneOptions& opts,
                const std::vector<TuneObserver*>& observers) {
  TuneResult res;
  if (lanes.empty() || !lanes.front().device) {
    res.message = "internal: tune() was given no device";
    return res;
  }
  const DeviceFacts& device = *lanes.front().device;
  res.strategy = opts.strategy;
  auto space = space_for(ctx, device, opts.overrides);
  if (!space) {
    res.disposition = Disposition::invalid_config;
    res.message = space.error();
    return res;
  }
  res.space.total = space->total();
  res.space.invalid = space->pruned().size();
  res.space.valid = space->size();
  if (space->size() == 0) {
    res.disposition = Disposition::invalid_config;
    res.message = fmt::format("no tuning configuration satisfies tuning_valid ({} rejected)",
                              res.space.invalid);
    return res;
  }
  auto strategy = make_strategy(opts.strategy);
  if (!strategy) {
    res.disposition = Disposition::not_run;
    res.message = strategy.error();
    return res;
  }
  BackendRunner run(backend, lanes, ctx, source, opts);
  TuningCache none;
  ReuseRunner reuse(run, opts.reuse ? *opts.reuse : none);
  SearchOptions so;
  so.budget = opts.budget;
  so.seed = opts.seed;
  so.batch = opts.batch;
  so.start = opts.start;
  so.cancelled = opts.cancelled;
  SearchResult sr = search(*space, **strategy, reuse, so, observers);
  res.reused = reuse.reused;
  res.outcomes = std::move(sr.outcomes);
  res.limit = sr.limit;
  res.stop = sr.stop;
  res.space.sampled = res.outcomes.size() < space->size();
  res.compile_seconds = run.compile_seconds;
  res.validate_seconds = run.validate_seconds;
  res.time_seconds = run.time_seconds;
  const size_t n = res.outcomes.size();
  const size_t top_k = static_cast<size_t>(std::max(opts.top_k, 1));
  if (opts.compile_only) {
    for (size_t i = 0; i < n && res.ranking.size() < top_k; ++i)
      if (res.outcomes[i].disposition == Disposition::passed) res.ranking.push_back(i);
  } else {
    for (size_t i = 0; i < n; ++i)
      if (res.outcomes[i].disposition == Disposition::passed) res.ranking.push_back(i);
    std::stable_sort(res.ranking.begin(), res.ranking.end(), [&](size_t a, size_t b) {
      return res.outcomes[a].score_ms < res.outcomes[b].score_ms;
    });
  }
  const size_t passing = static_cast<size_t>(
      std::count_if(res.outcomes.begin(), res.outcomes.end(),
                    [](const ConfigOutcome& o) { return o.disposition == Disposition::passed; }));
  if (res.ranking.size() > top_k) res.ranking.resize(top_k);
  if (n == 0) {
    res.disposition = Disposition::not_run;
    res.message = fmt::format("the {} strategy evaluated no configuration", opts.strategy);
    return res;
  }
  if (!res.ranking.empty()) {
    res.disposition = Disposition::passed;
    res.message =
        opts.compile_only
            ? fmt::format("compile only: {} of {} configurations built (nothing run)", passing, n)
            : fmt::format("{} of {} configurations passed", passing, n);
    return res;
  }
  // The most informative failure: the most common one that is not a pruning, else the first.
  // A hung configuration outweighs them all: the search stopped there (search.h).
  std::map<Disposition, size_t> counts;
  for (const auto& o : res.outcomes) counts[o.disposition]++;
  Disposition worst = res.outcomes[0].disposition;
  size_t most = 0;
  for (const auto& [d, c] : counts)
    if (d != Disposition::invalid_config && c > most) {
      most = c;
      worst = d;
    }
  if (counts.count(Disposition::timeout)) worst = Disposition::timeout;
  res.disposition = worst;
  for (const auto& o : res.outcomes)
    if (o.disposition == worst) {
      res.message = opts.compile_only
                        ? fmt::format("configuration {}: {}", config_text(o.config), o.message)
                        : o.message;
      break;
    }
  return res;
}

void StatusObserver::on_start(const TuningSpace& space, const std::string& strategy, size_t limit) {
  strategy_ = strategy;
  limit_ = limit;
  evaluated_ = 0;
  if (plan_sink_)
    plan_sink_(fmt::format("  tuning plan: {}, {} of {} valid configuration{}{}", strategy, limit,
                           space.size(), space.size() == 1 ? "" : "s",
                           seconds_ > 0 ? fmt::format(", at most {}", duration_text(seconds_))
                                        : std::string(", no time bound")));
}

void StatusObserver::on_phase(std::string_view phase, size_t done, size_t total) {
  sink_(fmt::format("  tuning ({}, {}/{} evaluated{}): {} {}/{}", strategy_, evaluated_, limit_,
                    devices_ > 1 ? fmt::format(", {} devices", devices_) : "", phase, done, total));
}

void StatusObserver::on_batch(const std::vector<size_t>& indices, const std::vector<ConfigOutcome>&,
                              double) {
  evaluated_ += indices.size();
}

}  // namespace peak
