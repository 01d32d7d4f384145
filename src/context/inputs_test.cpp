#include "context/inputs.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include <gtest/gtest.h>

namespace peak {
namespace {

ArraySpec spec(std::string name, DType t, std::string_view init) {
  ArraySpec a;
  a.name = std::move(name);
  a.dtype = t;
  auto r = parse_initializer(init);
  EXPECT_TRUE(r.is_ok()) << init;
  if (r.is_ok()) a.init = *r;
  return a;
}

std::vector<double> values(const ArraySpec& a, const std::vector<uint8_t>& bytes) {
  std::vector<double> v;
  int64_t n = static_cast<int64_t>(bytes.size() / dtype_size(a.dtype));
  for (int64_t i = 0; i < n; ++i) v.push_back(element_as_double(a.dtype, bytes.data(), i));
  return v;
}

float f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ---- fp16 ----

TEST(Half, KnownBitPatterns) {
  struct Case {
    float f;
    uint16_t h;
  } cases[] = {
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f, 0x3C00},
      {-2.0f, 0xC000},
      {0.5f, 0x3800},
      {0.1f, 0x2E66},
      {1.0f / 3.0f, 0x3555},
      {65504.0f, 0x7BFF},  // largest half
      {65519.0f, 0x7BFF},  // rounds down
      {65520.0f, 0x7C00},  // rounds up to infinity
      {1e6f, 0x7C00},      // overflow
      {-1e6f, 0xFC00},
      {0x1.0p-14f, 0x0400},            // smallest normal
      {0x1.0p-24f, 0x0001},            // smallest subnormal
      {0x1.0p-25f, 0x0000},            // tie between 0 and the smallest subnormal: even (0)
      {0x1.8p-25f, 0x0001},            // above the tie
      {0x1.8p-24f, 0x0002},            // 1.5 subnormal steps: tie, to even (2)
      {1023.0f * 0x1.0p-24f, 0x03FF},  // largest subnormal
      {0x1.ffcp-15f, 0x0400},          // rounds up from subnormal into the smallest normal
      {1e-10f, 0x0000},
      {-1e-10f, 0x8000},
      {1.0f + 0x1.0p-11f, 0x3C00},               // tie: to even
      {1.0f + 3 * 0x1.0p-11f, 0x3C02},           // tie: to even (up)
      {1.0f + 0x1.0p-11f + 0x1.0p-20f, 0x3C01},  // just above the tie
      {2049.0f, 0x6800},
      {2051.0f, 0x6802},
      {std::numeric_limits<float>::infinity(), 0x7C00},
      {-std::numeric_limits<float>::infinity(), 0xFC00},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(float_to_half(c.f), c.h) << c.f;
  }
  EXPECT_EQ(half_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(half_to_float(0x0001), 0x1.0p-24f);
  EXPECT_EQ(half_to_float(0x03FF), 1023.0f * 0x1.0p-24f);
  EXPECT_EQ(half_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(half_to_float(0xC000), -2.0f);
  EXPECT_TRUE(std::signbit(half_to_float(0x8000)));
  EXPECT_EQ(half_to_float(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(half_to_float(0x7E00)));
  EXPECT_TRUE(std::isnan(half_to_float(0x7DAD)));
}

TEST(Half, NanStaysNan) {
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::quiet_NaN()) & 0x7E00, 0x7E00);
  // A NaN whose payload sits only in the low bits must not become infinity.
  uint16_t h = float_to_half(f32(0x7F800001u));
  EXPECT_EQ(h & 0x7C00, 0x7C00);
  EXPECT_NE(h & 0x03FF, 0);
  EXPECT_EQ(float_to_half(f32(0xFFC00000u)), 0xFE00);
}

TEST(Half, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f)))) << h;
      EXPECT_EQ(float_to_half(f), h) << h;  // payload kept
    } else {
      ASSERT_EQ(float_to_half(f), h) << std::hex << h;
    }
  }
}

#if defined(__FLT16_MAX__)
TEST(Half, AgreesWithCompilerFloat16) {
  // _Float16 conversion (round to nearest even) as an independent reference.
  uint64_t x = 12345;
  for (int i = 0; i < 200000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    uint32_t u = static_cast<uint32_t>(x >> 32);
    if (i % 2) u = (u & 0x83FFFFFFu) | 0x30000000u;  // half of the draws near the half range
    float f = f32(u);
    if (std::isnan(f)) continue;
    _Float16 ref = static_cast<_Float16>(f);
    uint16_t ref_bits;
    std::memcpy(&ref_bits, &ref, 2);
    ASSERT_EQ(float_to_half(f), ref_bits) << std::hexfloat << f;
  }
}
#endif

