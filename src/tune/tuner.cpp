#include "tune/tuner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "plan/plan_language.h"
#include "results/suite.h"
#include "tune/prune.h"
#include "tune/simulation.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "validate/task_timeout.h"

namespace peak {

namespace {
double elapsed(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

std::optional<ValidationOutcome> ValidationMemo::find(const std::string& key) const {
  if (key.empty()) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = passed_.find(key);
  if (it == passed_.end()) return std::nullopt;
  return it->second;
}

void ValidationMemo::keep(const std::string& key, const ValidationOutcome& passed) {
  if (key.empty() || passed.disposition != Disposition::passed) return;
  std::lock_guard<std::mutex> lock(mu_);
  passed_.emplace(key, passed);
}

size_t ValidationMemo::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return passed_.size();
}

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
      plan_words_([&] {
        std::set<std::string> words;
        const std::regex word("[A-Za-z_][A-Za-z0-9_]*");
        for (const std::string* text : {&source.host, &source.macros})
          for (auto it = std::sregex_iterator(text->begin(), text->end(), word);
               it != std::sregex_iterator(); ++it)
            words.insert(it->str());
        return words;
      }()),
      t0_(std::chrono::steady_clock::now()) {}

namespace {
// One configuration's part of a runner job: its prepared validation and screening, and where its
// tasks begin among the job's.
struct JobPart {
  std::shared_ptr<PreparedValidation> validation;
  std::optional<ValidationOutcome> known;  // ConfigJob::validated: no validation task
  std::shared_ptr<PreparedTiming> timing;
  ValidationOptions options;
  size_t from = 0;  // its first task in the job
  size_t tasks() const { return validation->tasks.size() + timing->tasks.size(); }
};

// Tasks [from, from + count) of a job's results, with the ids their part gave them.
Result<std::vector<TaskResult>> slice(const Result<std::vector<TaskResult>>& results,
                                      const std::vector<RunnerTask>& tasks, size_t from,
                                      size_t count) {
  if (!results) return Error{results.error()};
  std::vector<TaskResult> out(results->begin() + static_cast<std::ptrdiff_t>(from),
                              results->begin() + static_cast<std::ptrdiff_t>(from + count));
  for (size_t k = 0; k < count; ++k) out[k].id = tasks[k].id;
  return out;
}

bool ran_nothing(const Result<std::vector<TaskResult>>& results, size_t from, size_t count) {
  if (!results) return false;
  for (size_t k = from; k < from + count; ++k)
    if ((*results)[k].disposition != Disposition::not_run) return false;
  return true;
}
}  // namespace

// The validation tasks and the screening tasks of a group of configurations in one runner job
// (one process start, one hold of the device lock); each task's id names its configuration's
// place in the group. A configuration's screening counts only once its validation passed; the
// job's deadline per task is the longer of the two kinds'. The outputs are judged by each
// configuration's finish, on the device's checker thread, while the device runs the next job.
std::vector<PendingEvaluation> BackendRunner::begin_on(size_t lane,
                                                       const std::vector<ConfigJob>& group,
                                                       const MeasureOptions& mo) {
  const DeviceLane& d = lanes_[lane];
  auto v0 = std::chrono::steady_clock::now();
  std::vector<PendingEvaluation> out(group.size());
  std::vector<std::optional<JobPart>> parts(group.size());
  RunnerJob job = RunnerJob::for_context(ctx_);
  for (size_t g = 0; g < group.size(); ++g) {
    const ConfigOutcome& o = *group[g].outcome;
    JobPart part;
    part.options = group[g].validation;
    if (group[g].validated) {  // an earlier search's verdict on this binary: screened only
      part.known = group[g].validated;
      part.validation = std::make_shared<PreparedValidation>();
      if (opts_.tune_shapes.empty()) {
        ConfigEvaluation e;
        e.validation = *part.known;
        out[g] = PendingEvaluation{[e] { return e; }};
        continue;
      }
    } else {
      part.validation = std::make_shared<PreparedValidation>(
          d.validator->prepare(ctx_, source_, o.build, o.config, part.options));
    }
    if (part.validation->ended) {
      ConfigEvaluation e;
      e.validation = *part.validation->ended;
      e.validate_seconds = elapsed(v0);
      out[g] = PendingEvaluation{[e] { return e; }};
      continue;
    }
    part.timing = std::make_shared<PreparedTiming>();
    if (!opts_.tune_shapes.empty())
      *part.timing = prepare_timing(backend_, *d.device, ctx_, source_, o.build, o.config,
                                    opts_.tune_shapes, mo);
    part.from = job.tasks.size();
    for (const auto* tasks : {&part.validation->tasks, &part.timing->tasks})
      for (RunnerTask t : *tasks) {
        if (group.size() > 1) t.id = fmt::format("c{}.{}", g, t.id);
        job.tasks.push_back(std::move(t));
      }
    parts[g] = std::move(part);
  }
  if (job.tasks.empty()) return out;
  const ValidationOptions& vo = opts_.validation;
  const bool screen_longer = !opts_.tune_shapes.empty() && mo.task_timeout_s > vo.task_timeout_s;
  const TaskBudget budget =
      screen_longer ? TaskBudget{mo.task_timeout_s, mo.reference_task_s, mo.timeout_basis}
                    : TaskBudget{vo.task_timeout_s, vo.reference_task_s, vo.timeout_basis};
  // The runner starts while the device runs the job before (the other worker's): only the
  // tasks hold the device.
  RunnerOptions runner = *d.runner;
  runner.start_before_lock = opts_.workers_per_device > 1;
  // A job whose runner waited for the device while another configuration hung (or the search
  // was cancelled) runs nothing: the hung job holds the device until its verdict is in hung_.
  runner.abandon = [this] { return hung_.load() || stopped() || past_time_budget(); };
  auto results = std::make_shared<Result<std::vector<TaskResult>>>(
      run_job_retrying_timeouts(job, runner, budget, [this](const TaskResult&) { hung_ = true; }));
  bool abandoned = false, hung_before = false;
  if (*results)
    for (const TaskResult& r : **results) abandoned = abandoned || r.message == kAbandoned;
  const double job_seconds = elapsed(v0) / static_cast<double>(group.size());
  for (size_t g = 0; g < group.size(); ++g) {
    if (!parts[g]) continue;
    auto part = std::make_shared<JobPart>(std::move(*parts[g]));
    const size_t nv = part->validation->tasks.size(), n = part->tasks();
    bool hung = false;
    if (*results)
      for (size_t k = part->from; k < part->from + n; ++k)
        hung = hung || (**results)[k].disposition == Disposition::timeout;
    // Nothing ran: nothing to judge.
    if (abandoned || (hung_before && ran_nothing(*results, part->from, n))) {
      std::error_code ec;
      if (!part->validation->dir.empty()) fs::remove_all(part->validation->dir, ec);
      discard_timing(*part->timing);
      out[g] = PendingEvaluation{[] { return ConfigEvaluation{}; }, false, true};
      continue;
    }
    hung_before = hung_before || hung;
    Validator* validator = d.validator;
    auto finish = [this, validator, part, results, mo, job_seconds, nv, n] {
      ConfigEvaluation e;
      auto c0 = std::chrono::steady_clock::now();
      if (part->known) {
        e.validation = *part->known;
      } else {
        e.validation = validator->finish(ctx_, *part->validation,
                                         slice(*results, part->validation->tasks, part->from, nv),
                                         part->options);
        e.validate_seconds = job_seconds + elapsed(c0);
      }
      auto t0 = std::chrono::steady_clock::now();
      if (e.validation.disposition == Disposition::passed) {
        e.measurements =
            finish_timing(*validator, ctx_, *part->timing,
                          slice(*results, part->timing->tasks, part->from + nv, n - nv), mo);
      } else {
        discard_timing(*part->timing);
      }
      e.time_seconds = elapsed(t0);
      return e;
    };
    out[g] = PendingEvaluation{finish, hung, false};
  }
  return out;
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
  if (!hung_ && !past_time_budget()) return false;
  o.disposition = Disposition::not_run;
  o.message = std::string(hung_ ? kNotRunAfterTimeout : kNotRunAfterTimeBudget);
  o.score_ms = 0;
  return true;
}

bool BackendRunner::past_time_budget() const {
  return opts_.budget.seconds > 0 && passed_.load() && elapsed_seconds() >= opts_.budget.seconds;
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

// Compiles the configurations `todo` in parallel; built(k) as each build of todo[k] ends.
void BackendRunner::compile(std::vector<ConfigOutcome>& out, const std::vector<size_t>& todo,
                            const std::function<void(size_t)>& built) {
  const int jobs = opts_.jobs > 0
                       ? opts_.jobs
                       : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (;;) {
      size_t k = next.fetch_add(1);
      if (k >= todo.size()) return;
      if (stopped()) {
        built(k);  // not built: check_built says cancelled
        continue;
      }
      ConfigOutcome& o = out[todo[k]];
      BuildRequest req;
      req.context = &ctx_;
      req.source = full_source_;
      req.defines = o.config;
      req.device = device_;
      req.cache_dir = opts_.cache_dir;
      o.build = backend_.build(req);
      o.compile_seconds = o.build.seconds;
      built(k);
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

// Starts the evaluation of built configurations on device `lane` in one runner job: the
// evaluations of those that run, whose outputs are then judged by `finish` (on the device's
// checker thread).
std::vector<std::pair<size_t, PendingEvaluation>> BackendRunner::begin(
    size_t lane, const std::vector<size_t>& indices, std::vector<ConfigOutcome>& out) {
  std::vector<size_t> going;
  std::vector<ConfigJob> group;
  for (size_t i : indices) {
    if (skipped(out[i])) continue;
    ValidationOptions vo = opts_.validation;
    // The sanitizer is slow: it checks one configuration (the first evaluated: the defaults).
    vo.sanitize = vo.sanitize && !sanitized_.exchange(true);
    going.push_back(i);
    group.push_back(ConfigJob{&out[i], vo, std::nullopt});
    if (!opts_.validation_memo || vo.sanitize) continue;
    if (auto v = opts_.validation_memo->find(validation_key(out[i], vo))) {
      v->message =
          fmt::format("validated by an earlier search (the same binary, launch plan and shapes){}",
                      v->message.empty() ? "" : ": " + v->message);
      group.back().validated = std::move(v);
    }
  }
  std::vector<std::pair<size_t, PendingEvaluation>> started;
  if (group.empty()) return started;
  MeasureOptions mo = opts_.screening;
  mo.with_baseline = false;
  std::vector<PendingEvaluation> pending = begin_on(lane, group, mo);
  for (const PendingEvaluation& p : pending)
    if (p.hung) hung_ = true;  // before the device takes the next configurations
  for (size_t g = 0; g < going.size(); ++g) {
    if (pending[g].abandoned) {
      skipped(out[going[g]]);
      continue;
    }
    started.emplace_back(going[g], std::move(pending[g]));
  }
  return started;
}

size_t BackendRunner::group_size(size_t left) const {
  const size_t workers = lanes_.size() * static_cast<size_t>(std::max(opts_.workers_per_device, 1));
  const size_t share = (left + workers - 1) / workers;
  return std::clamp<size_t>(share, 1, static_cast<size_t>(std::max(opts_.configs_per_job, 1)));
}

std::string BackendRunner::binary_key(const ConfigOutcome& o) const {
  std::set<std::string> modules;
  if (!o.build.artifact.empty()) modules.insert(o.build.artifact.string());
  if (o.launch.contains("steps") && o.launch["steps"].is_array())
    for (const auto& step : o.launch["steps"])
      if (step.contains("module") && step["module"].is_string() &&
          !step["module"].get<std::string>().empty())
        modules.insert(step["module"].get<std::string>());
  if (modules.empty()) return "";
  std::string key;
  for (const auto& m : modules) {
    auto bytes = read_file(m);
    if (!bytes) return "";
    key += sha256_hex(*bytes) + " ";
  }
  for (const auto& [name, value] : o.config)
    if (plan_words_.count(name)) key += fmt::format("{}={} ", name, value);
  return key;
}

std::string BackendRunner::validation_key(const ConfigOutcome& o,
                                          const ValidationOptions& vo) const {
  if (vo.shape_seed == 0 || !vo.shapes.empty() || o.binary.empty()) return "";
  return fmt::format(
      "{}| seeds {} hidden {} sampled {} shape seed {} input seed {} checks {} {} vendor {}",
      o.binary, vo.seeds, vo.include_hidden, vo.sampled_hidden_shapes, vo.shape_seed, vo.base_seed,
      vo.full_check_limit, vo.sampled_elements, vo.vendor_reference);
}

void BackendRunner::share(ConfigOutcome& o, const ConfigOutcome& from) {
  o.disposition = from.disposition;
  o.score_ms = from.score_ms;
  if (from.disposition == Disposition::not_run) {  // skipped with it: cancelled, or after a hang
    o.message = from.message;
    return;
  }
  o.validation = from.validation;
  o.measurements = from.measurements;
  for (auto& m : o.measurements) m.config = o.config;
  o.stage = from.stage;
  o.device = from.device;
  o.validate_seconds = o.time_seconds = 0;
  o.message =
      fmt::format("the evaluation of {} (the same binary and launch plan){}",
                  config_text(from.config), from.message.empty() ? "" : ": " + from.message);
}

// The outcome of a configuration from its evaluation, told to the observer.
void BackendRunner::conclude(size_t lane, ConfigOutcome& o, ConfigEvaluation e, Progress& progress,
                             TuneObserver* observer) {
  o.validation = std::move(e.validation);
  o.validate_seconds = e.validate_seconds;
  o.disposition = o.validation.disposition;
  o.stage = Stage::validate;
  o.message = o.validation.message;
  o.device = lane;
  if (opts_.validation_memo && o.disposition == Disposition::passed)
    opts_.validation_memo->keep(validation_key(o, opts_.validation), o.validation);
  {
    std::lock_guard<std::mutex> lock(progress.mu);
    ++progress.validated;
    if (observer) observer->on_phase("validate", progress.validated, progress.total);
  }
  if (o.disposition == Disposition::timeout) hung_ = true;
  if (o.disposition == Disposition::passed && opts_.tune_shapes.empty()) passed_ = true;
  if (o.disposition != Disposition::passed || opts_.tune_shapes.empty()) return;
  o.stage = Stage::time;
  o.time_seconds = e.time_seconds;
  o.measurements = std::move(e.measurements);
  score(o);
  if (o.disposition == Disposition::passed) passed_ = true;
  std::lock_guard<std::mutex> lock(progress.mu);
  ++progress.timed;
  if (observer) {
    observer->on_screened(o);
    observer->on_phase("time", progress.timed, progress.total);
  }
}

// The score of a configuration from its screening measurements: the time on the tuning shape,
// and over several (a class's shapes) their geometric mean, so that every shape weighs the same
// in relative terms, as in the suite's geometric mean (a sum would let the longest decide).
void BackendRunner::score(ConfigOutcome& o) {
  // What the driver made of the code (Vulkan: registers) joins the compiler's report.
  for (const auto& m : o.measurements)
    if (!m.kernel_statistics.empty()) {
      add_driver_statistics(o.build.resources, m.kernel_statistics);
      break;
    }
  std::vector<double> times;
  for (const auto& m : o.measurements) {
    if (m.disposition != Disposition::passed) {
      o.disposition = m.disposition;
      o.message = m.message;
      if (o.disposition == Disposition::timeout) hung_ = true;
      break;
    }
    // On a CPU device the kernel shares the cores with every other process, and contention
    // only ever adds time: the fastest sample ranks best. A GPU ranks by the median.
    times.push_back(device_.is_cpu ? m.stats.min : m.stats.median);
  }
  o.score_ms = times.size() == 1 ? times.front() : geometric_mean(times);
}

namespace {
// One job's evaluations (configuration index, evaluation) in flight from a device's thread to
// its checker thread: put waits until the previous job's were taken, so that a device runs at
// most one job ahead of its checks.
using JobEvaluations = std::vector<std::pair<size_t, PendingEvaluation>>;
class Handoff {
 public:
  void put(JobEvaluations p) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !item_; });
    item_.emplace(std::move(p));
    cv_.notify_all();
  }
  // The next job's evaluations; nullopt once closed and drained.
  std::optional<JobEvaluations> take() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return item_ || closed_; });
    if (!item_) return std::nullopt;
    auto got = std::move(item_);
    item_.reset();
    cv_.notify_all();
    return got;
  }
  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<JobEvaluations> item_;
  bool closed_ = false;
};
}  // namespace

