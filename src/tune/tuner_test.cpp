#include "tune/tuner.h"

#include <gtest/gtest.h>

namespace peak {
namespace {

KernelContext ctx_with(std::vector<TuningParam> params, std::string valid = "") {
  KernelContext c;
  c.name = "t";
  c.tuning = std::move(params);
  c.tuning_valid = std::move(valid);
  return c;
}

DeviceFacts device() {
  DeviceFacts d;
  d.max_threads_per_group = 256;
  d.shared_memory_per_group = 32768;
  d.subgroup_size = 32;
  return d;
}

TEST(Space, CartesianProductWithConstraint) {
  auto ctx = ctx_with({{"X", {8, 16, 32}, 16}, {"Y", {4, 8, 16}, 8}}, "X * Y <= max_threads");
  auto s = enumerate_space(ctx, device(), {});
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ(s->total, 9u);
  EXPECT_EQ(s->invalid, 1u);  // 32 * 16 = 512 > 256
  EXPECT_EQ(s->configs.size(), 8u);
  // Defaults come first.
  EXPECT_EQ(s->configs.front().at("X"), 16);
  EXPECT_EQ(s->configs.front().at("Y"), 8);
  EXPECT_FALSE(s->sampled);
}

TEST(Space, BudgetSamplesDeterministicallyAndKeepsMustInclude) {
  auto ctx = ctx_with({{"A", {1, 2, 3, 4, 5, 6, 7, 8}, 1}, {"B", {1, 2, 3, 4, 5, 6, 7, 8}, 1}});
  SpaceOptions o;
  o.budget = 10;
  o.must_include = {{{"A", 8}, {"B", 8}}};
  auto s1 = enumerate_space(ctx, device(), o);
  auto s2 = enumerate_space(ctx, device(), o);
  ASSERT_TRUE(s1 && s2);
  EXPECT_TRUE(s1->sampled);
  EXPECT_EQ(s1->configs.size(), 10u);
  EXPECT_EQ(s1->configs, s2->configs);
  EXPECT_EQ(s1->configs[0], (Config{{"A", 1}, {"B", 1}}));
  EXPECT_EQ(s1->configs[1], (Config{{"A", 8}, {"B", 8}}));
}

TEST(Space, OverridesReplaceValueSets) {
  auto ctx = ctx_with({{"A", {1, 2}, 1}, {"B", {1, 2}, 1}});
  SpaceOptions o;
  o.overrides["B"] = {7};
  auto s = enumerate_space(ctx, device(), o);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->total, 2u);
  for (const auto& c : s->configs) EXPECT_EQ(c.at("B"), 7);
}

TEST(Space, UnknownOverrideAndBadConstraintAreErrors) {
  auto ctx = ctx_with({{"A", {1, 2}, 1}});
  SpaceOptions o;
  o.overrides["NOPE"] = {1};
  auto s = enumerate_space(ctx, device(), o);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("NOPE"), std::string::npos);
  auto bad = ctx_with({{"A", {1, 2}, 1}}, "A <= ");
  EXPECT_FALSE(enumerate_space(bad, device(), {}));
  auto unknown = ctx_with({{"A", {1, 2}, 1}}, "A <= WHAT");
  auto u = enumerate_space(unknown, device(), {});
  ASSERT_FALSE(u);
  EXPECT_NE(u.error().find("WHAT"), std::string::npos);
}

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
