#include "family/matmul/reference.h"

#include <cmath>
#include <cstring>
#include <tuple>

#include <gtest/gtest.h>

#include "context/inputs.h"
#include "context/testing.h"
#include "family/family.h"

namespace peak {
namespace {

std::string matmul_toml(std::string_view a_type, std::string_view b_type,
                        std::string_view extra_arrays = "") {
  return R"(name = "mm"
backend = "cuda"
family = "matmul"
source = "k.cu"
)" + testing::matmul_arrays_toml(a_type, b_type) +
         std::string(extra_arrays) + "\n" + std::string(testing::kMatmulScalarsToml);
}

KernelContext matmul_context(std::string_view a_type = "f32", std::string_view b_type = "f32") {
  auto r = parse_context(matmul_toml(a_type, b_type), "kernel.toml");
  EXPECT_TRUE(r.is_ok()) << (r.is_ok() ? "" : r.error());
  return r.is_ok() ? *r : KernelContext{};
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<uint8_t> f16_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t h = float_to_half(v[i]);
    std::memcpy(&b[i * 2], &h, 2);
  }
  return b;
}

Shape shape(int64_t m, int64_t n, int64_t k) { return Shape{{{"M", m}, {"N", n}, {"K", k}}}; }

TEST(Reference, KnowsMatmulOnly) {
  EXPECT_TRUE(has_cpu_reference("matmul"));
  EXPECT_FALSE(has_cpu_reference(""));
  EXPECT_FALSE(has_cpu_reference("conv2d"));
}

TEST(Reference, HandCheckedF32) {
  KernelContext ctx = matmul_context();
  EXPECT_EQ(ctx.reference, ReferenceKind::cpu);
  // A = [[1, -2, 3], [4, 5, -6]] (2x3), B = [[7, 8], [9, -10], [11, 12]] (3x2)
  // C = [[7 - 18 + 33, 8 + 20 + 36], [28 + 45 - 66, 32 - 50 - 72]] = [[22, 64], [7, -90]]
  // |.| sums: [[7 + 18 + 33, 8 + 20 + 36], [28 + 45 + 66, 32 + 50 + 72]] = [[58, 64], [139, 154]]
  std::map<std::string, std::vector<uint8_t>> in{{"A", f32_bytes({1, -2, 3, 4, 5, -6})},
                                                 {"B", f32_bytes({7, 8, 9, -10, 11, 12})}};
  std::map<std::string, std::vector<int64_t>> idx{{"C", {0, 1, 2, 3}}};
  auto c = cpu_reference(ctx, shape(2, 2, 3), in, idx);
  ASSERT_TRUE(c.is_ok()) << c.error();
  EXPECT_EQ(c->at("C"), (std::vector<double>{22, 64, 7, -90}));
  auto a = cpu_reference_abs(ctx, shape(2, 2, 3), in, idx);
  ASSERT_TRUE(a.is_ok()) << a.error();
  EXPECT_EQ(a->at("C"), (std::vector<double>{58, 64, 139, 154}));
  auto both = cpu_reference_values(ctx, shape(2, 2, 3), in, idx);
  ASSERT_TRUE(both.is_ok());
  EXPECT_EQ(both->at("C").value, c->at("C"));
  EXPECT_EQ(both->at("C").abs, a->at("C"));
}

TEST(Reference, OnlyRequestedIndicesInRequestedOrder) {
  KernelContext ctx = matmul_context();
  std::map<std::string, std::vector<uint8_t>> in{{"A", f32_bytes({1, -2, 3, 4, 5, -6})},
                                                 {"B", f32_bytes({7, 8, 9, -10, 11, 12})}};
  auto c = cpu_reference(ctx, shape(2, 2, 3), in, {{"C", {3, 0, 3}}});
  ASSERT_TRUE(c.is_ok()) << c.error();
  EXPECT_EQ(c->at("C"), (std::vector<double>{-90, 22, -90}));
  auto none = cpu_reference(ctx, shape(2, 2, 3), in, {{"C", {}}});
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->at("C").empty());
}

