#pragma once
// The tuning evaluator: enumerates the valid configurations of the tuning parameters (sampling
// when the space exceeds the budget), compiles them in parallel, validates each, times the
// survivors, and keeps the top-k for the next transformation.
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "tune/measure.h"
#include "tune/space.h"
#include "validate/validate.h"

namespace peak {

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
