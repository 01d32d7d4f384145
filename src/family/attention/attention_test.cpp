#include "family/attention/attention.h"

#include <cmath>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "context/inputs.h"

namespace peak::attention {
namespace {

// A context of the convention, every array of `dtype`.
KernelContext context(std::string_view dtype = "f32") {
  std::string t =
      "name = \"attn\"\nbackend = \"cuda\"\nfamily = \"attention\"\nsource = \"k.cu\"\n";
  for (const auto& [name, size] : std::vector<std::pair<std::string, std::string>>{
           {"Q", "B * H * SQ * D"}, {"K", "B * H * SKV * D"}, {"V", "B * H * SKV * D"}})
    t += fmt::format("[[arrays]]\nname = \"{}\"\ndtype = \"{}\"\nsize = \"{}\"\n", name, dtype,
                     size);
  t += fmt::format("[[arrays]]\nname = \"O\"\ndtype = \"{}\"\nsize = \"{}\"\noutput = true\n",
                   dtype, "B * H * SQ * D");
  for (const char* s : {"B", "H", "SQ", "SKV", "D", "CAUSAL"})
    t += fmt::format("[[scalars]]\nname = \"{}\"\n", s);
  auto r = parse_context(t, "kernel.toml");
  EXPECT_TRUE(r.is_ok()) << (r ? "" : r.error());
  return r ? *r : KernelContext{};
}

Shape shape(int64_t b, int64_t h, int64_t sq, int64_t skv, int64_t d, int64_t causal) {
  return Shape{{{"B", b}, {"H", h}, {"SQ", sq}, {"SKV", skv}, {"D", d}, {"CAUSAL", causal}}};
}

std::vector<double> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(n);
  for (double& x : v) x = static_cast<float>(u(rng));  // exact in f32
  return v;
}

std::vector<uint8_t> f32_bytes(const std::vector<double>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  for (size_t i = 0; i < v.size(); ++i) {
    const float f = static_cast<float>(v[i]);
    std::memcpy(b.data() + 4 * i, &f, 4);
  }
  return b;
}

// The definition, written out: every score, the masked ones left out.
double direct(const std::vector<double>& q, const std::vector<double>& k,
              const std::vector<double>& v, int64_t H, int64_t SQ, int64_t SKV, int64_t D,
              bool causal, int64_t b, int64_t h, int64_t i, int64_t c) {
  std::vector<double> s;
  for (int64_t j = 0; j < SKV; ++j) {
    if (causal && j > i + SKV - SQ) continue;
    double dot = 0;
    for (int64_t e = 0; e < D; ++e)
      dot += q[(((b * H + h) * SQ) + i) * D + e] * k[(((b * H + h) * SKV) + j) * D + e];
    s.push_back(dot / std::sqrt(static_cast<double>(D)));
  }
  if (s.empty()) return 0;
  double m = -INFINITY, sum = 0, acc = 0;
  for (double x : s) m = std::max(m, x);
  int64_t n = 0;
  for (int64_t j = 0; j < SKV; ++j) {
    if (causal && j > i + SKV - SQ) continue;
    const double p = std::exp(s[n++] - m);
    sum += p;
    acc += p * v[(((b * H + h) * SKV) + j) * D + c];
  }
  return acc / sum;
}

TEST(Attention, TheConventionIsCheckedWithWhatDiffers) {
  const auto& f = family();
  EXPECT_EQ(f.name(), "attention");
  EXPECT_EQ(&find_family("attention"), &f);
  EXPECT_TRUE(f.check_cpu_reference(context()));
  // Parsing checks the convention (reference = "cpu" is the default), so break it afterwards.
  KernelContext odd = context();
  odd.arrays.back().size = "B * H * SKV * D";
  Status wrong = f.check_cpu_reference(odd);
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.message().find("array O has size"), std::string::npos) << wrong.message();
  EXPECT_NE(wrong.message().find("[batch, heads, sequence, head_dim]"), std::string::npos);
  KernelContext no_causal = context();
  no_causal.scalars.pop_back();
  Status s = f.check_cpu_reference(no_causal);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("no scalar CAUSAL"), std::string::npos) << s.message();
}

