#pragma once
// The tuning evaluator: builds the space of the tuning parameters (pruning what the validity
// expression rules out), searches it with a strategy (tune/strategy.h) in batches through the
// real runner below (launch plan, parallel compile, resource pruning, validation, timing), and
// keeps the top-k for the next transformation.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "plan/plan_language.h"
#include "tune/cache.h"
#include "tune/measure.h"
#include "tune/search.h"
#include "tune/space.h"
#include "tune/strategy.h"
#include "validate/validate.h"

namespace peak {

struct DeviceLimits;  // tune/prune.h

// The passed validations of the searches of one process that validate the same candidate on the
// same shapes (`peak tune --classes`: one search per shape class, every one on the context's
// validation shapes and the hidden shapes of one seed): a configuration whose binary and launch
// plan an earlier search validated is screened on its own search's shapes without being
// validated again. Shared by those searches' TuneOptions; safe across their threads.
class ValidationMemo {
 public:
  std::optional<ValidationOutcome> find(const std::string& key) const;
  void keep(const std::string& key, const ValidationOutcome& passed);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, ValidationOutcome> passed_;
};

struct TuneOptions {
  std::string strategy = std::string(kDefaultStrategy);
  Budget budget{64, 0, 0};
  uint64_t seed = 0x7;
  size_t batch = 8;           // configurations per batch (compiled in parallel)
  size_t steady_batch = 0;    // per batch for a strategy that is not adaptive (SearchOptions)
  std::vector<Config> start;  // evaluated first after the defaults: e.g. the parent's top-k
  std::map<std::string, std::vector<int64_t>> overrides;  // per-parameter value sets
  int top_k = 8;
  int jobs = 0;  // parallel compiles (0 = hardware threads)
  // Configurations in evaluation at once per device: with more than one, the others' runners
  // start while one's job holds the device (RunnerOptions::start_before_lock).
  int workers_per_device = 2;
  // Configurations whose validation and screening share one runner job, at most: one runner
  // start (the driver's start-up) for several configurations. A worker takes up to this many
  // (fewer toward the end of a batch, so that the devices end it together): a whole group while
  // another job keeps its device busy, what is built when the device would wait.
  int configs_per_job = 4;
  std::vector<Shape> tune_shapes;  // shapes timed to rank configurations
  ValidationOptions validation;
  MeasureOptions screening;  // short timing policy for ranking
  std::filesystem::path cache_dir;
  bool compile_only = false;  // stop after compiling: nothing is run (validator unused)
  // compile_only: the shapes a run validates and times, whose launch plans are checked against
  // each build and the device facts as a run would check them (the tuning shape's always is).
  std::vector<Shape> plan_shapes;
  // Outcomes measured before for this very source, tuning shape and device (record.h,
  // recorded_outcomes): configurations found there are not run again.
  const TuningCache* reuse = nullptr;
  // Validations of earlier searches to take instead of validating again (ValidationMemo); used
  // only when the hidden shapes come from a fixed seed (validation.shape_seed), and never for the
  // configuration the sanitizer checks.
  std::shared_ptr<ValidationMemo> validation_memo;
  // Polled before each configuration's compile, validation and timing and before each batch;
  // when it returns true the remaining configurations are skipped (left not_run) and the search
  // ends ("cancelled").
  std::function<bool()> cancelled;
};

struct TuneResult {
  Disposition disposition = Disposition::not_run;  // passed when at least one config passed
  std::string message;
  std::vector<ConfigOutcome> outcomes;  // in evaluation order
  std::vector<size_t> ranking;          // indices into outcomes of passing configs, fastest first
  struct {
    size_t total = 0;    // the whole cartesian product
    size_t invalid = 0;  // ruled out by tuning_valid
    size_t valid = 0;
    bool sampled = false;  // not every valid configuration was evaluated
  } space;
  std::string strategy;
  size_t limit = 0;   // evaluations the budget allowed
  std::string stop;   // why the search ended
  size_t reused = 0;  // outcomes replayed from opts.reuse
  double compile_seconds = 0, validate_seconds = 0, time_seconds = 0;
};

// One device that validates and times configurations: its facts, the runner options that reach
// it (its selector and its lock) and a validator of its own. Several lanes spread the search over
// the GPUs of one host, all of one model (engine/devices.h): the compiles stay one shared pool,
// and the device facts of the first lane decide pruning.
struct DeviceLane {
  const DeviceFacts* device = nullptr;
  const RunnerOptions* runner = nullptr;
  Validator* validator = nullptr;
};

// What a device made of one built configuration: its validation and, once that passed, its
// screening on the tuning shapes; the seconds until the validation's verdict (the runner job
// included) and those reading the screening after it.
struct ConfigEvaluation {
  ValidationOutcome validation;
  std::vector<Measurement> measurements;
  double validate_seconds = 0, time_seconds = 0;
};
// A built configuration going into a runner job, with the validation options it runs under
// (the sanitizer checks only the first configuration evaluated).
struct ConfigJob {
  const ConfigOutcome* outcome = nullptr;
  ValidationOptions validation;
  // The passed validation an earlier search made of the same binary on the same shapes
  // (TuneOptions::validation_memo): the job screens the configuration without validating it.
  std::optional<ValidationOutcome> validated;
};
// An evaluation whose runner job has run: `finish` judges its outputs (on another thread, while
// the device runs the next job); `hung` when a task of the job was charged `timeout`.
struct PendingEvaluation {
  std::function<ConfigEvaluation()> finish;
  bool hung = false;
  // Nothing of it ran: its runner was abandoned (RunnerOptions::abandon), or a configuration
  // before it in the same job hung and the tasks after that were not run.
  bool abandoned = false;
};

// The real runner: per batch, the launch plan of the tuning shape (a failed requirement prunes),
// parallel compiles, the backend's resource check and the pruning rules (tune/prune.h), then the
// validation and screening of the survivors, those of up to TuneOptions::configs_per_job
// configurations in one runner job (each configuration judged on its own tasks alone). The
// configurations flow from the compile pool to the devices: each device takes the next ones built
// while the pool builds the rest (workers_per_device threads per device). Once a configuration is
// charged `timeout` (a task hung twice), the configurations not yet evaluated are not run
// (kNotRunAfterTimeout): they share the kernel's code, and each would hang as long. Once the
// search's time budget has passed and a configuration passed, those not yet begun are not run
// either (kNotRunAfterTimeBudget): a batch of slow evaluations does not outlast the budget.
class BackendRunner : public TuningRunner {
 public:
  BackendRunner(Backend& backend, const DeviceFacts& device, const RunnerOptions& runner,
                Validator& validator, const KernelContext& ctx, const SourceRegions& source,
                const TuneOptions& opts);
  BackendRunner(Backend& backend, std::vector<DeviceLane> lanes, const KernelContext& ctx,
                const SourceRegions& source, const TuneOptions& opts);
  std::vector<ConfigOutcome> run(const std::vector<Config>& batch, TuneObserver* observer) override;
  double elapsed_seconds() const override;
  // Builds `next` once the compiles of the batch run next are done, while the devices evaluate it.
  void prefetch(const std::vector<Config>& next) override { ahead_ = next; }
  // Summed over batches: the compiles' wall time, and the configurations' validate and time
  // seconds (ConfigOutcome; with several devices they add up to more than the wall time).
  double compile_seconds = 0, validate_seconds = 0, time_seconds = 0;