TEST(Reference, HandCheckedF16InputsAndNonSquare) {
  KernelContext ctx = matmul_context("f16", "f16");
  // A (1x4) = [0.5, 1.5, -2, 0.25], B (4x3) rows [1,2,3], [4,5,6], [-1,0,1], [8,-8,0.5]
  // C = [0.5 + 6 + 2 + 2, 1 + 7.5 + 0 - 2, 1.5 + 9 - 2 + 0.125] = [10.5, 6.5, 8.625]
  std::map<std::string, std::vector<uint8_t>> in{
      {"A", f16_bytes({0.5f, 1.5f, -2.0f, 0.25f})},
      {"B", f16_bytes({1, 2, 3, 4, 5, 6, -1, 0, 1, 8, -8, 0.5f})}};
  auto c = cpu_reference_values(ctx, shape(1, 3, 4), in, {{"C", {0, 1, 2}}});
  ASSERT_TRUE(c.is_ok()) << c.error();
  EXPECT_EQ(c->at("C").value, (std::vector<double>{10.5, 6.5, 8.625}));
  EXPECT_EQ(c->at("C").abs, (std::vector<double>{10.5, 10.5, 12.625}));
  // fp16 values are used as stored: 0.1 is 0x2E66 = 0.0999755859375.
  std::map<std::string, std::vector<uint8_t>> in2{{"A", f16_bytes({0.1f})}, {"B", f16_bytes({1})}};
  auto d = cpu_reference(ctx, shape(1, 1, 1), in2, {{"C", {0}}});
  ASSERT_TRUE(d.is_ok());
  EXPECT_EQ(d->at("C")[0], 0.0999755859375);
}

TEST(Reference, MixedInputTypes) {
  KernelContext ctx = matmul_context("f16", "f32");
  std::map<std::string, std::vector<uint8_t>> in{{"A", f16_bytes({2, 3})},
                                                 {"B", f32_bytes({0.1f, 1})}};
  auto c = cpu_reference(ctx, shape(1, 1, 2), in, {{"C", {0}}});
  ASSERT_TRUE(c.is_ok()) << c.error();
  EXPECT_EQ(c->at("C")[0], 2.0 * static_cast<double>(0.1f) + 3.0);
}

// Dense rows, sparse rows and threads all sum in the same order: identical results, and equal to
// a naive triple loop in double.
TEST(Reference, AllPathsAgreeWithNaiveLoop) {
  KernelContext ctx = matmul_context("f32", "f16");
  const int64_t M = 170, N = 150, K = 160;
  ArraySpec a_spec = ctx.arrays[0], b_spec = ctx.arrays[1];
  std::map<std::string, std::vector<uint8_t>> in{{"A", generate_array(a_spec, M * K, 11, 0)},
                                                 {"B", generate_array(b_spec, K * N, 11, 0)}};
  std::vector<int64_t> all(M * N);
  for (int64_t i = 0; i < M * N; ++i) all[i] = i;
  auto full = cpu_reference_values(ctx, shape(M, N, K), in, {{"C", all}});
  ASSERT_TRUE(full.is_ok()) << full.error();
  std::vector<int64_t> few = {0, M * N - 1, 5 * N + 7, 77 * N + 149, 123};
  auto sparse = cpu_reference_values(ctx, shape(M, N, K), in, {{"C", few}});
  ASSERT_TRUE(sparse.is_ok());
  for (size_t p = 0; p < few.size(); ++p) {
    int64_t idx = few[p], i = idx / N, j = idx % N;
    double s = 0, s_abs = 0;
    for (int64_t k = 0; k < K; ++k) {
      double prod = element_as_double(DType::f32, in["A"].data(), i * K + k) *
                    element_as_double(DType::f16, in["B"].data(), k * N + j);
      s += prod;
      s_abs += std::fabs(prod);
    }
    EXPECT_EQ(sparse->at("C").value[p], s) << idx;
    EXPECT_EQ(sparse->at("C").abs[p], s_abs) << idx;
    EXPECT_EQ(full->at("C").value[idx], s) << idx;
    EXPECT_EQ(full->at("C").abs[idx], s_abs) << idx;
  }
}

// The timed checks generate only the elements the reference reads (reference_reads, then
// generate_elements): the values at the asked elements are those of the whole inputs.
TEST(Reference, TheElementsItReadsGiveTheValuesOfTheWholeInputs) {
  int partial = 0;
  for (auto [ta, tb] :
       {std::pair{"f32", "f32"}, std::pair{"f16", "f16"}, std::pair{"bf16", "f32"}}) {
    KernelContext ctx = matmul_context(ta, tb);
    for (auto [m, n, k] : {std::tuple{37, 41, 19}, std::tuple{1, 300, 64}, std::tuple{128, 1, 7}}) {
      const Shape s = shape(m, n, k);
      auto bound = bind_shape(ctx, s);
      ASSERT_TRUE(bound) << bound.error();
      ReferenceIndices asked = {{"C", {0, m * n - 1, n - 1, (m - 1) * n, (m / 2) * n + n / 2}}};
      const uint64_t seed = 0x5e1 + m;
      auto whole = generate_inputs(ctx, *bound, seed, 0);
      auto reads = family_of(ctx).reference_reads(ctx, s, asked);
      ASSERT_TRUE(reads.has_value());
      ReferenceInputs part;
      for (const auto& a : ctx.arrays) {
        if (a.output) continue;
        auto p = generate_elements(a, bound->elements(a.name), array_seed(seed, a.name), 0,
                                   reads->at(a.name));
        ASSERT_TRUE(p.has_value()) << a.name;
        partial += *p != whole.at(a.name);  // the elements alone, not the whole array
        part[a.name] = std::move(*p);
      }
      auto want = cpu_reference_values(ctx, s, whole, asked);
      auto got = cpu_reference_values(ctx, s, part, asked);
      ASSERT_TRUE(want && got);
      EXPECT_EQ(got->at("C").value, want->at("C").value) << ta << " " << m << "x" << n << "x" << k;
      EXPECT_EQ(got->at("C").abs, want->at("C").abs);
    }
  }
  EXPECT_EQ(partial, 3 * 4);  // A and B of the first shape, B of the second, A of the third
}

