#include "family/rows/rows.h"

#include <gtest/gtest.h>

#include <tuple>

#include "context/bound.h"
#include "context/inputs.h"
#include "family/rows/testing.h"

namespace peak {
namespace {

using namespace rows::testing;  // row_context, rn, typed_bytes, ...

struct Member {
  const char* name;
  std::vector<std::string> columns;
};
const Member kMembers[] = {{"softmax", {}}, {"rmsnorm", {"W"}}, {"layernorm", {"W", "B"}}};

TEST(RowFamilies, DeclareBytesCudnnAndAMatrixOutput) {
  for (const auto& m : kMembers) {
    KernelContext ctx = row_context(m.name, m.columns);
    const Family& f = family_of(ctx);
    EXPECT_EQ(f.name(), m.name);
    EXPECT_EQ(f.headline(ctx), Headline::bytes) << m.name;
    EXPECT_EQ(f.baseline_name("cuda"), "cudnn");
    EXPECT_EQ(f.baseline_name("hip"), "");
    EXPECT_EQ(f.baseline_name("hlsl"), "");
    EXPECT_EQ(f.baseline(ctx, "cuda"), "cudnn") << m.name;
    EXPECT_EQ(f.baseline(ctx, "hlsl"), "");
    EXPECT_EQ(f.output_dims(ctx, rn(7, 33)), (std::vector<int64_t>{7, 33}));
    EXPECT_FALSE(f.tile_work(ctx, rn(7, 33)));
    // fp32: the reduction over N scales the tolerance (softmax adds 32 ulps for exp).
    const double exp_ulps = m.name == std::string("softmax") ? 32 * 1.2e-7 : 0;
    EXPECT_NEAR(f.default_tolerance(ctx, rn(2, 10000), ctx.arrays.back()), 1e-4 + 2.4e-7 + exp_ulps,
                1e-12)
        << m.name;
    // X and Y of different dtypes: not what cuDNN computes.
    ctx.arrays.back().dtype = DType::f16;
    EXPECT_EQ(f.baseline(ctx, "cuda"), "") << m.name;
  }
  KernelContext mixed = row_context("layernorm", {"W", "B"}, "f16", "bf16");
  EXPECT_EQ(family_of(mixed).baseline(mixed, "cuda"), "");
}

// The default classes split the paths a row kernel dispatches between (rows.cpp); the first
// rule that holds decides, so decode wins over a long row.
TEST(RowFamilies, DefaultClassRules) {
  KernelContext ctx = row_context("softmax", {});
  auto cls = [&](int64_t r, int64_t n) {
    auto c = classify_shape(ctx, rn(r, n));
    EXPECT_TRUE(c) << c.error();
    return c && *c ? std::string(to_string(**c)) : std::string("none");
  };
  EXPECT_EQ(cls(1, 128256), "decode");
  EXPECT_EQ(cls(16, 32000), "decode");
  EXPECT_EQ(cls(17, 1024), "short-rows");
  EXPECT_EQ(cls(32768, 1024), "short-rows");
  EXPECT_EQ(cls(2048, 50257), "long-rows");
  EXPECT_EQ(cls(4096, 32000), "long-rows");
  EXPECT_EQ(cls(4096, 4096), "regular");
  EXPECT_EQ(cls(8192, 8192), "regular");
  EXPECT_EQ(cls(4096, 31999), "regular");
  KernelContext other = ctx;
  other.scalars[0].name = "M";
  EXPECT_TRUE(class_rules(other).empty());
}

// A request large enough to be spread over threads gives what the rows one by one give.
TEST(RowFamilies, ThreadsGiveTheSameValues) {
  KernelContext ctx = row_context("softmax", {});
  const int64_t R = 512, N = 9001;
  ReferenceInputs in{{"X", typed_bytes(DType::f32, some_values(R * N, -8, 8))}};
  std::vector<int64_t> idx;
  for (int64_t r = 0; r < R; ++r) idx.push_back(r * N + (r * 37) % N);
  auto many = family_of(ctx).cpu_reference(ctx, rn(R, N), in, {{"Y", idx}});
  ASSERT_TRUE(many) << many.error();
  for (size_t k : {size_t{0}, size_t{255}, size_t{511}}) {
    auto one = family_of(ctx).cpu_reference(ctx, rn(R, N), in, {{"Y", {idx[k]}}});
    ASSERT_TRUE(one) << one.error();
    EXPECT_EQ(one->at("Y").value[0], many->at("Y").value[k]);
  }
}

// The timed checks generate only the rows of X that hold the elements checked (reference_reads,
// then generate_elements): the reference there is that of the whole inputs, for each family.
TEST(RowFamilies, TheRowsTheyReadGiveTheValuesOfTheWholeInputs) {
  const int64_t R = 37, N = 1029;
  const Shape s = rn(R, N);
  ReferenceIndices asked = {{"Y", {0, R * N - 1, N - 1, (R - 1) * N, 17 * N + 500, 17 * N + 3}}};
  for (auto [family, columns, dtype] :
       {std::tuple{"softmax", std::vector<std::string>{}, "f32"},
        std::tuple{"rmsnorm", std::vector<std::string>{"W"}, "bf16"},
        std::tuple{"layernorm", std::vector<std::string>{"W", "B"}, "f32"}}) {
    SCOPED_TRACE(family);
    KernelContext ctx = row_context(family, columns, dtype);
    auto bound = bind_shape(ctx, s);
    ASSERT_TRUE(bound) << bound.error();
    const uint64_t seed = 0x5e1;
    auto whole = generate_inputs(ctx, *bound, seed, 0);
    auto reads = family_of(ctx).reference_reads(ctx, s, asked);
    ASSERT_TRUE(reads.has_value());
    EXPECT_EQ(reads->size(), 1u);              // X alone: W and B are read whole
    EXPECT_EQ(reads->at("X").size(), 3u * N);  // rows 0, 17 and R - 1
    ReferenceInputs part;
    for (const auto& a : ctx.arrays) {
      if (a.output) continue;
      auto it = reads->find(a.name);
      if (it == reads->end()) {
        part[a.name] = whole.at(a.name);
        continue;
      }
      auto p =
          generate_elements(a, bound->elements(a.name), array_seed(seed, a.name), 0, it->second);
      ASSERT_TRUE(p.has_value()) << a.name;
      EXPECT_NE(*p, whole.at(a.name));  // the rows alone, not the whole array
      part[a.name] = std::move(*p);
    }
    auto want = cpu_reference_values(ctx, s, whole, asked);
    auto got = cpu_reference_values(ctx, s, part, asked);
    ASSERT_TRUE(want && got);
    EXPECT_EQ(got->at("Y").value, want->at("Y").value);
    EXPECT_EQ(got->at("Y").abs, want->at("Y").abs);
  }
  // No N, or no Y asked: every input whole.
  KernelContext ctx = row_context("softmax", {});
  EXPECT_FALSE(family_of(ctx).reference_reads(ctx, Shape{{{"R", 2}}}, asked).has_value());
  EXPECT_FALSE(family_of(ctx).reference_reads(ctx, s, {}).has_value());
}

}  // namespace
}  // namespace peak
