#pragma once
// Pieces of an evaluation (engine/workspace.cpp) that the suite benchmark (engine/suite.cpp)
// uses the same way: the peak a kernel is measured against, the device lock, and the JSON form
// of one measurement.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "context/context.h"
#include "engine/workspace.h"
#include "tune/measure.h"
#include "util/device_lock.h"
#include "validate/task_timeout.h"

namespace peak::detail {

struct PeakInfo {
  double tflops = 0;  // for % of peak
  std::string source;
  double limit = 0;  // for faster_than_peak
};
// The documented peak for the kernel's input precision, else the measured FP32 throughput.
PeakInfo peak_for(const KernelContext& ctx, const DeviceFacts& dev);
// The device's lock (one timer per device), with its label for the waiting line.
std::shared_ptr<DeviceLock> device_lock_for(const DeviceFacts& dev);
// One final-timing measurement as the evaluation summary records it (raw samples included).
nlohmann::json measurement_json(const Measurement& m);
// The reference the validator compares with: for a context whose reference is the seed, the seed
// checkpoint's kernel built with its default configuration; else none is needed. The error says
// what is missing (no seed, or a seed that does not build).
Result<ReferenceSource> reference_source(Workspace& ws, const KernelContext& ctx, Backend& be,
                                         const DeviceFacts& dev,
                                         const std::filesystem::path& cache);
// The options of a final timing: the evaluation's timing policy and baseline, the deadline of a
// bench task (`budget`), and the peak above which a result is rejected.
MeasureOptions final_timing_options(const EvalOptions& opts, const TaskBudget& budget,
                                    const PeakInfo& peak);
// The top configurations an evaluation summary ranked ("top"), each parameter of `ctx` missing
// from one at its default: where the next search starts (a step's parent, a class's search).
std::vector<Config> top_configs(const nlohmann::json& summary, const KernelContext& ctx);

}  // namespace peak::detail
