// The Vulkan runner's fresh inputs, through the real peak-runner (lavapipe in CI): made on the
// device by its input generator (vk_device_main.cpp: kGenerateShader), they must be the bytes
// run_generator gives on the host, with the guard after them. A shader that copies X to Y word by
// word is checked and timed with fresh inputs; the checked run's output, the output of the last
// timed launch (written whole) and every timed check are compared with the host's bytes for that
// launch's seed, for each element type and initializer, the zero fix included. The runner itself
// compares the last inputs and their guard with the host's (inputs_modified, out_of_bounds).
#include <gtest/gtest.h>

#include <cmath>

#include <fmt/format.h>

#include "backend/hlsl/hlsl_backend.h"
#include "context/inputs.h"
#include "runner/client.h"
#include "util/fs.h"

namespace peak {
namespace {

const fs::path kSource = PEAK_SOURCE_DIR;
const fs::path kRunner = fs::path(PEAK_BINARY_DIR) / "peak-runner";

// Y = X over the words that hold X's `bytes`-byte elements; of a last word that holds one 2-byte
// element only its low half is written (the high half is Y's guard).
std::string copy_source(int bytes) {
  return fmt::format(R"([[vk::binding(0, 0)]] StructuredBuffer<uint> X;
[[vk::binding(1, 0)]] RWStructuredBuffer<uint> Y;
[[vk::binding(2, 0)]] cbuffer Scalars {{ int R; int N; }};

// peak:begin macros
#ifndef BLOCK
#define BLOCK 64
#endif
// peak:end macros

// peak:begin device
[numthreads(BLOCK, 1, 1)]
void copy(uint3 t : SV_DispatchThreadID) {{
  uint n = (uint)(R * N), w = t.x;
  if ({0} == 4) {{
    if (w < n) Y[w] = X[w];
  }} else if (2 * w + 1 < n) {{
    Y[w] = X[w];
  }} else if (2 * w < n) {{
    Y[w] = (Y[w] & 0xFFFF0000u) | (X[w] & 0xFFFFu);
  }}
}}
// peak:end device

// peak:begin host
launch copy
  grid = (ceil_div(R * N, BLOCK))
// peak:end host
)",
                     bytes);
}

struct Case {
  DType dtype;
  std::string init;
  int64_t rows, cols;
  bool staged = false;  // PEAK_RUNNER_VK_STAGING=1: buffers the host cannot map
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << to_string(c.dtype) << " " << c.init << " " << c.rows << "x" << c.cols
      << (c.staged ? " staged" : "");
}

// The device's facts, probed once (lavapipe: the test needs no GPU).
const Result<DeviceFacts>& probed() {
  static const Result<DeviceFacts> facts = make_hlsl_backend()->probe("llvmpipe", false);
  return facts;
}

// The bytes the host makes for `spec` from `seed`: run_generator's where a device can generate
// them, else generate_array's (the runner then uploads them).
std::vector<uint8_t> host_bytes(const ArraySpec& spec, int64_t count, uint64_t seed) {
  if (auto g = input_generator(spec, count, array_seed(seed, spec.name), 0))
    return run_generator(*g, count);
  return generate_array(spec, count, array_seed(seed, spec.name), 0);
}

// The first byte where `got` differs from `want`, as a message; empty when they are equal.
std::string first_difference(const std::string& got, const std::vector<uint8_t>& want) {
  if (got.size() != want.size())
    return fmt::format("{} bytes where {} were expected", got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    if (static_cast<uint8_t>(got[i]) != want[i])
      return fmt::format("byte {} of {} is {:#04x}, the host's {:#04x}", i, want.size(),
                         static_cast<uint8_t>(got[i]), want[i]);
  return "";
}

class VulkanInputs : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!fs::exists(kRunner)) GTEST_SKIP() << "no runner at " << kRunner;
    ASSERT_TRUE(probed()) << probed().error();
    auto out = make_temp_dir("peak-vk-inputs-");
    ASSERT_TRUE(out) << out.error();
    out_ = *out;
  }
  void TearDown() override {
    if (!out_.empty()) fs::remove_all(out_);
  }

  // The softmax context with X and Y of the case's type, X drawn from its initializer.
  void make_context(const Case& c) {
    auto loaded = load_context(kSource / "examples" / "softmax-hlsl-fp32");
    ASSERT_TRUE(loaded) << loaded.error();
    ctx_ = *loaded;
    ctx_.arrays[0].dtype = ctx_.arrays[1].dtype = c.dtype;
    auto init = parse_initializer(c.init);
    ASSERT_TRUE(init) << init.error();
    ctx_.arrays[0].init = *init;
  }

  // The copy shader built and planned for the case's shape: a checked task timed with fresh
  // inputs (3 samples after 1 warm-up).
  void make_task(const Case& c) {
    auto backend = make_hlsl_backend();
    const std::string text = copy_source(static_cast<int>(dtype_size(c.dtype)));
    auto regions = split_regions(text, "kernel.hlsl");
    ASSERT_TRUE(regions) << regions.error();
    const Config config = {{"BLOCK", 64}};
    BuildRequest req;
    req.context = &ctx_;
    req.source = text;
    req.defines = config;
    req.device = *probed();
    req.cache_dir = out_ / "cache";
    BuildResult b = backend->build(req);
    ASSERT_EQ(b.disposition, Disposition::passed) << b.log;
    task_.shape.values = {{"R", c.rows}, {"N", c.cols}};
    PlanResult plan = backend->plan(ctx_, *regions, task_.shape, config, *probed(), b);
    ASSERT_EQ(plan.disposition, Disposition::passed) << plan.message;
    auto sizes = array_sizes(ctx_, task_.shape);
    ASSERT_TRUE(sizes) << sizes.error();
    task_.id = "copy";
    task_.artifact = b.artifact.string();
    task_.plan = plan.plan;
    task_.sizes = *sizes;
    task_.seed = 0x5eed;
    task_.repeat = false;
    TimingPolicy p;
    p.warmup = 1;
    p.min_samples = p.max_samples = 3;
    p.flush_l2 = false;
    p.check_elements = 64;
    p.full_checks = 0;
    task_.timing = p;
    task_.output_dir = out_.string();
  }

  void run(const Case& c, TaskResult& r) {
    RunnerJob job = RunnerJob::for_context(ctx_);
    job.tasks.push_back(task_);
    RunnerOptions ro;
    ro.executable = kRunner;
    ro.task_timeout_s = 120;
    if (c.staged) ro.env = {{"PEAK_RUNNER_VK_STAGING", "1"}};
    auto results = run_job(job, ro);
    ASSERT_TRUE(results) << results.error();
    ASSERT_EQ(results->size(), 1u);
    r = results->front();
  }

  // Every timed check's elements of Y against the host's bytes for that launch's seed.
  void expect_timed_checks(const TaskResult& r) {
    const ArraySpec& x = ctx_.arrays[0];
    const int64_t n = task_.sizes.at("X");
    for (const TimedCheck& check : r.timed_checks) {
      const auto want = host_bytes(x, n, check.seed);
      const auto& pos = check.positions.at("Y");
      const auto& val = check.values.at("Y");
      ASSERT_EQ(pos.size(), val.size());
      for (size_t k = 0; k < pos.size(); ++k) {
        const double v = element_as_double(x.dtype, want.data(), pos[k]);
        // The protocol's JSON has no infinity (it arrives as NaN): the whole outputs' bytes
        // cover those.
        if (std::isfinite(v)) {
          EXPECT_EQ(val[k], v) << "sample " << check.sample << " element " << pos[k];
        }
      }
    }
  }

  fs::path out_;
  KernelContext ctx_;
  RunnerTask task_;
};

