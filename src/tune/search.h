#pragma once
// The search loop: a strategy proposes configurations in batches, a runner evaluates each batch
// (compile in parallel, prune, validate, time; or replay recorded outcomes), observers see every
// outcome, and the loop enforces the budget. The configurations the search starts from (the
// defaults, the parent's best) are evaluated first, whatever the strategy.
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "tune/measure.h"
#include "tune/space.h"
#include "tune/strategy.h"
#include "validate/validate.h"

namespace peak {

// Where the evaluation of a configuration ended. A configuration ruled out before timing is
// invalid_config at stage validity (the space's expression), launch (the launch plan of the
// tuning shape) or resources (the compiler's resource report against the device).
enum class Stage { validity, launch, compile, resources, validate, time };
std::string_view to_string(Stage s);
std::optional<Stage> stage_from_string(std::string_view s);

struct ConfigOutcome {
  Config config;
  BuildResult build;
  Disposition disposition = Disposition::not_run;
  Stage stage = Stage::compile;
  std::string message;  // why it failed or was pruned
  ValidationOutcome validation;
  std::vector<Measurement> measurements;  // screening on the tuning shape
  double score_ms = 0;  // time on the tuning shape (lower is better): the median of the
                        // samples, their minimum on a CPU device (tune/tuner.cpp)
  nlohmann::json launch = nlohmann::json::object();  // the launch plan of the tuning shape
  // What its build and launch plan hash to (tune/tuner.h, BackendRunner::binary_key), taken once
  // it is built; empty before, or when a module cannot be read.
  std::string binary;
  double compile_seconds = 0, validate_seconds = 0, time_seconds = 0;
  // The device that validated and timed it: an index into the runner's devices (tune/tuner.h,
  // DeviceLane), 0 with one device. Its measurements were taken there.
  size_t device = 0;
  bool pruned() const {
    return disposition == Disposition::invalid_config &&
           (stage == Stage::validity || stage == Stage::launch || stage == Stage::resources);
  }
};

class TuneObserver;

// Evaluates batches of configurations: a real runner (tune/tuner.h: the backend, the validator
// and the timing module) or a simulation (tune/simulation.h: outcomes replayed from a cache).
class TuningRunner {
 public:
  virtual ~TuningRunner() = default;
  // One outcome per configuration, in order. `observer` (may be null) hears of progress.
  virtual std::vector<ConfigOutcome> run(const std::vector<Config>& batch,
                                         TuneObserver* observer) = 0;
  // Seconds spent so far: the wall clock for a real runner, the simulated clock for a simulation.
  virtual double elapsed_seconds() const = 0;
  // The configurations of the next batch, known before this one runs (a strategy whose proposals
  // do not depend on what it is told): a runner may build them while it evaluates this one.
  virtual void prefetch(const std::vector<Config>& next) { (void)next; }
};

struct SearchResult;

// Sees an evaluation as it goes: progress lines, the store recorder (tune/record.h), benchmarks.
// The events, in order: on_start; per batch, on_phase as it goes (with on_screened for each
// configuration timed) and on_batch after it; once the search has ended, on_evaluated for every
// configuration it evaluated (none when it was cancelled), then on_finish; last, on_final for
// each shape of the final timing (tune/final_timing.h), when there is one.
class TuneObserver {
 public:
  virtual ~TuneObserver() = default;
  virtual void on_start(const TuningSpace& space, const std::string& strategy, size_t limit) {
    (void)space, (void)strategy, (void)limit;
  }
  // Progress inside a batch: phase "compile", "validate" or "time".
  virtual void on_phase(std::string_view phase, size_t done, size_t total) {
    (void)phase, (void)done, (void)total;
  }
  // A configuration just timed on the tuning shapes (its screening measurements), on the thread
  // of the device that timed it, one call at a time: recorded while the search goes on.
  virtual void on_screened(const ConfigOutcome& outcome) { (void)outcome; }
  // After each batch: the outcomes (with their indices into the space) and the runner's clock.
  virtual void on_batch(const std::vector<size_t>& indices,
                        const std::vector<ConfigOutcome>& outcomes, double elapsed_seconds) {
    (void)indices, (void)outcomes, (void)elapsed_seconds;
  }
  // True to end the search after the current batch (a benchmark that reached its target).
  virtual bool done() const { return false; }
  // Once the search has ended, unless it was cancelled: each configuration it evaluated, in
  // evaluation order, with its build and validation.
  virtual void on_evaluated(const ConfigOutcome& outcome) { (void)outcome; }
  virtual void on_finish(const SearchResult& result) { (void)result; }
  // One shape of the final timing: the best configuration's measurement, with the baseline's
  // samples when it ran.
  virtual void on_final(const Measurement& m) { (void)m; }
};

// The message of a configuration left unevaluated because the search was cancelled; such outcomes
// are dropped from the search (not told to the strategy, not recorded).
inline constexpr std::string_view kCancelledOutcome = "cancelled before it was evaluated";
// The message of a configuration left unevaluated because another one of the search was charged
// `timeout` (tune/tuner.h); dropped from the search as cancelled ones are. A search ends after a
// batch with a `timeout` outcome (stop "timeout").
inline constexpr std::string_view kNotRunAfterTimeout =
    "not run: another configuration of this kernel hung (timeout)";

// The message of a configuration left unevaluated because the search's time budget had passed
// while its batch went on (tune/tuner.h: once a configuration passed); dropped from the search
// as cancelled ones are, and the search ends there (stop "time budget").
inline constexpr std::string_view kNotRunAfterTimeBudget =
    "not run: the search's time budget had passed";

struct SearchOptions {
  Budget budget;
  uint64_t seed = 0x7;
  size_t batch = 8;  // configurations evaluated together (compiled in parallel)
  // The batch of a strategy that is not adaptive (exhaustive, random; 0 = `batch`): its proposals
  // do not wait for outcomes, and every batch's end leaves devices idle while its last
  // configurations are judged. The time budget is checked between batches, and a runner may end
  // a batch early once it has passed (kNotRunAfterTimeBudget).
  size_t steady_batch = 0;
  std::vector<Config> start;  // evaluated first (after the defaults), e.g. the parent's best
  // Polled before each batch and after it: when it returns true the search ends ("cancelled"),
  // keeping the outcomes of the batch under way that were evaluated before it was cancelled.
  std::function<bool()> cancelled;
};

struct SearchResult {
  std::string strategy;
  size_t limit = 0;                     // evaluations the budget allowed
  std::vector<size_t> indices;          // into the space, in evaluation order
  std::vector<ConfigOutcome> outcomes;  // same order
  std::string stop;    // "space exhausted", "evaluation budget", "time budget", "strategy done",
                       // "target reached", "cancelled", "timeout"
  double seconds = 0;  // the runner's clock at the end
  // Indices into outcomes of the passing configurations, fastest first.
  std::vector<size_t> ranking() const;
};

SearchResult search(const TuningSpace& space, Strategy& strategy, TuningRunner& runner,
                    const SearchOptions& opts, const std::vector<TuneObserver*>& observers = {});

}  // namespace peak
