#pragma once
// Timing of validated configurations against the vendor baseline (interleaved, same runner
// process), with statistics computed here from the runner's raw samples.
#include <string>
#include <vector>

#include "backend/backend.h"
#include "validate/validate.h"

namespace peak {

struct SampleStats {
  double median = 0, p25 = 0, p75 = 0, min = 0, max = 0, mean = 0;
  double rel_spread = 0;  // (p75 - p25) / median
  size_t n = 0;
};
SampleStats compute_stats(std::vector<double> samples);

struct Measurement {
  Shape shape;
  Config config;
  Disposition disposition = Disposition::not_run;
  std::string message;
  std::vector<double> samples_ms, host_ms, baseline_samples_ms;
  SampleStats stats, baseline_stats;
  double gflops = 0, baseline_gflops = 0;
  double pct_of_baseline = 0;  // 100 * baseline time / candidate time
  double pct_of_peak = 0;      // of the documented (or measured) peak for the precision
  double clock_mhz_before = 0, clock_mhz_after = 0;
  bool throttled = false;            // clock dropped by more than 10% during sampling
  bool host_clock_mismatch = false;  // device time far below host time / the reverse
  std::string baseline;              // "cublas" / ""
  double seconds = 0;                // wall time of the runner task
  // Fresh inputs for every timed launch (TimingPolicy::fresh_inputs): the checks made of them.
  int timed_launches_checked = 0;  // timed launches whose read-back elements were checked
  int full_comparisons = 0;        // timed launches compared whole with the vendor library
  double input_ms = 0;             // runner time making fresh inputs (outside the timed windows)
  double check_seconds = 0;        // parent time checking them
  int64_t module_bytes = -1;       // device memory the loaded kernels took
  int64_t memory_growth_bytes = -1;
  bool outlived = false;
  // What the driver said of the code of each entry point (TaskResult::kernel_statistics).
  nlohmann::json kernel_statistics = nlohmann::json::object();
};

struct MeasureOptions {
  TimingPolicy policy;
  double task_timeout_s = 120;  // validate/task_timeout.h derives it
  double reference_task_s = 0;  // the reference's slowest task of this kind here
  std::string timeout_basis;
  bool with_baseline = true;
  uint64_t seed = 0x71e;
  double peak_tflops = 0;  // physical peak used for faster_than_peak and % of peak
};

// Times `build` (one configuration) on `shapes`; re-checks the outputs of the timed runs with
// `validator` (sampled); rejects results faster than the peak.
std::vector<Measurement> measure(Backend& backend, const DeviceFacts& device,
                                 const RunnerOptions& runner, Validator& validator,
                                 const KernelContext& ctx, const SourceRegions& source,
                                 const BuildResult& build, const Config& config,
                                 const std::vector<Shape>& shapes, const MeasureOptions& opts);

}  // namespace peak
