#pragma once
// Reports: the performance of a workspace along its history, as text, Markdown or JSON.
// One plain record (Report) feeds every renderer.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/store.h"

namespace peak {

inline constexpr int kReportFormatVersion = 1;

struct BenchRow {
  std::string shape;
  std::string disposition;
  double median_ms = 0, spread = 0, gflops = 0;
  double pct_of_peak = 0;
  std::string baseline;  // "cublas" / ""
  double baseline_gflops = 0, pct_of_baseline = 0, baseline_median_ms = 0;
  double speedup_vs_seed = 0, speedup_vs_parent = 0;
  size_t samples = 0;
  std::vector<double> samples_ms, baseline_samples_ms;  // raw samples (device timer)
  double clock_mhz_before = 0, clock_mhz_after = 0;
};

struct StepRow {
  int64_t checkpoint = 0;
  std::optional<int64_t> parent;
  std::string transformation;  // "seed" for the root
  std::string message;
  std::string disposition;
  int attempts = 0;  // LLM calls + evaluations recorded for this step (infrastructure excluded)
  int failed_attempts = 0;
  std::string best_config;
  std::string resources;  // of the best configuration: "96 registers, 16.0 KiB shared, no spills"
  std::vector<BenchRow> bench;
};

struct FailureRow {
  std::string transformation;
  int pass_index = 0;
  int attempt = 0;
  std::string disposition;
  std::string error;  // first line
  // An infrastructure failure (endpoint down, authentication, quota, harness-side timeout):
  // listed apart, never counted against the transformation or the model.
  bool infrastructure = false;
};

struct Report {
  std::string workspace;
  std::string kernel;
  std::string device;
  std::string backend;
  double peak_tflops = 0;
  std::string peak_source;
  double measured_fp32_tflops = 0;
  std::vector<StepRow> steps;
  std::vector<FailureRow> failures;
};

// `chain`: checkpoints from the seed to the tip, each with its evaluation summary JSON.
Report build_report(const std::string& workspace, const std::string& kernel,
                    const std::vector<std::pair<CheckpointRecord, nlohmann::json>>& chain,
                    const std::vector<AttemptRecord>& attempts);

std::string render_text(const Report& r);
std::string render_markdown(const Report& r);
nlohmann::json render_json(const Report& r);

}  // namespace peak
