#include "backend/backend.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

#include <fmt/format.h>

#include "backend/kernel_params.h"

namespace peak {

expr::Env device_plan_env(const DeviceFacts& d) {
  return {
      {"compute_units", d.compute_units},
      {"max_threads", d.max_threads_per_group},
      {"shared_memory", d.shared_memory_per_group},
      {"shared_memory_optin", std::max(d.shared_memory_per_group_optin, d.shared_memory_per_group)},
      {"subgroup_size", d.subgroup_size},
      {"l2_bytes", d.l2_bytes}};
}

std::vector<std::pair<std::string, std::string>> Backend::prompt_facts(const DeviceFacts& d) const {
  std::vector<std::pair<std::string, std::string>> f = {
      {"name", d.name},
      {"compute units (`compute_units` in plans)", std::to_string(d.compute_units)},
      {"subgroup (warp) size (`subgroup_size`)", std::to_string(d.subgroup_size)},
      {"shared memory per block, bytes (`shared_memory`)",
       std::to_string(d.shared_memory_per_group)}};
  if (d.shared_memory_per_group_optin > d.shared_memory_per_group)
    f.push_back({"shared memory per block with opt-in, bytes (`shared_memory_optin`)",
                 std::to_string(d.shared_memory_per_group_optin)});
  f.push_back({"max threads per block (`max_threads`)", std::to_string(d.max_threads_per_group)});
  if (d.l2_bytes > 0) f.push_back({"L2 cache, bytes (`l2_bytes`)", std::to_string(d.l2_bytes)});
  if (!d.arch.empty()) f.push_back({"architecture", d.arch});
  return f;
}

namespace {

// The task's arrays and the plan's scratch buffers must fit the device's memory (when the device
// facts give it): a run could not allocate them (launch_failed).
PlanResult check_device_memory(const LaunchPlan& plan, const KernelContext& ctx, const Shape& shape,
                               const DeviceFacts& device) {
  PlanResult pr;
  if (device.memory_bytes <= 0) return pr;
  int64_t arrays = 0;
  if (auto sizes = array_sizes(ctx, shape))
    for (const auto& a : ctx.arrays)
      arrays +=
          sizes->count(a.name) ? sizes->at(a.name) * static_cast<int64_t>(dtype_size(a.dtype)) : 0;
  const int64_t scratch = plan.scratch_bytes();
  if (scratch + arrays <= device.memory_bytes) return pr;
  pr.disposition = Disposition::launch_failed;
  pr.message = fmt::format(
      "the plan's scratch buffers ({} bytes) and the arrays ({} bytes) need more memory than {} "
      "has ({} bytes)",
      scratch, arrays, device.name.empty() ? "the device" : device.name, device.memory_bytes);
  return pr;
}

}  // namespace

PlanResult Backend::plan(const KernelContext& ctx, const SourceRegions& source, const Shape& shape,
                         const Config& config, const DeviceFacts& device,
                         const BuildResult& build) {
  PlanResult pr;
  std::string file = ctx.source_file.empty() ? "kernel" + source_extension() : ctx.source_file;
  auto parsed = parse_plan(source, file);
  if (!parsed) {
    pr.disposition = Disposition::compile_failed;
    pr.message = parsed.error();
    return pr;
  }
  expr::Env env = plan_env(ctx, source, shape, config, device_plan_env(device));
  PlanOutcome o = evaluate_plan(*parsed, plan_dialect(), ctx, env);
  if (o.disposition != Disposition::passed) {
    pr.disposition = o.disposition;
    pr.message = fmt::format("{} (shape {}{})", o.message, shape.text(),
                             config.empty() ? "" : ", " + config_text(config));
    return pr;
  }
  PlanResult r = resolve_plan(o.plan, build, device);
  if (r.disposition == Disposition::passed) r = check_device_memory(o.plan, ctx, shape, device);
  if (r.disposition == Disposition::passed && plan_dialect().args)
    r = check_plan_args(o.plan, build);
  if (r.disposition != Disposition::passed) {
    r.message = fmt::format("{} (shape {}{})", r.message, shape.text(),
                            config.empty() ? "" : ", " + config_text(config));
    return r;
  }
  r.plan = o.plan.to_json();
  return r;
}

void add_driver_statistics(nlohmann::json& resources, const nlohmann::json& statistics) {
  if (!statistics.is_object() || statistics.empty()) return;
  if (!resources.is_object()) resources = nlohmann::json::object();
  if (!resources.contains("kernels") || !resources["kernels"].is_object())
    resources["kernels"] = nlohmann::json::object();
  for (const auto& [entry, stats] : statistics.items()) {
    if (!stats.is_object()) continue;
    nlohmann::json& k = resources["kernels"][entry];
    if (!k.is_object()) k = nlohmann::json::object();
    k["driver_statistics"] = stats;
    auto it = stats.find("Register Count");
    if (it != stats.end() && it->is_number_integer() && !k.contains("registers")) {
      const int64_t regs = it->get<int64_t>();
      k["registers"] = regs;
      resources["max_registers"] = std::max(resources.value("max_registers", int64_t{0}), regs);
    }
    // NVIDIA's local memory per thread (spilled registers, dynamically indexed arrays). Driver
    // 580 sets bit 36 of the value: the bytes are its low 32 bits (0 without local memory).
    it = stats.find("Local Memory Size");
    if (it != stats.end() && it->is_number_unsigned() && !k.contains("local_bytes")) {
      const int64_t bytes = static_cast<int64_t>(it->get<uint64_t>() & 0xffffffffULL);
      k["local_bytes"] = bytes;
      resources["max_local_bytes"] =
          std::max(resources.value("max_local_bytes", int64_t{0}), bytes);
    }
  }
}

std::string config_text(const Config& c) {
  std::string s;
  for (const auto& [name, value] : c) {  // std::map: sorted by name
    if (!s.empty()) s += ' ';
    s += name + "=" + std::to_string(value);
  }
  return s;
}

Config config_from_json(const nlohmann::json& j) {
  Config c;
  if (j.is_object())
    for (const auto& [k, v] : j.items())
      if (v.is_number_integer()) c[k] = v.get<int64_t>();
  return c;
}

nlohmann::json config_json(const Config& c) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, value] : c) j[name] = value;
  return j;
}

