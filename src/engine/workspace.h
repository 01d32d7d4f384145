#pragma once
// The peak library API: one workspace (a kernel context under optimization, its history and its
// caches). The CLI and the MCP server are thin layers over this.
//
//   <workspace>/kernel.toml, <workspace>/<source>   the current kernel (HEAD's files)
//   <workspace>/.peak/                              store, blobs, build cache, manual prompts
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "context/context.h"
#include "llm/llm.h"
#include "report/report.h"
#include "store/store.h"
#include "transform/transformation.h"
#include "tune/tuner.h"
#include "util/diff.h"
#include "util/progress.h"

namespace peak {

using json = nlohmann::json;
inline constexpr int kSummaryFormatVersion = 1;
// The message of a step or evaluation stopped by EvalOptions::cancelled.
inline constexpr const char* kCancelledMessage = "cancelled";

// How candidates are evaluated (validated, tuned, timed).
struct EvalOptions {
  std::string device;  // device selector ("" = best)
  bool small = false;  // time the context's small shapes instead of its bench shapes
  size_t budget = 48;  // tuning configurations at most (or budget_fraction of the space)
  // The tuning search (docs/tuning.md): the strategy ("" = the default) and the rest of its
  // budget: budget_fraction of the valid space when that is more than `budget`, and seconds.
  std::string strategy;
  double budget_fraction = 0;
  double budget_seconds = 0;
  // Configurations of this very source measured before in this workspace (same tuning shape and
  // device) are not run again: their recorded outcomes are reused (a search resumed).
  bool reuse_measurements = false;
  int top_k = 8;
  int jobs = 0;  // parallel compiles
  int seeds = 2;
  TimingPolicy policy;     // final timing of the best configuration
  TimingPolicy screening;  // ranking of configurations
  bool baseline = true;    // time the vendor baseline interleaved (when the backend has one)
  double task_timeout_s = 60;
  std::map<std::string, std::vector<int64_t>> tuning_overrides;
  std::vector<Config> must_include;  // e.g. the parent's top configurations
  // Compile every configuration but run nothing: for recording a campaign on a machine without
  // the target device (the run is replayed, fully evaluated, where the device is).
  bool compile_only = false;
  bool sanitize = false;  // CUDA: compute-sanitizer memcheck and racecheck on one small shape
  // Cancellation: polled between passes and between tuning configurations; when it returns true
  // the step stops at the next such point, records what it did, and checkpoints nothing.
  std::function<bool()> cancelled;
};
EvalOptions default_eval_options(bool cpu_device);

// The result of evaluating one kernel (a checkpoint's summary_json holds its JSON form).
struct Evaluation {
  Disposition disposition = Disposition::not_run;
  std::string message;
  json summary = json::object();
};

// A step's outcome (apply / one step of run).
struct ApplyResult {
  Disposition disposition = Disposition::not_run;
  std::string message;
  bool pending = false;            // manual mode: waiting for `peak respond`
  bool input_error = false;        // bad input (unknown transformation, unusable files)
  bool environment_error = false;  // no device, no backend, store problem
  std::optional<int64_t> checkpoint;
  int attempts = 0;
  bool cancelled = false;  // stopped by EvalOptions::cancelled
  json summary = json::object();
};

struct ApplyOptions {
  std::string llm = "manual";
  DriverOptions driver;
  std::filesystem::path record_dir;  // "" = no recording
  std::string record_note;
  int attempts = 3;
  std::string extra_instructions;
  bool feedback = true;  // tell the model what failed in the previous attempt
  EvalOptions eval;
  // Device facts shown in prompts instead of the probed device's (recording a campaign for a
  // device other than this machine's; see docs/llm.md).
  std::optional<DeviceFacts> prompt_device;
  // A driver made by the caller instead of make_driver(llm) (e.g. the MCP server's sampling
  // driver); `llm` still names it in the workflow's arguments.
  std::function<Result<std::unique_ptr<LlmDriver>>()> make_llm;
};

struct RunOptions {
  ApplyOptions apply;
  bool resume = false;
  int from_step = 0;  // 0-based
};

struct RunResult {
  Disposition disposition = Disposition::not_run;
  std::string message;
  bool pending = false;
  bool input_error = false;
  bool environment_error = false;
  bool cancelled = false;  // the workflow is left "interrupted"; `run --resume` continues it
  int steps_done = 0;
  int64_t workflow_id = 0;
  std::vector<ApplyResult> steps;
};

class Workspace {
 public:
  // Creates a workspace in `dest` from a kernel context folder (kernel.toml + source) and records
  // the seed checkpoint on branch "main". `dest` must not hold a workspace already.
  static Result<std::unique_ptr<Workspace>> init(const std::filesystem::path& context_dir,
                                                 const std::filesystem::path& dest);
  // Opens the workspace containing `dir` (searching upwards for .peak/).
  static Result<std::unique_ptr<Workspace>> open(const std::filesystem::path& dir);

