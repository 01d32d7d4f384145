#pragma once
// Device facts the tests of several modules plan and prune against.
#include <string>

#include "runner/protocol.h"

namespace peak::testing {

// The facts an H100 SXM reports (peak-runner-cuda's probe); `backend` names the runner that
// reports them (the HIP backend targets the same card through its CUDA mapping).
inline DeviceFacts h100_facts(std::string backend = "cuda") {
  DeviceFacts d;
  d.backend = std::move(backend);
  d.name = "NVIDIA H100 80GB HBM3";
  d.vendor = "NVIDIA";
  d.arch = "sm_90a";
  d.compute_units = 132;
  d.subgroup_size = 32;
  d.shared_memory_per_group = 49152;
  d.shared_memory_per_group_optin = 232448;
  d.max_threads_per_group = 1024;
  d.l2_bytes = 52428800;
  d.extra["registers_per_block"] = "65536";
  return d;
}

}  // namespace peak::testing