// The configurations of a batch flow from the compile pool to the devices: each device takes the
// next configuration built (in the batch's order among those ready) while the pool builds the
// rest, so that only the first configuration waits for its build.
std::vector<ConfigOutcome> BackendRunner::run(const std::vector<Config>& batch,
                                              TuneObserver* observer) {
  std::vector<ConfigOutcome> out(batch.size());
  std::vector<uint8_t> go(batch.size(), 1);  // still to be evaluated further
  plan_uncompiled(batch, out, go);
  const std::vector<size_t> todo = still_going(go);
  const DeviceLimits limits = device_limits(device_);
  Progress progress;
  progress.total = todo.size();
  std::set<size_t> ready;  // built, checked and not yet taken by a device
  size_t settled = 0;      // configurations whose build was checked
  std::condition_variable cv;
  auto t0 = std::chrono::steady_clock::now();
  // Configurations whose binary and launch plan another one of this batch or of one before has
  // (binary_key): they take its evaluation instead of running.
  std::map<std::string, size_t> first_of_key;
  std::vector<std::pair<size_t, size_t>> twins;             // (configuration, its twin here)
  std::vector<std::pair<size_t, std::string>> known_twins;  // (configuration, key in evaluated_)
  auto built = [&](size_t k) {                              // on a compile thread
    ConfigOutcome& o = out[todo[k]];
    const bool runs = check_built(o, limits);
    const std::string key = runs ? binary_key(o) : std::string();
    o.binary = key;
    std::lock_guard<std::mutex> lock(progress.mu);
    ++settled;
    if (observer) observer->on_phase("compile", settled, todo.size());
    if (runs && !key.empty() && (first_of_key.count(key) || evaluated_.count(key))) {
      if (auto it = first_of_key.find(key); it != first_of_key.end())
        twins.emplace_back(todo[k], it->second);
      else
        known_twins.emplace_back(todo[k], key);
      ++progress.taken;  // nothing for a device to take
      --progress.total;
    } else if (runs) {
      if (!key.empty()) first_of_key.emplace(key, todo[k]);
      ready.insert(todo[k]);
    }
    if (settled == todo.size()) compile_seconds += elapsed(t0);
    cv.notify_all();
  };
  std::vector<size_t> to_build = todo;
  take_prebuilt(out, to_build, built);
  std::vector<size_t> order;  // positions in todo of the configurations to build
  for (size_t k = 0; k < todo.size(); ++k)
    if (std::find(to_build.begin(), to_build.end(), todo[k]) != to_build.end()) order.push_back(k);
  std::thread pool([&] {
    std::vector<size_t> indices;
    for (size_t k : order) indices.push_back(todo[k]);
    compile(out, indices, [&](size_t j) { built(order[j]); });
    build_ahead();
  });
  // Each device has two workers: while one's job holds the device, the other prepares the next
  // configurations and starts their runner. A checker thread per device judges the outputs
  // meanwhile, one configuration behind.
  auto lane_work = [&](size_t lane) {
    Handoff handoff;
    std::thread checker([&] {
      while (auto job = handoff.take())
        for (auto& [i, p] : *job) conclude(lane, out[i], p.finish(), progress, observer);
    });
    size_t in_flight = 0;  // this device's jobs taken and not yet run
    auto worker = [&] {
      for (;;) {
        std::vector<size_t> group;
        {
          // A whole group when another job keeps the device busy meanwhile; what is built when
          // the device would wait.
          std::unique_lock<std::mutex> lock(progress.mu);
          cv.wait(lock, [&] {
            if (ready.empty()) return settled == todo.size();
            return ready.size() >= group_size(todo.size() - progress.taken) || in_flight == 0 ||
                   settled == todo.size();
          });
          const size_t n = group_size(todo.size() - progress.taken);
          while (!ready.empty() && group.size() < n) {
            group.push_back(*ready.begin());
            ready.erase(ready.begin());
          }
          if (group.empty()) return;
          progress.taken += group.size();
          ++in_flight;
        }
        auto started = begin(lane, group, out);
        {
          std::lock_guard<std::mutex> lock(progress.mu);
          --in_flight;
          cv.notify_all();
        }
        if (!started.empty()) handoff.put(std::move(started));
      }
    };
    std::vector<std::thread> more;
    for (int w = 1; w < opts_.workers_per_device; ++w) more.emplace_back(worker);
    worker();
    for (auto& t : more) t.join();
    handoff.close();
    checker.join();
  };
  if (lanes_.size() <= 1) {
    lane_work(0);
  } else {
    std::vector<std::thread> threads;
    for (size_t lane = 0; lane < lanes_.size(); ++lane) threads.emplace_back(lane_work, lane);
    for (auto& t : threads) t.join();
  }
  pool.join();
  for (const auto& [i, twin] : twins) share(out[i], out[twin]);
  for (const auto& [i, key] : known_twins) share(out[i], evaluated_.at(key));
  for (const auto& [key, i] : first_of_key)
    if (out[i].stage == Stage::validate || out[i].stage == Stage::time)
      evaluated_.emplace(key, out[i]);
  for (size_t i : todo) {
    validate_seconds += out[i].validate_seconds;
    time_seconds += out[i].time_seconds;
  }
  return out;
}

