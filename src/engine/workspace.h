#pragma once
// The peak library API: one workspace (a kernel context under optimization, its history and its
// caches). The CLI and the MCP server are thin layers over this.
//
//   <workspace>/kernel.toml, <workspace>/<source>   the current kernel (HEAD's files)
//   <workspace>/.peak/                              store, blobs, build cache, manual prompts
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "context/context.h"
#include "engine/devices.h"
#include "engine/options.h"
#include "llm/llm.h"
#include "report/dispatch.h"
#include "report/report.h"
#include "store/store.h"
#include "transform/transformation.h"
#include "tune/tuner.h"
#include "util/diff.h"
#include "util/progress.h"
#include "util/workspace_lock.h"

namespace peak {

using json = nlohmann::json;
// The evaluation summary's format (results/summary.h).
inline constexpr int kSummaryFormatVersion = kEvalSummaryFormatVersion;
// The message of a step or evaluation stopped by EvalOptions::cancelled.
inline constexpr const char* kCancelledMessage = "cancelled";

// The result of evaluating one kernel (a checkpoint's summary_json holds its JSON form).
struct Evaluation {
  Disposition disposition = Disposition::not_run;
  std::string message;
  json summary = json::object();
};

// A step's outcome (apply / one step of run / commit).
struct ApplyResult {
  Disposition disposition = Disposition::not_run;
  std::string message;
  bool pending = false;            // manual mode: waiting for `peak respond`
  bool input_error = false;        // bad input (unknown transformation, unusable files, changes)
  bool environment_error = false;  // no device, no backend, store problem, endpoint down
  std::optional<int64_t> checkpoint;
  int attempts = 0;
  int64_t workflow_id = 0;
  std::string prompt_id, prompt_path;  // pending: the manual prompt waiting for a reply
  std::optional<int64_t> stash;        // local changes set aside (--force)
  bool cancelled = false;              // stopped by EvalOptions::cancelled
  json summary = json::object();
};

struct ApplyOptions {
  std::string llm = "manual";
  DriverOptions driver;
  std::filesystem::path record_dir;  // "" = no recording
  std::string record_note;
  int attempts = 3;  // attempts charged to the transformation before it fails
  std::string extra_instructions;
  bool feedback = true;  // tell the model what failed in the previous attempt
  bool force = false;    // local changes: stash them and go on instead of refusing
  EvalChoices eval;
  // Device facts shown in prompts instead of the probed device's (recording a campaign for a
  // device other than this machine's; see docs/llm.md).
  std::optional<DeviceFacts> prompt_device;
  // A driver made by the caller instead of make_driver(llm) (e.g. the MCP server's sampling
  // driver); `llm` still names it in the workflow's arguments.
  std::function<Result<std::unique_ptr<LlmDriver>>()> make_llm;
  // The command-line options that repeat this command's choices ("--budget", "4", "--small",
  // ...), --llm and --attempts apart: every hint that says how to continue repeats them, and
  // the workflow keeps them for `peak status` and `peak log`.
  std::vector<std::string> rerun_options;
};

struct RunOptions {
  ApplyOptions apply;
  bool resume = false;
  int from_step = 0;  // 0-based
  // --attempts on the command line: wins over the sequence's and its steps' attempts.
  std::optional<int> attempts;
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
  std::string prompt_id, prompt_path;
  std::vector<ApplyResult> steps;
};

// `peak export`: where the library goes and what it holds (docs/export.md).
struct ExportOptions {
  std::filesystem::path out;  // the folder: new, empty, or (with force) an earlier export's
  bool single = false;        // the checkpoint's best configuration alone, no dispatch table
  bool force = false;         // replace the files of an earlier export in `out`
  std::string name;           // entry points peak_<name> (default: the context's name)
  std::string arch;           // CUDA/HIP-on-NVIDIA architecture (default: the tuned device's)
};

struct ExportResult {
  std::filesystem::path dir;
  std::string entry;  // "peak_matmul_cuda_fp32"
  int64_t checkpoint = 0;
  size_t configurations = 0;
  std::optional<int64_t> dispatch_evaluation;  // the table the configurations come from
  std::string device;                          // where they were measured
  std::vector<std::string> files;              // relative to dir
};

// How the working files (kernel.toml and the kernel source) stand against HEAD.
struct WorkingState {
  bool clean = true;
  std::vector<std::string> changes;          // "the device region of kernel.hlsl", "kernel.toml"
  std::string diff;                          // unified diff from HEAD to the working files
  std::map<std::string, std::string> files;  // the working files as they are (path -> text)
};

// What a checkout, branch switch or stash pop did.
struct SwitchResult {
  std::string head;  // HEAD afterwards: a branch name or "#<id>"
  std::optional<int64_t> checkpoint;
  std::optional<int64_t> stash;  // local changes stashed on the way (--force)
  std::string message;           // one line for the user
};

struct SwitchOptions {
  bool force = false;   // replace local changes (they are stashed first)
  bool detach = false;  // checking out a checkpoint or tag: HEAD names the checkpoint
};

// One evaluation of a checkpoint, as `peak show --all` lists them.
struct EvaluationEntry {
  EvaluationRecord record;
  json summary;
  bool is_result = false;  // the one the checkpoint's result is
};

// `peak status`.
struct WorkspaceStatus {
  std::string head;  // branch or "#<id>"
  std::optional<int64_t> checkpoint;
  WorkingState working;
  // The unfinished workflows (running, waiting, interrupted) that no newer workflow of the same
  // command superseded, with their effective status.
  std::vector<WorkflowRecord> workflows;
  std::vector<PendingPrompt> prompts;  // manual prompts waiting for a reply
  std::vector<StashRecord> stashes;
  std::optional<LockHolder> busy;  // who changes the workspace now
};

// How to open a workspace. Reading needs nothing; the first change takes the workspace lock
// (.peak/lock), held until the Workspace is destroyed.
struct OpenOptions {
  bool wait = false;    // wait for another peak that holds the lock instead of failing
  std::string command;  // what this process is, for the lock ("peak apply tb-tiling")
};

class Workspace {
 public:
  // Creates a workspace in `dest` from a kernel context folder (kernel.toml + source) and records
  // the seed checkpoint on branch "main". `dest` must not hold a workspace already, and must be
  // a new or empty folder unless `force`: then the files the context's replace are kept as a
  // stash on the seed (init_stash()). Context errors (including names in tuning_valid that are
  // not tuning parameters) are input errors, and so is a folder in the way.
  static Result<std::unique_ptr<Workspace>> init(const std::filesystem::path& context_dir,
                                                 const std::filesystem::path& dest,
                                                 bool force = false);
  // The stash that `init` made of the files it replaced, if any.
  std::optional<int64_t> init_stash() const { return init_stash_; }
  // Opens the workspace containing `dir` (searching upwards for .peak/).
  static Result<std::unique_ptr<Workspace>> open(const std::filesystem::path& dir,
                                                 const OpenOptions& opts = {});
  ~Workspace();