// On lavapipe (shaderInt64 and shaderFloat64) the inputs are the device's: the cases below test
// the generator, not the host path.
TEST_F(VulkanInputs, LavapipeMakesFreshInputsOnTheDevice) {
  EXPECT_EQ(probed()->extra.at("input_generator"), "device");
}

TEST_P(VulkanInputs, FreshInputsMadeOnTheDeviceAreTheHostsBytes) {
  const Case& c = GetParam();
  ASSERT_NO_FATAL_FAILURE(make_context(c));
  ASSERT_NO_FATAL_FAILURE(make_task(c));
  TaskResult r;
  ASSERT_NO_FATAL_FAILURE(run(c, r));
  // A wrong input byte is inputs_modified, a wrong guard byte out_of_bounds.
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_FALSE(r.guard_overwritten);

  const ArraySpec& x = ctx_.arrays[0];
  const int64_t n = c.rows * c.cols;
  auto checked = read_file(r.outputs.at("Y"));
  ASSERT_TRUE(checked) << checked.error();
  EXPECT_EQ(first_difference(*checked, host_bytes(x, n, task_.seed)), "") << "the checked run";
  ASSERT_EQ(r.timed_checks.size(), 3u);
  expect_timed_checks(r);
  auto last = read_file(r.timed_outputs.at("Y"));
  ASSERT_TRUE(last) << last.error();
  EXPECT_EQ(first_difference(*last, host_bytes(x, n, r.timed_checks.back().seed)), "")
      << "the last timed launch";
}

