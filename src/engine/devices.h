#pragma once
// Several GPUs of one host (`--devices`, docs/scale-out.md): which devices a spec names. The
// tuning search of a step spreads over them (tune/tuner.h, DeviceLane), and so does the final
// timing of the best configuration: bench shape i on device i mod n, each against the vendor
// baseline on its own device, so that a shape is timed on the same device at every step. Devices
// of different models are never mixed: their times do not rank against each other.
#include <functional>
#include <string>
#include <vector>

#include "runner/protocol.h"
#include "util/result.h"

namespace peak {

// A parsed --devices spec: "all", device indices ("0,1"), or a name substring ("H100": every
// device whose name holds it, letter case ignored).
struct DevicesSpec {
  bool all = false;
  std::vector<int> indices;
  std::string name;
};
// Input errors say what to write.
Result<DevicesSpec> parse_devices_spec(const std::string& spec);

struct SelectedDevice {
  std::string selector;  // the index it was probed by ("0")
  DeviceFacts facts;
};

struct DeviceSelection {
  std::vector<SelectedDevice> devices;  // at least one
  // Devices found but not used ("2: llvmpipe (another model)"), for `all`.
  std::vector<std::string> left_out;
  // "2 devices: 0 (NVIDIA H100 80GB HBM3), 1 (NVIDIA H100 80GB HBM3); bench shapes in turn"
  std::string text() const;
};

// Probes one device by selector ("" = the best, "3" = index 3). Called from several threads at
// once for a list of indices.
using DeviceProbe = std::function<Result<DeviceFacts>(const std::string& selector)>;

// The most devices `all` or a name looks for (indices are probed from 0 until one is missing).
inline constexpr int kMaxDevices = 64;

// The devices `spec` names on this host. Indices: each must exist (probed all at once), and all
// must be of one model (an input error names them otherwise). `all`: the devices of the best
// device's model, the others left out and named. A name: the devices whose name holds it, all of
// one model.
Result<DeviceSelection> select_devices(const std::string& spec, const DeviceProbe& probe);

// The selector a runner needs to reach a probed device: the index the probe reported (Vulkan's
// device_index, CUDA's cuda_device_index), else `selector`.
std::string runner_selector(const DeviceFacts& facts, const std::string& selector);
// What CUDA_VISIBLE_DEVICES a CUDA runner of the probed device gets, so that its start-up brings
// up that device alone (the driver's start-up grows with every device it sees): the device's
// entry of the parent's CUDA_VISIBLE_DEVICES (`parent`, null when unset), else its index. The
// runner then selects device 0. nullopt for a device the probe gave no CUDA index.
std::optional<std::string> cuda_visible_device(const DeviceFacts& facts, const char* parent);

}  // namespace peak
