#pragma once
// Campaigns (docs/scale-out.md): a matrix of kernel contexts x sequences x LLM drivers x devices
// from one TOML file. Every combination is an independent workflow: `peak run SEQUENCE` in a
// workspace of its own, resumable, run here (the local executor) or as a Slurm job (the Slurm
// executor), with one summary over all of them.
//
//   <dir>/campaign.json        the executors' record: jobs submitted, requeued, how they ended
//   <dir>/lock                 held by the `peak campaign run` that follows the campaign
//   <dir>/workspaces/<id>/     one peak workspace per workflow (its store is the truth)
//   <dir>/logs/<id>.log        what each workflow's process printed (every run appended)
//   <dir>/jobs/<id>.sh         the Slurm batch script of a workflow
//   <dir>/outcomes/<id>.json   how the last process of a workflow ended
//   <dir>/summary.json, summary.txt   written when `peak campaign run` ends
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/options.h"
#include "util/result.h"

namespace peak::campaign {

using json = nlohmann::json;

inline constexpr int kCampaignFormatVersion = 1;  // the campaign file's `format`
inline constexpr int kStateFormatVersion = 1;     // <dir>/campaign.json
inline constexpr int kSummaryFormatVersion = 1;   // the summary's JSON form
inline constexpr int kOutcomeFormatVersion = 1;   // <dir>/outcomes/<id>.json

// One device of the matrix.
struct Device {
  std::string name;    // label in workflow ids and the summary
  std::string select;  // `--device` on the machine that runs the workflow ("" = its best device)
  int gpus = 0;        // GPUs a Slurm job asks for (--gres=gpu:N); 0 for CPU devices (lavapipe)
  std::string gres;    // an explicit --gres instead of gpu:N ("gpu:h100:1")
  std::string partition, constraint;  // Slurm, for this device only (win over [slurm])
  // `--devices` instead of `select`: several GPUs of that machine, of one model ("all", "0,1", a
  // name substring; engine/devices.h).
  std::string devices;
};

struct SlurmSettings {
  std::string partition, account, qos, time, mem;
  int cpus_per_task = 0;
  std::vector<std::string> extra;  // further sbatch options, as written
  int max_requeues = 3;            // requeues of a job that ended with its workflow unfinished
  double poll_s = 30;              // how often the jobs are looked at
  std::string peak;                // the peak binary on the nodes ("" = the one submitting)
};

// A context, sequence or LLM driver of the matrix: its label and what it resolved to.
struct Item {
  std::string name;   // label (the context's folder name, the sequence's name, a driver slug)
  std::string value;  // absolute path (contexts, sequences) or driver spec (LLMs)
};

struct Campaign {
  int format = kCampaignFormatVersion;
  std::string name, description;
  std::filesystem::path file;  // the campaign file (absolute)
  std::filesystem::path dir;   // the campaign folder (absolute)
  std::vector<Item> contexts, sequences, llms;
  std::vector<Device> devices;
  int attempts = 0;         // --attempts (0: the sequences' own)
  double llm_deadline = 0;  // --llm-deadline (0: the default)
  // [eval]: the evaluation choices of every workflow (as `peak run`'s options: shapes, budget,
  // jobs, baseline, strategy, strategy_budget, reuse_measurements); each [[device]] adds its own.
  EvalChoices eval;
  SlurmSettings slurm;
};

// One combination of the matrix.
struct Workflow {
  std::string id;  // "<context>__<sequence>__<llm>__<device>", unique in the campaign
  Item context, sequence, llm;
  Device device;
  int steps = 0;  // steps of the sequence
  std::filesystem::path workspace, log, outcome, script;
};

// Parses a campaign file's text; relative paths are resolved against the folder of `file`. Errors
// are input errors that name FILE:LINE and what to write instead.
Result<Campaign> parse_campaign(std::string_view text, const std::filesystem::path& file);
Result<Campaign> load_campaign(const std::filesystem::path& file);

// Every workflow of the matrix, in file order (contexts outermost, devices innermost).
std::vector<Workflow> workflows(const Campaign& c);
Result<Workflow> find_workflow(const Campaign& c, const std::string& id);

// A label made of letters, digits, '.', '_' and '-' ("replay:hlsl-fp32" -> "replay-hlsl-fp32").
std::string slug(std::string_view text);

// ---- running one workflow (what every process of a campaign runs, on any machine) ----------

struct ExecOutcome {
  // passed, failed (a step did not pass: the workflow's end), waiting (a manual reply),
  // interrupted (resumable: the next run goes on)
  std::string status;
  std::string message;
  int steps_done = 0;
  int64_t run = 0;  // the run's workflow id in the workspace's store
  bool input_error = false, environment_error = false;
};

// Runs workflow `id` here: creates its workspace when it is missing, resumes its unfinished run
// or starts it, and does nothing when the run already ended (passed or failed). Writes the
// outcome to <dir>/outcomes/<id>.json. An error: the workflow could not start (unknown id, a
// workspace that cannot be made or opened, another process working in it).
Result<ExecOutcome> exec_workflow(const Campaign& c, const std::string& id);

// Creates a workflow's workspace (Workspace::init into a temporary folder renamed into place, so
// a process killed meanwhile leaves no half-made workspace) unless it exists.
Status ensure_workspace(const Workflow& w);

// ---- where a workflow stands ------------------------------------------------------------------

struct WorkflowState {
  // pending (no run yet), running, passed, failed, waiting, interrupted
  std::string status = "pending";
  int steps_done = 0;
  int64_t run = 0;
  std::string message;
  bool final() const { return status == "passed" || status == "failed" || status == "waiting"; }
};
// Read from the workflow's store (nothing is written).
WorkflowState read_state(const Workflow& w);

// ---- executors ---------------------------------------------------------------------------------

struct RunOptions {
  std::string executor = "local";  // local, slurm
  int jobs = 0;  // local: workflows at once (0: 1); slurm: jobs queued or running at once (0: all)
  std::filesystem::path peak_binary;                 // the peak that runs each workflow
  std::function<void(const std::string&)> progress;  // one line per event
  // Slurm: "" = sbatch, squeue, scontrol and sacct on PATH.
  std::string slurm_bin_dir;
};

// Runs (or goes on with) every workflow until each has ended, then writes the summary. Workflows
// that already ended are not run again. Only one `peak campaign run` follows a campaign at a
// time (<dir>/lock).
Result<json> run_campaign(const Campaign& c, const RunOptions& opts);

// ---- the summary -------------------------------------------------------------------------------

// Every workflow's state, result and jobs, with `peak stats` over their workspaces (JSON, format
// kSummaryFormatVersion). Reads only.
json summarize(const Campaign& c);
// The summary as a table, one line per workflow, then the totals.
std::string render_summary_text(const json& summary);

}  // namespace peak::campaign
