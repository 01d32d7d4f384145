// GPU tests of the HIP backend (label gpu: they need an NVIDIA GPU). HIP sources run on NVIDIA
// through peak_hip_to_cuda.h and peak-runner-cuda: the examples pass the gate and are timed against
// cuBLAS, and the HIP integrity corpus (tests/integrity/hip) is answered case by case, each case
// followed by the correct kernel to show that the next runner works. The AMD side of every build
// (hipcc for gfx90a and gfx1030) is checked by backend_hip_tests; here it is only required to be
// present in the build that ran.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <set>

#include "backend/cuda/corpus_testing.h"
#include "backend/hip/hip_backend.h"
#include "tune/measure.h"
#include "util/fs.h"
#include "validate/validate.h"

namespace peak {
namespace {

using testing::CorpusCase;

const fs::path kSource = PEAK_SOURCE_DIR;
const fs::path kHipCorpus = kSource / "tests" / "integrity" / "hip";

struct Gpu {
  std::unique_ptr<Backend> backend;
  DeviceFacts facts;
  std::string error;
  fs::path cache;
};

Gpu& gpu() {
  static Gpu g = [] {
    Gpu g;
    g.backend = make_hip_backend();
    auto facts = g.backend->probe("", false);
    if (!facts)
      g.error = "probe failed: " + facts.error();
    else
      g.facts = *facts;
    auto dir = make_temp_dir("peak-hip-gpu-test-");
    g.cache = dir ? *dir : fs::temp_directory_path() / "peak-hip-gpu-test";
    return g;
  }();
  return g;
}

class CacheCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(gpu().cache, ec);
  }
};
[[maybe_unused]] auto* const g_cleanup = ::testing::AddGlobalTestEnvironment(new CacheCleanup);

KernelContext load(const std::string& name) {
  auto c = load_context(kSource / "examples" / name);
  EXPECT_TRUE(c) << c.error();
  return c ? *c : KernelContext{};
}

KernelContext corpus_context() {
  KernelContext c = load("matmul-hip-fp32");
  c.workspace = testing::kCorpusWorkspace;
  return c;
}

struct Built {
  BuildResult build;
  SourceRegions regions;
};

Built build_file(const KernelContext& ctx, const fs::path& file, const Config& config) {
  Built b;
  auto text = read_file(file);
  EXPECT_TRUE(text) << text.error();
  auto regions = split_regions(text ? *text : "", "kernel.hip");
  EXPECT_TRUE(regions) << regions.error();
  if (regions) b.regions = *regions;
  BuildRequest req;
  req.context = &ctx;
  req.source = text ? *text : "";
  req.defines = config;
  req.device = gpu().facts;
  req.cache_dir = gpu().cache;
  b.build = gpu().backend->build(req);
  return b;
}

RunnerOptions runner_options() {
  RunnerOptions o;
  o.executable = gpu().backend->runner();
  o.task_timeout_s = 30;
  o.start_timeout_s = 30;
  return o;
}

ValidationOutcome validate(const KernelContext& ctx, const Built& b, const Config& config,
                           const ValidationOptions& opts = {}) {
  ReferenceSource ref;
  ref.cache_dir = gpu().cache / "reference";
  Validator v(*gpu().backend, gpu().facts, runner_options(), ref);
  return v.validate(ctx, b.regions, b.build, config, opts);
}

std::string describe_checks(const ValidationOutcome& o) {
  std::string s = std::string(to_string(o.disposition)) + ": " + o.message;
  for (const auto& c : o.checks)
    s += "\n  " + c.shape.text() + (c.hidden ? " (hidden)" : "") + " -> " +
         std::string(to_string(c.disposition)) + " " + c.message;
  return s;
}

class HipGpuTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(gpu().error.empty()) << gpu().error; }
};

TEST_F(HipGpuTest, ProbeNamesTheNvidiaRunPlatform) {
  const DeviceFacts& f = gpu().facts;
  EXPECT_EQ(f.backend, "hip");
  EXPECT_EQ(f.vendor, "NVIDIA");
  EXPECT_TRUE(starts_with(f.arch, "sm_")) << f.arch;
  EXPECT_EQ(f.extra.at("platform"), "NVIDIA via peak_hip_to_cuda.h");
  EXPECT_EQ(f.extra.at("amd_targets"), "gfx90a, gfx1030");
}

class HipGpuExample : public HipGpuTest, public ::testing::WithParamInterface<std::string> {};

