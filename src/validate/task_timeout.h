#pragma once
// Task deadlines that tell a slow machine from a hung kernel (docs/runner.md, "Timeouts").
//
// A runner task's deadline is derived from what the reference kernels (the seed and the parent,
// measured on this device) took per task of the same kind, times a factor, and never under a
// floor for the device kind; with no measurement it is the caller's default. A task that misses
// its deadline is retried alone, in a fresh runner, before anything is charged: a machine that
// was busy for a moment passes the second time; a hung kernel times out again and is charged
// `timeout`, its message giving the ratio of the time it ran to the reference's, and the tasks
// left are not run (they would hang as well).
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/client.h"

namespace peak {

// The slowest runner task of each kind measured for one evaluated kernel (summary
// "task_seconds"); 0 where none was measured.
struct TaskSeconds {
  double validate = 0;  // checked runs on one shape and seed
  double screen = 0;    // short timing of a configuration on the tuning shape
  double bench = 0;     // final timing on one bench shape, with the baseline
  nlohmann::json to_json() const;
  static TaskSeconds from_json(const nlohmann::json& j);  // {} when absent
};

enum class TaskKind { validate, screen, bench };

struct TaskBudget {
  double timeout_s = 60;
  double reference_s = 0;  // the slowest reference task of this kind here (0: none measured)
  std::string basis;       // "20x the parent's slowest validation task (0.42 s)"
  nlohmann::json to_json() const;
};

inline constexpr double kTimeoutFactor = 20;    // a task may take this many reference tasks
inline constexpr double kGpuFloorSeconds = 10;  // never less than this on a GPU
inline constexpr double kCpuFloorSeconds = 30;  // on a CPU device (shared with everything else)

// `references`: (who, measured) pairs, e.g. {"seed", ...}, {"parent", ...}. `min_s`: what the
// task may legitimately take whatever the kernel (a timing policy's sampling budget).
TaskBudget task_budget(TaskKind kind, bool cpu_device,
                       const std::vector<std::pair<std::string, TaskSeconds>>& references,
                       double default_s, double min_s = 0);
// The longest a timing task may sample under `policy` (runner/execute.cpp: until max_seconds,
// and up to ten times that while fewer than min_samples were taken), with an interleaved baseline
// doubling every sample.
double timing_allowance(const TimingPolicy& policy, bool with_baseline);

// run_job with opts.task_timeout_s = budget.timeout_s, stopping at the first task that times
// out; that task is retried alone in a fresh runner. When the retry misses the deadline as well,
// the task is charged `timeout` with the measured ratio and the tasks after it are not_run (two
// runner starts for a hung kernel, whatever the number of tasks); otherwise its second outcome
// stands and the tasks after it run in a fresh runner, under the same rule.
// With a device lock, the device stays held from the first miss to the retry's verdict, and
// `on_hung` (when set) is called before it is let go: no other job of the process takes the
// device in between, and one that waited for it sees the verdict (RunnerOptions::abandon).
Result<std::vector<TaskResult>> run_job_retrying_timeouts(
    const RunnerJob& job, RunnerOptions opts, const TaskBudget& budget,
    const std::function<void(const TaskResult&)>& on_hung = {});

}  // namespace peak
