#pragma once
// Runner-side device interface: what the runner needs from a GPU API. Implemented by the Vulkan
// device (backend/hlsl/vk_device_main.cpp) and the CUDA device (backend/cuda/cuda_device_main.cpp),
// each linked into its own runner executable; runner/main.cpp holds everything else (inputs,
// poisoning, integrity checks, the timing loop).
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "context/inputs.h"
#include "plan/launch_plan.h"
#include "runner/protocol.h"

namespace peak {

struct DeviceBuffer {
  void* handle = nullptr;  // implementation-defined
  size_t bytes = 0;        // the whole allocation: the runner asks for each array's bytes
                           // (rounded up to 4) plus a guard zone (runner/execute.h)
};

// The buffers of one task: its arrays (kernel.toml order) and its plan's scratch buffers.
struct TaskBuffers {
  std::vector<DeviceBuffer> arrays;
  std::vector<DeviceBuffer> scratch;
};

struct LaunchOutcome {
  Disposition disposition = Disposition::passed;  // passed, invalid_config, launch_failed,
                                                  // crashed (sticky error), forbidden_api
  std::string message;
  double device_ms = 0;  // device timers (events / timestamps) tight around the plan's steps
  double host_ms = 0;    // host clock around the steps and the wait for their end
  // Device-wide work still running after the end mark (CUDA: a synchronization of the whole
  // device after the end event found it busy): flagged, outside the timed window.
  bool outlived = false;
};

class LoadedKernel {
 public:
  virtual ~LoadedKernel() = default;
  // What the driver says of the code it made of each entry point (TaskResult::kernel_statistics);
  // empty when it says nothing.
  virtual json statistics() const { return json::object(); }
};

class Device {
 public:
  virtual ~Device() = default;
  virtual DeviceFacts facts() = 0;
  // Seconds the device's start-up spent, by step ({"context": 0.12, ...}); the runner reports
  // them before its first task (protocol event "started").
  virtual json startup_seconds() const { return json::object(); }
  // FP32 FMA throughput in TFLOP/s from a microbenchmark kernel.
  virtual double measure_fp32_tflops() = 0;

  virtual Result<DeviceBuffer> alloc(size_t bytes) = 0;
  virtual void free(DeviceBuffer& b) = 0;
  virtual Status upload(DeviceBuffer& b, const void* data, size_t bytes) = 0;
  virtual Status download(const DeviceBuffer& b, void* data, size_t bytes) = 0;
  virtual Status fill_u32(DeviceBuffer& b, uint32_t word) = 0;  // poison
  // Fresh inputs made on the device: `count` elements of `g` (context/inputs.h: the bytes that
  // run_generator gives), then `tail` (the guard bytes up to the allocation's end). A device
  // whose generates() is false has no generator, and one whose can_generate() is false for an
  // array (of `bytes` with its tail) cannot make that one; the runner then generates on the host
  // and uploads.
  virtual bool generates() { return false; }
  virtual bool can_generate(const InputGenerator& /*g*/, size_t /*bytes*/) { return true; }
  virtual Status generate(DeviceBuffer& /*b*/, const InputGenerator& /*g*/, int64_t /*count*/,
                          const std::vector<uint8_t>& /*tail*/) {
    return Status::error("this device has no input generator");
  }
  // The bytes of the elements at `positions` (each `element_bytes` long) of `b`, in that order:
  // what a timed sample's check reads, instead of the whole array. By default the buffer is read
  // up to the last position.
  virtual Status read_elements(const DeviceBuffer& b, size_t element_bytes,
                               const std::vector<int64_t>& positions, std::vector<uint8_t>& out) {
    int64_t last = -1;
    for (int64_t p : positions) last = std::max(last, p);
    std::vector<uint8_t> all(static_cast<size_t>(last + 1) * element_bytes);
    if (!all.empty())
      if (Status s = download(b, all.data(), all.size()); !s) return s;
    out.clear();
    for (int64_t p : positions)
      out.insert(out.end(), all.begin() + static_cast<std::ptrdiff_t>(p * element_bytes),
                 all.begin() + static_cast<std::ptrdiff_t>((p + 1) * element_bytes));
    return Status::ok();
  }

  // Loads the artifact's kernels that the plan launches. A failure may name its disposition:
  // "invalid_config: ..." (load_error() in runner/execute.h); otherwise the task is
  // launch_failed.
  virtual Result<std::unique_ptr<LoadedKernel>> load(const RunnerTask& task, const RunnerJob& job,
                                                     const LaunchPlan& plan) = 0;
  // Runs the plan's steps once, in order, on one stream / queue. `timed`: measure device_ms with
  // device timers recorded on that stream tight around the steps (nothing else in the window),
  // and host_ms.
  virtual LaunchOutcome launch(LoadedKernel& k, const RunnerTask& task, const RunnerJob& job,
                               const LaunchPlan& plan, TaskBuffers& buffers, bool timed) = 0;
  // The vendor library doing the same work (`name` as in RunnerTask::baseline); returns
  // disposition not_run when unknown for this device.
  virtual LaunchOutcome baseline(const std::string& name, const RunnerTask& task,
                                 const RunnerJob& job, std::vector<DeviceBuffer>& arrays,
                                 bool timed) = 0;
  // The same-traffic copy (RunnerTask::copy_bytes): the device's ways of copying device memory
  // to device memory, by name ("memcpy", "vector-kernel", "vulkan-copy", "vector-shader"); empty
  // when it has none. The runner times every one and reports the fastest.
  virtual std::vector<std::string> copy_methods() { return {}; }
  // Copies the first `bytes` (a multiple of 16) of `src` to `dst` with copy method `method`,
  // once, on the stream / queue of `launch`; `timed`: measured as `launch` measures (device
  // timers tight around the copy, and host_ms). Disposition not_run for a method the device
  // does not have.
  virtual LaunchOutcome copy(const std::string& method, const DeviceBuffer& /*src*/,
                             DeviceBuffer& /*dst*/, size_t /*bytes*/, bool /*timed*/) {
    LaunchOutcome o;
    o.disposition = Disposition::not_run;
    o.message = "this device has no copy method '" + method + "'";
    return o;
  }
  // Evicts caches between timed samples (writes a buffer twice the L2 size).
  virtual void flush_caches() = 0;
  // Current SM/graphics clock in MHz, 0 when unknown.
  virtual double clock_mhz() = 0;
  // Device memory in use by the whole device in bytes (total minus free), -1 when unknown; the
  // runner compares readings around loading and timing (the candidate's footprint).
  virtual int64_t memory_in_use() { return -1; }
  // True after an error that poisons the context (CUDA sticky errors, VK_ERROR_DEVICE_LOST):
  // the runner reports the task as crashed and exits so the parent starts a fresh one.
  virtual bool lost() = 0;
};

// Defined by each runner's device file. Fails with a message when no usable device exists.
Result<std::unique_ptr<Device>> make_device(const RunnerJob& job);

}  // namespace peak
