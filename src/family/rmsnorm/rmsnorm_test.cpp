#include "family/rmsnorm/rmsnorm.h"

#include <cmath>

#include <gtest/gtest.h>

#include "family/rows/testing.h"

namespace peak {
namespace {

using namespace rows::testing;  // row_context, rn, typed_bytes, ...

// X = [3, 4]: mean square 12.5, so Y = X / sqrt(12.5 + 1e-6) * W.
TEST(Rmsnorm, HandCheckedRow) {
  KernelContext ctx = row_context("rmsnorm", {"W"});
  auto y = all_of_y(
      ctx, 1, 2, {{"X", typed_bytes(DType::f32, {3, 4})}, {"W", typed_bytes(DType::f32, {1, -2})}});
  ASSERT_TRUE(y) << y.error();
  const double s = 1 / std::sqrt(12.5 + 1e-6);
  EXPECT_DOUBLE_EQ(y->value[0], 3 * s);
  EXPECT_DOUBLE_EQ(y->value[1], -8 * s);
  EXPECT_DOUBLE_EQ(y->abs[1], 8 * s);
}

// bf16 rows (the family's usual dtype) of lengths that are not multiples of 4, and a single row,
// against float64 from the stored bf16 values.
TEST(Rmsnorm, MatchesADirectComputation) {
  for (auto [R, N] : {std::pair<int64_t, int64_t>{3, 7}, {1, 130}, {6, 1}}) {
    for (DType t : {DType::bf16, DType::f32}) {
      KernelContext ctx = row_context("rmsnorm", {"W"}, to_string(t));
      auto xb = typed_bytes(t, some_values(static_cast<size_t>(R * N), -2, 2, 7));
      auto wb = typed_bytes(t, some_values(static_cast<size_t>(N), 0.8, 1.2, 9));
      auto y = all_of_y(ctx, R, N, {{"X", xb}, {"W", wb}});
      ASSERT_TRUE(y) << y.error();
      for (int64_t r = 0; r < R; ++r) {
        double ss = 0;
        for (int64_t c = 0; c < N; ++c)
          ss += std::pow(element_as_double(t, xb.data(), r * N + c), 2);
        const double scale = 1 / std::sqrt(ss / N + 1e-6);
        for (int64_t c = 0; c < N; ++c) {
          const double want = element_as_double(t, xb.data(), r * N + c) * scale *
                              element_as_double(t, wb.data(), c);
          EXPECT_NEAR(y->value[r * N + c], want, 1e-14) << R << "x" << N << " " << r << "," << c;
        }
      }
    }
  }
}

// The weight may be f32 beside bf16 rows; the reference reads each array in its own dtype.
TEST(Rmsnorm, AWeightOfAnotherDtype) {
  KernelContext ctx = row_context("rmsnorm", {"W"}, "bf16", "f32");
  auto y =
      all_of_y(ctx, 1, 2,
               {{"X", typed_bytes(DType::bf16, {3, 4})}, {"W", typed_bytes(DType::f32, {0.1, 1})}});
  ASSERT_TRUE(y) << y.error();
  EXPECT_DOUBLE_EQ(y->value[0], 3 / std::sqrt(12.5 + 1e-6) * double(0.1f));
  EXPECT_EQ(family_of(ctx).baseline(ctx, "cuda"), "cudnn");
}

// bf16 output: 2 ulp (2 * 7.9e-3) dominate the sqrt(N) term of the reduction.
TEST(Rmsnorm, ABf16OutputIsToleratedByItsUlps) {
  KernelContext ctx = row_context("rmsnorm", {"W"}, "bf16");
  const double tol =
      family_of(ctx).default_tolerance(ctx, rn(8, 4096), ctx.arrays[2]);
  EXPECT_NEAR(tol, 1e-5 * 64 + 2 * 7.9e-3, 1e-12);
  EXPECT_GT(2 * 7.9e-3, 10 * 1e-5 * 64);
}

TEST(Rmsnorm, TheConventionNeedsTheWeight) {
  KernelContext ctx = row_context("rmsnorm", {"W"});
  ctx.arrays.erase(ctx.arrays.begin() + 1);  // parsing refuses it: the check says why
  Status s = check_cpu_reference(ctx);
  EXPECT_NE(s.message().find("no array W"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("input W (size N)"), std::string::npos) << s.message();
  ctx = row_context("rmsnorm", {"W"});
  ctx.arrays[1].size = "R * N";
  s = check_cpu_reference(ctx);
  EXPECT_NE(s.message().find("array W has size \"R * N\" = 15 for R=3 N=5, not 5"),
            std::string::npos)
      << s.message();
  auto y = family_of(ctx).cpu_reference(ctx, rn(1, 2),
                                        {{"X", typed_bytes(DType::f32, {3, 4})}}, {{"Y", {0}}});
  ASSERT_FALSE(y);
}

}  // namespace
}  // namespace peak
