#pragma once
// The runner protocol: peak (the parent) starts a runner executable (peak-runner for Vulkan,
// peak-runner-cuda for CUDA), writes one job document (JSON) on its stdin, and reads one JSON
// object per line from its stdout:
//   {"event":"probe","device":{...DeviceFacts...}}          (mode "probe")
//   {"event":"started","seconds":{"job":0.31,...}}          once started: seconds since the
//                                                           process began ("job") and per
//                                                           start-up step of the device
//   {"event":"begin","id":"..."}                            before each task
//   {"event":"result", ...TaskResult...}                    after each task
//   {"event":"done"}                                        at the end
// The job is one line (compact JSON) on stdin, or the whole of stdin. A job with "hold" reports
// "started" once its device is up and waits for the line "go" on stdin before its first task.
// A task that never reports its result (crash, hang) is charged to the task named by the last
// "begin"; the parent restarts a fresh runner for the remaining tasks (runner/client.h).
// The runner never judges correctness or computes statistics: it returns raw output bytes (in
// files) and raw timing samples; the parent compares and summarizes.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "context/bound.h"
#include "context/context.h"
#include "util/disposition.h"

namespace peak {

inline constexpr int kRunnerProtocolVersion = 2;
inline constexpr size_t kMaxKernelStatistics = 64;
using json = nlohmann::json;

// Exit statuses of a runner (anything else, or a signal, is a crash).
inline constexpr int kRunnerExitBadJob = 2;      // the job document was refused (stderr says why)
inline constexpr int kRunnerExitDeviceLost = 3;  // after a task that lost the device: restart
inline constexpr int kRunnerExitNoDevice = 4;    // no usable device (stderr says why)

// JSON of the context types a job carries. The *_from_json functions are lenient (a missing or
// mistyped field keeps its default); RunnerJob::from_json validates and reports errors.
json shape_to_json(const Shape& s);  // {"K":2048,"M":2048}
Shape shape_from_json(const json& j);
json initializer_to_json(const Initializer& i);  // {"kind":"uniform","a":-1,"b":1}
Initializer initializer_from_json(const json& j);
json array_spec_to_json(const ArraySpec& a);
ArraySpec array_spec_from_json(const json& j);
json scalar_spec_to_json(const ScalarSpec& s);
ScalarSpec scalar_spec_from_json(const json& j);

struct DeviceFacts {
  std::string backend;  // "hlsl", "cuda"
  std::string name;     // "NVIDIA H100 80GB HBM3", "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string vendor;
  std::string driver;       // driver version / name
  std::string api_version;  // Vulkan API version, CUDA runtime version
  std::string arch;         // "sm_90a" for CUDA; "" for Vulkan
  bool is_cpu = false;      // lavapipe and friends
  int compute_units = 0;    // SMs / CUs
  int subgroup_size = 0;
  int64_t shared_memory_per_group = 0;        // bytes (default limit)
  int64_t shared_memory_per_group_optin = 0;  // bytes (CUDA opt-in maximum)
  int64_t max_threads_per_group = 0;
  int64_t l2_bytes = 0;
  int64_t memory_bytes = 0;
  double clock_mhz = 0;
  double measured_fp32_tflops = 0;  // FMA-throughput microbenchmark (0 = not measured)
  std::map<std::string, std::string> extra;
  json to_json() const;
  static DeviceFacts from_json(const json& j);
};

struct TimingPolicy {
  int warmup = 3;
  int min_samples = 10;
  int max_samples = 100;
  double max_seconds = 5.0;         // sampling stops at this budget (per task)
  double target_rel_spread = 0.02;  // stop once (p75 - p25) / median is under this
  bool flush_l2 = true;             // write a buffer of twice the L2 before each sample
  // Every timed launch (warm-ups included) on inputs no earlier launch saw: fresh inputs from a
  // new seed before each one, in buffers that alternate between two allocations. The outputs of
  // every timed launch are read back at positions the runner picks after the launch.
  bool fresh_inputs = true;
  int check_elements = 32;  // random positions per output and timed launch (besides the corners)
  int full_checks = 1;      // timed launches whose whole output is kept, with the baseline's on
                            // the same inputs, for an element-by-element comparison
  json to_json() const;
  static TimingPolicy from_json(const json& j);
};

struct RunnerTask {
  std::string id;
  std::string artifact;  // path of the compiled artifact (SPIR-V module, cubin)
  json plan;             // the evaluated launch plan (LaunchPlan::to_json; plan/launch_plan.h)
  Shape shape;           // scalar values
  std::map<std::string, int64_t> sizes;  // elements per array
  uint64_t seed = 1;
  int variant = 0;     // input distribution variant (context/inputs.h)
  bool check = true;   // write outputs of a checked run to output_dir
  bool repeat = true;  // a second checked run with fresh poison; report if outputs differ
  std::optional<TimingPolicy> timing;  // time the kernel after checking
  std::string baseline;                // vendor baseline timed interleaved ("cublas"; "" = none)
  bool baseline_outputs = false;       // mode "reference": run the baseline and write its outputs
  // Bytes of memory traffic of one launch at this shape (the context's `bytes`; 0 = none). When
  // set and the task is timed, the runner also times a device-to-device copy that moves the same
  // traffic (copy_bytes / 2 read and copy_bytes / 2 written), interleaved with the candidate under
  // the same flush and fresh-input protocol: the speed of light of this kernel on this device.
  int64_t copy_bytes = 0;
  std::string output_dir;
  json to_json() const;
  static RunnerTask from_json(const json& j);
  // A task on a bound shape (its scalars and array sizes), with the defaults above otherwise.
  static RunnerTask for_shape(const BoundShape& bound) {
    RunnerTask t;
    t.shape = bound.shape;
    t.sizes = bound.sizes;
    return t;
  }
};

struct RunnerJob {
  int format = kRunnerProtocolVersion;
  std::string mode = "run";  // "run" or "probe"
  std::string device;        // device selector ("" = best: a discrete GPU, else a CPU device)
  bool microbench = false;   // probe: also measure FP32 FMA throughput
  // Start the device, report "started", then wait for the line "go" on stdin before the first
  // task (the parent takes the device lock in between; end of input: exit without running).
  bool hold = false;
  std::string family;
  std::vector<ArraySpec> arrays;
  std::vector<ScalarSpec> scalars;
  std::vector<RunnerTask> tasks;
  json to_json() const;
  static Result<RunnerJob> from_json(const json& j);
  // A "run" job for a kernel context (family, arrays, scalars), with no tasks yet.
  static RunnerJob for_context(const KernelContext& ctx) {
    RunnerJob job;
    job.family = ctx.family;
    job.arrays = ctx.arrays;
    job.scalars = ctx.scalars;
    return job;
  }
};

// The outputs of one timed launch at positions the runner chose after it ran; the parent checks
// them against a float64 reference of that launch's inputs.
struct TimedCheck {
  int sample = 0;     // 0-based index of the timed sample
  uint64_t seed = 0;  // the inputs were generate_array(spec, size, array_seed(seed, name), 0)
  std::map<std::string, std::vector<int64_t>> positions;  // per output array
  std::map<std::string, std::vector<double>> values;      // NaN for an unwritten (poison) element
};

// A timed launch whose whole output was kept, and the baseline's output on the same inputs.
struct FullCheck {
  int sample = 0;
  uint64_t seed = 0;
  std::map<std::string, std::string> candidate;  // array -> file
  std::map<std::string, std::string> baseline;
};

struct TaskResult {
  std::string id;
  Disposition disposition = Disposition::not_run;  // passed, invalid_config, launch_failed,
                                                   // crashed, timeout, inputs_modified,
                                                   // forbidden_api
  std::string message;
  bool nondeterministic = false;                      // the two checked runs wrote different bytes
  std::map<std::string, std::string> outputs;         // array -> file with raw output bytes
  std::map<std::string, std::string> timed_outputs;   // outputs after the last timed launch
  std::map<std::string, std::string> repeat_outputs;  // the second checked run's, when they differ
  std::vector<double> samples_ms;                     // device time per launch
  std::vector<double> host_ms;                        // host wall clock per launch (cross-check)
  std::vector<double> baseline_samples_ms;            // interleaved with the candidate
  std::vector<double> baseline_host_ms;
  // The same-traffic copy (RunnerTask::copy_bytes): device time per timed copy, by the fastest
  // method the runner has ("memcpy", "vector-kernel", "vulkan-copy", "vector-shader"); empty when
  // not timed.
  std::vector<double> copy_samples_ms;
  std::string copy_method;
  double clock_mhz_before = 0, clock_mhz_after = 0;
  int threads_before = 0, threads_after = 0;  // process threads around the launches
  bool guard_overwritten = false;  // bytes past the end of a buffer changed (out of bounds)
  bool outlived = false;           // device work was still running after a timed sample's end mark
  std::vector<TimedCheck> timed_checks;
  std::vector<FullCheck> full_checks;
  double input_ms = 0;  // host time generating and uploading fresh inputs (untimed)
  double load_ms = 0;   // host time loading the task's kernels (CUDA: modules; Vulkan: pipelines)
  int64_t module_bytes = -1;         // device memory the loaded kernels took (-1: unknown)
  int64_t memory_growth_bytes = -1;  // device memory in use after the timed loop minus before
  // What the driver says of the code it made of each loaded entry point, by entry point and
  // statistic name as the driver spells them: {"main": {"Register Count": 72}} (Vulkan:
  // VK_KHR_pipeline_executable_properties). Values are numbers or booleans; empty when the
  // driver says nothing. At most kMaxKernelStatistics entries of kMaxKernelStatistics each.
  json kernel_statistics = json::object();
  double seconds = 0;
  json to_json() const;
  json checks_json() const;
  json full_json() const;
  static TaskResult from_json(const json& j);
};

// Strict forms of TaskResult::from_json and DeviceFacts::from_json for the parent: a mistyped
// field or an unknown disposition is an error naming the field.
Result<TaskResult> parse_task_result(const json& j);
Result<DeviceFacts> parse_device_facts(const json& j);

}  // namespace peak
