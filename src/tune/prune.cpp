#include "tune/prune.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "family/family.h"

namespace peak {

namespace {

using json = nlohmann::json;

int64_t int_of(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return 0;
  return j[key].get<int64_t>();
}

// The product of an array of dimensions ([x, y, z]); 0 when it is not one.
int64_t product(const json& j) {
  if (!j.is_array() || j.empty()) return 0;
  int64_t p = 1;
  for (const auto& v : j) {
    if (!v.is_number()) return 0;
    p *= v.get<int64_t>();
  }
  return p;
}

int64_t extra_int(const DeviceFacts& d, const char* key) {
  auto it = d.extra.find(key);
  if (it == d.extra.end()) return 0;
  return std::strtoll(it->second.c_str(), nullptr, 10);
}

int64_t ceil_div(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : 0; }

// Registers a group holds. CUDA allocates them per warp in units of 256.
int64_t group_registers(const ResourceUsage& u, const DeviceLimits& l) {
  if (u.registers <= 0 || u.threads <= 0) return 0;
  if (l.backend == "cuda") {
    int64_t per_warp = ceil_div(u.registers * l.subgroup, 256) * 256;
    return per_warp * ceil_div(u.threads, l.subgroup);
  }
  return u.registers * u.threads;
}

}  // namespace

ResourceUsage resource_usage(const json& resources, const json& launch_in) {
  ResourceUsage u;
  if (resources.is_object()) {
    u.threads = int_of(resources, "threads");
    if (u.threads == 0 && resources.contains("local_size"))
      u.threads = product(resources["local_size"]);
    if (u.threads == 0) u.threads = int_of(resources, "max_threads");  // HLSL: per module
    u.shared_bytes =
        std::max(int_of(resources, "shared_bytes"), int_of(resources, "max_shared_bytes"));
    u.registers = int_of(resources, "max_registers");
    u.spills = resources.value("spills", false);
    if (resources.contains("kernels") && resources["kernels"].is_object())
      for (const auto& [name, k] : resources["kernels"].items()) {
        u.registers = std::max(u.registers, int_of(k, "registers"));
        u.shared_bytes = std::max(u.shared_bytes, int_of(k, "shared_bytes"));
        u.spills = u.spills || int_of(k, "spill_stores") > 0 || int_of(k, "spill_loads") > 0;
      }
  }
  json launch = launch_in;
  if (launch.is_object() && launch.contains("launches") && launch["launches"].is_array() &&
      !launch["launches"].empty())
    launch = launch["launches"][0];
  // A launch plan (docs/launch-plan.md): its first launch step.
  if (launch.is_object() && launch.contains("steps") && launch["steps"].is_array()) {
    json first = json::object();
    for (const auto& st : launch["steps"])
      if (st.is_object() && st.value("op", "") == "launch") {
        first = st;
        break;
      }
    launch = first;
  }
  if (launch.is_object()) {
    for (const char* key : {"groups", "grid"})
      if (launch.contains(key) && launch[key].is_array()) {
        u.groups = product(launch[key]);
        const json& g = launch[key];
        if (g.size() >= 2 && g[0].is_number() && g[1].is_number()) {
          u.groups_x = g[0].get<int64_t>();
          u.groups_y = g[1].get<int64_t>();
        }
      }
    if (u.threads == 0) u.threads = int_of(launch, "threads");
    if (u.threads == 0 && launch.contains("block")) u.threads = product(launch["block"]);
  }
  // The launched kernel's own registers and shared memory where the build reports them: another
  // kernel of the module (one the plan launches for other shapes, with other blocks) does not
  // share this launch's register file.
  if (launch.is_object() && launch.contains("kernel") && launch["kernel"].is_string() &&
      resources.is_object() && resources.contains("kernels") && resources["kernels"].is_object()) {
    auto k = resources["kernels"].find(launch["kernel"].get<std::string>());
    if (k != resources["kernels"].end() && k->is_object() && int_of(*k, "registers") > 0) {
      u.registers = int_of(*k, "registers");
      u.shared_bytes = int_of(*k, "shared_bytes");
      u.spills = int_of(*k, "spill_stores") > 0 || int_of(*k, "spill_loads") > 0;
    }
  }
  return u;
}

DeviceLimits device_limits(const DeviceFacts& d) {
  DeviceLimits l;
  l.backend = d.backend;
  l.threads_per_group = d.max_threads_per_group;
  l.shared_per_group = std::max(d.shared_memory_per_group, d.shared_memory_per_group_optin);
  l.registers_per_group = extra_int(d, "registers_per_block");
  l.registers_per_unit = extra_int(d, "registers_per_sm");
  l.threads_per_unit = extra_int(d, "max_threads_per_sm");
  l.shared_per_unit = extra_int(d, "shared_memory_per_sm");
  l.units = d.compute_units;
  l.subgroup = d.subgroup_size > 0 ? d.subgroup_size : 32;
  return l;
}

Occupancy occupancy(const ResourceUsage& u, const DeviceLimits& l) {
  Occupancy o;
  if (u.threads <= 0 || l.threads_per_unit <= 0) return o;
  const int64_t rounded = ceil_div(u.threads, l.subgroup) * l.subgroup;
  o.groups_per_unit = l.threads_per_unit / rounded;
  o.limiter = "threads";
  if (int64_t regs = group_registers(u, l); regs > 0 && l.registers_per_unit > 0) {
    int64_t by_regs = l.registers_per_unit / regs;
    if (by_regs < o.groups_per_unit) {
      o.groups_per_unit = by_regs;
      o.limiter = "registers";
    }
  }
  if (u.shared_bytes > 0 && l.shared_per_unit > 0) {
    int64_t by_shared = l.shared_per_unit / u.shared_bytes;
    if (by_shared < o.groups_per_unit) {
      o.groups_per_unit = by_shared;
      o.limiter = "shared memory";
    }
  }
  o.fraction =
      static_cast<double>(o.groups_per_unit * rounded) / static_cast<double>(l.threads_per_unit);
  return o;
}

std::string resource_prune_reason(const ResourceUsage& u, const DeviceLimits& l) {
  if (l.threads_per_group > 0 && u.threads > l.threads_per_group)
    return fmt::format("{} threads per group exceed the device's limit of {}", u.threads,
                       l.threads_per_group);
  if (l.shared_per_group > 0 && u.shared_bytes > l.shared_per_group)
    return fmt::format("{} bytes of shared memory per group exceed the device's limit of {}",
                       u.shared_bytes, l.shared_per_group);
  if (int64_t regs = group_registers(u, l);
      regs > 0 && l.registers_per_group > 0 && regs > l.registers_per_group)
    return fmt::format(
        "{} registers per thread x {} threads need {} registers; a group has at most {}",
        u.registers, u.threads, regs, l.registers_per_group);
  Occupancy o = occupancy(u, l);
  if (o.groups_per_unit == 0)
    return fmt::format("no group fits on a compute unit (limited by {})", o.limiter);
  return "";
}

Work work_of(const KernelContext& ctx, const Shape& shape) {
  Work w;
  if (auto bound = bind_shape(ctx, shape)) {
    if (bound->flops) w.flops = *bound->flops;
    if (bound->bytes) w.bytes = *bound->bytes;
  }
  if (auto t = family_of(ctx).tile_work(ctx, shape)) {
    w.matmul = true;
    w.m = t->m;
    w.n = t->n;
    w.k = t->k;
    w.element_bytes = t->element_bytes;
  }
  return w;
}

json work_to_json(const Work& w) {
  return {{"flops", w.flops},
          {"bytes", w.bytes},
          {"matmul", w.matmul},
          {"m", w.m},
          {"n", w.n},
          {"k", w.k},
          {"element_bytes", w.element_bytes}};
}

Work work_from_json(const json& j) {
  Work w;
  if (!j.is_object()) return w;
  w.flops = j.value("flops", 0.0);
  w.bytes = j.value("bytes", 0.0);
  w.matmul = j.value("matmul", false);
  w.m = j.value("m", 0.0);
  w.n = j.value("n", 0.0);
  w.k = j.value("k", 0.0);
  w.element_bytes = j.value("element_bytes", 4.0);
  return w;
}

ModelEstimate estimate(const ResourceUsage& u, const DeviceLimits& l, const Work& w, double ridge) {
  ModelEstimate e;
  e.occupancy = occupancy(u, l);
  if (u.groups > 0 && l.units > 0) {
    const int64_t slots = l.units * std::max<int64_t>(e.occupancy.groups_per_unit, 1);
    const int64_t waves = ceil_div(u.groups, slots);
    e.wave_efficiency = static_cast<double>(u.groups) / static_cast<double>(waves * slots);
  }
  if (w.bytes > 0) e.intensity_dram = w.flops / w.bytes;
  if (w.matmul && u.groups > 0) {
    // The output tile of a group: from a 2-D grid when there is one, else square.
    double bm = 0, bn = 0;
    if (u.groups_x > 0 && u.groups_y > 0) {
      bn = std::ceil(w.n / static_cast<double>(u.groups_x));
      bm = std::ceil(w.m / static_cast<double>(u.groups_y));
    } else {
      bm = bn = std::sqrt(w.m * w.n / static_cast<double>(u.groups));
    }
    // Per step of K a group loads a column of A's tile and a row of B's: (bm + bn) elements
    // for 2 * bm * bn FLOPs.
    e.intensity_group = 2 * bm * bn / ((bm + bn) * w.element_bytes);
    if (u.threads > 0) {
      double t = std::max(1.0, bm * bn / static_cast<double>(u.threads));
      e.intensity_thread = std::sqrt(t) / w.element_bytes;
    }
  }
  e.score = e.wave_efficiency > 0 ? e.wave_efficiency : 1;
  if (ridge > 0 && e.intensity_group > 0) e.score *= std::min(1.0, e.intensity_group / ridge);
  return e;
}

double ridge_point(const DeviceFacts& d, double element_bytes) {
  auto p = documented_peaks(d.name);
  if (!p || p->memory_gbs <= 0) return 0;
  double tflops = precision_peak(*p, static_cast<size_t>(element_bytes)).tflops;
  return tflops * 1e12 / (p->memory_gbs * 1e9);
}

json ModelEstimate::to_json() const {
  return {{"groups_per_unit", occupancy.groups_per_unit},
          {"occupancy", occupancy.fraction},
          {"limiter", occupancy.limiter},
          {"wave_efficiency", wave_efficiency},
          {"intensity_dram", intensity_dram},
          {"intensity_group", intensity_group},
          {"intensity_thread", intensity_thread},
          {"score", score}};
}

}  // namespace peak
