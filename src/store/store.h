#pragma once
// The workspace store: .peak/peak.db (SQLite, WAL, schema version in user_version) and
// content-addressed blobs under .peak/blobs/ab/cdef... (sha256). Append-only: rows are inserted,
// never rewritten, except refs (branch heads), settings, a workflow's status, state and owner,
// and a stash's state. See docs/store.md.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "results/result.h"
#include "results/summary.h"
#include "util/result.h"

namespace peak {

inline constexpr int kStoreSchemaVersion = 3;

struct CheckpointRecord {
  int64_t id = 0;
  std::optional<int64_t> parent;
  std::string branch;            // branch it was made on ("" on a detached HEAD)
  std::string transformation;    // "" for the seed
  std::string message;           // "seed", "apply tb-tiling", "manual edit", ...
  std::string context_blob;      // blob hash of the kernel.toml text
  std::string source_blob;       // blob hash of the kernel source text
  std::string summary_json;      // evaluation summary (disposition, best config, GFLOP/s, ...)
  std::string top_configs_json;  // top-k tuning configurations carried forward
  std::string created_at;        // ISO 8601 UTC
};

struct AttemptRecord {
  int64_t id = 0;
  int64_t workflow_id = 0;
  std::optional<int64_t> parent_checkpoint;
  std::string transformation;
  int pass_index = 0;
  int attempt = 0;
  std::string region;
  std::string driver, model, producer;
  std::string prompt_key;
  std::string prompt_blob, reply_blob;  // blob hashes ("" if none)
  int prompt_tokens = 0, completion_tokens = 0;
  double latency_s = 0;
  std::string disposition;  // to_string(Disposition)
  std::string error;
  // The failure was the infrastructure's (endpoint down, authentication, quota, a harness-side
  // timeout or crash), not the model's or the candidate's: it is not charged to either.
  bool infrastructure = false;
  std::string created_at;
};

struct BuildRecord {
  int64_t id = 0;
  std::optional<int64_t> attempt_id;
  std::string source_hash;
  std::string config_json;  // tuning values
  std::string command;
  int exit_code = 0;
  std::string log_blob;
  double seconds = 0;
  std::string disposition;
  std::string resources_json;  // registers, shared memory, spills
  std::string toolchain;
  bool cached = false;
  std::string created_at;  // ISO 8601 UTC, filled by the store
};

struct ValidationRecord {
  int64_t id = 0;
  std::optional<int64_t> attempt_id;
  std::optional<int64_t> checkpoint_id;
  std::string config_json;
  std::string shape;  // "M=.. N=.. K=.."
  bool hidden = false;
  int64_t seed = 0;
  double max_abs_err = 0, max_rel_err = 0;
  std::string disposition;
  std::string message;
  double seconds = 0;
  std::string created_at;  // ISO 8601 UTC, filled by the store
};

struct MeasurementRecord {
  int64_t id = 0;
  std::optional<int64_t> attempt_id;
  std::optional<int64_t> checkpoint_id;
  std::string config_json;
  std::string shape;
  std::string what;          // "candidate" or "baseline:<name>"
  std::string samples_json;  // raw samples in milliseconds
  double median_ms = 0;
  double spread = 0;  // relative (IQR / median)
  double gflops = 0;
  std::string disposition;
  std::string device_json;  // device, driver, clocks before/after
  std::string created_at;   // ISO 8601 UTC, filled by the store
};

// One tuning search (schema 2): its strategy and options, and the space it searched.
struct TuningRunRecord {
  int64_t id = 0;
  std::optional<int64_t> attempt_id;
  std::optional<int64_t> checkpoint_id;
  std::string source_hash;
  std::string strategy;
  std::string options_json;  // budget, seed, batch, jobs
  std::string space_json;    // parameters, validity, device, tuning shape
  std::string created_at;    // ISO 8601 UTC, filled by the store
};

// One configuration a tuning search considered: evaluated, or pruned (stage validity, launch or
// resources, disposition invalid_config) with the reason.
struct TuningConfigRecord {
  int64_t id = 0;
  int64_t run_id = 0;
  int64_t position = -1;  // evaluation order in the run; -1 when ruled out before the search
  std::string config_json;
  std::string stage;  // validity, launch, compile, resources, validate, time
  std::string disposition;
  std::string reason;
  double score_ms = 0;  // passed: median time on the tuning shape
  double compile_s = 0, validate_s = 0, time_s = 0;
  std::string resources_json;  // the build's resource report
  std::string launch_json;     // the launch plan of the tuning shape
  std::string created_at;      // ISO 8601 UTC, filled by the store
};

struct WorkflowRecord {
  int64_t id = 0;
  std::string kind;  // "apply", "run", "tune", "validate", "demo"
  std::string args_json;
  // "running" (default), "waiting" (for an outside reply), and the ends: "passed", "failed",
  // "interrupted"
  std::string status;
  std::string started_at, finished_at;  // started_at: now when empty; finished_at: by update
  std::string state_json;               // resumable state (sequence position, ...)
  // The process that runs it (pid, host, process start time); a new owner takes over on resume.
  int owner_pid = 0;
  std::string owner_host, owner_start;
};

// One evaluation of a checkpoint (validation, tuning, timing). A checkpoint keeps every
// evaluation ever made of it; none replaces another (docs/store.md, "Results").
struct EvaluationRecord {
  int64_t id = 0;
  int64_t checkpoint_id = 0;
  std::optional<int64_t> workflow_id;
  std::string kind;          // "checkpoint" (made with it), "parent", "validate", "tune", ...
  std::string options_json;  // the options it ran with
  bool standard = false;     // default options: counts for the checkpoint's result
  std::string disposition;
  std::string shape;  // the first bench shape
  double gflops = 0;  // at that shape (NaN when not timed)
  std::string device;
  std::string summary_blob;  // blob of the full evaluation summary JSON
  std::string created_at;
};

// Working files set aside (`peak stash`): path (relative to the workspace) -> blob.
struct StashRecord {
  int64_t id = 0;
  std::optional<int64_t> base_checkpoint;  // HEAD when they were stashed
  std::string branch;                      // HEAD's branch then ("" when detached)
  std::string message;
  std::map<std::string, std::string> files;
  std::string state;  // "kept" (listed), "popped", "dropped"
  std::string created_at, finished_at;
};

// Changes of HEAD, branches and settings made in one transaction (all or nothing).
struct RefUpdate {
  std::optional<std::string> head;                         // branch name or "#<id>"
  std::vector<std::pair<std::string, int64_t>> branches;   // branch -> checkpoint
  std::map<std::string, std::optional<std::string>> meta;  // set, or delete when nullopt
};

class Store {
 public:
  // Opens (creating if `create`) the store in `peak_dir` (the workspace's .peak folder).
  // A store written by a newer schema is refused with a clear message.
  // A store that cannot be written (read-only folder or file system) is opened read-only:
  // reading works, every write fails with a message saying so.
  static Result<std::unique_ptr<Store>> open(const std::filesystem::path& peak_dir, bool create);
  // Opens a store for reading only: a workspace's .peak folder, or a lone peak.db file (as kept
  // under results/; its blobs are then read from a `blobs` folder beside it when there is one).
  // Nothing is written: no FORMAT, no schema, no migration. A store of another schema version is
  // refused with a message that says which. Readers see what a running peak has committed.
  static Result<std::unique_ptr<Store>> open_read_only(const std::filesystem::path& path);
  // Whether the blob folder exists (a lone peak.db has no blobs: no sources, prompts, replies).
  bool has_blobs() const;
  ~Store();
  bool read_only() const;