 protected:
  // Validation and screening of built configurations on device `lane`, one evaluation per
  // configuration in `group`'s order: their one runner job, run on that device's thread, and the
  // judging of each one's outputs (`finish`), run on the device's checker thread. Tests replace
  // it.
  virtual std::vector<PendingEvaluation> begin_on(size_t lane, const std::vector<ConfigJob>& group,
                                                  const MeasureOptions& mo);

 private:
  struct Progress {  // shared by the devices' threads, under `mu`
    std::mutex mu;
    size_t validated = 0, timed = 0, total = 0;
    size_t taken = 0;  // configurations a device took
  };
  bool stopped() const;  // opts.cancelled says so
  static void cancel(ConfigOutcome& o);
  // Ends the evaluation of `o` before it runs when the search was cancelled, a configuration
  // hung, or the time budget (TuneOptions::budget.seconds) has passed since a configuration
  // passed; true when it did.
  bool skipped(ConfigOutcome& o) const;
  bool past_time_budget() const;
  // The steps of run(); `go` marks the configurations still to be evaluated further.
  void plan_uncompiled(const std::vector<Config>& batch, std::vector<ConfigOutcome>& out,
                       std::vector<uint8_t>& go) const;
  void compile(std::vector<ConfigOutcome>& out, const std::vector<size_t>& todo,
               const std::function<void(size_t)>& built);
  // The builds of the configurations prefetched, kept for the batch that evaluates them.
  void build_ahead();
  void take_prebuilt(std::vector<ConfigOutcome>& out, std::vector<size_t>& todo,
                     const std::function<void(size_t)>& built);
  bool check_built(ConfigOutcome& o, const DeviceLimits& limits);
  void check_plans(ConfigOutcome& o);
  // The evaluations of the configurations `indices` that run, with their indices.
  std::vector<std::pair<size_t, PendingEvaluation>> begin(size_t lane,
                                                          const std::vector<size_t>& indices,
                                                          std::vector<ConfigOutcome>& out);
  // How many configurations a worker takes now: up to configs_per_job, and an even share of
  // those left in the batch among the workers of every device.
  size_t group_size(size_t left) const;
  void conclude(size_t lane, ConfigOutcome& o, ConfigEvaluation e, Progress& progress,
                TuneObserver* observer);
  // What makes two built configurations one evaluation: the bytes of every module they load and
  // the tuning parameters the launch plan may read (plan_words_), with their values. Empty when a
  // module cannot be read (never shared).
  std::string binary_key(const ConfigOutcome& o) const;
  // What makes the validation of a built configuration the same in another search: its binary
  // (ConfigOutcome::binary, the binary_key taken when it was built) and the validation options
  // that choose the shapes and inputs. Empty when the hidden shapes are drawn afresh (no
  // shape_seed) or the binary could not be read.
  std::string validation_key(const ConfigOutcome& o, const ValidationOptions& vo) const;
  // `o` takes the evaluation of `from`, whose key it shares, instead of running its own.
  static void share(ConfigOutcome& o, const ConfigOutcome& from);
  void score(ConfigOutcome& o);
  Backend& backend_;
  std::vector<DeviceLane> lanes_;
  const DeviceFacts& device_;  // the first lane's
  const KernelContext& ctx_;
  const SourceRegions& source_;
  const TuneOptions& opts_;
  std::string full_source_;
  std::optional<ParsedPlan> parsed_plan_;  // the host region; nullopt when it does not parse
  // Every word of the host region and of the macros region (whose macros the plan may read): a
  // tuning parameter that is none of them cannot change a launch.
  std::set<std::string> plan_words_;
  std::atomic<bool> sanitized_{false};
  std::vector<Config> ahead_;               // prefetched: to build after this batch's compiles
  std::map<Config, BuildResult> prebuilt_;  // built ahead, until their batch takes them
  std::map<std::string, ConfigOutcome> evaluated_;  // by binary_key, from the batches before
  std::atomic<bool> hung_{false};                   // a configuration was charged `timeout`
  std::atomic<bool> passed_{false};                 // a configuration passed
  std::chrono::steady_clock::time_point t0_;
};

// Replays the outcomes a cache holds and runs the other configurations with `inner`: a search
// interrupted earlier continues without measuring again what it had measured.
class ReuseRunner : public TuningRunner {
 public:
  ReuseRunner(TuningRunner& inner, const TuningCache& known) : inner_(inner), known_(known) {}
  std::vector<ConfigOutcome> run(const std::vector<Config>& batch, TuneObserver* observer) override;
  double elapsed_seconds() const override { return inner_.elapsed_seconds(); }
  void prefetch(const std::vector<Config>& next) override;
  size_t reused = 0;

