#pragma once
// The evaluation summary: what one evaluation of a kernel found (its device, the search, the
// best configuration and its final timing), as the store keeps it (checkpoints.summary_json,
// evaluations.summary_blob; docs/store.md "Results"). Its JSON form is read and written here
// only: from_json checks the format version and reads the summaries of older stores (which lack
// the version and many of the fields); keys not modeled are kept in `extra` and written back, so
// a summary read and written again loses nothing. A field is optional where a summary may lack
// it; to_json writes only what is present.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace peak {

// Version of the summary's JSON form ("format"); summaries of older stores have none.
inline constexpr int kEvalSummaryFormatVersion = 1;

// The final timing at one shape (an element of "bench", or of a suite's "measurements").
struct SummaryBench {
  std::optional<std::string> shape, disposition, message;
  // The device that timed this shape, when the final timing was spread over several.
  std::optional<std::string> device;
  std::optional<double> median_ms, p25_ms, p75_ms, min_ms, spread, gflops, pct_of_peak;
  std::optional<std::vector<double>> samples_ms;
  // The vendor library timed in the same run ("baseline": its name).
  std::optional<std::string> baseline;
  std::optional<double> baseline_median_ms, baseline_spread, baseline_gflops, pct_of_baseline;
  std::optional<std::vector<double>> baseline_samples_ms;
  // The parent's and the seed's median time at this shape over this one (engine/apply.cpp).
  std::optional<double> speedup_vs_seed, speedup_vs_parent;
  std::optional<double> clock_mhz_before, clock_mhz_after;
  std::optional<bool> throttled;
  // The headline of the context's family: "bytes" where results are headlined with GB/s; absent
  // (older stores, matmul) for GFLOP/s.
  std::optional<std::string> headline;
  // Memory-bound measures, where the context gives `bytes` (absent: not measured): the traffic of
  // one launch, its rate at the median time, and its share of the documented memory bandwidth.
  std::optional<double> bytes, gbs, pct_of_bandwidth;
  // The same-traffic copy timed in the same run (absent: the runner timed none): its method,
  // median time and rate, and 100 * its median time / the candidate's.
  std::optional<std::string> copy_method;
  std::optional<double> copy_median_ms, copy_gbs, pct_of_copy;
  std::optional<std::vector<double>> copy_samples_ms;
  nlohmann::json extra = nlohmann::json::object();

  bool passed() const { return disposition.value_or("") == "passed"; }
  bool bytes_headline() const { return headline.value_or("") == "bytes"; }
};

// The headline rate of a timed row in words, its number `width` wide: "1234.5 GFLOP/s", or for a
// bytes headline "812.3 GB/s (81% of copy, 24% of bandwidth)" (each share only when measured).
std::string headline_rate(const SummaryBench& b, int width = 0);

// One of the passing configurations, fastest first ("top").
struct SummaryTop {
  std::optional<nlohmann::json> config;  // parameter -> value
  std::optional<double> score_ms;
  nlohmann::json extra = nlohmann::json::object();
};

// The best configuration ("best") and what its build used.
struct SummaryBest {
  std::optional<nlohmann::json> config;  // parameter -> value
  std::optional<std::string> config_text;
  std::optional<nlohmann::json> resources;  // the compiler's report (backend-specific)
  std::optional<std::string> validation;
  nlohmann::json extra = nlohmann::json::object();
};

// What the search covered ("configs").
struct SummaryConfigs {
  std::optional<int64_t> space, rejected_by_constraint, evaluated, pruned, reused, tuning_run;
  std::optional<bool> sampled;
  std::optional<std::string> strategy, budget, stop;
  std::optional<std::map<std::string, int64_t>> dispositions;  // disposition -> configurations
  nlohmann::json extra = nlohmann::json::object();
};

// How long the phases took, in seconds ("phases").
struct SummaryPhases {
  std::optional<double> compile_s, validate_s, tune_s, bench_s;
  nlohmann::json extra = nlohmann::json::object();
};

