#pragma once
// NVML (the NVIDIA management library), loaded at run time with dlopen so that peak needs neither
// its headers nor the library itself: every function answers 0 / false when NVML is absent.
// Used by the CUDA runner to read the SM clock and throttle reasons around timed samples.
#include <cstdint>
#include <string>

namespace peak {

// True when libnvidia-ml.so.1 loaded and nvmlInit_v2 succeeded (tried once, on first use).
bool nvml_available();
// Current SM clock in MHz of the device with NVML index `device_index`; 0 when unknown.
double nvml_sm_clock_mhz(int device_index);
// Current clock throttle (event) reasons bit mask (NVML's nvmlClocksThrottleReason* bits); 0 when
// unknown or none.
uint64_t nvml_throttle_reasons(int device_index);
// The same, for the device with this PCI bus id ("0000:3B:00.0", as cudaDeviceGetPCIBusId
// writes it): NVML and CUDA may number devices differently.
double nvml_sm_clock_mhz_pci(const std::string& pci_bus_id);
uint64_t nvml_throttle_reasons_pci(const std::string& pci_bus_id);

}  // namespace peak