 private:
  TuningRunner& inner_;
  const TuningCache& known_;
};

TuneResult tune(Backend& backend, const DeviceFacts& device, const RunnerOptions& runner,
                Validator& validator, const KernelContext& ctx, const SourceRegions& source,
                const TuneOptions& opts, const std::vector<TuneObserver*>& observers = {});
// The same search spread over several devices of one model (DeviceLane; at least one). Each
// outcome names the device that validated and timed it (ConfigOutcome::device).
TuneResult tune(Backend& backend, const std::vector<DeviceLane>& lanes, const KernelContext& ctx,
                const SourceRegions& source, const TuneOptions& opts,
                const std::vector<TuneObserver*>& observers = {});

// A status line per batch and phase: "tuning (auto, 16/65 evaluated): compile 3/8", with
// ", 2 devices" after "evaluated" when several devices share the search.
class StatusObserver : public TuneObserver {
 public:
  // `devices`: how many devices validate and time (said in the line when more than one).
  explicit StatusObserver(std::function<void(const std::string&)> sink, size_t devices = 1)
      : sink_(std::move(sink)), devices_(devices) {}
  // Where the search's plan is said once before it starts (strategy, evaluations of the space,
  // the time bound `seconds`, 0 = none); a line that stays, unlike the status lines.
  void announce_plan(std::function<void(const std::string&)> sink, double seconds) {
    plan_sink_ = std::move(sink);
    seconds_ = seconds;
  }
  void on_start(const TuningSpace& space, const std::string& strategy, size_t limit) override;
  void on_phase(std::string_view phase, size_t done, size_t total) override;
  void on_batch(const std::vector<size_t>& indices, const std::vector<ConfigOutcome>& outcomes,
                double elapsed_seconds) override;

 private:
  std::function<void(const std::string&)> sink_, plan_sink_;
  size_t devices_ = 1;
  double seconds_ = 0;
  std::string strategy_;
  size_t limit_ = 0, evaluated_ = 0;
};

}  // namespace peak
