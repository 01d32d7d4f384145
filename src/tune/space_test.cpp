#include "tune/space.h"

#include <set>

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
  auto ctx = ctx_with({{"X", {32, 8, 16}, 16}, {"Y", {4, 8, 16}, 8}}, "X * Y <= max_threads");
  auto s = space_for(ctx, device());
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ(s->total(), 9u);
  EXPECT_EQ(s->size(), 8u);
  ASSERT_EQ(s->pruned().size(), 1u);  // 32 * 16 = 512 > 256
  EXPECT_EQ(s->pruned()[0].config, (Config{{"X", 32}, {"Y", 16}}));
  EXPECT_EQ(s->pruned()[0].reason,
            "tuning_valid: `X * Y <= max_threads` is false (X=32 Y=16 max_threads=256)");
  // Values are sorted; coordinates are their positions.
  EXPECT_EQ(s->params()[0].values, (std::vector<int64_t>{8, 16, 32}));
  auto d = s->default_index();
  ASSERT_TRUE(d);
  EXPECT_EQ(s->config(*d), (Config{{"X", 16}, {"Y", 8}}));
  EXPECT_EQ(s->coords(*d), (std::vector<int>{1, 1}));
  for (size_t i = 0; i < s->size(); ++i) EXPECT_EQ(s->find(s->config(i)), i);
  EXPECT_FALSE(s->find({{"X", 32}, {"Y", 16}}));
  EXPECT_FALSE(s->find({{"X", 7}, {"Y", 16}}));
}

TEST(Space, ThePrunedReasonNamesTheConjunctThatFailed) {
  auto ctx = ctx_with({{"X", {1, 2}, 1}, {"Y", {1, 2}, 1}}, "X <= 1 && (Y == 1 || Y == 3)");
  auto s = space_for(ctx, device());
  ASSERT_TRUE(s) << s.error();
  ASSERT_EQ(s->size(), 1u);
  std::vector<std::string> reasons;
  for (const auto& p : s->pruned()) reasons.push_back(p.reason);
  EXPECT_EQ(reasons, (std::vector<std::string>{
                         "tuning_valid: `X <= 1` is false (X=2)",
                         "tuning_valid: `(Y == 1 || Y == 3)` is false (Y=2)",
                         "tuning_valid: `X <= 1` is false (X=2)",
                     }));
  // A top-level || is not split.
  auto whole = space_for(ctx_with({{"X", {1, 2}, 1}}, "X == 3 || X == 4"), device());
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->pruned()[0].reason, "tuning_valid: `X == 3 || X == 4` is false (X=1)");
}

TEST(Space, NeighborsDifferInOneParameter) {
  auto ctx = ctx_with({{"A", {1, 2, 4, 8}, 1}, {"B", {1, 2, 4}, 1}}, "A * B <= 16");
  auto s = space_for(ctx, device());
  ASSERT_TRUE(s);
  size_t i = *s->find({{"A", 2}, {"B", 2}});
  auto configs = [&](std::vector<size_t> v) {
    std::set<Config> out;
    for (size_t j : v) out.insert(s->config(j));
    return out;
  };
  EXPECT_EQ(
      configs(s->neighbors(i, true)),
      (std::set<Config>{
          {{"A", 1}, {"B", 2}}, {{"A", 4}, {"B", 2}}, {{"A", 2}, {"B", 1}}, {{"A", 2}, {"B", 4}}}));
  // Any other value of one parameter, except where the constraint rules it out (8 * 2 > 16 is
  // fine, 8 * 4 is not reached from here).
  EXPECT_EQ(configs(s->neighbors(i, false)), (std::set<Config>{{{"A", 1}, {"B", 2}},
                                                               {{"A", 4}, {"B", 2}},
                                                               {{"A", 8}, {"B", 2}},
                                                               {{"A", 2}, {"B", 1}},
                                                               {{"A", 2}, {"B", 4}}}));
}

TEST(Space, OverridesReplaceValueSets) {
  auto ctx = ctx_with({{"A", {1, 2}, 1}, {"B", {1, 2}, 1}});
  auto s = space_for(ctx, device(), {{"B", {7}}});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->total(), 2u);
  for (size_t i = 0; i < s->size(); ++i) EXPECT_EQ(s->config(i).at("B"), 7);
  EXPECT_FALSE(s->default_index());  // B's default 1 is no longer a value
}

TEST(Space, UnknownOverrideBadConstraintAndHugeSpacesAreErrors) {
  auto ctx = ctx_with({{"A", {1, 2}, 1}});
  auto s = space_for(ctx, device(), {{"NOPE", {1}}});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("NOPE"), std::string::npos);
  EXPECT_FALSE(space_for(ctx_with({{"A", {1, 2}, 1}}, "A <= "), device()));
  auto u = space_for(ctx_with({{"A", {1, 2}, 1}}, "A <= WHAT"), device());
  ASSERT_FALSE(u);
  EXPECT_NE(u.error().find("WHAT"), std::string::npos);
  std::vector<TuningParam> many;
  for (int p = 0; p < 11; ++p) many.push_back({"P" + std::to_string(p), {1, 2, 3, 4}, 1});
  auto huge = space_for(ctx_with(many), device());
  ASSERT_FALSE(huge);
  EXPECT_NE(huge.error().find("narrow the value sets"), std::string::npos);
}

}  // namespace
}  // namespace peak
