#pragma once
// Pieces of an evaluation (engine/workspace.cpp) that the suite benchmark (engine/suite.cpp)
// uses the same way: the peak a kernel is measured against, the device lock, and the JSON form
// of one measurement.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "context/context.h"
#include "tune/measure.h"
#include "util/device_lock.h"

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

}  // namespace peak::detail
