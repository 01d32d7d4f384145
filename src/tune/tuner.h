#pragma once
// The tuning evaluator: enumerates the valid configurations of the tuning parameters (sampling
// when the space exceeds the budget), compiles them in parallel, validates each, times the
// survivors, and keeps the top-k for the next transformation.
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "tune/measure.h"
#include "validate/validate.h"

namespace peak {

struct SpaceOptions {
  size_t budget = 64;  // at most this many configurations; random sample beyond
  uint64_t seed = 0x7u;
  std::vector<Config> must_include;                       // e.g. the parent's top configurations
  std::map<std::string, std::vector<int64_t>> overrides;  // per-parameter value sets
};

struct Space {
  std::vector<Config> configs;  // valid ones, in evaluation order
  size_t total = 0;             // size of the full cartesian product
  size_t invalid = 0;           // rejected by tuning_valid
  bool sampled = false;
};

// Environment names available to tuning_valid: the tuning values and the device limits
// max_threads, shared_memory, shared_memory_optin, subgroup_size, compute_units.
expr::Env device_env(const DeviceFacts& d);
Result<Space> enumerate_space(const KernelContext& ctx, const DeviceFacts& device,
                              const SpaceOptions& opts);

struct ConfigOutcome {
  Config config;
  BuildResult build;
  Disposition disposition = Disposition::not_run;
  std::string message;
  ValidationOutcome validation;
  std::vector<Measurement> measurements;  // screening on the tuning shape
  double score_ms = 0;                    // median time on the tuning shape (lower is better)
};

struct TuneOptions {
  SpaceOptions space;
  int top_k = 8;
  int jobs = 0;                    // parallel compiles (0 = hardware threads)
  std::vector<Shape> tune_shapes;  // shapes timed to rank configurations
  ValidationOptions validation;
  MeasureOptions screening;  // short timing policy for ranking
  std::filesystem::path cache_dir;
  bool compile_only = false;  // stop after compiling: nothing is run (validator unused)
  // Called (on the tuning thread) as soon as a configuration has been timed on the tuning
  // shapes, so that its measurements can be recorded while the search goes on.
  std::function<void(const ConfigOutcome&)> on_timed;
  // Polled before each configuration's compile, validation and timing; when it returns true the
  // remaining configurations are skipped (left not_run) and tune() returns early.
  std::function<bool()> cancelled;
};

struct TuneResult {
  Disposition disposition = Disposition::not_run;  // passed when at least one config passed
  std::string message;
  std::vector<ConfigOutcome> outcomes;
  std::vector<size_t> ranking;  // indices into outcomes of passing configs, fastest first
  Space space;
  double compile_seconds = 0, validate_seconds = 0, time_seconds = 0;
};

// progress(phase, done, total): phase is "compile", "validate" or "time".
using TuneProgress = std::function<void(const std::string&, size_t, size_t)>;

TuneResult tune(Backend& backend, const DeviceFacts& device, const RunnerOptions& runner,
                Validator& validator, const KernelContext& ctx, const SourceRegions& source,
                const TuneOptions& opts, const TuneProgress& progress = {});

}  // namespace peak