  const std::filesystem::path& root() const { return root_; }
  Store& store() { return *store_; }
  Progress& progress() { return progress_; }

  // Takes the workspace lock for a change (done by every method that changes the workspace);
  // completes a checkout that a killed process left half done, and marks the workflows of dead
  // processes interrupted.
  Status lock();

  // The checkpoint HEAD points at, its context and source.
  Result<CheckpointRecord> head() const;
  Result<std::pair<KernelContext, std::string>> checkpoint_files(int64_t id) const;
  // Resolves "3", "#3", "HEAD", "HEAD~1", a branch name or a tag to a checkpoint id.
  Result<int64_t> resolve(const std::string& ref) const;

  // The transformation library ($PEAK_LIBRARY or <data>/transformations). A file that cannot be
  // read is skipped and named in `problems` (when given) instead of disabling the library.
  Result<std::vector<Transformation>> library(std::vector<std::string>* problems = nullptr) const;
  Result<Backend*> backend();
  Result<DeviceFacts> device(const std::string& selector);
  // Uses `facts` for `selector` instead of probing (compile-only recording for another device).
  void set_device(const std::string& selector, const DeviceFacts& facts) {
    std::lock_guard<std::mutex> lock(devices_mu_);
    devices_[selector] = facts;
  }
  // The devices a --devices spec names (probed once per spec; engine/devices.h). The first
  // resolution prints which devices are used and which were left out.
  Result<DeviceSelection> devices(const std::string& spec);
  // The device(s) these choices name, the one path from choices to devices (engine/options.h):
  // checked (check_eval_choices), then `device` probed, or the devices of `devices`; compiling
  // only, nothing is probed (the facts set_device gave are used when there are some). A command
  // resolves once and hands the result down.
  Result<EvalDevices> resolve_devices(const EvalChoices& choices);
  // The evaluation options for these choices: resolve_devices, then eval_options_for.
  Result<EvalOptions> eval_options(const EvalChoices& choices);