  const std::filesystem::path& root() const { return root_; }
  Store& store() { return *store_; }
  Progress& progress() { return progress_; }

  // The checkpoint HEAD points at, its context and source.
  Result<CheckpointRecord> head() const;
  Result<std::pair<KernelContext, std::string>> checkpoint_files(int64_t id) const;
  // Resolves "3", "#3", "HEAD", "HEAD~1", a branch name or a tag to a checkpoint id.
  Result<int64_t> resolve(const std::string& ref) const;

  // The transformation library ($PEAK_LIBRARY or <data>/transformations) and backend.
  Result<std::vector<Transformation>> library() const;
  Result<Backend*> backend();
  Result<DeviceFacts> device(const std::string& selector);
  // Uses `facts` for `selector` instead of probing (compile-only recording for another device).
  void set_device(const std::string& selector, const DeviceFacts& facts) {
    devices_[selector] = facts;
  }

  // Validates, tunes and times a kernel (context + source); nothing is checkpointed.
  Evaluation evaluate(const KernelContext& ctx, const std::string& source, const EvalOptions& opts,
                      std::optional<int64_t> attempt_id = {},
                      std::optional<int64_t> checkpoint_id = {});
  // Evaluates HEAD (the seed is evaluated lazily the first time it is needed) and stores the
  // summary as a new measurement set; returns the evaluation.
  Result<Evaluation> evaluate_checkpoint(int64_t id, const EvalOptions& opts, bool force);

  // One transformation on HEAD.
  ApplyResult apply(const std::string& transformation, const ApplyOptions& opts,
                    int64_t workflow_id = 0,
                    const std::map<std::string, std::vector<int64_t>>& tuning = {});
  // A whole sequence; resumable.
  RunResult run(const Sequence& seq, const RunOptions& opts);
  // Checkpoints the working files (a manual edit) after evaluating them.
  ApplyResult commit(const std::string& message, const EvalOptions& opts);

  // The evaluation summary of a checkpoint: the one stored by evaluate_checkpoint when there is
  // one (the seed's, re-evaluations), else the one recorded with the checkpoint.
  json summary(const CheckpointRecord& c) const;
  // Checkpoints from the seed to `tip`, each with its summary.
  std::vector<std::pair<CheckpointRecord, json>> history(int64_t tip) const;
  // The report of the history from the seed to `tip` (report/report.h).
  Result<Report> report(int64_t tip, const std::string& title) const;

  // History.
  Status checkout(const std::string& ref);                        // writes the files, moves HEAD
  Status branch(const std::string& name, const std::string& at);  // creates and switches
  Result<std::string> diff(const std::string& a, const std::string& b) const;  // unified diff

 private:
  Workspace() = default;
  Status write_working_files(const KernelContext& ctx, const std::string& source);
  // The seed's evaluation summary (evaluated on first use), for speedups over the seed.
  json seed_summary(const EvalOptions& opts);
  Result<int64_t> make_checkpoint(std::optional<int64_t> parent, const std::string& transformation,
                                  const std::string& message, const KernelContext& ctx,
                                  const std::string& source, const json& summary);
  std::filesystem::path root_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Backend> backend_;
  std::string backend_name_;
  std::map<std::string, DeviceFacts> devices_;
  Progress progress_;
};

// Device facts from a JSON file: a DeviceFacts object, or a runner's probe event holding one
// under "device" (as in recordings/*/device.json and results/*/probe-*.json).
Result<DeviceFacts> read_device_facts(const std::filesystem::path& path);

}  // namespace peak