// The HIP seed builds for AMD and NVIDIA, passes the gate on NVIDIA and is timed with cuBLAS as the
// baseline; the numbers printed are NVIDIA numbers.
TEST_P(HipGpuExample, ValidatesAndTimesAgainstCublasOnNvidia) {
  KernelContext ctx = load(GetParam());
  Config config = testing::default_tuning(ctx);
  Built b = build_file(ctx, ctx.dir / ctx.source_file, config);
  ASSERT_EQ(b.build.disposition, Disposition::passed) << b.build.log;
  EXPECT_EQ(b.build.resources["platform"], "nvidia");
  EXPECT_EQ(b.build.artifact.extension(), ".cubin");
  if (!hip::find_hipcc().empty()) {
    EXPECT_TRUE(b.build.resources["targets"].contains("gfx90a")) << b.build.resources.dump(2);
    EXPECT_TRUE(b.build.resources["targets"].contains("gfx1030"));
  }
  ValidationOutcome v = validate(ctx, b, config);
  ASSERT_EQ(v.disposition, Disposition::passed) << describe_checks(v);

  MeasureOptions mo;
  mo.policy.warmup = 2;
  mo.policy.min_samples = 5;
  mo.policy.max_samples = 10;
  mo.policy.max_seconds = 3;
  ReferenceSource ref;
  Validator validator(*gpu().backend, gpu().facts, runner_options(), ref);
  auto ms = measure(*gpu().backend, gpu().facts, runner_options(), validator, ctx, b.regions,
                    b.build, config, {ctx.bench_shapes.at(0)}, mo);
  ASSERT_EQ(ms.size(), 1u);
  const Measurement& m = ms[0];
  EXPECT_EQ(m.disposition, Disposition::passed) << m.message;
  EXPECT_EQ(m.baseline, "cublas");
  ASSERT_FALSE(m.samples_ms.empty());
  ASSERT_FALSE(m.baseline_samples_ms.empty()) << m.message;
  EXPECT_GT(m.gflops, 0);
  EXPECT_GT(m.baseline_gflops, m.gflops);
  std::cout << "[ measured ] " << GetParam() << " on " << gpu().facts.name << " (HIP through "
            << "peak_hip_to_cuda.h) " << m.shape.text() << ": " << m.gflops / 1000
            << " TFLOP/s, cuBLAS " << m.baseline_gflops / 1000 << " TFLOP/s\n";
}

INSTANTIATE_TEST_SUITE_P(Examples, HipGpuExample,
                         ::testing::Values("matmul-hip-fp32", "matmul-hip-fp16"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

std::vector<CorpusCase> hip_corpus() {
  std::vector<CorpusCase> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(kHipCorpus, ec)) {
    if (!e.is_regular_file() || e.path().extension() != ".hip") continue;
    auto text = read_file(e.path());
    out.push_back(testing::parse_corpus_header(e.path(), text ? *text : ""));
  }
  std::sort(out.begin(), out.end(),
            [](const CorpusCase& a, const CorpusCase& b) { return a.file < b.file; });
  return out;
}

const std::set<std::string> kBuildTime = {"forbidden_api", "compile_failed"};

class HipGpuCorpus : public HipGpuTest, public ::testing::WithParamInterface<CorpusCase> {};

TEST_P(HipGpuCorpus, GateGivesTheExpectedDispositionAndTheNextKernelPasses) {
  const CorpusCase& c = GetParam();
  ASSERT_FALSE(c.expect.empty()) << c.file << ": " << join(c.problems, "; ");
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
    if (c.expect.count("timeout")) {
      opts.shapes = {ctx.validation_shapes.at(0)};
      opts.seeds = 1;
      opts.sampled_hidden_shapes = 0;
      opts.task_timeout_s = 10;
    }
    ValidationOutcome v = validate(ctx, b, config, opts);
    std::cout << "[ observed ] " << c.file << ": " << to_string(v.disposition) << ": "
              << v.message << "\n";
    EXPECT_TRUE(c.expect.count(std::string(to_string(v.disposition))))
        << c.file << ": expected " << expected << ", got " << describe_checks(v);
  }
  Built good = build_file(ctx, kHipCorpus / "correct_tiled.hip", config);
  ASSERT_EQ(good.build.disposition, Disposition::passed) << good.build.log;
  ValidationOutcome after = validate(ctx, good, config);
  EXPECT_EQ(after.disposition, Disposition::passed)
      << "after " << c.file << ": " << describe_checks(after);
}

INSTANTIATE_TEST_SUITE_P(Corpus, HipGpuCorpus, ::testing::ValuesIn(hip_corpus()),
                         [](const auto& info) {
                           std::string n = fs::path(info.param.file).stem().string();
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace peak