TEST(Reference, Errors) {
  KernelContext ctx = matmul_context();
  std::map<std::string, std::vector<uint8_t>> in{{"A", f32_bytes({1, 2, 3, 4})},
                                                 {"B", f32_bytes({1, 2, 3, 4})}};
  auto err = [&](const KernelContext& c, const Shape& s,
                 const std::map<std::string, std::vector<uint8_t>>& inputs,
                 const std::map<std::string, std::vector<int64_t>>& idx) {
    auto r = cpu_reference(c, s, inputs, idx);
    EXPECT_FALSE(r.is_ok());
    return r.is_ok() ? std::string() : r.error();
  };
  EXPECT_NE(err(ctx, shape(2, 2, 2), in, {{"C", {4}}}).find("index 4 is outside output C"),
            std::string::npos);
  EXPECT_NE(err(ctx, shape(2, 2, 2), in, {{"C", {-1}}}).find("index -1"), std::string::npos);
  EXPECT_NE(err(ctx, shape(2, 2, 2), in, {{"D", {0}}}).find("'D' is not the output"),
            std::string::npos);
  EXPECT_NE(err(ctx, shape(2, 2, 3), in, {{"C", {0}}}).find("input A has 16 bytes; 6 elements"),
            std::string::npos);
  EXPECT_NE(err(ctx, shape(2, 2, 2), {{"A", in["A"]}}, {{"C", {0}}}).find("input B is missing"),
            std::string::npos);
  EXPECT_NE(err(ctx, Shape{{{"M", 2}, {"N", 2}}}, in, {{"C", {0}}}).find("no value"),
            std::string::npos);

  KernelContext generic = ctx;
  generic.family = "";
  EXPECT_NE(err(generic, shape(2, 2, 2), in, {{"C", {0}}}).find("has no CPU reference"),
            std::string::npos);
  KernelContext renamed = ctx;
  renamed.arrays[2].name = "Out";
  EXPECT_NE(err(renamed, shape(2, 2, 2), in, {{"C", {0}}}).find("no array C"), std::string::npos);
  KernelContext transposed = ctx;
  transposed.arrays[0].size = "M * K + M";
  std::string e = err(transposed, shape(2, 2, 2), in, {{"C", {0}}});
  EXPECT_NE(e.find("array A has size \"M * K + M\""), std::string::npos) << e;
  EXPECT_NE(e.find("family \"matmul\" needs arrays A (size M * K)"), std::string::npos) << e;
}

