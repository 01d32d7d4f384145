#pragma once
// What building a report reads from a store: its rows read once, the rows of one evaluation, and
// the rows of the report made from them. Only the report's builder (build.cpp) uses these.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/report.h"
#include "store/store.h"
#include "util/result.h"

namespace peak::report_build {

// A JSON object from text; an empty object for anything else.
nlohmann::json parse_object(const std::string& text);
double finite_or_zero(double v);
std::string first_line(const std::string& s, size_t max = 200);
// The first lines of a message, for attempt tables.
std::string first_lines(const std::string& s, size_t lines = 6, size_t max = 600);
// "BLOCK_X=16 BLOCK_Y=8" from a configuration object (keys in order).
std::string config_words(const nlohmann::json& c);
std::string config_words(const std::string& config_json);
double percentile(std::vector<double> v, double q);
std::vector<double> samples_of(const std::string& samples_json);
double sum_seconds(const std::vector<double>& ms);
// Compiler resources of a build, in words (resources_text).
std::string describe_resources(const nlohmann::json& r);

// Everything read from the store once.
struct Rows {
  std::vector<CheckpointRecord> checkpoints;
  std::vector<AttemptRecord> attempts;
  std::vector<BuildRecord> builds;
  std::vector<ValidationRecord> validations;
  std::vector<MeasurementRecord> measurements;
  std::vector<WorkflowRecord> workflows;
};
Result<Rows> read_rows(const Store& store);

// The rows of one evaluation (a step's search and final timing).
struct EvalRows {
  std::vector<const BuildRecord*> builds;
  std::vector<const ValidationRecord*> validations;
  std::vector<const MeasurementRecord*> screening, final_timing;
};
// The rows of the attempts attempt_ids or of the checkpoint (builds without an attempt: by
// source_hash, when no attempt is given).
EvalRows eval_rows(const Rows& rows, const std::set<int64_t>& attempt_ids, int64_t checkpoint,
                   const std::string& source_hash);

// Every configuration of an evaluation, with the top and best ones of its summary marked.
std::vector<ConfigRow> config_rows(const EvalRows& e, const EvalSummary& summary);

// A bench shape from an evaluation summary's "bench" entry.
BenchRow bench_from_summary(const SummaryBench& m);
// The bench shapes from the final timing rows, where no summary holds the numbers (its blob is
// missing): the newest set. Fills the summary's "device" and "best" when it has none.
std::vector<BenchRow> bench_from_measurements(const EvalRows& e, bool seed, EvalSummary& summary);
// The error bars of a bench shape, from its samples.
void finish_bench(BenchRow& b);

}  // namespace peak::report_build
