#pragma once
// The setup of the evaluation pipeline, written once for its users: Workspace::evaluate
// (engine/evaluate.cpp: validate, tune, apply; a search, then the final timing), the suite
// benchmark (engine/suite.cpp: the final timing alone, at the suite's shapes) and the class
// searches (one evaluation per class). The setup is the backend, device and peak an evaluation
// starts from (EvalSetup), the devices it validates and times on, each with its runner, device
// lock and validator against the reference (EvalLanes), and the deadlines; the final timing is
// tune/final_timing.h's, with the options final_timing_options gives. Also the JSON form of one
// measurement.
#include <atomic>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "context/context.h"
#include "engine/workspace.h"
#include "tune/final_timing.h"
#include "tune/measure.h"
#include "tune/tuner.h"
#include "util/device_lock.h"
#include "validate/task_timeout.h"

namespace peak::detail {

struct PeakInfo {
  double tflops = 0;  // for % of peak
  std::string source;
  double limit = 0;  // for faster_than_peak
  // The documented memory bandwidth in GB/s (0: none known): the bytes gate and % of bandwidth.
  double memory_gbs = 0;
};
// The documented peak for the kernel's input precision, else the measured FP32 throughput.
PeakInfo peak_for(const KernelContext& ctx, const DeviceFacts& dev);

// What every evaluation of a kernel resolves first: the workspace's backend, the device (by its
// selector), the peak the kernel is measured against, and where builds are cached.
struct EvalSetup {
  Backend* be = nullptr;
  DeviceFacts dev;
  PeakInfo peak;
  std::filesystem::path cache;
};
// The backend's or the device's error, with its kind, when either is missing.
Result<EvalSetup> eval_setup(Workspace& ws, const KernelContext& ctx, const std::string& device);
// The facts of the setup an evaluation summary records: "device", "peak" (with the documented
// FP32 peak when `documented_peak` and one is known), "toolchain" and "sandbox".
void describe_setup(EvalSummary& summary, const EvalSetup& setup, bool documented_peak);

// The device's lock (one timer per device), with its label for the waiting line.
std::shared_ptr<DeviceLock> device_lock_for(const DeviceFacts& dev);
// Runners whose device locks print their waiting lines on the workspace's progress while this
// scope lives: a lock outlives the workspace, so its notice must not call back into it later.
class LockNotices {
 public:
  explicit LockNotices(Progress& progress) : progress_(progress) {}
  ~LockNotices();
  LockNotices(const LockNotices&) = delete;
  LockNotices& operator=(const LockNotices&) = delete;
  // A runner of `be` on `dev`, holding the device's lock while it runs, with the default
  // deadline of a task.
  RunnerOptions runner(const Backend& be, const DeviceFacts& dev, double task_timeout_s);

 private:
  Progress& progress_;
  std::vector<std::shared_ptr<DeviceLock>> locks_;
};

// The devices an evaluation validates and times on: one, or several of one model on one host
// (--devices), the first making the final timing. Per device its selector and facts, a runner
// holding the device's lock while it runs (one timer per device, docs/sandbox.md) and a validator
// against the reference; `lanes` points into the rest, so this is opened in place (open).
struct EvalLanes {
  std::vector<std::string> selectors;
  std::vector<DeviceFacts> facts;
  std::vector<RunnerOptions> runners;
  std::vector<DeviceLockStats> locks_before;  // each lock's statistics when it was opened
  std::shared_ptr<RunnerTally> runner_tally = std::make_shared<RunnerTally>();
  ReferenceSource ref;
  std::vector<std::unique_ptr<Validator>> validators;
  std::vector<DeviceLane> lanes;
  std::optional<LockNotices> notices;

  bool several() const { return selectors.size() > 1; }
  // The runners, the reference and the validators of the devices `selectors` and `facts` name
  // (`device`: the evaluation's own selector, what a single device's runner selects). The error
  // is the reference's (no seed, or a seed that does not build).
  Status open(Workspace& ws, const KernelContext& ctx, const EvalSetup& setup,
              const std::string& device, double task_timeout_s);
};

// The task times an evaluation summary recorded ("task_seconds"), named `who`, as a reference
// for deadlines; none when it recorded none.
void add_task_reference(std::vector<std::pair<std::string, TaskSeconds>>& refs,
                        const nlohmann::json& summary, const std::string& who);
// The deadlines of an evaluation's tasks on this device (`cpu`: a CPU device), from what the
// reference kernels `refs` took per task and the options' default deadline.
struct TaskBudgets {
  TaskBudget validate, screen, bench;
};
TaskBudgets task_budgets(const std::vector<std::pair<std::string, TaskSeconds>>& refs, bool cpu,
                         const EvalOptions& opts);
// One final-timing measurement as the evaluation summary records it (raw samples included).
nlohmann::json measurement_json(const Measurement& m);
// The reference the validator compares with: for a context whose reference is the seed, the seed
// checkpoint's kernel built with its default configuration; else none is needed. The error says
// what is missing (no seed, or a seed that does not build).
Result<ReferenceSource> reference_source(Workspace& ws, const KernelContext& ctx, Backend& be,
                                         const DeviceFacts& dev,
                                         const std::filesystem::path& cache);
// The options of a final timing: the evaluation's timing policy and baseline, the deadline of a
// bench task (`budget`), the peak above which a result is rejected and the one % of peak is of.
FinalTimingOptions final_timing_options(const EvalOptions& opts, const TaskBudget& budget,
                                        const PeakInfo& peak);
// The top configurations an evaluation summary ranked ("top"), each parameter of `ctx` missing
// from one at its default: where the next search starts (a step's parent, a class's search).
std::vector<Config> top_configs(const nlohmann::json& summary, const KernelContext& ctx);

}  // namespace peak::detail
