#pragma once
// Reports: what a store holds about one campaign (the history from the seed to a checkpoint),
// built once from the store into one plain record (Report) that every renderer reads: text,
// Markdown, JSON and a self-contained HTML page. docs/report.md describes them.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/suite.h"
#include "store/store.h"
#include "util/result.h"

namespace peak {

// Version of the report's JSON form (render_json); the HTML page embeds the same JSON.
inline constexpr int kReportFormatVersion = 2;

// One bench shape of a step: the final timing of its best configuration.
struct BenchRow {
  std::string shape;
  std::string disposition;
  double median_ms = 0, p25_ms = 0, p75_ms = 0, spread = 0;
  double gflops = 0;
  double gflops_low = 0, gflops_high = 0;  // at the p75 and p25 times: the spread as error bars
  double pct_of_peak = 0;
  std::string baseline;  // "cublas" / ""
  double baseline_gflops = 0, pct_of_baseline = 0, baseline_median_ms = 0, baseline_spread = 0;
  double baseline_gflops_low = 0, baseline_gflops_high = 0;  // at its p75 and p25 times
  double speedup_vs_seed = 0, speedup_vs_parent = 0;
  size_t samples = 0;
  std::vector<double> samples_ms, baseline_samples_ms;  // raw samples (device timer)
  double clock_mhz_before = 0, clock_mhz_after = 0;
  bool throttled = false;
  // Memory-bound measures (results/summary.h SummaryBench; 0 where not measured): the family
  // headlines this row with GB/s; the traffic of one launch, its rate (with the spread as error
  // bars), its share of the documented memory bandwidth; the same-traffic copy of the same run
  // (copy_method "": none timed) with its rate and 100 * its time / the candidate's.
  bool bytes_headline = false;
  double bytes = 0, gbs = 0, gbs_low = 0, gbs_high = 0, pct_of_bandwidth = 0;
  std::string copy_method;
  double copy_median_ms = 0, copy_gbs = 0, pct_of_copy = 0;
  // FLOPs of one launch over its bytes (0 unless the context gives both): the roofline's x.
  double intensity = 0;
};

// One tuning configuration evaluated for a step, from its build, validation and timing rows.
struct ConfigRow {
  std::string config;       // "BLOCK_X=16 BLOCK_Y=16"
  std::string disposition;  // the first failure of build, validation or timing; else passed
  std::string message;      // first line of the failure
  double compile_s = 0;
  bool cached = false;
  std::string resources;  // in words
  int checks = 0, failed_checks = 0;
  std::string shape;    // the tuning shape it was timed on ("" when not timed)
  double score_ms = 0;  // median time on the tuning shape (0 when not timed)
  double score_gflops = 0, spread = 0;
  double gpu_s = 0;   // sum of its timed samples
  bool top = false;   // carried forward to the next step
  bool best = false;  // the configuration of the final timing
};

// One LLM call (pass > 0) or evaluation (pass 0) of a step.
struct AttemptRow {
  int64_t id = 0;
  int64_t workflow = 0;
  int attempt = 0;
  int pass = 0;
  std::string region;  // macros / device / host; "" for an evaluation
  std::string driver, model, producer;
  int prompt_tokens = 0, completion_tokens = 0;
  double latency_s = 0;
  std::string disposition;  // "running" for an evaluation still in progress
  std::string error;        // the message (first lines)
  std::string created_at;
  bool infrastructure = false;  // the endpoint's or the harness's failure, not the model's
};

// Where the time of a step went (seconds).
struct PhaseCosts {
  double llm_s = 0;
  int llm_calls = 0, prompt_tokens = 0, completion_tokens = 0;
  double compile_s = 0;      // wall time of the (parallel) compilation of the search
  double compile_cpu_s = 0;  // sum of the build times, every attempt of the step
  double validate_s = 0, tune_s = 0, bench_s = 0;
  double gpu_s = 0;       // device time of every timed sample (screening and final timing)
  bool recorded = false;  // false: no phase times in the store for this step
};

struct StepRow {
  int64_t checkpoint = 0;  // 0: a step that made no checkpoint (every attempt failed)
  std::optional<int64_t> parent;
  std::string transformation;  // "seed" for the root
  std::string message;
  std::string branch;
  std::string disposition;
  std::string created_at;
  int attempts = 0;  // tries (attempt numbers) of the transformation (infrastructure excluded)
  int failed_attempts = 0;
  std::string best_config;
  std::string resources;                            // of the best configuration, in words
  nlohmann::json resources_raw = nlohmann::json();  // as the compiler reported them
  // The SASS instruction mix of the best configuration's CUDA build ("SASS: HGMMA 48, ...";
  // instruction_mix_text) and the whole of it (resources["sass"]); empty / null when not recorded.
  std::string instruction_mix;
  nlohmann::json sass = nlohmann::json();
  std::vector<BenchRow> bench;
  std::vector<ConfigRow> configs;
  std::map<std::string, int> config_dispositions;  // per disposition, over the whole search
  int64_t space = 0, pruned = 0;                   // search space size; rejected by tuning_valid
  bool sampled = false;
  std::vector<AttemptRow> attempt_rows;
  PhaseCosts costs;
  std::string source_file;
  std::string diff;       // unified diff against the parent (source and kernel.toml)
  std::string diff_note;  // why there is none
  std::optional<SuiteResult> suite;  // the newest shape-suite benchmark (`peak bench`)
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

struct LlmUse {
  std::string driver, model, producer;
  int calls = 0;
};

struct Provenance {
  std::string device, backend, driver, api, arch;
  std::map<std::string, std::string> toolchain;
  double clock_mhz_min = 0, clock_mhz_max = 0;  // SM clock over every timed sample set
  bool throttled = false;
  double peak_tflops = 0;
  std::string peak_source;
  double memory_gbs = 0;  // the device's documented memory bandwidth (0: unknown)
  double measured_fp32_tflops = 0;
  std::string peak_versions;   // of the peak that evaluated the steps, "" when not recorded
  std::string report_version;  // of this peak
  int store_schema = 0;
  std::vector<LlmUse> llm;
  std::vector<std::string> recordings;  // replay or record folders named by the workflows
  struct Workflow {
    int64_t id = 0;
    std::string kind, status, started_at, finished_at, args;
  };
  std::vector<Workflow> workflows;
};

// A run in progress: its newest status line and the configurations timed so far.
struct LiveState {
  bool running = false;
  int64_t workflow = 0;
  std::string kind;
  std::string line, status;  // the run's latest lines (.peak/status.json)
  double updated_unix = 0;
  bool process_gone = false;  // marked running, but its process has ended
  std::string transformation;
  int attempt = 0;
  std::string phase;  // "llm" (pass k) or "evaluation"
  std::vector<ConfigRow> configs;
};

// A vendor library's rate on the same GPU model, measured by another store's campaign and shown
// beside the documented peak (`peak report --cross-reference STORE`): an HLSL kernel on an NVIDIA
// GPU has no vendor baseline of its own, but cuBLAS SGEMM timed by a CUDA campaign of the same
// precision on the same GPU model says what that GPU reaches.
struct CrossReference {
  std::string source;    // the other store
  std::string kernel;    // its kernel context
  std::string baseline;  // the vendor library ("cublas")
  std::string shape;
  double gflops = 0;     // the baseline's median rate
  int64_t checkpoint = 0;
  std::string measured_at;  // the checkpoint's evaluation time
};

struct Report {
  std::string source;  // the store or workspace read
  std::string kernel;
  std::string precision;  // of the tip's kernel context ("fp32"), "" when unknown
  int64_t tip = 0;
  Provenance provenance;
  std::vector<std::string> notes;  // what is missing or partial, for the reader
  std::vector<StepRow> steps;      // seed first; failed steps after their parent
  std::vector<FailureRow> failures;
  LiveState live;
  std::vector<CrossReference> cross_reference;  // add_cross_reference()
};

// Whether the report's results are headlined with GB/s (a bench row of a bytes-headlined family).
bool bytes_headlined(const Report& r);

struct ReportOptions {
  std::optional<int64_t> tip;  // default: HEAD's checkpoint, else the newest
  std::string title;           // default: the kernel's name from kernel.toml
  bool diffs = true;
  std::filesystem::path status_file;  // a run's .peak/status.json ("" = beside the store)
};

// Builds the report of the history from the seed to the tip. Missing pieces (no blobs, a
// summary that cannot be read, a run in progress) give a partial report with notes, not errors.
Result<Report> build_report(const Store& store, const ReportOptions& opts = {});

// Adds to `r` the newest vendor-baseline rate that `other` measured at each of r's bench shapes on
// r's GPU model (same device name) for a kernel of r's precision. Fails when `other` has none, with
// what it holds instead.
Status add_cross_reference(Report& r, const Report& other);

// A build's compiler resources in words, as reports show them ("40 registers, 8.0 KiB shared,
// no spills"); the reports of further compile targets (HIP: "gfx90a (compiled, not run): ...")
// follow the run target's.
std::string resources_text(const nlohmann::json& resources);
// The instruction mix of a CUDA build (resources["sass"], docs/backend-cuda.md) in words, summed
// over its kernels: the tensor-core instructions first (HGMMA and HMMA always; IMMA, QGMMA and
// any other *MMA when present), then FFMA, LDS, LDG, STS, STG, BAR and the total:
// "SASS: HGMMA 48, HMMA 0, FFMA 12, LDS 0, LDG 0, STS 0, STG 0, BAR 0 of 2113 instructions".
// "" when the build has none.
std::string instruction_mix_text(const nlohmann::json& resources);

std::string render_text(const Report& r);
std::string render_markdown(const Report& r);
nlohmann::json render_json(const Report& r);
// One self-contained HTML page (charts, diffs, tables; scripts and styles inlined; opens offline).
// `live_url`: a page that polls this URL for the report's JSON and redraws (peak serve).
Result<std::string> render_html(const Report& r, const std::string& live_url = "");

// Resolves "3", "#3", "HEAD", "HEAD~1", a branch or a tag to a checkpoint id.
Result<int64_t> resolve_checkpoint(const Store& store, const std::string& ref);

// Opens a store for reading: a workspace folder (or any folder inside one), its .peak folder,
// or a lone peak.db file.
Result<std::unique_ptr<Store>> open_store_for_reading(const std::filesystem::path& path);

}  // namespace peak