  // Validates, tunes and times a kernel (context + source); nothing is checkpointed.
  Evaluation evaluate(const KernelContext& ctx, const std::string& source, const EvalOptions& opts,
                      std::optional<int64_t> attempt_id = {},
                      std::optional<int64_t> checkpoint_id = {});
  // `peak bench`: the checkpoint's best configuration (its result's; the kernel's default values
  // when it has no result) timed at every shape of its context's shape suite (the small variant
  // when the choices or the device ask for small shapes), the vendor library timed in the same
  // runner task; nothing is validated beyond the checks of the timed launches. Recorded as an
  // evaluation of kind "suite", which is never the checkpoint's result. A shape that cannot be
  // timed is a row with its disposition. A context without a suite is an input error that says
  // how to add one.
  // With a dispatch table recorded for the checkpoint on this device (`tune_classes`), each
  // shape runs the configuration of its class (built once per configuration) unless `single`.
  // `on_shape` gets the result so far after every shape (SuiteResult::partial until the last).
  Result<SuiteResult> bench_suite(int64_t id, const EvalChoices& choices, bool single = false,
                                  const SuiteProgress& on_shape = {});
  // `peak tune --classes`: one tuning search per shape class of the checkpoint's suite (the small
  // variant when the choices or the device ask for small shapes), each over the suite's shapes of
  // that class (classified by the context's class rules) and starting from the checkpoint's best
  // configurations, validated as every search is and timed against the vendor library at those
  // shapes. The table of the configurations found is recorded as an evaluation of kind
  // "dispatch" (never the checkpoint's result), which `peak bench` then runs. A context without
  // a suite or class rules is an input error that says what to add.
  // `only`: the classes to search (empty: every class); the others are listed as not searched
  // and run the checkpoint's best configuration.
  Result<DispatchTable> tune_classes(int64_t id, const EvalChoices& choices,
                                     const std::vector<std::string>& only = {});
  // The checkpoint's result when it has one and `force` is false; else evaluates it and adds
  // the evaluation to its history (never replacing an earlier one). `kind` names why
  // ("validate", "tune", "parent", ...).
  Result<Evaluation> evaluate_checkpoint(int64_t id, const EvalOptions& opts, bool force,
                                         const std::string& kind = "evaluation");

  // One transformation on HEAD. A rerun of the same transformation on the same checkpoint with
  // the same driver continues its workflow (docs/cli.md, "Reruns").
  ApplyResult apply(const std::string& transformation, const ApplyOptions& opts,
                    int64_t workflow_id = 0,
                    const std::map<std::string, std::vector<int64_t>>& tuning = {});
  // `peak export`: checkpoint `ref` (HEAD when empty) as a folder that builds a library with
  // CMake and needs nothing of peak: the device code of every configuration of its newest
  // dispatch table (the best alone with `single` or without a table), host code written from
  // the launch plan, a C header, CMakeLists.txt, README.md (provenance) and export.json. Every
  // configuration is built first (a build error fails the export). A destination holding files
  // that no export wrote is refused (input error); nothing is written before every file renders.
  Result<ExportResult> export_checkpoint(const std::string& ref, const ExportOptions& opts);
  // A whole sequence; resumable.
  RunResult run(const Sequence& seq, const RunOptions& opts);
  // Checkpoints the working files (a manual edit) after evaluating them; refused when they do
  // not differ from HEAD ("nothing to commit").
  ApplyResult commit(const std::string& message, const EvalChoices& choices);

  // A checkpoint's result: its best evaluation under the default options (docs/store.md,
  // "Results"); the summary recorded with it when it was never evaluated.
  json summary(const CheckpointRecord& c) const;
  // The same, typed.
  EvalSummary result_summary(const CheckpointRecord& c) const;
  // Every evaluation of a checkpoint, oldest first, the result marked.
  std::vector<EvaluationEntry> evaluations(int64_t id) const;
  // Checkpoints from the seed to `tip`, each with its summary.
  std::vector<std::pair<CheckpointRecord, json>> history(int64_t tip) const;
  // The report of the history from the seed to `tip` (report/report.h).
  Result<Report> report(int64_t tip, const std::string& title) const;

  // The working files against HEAD.
  Result<WorkingState> working_state() const;
  // Workflows with their effective status: "running" whose process is gone reads "interrupted".
  std::vector<WorkflowRecord> workflows() const;
  WorkspaceStatus status() const;

  // History. Commands that replace the working files refuse when they hold changes that would
  // be lost, unless `force` (then the changes are stashed first).
  Result<SwitchResult> checkout(const std::string& ref, const SwitchOptions& opts = {});
  // Creates branch `name` at `at` (default HEAD) and switches to it.
  Result<SwitchResult> branch(const std::string& name, const std::string& at,
                              const SwitchOptions& opts = {});
  Status tag(const std::string& name, const std::string& at);
  // A unified diff between two checkpoints; `b` empty: between `a` and the working files.
  Result<std::string> diff(const std::string& a, const std::string& b) const;

