// GPU tests of the CUDA backend and peak-runner-cuda (label gpu: they need an NVIDIA GPU).
// The integrity corpus (tests/integrity/cuda) runs through the gate (Validator::validate, and
// `measure` where a case says `timed:`), each case followed by the correct kernel to show that
// the next runner works; the kernels of tests/integrity/cuda/passing, which use every feature of
// the launch plan, must pass validation and timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <set>

#include <fmt/format.h>

#include "backend/cuda/corpus_testing.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/gpu_testing.h"
#include "tune/measure.h"
#include "util/cuda_arch.h"
#include "util/fs.h"
#include "util/sandbox.h"
#include "validate/validate.h"

namespace peak {
namespace {

using testing::CorpusCase;

const fs::path kSource = PEAK_SOURCE_DIR;

using Gpu = testing::CudaGpu;
Gpu& gpu() { return testing::cuda_gpu(); }

KernelContext load(const std::string& name) {
  auto c = load_context(kSource / "examples" / name);
  EXPECT_TRUE(c) << c.error();
  return c ? *c : KernelContext{};
}

KernelContext corpus_context() {
  auto c = testing::corpus_context();
  EXPECT_TRUE(c) << c.error();
  return c ? *c : KernelContext{};
}

struct Built {
  BuildResult build;
  SourceRegions regions;
};

Built build_source(const KernelContext& ctx, const std::string& text, const Config& config) {
  Built b;
  auto regions = split_regions(text, "kernel.cu");
  EXPECT_TRUE(regions) << regions.error();
  if (regions) b.regions = *regions;
  BuildRequest req;
  req.context = &ctx;
  req.source = text;
  req.defines = config;
  req.device = gpu().facts;
  req.cache_dir = gpu().cache;
  b.build = gpu().backend->build(req);
  return b;
}

Built build_file(const KernelContext& ctx, const fs::path& file, const Config& config) {
  auto text = read_file(file);
  EXPECT_TRUE(text) << text.error();
  return build_source(ctx, text ? *text : "", config);
}

RunnerOptions runner_options() {
  RunnerOptions o;
  o.executable = gpu().backend->runner();
  o.task_timeout_s = 30;
  o.start_timeout_s = 30;  // device start-up takes seconds; a hang in a first task costs this
  return o;
}

ValidationOutcome validate(const KernelContext& ctx, const Built& b, const Config& config,
                           const ValidationOptions& opts = {}) {
  ReferenceSource ref;
  ref.cache_dir = gpu().cache / "reference";
  Validator v(*gpu().backend, gpu().facts, runner_options(), ref);
  return v.validate(ctx, b.regions, b.build, config, opts);
}

// The FP32 peak that `faster_than_peak` is judged against (0 when the device is not in the
// table of documented peaks).
double fp32_peak() {
  auto p = documented_peaks(gpu().facts.name);
  return p ? p->fp32_tflops : 0;
}

std::vector<Measurement> time_shapes(const KernelContext& ctx, const Built& b, const Config& config,
                                     const std::vector<Shape>& shapes, MeasureOptions mo) {
  ReferenceSource ref;
  Validator validator(*gpu().backend, gpu().facts, runner_options(), ref);
  return measure(*gpu().backend, gpu().facts, runner_options(), validator, ctx, b.regions, b.build,
                 config, shapes, mo);
}

MeasureOptions quick_timing() {
  MeasureOptions mo;
  mo.policy.warmup = 2;
  mo.policy.min_samples = 5;
  mo.policy.max_samples = 10;
  mo.policy.max_seconds = 3;
  mo.peak_tflops = fp32_peak();
  return mo;
}

std::string describe_checks(const ValidationOutcome& o) {
  std::string s = std::string(to_string(o.disposition)) + ": " + o.message;
  for (const auto& c : o.checks)
    s += "\n  " + c.shape.text() + (c.hidden ? " (hidden)" : "") + " -> " +
         std::string(to_string(c.disposition)) + " " + c.message;
  return s;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class CudaGpuTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(gpu().error.empty()) << gpu().error; }
};

TEST_F(CudaGpuTest, ProbeDescribesTheDevice) {
  const DeviceFacts& f = gpu().facts;
  EXPECT_EQ(f.backend, "cuda");
  EXPECT_FALSE(f.name.empty());
  EXPECT_EQ(f.vendor, "NVIDIA");
  EXPECT_TRUE(starts_with(f.arch, "sm_")) << f.arch;
  if (f.extra.count("compute_capability") && f.extra.at("compute_capability") == "9.0") {
    EXPECT_EQ(f.arch, "sm_90a");
  }
  EXPECT_GT(f.compute_units, 0);
  EXPECT_EQ(f.subgroup_size, 32);
  EXPECT_GE(f.max_threads_per_group, 1024);
  EXPECT_GT(f.l2_bytes, 0);
  EXPECT_GT(f.memory_bytes, 0);
  EXPECT_EQ(f.shared_memory_per_group, 48 * 1024);
  EXPECT_GE(f.shared_memory_per_group_optin, f.shared_memory_per_group);
  EXPECT_GT(std::atoll(f.extra.at("registers_per_block").c_str()), 0);
  EXPECT_FALSE(f.driver.empty());
  EXPECT_FALSE(f.api_version.empty());
  EXPECT_GT(f.clock_mhz, 0);
  EXPECT_EQ(f.extra.at("cublas"), "ready");
  auto tc = gpu().backend->toolchain();
  auto has = [&](const char* k) {
    return std::any_of(tc.begin(), tc.end(), [&](const auto& p) { return p.first == k; });
  };
  EXPECT_TRUE(has("cuda_runtime"));
  EXPECT_TRUE(has("cuda_driver"));
}

TEST_F(CudaGpuTest, FmaMicrobenchmarkIsPlausible) {
  auto f = gpu().backend->probe("0", true);
  ASSERT_TRUE(f) << f.error();
  EXPECT_GT(f->measured_fp32_tflops, 1.0);
  if (auto peaks = documented_peaks(f->name)) {
    EXPECT_LE(f->measured_fp32_tflops, 1.05 * peaks->fp32_tflops);
    EXPECT_GE(f->measured_fp32_tflops, 0.5 * peaks->fp32_tflops);
  }
}

TEST_F(CudaGpuTest, UnknownDeviceSelectorFails) {
  auto f = gpu().backend->probe("no-such-gpu-name", false);
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().find("no-such-gpu-name"), std::string::npos) << f.error();
}

