#include "family/softmax/softmax.h"

#include <cmath>

#include <gtest/gtest.h>

#include "family/rows/testing.h"

namespace peak {
namespace {

using namespace rows::testing;  // row_context, rn, typed_bytes, ...

// Softmax of each row computed directly in float64: max, sum of exponentials, quotient.
std::vector<double> direct_softmax(const std::vector<double>& x, int64_t R, int64_t N) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < R; ++r) {
    double m = x[r * N];
    for (int64_t c = 1; c < N; ++c) m = std::max(m, x[r * N + c]);
    double s = 0;
    for (int64_t c = 0; c < N; ++c) s += std::exp(x[r * N + c] - m);
    for (int64_t c = 0; c < N; ++c) y[r * N + c] = std::exp(x[r * N + c] - m) / s;
  }
  return y;
}

TEST(Softmax, IsRegisteredWithACpuReference) {
  KernelContext ctx = row_context("softmax", {});
  EXPECT_EQ(family_of(ctx).name(), "softmax");
  EXPECT_EQ(ctx.reference, ReferenceKind::cpu);  // parsing asked the family
  EXPECT_TRUE(check_cpu_reference(ctx)) << check_cpu_reference(ctx).message();
}

// A row of [0, ln 2, ln 3] is [1, 2, 3] / 6, whatever is added to it.
TEST(Softmax, HandCheckedRow) {
  KernelContext ctx = row_context("softmax", {});
  const double l2 = std::log(2.0), l3 = std::log(3.0);
  std::vector<double> x{0, l2, l3, 100, 100 + l2, 100 + l3};
  auto y = all_of_y(ctx, 2, 3, {{"X", typed_bytes(DType::f32, x)}});
  ASSERT_TRUE(y) << y.error();
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(y->value[r * 3 + c], (c + 1) / 6.0, 1e-6) << r << " " << c;
      EXPECT_EQ(y->abs[r * 3 + c], y->value[r * 3 + c]);
    }
}

// Rows whose length is not a multiple of 4, a single row, and f16 / bf16 inputs read as stored.
TEST(Softmax, MatchesADirectComputation) {
  for (auto [R, N] : {std::pair<int64_t, int64_t>{3, 7}, {1, 13}, {5, 1}, {4, 33}}) {
    for (DType t : {DType::f32, DType::f16, DType::bf16}) {
      KernelContext ctx = row_context("softmax", {}, to_string(t));
      auto x = some_values(static_cast<size_t>(R * N), -8, 8, static_cast<uint32_t>(R * N));
      auto bytes = typed_bytes(t, x);
      std::vector<double> stored(x.size());
      for (size_t i = 0; i < x.size(); ++i) stored[i] = element_as_double(t, bytes.data(), i);
      auto want = direct_softmax(stored, R, N);
      auto y = all_of_y(ctx, R, N, {{"X", bytes}});
      ASSERT_TRUE(y) << y.error();
      double row_sum = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_NEAR(y->value[i], want[i], 1e-15) << R << "x" << N << " " << i;
        if (static_cast<int64_t>(i) < N) row_sum += y->value[i];
      }
      EXPECT_NEAR(row_sum, 1.0, 1e-12);
    }
  }
}

// Only the requested elements, in the requested order, repeats included; the same values as a
// request of the whole output.
TEST(Softmax, RequestedIndicesInRequestedOrder) {
  KernelContext ctx = row_context("softmax", {});
  auto x = some_values(6 * 9, -8, 8);
  ReferenceInputs in{{"X", typed_bytes(DType::f32, x)}};
  auto all = all_of_y(ctx, 6, 9, in);
  ASSERT_TRUE(all) << all.error();
  auto some = family_of(ctx).cpu_reference(ctx, rn(6, 9), in, {{"Y", {53, 0, 17, 53}}});
  ASSERT_TRUE(some) << some.error();
  EXPECT_EQ(some->at("Y").value,
            (std::vector<double>{all->value[53], all->value[0], all->value[17], all->value[53]}));
}

TEST(Softmax, ReferenceErrorsSayWhatIsWrong) {
  KernelContext ctx = row_context("softmax", {});
  ReferenceInputs in{{"X", typed_bytes(DType::f32, some_values(6, -1, 1))}};
  EXPECT_EQ(reference_error(ctx, rn(2, 3), in, {{"Y", {0}}}), "");
  EXPECT_NE(reference_error(ctx, rn(2, 3), in, {{"Y", {6}}}).find("index 6 is outside output Y"),
            std::string::npos);
  EXPECT_NE(reference_error(ctx, rn(2, 3), in, {{"X", {0}}}).find("only Y is"), std::string::npos);
  EXPECT_NE(reference_error(ctx, rn(2, 4), in, {{"Y", {0}}}).find("input X has 24 bytes"),
            std::string::npos);
  EXPECT_NE(reference_error(ctx, rn(2, 3), {}, {{"Y", {0}}}).find("input X is missing"),
            std::string::npos);
  EXPECT_NE(reference_error(ctx, Shape{{{"R", 2}}}, in, {{"Y", {0}}}).find("no value to N"),
            std::string::npos);
}

TEST(Softmax, TheConventionCheckNamesWhatDiffers) {
  auto message = [](KernelContext ctx) { return check_cpu_reference(ctx).message(); };
  KernelContext ok = row_context("softmax", {});
  KernelContext c = ok;
  c.arrays[0].size = "R * N + 1";
  EXPECT_NE(message(c).find("array X has size \"R * N + 1\" = 16 for R=3 N=5, not 15"),
            std::string::npos)
      << message(c);
  EXPECT_NE(message(c).find("family \"softmax\" needs input X (size R * N), output Y"),
            std::string::npos);
  c = ok;
  c.arrays[1].output = false;
  EXPECT_NE(message(c).find("array Y must be an output"), std::string::npos) << message(c);
  c = ok;
  c.arrays[0].name = "A";
  EXPECT_NE(message(c).find("no array X"), std::string::npos) << message(c);
  c = ok;
  c.arrays[0].dtype = DType::i32;
  EXPECT_NE(message(c).find("array X is i32"), std::string::npos) << message(c);
  c = ok;
  c.scalars[0].name = "M";
  EXPECT_NE(message(c).find("no scalar R"), std::string::npos) << message(c);
  c = ok;
  c.arrays.push_back(c.arrays[1]);
  c.arrays.back().name = "Z";
  EXPECT_NE(message(c).find("array Z is an output, but the softmax reference computes only Y"),
            std::string::npos)
      << message(c);
}

}  // namespace
}  // namespace peak