// ---- generation ----

TEST(Inputs, DeterministicAndSensitiveToEveryArgument) {
  ArraySpec a = spec("A", DType::f32, "uniform(-1, 1)");
  auto base = generate_array(a, 1000, 42, 0);
  ASSERT_EQ(base.size(), 4000u);
  EXPECT_EQ(generate_array(a, 1000, 42, 0), base);
  EXPECT_NE(generate_array(a, 1000, 43, 0), base);
  EXPECT_NE(generate_array(a, 1000, 42, 1), base);
  EXPECT_NE(generate_array(a, 1000, 42, 2), base);
  EXPECT_NE(generate_array(a, 1000, 42, 3), base);
  EXPECT_NE(generate_array(a, 1000, 42, 3), generate_array(a, 1000, 42, 4));
  ArraySpec b = a;
  b.name = "B";
  EXPECT_NE(generate_array(b, 1000, 42, 0), base);
  EXPECT_NE(array_seed(42, "A"), array_seed(42, "B"));
  EXPECT_NE(array_seed(42, "A"), array_seed(43, "A"));
  // A prefix is the same whatever the count (element i depends on i alone).
  auto longer = generate_array(a, 2000, 42, 0);
  EXPECT_TRUE(std::equal(base.begin(), base.end(), longer.begin()));
  EXPECT_TRUE(generate_array(a, 0, 42, 0).empty());
}

// The generator as documented in docs/kernel-context.md, written out independently.
uint64_t doc_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

TEST(Inputs, FollowsTheDocumentedGenerator) {
  uint64_t fnv = 0xCBF29CE484222325ull;
  for (char c : std::string("A")) {
    fnv ^= static_cast<unsigned char>(c);
    fnv *= 0x100000001B3ull;
  }
  const uint64_t seed = 7;
  const uint64_t stream = doc_mix(doc_mix(seed) ^ fnv);
  EXPECT_EQ(array_seed(seed, "A"), stream);
  ArraySpec a = spec("A", DType::f32, "uniform(-3, 5)");
  auto bytes = generate_array(a, 4, seed, 0);
  for (uint64_t i = 0; i < 4; ++i) {
    uint64_t x = doc_mix(stream + (i + 1) * 0x9E3779B97F4A7C15ull);
    double u = static_cast<double>(x >> 11) * 0x1.0p-53;
    float want = static_cast<float>(-3.0 + 8.0 * u);
    EXPECT_EQ(element_as_double(DType::f32, bytes.data(), static_cast<int64_t>(i)), want) << i;
  }
}

TEST(Inputs, UniformStaysInRangeAndLooksUniform) {
  for (DType t : {DType::f32, DType::f16}) {
    ArraySpec a = spec("X", t, "uniform(-2, 6)");
    auto v = values(a, generate_array(a, 20000, 1, 0));
    double sum = 0;
    for (double x : v) {
      ASSERT_GE(x, -2.0);
      ASSERT_LE(x, 6.0);
      sum += x;
    }
    EXPECT_NEAR(sum / v.size(), 2.0, 0.1);
    EXPECT_GT(std::set<double>(v.begin(), v.end()).size(), 1000u);
  }
}

TEST(Inputs, NormalHasItsMeanAndStddev) {
  ArraySpec a = spec("N", DType::f32, "normal(3, 0.5)");
  auto v = values(a, generate_array(a, 50000, 9, 0));
  double sum = 0, sq = 0;
  for (double x : v) sum += x;
  double mean = sum / v.size();
  for (double x : v) sq += (x - mean) * (x - mean);
  EXPECT_NEAR(mean, 3.0, 0.02);
  EXPECT_NEAR(std::sqrt(sq / v.size()), 0.5, 0.02);
  for (double x : v) ASSERT_TRUE(std::isfinite(x));
}

TEST(Inputs, VariantOneIsScaledAndShifted) {
  ArraySpec a = spec("A", DType::f32, "uniform(-1, 1)");
  auto v = values(a, generate_array(a, 5000, 3, 1));
  for (double x : v) {
    ASSERT_GE(x, 0.125);
    ASSERT_LE(x, 0.375);
  }
  auto w = values(a, generate_array(a, 5000, 3, 2));
  for (double x : w) {
    ASSERT_GE(x, -2.0);
    ASSERT_LE(x, 2.0);
  }
}

