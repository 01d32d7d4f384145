#pragma once
// Pruning before timing, and a cheap performance model. After a configuration is compiled, the
// compiler's resource report (registers per thread, static shared memory, threads per group) and
// the launch plan of the tuning shape (groups) are checked against the device's limits: a
// configuration that cannot run is discarded with the reason, before validation and timing. The
// same rules apply to the outcomes a simulation replays, so a cache recorded before a rule
// existed is pruned as a live run would be.
//
// The model estimates, per configuration: occupancy (groups and threads resident per compute
// unit), wave efficiency (how evenly the groups fill the compute units), and arithmetic
// intensity per level of the memory hierarchy (DRAM: the context's FLOPs over its compulsory
// bytes; group: FLOPs over the bytes a group loads from L2, for a matmul from the output tile
// each group computes; thread: FLOPs over the operands a thread reads per output tile).
#include <string>

#include <nlohmann/json.hpp>

#include "backend/backend.h"

namespace peak {

// What a configuration uses; 0 when unknown.
struct ResourceUsage {
  int64_t threads = 0;       // per group
  int64_t registers = 0;     // per thread (the largest over the artifact's kernels)
  int64_t shared_bytes = 0;  // static shared memory per group (the largest)
  int64_t groups = 0;        // groups of the tuning shape's launch
  int64_t groups_x = 0, groups_y = 0;
  bool spills = false;
};
// From a build's resources (HLSL: threads, shared_bytes; CUDA: kernels.*.registers and
// shared_bytes) and a launch plan (groups or grid, and threads or block, when it has them).
ResourceUsage resource_usage(const nlohmann::json& resources, const nlohmann::json& launch);

// The device limits the rules use; 0 when the device does not report one.
struct DeviceLimits {
  std::string backend;
  int64_t threads_per_group = 0;
  int64_t shared_per_group = 0;  // the opt-in maximum where there is one
  int64_t registers_per_group = 0;
  int64_t registers_per_unit = 0;
  int64_t threads_per_unit = 0;
  int64_t shared_per_unit = 0;
  int64_t units = 0;  // SMs / compute units
  int64_t subgroup = 32;
};
DeviceLimits device_limits(const DeviceFacts& d);

struct Occupancy {
  int64_t groups_per_unit = -1;  // -1 = unknown, 0 = none fits
  double fraction = 0;           // resident threads / the unit's thread capacity (0 = unknown)
  std::string limiter;           // "threads", "registers", "shared memory"
};
Occupancy occupancy(const ResourceUsage& u, const DeviceLimits& l);

// Why the configuration cannot run on the device ("" when nothing rules it out): threads per
// group over the limit, shared memory over the (opt-in) limit, registers x threads over the
// registers of a group, or no group fitting on a compute unit.
std::string resource_prune_reason(const ResourceUsage& u, const DeviceLimits& l);

// Work of one launch, from the context's expressions on the tuning shape.
struct Work {
  double flops = 0, bytes = 0;
  bool matmul = false;  // the family has an output-tile model (TileWork): m, n, k below
  double m = 0, n = 0, k = 0, element_bytes = 4;
};
Work work_of(const KernelContext& ctx, const Shape& shape);
nlohmann::json work_to_json(const Work& w);
Work work_from_json(const nlohmann::json& j);

struct ModelEstimate {
  Occupancy occupancy;
  double wave_efficiency = 0;  // groups / (waves x resident group slots); 0 = unknown
  double intensity_dram = 0;   // FLOP per byte; 0 = unknown
  double intensity_group = 0;
  double intensity_thread = 0;
  // The product of the known factors, each in (0, 1]: wave efficiency, and the group-level
  // intensity over the device's ridge point (documented FLOP rate over DRAM bandwidth) capped at
  // 1. Higher is better; 1 when nothing is known.
  double score = 1;
  nlohmann::json to_json() const;
};
ModelEstimate estimate(const ResourceUsage& u, const DeviceLimits& l, const Work& w,
                       double ridge_flop_per_byte);
// The device's ridge point (the documented FLOP rate of inputs of `element_bytes`: FP8 for 1, FP16
// for 2, else FP32, over DRAM bandwidth); 0 = unknown.
double ridge_point(const DeviceFacts& d, double element_bytes);

}  // namespace peak
