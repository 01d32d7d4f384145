#include "validate/validate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend/testing.h"
#include "context/inputs.h"
#include "context/testing.h"
#include "family/family.h"
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
  // e4m3 inputs: the fp8 tensor cores' shorter accumulation gets a looser bound still.
  EXPECT_GT(default_tolerance(DType::e4m3, DType::f32, 4096),
            default_tolerance(DType::f16, DType::f32, 4096));
}

// Nondeterminism judged against the tolerance: a stub backend (no vendor library), the float64
// CPU reference, and output files written here as two checked runs would.
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
    testing::StubBackend backend;
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
// Timed checks one after another on one validator: each launch's elements against the reference
// of that launch's inputs, which the validator generates only where the reference reads them,
// in buffers kept from the check before.
TEST_F(RunToRun, TimedChecksInARowEachAgainstItsOwnInputs) {
  testing::StubBackend backend;
  Validator v(backend, DeviceFacts{}, RunnerOptions{}, ReferenceSource{});
  auto product = [&](uint64_t seed) {
    auto a = generate_array(ctx_.arrays[0], 24 * 64, array_seed(seed, "A"), 0);
    auto b = generate_array(ctx_.arrays[1], 64 * 20, array_seed(seed, "B"), 0);
    const float* A = reinterpret_cast<const float*>(a.data());
    const float* B = reinterpret_cast<const float*>(b.data());
    std::vector<float> c(24 * 20, 0.f);
    for (int i = 0; i < 24; ++i)
      for (int j = 0; j < 20; ++j)
        for (int k = 0; k < 64; ++k) c[i * 20 + j] += A[i * 64 + k] * B[k * 20 + j];
    return c;
  };
  for (uint64_t seed = 100; seed < 106; ++seed) {
    const std::vector<float> c = product(seed);
    TimedCheck tc;
    tc.sample = static_cast<int>(seed - 100);
    tc.seed = seed;
    for (int64_t x : {int64_t{0}, static_cast<int64_t>(seed % 480), int64_t{479},
                      static_cast<int64_t>((seed * 37) % 480)}) {
      tc.positions["C"].push_back(x);
      tc.values["C"].push_back(c[x]);
    }
    ShapeCheck ok = v.check_timed_launch(ctx_, shape_, tc);
    EXPECT_EQ(ok.disposition, Disposition::passed) << seed << ": " << ok.message;
    // The product of the previous launch's inputs is wrong for this one.
    if (seed == 100) continue;
    const std::vector<float> before = product(seed - 1);
    for (size_t k = 0; k < tc.positions["C"].size(); ++k)
      tc.values["C"][k] = before[tc.positions["C"][k]];
    ShapeCheck stale = v.check_timed_launch(ctx_, shape_, tc);
    EXPECT_NE(stale.disposition, Disposition::passed) << seed;
  }
}

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

// A member of the family interface that exists only here: Y = 3 * X element-wise, with a CPU
// reference and a tolerance of its own (1%). Registered, it is what the validator uses for a
// context that names it: nothing else knows the family.
class ScaleFamily final : public Family {
 public:
  std::string_view name() const override { return "scale"; }
  bool has_cpu_reference() const override { return true; }
  Status check_cpu_reference(const KernelContext& ctx) const override {
    if (ctx.arrays.size() != 2 || ctx.arrays[0].name != "X" || ctx.arrays[1].name != "Y")
      return Status::error("family \"scale\" needs arrays X and output Y");
    return Status::ok();
  }
  Result<std::map<std::string, ReferenceValues>> cpu_reference(
      const KernelContext& ctx, const Shape&, const ReferenceInputs& inputs,
      const ReferenceIndices& indices) const override {
    if (Status s = check_cpu_reference(ctx); !s) return make_error(s.message());
    const auto& x = inputs.at("X");
    ReferenceValues v;
    for (int64_t i : indices.at("Y")) {
      v.value.push_back(3.0 * element_as_double(DType::f32, x.data(), i));
      v.abs.push_back(std::fabs(v.value.back()));
    }
    return std::map<std::string, ReferenceValues>{{"Y", v}};
  }
  double default_tolerance(const KernelContext&, const Shape&, const ArraySpec&) const override {
    return 0.01;
  }
};

TEST(FamilyMember, ValidationUsesTheReferenceAndToleranceOfARegisteredFamily) {
  static const ScaleFamily scale;
  register_family(scale);
  auto ctx = parse_context(R"(name = "scale"
backend = "hlsl"
family = "scale"
source = "k.hlsl"
reference = "cpu"
[[arrays]]
name = "X"
dtype = "f32"
size = "n"
[[arrays]]
name = "Y"
dtype = "f32"
size = "n"
output = true
[[scalars]]
name = "n"
)",
                           "kernel.toml");
  ASSERT_TRUE(ctx) << ctx.error();
  auto dir = make_temp_dir("peak-scale-family-");
  ASSERT_TRUE(dir) << dir.error();
  const uint64_t seed = 5;
  const Shape shape{{{"n", 64}}};
  auto x = generate_array(ctx->arrays[0], 64, array_seed(seed, "X"), 0);
  // Y off by `rel` (relative) everywhere, and by `plus` at element 9.
  auto judge = [&](float rel, float plus) {
    std::vector<float> y(64);
    for (size_t i = 0; i < y.size(); ++i)
      y[i] = 3.0f * reinterpret_cast<const float*>(x.data())[i] * (1 + rel);
    y[9] += plus;
    std::string bytes(y.size() * 4, '\0');
    std::memcpy(bytes.data(), y.data(), bytes.size());
    EXPECT_TRUE(write_file(*dir / "y.bin", bytes));
    testing::StubBackend backend;
    Validator v(backend, DeviceFacts{}, RunnerOptions{}, ReferenceSource{});
    return v.compare_outputs(*ctx, shape, seed, 0, {{"Y", (*dir / "y.bin").string()}}, {});
  };
  // 0.5% off passes the family's 1% (the dtype rule of fp32 would refuse it); 1.0 off does not.
  ShapeCheck close = judge(0.005f, 0);
  EXPECT_EQ(close.disposition, Disposition::passed) << close.message;
  EXPECT_EQ(close.checked_elements, 64);
  ShapeCheck far = judge(0, 1.0f);
  EXPECT_EQ(far.disposition, Disposition::incorrect) << far.message;
  EXPECT_EQ(far.bad_elements, 1);
  EXPECT_NE(far.message.find("Y[9]"), std::string::npos) << far.message;
  std::error_code ec;
  fs::remove_all(*dir, ec);
}

}  // namespace
}  // namespace peak
