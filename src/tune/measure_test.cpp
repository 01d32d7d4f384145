#include "tune/measure.h"

#include <gtest/gtest.h>

namespace peak {
namespace {

TEST(Stats, MedianQuartilesSpread) {
  auto s = compute_stats({5, 1, 3, 2, 4});
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.p25, 2);
  EXPECT_DOUBLE_EQ(s.p75, 4);
  EXPECT_DOUBLE_EQ(s.rel_spread, 2.0 / 3.0);
  EXPECT_EQ(s.n, 5u);
  EXPECT_EQ(compute_stats({}).n, 0u);
}

}  // namespace
}  // namespace peak