TEST(Inputs, ConstantsAndIota) {
  ArraySpec ones = spec("o", DType::f16, "ones");
  for (double x : values(ones, generate_array(ones, 10, 1, 0))) EXPECT_EQ(x, 1.0);
  ArraySpec zeros = spec("z", DType::i32, "zeros");
  for (double x : values(zeros, generate_array(zeros, 10, 1, 0))) EXPECT_EQ(x, 0.0);
  ArraySpec iota = spec("i", DType::i32, "iota");
  auto v = values(iota, generate_array(iota, 5, 1, 0));
  EXPECT_EQ(v, (std::vector<double>{0, 1, 2, 3, 4}));
  ArraySpec iota16 = spec("i", DType::f16, "iota");
  auto h = values(iota16, generate_array(iota16, 2050, 1, 0));
  EXPECT_EQ(h[2047], 2047.0);
  EXPECT_EQ(h[2048], 0.0);  // wraps to stay exact in fp16
  EXPECT_EQ(h[2049], 1.0);
  auto same = values(iota, generate_array(iota, 3, 1, 1));  // integers keep their values
  EXPECT_EQ(same, (std::vector<double>{0, 1, 2}));
  ArraySpec iota32 = spec("i", DType::f32, "iota");
  auto shifted = values(iota32, generate_array(iota32, 3, 1, 1));  // i / 8 + 0.25
  EXPECT_EQ(shifted, (std::vector<double>{0.25, 0.375, 0.5}));
}

TEST(Inputs, IntegersAreUniformOverTheClosedRange) {
  ArraySpec a = spec("I", DType::i32, "uniform(-3, 3)");
  auto v = values(a, generate_array(a, 7000, 5, 0));
  std::set<double> seen(v.begin(), v.end());
  EXPECT_EQ(seen, (std::set<double>{-3, -2, -1, 0, 1, 2, 3}));
}

TEST(Inputs, RandomArraysAreNeverAllZero) {
  ArraySpec tiny16 = spec("t", DType::f16, "uniform(0, 1e-9)");  // rounds to 0 in fp16
  for (uint64_t seed = 0; seed < 5; ++seed) {
    for (int variant : {0, 3}) {
      auto v = values(tiny16, generate_array(tiny16, 8, seed, variant));
      EXPECT_TRUE(std::any_of(v.begin(), v.end(), [](double x) { return x != 0; }));
    }
  }
  ArraySpec int0 = spec("k", DType::i32, "uniform(-0.4, 0.4)");  // only 0 in range
  auto v = values(int0, generate_array(int0, 4, 1, 0));
  EXPECT_TRUE(std::any_of(v.begin(), v.end(), [](double x) { return x != 0; }));
  ArraySpec one = spec("u", DType::f32, "normal(0, 1e-30)");
  auto w = values(one, generate_array(one, 1, 2, 0));
  EXPECT_NE(w[0], 0.0);
  for (double x : w) EXPECT_TRUE(std::isfinite(x));
}

// ---- poison ----

// The device generator's description, run on the host, gives generate_array's bytes for every
// initializer it covers, in every element type, at small and large counts (the zero fix too).
TEST(InputGenerator, RunOnTheHostGivesGenerateArraysBytes) {
  const std::vector<std::string> inits = {"uniform(-1, 1)",
                                          "uniform(0.9, 1.1)",
                                          "uniform(-8, 8)",
                                          "uniform(0, 1)",
                                          "uniform(2.5, 2.7)",
                                          "ones",
                                          "zeros",
                                          "iota",
                                          "uniform(0.2, 0.8)",
                                          "uniform(0, 1e-9)"};
  int covered = 0;
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::i32})
    for (const auto& init : inits)
      for (int64_t count : {1, 2, 3, 7, 1000, 3 << 20})
        for (uint64_t seed : {1ull, 0x5e1ull}) {
          ArraySpec a = spec("A", t, init);
          auto g = input_generator(a, count, seed, 0);
          ASSERT_TRUE(g.has_value()) << init;
          EXPECT_EQ(run_generator(*g, count), generate_array(a, count, seed, 0))
              << init << " " << to_string(t) << " count " << count << " seed " << seed;
          ++covered;
        }
  EXPECT_EQ(covered, 4 * 10 * 6 * 2);
}

TEST(InputGenerator, TheZeroFixIsTheOneGenerateArrayMakes) {
  // uniform(0, 1) in i32 is 0 or 1: some single elements draw 0 and take the fix.
  int fixed = 0;
  for (uint64_t seed = 0; seed < 64; ++seed) {
    ArraySpec a = spec("X", DType::i32, "uniform(0, 1)");
    auto g = input_generator(a, 1, seed, 0);
    ASSERT_TRUE(g.has_value());
    const auto want = generate_array(a, 1, seed, 0);
    EXPECT_EQ(run_generator(*g, 1), want);
    InputGenerator unfixed = *g;
    unfixed.random = false;
    fixed += run_generator(unfixed, 1) != want;
  }
  EXPECT_GT(fixed, 0);
}