class CudaGpuExample : public CudaGpuTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(CudaGpuExample, ValidatesAndTimesAgainstCublas) {
  KernelContext ctx = load(GetParam());
  Config config = testing::default_tuning(ctx);
  Built b = build_file(ctx, ctx.dir / ctx.source_file, config);
  ASSERT_EQ(b.build.disposition, Disposition::passed) << b.build.log;
  ValidationOutcome v = validate(ctx, b, config);
  ASSERT_EQ(v.disposition, Disposition::passed) << describe_checks(v);

  MeasureOptions mo = quick_timing();
  mo.peak_tflops = 0;  // fp16 has its own peak; BaselineRatesArePhysical checks the rates
  auto ms = time_shapes(ctx, b, config, ctx.small_shapes, mo);
  ASSERT_EQ(ms.size(), ctx.small_shapes.size());
  for (const Measurement& m : ms) {
    EXPECT_EQ(m.disposition, Disposition::passed) << m.message;
    EXPECT_EQ(m.baseline, "cublas");
    ASSERT_FALSE(m.samples_ms.empty());
    ASSERT_FALSE(m.baseline_samples_ms.empty()) << m.message;
    EXPECT_GT(m.stats.median, 0);
    EXPECT_GT(m.gflops, 0);
    EXPECT_GT(m.baseline_gflops, 0);
    // The host clock around the plan's steps and the wait for their end is never shorter.
    for (size_t i = 0; i < m.samples_ms.size() && i < m.host_ms.size(); ++i)
      EXPECT_GE(m.host_ms[i] * 1.001 + 0.01, m.samples_ms[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, CudaGpuExample,
                         ::testing::Values("matmul-cuda-fp32", "matmul-cuda-fp16"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// cuBLAS on a bench shape, timed like a candidate: the FP32 baseline stays below the FP32 peak
// (no TF32), the FP16 baseline uses the tensor cores. Prints the numbers.
TEST_F(CudaGpuTest, BaselineRatesArePhysical) {
  auto peaks = documented_peaks(gpu().facts.name);
  for (const char* name : {"matmul-cuda-fp32", "matmul-cuda-fp16"}) {
    KernelContext ctx = load(name);
    Config config = testing::default_tuning(ctx);
    Built b = build_file(ctx, ctx.dir / ctx.source_file, config);
    ASSERT_EQ(b.build.disposition, Disposition::passed) << b.build.log;
    MeasureOptions mo;
    mo.policy.min_samples = 10;
    mo.policy.max_samples = 30;
    mo.policy.max_seconds = 3;
    auto ms = time_shapes(ctx, b, config, {ctx.bench_shapes.at(0)}, mo);
    ASSERT_EQ(ms.size(), 1u);
    const Measurement& m = ms[0];
    ASSERT_EQ(m.disposition, Disposition::passed) << m.message;
    ASSERT_FALSE(m.baseline_samples_ms.empty()) << m.message;
    double base_tflops = m.baseline_gflops / 1000;
    std::cout << "[ measured ] " << name << " " << m.shape.text() << ": seed kernel "
              << m.gflops / 1000 << " TFLOP/s (median " << m.stats.median << " ms, spread "
              << m.stats.rel_spread << "), cuBLAS " << base_tflops << " TFLOP/s (median "
              << m.baseline_stats.median << " ms)\n";
    EXPECT_GT(base_tflops, m.gflops / 1000);
    if (!peaks) continue;
    if (std::string(name) == "matmul-cuda-fp32") {
      EXPECT_LE(base_tflops, 1.05 * peaks->fp32_tflops) << "TF32 in the FP32 baseline?";
      EXPECT_GE(base_tflops, 0.4 * peaks->fp32_tflops);
    } else {
      EXPECT_GE(base_tflops, 2 * peaks->fp32_tflops) << "FP16 baseline without tensor cores?";
      EXPECT_LE(base_tflops, 1.05 * peaks->fp16_tflops);
    }
  }
}

// fp8 (examples/matmul-cuda-fp8): the naive seed validates against the CPU reference (e4m3 inputs
// made on the host, K-major B, per-tensor scales, a bf16 C), and cublasLt's fp8 GEMM, timed beside
// it, runs on the tensor cores within the documented FP8 peak. Prints the numbers.
TEST_F(CudaGpuTest, Fp8SeedValidatesAndCublasLtIsItsBaseline) {
  KernelContext ctx = load("matmul-cuda-fp8");
  const std::string& arch = gpu().facts.arch;  // "sm_90a"
  if (arch.size() < 5 || std::stoi(arch.substr(3)) < 89)
    GTEST_SKIP() << "no fp8 tensor cores on " << arch;
  Config config = testing::default_tuning(ctx);
  Built b = build_file(ctx, ctx.dir / ctx.source_file, config);
  ASSERT_EQ(b.build.disposition, Disposition::passed) << b.build.log;
  ValidationOutcome v = validate(ctx, b, config);
  ASSERT_EQ(v.disposition, Disposition::passed) << describe_checks(v);
  MeasureOptions mo;
  mo.policy.min_samples = 5;
  mo.policy.max_samples = 10;
  mo.policy.max_seconds = 3;
  auto ms = time_shapes(ctx, b, config, {ctx.bench_shapes.at(0)}, mo);
  ASSERT_EQ(ms.size(), 1u);
  const Measurement& m = ms[0];
  ASSERT_EQ(m.disposition, Disposition::passed) << m.message;
  ASSERT_FALSE(m.baseline_samples_ms.empty()) << m.message;
  const double base_tflops = m.baseline_gflops / 1000;
  std::cout << "[ measured ] matmul-cuda-fp8 " << m.shape.text() << ": seed kernel "
            << m.gflops / 1000 << " TFLOP/s, cublasLt fp8 " << base_tflops << " TFLOP/s (median "
            << m.baseline_stats.median << " ms)\n";
  EXPECT_GT(base_tflops, m.gflops / 1000);
  if (auto peaks = documented_peaks(gpu().facts.name); peaks && peaks->fp8_tflops > 0) {
    EXPECT_GE(base_tflops, 2 * peaks->fp32_tflops) << "fp8 baseline without tensor cores?";
    EXPECT_LE(base_tflops, 1.05 * peaks->fp8_tflops);
  }
}

// The plan asks for 2048 threads per block: refused when the plan is checked, before any launch.
TEST_F(CudaGpuTest, TooManyThreadsPerBlockIsInvalidConfig) {
  KernelContext ctx = load("matmul-cuda-fp32");
  Config config = {{"BLOCK_X", 64}, {"BLOCK_Y", 32}};
  Built b = build_file(ctx, ctx.dir / ctx.source_file, config);
  ASSERT_EQ(b.build.disposition, Disposition::passed) << b.build.log;
  ValidationOutcome v = validate(ctx, b, config);
  EXPECT_EQ(v.disposition, Disposition::invalid_config) << describe_checks(v);
  EXPECT_NE(v.message.find("2048 threads"), std::string::npos) << v.message;
}

TEST_F(CudaGpuTest, RequireFalseIsInvalidConfig) {
  KernelContext ctx = load("matmul-cuda-fp32");
  auto text = read_file(ctx.dir / ctx.source_file);
  ASSERT_TRUE(text);
  std::string src = replace_all(*text, "// peak:begin host\n",
                                "// peak:begin host\nrequire BLOCK_X * BLOCK_Y <= 256\n");
  ASSERT_NE(src, *text);
  Config config = {{"BLOCK_X", 32}, {"BLOCK_Y", 16}};
  Built b = build_source(ctx, src, config);
  ASSERT_EQ(b.build.disposition, Disposition::passed) << b.build.log;
  ValidationOutcome v = validate(ctx, b, config);
  EXPECT_EQ(v.disposition, Disposition::invalid_config) << describe_checks(v);
}

// sm_90 runs a cluster of 16 blocks, more than the portable 8, for a kernel that allows the
// non-portable size: the runner allows it for a launch that asks for one, and the naive kernel
// (its grid rounded up to whole clusters, the extra blocks writing nothing) still validates.
TEST_F(CudaGpuTest, AClusterOfSixteenBlocksRunsOnSm90) {
  if (cuda_arch_number(gpu().facts.arch) < 90) GTEST_SKIP() << "clusters need sm_90";
  KernelContext ctx = load("matmul-cuda-fp32");
  auto text = read_file(ctx.dir / ctx.source_file);
  ASSERT_TRUE(text);
  std::string src = replace_all(*text, "  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y))\n",
                                "  grid = (round_up(ceil_div(N, BLOCK_X), 16), ceil_div(M, "
                                "BLOCK_Y))\n  cluster = (16, 1, 1)\n");
  ASSERT_NE(src, *text);
  Config config = {{"BLOCK_X", 16}, {"BLOCK_Y", 16}};
  Built b = build_source(ctx, src, config);
  ASSERT_EQ(b.build.disposition, Disposition::passed) << b.build.log;
  ValidationOutcome v = validate(ctx, b, config);
  EXPECT_EQ(v.disposition, Disposition::passed) << v.message << describe_checks(v);
}

// A plan's steps are timed together: one sample spans every launch, from the start event before
// the first to the end event after the last. Each launch here waits 10 ms (by the global timer),
// so every sample holds at least 20 ms.
TEST_F(CudaGpuTest, TwoLaunchesAreTimedAsOneSample) {
  KernelContext ctx = load("matmul-cuda-fp32");
  auto text = read_file(ctx.dir / ctx.source_file);
  ASSERT_TRUE(text);
  const std::string spin =
      "__device__ void spin_10ms() {\n"
      "  unsigned long long t0, t;\n"
      "  asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t0));\n"
      "  do {\n"
      "    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t));\n"
      "  } while (t - t0 < 10000000ull);\n"
      "}\n"
      "__global__ void wait_10ms() { spin_10ms(); }\n";
  std::string src = replace_all(*text, "// peak:begin device\n", "// peak:begin device\n" + spin);
  src = replace_all(src, "  C[row * N + col] = acc;\n}",
                    "  C[row * N + col] = acc;\n  if (row == 0 && col == 0) spin_10ms();\n}");
  src =
      replace_all(src, "// peak:end host\n",
                  "launch wait_10ms\n  grid = (1)\n  block = (1)\n  args = ()\n// peak:end host\n");
  ASSERT_NE(src.find("if (row == 0 && col == 0) spin_10ms();"), std::string::npos) << src;
  ASSERT_NE(src.find("launch wait_10ms"), std::string::npos) << src;
  Config config = testing::default_tuning(ctx);
  Built b = build_source(ctx, src, config);
  ASSERT_EQ(b.build.disposition, Disposition::passed) << b.build.log;
  MeasureOptions mo;
  mo.policy.warmup = 1;
  mo.policy.min_samples = 3;
  mo.policy.max_samples = 3;
  mo.with_baseline = false;
  auto ms = time_shapes(ctx, b, config, {ctx.validation_shapes.at(0)}, mo);
  ASSERT_EQ(ms.size(), 1u);
  ASSERT_EQ(ms[0].disposition, Disposition::passed) << ms[0].message;
  ASSERT_EQ(ms[0].samples_ms.size(), 3u);  // one sample per run of the plan
  for (double t : ms[0].samples_ms) EXPECT_GE(t, 19.5);
  for (double t : ms[0].host_ms) EXPECT_GE(t, 19.5);
  // Nothing but the two launches is inside the window: no more than a few ms of overhead.
  for (double t : ms[0].samples_ms) EXPECT_LE(t, 30.0);
}

// ---- The integrity corpus ----

const std::set<std::string> kBuildTime = {"forbidden_api", "compile_failed"};

class CudaGpuCorpus : public CudaGpuTest, public ::testing::WithParamInterface<CorpusCase> {};

TEST_P(CudaGpuCorpus, GateGivesTheExpectedDispositionAndTheNextKernelPasses) {
  const CorpusCase& c = GetParam();
  ASSERT_FALSE(c.expect.empty()) << c.file << ": " << join(c.problems, "; ");
  if (c.needs_sm > cuda_arch_number(gpu().facts.arch))
    GTEST_SKIP() << c.file << " needs sm_" << c.needs_sm << "; this device is " << gpu().facts.arch;
  KernelContext ctx = corpus_context();
  Config config = testing::default_tuning(ctx);
  Built b = build_file(ctx, c.path, config);
  std::string expected = join(std::vector<std::string>(c.expect.begin(), c.expect.end()), "|");
  if (kBuildTime.count(*c.expect.begin())) {
    EXPECT_EQ(std::string(to_string(b.build.disposition)), *c.expect.begin()) << b.build.log;
    std::cout << "[ observed ] " << c.file << ": " << to_string(b.build.disposition)
              << " at build time\n";
  } else {
    ASSERT_EQ(b.build.disposition, Disposition::passed) << b.build.log;
    ValidationOptions opts;
    if (c.expect.count("timeout")) {  // every task would hang until its deadline: one is enough
      opts.shapes = {ctx.validation_shapes.at(0)};
      opts.seeds = 1;
      opts.sampled_hidden_shapes = 0;
      opts.task_timeout_s = 10;
    }
    auto t0 = std::chrono::steady_clock::now();
    ValidationOutcome v = validate(ctx, b, config, opts);
    std::cout << "[ observed ] " << c.file << ": " << to_string(v.disposition) << " in "
              << seconds_since(t0) << " s: " << v.message << "\n";
    EXPECT_TRUE(c.expect.count(std::string(to_string(v.disposition))))
        << c.file << ": expected " << expected << ", got " << describe_checks(v);
    if (!c.timed.empty()) {
      MeasureOptions mo = quick_timing();
      if (c.timed == "faster_than_peak" && mo.peak_tflops <= 0)
        GTEST_SKIP() << "no documented FP32 peak for " << gpu().facts.name;
      auto t1 = std::chrono::steady_clock::now();
      auto ms = time_shapes(ctx, b, config, {ctx.bench_shapes.at(0)}, mo);
      ASSERT_EQ(ms.size(), 1u);
      std::cout << "[ observed ] " << c.file << " timed at " << ms[0].shape.text() << ": "
                << to_string(ms[0].disposition) << " in " << seconds_since(t1) << " s ("
                << ms[0].gflops / 1000 << " TFLOP/s): " << ms[0].message << "\n";
      EXPECT_EQ(std::string(to_string(ms[0].disposition)), c.timed)
          << c.file << " timed: " << ms[0].message;
    }
  }
  // The correct kernel, right after: the device and a fresh runner still work.
  Built good = build_file(ctx, testing::kCudaCorpusDir / "correct_tiled.cu", config);
  ASSERT_EQ(good.build.disposition, Disposition::passed) << good.build.log;
  auto t2 = std::chrono::steady_clock::now();
  ValidationOutcome after = validate(ctx, good, config);
  std::cout << "[ observed ] then correct_tiled.cu: " << to_string(after.disposition) << " in "
            << seconds_since(t2) << " s\n";
  EXPECT_EQ(after.disposition, Disposition::passed)
      << "after " << c.file << ": " << describe_checks(after);
}

INSTANTIATE_TEST_SUITE_P(Corpus, CudaGpuCorpus, ::testing::ValuesIn(testing::corpus_cases()),
                         [](const auto& info) { return testing::corpus_test_name(info.param); });

// ---- Kernels that use the plan's features: they pass the gate ----

class CudaGpuPassing : public CudaGpuTest, public ::testing::WithParamInterface<CorpusCase> {};

TEST_P(CudaGpuPassing, ValidatesAndTimesAgainstCublas) {
  const CorpusCase& c = GetParam();
  ASSERT_TRUE(c.problems.empty()) << c.file << ": " << join(c.problems, "; ");
  if (c.needs_sm > cuda_arch_number(gpu().facts.arch))
    GTEST_SKIP() << c.file << " needs sm_" << c.needs_sm << "; this device is " << gpu().facts.arch;
  KernelContext ctx = corpus_context();
  Config config = testing::default_tuning(ctx);
  Built b = build_file(ctx, c.path, config);
  ASSERT_EQ(b.build.disposition, Disposition::passed) << b.build.log;
  auto t0 = std::chrono::steady_clock::now();
  ValidationOutcome v = validate(ctx, b, config);
  std::cout << "[ observed ] passing/" << c.file << ": " << to_string(v.disposition) << " in "
            << seconds_since(t0) << " s: " << v.message << "\n";
  ASSERT_EQ(v.disposition, Disposition::passed) << describe_checks(v);
  auto ms = time_shapes(ctx, b, config, {ctx.bench_shapes.at(0)}, quick_timing());
  ASSERT_EQ(ms.size(), 1u);
  const Measurement& m = ms[0];
  std::cout << "[ measured ] passing/" << c.file << " " << m.shape.text() << ": " << m.gflops / 1000
            << " TFLOP/s (median " << m.stats.median << " ms, spread " << m.stats.rel_spread
            << "), cuBLAS " << m.baseline_gflops / 1000 << " TFLOP/s\n";
  EXPECT_EQ(m.disposition, Disposition::passed) << m.message;
  EXPECT_FALSE(m.samples_ms.empty());
  EXPECT_FALSE(m.baseline_samples_ms.empty()) << m.message;
}

INSTANTIATE_TEST_SUITE_P(Passing, CudaGpuPassing,
                         ::testing::ValuesIn(testing::corpus_cases(testing::kCudaPassingDir)),
                         [](const auto& info) { return testing::corpus_test_name(info.param); });

}  // namespace
}  // namespace peak

namespace peak {
namespace {

// ---- Timing that cannot be answered from memory ----

// Fresh inputs for every timed launch must not change what honest kernels measure: each is timed
// with them and without them (the previous method: every launch on the checked run's inputs),
// alternating, in this one process. Printed for the record; the gate decides nothing here.
TEST_F(CudaGpuTest, FreshInputsLeaveHonestRatesUnchanged) {
  struct Kernel {
    std::string name;
    KernelContext ctx;
    fs::path file;
  };
  std::vector<Kernel> kernels = {
      {"examples/matmul-cuda-fp32", load("matmul-cuda-fp32"),
       kSource / "examples" / "matmul-cuda-fp32" / "kernel.cu"},
      {"correct_tiled.cu", corpus_context(), testing::kCudaCorpusDir / "correct_tiled.cu"}};
  for (const auto& c : testing::corpus_cases(testing::kCudaPassingDir))
    if (c.needs_sm <= cuda_arch_number(gpu().facts.arch))
      kernels.push_back({"passing/" + c.file, corpus_context(), c.path});
  for (const Kernel& k : kernels) {
    Config config = testing::default_tuning(k.ctx);
    Built b = build_file(k.ctx, k.file, config);
    ASSERT_EQ(b.build.disposition, Disposition::passed) << k.name << "\n" << b.build.log;
    MeasureOptions mo = quick_timing();
    mo.policy.min_samples = 20;
    mo.policy.max_samples = 40;
    mo.policy.target_rel_spread = 0.01;
    double fresh = 0, same = 0, input_ms = 0, check_s = 0;
    int checked = 0, full = 0;
    for (int round = 0; round < 2; ++round) {
      for (bool f : {true, false}) {
        mo.policy.fresh_inputs = f;
        auto ms = time_shapes(k.ctx, b, config, {k.ctx.bench_shapes.at(0)}, mo);
        ASSERT_EQ(ms.size(), 1u);
        ASSERT_EQ(ms[0].disposition, Disposition::passed) << k.name << ": " << ms[0].message;
        (f ? fresh : same) += ms[0].stats.median / 2;
        if (f) {
          input_ms += ms[0].input_ms / 2;
          check_s += ms[0].check_seconds / 2;
          checked = ms[0].timed_launches_checked;
          full = ms[0].full_comparisons;
          EXPECT_EQ(checked, static_cast<int>(ms[0].samples_ms.size())) << k.name;
        }
      }
    }
    std::cout << "[ measured ] " << k.name << " " << k.ctx.bench_shapes.at(0).text()
              << ": fresh inputs " << fresh << " ms, same inputs " << same << " ms ("
              << 100.0 * (fresh / same - 1.0) << "%); fresh inputs cost " << input_ms
              << " ms in the runner and " << check_s << " s of checks in the parent; " << checked
              << " timed launches read back, " << full << " compared whole with cuBLAS\n";
  }
}

// peak's timing of cuBLAS (a runner task in reference mode, timed like any candidate) for the
// table that compares it with an independent tight-event measurement.
TEST_F(CudaGpuTest, CublasRatesAsPeakTimesThem) {
  for (const char* name : {"matmul-cuda-fp32", "matmul-cuda-fp16", "matmul-cuda-bf16"}) {
    KernelContext ctx = load(name);
    for (int64_t n : {2048, 4096, 8192}) {
      Shape s{{{"M", n}, {"N", n}, {"K", n}}};
      RunnerJob job = RunnerJob::for_context(ctx);
      RunnerTask t;
      t.id = "cublas";
      t.shape = s;
      t.sizes = *array_sizes(ctx, s);
      t.seed = 11;
      t.check = false;
      t.repeat = false;
      t.baseline = "cublas";
      t.baseline_outputs = true;
      TimingPolicy p;
      p.warmup = 5;
      p.min_samples = 50;
      p.max_samples = 50;
      p.max_seconds = 30;
      p.fresh_inputs = false;  // the same method as the independent harness
      t.timing = p;
      job.tasks.push_back(t);
      auto r = run_job(job, runner_options());
      ASSERT_TRUE(r) << r.error();
      ASSERT_EQ(r->at(0).disposition, Disposition::passed) << r->at(0).message;
      SampleStats st = compute_stats(r->at(0).samples_ms);
      double tflops = 2.0 * n * n * n / (st.median * 1e-3) / 1e12;
      std::cout << "[ measured ] cublas " << name << " n=" << n << ": " << tflops
                << " TFLOP/s (median " << st.median << " ms, spread " << st.rel_spread << ")\n";
    }
  }
}

// The same-traffic copy (RunnerTask::copy_bytes) of a 1 GiB task: both methods copy every byte
// (a method that does not is left out with a note), and the faster one moves the traffic at more
// than half the documented memory bandwidth and not above it.
TEST_F(CudaGpuTest, TheSameTrafficCopyRunsNearTheDocumentedBandwidth) {
  auto peaks = documented_peaks(gpu().facts.name);
  if (!peaks || peaks->memory_gbs <= 0)
    GTEST_SKIP() << "no documented memory bandwidth for " << gpu().facts.name;
  KernelContext ctx = load("matmul-cuda-fp32");
  Shape s{{{"M", 256}, {"N", 256}, {"K", 256}}};
  RunnerJob job = RunnerJob::for_context(ctx);
  RunnerTask t;
  t.id = "copy";
  t.shape = s;
  t.sizes = *array_sizes(ctx, s);
  t.check = false;
  t.repeat = false;
  t.baseline = "cublas";  // reference mode: the candidate is cuBLAS, timed like any other
  t.baseline_outputs = true;
  t.copy_bytes = int64_t{1} << 30;
  TimingPolicy p;
  p.warmup = 3;
  p.min_samples = 10;
  p.max_samples = 10;
  t.timing = p;
  job.tasks.push_back(t);
  auto r = run_job(job, runner_options());
  ASSERT_TRUE(r) << r.error();
  const TaskResult& res = r->at(0);
  ASSERT_EQ(res.disposition, Disposition::passed) << res.message;
  EXPECT_EQ(res.message.find("left out"), std::string::npos) << res.message;
  EXPECT_TRUE(res.copy_method == "memcpy" || res.copy_method == "vector-kernel") << res.copy_method;
  ASSERT_EQ(res.copy_samples_ms.size(), res.samples_ms.size());
  SampleStats st = compute_stats(res.copy_samples_ms);
  double gbs = static_cast<double>(t.copy_bytes) / (st.median * 1e-3) / 1e9;
  std::cout << "[ measured ] same-traffic copy of 1 GiB by " << res.copy_method << ": " << gbs
            << " GB/s (median " << st.median << " ms; documented " << peaks->memory_gbs
            << " GB/s)\n";
  EXPECT_GT(gbs, 0.5 * peaks->memory_gbs);
  EXPECT_LT(gbs, peaks->memory_gbs);
}

}  // namespace
}  // namespace peak

namespace peak {
namespace {

// ---- What the sandbox costs per candidate ----

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// One candidate's compile (nvcc, cache missed) and validation (one shape, one seed: one runner)
// with the sandbox and without it, alternating, five times each. Printed for the record; both
// must pass.
TEST_F(CudaGpuTest, SandboxOverheadPerCandidate) {
  if (sandbox_support().level != SandboxSupport::Level::full)
    GTEST_SKIP() << "the sandbox is " << SandboxSupport::name(sandbox_support().level)
                 << " here: " << sandbox_support().detail;
  KernelContext ctx = corpus_context();
  Config config = testing::default_tuning(ctx);
  auto text = read_file(testing::kCudaCorpusDir / "correct_tiled.cu");
  ASSERT_TRUE(text) << text.error();
  ValidationOptions vo;
  vo.seeds = 1;
  vo.include_hidden = false;
  vo.shapes = {ctx.validation_shapes.at(0)};
  const bool was = sandbox_enabled();
  std::map<bool, std::vector<double>> compile_s, validate_s;
  for (int round = 0; round < 5; ++round) {
    for (bool on : {true, false}) {
      set_sandbox_enabled(on);
      // A comment unique to this build: the build cache misses, nvcc runs.
      std::string src = *text + fmt::format("\n// sandbox overhead: round {} {}\n", round, on);
      auto t0 = std::chrono::steady_clock::now();
      Built b = build_source(ctx, src, config);
      compile_s[on].push_back(seconds_since(t0));
      ASSERT_EQ(b.build.disposition, Disposition::passed) << b.build.log;
      t0 = std::chrono::steady_clock::now();
      ValidationOutcome v = validate(ctx, b, config, vo);
      validate_s[on].push_back(seconds_since(t0));
      ASSERT_EQ(v.disposition, Disposition::passed) << (on ? "sandboxed: " : "") << v.message;
    }
  }
  set_sandbox_enabled(was);
  std::cout << "[ measured ] sandbox overhead per candidate (" << sandbox_support().describe()
            << "), medians of 5: compile " << median_of(compile_s[true]) << " s sandboxed vs "
            << median_of(compile_s[false]) << " s open (+"
            << median_of(compile_s[true]) - median_of(compile_s[false]) << " s); validation run "
            << median_of(validate_s[true]) << " s sandboxed vs " << median_of(validate_s[false])
            << " s open (+" << median_of(validate_s[true]) - median_of(validate_s[false])
            << " s)\n";
}

}  // namespace
}  // namespace peak
