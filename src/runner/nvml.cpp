#include "runner/nvml.h"

#include <dlfcn.h>

#include <mutex>

namespace peak {
namespace {

// The few NVML declarations peak needs (from NVML's public API, nvml.h).
using nvmlReturn_t = int;  // NVML_SUCCESS == 0
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr int kNvmlClockSm = 1;  // NVML_CLOCK_SM

struct Nvml {
  bool ok = false;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*by_index)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*by_pci)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*clock_info)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*throttle)(nvmlDevice_t, unsigned long long*) = nullptr;
};

template <typename F>
void bind(void* lib, F& f, const char* name) {
  f = reinterpret_cast<F>(::dlsym(lib, name));
}

const Nvml& nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    bind(lib, n.init, "nvmlInit_v2");
    bind(lib, n.by_index, "nvmlDeviceGetHandleByIndex_v2");
    bind(lib, n.by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
    bind(lib, n.clock_info, "nvmlDeviceGetClockInfo");
    bind(lib, n.throttle, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!n.throttle) bind(lib, n.throttle, "nvmlDeviceGetCurrentClocksThrottleReasons");
    n.ok = n.init && n.by_index && n.clock_info && n.init() == 0;
  });
  return n;
}

nvmlDevice_t by_index(int index) {
  const Nvml& n = nvml();
  nvmlDevice_t d = nullptr;
  if (!n.ok || index < 0 || n.by_index(static_cast<unsigned>(index), &d) != 0) return nullptr;
  return d;
}

nvmlDevice_t by_pci(const std::string& bus_id) {
  const Nvml& n = nvml();
  nvmlDevice_t d = nullptr;
  if (!n.ok || !n.by_pci || n.by_pci(bus_id.c_str(), &d) != 0) return nullptr;
  return d;
}

double sm_clock(nvmlDevice_t d) {
  unsigned mhz = 0;
  if (!d || nvml().clock_info(d, kNvmlClockSm, &mhz) != 0) return 0;
  return mhz;
}

uint64_t reasons(nvmlDevice_t d) {
  unsigned long long r = 0;
  if (!d || !nvml().throttle || nvml().throttle(d, &r) != 0) return 0;
  return r;
}

}  // namespace

bool nvml_available() { return nvml().ok; }
double nvml_sm_clock_mhz(int device_index) { return sm_clock(by_index(device_index)); }
uint64_t nvml_throttle_reasons(int device_index) { return reasons(by_index(device_index)); }
double nvml_sm_clock_mhz_pci(const std::string& pci_bus_id) { return sm_clock(by_pci(pci_bus_id)); }
uint64_t nvml_throttle_reasons_pci(const std::string& pci_bus_id) {
  return reasons(by_pci(pci_bus_id));
}

}  // namespace peak
