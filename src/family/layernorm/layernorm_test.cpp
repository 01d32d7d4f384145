#include "family/layernorm/layernorm.h"

#include <cmath>

#include <gtest/gtest.h>

#include "family/rows/testing.h"

namespace peak {
namespace {

using namespace rows::testing;  // row_context, rn, typed_bytes, ...

// X = [1, 2, 3, 6]: mean 3, population variance (4 + 1 + 0 + 9) / 4 = 3.5.
TEST(Layernorm, HandCheckedRow) {
  KernelContext ctx = row_context("layernorm", {"W", "B"});
  auto y = all_of_y(ctx, 1, 4,
                    {{"X", typed_bytes(DType::f32, {1, 2, 3, 6})},
                     {"W", typed_bytes(DType::f32, {1, 2, 1, 1})},
                     {"B", typed_bytes(DType::f32, {0, 0, 0.5, -1})}});
  ASSERT_TRUE(y) << y.error();
  const double s = 1 / std::sqrt(3.5 + 1e-5);
  EXPECT_DOUBLE_EQ(y->value[0], -2 * s);
  EXPECT_DOUBLE_EQ(y->value[1], -2 * s);
  EXPECT_DOUBLE_EQ(y->value[2], 0.5);
  EXPECT_DOUBLE_EQ(y->value[3], 3 * s - 1);
  // The magnitude counts the terms of the cancelling difference: (|x| + |mean|) rstd |w| + |b|.
  EXPECT_DOUBLE_EQ(y->abs[2], 6 * s + 0.5);
}

TEST(Layernorm, MatchesADirectComputation) {
  for (auto [R, N] : {std::pair<int64_t, int64_t>{3, 7}, {1, 255}, {2, 1}}) {
    KernelContext ctx = row_context("layernorm", {"W", "B"});
    auto x = some_values(static_cast<size_t>(R * N), 3, 5, 3);  // an offset mean: cancellation
    auto w = some_values(static_cast<size_t>(N), 0.9, 1.1, 4);
    auto b = some_values(static_cast<size_t>(N), -0.1, 0.1, 5);
    ReferenceInputs in{{"X", typed_bytes(DType::f32, x)},
                       {"W", typed_bytes(DType::f32, w)},
                       {"B", typed_bytes(DType::f32, b)}};
    auto y = all_of_y(ctx, R, N, in);
    ASSERT_TRUE(y) << y.error();
    auto at = [&](const char* a, int64_t i) {
      return element_as_double(DType::f32, in.at(a).data(), i);
    };
    for (int64_t r = 0; r < R; ++r) {
      double mean = 0, var = 0;
      for (int64_t c = 0; c < N; ++c) mean += at("X", r * N + c) / N;
      for (int64_t c = 0; c < N; ++c) var += std::pow(at("X", r * N + c) - mean, 2) / N;
      for (int64_t c = 0; c < N; ++c) {
        double want = (at("X", r * N + c) - mean) / std::sqrt(var + 1e-5) * at("W", c) + at("B", c);
        EXPECT_NEAR(y->value[r * N + c], want, 1e-12) << R << "x" << N << " " << r << "," << c;
      }
    }
  }
}

TEST(Layernorm, TheConventionNeedsWeightAndBias) {
  KernelContext ctx = row_context("layernorm", {"W", "B"});
  ctx.arrays.erase(ctx.arrays.begin() + 2);  // parsing refuses it: the check says why
  EXPECT_NE(check_cpu_reference(ctx).message().find("no array B"), std::string::npos);
  ctx = row_context("layernorm", {"W", "B"});
  ctx.arrays[2].output = true;
  EXPECT_NE(check_cpu_reference(ctx).message().find("array B must not be an output"),
            std::string::npos)
      << check_cpu_reference(ctx).message();
  ctx = row_context("layernorm", {"W", "B"});
  ReferenceInputs in{{"X", typed_bytes(DType::f32, {1, 2})},
                     {"W", typed_bytes(DType::f32, {1, 1})}};
  EXPECT_NE(reference_error(ctx, rn(1, 2), in, {{"Y", {0}}}).find("input B is missing"),
            std::string::npos);
}

}  // namespace
}  // namespace peak
