#include "tune/measure.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "family/family.h"
#include "util/fs.h"
#include "validate/task_timeout.h"

namespace peak {

namespace {
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  double pos = q * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  double f = pos - static_cast<double>(lo);
  return sorted[lo] * (1 - f) + sorted[hi] * f;
}
}  // namespace

SampleStats compute_stats(std::vector<double> s) {
  SampleStats st;
  st.n = s.size();
  if (s.empty()) return st;
  std::sort(s.begin(), s.end());
  st.min = s.front();
  st.max = s.back();
  st.median = quantile(s, 0.5);
  st.p25 = quantile(s, 0.25);
  st.p75 = quantile(s, 0.75);
  st.mean = std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(s.size());
  st.rel_spread = st.median > 0 ? (st.p75 - st.p25) / st.median : 0;
  return st;
}

double giga_per_second(double amount, double ms) { return amount / (ms * 1e-3) / 1e9; }

namespace {

// The runner task that times shape `i`; nullopt, with the reason in `m`, where there is none.
std::optional<RunnerTask> timing_task(Backend& backend, const DeviceFacts& device,
                                      const KernelContext& ctx, const SourceRegions& source,
                                      const BuildResult& build, const Config& config,
                                      const std::vector<Shape>& shapes, size_t i,
                                      const MeasureOptions& opts, const std::string& baseline,
                                      const fs::path& dir, Measurement& m) {
  auto plan = backend.plan(ctx, source, shapes[i], config, device, build);
  if (plan.disposition != Disposition::passed) {
    m.disposition = plan.disposition;
    m.message = plan.message;
    return std::nullopt;
  }
  auto bound = bind_shape(ctx, shapes[i]);
  if (!bound) {
    m.disposition = Disposition::not_run;
    m.message = bound.error();
    return std::nullopt;
  }
  RunnerTask t = RunnerTask::for_shape(*bound);
  t.id = fmt::format("t{}", i);
  t.artifact = build.artifact.string();
  t.plan = plan.plan;
  t.seed = opts.seed + i;
  t.variant = 0;
  t.check = false;
  t.repeat = false;
  t.timing = opts.policy;
  t.baseline = baseline;
  // The same traffic copied on this device in the same task: the speed of light % of copy is of.
  if (opts.with_copy && bound->bytes && *bound->bytes > 0)
    t.copy_bytes = static_cast<int64_t>(*bound->bytes);
  t.output_dir = dir.string();
  return t;
}

// The numbers of a passed task with samples: statistics, rates, throttling and whether the device
// timer agrees with the host clock. Returns the statistics of the host times.
SampleStats read_timing(const KernelContext& ctx, const Shape& shape, const TaskResult& r,
                        const MeasureOptions& opts, Measurement& m) {
  m.stats = compute_stats(r.samples_ms);
  auto host = compute_stats(r.host_ms);
  auto flops = shape_flops(ctx, shape);
  double f = flops ? *flops : 0;
  if (m.stats.median > 0) m.gflops = giga_per_second(f, m.stats.median);
  if (!r.baseline_samples_ms.empty()) {
    m.baseline_stats = compute_stats(r.baseline_samples_ms);
    if (m.baseline_stats.median > 0) {
      m.baseline_gflops = giga_per_second(f, m.baseline_stats.median);
      m.pct_of_baseline = 100.0 * m.baseline_stats.median / m.stats.median;
    }
  }
  if (opts.peak_tflops > 0) m.pct_of_peak = 100.0 * m.gflops / (opts.peak_tflops * 1e3);
  auto bytes = shape_bytes(ctx, shape);
  read_memory_rates(bytes ? *bytes : 0, r.copy_samples_ms, r.copy_method, opts.memory_gbs, m);
  if (m.clock_mhz_before > 0 && m.clock_mhz_after > 0 &&
      m.clock_mhz_after < 0.9 * m.clock_mhz_before)
    m.throttled = true;
  // Device timers must agree with the host clock: the host interval contains the device one.
  if (host.median > 0 && m.stats.median > host.median * 1.05 + 0.05) m.host_clock_mismatch = true;
  m.input_ms = r.input_ms;
  m.module_bytes = r.module_bytes;
  m.memory_growth_bytes = r.memory_growth_bytes;
  m.kernel_statistics = r.kernel_statistics;
  m.outlived = r.outlived;
  return host;
}

// The output of every timed launch must be right for that launch's inputs (a kernel must not be
// fast only when unobserved, nor answer from memory). False, with the reason in `m`, when one is
// wrong.
bool check_timed_launches(Validator& validator, const KernelContext& ctx, const Shape& shape,
                          const TaskResult& r, Measurement& m) {
  bool timed_ok = true;
  auto check_start = std::chrono::steady_clock::now();
  for (const TimedCheck& tc : r.timed_checks) {
    ShapeCheck c = validator.check_timed_launch(ctx, shape, tc);
    if (c.disposition == Disposition::not_run) break;  // no CPU reference for this family
    ++m.timed_launches_checked;
    if (c.disposition != Disposition::passed) {
      m.disposition = c.disposition;
      m.message = fmt::format("timed sample {}: {}", tc.sample + 1, c.message);
      timed_ok = false;
      break;
    }
  }
  for (const FullCheck& fc : r.full_checks) {
    if (!timed_ok) break;
    ShapeCheck c = validator.compare_with_baseline(ctx, shape, fc);
    if (c.disposition == Disposition::not_run) continue;
    ++m.full_comparisons;
    if (c.disposition != Disposition::passed) {
      m.disposition = c.disposition;
      m.message = fmt::format("timed sample {}: {}", fc.sample + 1, c.message);
      timed_ok = false;
    }
  }
  m.check_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - check_start).count();
  return timed_ok;
}

