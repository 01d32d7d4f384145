#include "validate/path_shapes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "context/testing.h"

namespace peak {
namespace {

KernelContext matmul_context() {
  auto ctx = parse_context(R"(name = "mm"
backend = "hlsl"
family = "matmul"
source = "k.hlsl"
valid = "M > 0 && N > 0 && K > 0"
)" + testing::matmul_arrays_toml() +
                               R"([[scalars]]
name = "M"
range = [1, 4096, 1]
[[scalars]]
name = "N"
range = [1, 4096, 1]
[[scalars]]
name = "K"
range = [1, 4096, 1]
[shapes]
bench = [{ M = 1024, N = 1024, K = 1024 }]
validation = [{ M = 256, N = 256, K = 256 }, { M = 4, N = 64, K = 64 }]
)",
                           "kernel.toml");
  EXPECT_TRUE(ctx) << ctx.error();
  return ctx ? *ctx : KernelContext{};
}

SourceRegions two_paths() {
  SourceRegions s;
  s.host =
      "launch tiled\n  grid = (ceil_div(N, 16), ceil_div(M, 16))\n  when = M > ROWS\n"
      "launch rows\n  grid = (M)\n  when = M <= ROWS\n";
  return s;
}

PlanDialect hlsl() {
  PlanDialect d;
  d.backend = "hlsl";
  d.block = false;
  d.args = false;
  d.shared = false;
  return d;
}

TEST(HiddenValidationShapes, EachWhenPathGetsShapesWithTailsInEveryDimension) {
  const KernelContext ctx = matmul_context();
  const Config config{{"ROWS", 8}};
  auto shapes = hidden_validation_shapes(ctx, two_paths(), config, hlsl(), {}, 2, 1234);
  ASSERT_EQ(shapes.size(), 2u);
  int rows = 0, tiled = 0;
  for (const Shape& s : shapes) {
    (s.values.at("M") <= 8 ? rows : tiled)++;
    for (const auto& [k, v] : s.values) {
      EXPECT_NE(v % 2, 0) << s.text();  // a tail for every even tile size
      EXPECT_LE(tile_multiples(v), 1) << s.text();
    }
    EXPECT_EQ(std::find(ctx.validation_shapes.begin(), ctx.validation_shapes.end(), s),
              ctx.validation_shapes.end())
        << s.text();
  }
  EXPECT_EQ(rows, 1);
  EXPECT_EQ(tiled, 1);
  // The path follows the configuration: with ROWS = 0 every shape takes the tiled path.
  auto one = hidden_validation_shapes(ctx, two_paths(), {{"ROWS", 0}}, hlsl(), {}, 2, 1234);
  ASSERT_EQ(one.size(), 2u);
  // The seed decides: the same seed draws the same shapes, another seed others.
  EXPECT_EQ(hidden_validation_shapes(ctx, two_paths(), config, hlsl(), {}, 2, 1234), shapes);
  EXPECT_NE(hidden_validation_shapes(ctx, two_paths(), config, hlsl(), {}, 2, 99), shapes);
  // No sampled shapes asked: none.
  EXPECT_TRUE(hidden_validation_shapes(ctx, two_paths(), config, hlsl(), {}, 0, 1234).empty());
}

TEST(HiddenValidationShapes, DrawsCostNoMoreThanTheContextsOwnValidationShapes) {
  // The ranges reach 4096 and the bench shape is 1024^3; the costliest validation shape is 256^3.
  // A path starts from its cheapest listed shape (4 x 64 x 64, tails move a value by at most
  // half), and a draw costs at most 256^3: a bench-sized or range-sized shape never appears.
  const KernelContext ctx = matmul_context();
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    auto shapes = hidden_validation_shapes(ctx, two_paths(), {{"ROWS", 0}}, hlsl(), {}, 2, seed);
    ASSERT_EQ(shapes.size(), 2u) << seed;
    const auto work = [](const Shape& s) {
      return s.values.at("M") * s.values.at("N") * s.values.at("K");
    };
    const Shape& path = shapes[0];
    EXPECT_LE(path.values.at("M"), 7) << path.text();
    EXPECT_LE(path.values.at("N"), 97) << path.text();
    EXPECT_LE(path.values.at("K"), 97) << path.text();
    EXPECT_LE(work(shapes[1]), int64_t{256} * 256 * 256) << shapes[1].text();
  }
}

TEST(HiddenValidationShapes, FreshSeedsDiffer) {
  EXPECT_NE(random_validation_seed(), random_validation_seed());
  EXPECT_LT(random_validation_seed(), uint64_t{1} << 53);
  EXPECT_EQ(tile_multiples(67), 0);
  EXPECT_EQ(tile_multiples(64), 6);  // 2, 4, 8, 16, 32, 64
}

}  // namespace
}  // namespace peak