// fp8 (examples/matmul-cuda-fp8): e4m3 A and Bt (B stored K-major, N x K), per-tensor scales and
// a bf16 C. Each element is A_scale * B_scale * sum_k A[i][k] * Bt[j][k], summed in ascending k.
TEST(Reference, KMajorBAndPerTensorScales) {
  auto ctx = load_context(std::filesystem::path(PEAK_SOURCE_DIR) / "examples" / "matmul-cuda-fp8");
  ASSERT_TRUE(ctx.is_ok()) << ctx.error();
  ASSERT_TRUE(check_cpu_reference(*ctx).is_ok()) << check_cpu_reference(*ctx).message();
  const int64_t M = 37, N = 53, K = 48;
  std::map<std::string, std::vector<uint8_t>> in;
  for (const ArraySpec& a : ctx->arrays) {
    if (a.output) continue;
    const int64_t count = a.name == "A" ? M * K : a.name == "Bt" ? N * K : 1;
    in[a.name] = generate_array(a, count, 5, 0);
  }
  const double scale = element_as_double(DType::f32, in["A_scale"].data(), 0) *
                       element_as_double(DType::f32, in["B_scale"].data(), 0);
  EXPECT_NE(scale, 1.0);
  std::vector<int64_t> all(M * N);
  for (int64_t i = 0; i < M * N; ++i) all[i] = i;
  auto r = cpu_reference_values(*ctx, shape(M, N, K), in, {{"C", all}});
  ASSERT_TRUE(r.is_ok()) << r.error();
  for (int64_t idx : {int64_t{0}, 5 * N + 7, M * N - 1, 20 * N + 52}) {
    const int64_t i = idx / N, j = idx % N;
    double sum = 0, sum_abs = 0;
    for (int64_t k = 0; k < K; ++k) {
      const double p = element_as_double(DType::e4m3, in["A"].data(), i * K + k) *
                       element_as_double(DType::e4m3, in["Bt"].data(), j * K + k);
      sum += p;
      sum_abs += std::fabs(p);
    }
    EXPECT_EQ(r->at("C").value[idx], sum * scale) << idx;
    EXPECT_EQ(r->at("C").abs[idx], sum_abs * std::fabs(scale)) << idx;
  }
  // The timed checks generate what it reads: row i of A and row j of Bt, the scales whole.
  auto reads = family_of(*ctx).reference_reads(*ctx, shape(M, N, K), {{"C", {5 * N + 7}}});
  ASSERT_TRUE(reads.has_value());
  EXPECT_EQ(reads->at("Bt").front(), 7 * K);
  EXPECT_EQ(reads->at("Bt").size(), static_cast<size_t>(K));
  EXPECT_EQ(reads->count("A_scale"), 0u);
  // Its baseline is cublasLt's fp8 GEMM, on CUDA alone.
  EXPECT_EQ(family_of(*ctx).baseline(*ctx, "cuda"), "cublaslt");
  EXPECT_TRUE(family_of(*ctx).has_baseline("cublaslt", "cuda"));
  EXPECT_FALSE(family_of(*ctx).has_baseline("cublaslt", "hip"));
  EXPECT_EQ(
      family_of(matmul_context("bf16", "bf16")).baseline(matmul_context("bf16", "bf16"), "cuda"),
      "cublas");
}

TEST(Reference, ConventionCheckOfKMajorBAndScales) {
  auto base = load_context(std::filesystem::path(PEAK_SOURCE_DIR) / "examples" / "matmul-cuda-fp8");
  ASSERT_TRUE(base.is_ok()) << base.error();
  KernelContext both = *base;
  ArraySpec b = both.arrays[1];
  b.name = "B";
  b.size = "K * N";
  both.arrays.push_back(b);
  EXPECT_NE(check_cpu_reference(both).message().find("B and Bt are both given"), std::string::npos);
  KernelContext one_scale = *base;
  one_scale.arrays.erase(one_scale.arrays.begin() + 3);  // B_scale
  EXPECT_NE(check_cpu_reference(one_scale).message().find("A_scale and B_scale come together"),
            std::string::npos);
  KernelContext wide_scale = *base;
  wide_scale.arrays[2].size = "M";
  EXPECT_NE(check_cpu_reference(wide_scale).message().find("array A_scale has size"),
            std::string::npos);
  KernelContext row_major_size = *base;
  row_major_size.arrays[1].size = "N * K + 1";
  EXPECT_NE(check_cpu_reference(row_major_size).message().find("array Bt has size"),
            std::string::npos);
}

TEST(Reference, ConventionCheck) {
  EXPECT_TRUE(check_cpu_reference(matmul_context()).is_ok());
  // Commuted size expressions are the same sizes.
  KernelContext c = matmul_context();
  c.arrays[0].size = "K * M";
  c.arrays[2].size = "N*M";
  EXPECT_TRUE(check_cpu_reference(c).is_ok());
  // A second output cannot be computed by the reference.
  auto r = parse_context(matmul_toml("f32", "f32",
                                     "[[arrays]]\nname = \"D\"\ndtype = \"f32\"\nsize = \"M\"\n"
                                     "output = true\n"),
                         "kernel.toml");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.error().find("array D is an output"), std::string::npos) << r.error();
  // Extra inputs are fine.
  auto extra = parse_context(
      matmul_toml("f32", "f32", "[[arrays]]\nname = \"bias\"\ndtype = \"f32\"\nsize = \"N\"\n"),
      "kernel.toml");
  EXPECT_TRUE(extra.is_ok()) << extra.error();
  KernelContext out_a = matmul_context();
  out_a.arrays[0].output = true;
  EXPECT_NE(check_cpu_reference(out_a).message().find("array A must not be an output"),
            std::string::npos);
  KernelContext no_k = matmul_context();
  no_k.scalars.pop_back();
  EXPECT_NE(check_cpu_reference(no_k).message().find("no scalar K"), std::string::npos);
}

}  // namespace
}  // namespace peak
