#pragma once
// The shape-suite benchmark (`peak bench`): one checkpoint's best configuration timed at every
// shape of its context's suite, the vendor library timed in the same run. The engine fills a
// SuiteResult from its measurements and stores its JSON form as an evaluation of kind "suite"
// (docs/store.md); `peak report` reads the latest one of each checkpoint back.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/store.h"

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
  double ratio = 0;  // finish_suite: GFLOP/s over the vendor's, or over the peak; 0: none
  // With a dispatch table (report/dispatch.h): the class the rules give this shape and the
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
  bool small = false;                // the suite's small variant (CPU devices)
  std::string dims_names = "MxNxK";  // the scalars' names, as SuiteRow::dims lists them
  std::vector<SuiteRow> rows;
  double geomean = 0;  // geometric mean of the ratios of the rows that have one (0: none)
  int rated = 0;       // rows with a ratio
};

// Geometric mean; 0 when `v` is empty or holds a value that is not positive.
double geometric_mean(const std::vector<double>& v);
// Sets every row's ratio (a passed row's GFLOP/s over the vendor library's at that shape, or,
// without a vendor library, over the peak) and the geometric mean over the rows that have one.
// Rows that failed, and rows whose vendor timing is missing, have no ratio.
void finish_suite(SuiteResult& s);

// "of cublas" / "of peak": what the ratios compare with.
std::string suite_ratio_basis(const SuiteResult& s);

// JSON form (kind "peak-suite", format kSuiteFormatVersion) and back. from_json accepts what
// to_json wrote; a missing field reads as its default.
nlohmann::json suite_json(const SuiteResult& s);
SuiteResult suite_from_json(const nlohmann::json& j);

// The newest evaluation of `kind` of a checkpoint (one that passed, when `passed_only`) whose
// summary holds `key`: the evaluation's record and that part of its summary.
std::optional<std::pair<EvaluationRecord, nlohmann::json>> latest_summary_part(
    const Store& store, int64_t checkpoint, std::string_view kind, std::string_view key,
    bool passed_only = false);

// The newest suite benchmark recorded for a checkpoint (an evaluation of kind "suite"), if any.
std::optional<SuiteResult> latest_suite(const Store& store, int64_t checkpoint);

// The table (shape name, class, dims, GFLOP/s, vendor GFLOP/s, ratio, disposition) and the
// geometric mean, as text for a terminal and as Markdown.
std::string suite_text(const SuiteResult& s);
std::string suite_markdown(const SuiteResult& s);

}  // namespace peak