  // Blobs: content-addressed, written atomically; put returns the sha256 hex.
  Result<std::string> put_blob(std::string_view data);
  Result<std::string> get_blob(const std::string& hash) const;

  // Checkpoints form a tree. Refs map branch names to checkpoint ids; HEAD names a branch
  // (or, detached, a checkpoint id as "#<id>").
  Result<int64_t> add_checkpoint(const CheckpointRecord& c);  // fills id and created_at
  Result<CheckpointRecord> checkpoint(int64_t id) const;
  Result<std::vector<CheckpointRecord>> checkpoints() const;  // by id
  Status set_ref(const std::string& branch, int64_t checkpoint_id);
  Result<std::optional<int64_t>> ref(const std::string& branch) const;
  Result<std::map<std::string, int64_t>> refs() const;
  Status delete_ref(const std::string& branch);
  Status set_head(const std::string& head);  // branch name or "#<id>"
  Result<std::string> head() const;
  // The checkpoint HEAD points at (through its branch), if any.
  Result<std::optional<int64_t>> head_checkpoint() const;
  // Checkpoint tags (names): unique.
  Status tag(const std::string& name, int64_t checkpoint_id);
  Result<std::optional<int64_t>> find_tag(const std::string& name) const;
  Result<std::map<std::string, int64_t>> tags() const;

