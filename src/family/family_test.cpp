#include "family/family.h"

#include <cstring>
#include <tuple>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace peak {
namespace {

// A matmul context as kernel.toml declares one, with the given dtypes of A and C.
KernelContext matmul_ctx(std::string_view a = "f32", std::string_view c = "f32") {
  std::string t =
      "name = \"mm\"\nbackend = \"cuda\"\nfamily = \"matmul\"\nsource = \"k.cu\"\n"
      "flops = \"2 * M * N * K\"\n";
  for (auto [name, dtype, size, out] :
       {std::tuple{"A", a, "M * K", false}, std::tuple{"B", a, "K * N", false},
        std::tuple{"C", c, "M * N", true}})
    t += fmt::format("[[arrays]]\nname = \"{}\"\ndtype = \"{}\"\nsize = \"{}\"\n{}", name, dtype,
                     size, out ? "output = true\n" : "");
  t += "[[scalars]]\nname = \"M\"\n[[scalars]]\nname = \"N\"\n[[scalars]]\nname = \"K\"\n";
  auto r = parse_context(t, "kernel.toml");
  EXPECT_TRUE(r.is_ok()) << (r ? "" : r.error());
  return r ? *r : KernelContext{};
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

Shape mnk(int64_t m, int64_t n, int64_t k) { return Shape{{{"M", m}, {"N", n}, {"K", k}}}; }

TEST(Family, RegistryFindsMatmulAndFallsBackToGeneric) {
  EXPECT_EQ(find_family("matmul").name(), "matmul");
  EXPECT_TRUE(find_family("matmul").has_cpu_reference());
  for (const char* other : {"", "conv2d", "Matmul"}) {
    const Family& f = find_family(other);
    EXPECT_EQ(f.name(), "") << other;
    EXPECT_FALSE(f.has_cpu_reference()) << other;
    EXPECT_EQ(f.baseline_name("cuda"), "") << other;
  }
  KernelContext ctx = matmul_ctx();
  EXPECT_EQ(&family_of(ctx), &find_family("matmul"));
  EXPECT_EQ(ctx.reference, ReferenceKind::cpu);  // parsing asked the family
  ctx.family = "conv2d";
  EXPECT_EQ(family_of(ctx).name(), "");
  EXPECT_NE(check_cpu_reference(ctx).message().find("family 'conv2d' has no CPU reference"),
            std::string::npos);
}

// C = A * B for A = [1 -2; 3 4], B = [5 6; 7 8]: C = [-9 -10; 43 50], and the magnitudes
// sum_k |a_ik b_kj| = [19 22; 43 50].
TEST(Family, MatmulReferenceOfATinyProduct) {
  KernelContext ctx = matmul_ctx();
  ReferenceInputs in{{"A", f32_bytes({1, -2, 3, 4})}, {"B", f32_bytes({5, 6, 7, 8})}};
  auto r = family_of(ctx).cpu_reference(ctx, mnk(2, 2, 2), in, {{"C", {0, 1, 2, 3}}});
  ASSERT_TRUE(r.is_ok()) << r.error();
  EXPECT_EQ(r->at("C").value, (std::vector<double>{-9, -10, 43, 50}));
  EXPECT_EQ(r->at("C").abs, (std::vector<double>{19, 22, 43, 50}));
  EXPECT_EQ(family_of(ctx).output_dims(ctx, mnk(2, 3, 4)), (std::vector<int64_t>{2, 3}));
}

// The default class rules of matmul, as the suite has always had them; none for other families.
TEST(Family, MatmulClassRules) {
  KernelContext ctx = matmul_ctx();
  std::vector<ClassRule> want = {{SuiteClass::large_k, "K >= 8 * M && K >= 8 * N"},
                                 {SuiteClass::small_m, "M <= 32"},
                                 {SuiteClass::small_k, "K <= 64"},
                                 {SuiteClass::wide, "N >= 2 * M && N >= 2 * K"},
                                 {SuiteClass::square, "M == N && N == K"},
                                 {SuiteClass::irregular, ""}};
  EXPECT_EQ(class_rules(ctx), want);
  auto cls = classify_shape(ctx, mnk(16, 4096, 4096));
  ASSERT_TRUE(cls.is_ok()) << cls.error();
  EXPECT_EQ(*cls, SuiteClass::small_m);
  KernelContext no_k = ctx;
  no_k.scalars.pop_back();
  EXPECT_TRUE(class_rules(no_k).empty());
  KernelContext generic = ctx;
  generic.family = "";
  EXPECT_TRUE(class_rules(generic).empty());
  generic.classes = {{SuiteClass::square, ""}};  // a context's own rules come first
  EXPECT_EQ(class_rules(generic), generic.classes);
}

TEST(Family, BaselineHeadlineAndTileWork) {
  const KernelContext f32 = matmul_ctx(), f16 = matmul_ctx("f16"), i32 = matmul_ctx("f32", "i32");
  const Family& mm = family_of(f32);
  EXPECT_EQ(mm.baseline(f32, "cuda"), "cublas");
  EXPECT_EQ(mm.baseline(f16, "hip"), "cublas");
  EXPECT_EQ(mm.baseline(f32, "hlsl"), "");
  EXPECT_EQ(mm.baseline(i32, "cuda"), "");
  EXPECT_EQ(mm.headline(f32), Headline::flops);
  auto w = mm.tile_work(f16, mnk(64, 32, 128));
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->m, 64);
  EXPECT_EQ(w->n, 32);
  EXPECT_EQ(w->k, 128);
  EXPECT_EQ(w->element_bytes, 2);

  KernelContext generic = f32;
  generic.family = "";
  EXPECT_EQ(family_of(generic).baseline(generic, "cuda"), "");
  EXPECT_FALSE(family_of(generic).tile_work(generic, mnk(64, 32, 128)).has_value());
  EXPECT_EQ(family_of(generic).headline(generic), Headline::flops);
  generic.flops = "";
  EXPECT_EQ(family_of(generic).headline(generic), Headline::bytes);
}

// The tolerance without rtol: the dtype rule, scaled by the reduction at the shape.
TEST(Family, DefaultToleranceScalesWithTheReduction) {
  KernelContext ctx = matmul_ctx();
  const ArraySpec& c = ctx.arrays[2];
  const Family& f = family_of(ctx);
  EXPECT_EQ(f.default_tolerance(ctx, mnk(8, 8, 4096), c),
            default_tolerance(DType::f32, c.dtype, 1));
  ctx.reduction = "K";
  EXPECT_EQ(reduction_length(ctx, mnk(8, 8, 4096)), 4096);
  EXPECT_EQ(f.default_tolerance(ctx, mnk(8, 8, 4096), c),
            default_tolerance(DType::f32, c.dtype, 4096));
}

}  // namespace
}  // namespace peak