  // Stashes: the working files set aside, HEAD's files restored.
  Result<int64_t> stash_push(const std::string& message);
  Result<std::vector<StashRecord>> stash_list() const;
  // Applies stash `id` (0: the newest) to the working files and takes it off the list: its
  // changes (from the checkpoint it was made on to its files) are merged with HEAD's, line by
  // line. Where they clash, the files get conflict markers, the stash is kept, and the result is
  // an input error that says how to resolve them.
  Result<SwitchResult> stash_pop(int64_t id, bool force);
  Status stash_drop(int64_t id);

 private:
  // A stash's files merged into HEAD's (stash_pop): the texts, and the files that clash.
  struct StashMerge {
    std::map<std::string, std::string> files;
    std::vector<std::string> conflicted;  // "kernel.hlsl (2 places)"
  };
  Result<StashMerge> merge_stash(const StashRecord& r, int64_t head_id) const;
  Workspace() = default;
  Status write_working_files(const KernelContext& ctx, const std::string& source);
  // A checkpoint with the shape suite its benchmarks use (`peak bench`, `peak tune --classes`):
  // its context's own, else the working kernel.toml's (same scalars); `suite_from` says which.
  // No suite: an input error that says how to add one to `command`.
  struct SuiteCheckpoint {
    CheckpointRecord record;
    KernelContext ctx;
    std::string source;
    std::string suite_from;
  };
  Result<SuiteCheckpoint> suite_checkpoint(int64_t id, const std::string& command) const;
  // Replaces the working files with `files` and applies `refs`, atomically: temporaries are
  // written, a journal is recorded, the temporaries are renamed into place, then HEAD, branches
  // and the journal change in one store transaction (docs/store.md, "Checkout").
  Status switch_files(const std::map<std::string, std::string>& files, RefUpdate refs);
  // Completes a switch_files that a killed process left half done.
  Status recover_switch();
  // The files of a checkpoint as the working files would hold them (path -> text).
  Result<std::map<std::string, std::string>> files_of(int64_t id) const;
  // Refuses (input error) when the working files hold changes that `target` would replace,
  // unless `force`, which stashes them first (their stash id in `stash`).
  Status protect_changes(const std::map<std::string, std::string>& target, bool force,
                         const std::string& why, std::optional<int64_t>& stash);
  Result<SwitchResult> switch_to(const std::string& head, int64_t id,
                                 std::vector<std::pair<std::string, int64_t>> branches,
                                 const SwitchOptions& opts, const std::string& why);
  // Moves the current branch (or a detached HEAD) to checkpoint `id` and writes its files (the
  // working files hold the checkpoint just made, so nothing of the user's is replaced).
  Status move_head(int64_t id);
  // --tune overrides against the parameters of HEAD and of the transformations about to run:
  // an unknown name is an input error, before any device work.
  Status check_overrides(const std::vector<Transformation>& steps,
                         const std::map<std::string, std::vector<int64_t>>& overrides);
  // The steps of a sequence, checked before anything runs (the transformations, --from,
  // --tune, each step's strategy and budget); an input error names the step.
  Result<std::vector<Transformation>> check_sequence(const Sequence& seq, const RunOptions& opts);
  // The workflow of a run: a new one, or with --resume the unfinished one of the same sequence
  // (`start` and `step_state` then say where it stands).
  Result<int64_t> open_run_workflow(const Sequence& seq, const RunOptions& opts,
                                    const std::string& llm, int& start, json& step_state);
  // The checkpoint a resumed run's step had made when its process was stopped before the run's
  // record moved on: HEAD, made by workflow `wid` with the step's transformation on the
  // checkpoint the step started from (`step_state`'s "parent"). nullopt when there is none.
  std::optional<int64_t> step_made_before_stop(int64_t wid, const SequenceStep& st,
                                               const json& step_state) const;
  // A step's value-set overrides: its own, then the sequence's for the parameters it will have
  // (HEAD's and those of `t`, the step's transformation).
  std::map<std::string, std::vector<int64_t>> step_tuning(const Sequence& seq,
                                                          const SequenceStep& st,
                                                          const Transformation& t);
  // The seed's result summary as measured (empty when it never was), for speedups over the seed.
  json seed_summary(const EvalOptions& opts);
  // A checkpoint's result as an evaluation when it has one that `opts` can use (timed, or
  // compiled only when `opts` compiles only); nothing else is evaluated.
  std::optional<Evaluation> recorded_result(const CheckpointRecord& c,
                                            const EvalOptions& opts) const;
  // `context_text`: the kernel.toml text to keep (a manual edit's, comments and all); by
  // default the context's canonical text.
  Result<int64_t> make_checkpoint(std::optional<int64_t> parent, const std::string& transformation,
                                  const std::string& message, const KernelContext& ctx,
                                  const std::string& source, const json& summary,
                                  const std::string* context_text = nullptr);
  // Adds an evaluation to a checkpoint's history.
  void record_evaluation(int64_t checkpoint, std::optional<int64_t> workflow,
                         const std::string& kind, const EvalOptions& opts, const json& summary);
  // A passed evaluation about to become a checkpoint (apply's candidate, commit's working
  // files): where it goes and what made it.
  struct PassedCandidate {
    int64_t parent = 0;
    std::string transformation;  // the checkpoint's transformation ("manual" for a commit)
    std::string message;
    json made_by;  // the summary's "transformation"
    const KernelContext* ctx = nullptr;
    const std::string* source = nullptr;
    const std::string* context_text = nullptr;  // see make_checkpoint
    // The parent's evaluation summary (none: no speedups), and the options the seed's
    // evaluation is found with.
    const json* parent_summary = nullptr;
    const EvalOptions* seed_opts = nullptr;
    const EvalOptions* opts = nullptr;  // the options the candidate was evaluated with
    std::optional<int64_t> workflow;
  };
  // Checkpoints a passed evaluation: its speedups over the parent and the seed and what made it
  // are added to `summary`, the checkpoint is made, and the evaluation recorded as its result.
  // HEAD does not move (head_update says how it would).
  Result<int64_t> checkpoint_passed(const PassedCandidate& c, json& summary);
  // The update that moves HEAD's branch (or a detached HEAD itself) to checkpoint `id`.
  RefUpdate head_update(int64_t id) const;
  // One evaluation under way (Workspace::evaluate), phase by phase (engine/evaluate.cpp).
  struct EvalRun;
  // One step of a workflow (apply, or one step of run), resumable from `state` (engine/step.h).
  struct StepContext;
  struct StepRun;
  ApplyResult apply_step(StepContext& step);
  // Marks this process's running workflows interrupted (on a signal).
  friend void interrupt_workspaces();
  void register_workflow(int64_t id, bool active);