// Timing on the same inputs as the checked run (fresh_inputs off): its outputs again. False,
// with the reason in `m`, when they are wrong.
bool check_timed_outputs(Validator& validator, const KernelContext& ctx, const Shape& shape,
                         uint64_t seed, const TaskResult& r, Measurement& m) {
  if (!r.timed_checks.empty() || r.timed_outputs.empty()) return true;
  ValidationOptions vo;
  vo.full_check_limit = 1 << 16;
  vo.sampled_elements = 2048;
  ShapeCheck c = validator.compare_outputs(ctx, shape, seed, 0, r.timed_outputs, vo);
  if (c.disposition != Disposition::passed && c.disposition != Disposition::not_run) {
    m.disposition = c.disposition;
    m.message = "outputs of the timed runs: " + c.message;
    return false;
  }
  return true;
}

// The measurement of shape `i` from its task's result, checked.
void read_result(Validator& validator, const KernelContext& ctx, const Shape& shape, size_t i,
                 const TaskResult& r, const MeasureOptions& opts, Measurement& m) {
  m.disposition = r.disposition;
  m.message = r.message;
  m.samples_ms = r.samples_ms;
  m.host_ms = r.host_ms;
  m.baseline_samples_ms = r.baseline_samples_ms;
  m.clock_mhz_before = r.clock_mhz_before;
  m.clock_mhz_after = r.clock_mhz_after;
  m.seconds = r.seconds;
  if (r.disposition != Disposition::passed) return;
  if (r.samples_ms.empty()) {
    m.disposition = Disposition::not_run;
    m.message = "the runner returned no timing samples";
    return;
  }
  SampleStats host = read_timing(ctx, shape, r, opts, m);
  if (!check_timed_launches(validator, ctx, shape, r, m)) return;
  if (!check_timed_outputs(validator, ctx, shape, opts.seed + i, r, m)) return;
  reject_impossible(host, opts, m);
}

}  // namespace

bool headlines_bytes(const KernelContext& ctx) {
  return !ctx.bytes.empty() && family_of(ctx).headline(ctx) == Headline::bytes;
}

void read_memory_rates(double bytes, const std::vector<double>& copy_samples_ms,
                       const std::string& copy_method, double memory_gbs, Measurement& m) {
  if (!(bytes > 0) || !(m.stats.median > 0)) return;
  m.bytes = bytes;
  m.gbs = giga_per_second(bytes, m.stats.median);
  if (memory_gbs > 0) m.pct_of_bandwidth = 100.0 * m.gbs / memory_gbs;
  // No samples: the runner timed no copy, and there is no number to show.
  if (copy_samples_ms.empty()) return;
  m.copy_samples_ms = copy_samples_ms;
  m.copy_method = copy_method;
  m.copy_stats = compute_stats(copy_samples_ms);
  if (!(m.copy_stats.median > 0)) return;
  m.copy_gbs = giga_per_second(bytes, m.copy_stats.median);
  m.pct_of_copy = 100.0 * m.copy_stats.median / m.stats.median;
}