namespace {

// One device of the table. `match` holds name substrings (case-insensitive), any of which selects
// the row; rows are tried in order, so a more specific row comes before a general one.
// Compute peaks: FP32 without tensor cores (AMD: FP32 matrix, the higher of vector and matrix),
// TF32, FP16 (FP32 accumulation) and FP8 on tensor / matrix cores, dense (no sparsity), in
// TFLOP/s; memory bandwidth in GB/s. 0 = not applicable or not documented.
struct PeakRow {
  std::string_view device;
  std::array<std::string_view, 3> match;
  double fp32, tf32, fp16, memory, fp8 = 0;
};

constexpr PeakRow kPeaks[] = {
    // NVIDIA Hopper
    {"NVIDIA H100 PCIe", {"H100 PCIe"}, 51.2, 378.0, 756.0, 2039.0, 1513.0},
    {"NVIDIA H100 NVL", {"H100 NVL"}, 60.0, 417.5, 835.5, 3900.0, 1670.5},
    {"NVIDIA GH200 144GB HBM3e", {"GH200 144G"}, 66.9, 494.7, 989.4, 4900.0, 1979.0},
    {"NVIDIA GH200 (96GB HBM3)", {"GH200"}, 66.9, 494.7, 989.4, 4000.0, 1979.0},
    {"NVIDIA H200 NVL", {"H200 NVL"}, 60.0, 417.5, 835.5, 4800.0, 1670.5},
    {"NVIDIA H200 SXM", {"H200"}, 66.9, 494.7, 989.4, 4800.0, 1979.0},
    {"NVIDIA H100 SXM5", {"H100 SXM", "H100 80GB HBM3", "H100"}, 66.9, 494.7, 989.4, 3350, 1979},
    // NVIDIA Ampere
    {"NVIDIA A100 SXM4 40GB", {"A100-SXM4-40GB", "A100 SXM4 40GB"}, 19.5, 156.0, 312.0, 1555.0},
    {"NVIDIA A100 PCIe 40GB", {"A100-PCIE-40GB", "A100 PCIe 40GB"}, 19.5, 156.0, 312.0, 1555.0},
    {"NVIDIA A100 PCIe 80GB", {"A100 80GB PCIe", "A100-PCIE-80GB"}, 19.5, 156.0, 312.0, 1935.0},
    {"NVIDIA A100 SXM4 80GB", {"A100"}, 19.5, 156.0, 312.0, 2039.0},
    {"NVIDIA RTX A6000", {"RTX A6000"}, 38.7, 77.4, 154.8, 768.0},
    // NVIDIA Ada
    {"NVIDIA L40S", {"L40S"}, 91.6, 183.0, 362.05, 864.0, 733.0},
    {"NVIDIA L40", {"L40"}, 90.5, 90.5, 181.05, 864.0, 362.05},
    {"NVIDIA GeForce RTX 4090", {"RTX 4090"}, 82.6, 82.6, 165.2, 1008.0},
    // AMD CDNA2 (no TF32)
    {"AMD Instinct MI250X", {"MI250X", "MI200"}, 95.7, 0.0, 383.0, 3276.8},
    {"AMD Instinct MI250", {"MI250"}, 90.5, 0.0, 362.1, 3276.8},
    {"AMD Instinct MI210", {"MI210"}, 45.3, 0.0, 181.0, 1638.4},
    // Qualcomm (Snapdragon X Elite)
    {"Qualcomm Adreno X1-85", {"Adreno X1-85", "X1-85"}, 4.6, 0.0, 0.0, 135.0},
};

std::string lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return r;
}

}  // namespace

PrecisionPeak precision_peak(const DevicePeaks& peaks, size_t element_bytes) {
  if (element_bytes == 1) return {peaks.fp8_tflops, "FP8"};
  if (element_bytes == 2) return {peaks.fp16_tflops, "FP16"};
  return {peaks.fp32_tflops, "FP32"};
}

std::optional<DevicePeaks> documented_peaks(const std::string& device_name) {
  const std::string name = lower(device_name);
  if (name.empty()) return std::nullopt;
  for (const PeakRow& row : kPeaks) {
    for (std::string_view m : row.match) {
      if (m.empty() || name.find(lower(m)) == std::string::npos) continue;
      DevicePeaks p;
      p.device = std::string(row.device);
      p.fp32_tflops = row.fp32;
      p.tf32_tflops = row.tf32;
      p.fp16_tflops = row.fp16;
      p.fp8_tflops = row.fp8;
      p.memory_gbs = row.memory;
      p.source = "vendor datasheet";
      return p;
    }
  }
  return std::nullopt;
}

}  // namespace peak
