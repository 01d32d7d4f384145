#include "validate/validate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "context/inputs.h"
#include "context/testing.h"
#include "util/fs.h"
#include "util/temp_dir_testing.h"

namespace peak {
namespace {

TEST(Tolerance, ScalesWithReductionAndCatchesTf32) {
  double t64 = default_tolerance(DType::f32, DType::f32, 64);
  double t4096 = default_tolerance(DType::f32, DType::f32, 4096);
  EXPECT_GT(t4096, t64);
  EXPECT_NEAR(t4096, 6.4e-5, 1e-6);
  // TF32 errors are about 3e-4 of the output scale: well over the fp32 tolerance.
  EXPECT_LT(t4096, 3e-4 / 2);
  // fp16 inputs with fp32 accumulation get a looser bound; fp16 outputs add their rounding.
  EXPECT_GT(default_tolerance(DType::f16, DType::f32, 4096), t4096);
  EXPECT_GT(default_tolerance(DType::f16, DType::f16, 4096),
            default_tolerance(DType::f16, DType::f32, 4096));
  EXPECT_EQ(default_tolerance(DType::i32, DType::i32, 100), 0);
}

// Nondeterminism judged against the tolerance: a fake backend (no vendor library), the float64
// CPU reference, and output files written here as two checked runs would.
class NoBackend : public Backend {
 public:
  std::string name() const override { return "none"; }
  std::string source_extension() const override { return ".txt"; }
  std::map<std::string, std::string> translation_table() const override { return {}; }
  std::filesystem::path runner() const override { return {}; }
  std::vector<std::pair<std::string, std::string>> toolchain() const override { return {}; }
  Result<DeviceFacts> probe(const std::string&, bool) override { return DeviceFacts{}; }
  BuildResult build(const BuildRequest&) override { return {}; }
  PlanDialect plan_dialect() const override { return {}; }
  std::string baseline(const KernelContext&, const DeviceFacts&) const override { return ""; }

 protected:
  PlanResult resolve_plan(LaunchPlan&, const BuildResult&, const DeviceFacts&) override {
    return {};
  }
};

class RunToRun : public testing::TempDirTest {
 protected:
  RunToRun() : TempDirTest("peak-run-to-run-") {}
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(TempDirTest::SetUp());
    auto ctx = parse_context(R"(name = "mm"
backend = "hlsl"
family = "matmul"
source = "k.hlsl"
reference = "cpu"
reduction = "K"
)" + testing::matmul_arrays_toml() +
                                 std::string(testing::kMatmulScalarsToml),
                             "kernel.toml");
    ASSERT_TRUE(ctx) << ctx.error();
    ctx_ = *ctx;
    shape_ = Shape{{{"M", 24}, {"N", 20}, {"K", 64}}};
    // The product as an fp32 kernel computes it (fp32 sums in order).
    auto a = generate_array(ctx_.arrays[0], 24 * 64, array_seed(kSeed, "A"), 0);
    auto b = generate_array(ctx_.arrays[1], 64 * 20, array_seed(kSeed, "B"), 0);
    const float* A = reinterpret_cast<const float*>(a.data());
    const float* B = reinterpret_cast<const float*>(b.data());
    c_.assign(24 * 20, 0.f);
    for (int i = 0; i < 24; ++i)
      for (int j = 0; j < 20; ++j) {
        float acc = 0;
        for (int k = 0; k < 64; ++k) acc += A[i * 64 + k] * B[k * 20 + j];
        c_[i * 20 + j] = acc;
      }
  }
  std::map<std::string, std::string> write(const std::string& name, const std::vector<float>& v) {
    std::string bytes(v.size() * 4, '\0');
    std::memcpy(bytes.data(), v.data(), bytes.size());
    EXPECT_TRUE(write_file(dir_ / name, bytes));
    return {{"C", (dir_ / name).string()}};
  }
  ShapeCheck judge(const std::vector<float>& second, ValidationOptions opts = {}) {
    NoBackend backend;
    Validator v(backend, DeviceFacts{}, RunnerOptions{}, ReferenceSource{});
    return v.compare_runs(ctx_, shape_, kSeed, 0, write("first.bin", c_),
                          write("second.bin", second), opts);
  }

  static constexpr uint64_t kSeed = 77;
  KernelContext ctx_;
  Shape shape_;
  const fs::path& dir_ = temp_dir();
  std::vector<float> c_;
};

// A split-K kernel accumulating with atomics: the order of the additions changes from run to
// run, and so do the last bits of many elements. That is rounding.
TEST_F(RunToRun, DifferencesInTheLastBitsAreAcceptedAndRecorded) {
  std::vector<float> second = c_;
  for (size_t i = 0; i < second.size(); i += 3)
    second[i] = std::nextafter(std::nextafter(second[i], 1e9f), 1e9f);
  ShapeCheck c = judge(second);
  EXPECT_EQ(c.disposition, Disposition::passed) << c.message;
  EXPECT_EQ(c.run_to_run_differences, static_cast<int64_t>((second.size() + 2) / 3));
  EXPECT_GT(c.run_to_run_max_fraction, 0);
  EXPECT_LT(c.run_to_run_max_fraction, 1);
  EXPECT_NE(c.message.find("rounding, accepted"), std::string::npos) << c.message;
}

// A race (a missing barrier): one element of the second run moved far from the first.
TEST_F(RunToRun, ARaceBeyondTheToleranceIsNondeterministic) {
  std::vector<float> second = c_;
  second[5 * 20 + 7] += 0.25f * (std::fabs(second[5 * 20 + 7]) + 1);
  ShapeCheck c = judge(second);
  EXPECT_EQ(c.disposition, Disposition::nondeterministic) << c.message;
  EXPECT_NE(c.message.find("a race"), std::string::npos) << c.message;
}

// Outputs too large to check every element against the reference: a race in an element the
// reference check does not sample is still caught by comparing the two runs element by element.
TEST_F(RunToRun, ARaceInAnUnsampledElementIsCaught) {
  ValidationOptions opts;
  opts.full_check_limit = 16;
  opts.sampled_elements = 16;
  std::vector<float> second = c_;
  size_t i = 11 * 20 + 3;
  second[i] = -second[i] + 3.0f;
  ShapeCheck c = judge(second, opts);
  EXPECT_EQ(c.disposition, Disposition::nondeterministic) << c.message;
  EXPECT_NE(c.message.find("C[11][3]"), std::string::npos) << c.message;
}

TEST_F(RunToRun, APoisonedElementInTheSecondRunIsNeverRounding) {
  std::vector<float> second = c_;
  uint32_t poison = poison_u32(DType::f32);
  std::memcpy(&second[0], &poison, 4);
  ShapeCheck c = judge(second);
  EXPECT_EQ(c.disposition, Disposition::nondeterministic) << c.message;
}

}  // namespace
}  // namespace peak