// Odd counts (a 2-byte element and two guard bytes share a word), counts that are no multiple
// of the generator's 256 words, subnormal, overflowing and clamped values, every initializer a
// device generates, the zero fix, and normal (made on the host, the fallback).
INSTANTIATE_TEST_SUITE_P(
    Generator, VulkanInputs,
    ::testing::Values(
        Case{DType::f32, "uniform(-1, 1)", 33, 4099},
        Case{DType::f32, "uniform(0.1, 2.9)", 7, 1001},
        Case{DType::f32, "uniform(0, 1e-40)", 5, 999},     // float subnormals
        Case{DType::f32, "uniform(-1e39, 1e39)", 3, 333},  // beyond float: infinities
        Case{DType::f16, "uniform(-1, 1)", 7, 333}, Case{DType::f16, "uniform(0.9, 1.1)", 1000, 97},
        Case{DType::f16, "uniform(-70000, 70000)", 3, 1001},  // beyond half: infinities
        Case{DType::f16, "uniform(0, 1e-5)", 9, 111},         // half subnormals
        Case{DType::bf16, "uniform(-2, 2)", 513, 3},
        Case{DType::bf16, "uniform(-3.4e38, 3.4e38)", 5, 201},  // rounding up to infinity
        Case{DType::i32, "uniform(-100, 100)", 64, 1025},
        Case{DType::i32, "uniform(-3e9, 3e9)", 3, 333},  // clamped to int32
        Case{DType::f32, "iota", 33, 1001}, Case{DType::f16, "iota", 5, 4099},
        Case{DType::bf16, "iota", 3, 301}, Case{DType::i32, "iota", 7, 77},
        Case{DType::f32, "ones", 1, 1}, Case{DType::bf16, "ones", 9, 9},
        Case{DType::f32, "zeros", 17, 31}, Case{DType::f16, "zeros", 3, 5},
        Case{DType::f16, "uniform(0, 1e-9)", 3, 5},    // all zero: the zero fix
        Case{DType::f32, "uniform(0, 1e-46)", 4, 4},   // all zero
        Case{DType::bf16, "uniform(0, 1e-46)", 1, 7},  // all zero
        Case{DType::i32, "uniform(0, 0.5)", 5, 5},     // all zero
        Case{DType::i32, "uniform(0.2, 0.8)", 2, 3},   // no integer in range: the low end, ceil'd
        Case{DType::f32, "normal(0, 1)", 3, 7},        // made on the host
        Case{DType::f16, "uniform(-1, 1)", 7, 333, true},
        Case{DType::f16, "uniform(0, 1e-9)", 3, 5, true}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return fmt::format("{}_{}{}", to_string(info.param.dtype), info.index,
                         info.param.staged ? "_staged" : "");
    });

}  // namespace
}  // namespace peak
