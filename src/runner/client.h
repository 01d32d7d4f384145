#pragma once
// The parent side of the runner protocol: starts runner processes, enforces deadlines, kills
// the process group on a hang, charges a crash to the task in flight, and restarts a fresh
// runner for the tasks left.
#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runner/protocol.h"
#include "util/device_lock.h"

namespace peak {

struct RunnerOptions {
  std::filesystem::path executable;  // peak-runner / peak-runner-cuda
  // The device every job runs on (RunnerJob::device: an index or a name substring; "" = the
  // best), unless the job names one itself.
  std::string device;
  double task_timeout_s = 60;        // a task (check + timing) that reports nothing for this long
  double start_timeout_s = 120;      // first output of a new runner (device start-up)
  std::map<std::string, std::string> env;
  int max_restarts = 1000;
  // After a task times out (its deadline passed, or the runner reported `timeout`), no fresh
  // runner is started for the tasks left: they come back as kLeftAfterTimeout.
  bool stop_after_timeout = false;
  // Counts every runner process started with these options (and their copies), when set.
  std::shared_ptr<std::atomic<int>> runners_started;
  // Held while the runners of a job run (util/device_lock.h): one timer per device.
  std::shared_ptr<DeviceLock> device_lock;
};

// The result of a task that run_job did not start because an earlier one timed out
// (RunnerOptions::stop_after_timeout): disposition not_run with this message.
inline constexpr std::string_view kLeftAfterTimeout =
    "not run: an earlier task of the job missed its deadline";

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
