#pragma once
// The shape-suite benchmark's result (`peak bench`): one checkpoint's best configuration timed at
// every shape of its context's suite, the vendor library timed in the same run. The engine fills
// a SuiteResult from its measurements and stores its JSON form in the summary of an evaluation of
// kind "suite" (docs/store.md); report/suite.h reads the latest one back and renders it.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "results/result.h"

namespace peak {

// The evaluation kind of a suite benchmark; such an evaluation is never a checkpoint's result.
inline constexpr const char* kSuiteEvaluationKind = kSuiteKind;
// Version of the suite's JSON form (in the evaluation summary and the report).
inline constexpr int kSuiteFormatVersion = 1;

// One shape of the suite.
struct SuiteRow {
  std::string name;   // "square-2048"
  std::string cls;    // "square", "irregular", "large-k", "small-k", "small-m", "wide"
  std::string dims;   // "2048x2048x2048": the scalars in declared order
  std::string shape;  // "K=2048 M=2048 N=2048"
  std::string disposition = "not_run";  // passed, or why it was not timed
  std::string message;
  double gflops = 0, baseline_gflops = 0, pct_of_peak = 0;
  double median_ms = 0, spread = 0, baseline_median_ms = 0;
  std::vector<double> samples_ms, baseline_samples_ms;  // raw samples (device timer)
  // Memory-bound measures (SuiteResult::bytes_headline; 0 where not measured): GB/s of the
  // context's bytes, the vendor library's at the same bytes, the shares of the documented
  // bandwidth and of the same-run copy (100 * copy time / candidate time).
  double gbs = 0, baseline_gbs = 0, pct_of_bandwidth = 0, pct_of_copy = 0;
  double ratio = 0;  // finish_suite: the rate over the vendor's, the peak's or the copy's; 0: none
  // With a dispatch table (results/dispatch.h): the class the rules give this shape and the
  // configuration it ran with; empty otherwise (every row ran SuiteResult::config).
  std::string dispatched_class;
  std::string config;
};

struct SuiteResult {
  int64_t checkpoint = 0;
  int64_t evaluation = 0;  // its row in the store's evaluations (0: not stored)
  std::string created_at;
  std::string device;
  std::string config;  // the configuration timed ("BLOCK_X=16 BLOCK_Y=16")
  // The dispatch table's evaluation whose per-class configurations the rows ran (0: none, every
  // row ran `config`), and why a recorded table was not used ("" when it was, or there is none).
  int64_t dispatch = 0;
  std::string dispatch_note;
  bool default_config = false;  // the checkpoint has no tuned result: its default values
  std::string baseline;  // the vendor library ("cublas", "hipblas"); "": ratios are of the peak
  double peak_tflops = 0;
  std::string peak_source;
  // The family headlines GB/s (results/summary.h SummaryBench::headline): rows are rated by GB/s,
  // without a vendor library of the copy (else of the documented bandwidth, memory_gbs).
  bool bytes_headline = false;
  double memory_gbs = 0;
  bool small = false;                // the suite's small variant (CPU devices)
  std::string dims_names = "MxNxK";  // the scalars' names, as SuiteRow::dims lists them
  std::vector<SuiteRow> rows;
  double geomean = 0;  // geometric mean of the ratios of the rows that have one (0: none)
  int rated = 0;       // rows with a ratio
  // The suite's shapes: rows.size() once every shape is timed; more while the benchmark runs, and
  // in what a benchmark that was cut left (`peak bench -o` writes the result after every shape).
  int shapes = 0;

  bool partial() const { return static_cast<int>(rows.size()) < shapes; }
};

// Called with the result so far (finish_suite applied) after each shape of a suite is timed.
using SuiteProgress = std::function<void(const SuiteResult&)>;

// Geometric mean; 0 when `v` is empty or holds a value that is not positive.
double geometric_mean(const std::vector<double>& v);
// Sets every row's ratio (a passed row's GFLOP/s over the vendor library's at that shape, or,
// without a vendor library, over the peak; for a bytes headline GB/s over the vendor's, else
// % of copy / 100, else GB/s over the documented bandwidth) and the geometric mean over the rows
// that have one. Rows that failed, and rows whose vendor timing is missing, have no ratio.
void finish_suite(SuiteResult& s);

// "of cublas" / "of peak" / "of copy" / "of bandwidth": what the ratios compare with.
std::string suite_ratio_basis(const SuiteResult& s);

// JSON form (kind "peak-suite", format kSuiteFormatVersion) and back: "shapes", and "partial":
// true while rows are missing. from_json accepts what to_json wrote; a missing field reads as its
// default ("shapes": the rows').
nlohmann::json suite_json(const SuiteResult& s);
SuiteResult suite_from_json(const nlohmann::json& j);

}  // namespace peak
