#pragma once
// The Slurm executor (docs/scale-out.md): each workflow is one batch job that runs
// `peak campaign exec FILE ID` (the same peak binary on every node), submitted with --requeue so
// that a preempted job comes back, followed through squeue, and requeued (or submitted again)
// when it ended with its workflow unfinished. The workflow then resumes from its last checkpoint:
// its store is the truth, never the scheduler's view.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "campaign/campaign.h"

namespace peak::campaign {

struct SlurmJob {
  std::string id, name, state, reason;
};

// What Slurm still knows of a job that left the queue.
struct JobEnd {
  bool known = false;
  std::string state;      // COMPLETED, FAILED, CANCELLED, PREEMPTED, NODE_FAIL, TIMEOUT, ...
  std::string exit_code;  // "0:0", "1:0", "0:9" (exit status:signal)
  int restarts = -1;      // times Slurm requeued it (-1: unknown)
};

// The scheduler's commands; tests replace them.
class SlurmClient {
 public:
  virtual ~SlurmClient() = default;
  // This user's jobs in the queue (pending, running, completing, ...).
  virtual Result<std::vector<SlurmJob>> queue() = 0;
  // Submits; returns the job id.
  virtual Result<std::string> submit(const std::vector<std::string>& sbatch_options,
                                     const std::filesystem::path& script) = 0;
  // Puts a job that ended back into the queue under the same id.
  virtual Status requeue(const std::string& id) = 0;
  virtual JobEnd ended(const std::string& id) = 0;
};

// sbatch, squeue, scontrol and sacct from `bin_dir` ("" = PATH).
std::unique_ptr<SlurmClient> command_slurm(const std::string& bin_dir = "");

// "peak-<8 hex digits of the campaign folder>-<workflow id>": unique per campaign folder, so a
// job that was submitted but never recorded is found again by name.
std::string job_name(const Campaign& c, const Workflow& w);
// The options of the workflow's sbatch (GPUs through --gres only for a GPU device).
std::vector<std::string> sbatch_options(const Campaign& c, const Workflow& w);
// The batch script: `exec PEAK campaign exec FILE ID`.
std::string job_script(const Campaign& c, const Workflow& w, const std::filesystem::path& peak);

// `squeue -h -o %i|%T|%j|%r` lines.
std::vector<SlurmJob> parse_squeue(const std::string& out);
// `scontrol show job -o ID` output.
JobEnd parse_scontrol_job(const std::string& out);
// A state of a job that is still queued or running (not one of Slurm's end states).
bool job_active(const std::string& state);

// Follows every workflow of `todo` to its end through `slurm`; records the jobs in
// <dir>/campaign.json. Errors: the scheduler could not be reached for long.
Status follow_slurm(const Campaign& c, const std::vector<Workflow>& todo, const RunOptions& opts,
                    SlurmClient& slurm);

// <dir>/campaign.json: the executors' record of each workflow (jobs, requeues, processes).
json load_state(const Campaign& c);
Status save_state(const Campaign& c, const json& state);

}  // namespace peak::campaign