// The configurations built ahead (prefetch) among `todo`: their builds are taken, each reported
// built, and they leave `todo`.
void BackendRunner::take_prebuilt(std::vector<ConfigOutcome>& out, std::vector<size_t>& todo,
                                  const std::function<void(size_t)>& built) {
  std::vector<size_t> left;
  for (size_t k = 0; k < todo.size(); ++k) {
    auto it = prebuilt_.find(out[todo[k]].config);
    if (it == prebuilt_.end()) {
      left.push_back(todo[k]);
      continue;
    }
    out[todo[k]].build = std::move(it->second);
    out[todo[k]].compile_seconds = out[todo[k]].build.seconds;
    prebuilt_.erase(it);
    built(k);
  }
  prebuilt_.clear();  // what the search did not take is stale
  todo = std::move(left);
}

// Builds the configurations prefetched for the next batch (those its launch plan does not rule
// out), on the compile pool, after this batch's own builds.
void BackendRunner::build_ahead() {
  std::vector<Config> next = std::move(ahead_);
  ahead_.clear();
  if (next.empty() || opts_.compile_only) return;
  std::vector<ConfigOutcome> out(next.size());
  std::vector<uint8_t> go(next.size(), 1);
  plan_uncompiled(next, out, go);
  const std::vector<size_t> todo = still_going(go);
  compile(out, todo, [](size_t) {});
  for (size_t i : todo)
    if (out[i].build.disposition != Disposition::not_run || !out[i].build.log.empty())
      prebuilt_[out[i].config] = std::move(out[i].build);
}

void ReuseRunner::prefetch(const std::vector<Config>& next) {
  std::vector<Config> misses;
  for (const Config& c : next)
    if (!known_.find(c)) misses.push_back(c);
  if (!misses.empty()) inner_.prefetch(misses);
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
  so.steady_batch = opts.steady_batch;
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