// The device as the summary records it ("device").
struct SummaryDevice {
  std::optional<std::string> name, backend, driver, api, arch;
  std::optional<bool> is_cpu;
  std::optional<double> measured_fp32_tflops;
  nlohmann::json extra = nlohmann::json::object();
};

// The peak the percentages are of ("peak").
struct SummaryPeak {
  std::optional<double> tflops, documented_fp32_tflops;
  std::optional<double> documented_memory_gbs;  // the bytes gate and % of bandwidth
  std::optional<std::string> source;
  nlohmann::json extra = nlohmann::json::object();
};

// The longest task of each kind that passed, in seconds ("task_seconds"): what later
// evaluations' deadlines are based on.
struct SummaryTaskSeconds {
  std::optional<double> validate, screen, bench;
  nlohmann::json extra = nlohmann::json::object();
};

// What a sanitizer reported, and for which configuration ("sanitizer").
struct SummarySanitizer {
  std::optional<std::string> config, report;
  nlohmann::json extra = nlohmann::json::object();
};

struct EvalSummary {
  std::optional<int> format;
  std::optional<std::string> kind;  // "suite", "dispatch"; none for an evaluation of the checkpoint
  std::optional<std::string> peak_version, disposition, message;
  std::optional<SummaryDevice> device;
  std::optional<SummaryPeak> peak;
  std::optional<std::map<std::string, std::string>> toolchain;
  std::optional<SummaryBest> best;
  std::optional<std::vector<SummaryTop>> top;
  std::optional<SummaryConfigs> configs;
  std::optional<SummaryPhases> phases;
  std::optional<std::vector<SummaryBench>> bench;
  std::optional<uint64_t> validation_seed;
  std::optional<SummaryTaskSeconds> task_seconds;
  std::optional<SummarySanitizer> sanitizer;
  std::optional<bool> compile_only;
  std::optional<int64_t> attempts;
  // What made the checkpoint: {"name", "version"} of a transformation, or {"name": "manual",
  // "message"} of a commit.
  std::optional<nlohmann::json> transformation;
  // The JSON forms of a suite benchmark ("suite", results/suite.h) and of a dispatch table
  // ("dispatch" of a dispatch evaluation, results/dispatch.h; a suite's "dispatch" is the id of
  // the table's evaluation and stays in `extra`).
  std::optional<nlohmann::json> suite, dispatch_table;
  nlohmann::json extra = nlohmann::json::object();  // every key not modeled above

  // Whether it holds a final timing (a non-empty "bench").
  bool timed() const { return bench && !bench->empty(); }
  // The final timing at the first bench shape (nullptr: none).
  const SummaryBench* first_bench() const { return timed() ? &bench->front() : nullptr; }
  // Its disposition; a summary that lacks it reads as passed when timed, else not_run (the
  // summaries of older stores).
  std::string disposition_or_default() const;
  bool empty() const;  // nothing recorded
};

// The summary in `j`; an error when `j` is not an object or its format is newer than this
// peak reads. A summary without a format (an older store) reads as it is.
Result<EvalSummary> summary_from_json(const nlohmann::json& j);
// The summary in `j`, or an empty one when it cannot be read (readers that show what they can).
EvalSummary summary_or_empty(const nlohmann::json& j);
// The summary in `text` (JSON), or an empty one.
EvalSummary parse_summary(const std::string& text);
// The device as a measurement row records it (MeasurementRecord::device_json), read as the
// summary's.
SummaryDevice device_from_json(const nlohmann::json& j);
nlohmann::json to_json(const EvalSummary& s);
// The passing configurations ("top") as JSON, [] when there are none: what the store keeps beside
// a checkpoint (CheckpointRecord::top_configs_json).
nlohmann::json top_json(const EvalSummary& s);
nlohmann::json to_json(const SummaryBench& b);
// The parts a writer fills in one by one: a bench row from its JSON form (a final-timing
// measurement as the pipeline writes it; its unmodeled keys kept), and the device's JSON form (each
// lane of a search records it with its selector).
SummaryBench bench_from_json(const nlohmann::json& j);
nlohmann::json to_json(const SummaryDevice& d);

}  // namespace peak
