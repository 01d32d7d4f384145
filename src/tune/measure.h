#pragma once
// Timing of validated configurations against the vendor baseline (interleaved, same runner
// process), with statistics computed here from the runner's raw samples.
#include <filesystem>
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
// The rate of `amount` (FLOPs, bytes) done in `ms` milliseconds, in billions a second (GFLOP/s,
// GB/s).
double giga_per_second(double amount, double ms);

struct Measurement {
  Shape shape;
  Config config;
  // The selector of the device that timed it when a final timing was spread over several
  // (time_spread in tune/final_timing.h); empty otherwise.
  std::string device;
  Disposition disposition = Disposition::not_run;
  std::string message;
  std::vector<double> samples_ms, host_ms, baseline_samples_ms;
  SampleStats stats, baseline_stats;
  double gflops = 0, baseline_gflops = 0;
  double pct_of_baseline = 0;  // 100 * baseline time / candidate time
  double pct_of_peak = 0;      // of the documented (or measured) peak for the precision
  // Memory-bound measures, where the context gives `bytes` (0 where it does not): the traffic of
  // one launch at this shape, its rate at the median time, and the share of the device's
  // documented memory bandwidth (MeasureOptions::memory_gbs) that rate is.
  double bytes = 0, gbs = 0, pct_of_bandwidth = 0;
  bool bytes_headline = false;  // the context's family headlines GB/s (headlines_bytes)
  // The same-traffic copy timed in the same task (RunnerTask::copy_bytes): its samples and method
  // as the runner returned them (empty: not measured), its rate, and 100 * its median time / the
  // candidate's (the share of this device's attainable speed of light the kernel reaches).
  std::vector<double> copy_samples_ms;
  SampleStats copy_stats;
  std::string copy_method;
  double copy_gbs = 0, pct_of_copy = 0;
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
  // The device's documented memory bandwidth in GB/s (0: unknown): the bytes gate (a rate of the
  // context's `bytes` above it is faster_than_peak) and % of bandwidth.
  double memory_gbs = 0;
  // Ask the runner to time a same-traffic copy beside the candidate (contexts with `bytes`).
  bool with_copy = true;
};

// Whether results of `ctx` are headlined with GB/s: its family headlines bytes and it gives
// `bytes` (a context with neither flops nor bytes keeps the GFLOP/s headline).
bool headlines_bytes(const KernelContext& ctx);

// The memory-bound measures of `m` (bytes, GB/s, % of bandwidth, and the copy's when
// `copy_samples_ms` holds samples) from its median time; `bytes` is the context's at the shape.
void read_memory_rates(double bytes, const std::vector<double>& copy_samples_ms,
                       const std::string& copy_method, double memory_gbs, Measurement& m);
// Rejects a time the device cannot have taken (faster_than_peak, with both numbers in the
// message): one the host clock contradicts, a FLOP/s above opts.peak_tflops or a GB/s above
// opts.memory_gbs (each with a 2 % margin). `host`: the statistics of the host times.
void reject_impossible(const SampleStats& host, const MeasureOptions& opts, Measurement& m);

// The timing tasks of one configuration on `shapes`, made before any runs (prepare_timing): they
// run alone (measure) or in one job with the configuration's validation (the tuner), and
// finish_timing reads their results.
struct PreparedTiming {
  std::vector<Measurement> out;       // one per shape; those without a task already say why
  std::vector<RunnerTask> tasks;      // the shapes' timing tasks
  std::vector<size_t> task_of_shape;  // index into tasks, SIZE_MAX for none
  std::filesystem::path dir;          // where the tasks write (removed by finish_timing)
};
PreparedTiming prepare_timing(Backend& backend, const DeviceFacts& device, const KernelContext& ctx,
                              const SourceRegions& source, const BuildResult& build,
                              const Config& config, const std::vector<Shape>& shapes,
                              const MeasureOptions& opts);
// Removes what prepared tasks wrote, when their results are not read (finish_timing does it
// otherwise).
void discard_timing(PreparedTiming& prepared);
// The measurements from the tasks' results (in task order) or the error of a job that could not
// run: checked (timed launches, outputs) and judged against the device's peaks.
std::vector<Measurement> finish_timing(Validator& validator, const KernelContext& ctx,
                                       PreparedTiming& prepared,
                                       const Result<std::vector<TaskResult>>& results,
                                       const MeasureOptions& opts);

// Times `build` (one configuration) on `shapes`; re-checks the outputs of the timed runs with
// `validator` (sampled); rejects results faster than the peak.
std::vector<Measurement> measure(Backend& backend, const DeviceFacts& device,
                                 const RunnerOptions& runner, Validator& validator,
                                 const KernelContext& ctx, const SourceRegions& source,
                                 const BuildResult& build, const Config& config,
                                 const std::vector<Shape>& shapes, const MeasureOptions& opts);

}  // namespace peak