  // Several changes of HEAD, branches and settings in one durable transaction.
  Status update_refs(const RefUpdate& u);

  Result<int64_t> add_workflow(const WorkflowRecord& w);
  Status update_workflow(int64_t id, const std::string& status, const std::string& state_json);
  // A new process takes a workflow over (resume).
  Status set_workflow_owner(int64_t id, int pid, const std::string& host, const std::string& start);
  Result<WorkflowRecord> workflow(int64_t id) const;
  Result<std::vector<WorkflowRecord>> workflows() const;

  Result<int64_t> add_attempt(const AttemptRecord& a);
  Result<std::vector<AttemptRecord>> attempts(std::optional<int64_t> workflow_id = {}) const;
  Result<int64_t> add_build(const BuildRecord& b);
  Result<std::vector<BuildRecord>> builds(std::optional<int64_t> attempt_id = {}) const;
  Result<int64_t> add_validation(const ValidationRecord& v);
  Result<std::vector<ValidationRecord>> validations(std::optional<int64_t> attempt_id = {}) const;
  Result<int64_t> add_measurement(const MeasurementRecord& m);
  Result<std::vector<MeasurementRecord>> measurements(
      std::optional<int64_t> checkpoint_id = {}) const;
  // Link rows of an attempt to the checkpoint it produced.
  Status attach_attempt_to_checkpoint(int64_t attempt_id, int64_t checkpoint_id);
  // The attempts linked to a checkpoint (by attach_attempt_to_checkpoint), by attempt id.
  Result<std::vector<int64_t>> checkpoint_attempts(int64_t checkpoint_id) const;

  Result<int64_t> add_tuning_run(const TuningRunRecord& r);
  Result<std::vector<TuningRunRecord>> tuning_runs() const;                      // by id
  Status add_tuning_configs(const std::vector<TuningConfigRecord>& rows);        // one transaction
  Result<std::vector<TuningConfigRecord>> tuning_configs(int64_t run_id) const;  // by id

  Result<int64_t> add_evaluation(const EvaluationRecord& e);
  // Every evaluation of a checkpoint (or of all, when nullopt), by id.
  Result<std::vector<EvaluationRecord>> evaluations(
      std::optional<int64_t> checkpoint_id = {}) const;

  Result<int64_t> add_stash(const StashRecord& s);  // state "kept"
  Result<std::vector<StashRecord>> stashes(bool kept_only = true) const;
  // "popped" or "dropped": the stash leaves the list (its row and blobs stay).
  Status finish_stash(int64_t id, const std::string& state);

  // Free-form key/value settings of the workspace (e.g. "reference.<key>" -> blob hash).
  Status set_meta(const std::string& key, const std::string& value);
  Result<std::optional<std::string>> meta(const std::string& key) const;

  const std::filesystem::path& dir() const { return dir_; }

 private:
  Store() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::filesystem::path dir_;
};

std::string utc_now_iso8601();

// The prefix of the `what` of the measurements a class's search records ("class:screening",
// "class:candidate", "class:baseline:cublas"): they time other shapes than the checkpoint's.
inline constexpr const char* kClassMeasurementPrefix = "class:";

// Which of a checkpoint's evaluations (oldest first) is its result, by the rule of
// results/result.h (docs/store.md, "Results"); nothing when there is none but suite benchmarks
// and dispatch tables.
std::optional<size_t> result_evaluation(const std::vector<EvaluationRecord>& evaluations);

// The evaluation summary of a checkpoint's result: the evaluation that result_evaluation picks
// among those recorded for it; else a re-evaluation stored under meta "eval.<id>" by a store of
// schema 1; else the summary recorded with the checkpoint. `note` (optional) says why an
// evaluation could not be read.
EvalSummary checkpoint_result_summary(const Store& store, const CheckpointRecord& c,
                                      std::string* note = nullptr);

// The columns of an evaluation's row that repeat its summary: disposition, the first bench
// shape and its GFLOP/s (NaN when not timed), the device.
void fill_from_summary(const EvalSummary& s, EvaluationRecord& e);

}  // namespace peak