TEST(Inputs, ElementsAloneAreGenerateArraysAtThoseElements) {
  for (const char* init : {"uniform(-1, 1)", "normal(0, 1)", "iota", "ones"})
    for (DType t : {DType::f32, DType::f16}) {
      ArraySpec a = spec("A", t, init);
      const int64_t n = 1001;
      const std::vector<int64_t> at = {0, 3, 4, 500, 999, 1000};
      for (int variant : {0, 1}) {
        auto whole = generate_array(a, n, 7, variant);
        auto part = generate_elements(a, n, 7, variant, at);
        ASSERT_TRUE(part.has_value()) << init;
        const size_t es = dtype_size(t);
        for (int64_t i = 0; i < n; ++i) {
          const bool asked = std::find(at.begin(), at.end(), i) != at.end();
          const std::vector<uint8_t> zero(es, 0);
          EXPECT_EQ(0, std::memcmp(part->data() + i * es,
                                   asked ? whole.data() + i * es : zero.data(), es))
              << init << " element " << i;
        }
      }
    }
  // Elements all zero in a random array: the whole array must tell (the zero fix).
  EXPECT_FALSE(generate_elements(spec("t", DType::f16, "uniform(0, 1e-9)"), 8, 1, 0, {2, 5}));
  EXPECT_FALSE(generate_elements(spec("A", DType::f32, "uniform(-1, 1)"), 8, 1, 0, {8}));
  EXPECT_TRUE(generate_elements(spec("z", DType::f32, "zeros"), 8, 1, 0, {2}).has_value());
}

// More than one chunk of asked elements (2^20) is written in parallel: the same values as the
// whole array, every asked element and no other.
TEST(Inputs, ManyElementsAloneAreGenerateArraysAtThoseElements) {
  for (const char* init : {"uniform(-1, 1)", "normal(0, 1)"}) {
    ArraySpec a = spec("A", DType::f16, init);
    const int64_t n = int64_t{3} << 20;
    std::vector<int64_t> at;
    for (int64_t i = 1; i < n; i += 2) at.push_back(i);  // 1.5 chunks of odd elements
    auto whole = generate_array(a, n, 11, 0);
    auto part = generate_elements(a, n, 11, 0, at);
    ASSERT_TRUE(part.has_value()) << init;
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t want = i % 2 ? reinterpret_cast<const uint16_t*>(whole.data())[i] : 0;
      wrong += reinterpret_cast<const uint16_t*>(part->data())[i] != want;
    }
    EXPECT_EQ(wrong, 0) << init;
  }
}

TEST(InputGenerator, NoneForNormalDrawsAndOtherVariants) {
  EXPECT_FALSE(input_generator(spec("A", DType::f32, "normal(0, 1)"), 16, 1, 0).has_value());
  EXPECT_FALSE(input_generator(spec("A", DType::f32, "uniform(-1, 1)"), 16, 1, 1).has_value());
  EXPECT_FALSE(input_generator(spec("A", DType::f32, "uniform(-1, 1)"), 0, 1, 0).has_value());
}

TEST(Poison, WordsAndDetection) {
  EXPECT_EQ(poison_u32(DType::f32), 0x7FBADBADu);
  EXPECT_EQ(poison_u32(DType::f16), 0x7DAD7DADu);
  EXPECT_EQ(poison_u32(DType::i32), 0x7BADBAD7u);
  for (DType t : {DType::f32, DType::f16, DType::i32}) {
    std::vector<uint8_t> buf(16);
    uint32_t w = poison_u32(t);
    for (size_t i = 0; i < buf.size(); i += 4) std::memcpy(&buf[i], &w, 4);
    for (size_t i = 0; i < buf.size(); i += dtype_size(t)) EXPECT_TRUE(is_poison(t, &buf[i]));
    ArraySpec a = spec("P", t, "uniform(-1, 1)");
    auto data = generate_array(a, 100, 1, 0);
    for (size_t i = 0; i < data.size(); i += dtype_size(t)) EXPECT_FALSE(is_poison(t, &data[i]));
  }
  // The poison is a NaN for the float types, but an ordinary NaN is not poison.
  float pf = f32(0x7FBADBADu);
  EXPECT_TRUE(std::isnan(pf));
  EXPECT_TRUE(std::isnan(half_to_float(0x7DAD)));
  float qnan = std::numeric_limits<float>::quiet_NaN();
  uint8_t b[4];
  std::memcpy(b, &qnan, 4);
  EXPECT_FALSE(is_poison(DType::f32, b));
  uint16_t hq = 0x7E00;
  std::memcpy(b, &hq, 2);
  EXPECT_FALSE(is_poison(DType::f16, b));
}

