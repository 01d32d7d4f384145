#pragma once
// The parent side of the runner protocol: starts runner processes, enforces deadlines, kills
// the process group on a hang, charges a crash to the task in flight, and restarts a fresh
// runner for the tasks left.
#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "runner/protocol.h"
#include "util/device_lock.h"

namespace peak {

// What the runners started with one set of options (and their copies) cost, summed across
// threads: how many started, the seconds from each start to its first task (process, sandbox,
// device start-up; for a held runner, to its "started" event: the wait for the device lock is not
// counted) and the seconds spent in tasks (from a task's begin to its result).
struct RunnerTally {
  std::atomic<int> starts{0};
  std::atomic<int> abandoned{0};  // of starts: runners let go before their first task
  std::atomic<int64_t> startup_us{0};
  std::atomic<int64_t> task_us{0};
  std::atomic<int64_t> load_us{0};  // of task_us: loading kernels (the tasks' load_ms)
  // The runners' own account of their start-up ("started" events), summed per step.
  std::mutex mu;
  std::map<std::string, double> startup_steps;
  void add_steps(const json& seconds);
  double startup_seconds() const { return static_cast<double>(startup_us.load()) * 1e-6; }
  double task_seconds() const { return static_cast<double>(task_us.load()) * 1e-6; }
  double load_seconds() const { return static_cast<double>(load_us.load()) * 1e-6; }
};

struct RunnerOptions {
  std::filesystem::path executable;  // peak-runner / peak-runner-cuda
  // The device every job runs on (RunnerJob::device: an index or a name substring; "" = the
  // best), unless the job names one itself.
  std::string device;
  double task_timeout_s = 60;    // a task (check + timing) that reports nothing for this long
  double start_timeout_s = 120;  // first output of a new runner (device start-up)
  std::map<std::string, std::string> env;
  int max_restarts = 1000;
  // After a task times out (its deadline passed, or the runner reported `timeout`), no fresh
  // runner is started for the tasks left: they come back as kLeftAfterTimeout.
  bool stop_after_timeout = false;
  // Counts the runner processes started with these options (and their copies), when set.
  std::shared_ptr<RunnerTally> tally;
  // Held while the runners of a job run (util/device_lock.h): one timer per device.
  std::shared_ptr<DeviceLock> device_lock;
  // Start a job's runner (process, sandbox, device start-up) before taking the device lock, and
  // let it run its tasks once the lock is held (RunnerJob::hold): the start-up of one job then
  // overlaps the tasks of another on the same device. For jobs whose timings only rank (the
  // search's screening); a job timed for its result starts with the lock held.
  bool start_before_lock = false;
  // Asked once the lock is taken, before the first task: true ends the job there, every task
  // not_run with kAbandoned.
  std::function<bool()> abandon;
};

// The result of a task that run_job did not start because an earlier one timed out
// (RunnerOptions::stop_after_timeout): disposition not_run with this message.
inline constexpr std::string_view kLeftAfterTimeout =
    "not run: an earlier task of the job missed its deadline";

inline constexpr std::string_view kAbandoned =
    "not run: the job was abandoned before its first task";

using TaskCallback = std::function<void(const TaskResult&, size_t done, size_t total)>;

// Runs every task of `job`; returns one result per task, in task order. Fails only when the
// runner cannot be started at all (missing executable, no device).
Result<std::vector<TaskResult>> run_job(const RunnerJob& job, const RunnerOptions& opts,
                                        const TaskCallback& on_result = {});
// mode "probe": the device facts (and the FP32 microbenchmark when job.microbench).
Result<DeviceFacts> probe_device(const RunnerJob& job, const RunnerOptions& opts);

// Where the runner executables are: next to the running peak binary, else the build folder,
// else $PATH. Returns `name` itself when none is found (starting it then fails with
// runner_missing_message).
std::filesystem::path find_runner(const std::string& name);
// "peak cannot find the runner NAME ... build it with ..." for a runner that does not exist.
std::string runner_missing_message(const std::string& name);

}  // namespace peak