  std::filesystem::path root_;
  std::optional<int64_t> init_stash_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Backend> backend_;
  std::string backend_name_;
  std::mutex devices_mu_;  // devices_: probes of several devices run at once
  std::map<std::string, DeviceFacts> devices_;
  std::map<std::string, DeviceSelection> selections_;  // --devices spec -> devices
  Progress progress_;
  OpenOptions open_;
  std::unique_ptr<WorkspaceLock> lock_;
  std::set<int64_t> active_workflows_;  // workflows this process runs now
};

// Checks of a kernel context that need no device: every name in tuning_valid is a tuning
// parameter or a device fact. An input error names `where` (the kernel.toml).
Status check_context_names(const KernelContext& ctx, const std::string& where);

// --tune overrides (NAME -> values) against the tuning parameters an evaluation will have: a name
// that is none of `params` is an input error that names the parameters there are.
Status check_tuning_overrides(const std::map<std::string, std::vector<int64_t>>& overrides,
                              const std::set<std::string>& params, const std::string& what);
// The names of a context's tuning parameters.
std::set<std::string> tuning_names(const KernelContext& ctx);

// " --budget 4 --small ...": command-line options as a shell would read them back.
std::string options_text(const std::vector<std::string>& options);

// On SIGINT, SIGTERM or SIGHUP the workflows this process runs are marked interrupted, then the
// process ends by that signal. Call once, early in main.
void install_interrupt_handler();

// The configurations carried into a transformation's tuning: the parent's top configurations
// (`top`, best first), each combined with every value of the parameters the transformation
// introduces (`fresh`, with their value sets after overrides), rank by rank, at most `limit` in
// all. The tuner thus tries the new knobs around the configurations that were best so far.
std::vector<Config> carried_configs(const std::vector<Config>& top,
                                    const std::vector<TuningParam>& fresh, size_t limit);

// Device facts from a JSON file: a DeviceFacts object, or a runner's probe event holding one
// under "device" (as in recordings/*/device.json and results/*/probe-*.json).
Result<DeviceFacts> read_device_facts(const std::filesystem::path& path);

}  // namespace peak