// Every element against the definition, causal and not, with more queries than keys (rows with
// every key masked are 0) and fewer (a KV cache longer than the queries).
TEST(Attention, TheReferenceIsTheDefinition) {
  const KernelContext ctx = context();
  for (auto [sq, skv] : {std::pair<int64_t, int64_t>{3, 5}, {5, 3}, {1, 7}, {4, 4}})
    for (int64_t causal : {0, 1}) {
      SCOPED_TRACE(fmt::format("SQ={} SKV={} CAUSAL={}", sq, skv, causal));
      const int64_t B = 2, H = 3, D = 4;
      const auto q = random_values(static_cast<size_t>(B * H * sq * D), 1);
      const auto k = random_values(static_cast<size_t>(B * H * skv * D), 2);
      const auto v = random_values(static_cast<size_t>(B * H * skv * D), 3);
      ReferenceIndices idx;
      for (int64_t e = 0; e < B * H * sq * D; ++e) idx["O"].push_back(e);
      auto r = family().cpu_reference(
          ctx, shape(B, H, sq, skv, D, causal),
          {{"Q", f32_bytes(q)}, {"K", f32_bytes(k)}, {"V", f32_bytes(v)}}, idx);
      ASSERT_TRUE(r) << r.error();
      const ReferenceValues& o = r->at("O");
      for (int64_t e = 0; e < B * H * sq * D; ++e) {
        const int64_t c = e % D, i = (e / D) % sq, h = (e / D / sq) % H, b = e / D / sq / H;
        EXPECT_NEAR(o.value[e], direct(q, k, v, H, sq, skv, D, causal != 0, b, h, i, c), 1e-12)
            << e;
        EXPECT_GE(o.abs[e], std::abs(o.value[e]) - 1e-12) << e;
      }
      if (causal && sq > skv) {
        EXPECT_EQ(o.value[0], 0.0);  // query 0 attends no key
      }
    }
}

TEST(Attention, BadIndicesAndInputsAreErrors) {
  const KernelContext ctx = context();
  const Shape s = shape(1, 1, 2, 2, 2, 0);
  ReferenceInputs in{{"Q", f32_bytes(random_values(4, 1))},
                     {"K", f32_bytes(random_values(4, 2))},
                     {"V", f32_bytes(random_values(4, 3))}};
  auto outside = family().cpu_reference(ctx, s, in, {{"O", {4}}});
  ASSERT_FALSE(outside);
  EXPECT_NE(outside.error().find("index 4 is outside output O"), std::string::npos);
  in["K"].pop_back();
  auto shortk = family().cpu_reference(ctx, s, in, {{"O", {0}}});
  ASSERT_FALSE(shortk);
  EXPECT_NE(shortk.error().find("input K has 15 bytes"), std::string::npos) << shortk.error();
}

// The timed checks generate the query rows asked for and K, V of their (batch, head) pairs; when
// those are half of the pairs or more, K and V whole.
TEST(Attention, ReferenceReadsAreTheRowsAndPairsAsked) {
  const KernelContext ctx = context();
  const Shape s = shape(2, 2, 3, 5, 4, 1);  // 4 pairs of 3 queries, D = 4
  // O[b=1, h=0, i=2, c=3]: query row (1 * 2 + 0) * 3 + 2 = 8.
  auto one = family().reference_reads(ctx, s, {{"O", {8 * 4 + 3}}});
  ASSERT_TRUE(one);
  EXPECT_EQ(one->at("Q"), (std::vector<int64_t>{32, 33, 34, 35}));
  ASSERT_EQ(one->at("K").size(), 5u * 4u);
  EXPECT_EQ(one->at("K").front(), 2 * 5 * 4);  // pair 2's keys
  EXPECT_EQ(one->at("V"), one->at("K"));
  auto many = family().reference_reads(ctx, s, {{"O", {0, 12, 24, 36}}});
  ASSERT_TRUE(many);
  EXPECT_EQ(many->count("K"), 0u);  // all four pairs: read whole
  EXPECT_EQ(many->at("Q").size(), 16u);
  EXPECT_FALSE(family().reference_reads(ctx, s, {{"O", {48}}}));  // outside: all whole
}

TEST(Attention, ShapeOfTheOutputToleranceClassesAndHeadline) {
  const auto& f = family();
  const KernelContext ctx = context();
  EXPECT_EQ(f.output_dims(ctx, shape(2, 4, 8, 16, 64, 0)), (std::vector<int64_t>{64, 64}));
  const KernelContext half = context("f16");
  const ArraySpec& o32 = ctx.arrays.back();
  const ArraySpec& o16 = half.arrays.back();
  const Shape s = shape(1, 1, 128, 8192, 128, 0);
  EXPECT_GT(f.default_tolerance(half, s, o16), 9.7e-4);  // at least one fp16 ulp
  EXPECT_LT(f.default_tolerance(ctx, s, o32), 1e-4);
  EXPECT_EQ(f.headline(ctx), Headline::flops);
  EXPECT_EQ(f.baseline(ctx, "cuda"), "");  // f32: cuDNN's fused attention takes fp16 and bf16
  EXPECT_EQ(f.baseline(half, "cuda"), "cudnn");
  EXPECT_EQ(f.baseline(half, "hip"), "");
  EXPECT_EQ(f.baseline(half, "hlsl"), "");
  auto decode = classify_shape(ctx, shape(8, 32, 1, 16384, 128, 1));
  ASSERT_TRUE(decode && *decode);
  EXPECT_EQ(**decode, SuiteClass::decode);
  auto prefill = classify_shape(ctx, shape(2, 16, 4096, 4096, 128, 1));
  ASSERT_TRUE(prefill && *prefill);
  EXPECT_EQ(**prefill, SuiteClass::regular);
}

}  // namespace
}  // namespace peak::attention
