#pragma once
// Correctness validation (../docs/validation.md): every configuration of a candidate is run in a
// runner process on visible and hidden shapes, with fresh inputs per seed, and its outputs are
// compared in this process against a trusted reference (CPU float64 for known families, the
// vendor library on the GPU, or the seed kernel's outputs).
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "context/bound.h"
#include "context/context.h"
#include "family/family.h"
#include "runner/client.h"
#include "util/disposition.h"

namespace peak {

struct ShapeCheck {
  Shape shape;
  bool hidden = false;
  uint64_t seed = 0;
  int variant = 0;
  Disposition disposition = Disposition::not_run;
  std::string message;
  double max_abs_err = 0;
  double max_rel_err = 0;  // relative to the tolerance scale
  int64_t bad_elements = 0;
  int64_t unwritten = 0;
  int64_t checked_elements = 0;
  // The two checked runs wrote different bytes, all within the tolerance (accepted as rounding):
  // how many elements differ and the largest difference as a fraction of what was allowed.
  int64_t run_to_run_differences = 0;
  double run_to_run_max_fraction = 0;
  double seconds = 0;  // wall time of the runner task
};

struct ValidationOutcome {
  Disposition disposition = Disposition::not_run;
  std::string message;  // first failure, or a summary
  std::vector<ShapeCheck> checks;
  std::string sanitizer;  // compute-sanitizer findings, when it ran
  // The seed the hidden shapes were drawn from.
  uint64_t shape_seed = 0;
  double seconds = 0;
};

// Where reference outputs come from.
struct ReferenceSource {
  // For reference = seed: the seed kernel's artifact and configuration, run in a runner of its
  // own (its outputs are cached per shape/seed/variant under cache_dir).
  BuildResult seed_build;  // seed_build.artifact empty: not built
  Config seed_config;
  SourceRegions seed_source;
  std::filesystem::path cache_dir;
};

struct ValidationOptions {
  int seeds = 2;  // input seeds per shape (variants alternate)
  bool include_hidden = true;
  // Extra hidden shapes drawn for this evaluation (validate/path_shapes.h): one inside each path
  // of the configuration's launch plan, with tails, then draws from the scalars' ranges.
  int sampled_hidden_shapes = 2;
  // The seed they are drawn from; 0: a fresh one (std::random_device).
  uint64_t shape_seed = 0;
  std::vector<Shape> shapes;           // overrides validation+hidden shapes when non-empty
  int64_t full_check_limit = 1 << 20;  // check every element up to this many; sample beyond
  int sampled_elements = 8192;
  double task_timeout_s = 60;   // validate/task_timeout.h derives it
  double reference_task_s = 0;  // the reference's slowest validation task here (timeout charges)
  std::string timeout_basis;    // how task_timeout_s was chosen
  uint64_t base_seed = 0x5eed;
  bool sanitize = false;  // CUDA: compute-sanitizer memcheck+racecheck on one shape
  // Outputs larger than full_check_limit are also compared element by element against the
  // vendor library run on the device (cuBLAS), itself checked against the CPU float64 reference
  // on the sampled elements.
  bool vendor_reference = true;
};

// Runs `runner` under compute-sanitizer (memcheck, then racecheck) on one task; returns the
// disposition (passed, out_of_bounds for memory errors, nondeterministic for races, not_run when
// compute-sanitizer is missing) and its findings.
struct SanitizerOutcome {
  Disposition disposition = Disposition::not_run;
  std::string report;
};
SanitizerOutcome run_sanitizer(const RunnerOptions& runner, const RunnerJob& job, double timeout_s);

// A validation's runner tasks, made before any runs (Validator::prepare): they run alone
// (Validator::validate) or in one job with other tasks of the same configuration (the tuner's
// screening), and Validator::finish judges their results.
struct PreparedValidation {
  // Set when the validation ended before any task (the build failed, no shape, a plan refused).
  std::optional<ValidationOutcome> ended;
  std::vector<RunnerTask> tasks;
  struct Task {  // what each task checks
    size_t shape;
    uint64_t seed;
    int variant;
  };
  std::vector<Task> infos;  // one per task
  std::vector<Shape> shapes;
  std::vector<uint8_t> hidden;  // per shape
  uint64_t shape_seed = 0;
  std::filesystem::path dir;  // where the tasks write their outputs (removed by finish)
  std::chrono::steady_clock::time_point t0;
};

class Validator {
 public:
  Validator(Backend& backend, DeviceFacts device, RunnerOptions runner, ReferenceSource ref);
  // Validates one built configuration (artifact) of a candidate: prepare, run the tasks in one
  // job, finish.
  ValidationOutcome validate(const KernelContext& ctx, const SourceRegions& source,
                             const BuildResult& build, const Config& config,
                             const ValidationOptions& opts);
  PreparedValidation prepare(const KernelContext& ctx, const SourceRegions& source,
                             const BuildResult& build, const Config& config,
                             const ValidationOptions& opts);
  // The outcome of prepared tasks from their results (in task order), or from the error of a
  // job that could not run. Removes the tasks' output folder.
  ValidationOutcome finish(const KernelContext& ctx, PreparedValidation& prepared,
                           const Result<std::vector<TaskResult>>& results,
                           const ValidationOptions& opts);
  // Seconds this validator spent comparing outputs with references (all its checks so far).
  double check_seconds() const { return check_seconds_; }
  // Compares raw output files against the reference for one (shape, seed, variant); used for
  // outputs of timed runs too.
  ShapeCheck compare_outputs(const KernelContext& ctx, const Shape& shape, uint64_t seed,
                             int variant, const std::map<std::string, std::string>& output_files,
                             const ValidationOptions& opts);
  // Judges two checked runs on the same inputs that wrote different bytes: both must agree with
  // the reference, and every element on which they differ must differ by no more than twice the
  // tolerance (both sides round). Within it: passed, the differences recorded (a split-K kernel
  // accumulating with atomics); beyond it: nondeterministic (a race).
  ShapeCheck compare_runs(const KernelContext& ctx, const Shape& shape, uint64_t seed, int variant,
                          const std::map<std::string, std::string>& first,
                          const std::map<std::string, std::string>& second,
                          const ValidationOptions& opts);
  // One timed launch's outputs read back at the runner's positions, against the float64 CPU
  // reference of that launch's inputs (regenerated here from its seed, variant 0). not_run when
  // the family has no CPU reference.
  ShapeCheck check_timed_launch(const KernelContext& ctx, const Shape& shape,
                                const TimedCheck& check);
  // A timed launch's whole output against the vendor library's output on the same inputs.
  ShapeCheck compare_with_baseline(const KernelContext& ctx, const Shape& shape,
                                   const FullCheck& check);

 private:
  struct RefData;
  Result<std::shared_ptr<RefData>> reference(const KernelContext& ctx, const Shape& shape,
                                             uint64_t seed, int variant,
                                             const ValidationOptions& opts);
  // The tolerance (relative) and the absolute floor for one output array of a shape.
  std::pair<double, double> tolerance(const KernelContext& ctx, const BoundShape& bound,
                                      const ArraySpec& output, double ref_rms) const;
  Backend& backend_;
  double check_seconds_ = 0;
  DeviceFacts device_;
  RunnerOptions runner_;
  ReferenceSource ref_;
  std::map<std::string, std::shared_ptr<RefData>> cache_;
  size_t cached_full_ = 0;  // references holding every element (memory bound)
  // The inputs of the timed checks at one shape, as the reference reads them: kept from one
  // check to the next (only the elements read change), and the elements last written.
  struct TimedInputs {
    std::string key;  // context name and shape
    ReferenceInputs inputs;
    ReferenceIndices written;
  };
  TimedInputs timed_inputs_;
  const ReferenceInputs& timed_inputs(const KernelContext& ctx, const BoundShape& bound,
                                      uint64_t seed, const ReferenceIndices& positions);
};

}  // namespace peak