// ---- e4m3 ----

TEST(E4m3, KnownBitPatterns) {
  struct Case {
    float f;
    uint8_t x;
  } cases[] = {
      {0.0f, 0x00},       {-0.0f, 0x80},     {1.0f, 0x38},      {-2.0f, 0xC0},
      {448.0f, 0x7E},     {-448.0f, 0xFE},   {449.0f, 0x7E},    {464.0f, 0x7E},
      {1e30f, 0x7E},      {0x1.0p-6f, 0x08}, {0x1.0p-9f, 0x01}, {0x1.0p-10f, 0x00},
      {0x1.8p-10f, 0x01}, {0x1.8p-9f, 0x02}, {1.0625f, 0x38},   {1.1875f, 0x3A},
      {0x1.ep-7f, 0x08},  {3.7f, 0x47},      {-0.3f, 0xAA},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(float_to_e4m3(c.f), c.x) << c.f;
  }
  EXPECT_EQ(float_to_e4m3(std::numeric_limits<float>::infinity()), 0x7E);  // satfinite
  EXPECT_EQ(float_to_e4m3(-std::numeric_limits<float>::infinity()), 0xFE);
  EXPECT_EQ(float_to_e4m3(std::numeric_limits<float>::quiet_NaN()), 0x7F);
  EXPECT_EQ(e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), 0x1.0p-9f);
  EXPECT_EQ(e4m3_to_float(0x46), 3.5f);
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xFF)));
}

// Every code but the two NaNs converts to a float and back to itself; between two neighbours the
// midpoint goes to the one with the even code.
TEST(E4m3, EveryCodeRoundTripsAndMidpointsGoToEven) {
  for (int x = 0; x < 256; ++x) {
    if ((x & 0x7F) == 0x7F) continue;
    EXPECT_EQ(float_to_e4m3(e4m3_to_float(static_cast<uint8_t>(x))), x) << x;
    if ((x & 0x7F) == 0x7E) continue;
    const float lo = e4m3_to_float(static_cast<uint8_t>(x));
    const float hi = e4m3_to_float(static_cast<uint8_t>(x + 1));
    const uint8_t even = (x % 2 == 0) ? static_cast<uint8_t>(x) : static_cast<uint8_t>(x + 1);
    EXPECT_EQ(float_to_e4m3((lo + hi) / 2), even) << x;
  }
}

TEST(E4m3, GeneratedArraysHoldRepresentableValuesInRange) {
  ArraySpec a = spec("A", DType::e4m3, "uniform(-4, 4)");
  auto bytes = generate_array(a, 4096, 7, 0);
  ASSERT_EQ(bytes.size(), 4096u);
  std::set<uint8_t> codes;
  for (uint8_t b : bytes) {
    const double v = element_as_double(DType::e4m3, &b, 0);
    EXPECT_LE(std::fabs(v), 4.0);
    EXPECT_FALSE(is_poison(DType::e4m3, &b));
    codes.insert(b);
  }
  EXPECT_GT(codes.size(), 100u);  // most of the codes within +-4
  EXPECT_EQ(poison_u32(DType::e4m3), 0x7F7F7F7Fu);
  const uint8_t nan = 0x7F;
  EXPECT_TRUE(is_poison(DType::e4m3, &nan));
  // The generator a device runs gives the same bytes (the CUDA runner's on sm_89 and newer).
  auto g = input_generator(a, 4096, 7, 0);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(run_generator(*g, 4096), bytes);
}

TEST(Inputs, ElementAsDouble) {
  std::vector<uint8_t> buf(8);
  float f[2] = {1.5f, -0.25f};
  std::memcpy(buf.data(), f, 8);
  EXPECT_EQ(element_as_double(DType::f32, buf.data(), 1), -0.25);
  uint16_t h[2] = {0x3C00, 0xC000};
  std::memcpy(buf.data(), h, 4);
  EXPECT_EQ(element_as_double(DType::f16, buf.data(), 0), 1.0);
  EXPECT_EQ(element_as_double(DType::f16, buf.data(), 1), -2.0);
  int32_t i[2] = {-7, 2147483647};
  std::memcpy(buf.data(), i, 8);
  EXPECT_EQ(element_as_double(DType::i32, buf.data(), 0), -7.0);
  EXPECT_EQ(element_as_double(DType::i32, buf.data(), 1), 2147483647.0);
}

}  // namespace
}  // namespace peak