void reject_impossible(const SampleStats& host, const MeasureOptions& opts, Measurement& m) {
  if (m.host_clock_mismatch) {
    m.disposition = Disposition::faster_than_peak;
    m.message =
        fmt::format("device timer ({:.4f} ms) disagrees with the host clock ({:.4f} ms): rejected",
                    m.stats.median, host.median);
    return;
  }
  // The same 2 % margin for both: the documented numbers are rounded datasheet figures.
  if (opts.peak_tflops > 0 && m.gflops > opts.peak_tflops * 1e3 * 1.02) {
    m.disposition = Disposition::faster_than_peak;
    m.message = fmt::format("{:.0f} GFLOP/s exceeds the device's peak of {:.0f} GFLOP/s: rejected",
                            m.gflops, opts.peak_tflops * 1e3);
    return;
  }
  if (opts.memory_gbs > 0 && m.gbs > opts.memory_gbs * 1.02) {
    m.disposition = Disposition::faster_than_peak;
    m.message = fmt::format(
        "{:.0f} GB/s exceeds the device's documented memory bandwidth of {:.0f} GB/s: rejected",
        m.gbs, opts.memory_gbs);
  }
}

PreparedTiming prepare_timing(Backend& backend, const DeviceFacts& device, const KernelContext& ctx,
                              const SourceRegions& source, const BuildResult& build,
                              const Config& config, const std::vector<Shape>& shapes,
                              const MeasureOptions& opts) {
  PreparedTiming p;
  std::string baseline = opts.with_baseline ? backend.baseline(ctx, device) : "";
  auto dir = make_temp_dir("peak-time-");
  if (dir) p.dir = *dir;
  p.task_of_shape.assign(shapes.size(), SIZE_MAX);
  const bool bytes_headline = headlines_bytes(ctx);
  for (size_t i = 0; i < shapes.size(); ++i) {
    Measurement m;
    m.shape = shapes[i];
    m.config = config;
    m.baseline = baseline;
    m.bytes_headline = bytes_headline;
    p.out.push_back(m);
    if (!dir) {
      p.out.back().disposition = Disposition::crashed;
      p.out.back().message = dir.error();
      continue;
    }
    auto t = timing_task(backend, device, ctx, source, build, config, shapes, i, opts, baseline,
                         *dir, p.out.back());
    if (!t) continue;
    p.task_of_shape[i] = p.tasks.size();
    p.tasks.push_back(*t);
  }
  return p;
}

std::vector<Measurement> finish_timing(Validator& validator, const KernelContext& ctx,
                                       PreparedTiming& p,
                                       const Result<std::vector<TaskResult>>& results,
                                       const MeasureOptions& opts) {
  for (size_t i = 0; i < p.out.size(); ++i) {
    if (p.task_of_shape[i] == SIZE_MAX) continue;
    if (!results) {
      p.out[i].disposition = Disposition::crashed;
      p.out[i].message = results.error();
      continue;
    }
    read_result(validator, ctx, p.out[i].shape, i, (*results)[p.task_of_shape[i]], opts, p.out[i]);
  }
  discard_timing(p);
  return std::move(p.out);
}

void discard_timing(PreparedTiming& p) {
  std::error_code ec;
  if (!p.dir.empty()) fs::remove_all(p.dir, ec);
  p.dir.clear();
}

std::vector<Measurement> measure(Backend& backend, const DeviceFacts& device,
                                 const RunnerOptions& runner, Validator& validator,
                                 const KernelContext& ctx, const SourceRegions& source,
                                 const BuildResult& build, const Config& config,
                                 const std::vector<Shape>& shapes, const MeasureOptions& opts) {
  PreparedTiming p = prepare_timing(backend, device, ctx, source, build, config, shapes, opts);
  if (p.tasks.empty()) return finish_timing(validator, ctx, p, std::vector<TaskResult>{}, opts);
  RunnerJob job = RunnerJob::for_context(ctx);
  job.tasks = p.tasks;
  auto results = run_job_retrying_timeouts(
      job, runner, TaskBudget{opts.task_timeout_s, opts.reference_task_s, opts.timeout_basis});
  return finish_timing(validator, ctx, p, results, opts);
}

}  // namespace peak
