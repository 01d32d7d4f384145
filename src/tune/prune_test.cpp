#include "tune/prune.h"

#include <gtest/gtest.h>

#include "runner/device_testing.h"

namespace peak {
namespace {

using json = nlohmann::json;

// The limits of the project's H100 as its CUDA runner reports them
// (results/h100/probe-cuda.json).
DeviceFacts h100() {
  DeviceFacts d = testing::h100_facts();
  d.extra = {{"registers_per_block", "65536"},
             {"registers_per_sm", "65536"},
             {"max_threads_per_sm", "2048"},
             {"shared_memory_per_sm", "233472"}};
  return d;
}

TEST(ResourceUsage, ReadsHlslAndCudaReportsAndLaunchPlans) {
  auto hlsl = resource_usage({{"local_size", {16, 8, 1}}, {"threads", 128}, {"shared_bytes", 8192}},
                             {{"groups", {4, 8, 1}}});
  EXPECT_EQ(hlsl.threads, 128);
  EXPECT_EQ(hlsl.shared_bytes, 8192);
  EXPECT_EQ(hlsl.registers, 0);
  EXPECT_EQ(hlsl.groups, 32);
  // The HLSL backend's report of a module: its kernels and their largest group.
  auto module = resource_usage({{"kernels", {{"main", {{"threads", 256}, {"shared_bytes", 4096}}}}},
                                {"max_threads", 256},
                                {"max_shared_bytes", 4096}},
                               json::object());
  EXPECT_EQ(module.threads, 256);
  EXPECT_EQ(module.shared_bytes, 4096);
  EXPECT_EQ(hlsl.groups_x, 4);
  EXPECT_EQ(hlsl.groups_y, 8);
  json cuda = {{"kernels",
                {{"matmul", {{"registers", 80}, {"shared_bytes", 24576}, {"spill_stores", 0}}},
                 {"helper", {{"registers", 12}, {"shared_bytes", 0}, {"spill_loads", 8}}}}},
               {"max_registers", 80},
               {"max_shared_bytes", 24576},
               {"spills", true}};
  auto c = resource_usage(cuda, {{"launches", {{{"grid", {64, 32, 1}}, {"block", {32, 8, 1}}}}}});
  EXPECT_EQ(c.registers, 80);
  EXPECT_EQ(c.shared_bytes, 24576);
  EXPECT_TRUE(c.spills);
  EXPECT_EQ(c.threads, 256);
  EXPECT_EQ(c.groups, 2048);
  auto none = resource_usage(json::object(), json::object());
  EXPECT_EQ(none.threads, 0);
  EXPECT_EQ(none.groups, 0);
}

// A launch plan that names its kernel is judged by that kernel's registers: a module whose other
// kernel (launched for other shapes, with a smaller block) has more registers is not pruned for
// them.
TEST(ResourceUsage, ALaunchedKernelIsJudgedByItsOwnRegisters) {
  json cuda = {{"kernels",
                {{"attention_tc_d128", {{"registers", 204}, {"shared_bytes", 0}}},
                 {"attention_wgmma_d128", {{"registers", 168}, {"shared_bytes", 0}}}}},
               {"max_registers", 204}};
  json plan = {{"steps",
                {{{"op", "launch"},
                  {"kernel", "attention_wgmma_d128"},
                  {"grid", {16, 16, 1}},
                  {"block", {384, 1, 1}}}}}};
  auto u = resource_usage(cuda, plan);
  EXPECT_EQ(u.registers, 168);
  EXPECT_EQ(u.threads, 384);
  EXPECT_EQ(resource_prune_reason(u, device_limits(h100())), "");
  // The other kernel at the same block would not fit (204 x 384 > 65536).
  plan["steps"][0]["kernel"] = "attention_tc_d128";
  auto tc = resource_usage(cuda, plan);
  EXPECT_EQ(tc.registers, 204);
  EXPECT_NE(resource_prune_reason(tc, device_limits(h100())).find("registers"), std::string::npos);
}

TEST(Occupancy, FollowsTheLimitingResource) {
  DeviceLimits l = device_limits(h100());
  EXPECT_EQ(l.registers_per_group, 65536);
  EXPECT_EQ(l.shared_per_group, 232448);  // the opt-in limit
  ResourceUsage u;
  u.threads = 256;
  u.registers = 32;  // 32 x 32 = 1024 registers per warp, 8 warps: 8192 per group
  Occupancy o = occupancy(u, l);
  EXPECT_EQ(o.groups_per_unit, 8);  // 2048 threads / 256
  EXPECT_EQ(o.limiter, "threads");
  EXPECT_DOUBLE_EQ(o.fraction, 1.0);
  u.registers = 80;  // 80 x 32 = 2560 per warp, 20480 per group
  o = occupancy(u, l);
  EXPECT_EQ(o.groups_per_unit, 3);
  EXPECT_EQ(o.limiter, "registers");
  EXPECT_DOUBLE_EQ(o.fraction, 768.0 / 2048.0);
  u.shared_bytes = 100000;
  o = occupancy(u, l);
  EXPECT_EQ(o.groups_per_unit, 2);
  EXPECT_EQ(o.limiter, "shared memory");
  // Unknown threads: unknown occupancy.
  EXPECT_EQ(occupancy(ResourceUsage{}, l).groups_per_unit, -1);
  // Registers are allocated per warp in units of 256 on CUDA: 33 registers take 1280 per warp.
  u = ResourceUsage{};
  u.threads = 1024;
  u.registers = 33;
  o = occupancy(u, l);
  EXPECT_EQ(o.groups_per_unit, 1);  // 40960 registers per group
}

TEST(Prune, RulesOutWhatCannotRunAndSaysWhy) {
  DeviceLimits l = device_limits(h100());
  ResourceUsage u;
  u.threads = 256;
  u.registers = 64;
  EXPECT_EQ(resource_prune_reason(u, l), "");
  u.threads = 2048;
  EXPECT_EQ(resource_prune_reason(u, l),
            "2048 threads per group exceed the device's limit of 1024");
  u.threads = 1024;
  u.registers = 128;
  EXPECT_EQ(resource_prune_reason(u, l),
            "128 registers per thread x 1024 threads need 131072 registers; a group has at most "
            "65536");
  u.registers = 32;
  u.shared_bytes = 240000;
  EXPECT_EQ(resource_prune_reason(u, l),
            "240000 bytes of shared memory per group exceed the device's limit of 232448");
  // Fits a group's limits but not a compute unit: no group can be resident.
  l.shared_per_unit = 100000;
  u.shared_bytes = 150000;
  EXPECT_EQ(resource_prune_reason(u, l),
            "no group fits on a compute unit (limited by shared memory)");
  // A device that reports nothing rules nothing out.
  EXPECT_EQ(resource_prune_reason(u, DeviceLimits{}), "");
}

TEST(Model, WaveEfficiencyAndIntensityPerLevel) {
  KernelContext ctx;
  ctx.family = "matmul";
  ctx.flops = "2 * M * N * K";
  ctx.bytes = "4 * (M * K + K * N + M * N)";
  ctx.arrays = {{"A", DType::f32, "M * K", {}, false},
                {"B", DType::f32, "K * N", {}, false},
                {"C", DType::f32, "M * N", {}, true}};
  for (const char* s : {"M", "N", "K"}) {
    ScalarSpec spec;
    spec.name = s;
    ctx.scalars.push_back(spec);
  }
  Shape shape{{{"M", 2048}, {"N", 2048}, {"K", 2048}}};
  Work w = work_of(ctx, shape);
  ASSERT_TRUE(w.matmul);
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 2048 * 2048 * 2048);
  EXPECT_EQ(work_from_json(work_to_json(w)).flops, w.flops);
  DeviceLimits l = device_limits(h100());
  // 128 x 128 output tiles of 256 threads: 256 groups on 132 SMs with 8 slots each fit in one
  // wave of 1056 slots, a quarter full.
  ResourceUsage u;
  u.threads = 256;
  u.registers = 32;
  u.groups = 256;
  u.groups_x = 16;
  u.groups_y = 16;
  ModelEstimate e = estimate(u, l, w, ridge_point(h100(), 4));
  EXPECT_NEAR(e.wave_efficiency, 256.0 / 1056.0, 1e-12);
  EXPECT_NEAR(e.intensity_dram, 2.0 * 2048 / (4 * 3), 1e-9);
  EXPECT_NEAR(e.intensity_group, 2.0 * 128 * 128 / (256 * 4), 1e-12);  // 32 FLOP/byte
  EXPECT_NEAR(e.intensity_thread, std::sqrt(64.0) / 4, 1e-12);         // 8 x 8 outputs
  // The ridge of the H100's documented FP32 rate over its DRAM bandwidth: about 20 FLOP/byte,
  // which the group intensity exceeds, so only the waves limit the estimate.
  EXPECT_NEAR(ridge_point(h100(), 4), 66.9e12 / 3350e9, 1e-9);
  EXPECT_NEAR(e.score, e.wave_efficiency, 1e-12);
  // 32 x 32 tiles: 4096 groups fill 4 waves almost evenly, but at 8 FLOP/byte a group's loads
  // limit it to 8 / 20 of the compute rate.
  u.groups = 4096;
  u.groups_x = u.groups_y = 64;
  ModelEstimate small = estimate(u, l, w, ridge_point(h100(), 4));
  EXPECT_NEAR(small.intensity_group, 2.0 * 32 * 32 / (64 * 4), 1e-12);
  EXPECT_NEAR(small.wave_efficiency, 4096.0 / 4224.0, 1e-12);
  EXPECT_NEAR(small.score, 4096.0 / 4224.0 * 8 / ridge_point(h100(), 4), 1e-12);
  EXPECT_EQ(small.to_json()["limiter"], "threads");
  // Nothing known: a neutral estimate.
  EXPECT_EQ(estimate(ResourceUsage{}, DeviceLimits{}, Work{}, 0).score, 1);
}

}  // namespace
}  // namespace peak
