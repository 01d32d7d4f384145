#include "context/bound.h"

#include <gtest/gtest.h>

#include <string>

#include "context/inputs.h"
#include "context/testing.h"

namespace peak {
namespace {

KernelContext matmul(std::string_view extra) {
  auto ctx = parse_context(std::string(R"(format = 5
name = "mm"
backend = "hlsl"
family = "matmul"
source = "k.hlsl"
valid = "M > 0 && N > 0 && K > 0"
)") + std::string(extra) + "\n" +
                               testing::matmul_arrays_toml() +
                               std::string(testing::kMatmulScalarsToml),
                           "kernel.toml");
  EXPECT_TRUE(ctx) << ctx.error();
  return ctx ? *ctx : KernelContext{};
}

TEST(BoundShape, HoldsWhatTheShapeFunctionsComputeOnePerShape) {
  KernelContext ctx = matmul(R"toml(flops = "2 * M * N * K"
bytes = "4 * (M * K + K * N + M * N)"
reduction = "K"
supports = "K % 8 == 0")toml");
  Shape s{{{"M", 24}, {"N", 20}, {"K", 64}}};
  auto b = bind_shape(ctx, s);
  ASSERT_TRUE(b) << b.error();
  EXPECT_EQ(b->shape, s);
  EXPECT_EQ(b->sizes, *array_sizes(ctx, s));
  EXPECT_EQ(b->env, *shape_env(ctx, s));
  EXPECT_EQ(b->elements("C"), 24 * 20);
  EXPECT_EQ(b->bytes_of("A"), 4 * 24 * 64);
  EXPECT_EQ(b->reduction, 64);
  EXPECT_EQ(b->flops, *shape_flops(ctx, s));
  EXPECT_EQ(b->bytes, *shape_bytes(ctx, s));
  EXPECT_TRUE(b->runs);
  // Outside `supports`, and outside `valid`: the kernel runs neither.
  EXPECT_FALSE(bind_shape(ctx, Shape{{{"M", 24}, {"N", 20}, {"K", 63}}})->runs);
  EXPECT_FALSE(bind_shape(ctx, Shape{{{"M", 0}, {"N", 20}, {"K", 64}}})->runs);
}

TEST(BoundShape, FailsAsTheEnvironmentFailsAndDefaultsTheRest) {
  KernelContext ctx = matmul("");
  auto missing = bind_shape(ctx, Shape{{{"M", 4}, {"N", 4}}});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error(), shape_env(ctx, Shape{{{"M", 4}, {"N", 4}}}).error());
  auto b = bind_shape(ctx, Shape{{{"M", 4}, {"N", 4}, {"K", 4}}});
  ASSERT_TRUE(b) << b.error();
  EXPECT_EQ(b->reduction, 1);
  EXPECT_EQ(b->flops, 0.0);
  EXPECT_EQ(b->bytes, 0.0);
}

TEST(BoundShape, InputsAreTheArraysDrawnAtItsSizes) {
  KernelContext ctx = matmul("");
  auto b = bind_shape(ctx, Shape{{{"M", 3}, {"N", 5}, {"K", 7}}});
  ASSERT_TRUE(b) << b.error();
  auto inputs = generate_inputs(ctx, *b, 42, 1);
  ASSERT_EQ(inputs.size(), 2u);  // not the output
  EXPECT_EQ(inputs.at("A"), generate_array(ctx.arrays[0], 21, array_seed(42, "A"), 1));
  EXPECT_EQ(inputs.at("B"), generate_array(ctx.arrays[1], 35, array_seed(42, "B"), 1));
}

}  // namespace
}  // namespace peak
