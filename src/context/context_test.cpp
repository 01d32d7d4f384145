#include "context/context.h"

#include <fstream>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "family/family.h"
#include "util/fs.h"

namespace peak {
namespace {

constexpr std::string_view kMatmul = R"toml(format = 2
name = "matmul-hlsl-fp32"
description = "C = A * B, row-major, fp32"
backend = "hlsl"
family = "matmul"
precision = "fp32"
source = "kernel.hlsl"
workspace = "4 * M * N"
reference = "cpu"
flops = "2 * M * N * K"
bytes = "4 * (M * K + K * N + M * N)"
valid = "M > 0 && N > 0 && K > 0 && A.size == M * K"
reduction = "K"
rtol = 1e-5
atol = 0.0
tuning_valid = "BLOCK * BLOCK <= max_threads"

[[arrays]]
name = "A"
dtype = "f32"
size = "M * K"
init = "uniform(-1, 1)"

[[arrays]]
name = "B"
dtype = "f32"
size = "K * N"
init = "normal(0, 0.5)"

[[arrays]]
name = "C"
dtype = "f32"
size = "M * N"
output = true

[[scalars]]
name = "M"
dtype = "i32"
values = [64, 128, 256]

[[scalars]]
name = "N"
range = [16, 256, 16]

[[scalars]]
name = "K"
range = [1, 300]

[shapes]
bench = [ { M = 2048, N = 2048, K = 2048 } ]
validation = [ { M = 64, N = 64, K = 64 }, { M = 128, N = 32, K = 100 } ]
hidden = [ { M = 65, N = 33, K = 7 } ]
small = [ { M = 16, N = 16, K = 16 } ]

[[tuning]]
name = "BLOCK"
values = [8, 16, 32]
default = 16

[[tuning]]
name = "UNROLL"
values = [1, 2, 4]
)toml";

std::string parse_error_of(std::string_view text) {
  auto r = parse_context(text, "kernel.toml");
  EXPECT_FALSE(r.is_ok()) << "parsed:\n" << text;
  return r.is_ok() ? "" : r.error();
}

// Replaces the first occurrence of `from` in the example.
std::string with(std::string_view from, std::string_view to) {
  std::string s(kMatmul);
  auto pos = s.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) s.replace(pos, from.size(), to);
  return s;
}

TEST(Context, ParsesFullExample) {
  auto r = parse_context(kMatmul, "kernel.toml", "/tmp/ctx");
  ASSERT_TRUE(r.is_ok()) << r.error();
  const KernelContext& c = *r;
  EXPECT_EQ(c.format, 2);
  EXPECT_EQ(c.name, "matmul-hlsl-fp32");
  EXPECT_EQ(c.description, "C = A * B, row-major, fp32");
  EXPECT_EQ(c.backend, "hlsl");
  EXPECT_EQ(c.family, "matmul");
  EXPECT_EQ(c.precision, "fp32");
  EXPECT_EQ(c.source_file, "kernel.hlsl");
  EXPECT_EQ(c.workspace, "4 * M * N");
  EXPECT_EQ(c.reference, ReferenceKind::cpu);
  EXPECT_EQ(c.flops, "2 * M * N * K");
  EXPECT_EQ(c.bytes, "4 * (M * K + K * N + M * N)");
  EXPECT_EQ(c.reduction, "K");
  EXPECT_DOUBLE_EQ(c.rtol, 1e-5);
  EXPECT_EQ(c.atol, 0.0);
  EXPECT_EQ(c.tuning_valid, "BLOCK * BLOCK <= max_threads");
  EXPECT_EQ(c.dir, std::filesystem::path("/tmp/ctx"));
  ASSERT_EQ(c.arrays.size(), 3u);
  EXPECT_EQ(c.arrays[0].name, "A");
  EXPECT_EQ(c.arrays[0].size, "M * K");
  EXPECT_EQ(c.arrays[0].init.kind, Initializer::Kind::uniform);
  EXPECT_FALSE(c.arrays[0].output);
  EXPECT_EQ(c.arrays[1].init.kind, Initializer::Kind::normal);
  EXPECT_EQ(c.arrays[1].init.b, 0.5);
  EXPECT_TRUE(c.arrays[2].output);
  EXPECT_EQ(c.arrays[2].init.text(), "uniform(-1, 1)");  // default
  ASSERT_EQ(c.scalars.size(), 3u);
  EXPECT_EQ(c.scalars[0].values, (std::vector<int64_t>{64, 128, 256}));
  EXPECT_FALSE(c.scalars[0].has_range());
  EXPECT_EQ(c.scalars[1].range_lo, 16);
  EXPECT_EQ(c.scalars[1].range_hi, 256);
  EXPECT_EQ(c.scalars[1].range_step, 16);
  EXPECT_EQ(c.scalars[2].range_step, 1);
  ASSERT_EQ(c.bench_shapes.size(), 1u);
  EXPECT_EQ(c.bench_shapes[0].text(), "K=2048 M=2048 N=2048");
  EXPECT_EQ(c.validation_shapes.size(), 2u);
  EXPECT_EQ(c.hidden_shapes.size(), 1u);
  EXPECT_EQ(c.small_shapes.size(), 1u);
  ASSERT_EQ(c.tuning.size(), 2u);
  EXPECT_EQ(c.tuning[0].default_value, 16);
  EXPECT_EQ(c.tuning[1].default_value, 1);  // first value when no default is given
}

TEST(Context, Defaults) {
  auto r = parse_context(R"(name = "x"
backend = "cuda"
source = "k.cu"
[[arrays]]
name = "out"
dtype = "i32"
size = "n"
output = true
[[scalars]]
name = "n"
)",
                         "k.toml");
  ASSERT_TRUE(r.is_ok()) << r.error();
  EXPECT_EQ(r->format, 2);
  EXPECT_TRUE(r->workspace.empty());
  EXPECT_EQ(r->reference, ReferenceKind::seed);  // no family with a CPU reference
  EXPECT_EQ(r->scalars[0].dtype, DType::i32);
  EXPECT_TRUE(r->valid.empty());
  EXPECT_EQ(*shape_flops(*r, Shape{{{"n", 4}}}), 0.0);
}

TEST(Context, FamilyMatmulDefaultsToCpuReference) {
  auto s = with("reference = \"cpu\"\n", "");
  auto r = parse_context(s, "kernel.toml");
  ASSERT_TRUE(r.is_ok()) << r.error();
  EXPECT_EQ(r->reference, ReferenceKind::cpu);
}

void expect_same(const KernelContext& a, const KernelContext& b) {
  EXPECT_EQ(a.format, b.format);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.description, b.description);
  EXPECT_EQ(a.backend, b.backend);
  EXPECT_EQ(a.family, b.family);
  EXPECT_EQ(a.precision, b.precision);
  EXPECT_EQ(a.source_file, b.source_file);
  EXPECT_EQ(a.workspace, b.workspace);
  EXPECT_EQ(a.valid, b.valid);
  EXPECT_EQ(a.flops, b.flops);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.reference, b.reference);
  EXPECT_EQ(a.rtol, b.rtol);
  EXPECT_EQ(a.atol, b.atol);
  EXPECT_EQ(a.reduction, b.reduction);
  EXPECT_EQ(a.tuning_valid, b.tuning_valid);
  ASSERT_EQ(a.arrays.size(), b.arrays.size());
  for (size_t i = 0; i < a.arrays.size(); ++i) {
    EXPECT_EQ(a.arrays[i].name, b.arrays[i].name);
    EXPECT_EQ(a.arrays[i].dtype, b.arrays[i].dtype);
    EXPECT_EQ(a.arrays[i].size, b.arrays[i].size);
    EXPECT_EQ(a.arrays[i].init.kind, b.arrays[i].init.kind);
    EXPECT_EQ(a.arrays[i].init.a, b.arrays[i].init.a);
    EXPECT_EQ(a.arrays[i].init.b, b.arrays[i].init.b);
    EXPECT_EQ(a.arrays[i].output, b.arrays[i].output);
  }
  ASSERT_EQ(a.scalars.size(), b.scalars.size());
  for (size_t i = 0; i < a.scalars.size(); ++i) {
    EXPECT_EQ(a.scalars[i].name, b.scalars[i].name);
    EXPECT_EQ(a.scalars[i].dtype, b.scalars[i].dtype);
    EXPECT_EQ(a.scalars[i].values, b.scalars[i].values);
    EXPECT_EQ(a.scalars[i].range_lo, b.scalars[i].range_lo);
    EXPECT_EQ(a.scalars[i].range_hi, b.scalars[i].range_hi);
    EXPECT_EQ(a.scalars[i].range_step, b.scalars[i].range_step);
  }
  auto same_shapes = [](const std::vector<Shape>& x, const std::vector<Shape>& y) {
    ASSERT_EQ(x.size(), y.size());
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(x[i].values, y[i].values);
  };
  same_shapes(a.bench_shapes, b.bench_shapes);
  same_shapes(a.validation_shapes, b.validation_shapes);
  same_shapes(a.hidden_shapes, b.hidden_shapes);
  same_shapes(a.small_shapes, b.small_shapes);
  ASSERT_EQ(a.tuning.size(), b.tuning.size());
  for (size_t i = 0; i < a.tuning.size(); ++i) {
    EXPECT_EQ(a.tuning[i].name, b.tuning[i].name);
    EXPECT_EQ(a.tuning[i].values, b.tuning[i].values);
    EXPECT_EQ(a.tuning[i].default_value, b.tuning[i].default_value);
  }
  EXPECT_TRUE(a == b);
}

TEST(Context, RoundTripsThroughToml) {
  auto first = parse_context(kMatmul, "kernel.toml");
  ASSERT_TRUE(first.is_ok()) << first.error();
  std::string text = to_toml(*first);
  auto second = parse_context(text, "kernel.toml");
  ASSERT_TRUE(second.is_ok()) << second.error() << "\n" << text;
  expect_same(*first, *second);
  EXPECT_EQ(to_toml(*second), text);  // stable
}

TEST(Context, RoundTripsUnusualValues) {
  KernelContext c;
  c.name = "odd \"name\" with \\ and \t tab";
  c.description = "line one\nline two, ünïcödé";
  c.backend = "cuda";
  c.source_file = "k.cu";
  c.workspace = "2 * n";
  c.precision = "fp16-in/fp32-acc";
  c.rtol = 0.001;
  c.atol = 2.5e-7;
  c.reference = ReferenceKind::seed;
  c.arrays.push_back({"X", DType::f16, "n * 2", {Initializer::Kind::normal, -0.5, 0.125}, false});
  c.arrays.push_back({"Y", DType::i32, "n", {Initializer::Kind::iota, -1, 1}, false});
  c.arrays.push_back({"Z", DType::f32, "n", {Initializer::Kind::zeros, -1, 1}, true});
  ScalarSpec n;
  n.name = "n";
  n.range_lo = -4;
  n.range_hi = 1000;
  n.range_step = 4;
  c.scalars.push_back(n);
  c.hidden_shapes.push_back(Shape{{{"n", 12}}});
  c.tuning.push_back({"T", {-1, 0, 7}, 7});
  auto r = parse_context(to_toml(c), "k.toml");
  ASSERT_TRUE(r.is_ok()) << r.error() << "\n" << to_toml(c);
  expect_same(c, *r);
}

TEST(Context, TomlSyntaxErrorHasLocation) {
  std::string e = parse_error_of("name = \"x\"\nbackend = \n");
  EXPECT_EQ(e.rfind("kernel.toml:2:11: ", 0), 0u) << e;
  EXPECT_NE(e.find("expected value"), std::string::npos) << e;
}

TEST(Context, SemanticErrorsHaveLocations) {
  struct Case {
    std::string text;
    std::string prefix;  // expected start of the message
    std::string contains;
  };
  const Case cases[] = {
      {with("dtype = \"f32\"\nsize = \"M * K\"", "dtype = \"f64\"\nsize = \"M * K\""),
       "kernel.toml:20:9: ", "unknown dtype 'f64' for array 'A'"},
      {with("name = \"matmul-hlsl-fp32\"\n", ""),
       "kernel.toml:1:1: ", "missing required key 'name'"},
      {with("backend = \"hlsl\"\n", ""), "kernel.toml:1:1: ", "missing required key 'backend'"},
      {with("source = \"kernel.hlsl\"\n", ""),
       "kernel.toml:1:1: ", "missing required key 'source'"},
      {with("backend = \"hlsl\"", "backend = \"metal\""),
       "kernel.toml:4:11: ", "unknown backend 'metal'"},
      {with("size = \"M * K\"", "size = \"M * (K\""), "kernel.toml:21:8: ",
       "cannot parse the size of array 'A' = \"M * (K\": column 7: expected ')'"},
      {with("size = \"M * K\"", "size = \"M * Q\""), "kernel.toml:21:8: ", "uses unknown name 'Q'"},
      {with("output = true\n", ""), "kernel.toml:18:1: ", "no array is marked output = true"},
      {with("name = \"B\"", "name = \"A\""), "kernel.toml:25:8: ", "duplicate name 'A'"},
      {with("name = \"UNROLL\"", "name = \"M\""), "kernel.toml:61:8: ", "duplicate name 'M'"},
      {with("default = 16", "default = 12"),
       "kernel.toml:58:11: ", "default 12 of tuning parameter 'BLOCK' is not one of its values"},
      {with("format = 2", "format = 6"),
       "kernel.toml:1:10: ", "format 6 is newer than this peak supports"},
      {with("format = 2", "format = 1"),
       "kernel.toml:1:10: ", "format 1 kernel contexts held host code in the host region"},
      {with("workspace = \"4 * M * N\"", "entry = \"main\""),
       "kernel.toml:8:9: ", "'entry' is gone since format 2"},
      {with("workspace = \"4 * M * N\"", "workspace = \"4 * Q\""),
       "kernel.toml:8:13: ", "uses unknown name 'Q'"},
      {with("hidden = [ { M = 65, N = 33, K = 7 } ]", "hidden = [ { M = 65, N = 33 } ]"),
       "kernel.toml:52:12: ", "gives no value to scalar 'K'"},
      {with("hidden = [ { M = 65, N = 33, K = 7 } ]",
            "hidden = [ { M = 65, N = 33, K = 7, Q = 1 } ]"),
       "kernel.toml:52:37: ", "'Q', which is not a declared scalar"},
      {with("small = [ { M = 16, N = 16, K = 16 } ]", "small = [ { M = 16, N = 16, K = 0 } ]"),
       "kernel.toml:53:11: ", "does not satisfy valid"},
      {with("flops = \"2 * M * N * K\"", "flops = \"2 * M * N * K +\""),
       "kernel.toml:10:9: ", "cannot parse flops"},
      {with("valid = \"M > 0", "valid = \"X.size > 0"),
       "kernel.toml:12:9: ", "uses unknown name 'X.size'"},
      {with("tuning_valid = \"BLOCK * BLOCK <= max_threads\"", "tuning_valid = \"BLOCK *\""),
       "kernel.toml:16:16: ", "cannot parse tuning_valid"},
      {with("init = \"uniform(-1, 1)\"", "init = \"random\""),
       "kernel.toml:22:8: ", "unknown initializer 'random'"},
      {with("reference = \"cpu\"", "reference = \"gpu\""),
       "kernel.toml:9:13: ", "unknown reference 'gpu'"},
      {with("family = \"matmul\"", "family = \"conv\""),
       "kernel.toml:9:13: ", "family 'conv' has no CPU reference"},
      {with("name = \"C\"", "name = \"D\""), "kernel.toml:5:10: ", "no array C"},
      {with("size = \"K * N\"", "size = \"N * K + 1\""), "kernel.toml:5:10: ", "array B has size"},
      {with("precision = \"fp32\"", "precison = \"fp32\""),
       "kernel.toml:6:1: ", "unknown key 'precison'"},
      {with("values = [64, 128, 256]", "values = [64, 1.5]"),
       "kernel.toml:39:15: ", "must be an integer, not a float"},
      {with("range = [16, 256, 16]", "range = [256, 16]"),
       "kernel.toml:43:9: ", "needs high > low"},
      {with("bench = [ { M = 2048, N = 2048, K = 2048 } ]",
            "bench = [ { M = 4000000000, N = 1, K = 1 } ]"),
       "kernel.toml:50:17: ", "does not fit in a 32-bit integer"},
      {with("name = \"A\"", "name = \"1A\""), "kernel.toml:19:8: ", "not an identifier"},
  };
  for (const auto& c : cases) {
    std::string e = parse_error_of(c.text);
    EXPECT_EQ(e.rfind(c.prefix, 0), 0u) << "expected prefix " << c.prefix << " in: " << e;
    EXPECT_NE(e.find(c.contains), std::string::npos) << "expected '" << c.contains << "' in: " << e;
  }
}

TEST(Context, Initializers) {
  auto u = parse_initializer("uniform(-2, 0.5)");
  ASSERT_TRUE(u.is_ok());
  EXPECT_EQ(u->kind, Initializer::Kind::uniform);
  EXPECT_EQ(u->a, -2);
  EXPECT_EQ(u->b, 0.5);
  EXPECT_EQ(u->text(), "uniform(-2, 0.5)");
  auto n = parse_initializer(" normal( 1 ,1e-3 ) ");
  ASSERT_TRUE(n.is_ok()) << n.error();
  EXPECT_EQ(n->kind, Initializer::Kind::normal);
  EXPECT_EQ(n->text(), "normal(1, 0.001)");
  EXPECT_EQ(parse_initializer("normal")->text(), "normal(0, 1)");
  EXPECT_EQ(parse_initializer("uniform")->text(), "uniform(-1, 1)");
  EXPECT_EQ(parse_initializer("ones")->kind, Initializer::Kind::ones);
  EXPECT_EQ(parse_initializer("zeros()")->kind, Initializer::Kind::zeros);
  EXPECT_EQ(parse_initializer("iota")->text(), "iota");
  for (std::string_view bad :
       {"uniform(1, 1)", "uniform(1)", "normal(0, 0)", "normal(0, -1)", "ones(3)", "uniform(a, b)",
        "uniform(-1, 1", "gauss", "uniform(0, inf)"}) {
    EXPECT_FALSE(parse_initializer(bad).is_ok()) << bad;
  }
  EXPECT_NE(parse_initializer("gauss").error().find("expected uniform(low, high)"),
            std::string::npos);
  // Round trip of every kind through its text.
  for (auto k : {Initializer::Kind::uniform, Initializer::Kind::normal, Initializer::Kind::ones,
                 Initializer::Kind::zeros, Initializer::Kind::iota}) {
    Initializer init{k, 0.1, 0.7};
    auto back = parse_initializer(init.text());
    ASSERT_TRUE(back.is_ok()) << init.text();
    EXPECT_EQ(back->text(), init.text());
  }
}

TEST(Context, DTypesAndRegionsNames) {
  EXPECT_EQ(dtype_from_string("f16"), DType::f16);
  EXPECT_EQ(dtype_from_string("bf16"), DType::bf16);
  EXPECT_FALSE(dtype_from_string("fp8").has_value());
  EXPECT_EQ(dtype_from_string("e4m3"), DType::e4m3);
  EXPECT_EQ(to_string(DType::e4m3), "e4m3");
  EXPECT_EQ(dtype_size(DType::e4m3), 1u);
  EXPECT_EQ(dtype_size(DType::f16), 2u);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(to_string(DType::bf16), "bf16");
  EXPECT_EQ(dtype_size(DType::f32), 4u);
  EXPECT_EQ(dtype_size(DType::i32), 4u);
  EXPECT_EQ(to_string(DType::i32), "i32");
  EXPECT_EQ(region_from_string("host"), Region::host);
  EXPECT_FALSE(region_from_string("kernel").has_value());
  EXPECT_EQ(begin_marker(Region::device), "// peak:begin device");
  EXPECT_EQ(end_marker(Region::macros), "// peak:end macros");
}

TEST(Context, ShapeEnvSizesFlopsBytes) {
  auto c = parse_context(kMatmul, "kernel.toml");
  ASSERT_TRUE(c.is_ok());
  Shape s{{{"M", 4}, {"N", 5}, {"K", 6}}};
  auto env = shape_env(*c, s);
  ASSERT_TRUE(env.is_ok()) << env.error();
  EXPECT_EQ(env->at("M"), 4);
  EXPECT_EQ(env->at("A.size"), 24);
  EXPECT_EQ(env->at("B.size"), 30);
  EXPECT_EQ(env->at("C.size"), 20);
  auto sizes = array_sizes(*c, s);
  ASSERT_TRUE(sizes.is_ok());
  EXPECT_EQ(sizes->at("B"), 30);
  EXPECT_EQ(*shape_flops(*c, s), 240.0);
  EXPECT_EQ(*shape_bytes(*c, s), 4.0 * (24 + 30 + 20));
  EXPECT_TRUE(*shape_is_valid(*c, s));
  EXPECT_FALSE(*shape_is_valid(*c, Shape{{{"M", 0}, {"N", 5}, {"K", 6}}}));
  auto missing = shape_env(*c, Shape{{{"M", 4}, {"N", 5}}});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.error().find("no value to scalar 'K'"), std::string::npos);
  auto neg = array_sizes(*c, Shape{{{"M", -4}, {"N", 5}, {"K", 6}}});
  ASSERT_FALSE(neg.is_ok());
  EXPECT_NE(neg.error().find("negative"), std::string::npos);
}

TEST(Context, SampleShapesDeterministicValidAndRespectingSteps) {
  auto c = parse_context(with("valid = \"M > 0 && N > 0 && K > 0 && A.size == M * K\"",
                              "valid = \"M > 0 && N > 0 && K > 0 && (M + K) % 2 == 0\""),
                         "kernel.toml");
  ASSERT_TRUE(c.is_ok()) << c.error();
  auto a = sample_shapes(*c, 16, 7);
  auto b = sample_shapes(*c, 16, 7);
  auto d = sample_shapes(*c, 16, 8);
  ASSERT_EQ(a.size(), 16u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, d);
  for (const auto& s : a) {
    int64_t m = s.values.at("M"), n = s.values.at("N"), k = s.values.at("K");
    EXPECT_TRUE(m == 64 || m == 128 || m == 256) << s.text();
    EXPECT_EQ(n % 16, 0) << s.text();
    EXPECT_GE(n, 16);
    EXPECT_LE(n, 256);
    EXPECT_GE(k, 1);
    EXPECT_LE(k, 300);
    EXPECT_EQ((m + k) % 2, 0) << s.text();
    EXPECT_TRUE(*shape_is_valid(*c, s));
  }
  // No duplicates.
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t j = i + 1; j < a.size(); ++j) EXPECT_NE(a[i], a[j]);
  }
}

TEST(Context, SampleShapesSmallSpaceAndNoDeclaredValues) {
  auto c = parse_context(R"(name = "x"
backend = "hip"
source = "k.cpp"
valid = "n != 2"
[[arrays]]
name = "o"
dtype = "f32"
size = "n * m"
output = true
[[scalars]]
name = "n"
values = [1, 2, 3]
[[scalars]]
name = "m"
[shapes]
validation = [ { n = 1, m = 5 }, { n = 3, m = 6 } ]
)",
                         "k.toml");
  ASSERT_TRUE(c.is_ok()) << c.error();
  // n in {1, 3} (2 is invalid), m from the declared shapes {5, 6}, minus the two declared shapes.
  auto s = sample_shapes(*c, 10, 1);
  EXPECT_EQ(s.size(), 2u);
  for (const auto& shape : s) EXPECT_NE(shape.values.at("n"), 2);
  c->scalars[0].values.clear();
  EXPECT_TRUE(sample_shapes(*c, 10, 1).empty());  // no scalar declares values or a range
  EXPECT_TRUE(sample_shapes(*c, 0, 1).empty());
}

TEST(Context, DocumentedExampleParses) {
  auto doc = read_file(std::filesystem::path(PEAK_SOURCE_DIR) / "docs" / "kernel-context.md");
  ASSERT_TRUE(doc.is_ok()) << doc.error();
  size_t begin = doc->find("```toml\n");
  ASSERT_NE(begin, std::string::npos);
  begin += 8;
  size_t end = doc->find("```", begin);
  auto c = parse_context(doc->substr(begin, end - begin), "kernel-context.md");
  ASSERT_TRUE(c.is_ok()) << c.error();
  EXPECT_EQ(c->name, "matmul-hlsl-fp32");
  EXPECT_EQ(c->reference, ReferenceKind::cpu);
  EXPECT_EQ(c->hidden_shapes.size(), 2u);
  EXPECT_EQ(c->suite.size(), 2u);
  EXPECT_EQ(c->suite_small.size(), 2u);
  EXPECT_EQ(sample_shapes(*c, 8, 1).size(), 8u);
}

// kMatmul in format 3 with a suite of two shapes and one small shape.
std::string with_suite(std::string_view suite) {
  std::string t(kMatmul);
  t.replace(t.find("format = 2"), 10, "format = 3");
  return t + "\n[suite]\n" + std::string(suite);
}

TEST(Context, ShapeSuiteParsesAndRoundTrips) {
  auto c = parse_context(with_suite(R"(shapes = [
  { name = "square-2048", class = "square", M = 2048, N = 2048, K = 2048 },
  { name = "decode", class = "small-m", M = 16, N = 4096, K = 4096 },
]
small = [ { name = "square-64", class = "square", M = 64, N = 64, K = 64 } ]
)"),
                         "kernel.toml");
  ASSERT_TRUE(c.is_ok()) << c.error();
  EXPECT_EQ(c->format, 3);
  ASSERT_EQ(c->suite.size(), 2u);
  EXPECT_EQ(c->suite[1].name, "decode");
  EXPECT_EQ(c->suite[1].cls, SuiteClass::small_m);
  EXPECT_EQ(c->suite[1].shape.values.at("M"), 16);
  ASSERT_EQ(c->suite_small.size(), 1u);
  EXPECT_EQ(&suite_for(*c, true), &c->suite_small);
  EXPECT_EQ(&suite_for(*c, false), &c->suite);
  // The suite is no declared shape: sampling and the shape lists are unchanged.
  EXPECT_EQ(c->bench_shapes.size(), 1u);
  std::string text = to_toml(*c);
  auto again = parse_context(text, "kernel.toml");
  ASSERT_TRUE(again.is_ok()) << again.error() << "\n" << text;
  EXPECT_EQ(again->suite, c->suite);
  EXPECT_EQ(again->suite_small, c->suite_small);
  EXPECT_EQ(to_toml(*again), text);
  // Every class has one spelling that reads back.
  for (SuiteClass k : kAllSuiteClasses) EXPECT_EQ(suite_class_from_string(to_string(k)), k);
  EXPECT_FALSE(suite_class_from_string("Square"));
}

// `supports` (format 4): the shapes a transformed kernel supports. The listed shapes need only
// belong to the problem (`valid`); those outside `supports` are not run.
TEST(Context, SupportsNarrowsTheShapesRunWithoutRejectingListedShapes) {
  std::string t(kMatmul);
  t.replace(t.find("format = 2"), 10, "format = 4");
  t.insert(t.find("\n[[arrays]]"), "\nsupports = \"K % 8 == 0\"\n");
  auto c = parse_context(t, "kernel.toml");  // the hidden shape has K = 7
  ASSERT_TRUE(c.is_ok()) << c.error();
  EXPECT_EQ(c->supports, "K % 8 == 0");
  Shape odd{{{"M", 65}, {"N", 33}, {"K", 7}}};
  Shape even{{{"M", 65}, {"N", 33}, {"K", 8}}};
  EXPECT_TRUE(*shape_in_problem(*c, odd));
  EXPECT_FALSE(*shape_is_valid(*c, odd));
  EXPECT_TRUE(*shape_is_valid(*c, even));
  std::string text = to_toml(*c);
  EXPECT_NE(text.find("format = 4\n"), std::string::npos);
  auto again = parse_context(text, "kernel.toml");
  ASSERT_TRUE(again.is_ok()) << again.error() << "\n" << text;
  EXPECT_EQ(again->supports, "K % 8 == 0");
  // A context that gains `supports` is written as format 4; an older format refuses the key.
  KernelContext old = *c;
  old.format = 2;
  EXPECT_NE(to_toml(old).find("format = 4\n"), std::string::npos);
  std::string three = t;
  three.replace(three.find("format = 4"), 10, "format = 3");
  auto bad = parse_context(three, "kernel.toml");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.error().find("'supports' needs format = 4"), std::string::npos) << bad.error();
}

TEST(Context, FormatTwoStillLoadsAndHasNoSuite) {
  auto c = parse_context(kMatmul, "kernel.toml");
  ASSERT_TRUE(c.is_ok()) << c.error();
  EXPECT_EQ(c->format, 2);
  EXPECT_TRUE(c->suite.empty());
  EXPECT_TRUE(suite_for(*c, true).empty());
  EXPECT_NE(to_toml(*c).find("format = 2\n"), std::string::npos);
  // Without `format` a file is format 2.
  std::string t(kMatmul);
  t.erase(0, t.find('\n') + 1);
  auto d = parse_context(t, "kernel.toml");
  ASSERT_TRUE(d.is_ok()) << d.error();
  EXPECT_EQ(d->format, 2);
}

TEST(Context, ShapeSuiteErrors) {
  struct Case {
    std::string text, contains;
  } cases[] = {
      {std::string(kMatmul) + "\n[suite]\nshapes = []\n",
       "[suite] needs kernel context format 3; write 'format = 3'"},
      {with_suite("shapes = [ { name = \"a\", class = \"tall\", M = 1, N = 1, K = 1 } ]\n"),
       "unknown class 'tall' of suite shape 'a' (the classes are square, irregular, large-k, "
       "small-k, small-m, wide, decode, short-rows, long-rows, regular)"},
      {with_suite("shapes = [ { name = \"a\", class = \"square\", M = 1, N = 1 } ]\n"),
       "shape in suite.shapes ('a') gives no value to scalar 'K'"},
      {with_suite("shapes = [ { name = \"a\", class = \"square\", M = 1, N = 1, K = 1 },\n"
                  "  { name = \"a\", class = \"wide\", M = 2, N = 2, K = 2 } ]\n"),
       "duplicate name 'a' in suite.shapes (first at line"},
      {with_suite("shapes = [ { class = \"square\", M = 1, N = 1, K = 1 } ]\n"),
       "missing required key 'name'"},
      {with_suite("shapes = [ { name = \"a\", M = 1, N = 1, K = 1 } ]\n"),
       "missing required key 'class'"},
      {with_suite("shapes = [ { name = \"a\", class = \"square\", M = 1, N = 1, K = 1, Q = 2 } "
                  "]\n"),
       "'Q', which is not a declared scalar"},
      {with_suite("shapes = [ { name = \"a\", class = \"square\", M = 0, N = 1, K = 1 } ]\n"),
       "does not satisfy valid"},
      {with_suite("shape = []\n"), "unknown key 'shape' in [suite]"},
      {with_suite("shapes = { name = \"a\" }\n"), "suite.shapes must be an array of tables"},
  };
  for (const auto& c : cases) {
    std::string e = parse_error_of(c.text);
    EXPECT_EQ(e.rfind("kernel.toml:", 0), 0u) << e;
    EXPECT_NE(e.find(c.contains), std::string::npos) << "expected '" << c.contains << "' in: " << e;
  }
  // The same names in the full and the small suite are allowed: they are separate lists.
  EXPECT_TRUE(parse_context(
      with_suite("shapes = [ { name = \"a\", class = \"square\", M = 8, N = 8, K = 8 } ]\n"
                 "small = [ { name = \"a\", class = \"square\", M = 2, N = 2, K = 2 } ]\n"),
      "kernel.toml"));
}

// fp8 arrays are CUDA's alone: another backend's context with one is refused where it is loaded.
TEST(Context, E4m3ArraysNeedTheCudaBackend) {
  auto toml = [](std::string_view backend) {
    return fmt::format(
        "name = \"k\"\nbackend = \"{}\"\nsource = \"k.src\"\n[[scalars]]\nname = \"N\"\n"
        "[[arrays]]\nname = \"X\"\ndtype = \"e4m3\"\nsize = \"N\"\n"
        "[[arrays]]\nname = \"Y\"\ndtype = \"f32\"\nsize = \"N\"\noutput = true\n",
        backend);
  };
  auto cuda = parse_context(toml("cuda"), "kernel.toml");
  ASSERT_TRUE(cuda.is_ok()) << cuda.error();
  EXPECT_EQ(cuda->arrays[0].dtype, DType::e4m3);
  EXPECT_EQ(*parse_context(to_toml(*cuda), "kernel.toml"), *cuda);
  for (const char* other : {"hip", "hlsl"}) {
    auto r = parse_context(toml(other), "kernel.toml");
    ASSERT_FALSE(r.is_ok()) << other;
    EXPECT_NE(r.error().find("only backend cuda runs"), std::string::npos) << r.error();
  }
}

// The example contexts shipped with peak.
constexpr const char* kExamples[] = {"matmul-cuda-fp32", "matmul-cuda-fp16", "matmul-cuda-bf16",
                                     "matmul-cuda-fp8",  "matmul-hip-fp32",  "matmul-hip-fp16",
                                     "matmul-hlsl-fp32"};

TEST(Context, ExamplesCarryTheShapeSuite) {
  for (const char* e : kExamples) {
    auto c = load_context(std::filesystem::path(PEAK_SOURCE_DIR) / "examples" / e);
    ASSERT_TRUE(c.is_ok()) << c.error();
    // Eight shapes, one or two more squares where the goals name them (8192 for fp16 and bf16).
    EXPECT_GE(c->suite.size(), 8u) << e;
    EXPECT_LE(c->suite.size(), 9u) << e;
    EXPECT_EQ(c->suite_small.size(), c->suite.size()) << e;
    std::set<SuiteClass> classes, small_classes;
    for (const auto& s : c->suite) classes.insert(s.cls);
    for (const auto& s : c->suite_small) small_classes.insert(s.cls);
    std::set<SuiteClass> matmul_classes;
    for (const ClassRule& r : class_rules(*c)) matmul_classes.insert(r.cls);
    EXPECT_EQ(classes, matmul_classes) << e << ": every class of the family's rules";
    EXPECT_EQ(classes, small_classes) << e;
    // The small variant stays small: a CPU device runs each shape in well under a second.
    for (const auto& s : c->suite_small) EXPECT_LE(*shape_flops(*c, s.shape), 1.2e8) << s.name;
    // Every suite shape's label is the class the (matmul default) class rules give it, so that
    // per-class tuning and dispatch group the shapes as the suite's table does.
    ASSERT_FALSE(class_rules(*c).empty()) << e;
    for (const auto* list : {&c->suite, &c->suite_small})
      for (const auto& s : *list) {
        auto cls = classify_shape(*c, s.shape);
        ASSERT_TRUE(cls.is_ok()) << cls.error();
        ASSERT_TRUE(cls->has_value()) << e << " " << s.name;
        EXPECT_EQ(**cls, s.cls) << e << " " << s.name << ": " << to_string(**cls);
      }
  }
}

// Validation covers every class: the validation and hidden shapes of each example hold a shape of
// every class its suite has (by the class rules), at sizes a CPU reference checks quickly, so a
// kernel that dispatches on the shape (a small-M path) is validated on each of its paths.
TEST(Context, ExamplesValidateAShapeOfEveryClass) {
  for (const char* e : kExamples) {
    auto c = load_context(std::filesystem::path(PEAK_SOURCE_DIR) / "examples" / e);
    ASSERT_TRUE(c.is_ok()) << c.error();
    std::set<SuiteClass> suite, checked;
    for (const auto& s : c->suite) suite.insert(s.cls);
    for (const auto* list : {&c->validation_shapes, &c->hidden_shapes})
      for (const Shape& sh : *list) {
        auto cls = classify_shape(*c, sh);
        ASSERT_TRUE(cls.is_ok()) << cls.error();
        if (*cls) checked.insert(**cls);
        EXPECT_LE(*shape_flops(*c, sh), 1.0e9) << e;
      }
    EXPECT_EQ(checked, suite) << e;
  }
}

// The row-kernel examples (families softmax, rmsnorm, layernorm): each loads with the CPU
// reference, carries a suite of real models' rows in every class of its family's rules (each
// shape labelled as the rules classify it, R * N at most 2^28, the small variant at sizes a CPU
// runs in milliseconds), and validates a shape of every class, with rows of 1 and row lengths
// that are no multiple of 4 or 32.
constexpr const char* kRowExamples[] = {"softmax-cuda-fp32", "rmsnorm-cuda-bf16",
                                        "layernorm-cuda-fp32", "softmax-hip-fp32",
                                        "softmax-hlsl-fp32"};

TEST(Context, RowExamplesCarryASuiteOfEveryClass) {
  for (const char* e : kRowExamples) {
    auto c = load_context(std::filesystem::path(PEAK_SOURCE_DIR) / "examples" / e);
    ASSERT_TRUE(c.is_ok()) << c.error();
    EXPECT_EQ(c->reference, ReferenceKind::cpu) << e;
    EXPECT_EQ(c->family, std::string(e).substr(0, std::string(e).find('-'))) << e;
    // The traffic of one launch (bytes, the headline): X in and Y out, the weights once.
    const Shape shape{{{"R", 3}, {"N", 5}}};
    const double element = c->family == "rmsnorm" ? 2 : 4;
    const double columns = c->family == "softmax" ? 0 : c->family == "rmsnorm" ? 1 : 2;
    EXPECT_EQ(*shape_bytes(*c, shape), element * (2 * 15 + columns * 5)) << e;
    EXPECT_EQ(c->reduction, "N") << e;
    EXPECT_GE(c->suite.size(), 16u) << e;
    EXPECT_LE(c->suite.size(), 24u) << e;
    std::set<SuiteClass> rules;
    for (const ClassRule& r : class_rules(*c)) rules.insert(r.cls);
    EXPECT_EQ(rules.size(), 4u) << e;
    for (const auto* list : {&c->suite, &c->suite_small}) {
      std::set<SuiteClass> seen;
      for (const auto& s : *list) {
        auto cls = classify_shape(*c, s.shape);
        ASSERT_TRUE(cls.is_ok()) << cls.error();
        ASSERT_TRUE(cls->has_value()) << e << " " << s.name;
        EXPECT_EQ(**cls, s.cls) << e << " " << s.name << ": " << to_string(**cls);
        seen.insert(s.cls);
        const int64_t elements = s.shape.values.at("R") * s.shape.values.at("N");
        EXPECT_LE(elements, int64_t{1} << (list == &c->suite ? 28 : 21)) << e << " " << s.name;
      }
      // On lavapipe the seed cannot run long rows (examples/softmax-hlsl-fp32/kernel.toml says
      // why): its small suite leaves them out.
      std::set<SuiteClass> want = rules;
      if (c->backend == "hlsl" && list == &c->suite_small) want.erase(SuiteClass::long_rows);
      EXPECT_EQ(seen, want) << e;
    }
    // The suite holds the shapes every row example is compared on.
    std::set<std::pair<int64_t, int64_t>> shapes;
    for (const auto& s : c->suite) shapes.emplace(s.shape.values.at("R"), s.shape.values.at("N"));
    for (auto rn : {std::pair<int64_t, int64_t>{1, 128256},
                    {16, 32000},
                    {32768, 1024},
                    {2048, 50257},
                    {4096, 4096},
                    {65536, 4096},
                    {8192, 8192}})
      EXPECT_TRUE(shapes.count(rn)) << e << " " << rn.first << " x " << rn.second;
  }
}

TEST(Context, RowExamplesValidateAShapeOfEveryClassWithTails) {
  for (const char* e : kRowExamples) {
    auto c = load_context(std::filesystem::path(PEAK_SOURCE_DIR) / "examples" / e);
    ASSERT_TRUE(c.is_ok()) << c.error();
    std::set<SuiteClass> suite, checked;
    for (const auto& s : c->suite) suite.insert(s.cls);
    bool one_row = false, odd_row = false;
    for (const auto* list : {&c->validation_shapes, &c->hidden_shapes})
      for (const Shape& sh : *list) {
        auto cls = classify_shape(*c, sh);
        ASSERT_TRUE(cls.is_ok()) << cls.error();
        if (*cls) checked.insert(**cls);
        EXPECT_LE(sh.values.at("R") * sh.values.at("N"), 4 << 20) << e << " " << sh.text();
        one_row |= sh.values.at("R") == 1;
        odd_row |= sh.values.at("N") % 4 != 0 && sh.values.at("N") > 32;
      }
    if (c->backend == "hlsl") suite.erase(SuiteClass::long_rows);  // not on lavapipe (above)
    EXPECT_EQ(checked, suite) << e;
    EXPECT_TRUE(one_row) << e;
    EXPECT_TRUE(odd_row) << e;
  }
}

// The attention examples (family attention): each loads with the CPU reference, its flops halve
// when causal, its suite of prefill and decode shapes is labelled as the family's rules classify
// it (the small variant too), and validation covers both classes, causal and not, with more
// queries than keys and a KV cache longer than the queries.
TEST(Context, AttentionExamplesCarryASuiteAndValidateBothClasses) {
  for (const char* e : {"attention-cuda-fp16", "attention-cuda-bf16", "attention-hip-fp16",
                        "attention-hlsl-fp32"}) {
    auto c = load_context(std::filesystem::path(PEAK_SOURCE_DIR) / "examples" / e);
    ASSERT_TRUE(c.is_ok()) << c.error();
    EXPECT_EQ(c->reference, ReferenceKind::cpu) << e;
    EXPECT_EQ(c->family, "attention") << e;
    EXPECT_EQ(c->reduction, "SKV") << e;
    Shape shape{{{"B", 2}, {"H", 3}, {"SQ", 5}, {"SKV", 7}, {"D", 64}, {"CAUSAL", 0}}};
    EXPECT_EQ(*shape_flops(*c, shape), 4.0 * 2 * 3 * 5 * 7 * 64) << e;
    shape.values["CAUSAL"] = 1;
    EXPECT_EQ(*shape_flops(*c, shape), 2.0 * 2 * 3 * 5 * 7 * 64) << e;
    const std::set<SuiteClass> both = {SuiteClass::decode, SuiteClass::regular};
    for (const auto* list : {&c->suite, &c->suite_small}) {
      std::set<SuiteClass> seen;
      for (const auto& s : *list) {
        auto cls = classify_shape(*c, s.shape);
        ASSERT_TRUE(cls.is_ok() && cls->has_value()) << e << " " << s.name;
        EXPECT_EQ(**cls, s.cls) << e << " " << s.name;
        seen.insert(s.cls);
      }
      EXPECT_EQ(seen, both) << e;
    }
    std::set<SuiteClass> checked;
    bool causal = false, plain = false, more_queries = false, long_cache = false;
    for (const auto* list : {&c->validation_shapes, &c->hidden_shapes})
      for (const Shape& sh : *list) {
        auto cls = classify_shape(*c, sh);
        ASSERT_TRUE(cls.is_ok() && cls->has_value()) << e << " " << sh.text();
        checked.insert(**cls);
        (sh.values.at("CAUSAL") ? causal : plain) = true;
        more_queries |= sh.values.at("SQ") > sh.values.at("SKV");
        long_cache |= sh.values.at("SKV") > 4 * sh.values.at("SQ");
      }
    EXPECT_EQ(checked, both) << e;
    EXPECT_TRUE(causal && plain && more_queries && long_cache) << e;
  }
}

// The class rules (suite.classes, format 5): tried in order, the first that holds decides; a
// rule without `when` always holds. Without them, family matmul has default rules and other
// families none.
TEST(Context, ClassRulesClassifyShapesAndRoundTrip) {
  auto d = parse_context(with_suite("shapes = [ { name = \"a\", class = \"square\", M = 8, N = 8, "
                                    "K = 8 } ]\n"),
                         "kernel.toml");
  ASSERT_TRUE(d.is_ok()) << d.error();
  EXPECT_TRUE(d->classes.empty());
  auto cls = [&](const KernelContext& c, int64_t m, int64_t n, int64_t k) {
    auto r = classify_shape(c, Shape{{{"M", m}, {"N", n}, {"K", k}}});
    EXPECT_TRUE(r.is_ok()) << r.error();
    return r && *r ? std::string(to_string(**r)) : std::string("none");
  };
  // The matmul defaults on the suite's shapes and on the edges of their rules.
  EXPECT_EQ(cls(*d, 256, 256, 131072), "large-k");
  EXPECT_EQ(cls(*d, 16, 16, 8192), "large-k");
  EXPECT_EQ(cls(*d, 16, 4096, 4096), "small-m");
  EXPECT_EQ(cls(*d, 33, 4096, 4096), "irregular");
  EXPECT_EQ(cls(*d, 16384, 16384, 32), "small-k");
  EXPECT_EQ(cls(*d, 4096, 11008, 4096), "wide");
  EXPECT_EQ(cls(*d, 2048, 2048, 2048), "square");
  EXPECT_EQ(cls(*d, 1024, 2048, 4096), "irregular");
  KernelContext generic = *d;
  generic.family = "";
  EXPECT_TRUE(class_rules(generic).empty());
  EXPECT_EQ(cls(generic, 8, 8, 8), "none");

  std::string t = with_suite(
      "shapes = [ { name = \"a\", class = \"square\", M = 8, N = 8, K = 8 } ]\n"
      "classes = [ { class = \"small-m\", when = \"M < 64\" }, { class = \"wide\", when = "
      "\"N > 2 * A.size / K\" }, { class = \"square\" } ]\n");
  t.replace(t.find("format = 3"), 10, "format = 5");
  auto c = parse_context(t, "kernel.toml");
  ASSERT_TRUE(c.is_ok()) << c.error();
  ASSERT_EQ(c->classes.size(), 3u);
  EXPECT_EQ(c->classes[2].when, "");
  EXPECT_EQ(cls(*c, 16, 4096, 4096), "small-m");
  EXPECT_EQ(cls(*c, 100, 300, 10), "wide");
  EXPECT_EQ(cls(*c, 100, 100, 100), "square");
  EXPECT_EQ(cls(*c, 256, 256, 131072), "square");  // its own rules replace the defaults
  std::string text = to_toml(*c);
  EXPECT_NE(text.find("format = 5\n"), std::string::npos) << text;
  auto again = parse_context(text, "kernel.toml");
  ASSERT_TRUE(again.is_ok()) << again.error() << "\n" << text;
  EXPECT_EQ(again->classes, c->classes);
  EXPECT_EQ(to_toml(*again), text);
  // A context that gains class rules is written as format 5.
  KernelContext older = *c;
  older.format = 3;
  EXPECT_NE(to_toml(older).find("format = 5\n"), std::string::npos);
}

TEST(Context, ClassRuleErrors) {
  auto five = [](const std::string& classes) {
    std::string t = with_suite(
        "shapes = [ { name = \"a\", class = \"square\", M = 8, N = 8, K = 8 } ]\n" + classes);
    t.replace(t.find("format = 3"), 10, "format = 5");
    return t;
  };
  struct Case {
    std::string text, says;
  } cases[] = {
      {with_suite("shapes = []\nclasses = [ { class = \"square\" } ]\n"),
       "suite.classes needs format = 5 (this file is format 3)"},
      {five("classes = [ { class = \"tall\" } ]\n"), "unknown class 'tall' in suite.classes"},
      {five("classes = [ { class = \"square\", when = \"Q > 1\" } ]\n"), "Q"},
      {five("classes = [ { class = \"square\", when = \"M >\" } ]\n"), "suite.classes (square)"},
      {five("classes = [ { when = \"M > 1\" } ]\n"), "class"},
      {five("classes = [ { class = \"square\", if = \"M > 1\" } ]\n"),
       "unknown key 'if' in an entry of suite.classes"},
      {five("classes = []\n"), "suite.classes is empty"},
      {five("classes = \"square\"\n"), "suite.classes must be an array of tables"},
  };
  for (const auto& c : cases) {
    auto r = parse_context(c.text, "kernel.toml");
    ASSERT_FALSE(r.is_ok()) << c.says;
    EXPECT_NE(r.error().find(c.says), std::string::npos) << r.error();
    EXPECT_NE(r.error().find("kernel.toml:"), std::string::npos) << r.error();
  }
}

TEST(Context, ShapesAsArraysOfTables) {
  auto c = parse_context(R"(name = "x"
backend = "hip"
source = "k.cpp"
[[arrays]]
name = "o"
dtype = "f16"
size = "n"
output = true
[[scalars]]
name = "n"
[[shapes.bench]]
n = 4
[[shapes.bench]]
n = 8
)",
                         "k.toml");
  ASSERT_TRUE(c.is_ok()) << c.error();
  ASSERT_EQ(c->bench_shapes.size(), 2u);
  EXPECT_EQ(c->bench_shapes[1].values.at("n"), 8);
}

TEST(Context, LoadContextFromDirectory) {
  auto dir = make_temp_dir("peak-ctx-test");
  ASSERT_TRUE(dir.is_ok());
  ASSERT_TRUE(write_file(*dir / "kernel.toml", kMatmul).is_ok());
  auto missing = load_context(*dir);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.error().find("kernel.hlsl"), std::string::npos);
  ASSERT_TRUE(write_file(*dir / "kernel.hlsl", "// peak:begin macros\n").is_ok());
  auto ok = load_context(*dir);
  ASSERT_TRUE(ok.is_ok()) << ok.error();
  EXPECT_EQ(ok->dir, *dir);
  auto by_file = load_context(*dir / "kernel.toml");
  ASSERT_TRUE(by_file.is_ok());
  EXPECT_EQ(by_file->name, "matmul-hlsl-fp32");
  auto none = load_context(*dir / "nothing");
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.error().find("no such file"), std::string::npos);
  std::filesystem::remove_all(*dir);
}

// ---- Regions ----

constexpr std::string_view kSource =
    "#include <cuda.h>\n"
    "// peak:begin macros\n"
    "#define TILE 16\n"
    "// peak:end macros\n"
    "\n"
    "// peak:begin device\n"
    "__global__ void k() {}\n"
    "// peak:end device\n"
    "// peak:begin host\n"
    "void launch() {}\n"
    "int x;\n"
    "// peak:end host\n"
    "// trailing fixed text\n";

TEST(Regions, SplitsAndJoinsByteForByte) {
  auto r = split_regions(kSource, "kernel.cu");
  ASSERT_TRUE(r.is_ok()) << r.error();
  EXPECT_EQ(r->before, "#include <cuda.h>\n// peak:begin macros\n");
  EXPECT_EQ(r->macros, "#define TILE 16\n");
  EXPECT_EQ(r->between_macros_device, "// peak:end macros\n\n// peak:begin device\n");
  EXPECT_EQ(r->get(Region::device), "__global__ void k() {}\n");
  EXPECT_EQ(r->host, "void launch() {}\nint x;\n");
  EXPECT_EQ(r->after, "// peak:end host\n// trailing fixed text\n");
  EXPECT_EQ(join_regions(*r), kSource);
}

TEST(Regions, RoundTripWithCrlfTrailingSpacesAndEmptyRegions) {
  const std::string src =
      "// peak:begin macros  \r\n"
      "// peak:end macros\r\n"
      "\t// peak:begin device\t\r\n"
      "x\r\n"
      "// peak:end device \n"
      "// peak:begin host\n"
      "// peak:end host";  // no final newline
  auto r = split_regions(src, "k.hlsl");
  ASSERT_TRUE(r.is_ok()) << r.error();
  EXPECT_EQ(r->macros, "");
  EXPECT_EQ(r->device, "x\r\n");
  EXPECT_EQ(r->host, "");
  EXPECT_EQ(r->after, "// peak:end host");
  EXPECT_EQ(join_regions(*r), src);
}

TEST(Regions, ReplacingARegionKeepsTheRest) {
  auto r = split_regions(kSource, "kernel.cu");
  ASSERT_TRUE(r.is_ok());
  r->get(Region::device) = "__global__ void k2() {}";  // no trailing newline: join adds one
  std::string joined = join_regions(*r);
  auto again = split_regions(joined, "kernel.cu");
  ASSERT_TRUE(again.is_ok()) << again.error();
  EXPECT_EQ(again->device, "__global__ void k2() {}\n");
  EXPECT_EQ(again->macros, r->macros);
  EXPECT_EQ(again->host, r->host);
  EXPECT_EQ(again->after, r->after);
}

TEST(Regions, Errors) {
  auto err = [](std::string_view src) {
    auto r = split_regions(src, "kernel.cu");
    EXPECT_FALSE(r.is_ok()) << src;
    return r.is_ok() ? std::string() : r.error();
  };
  EXPECT_EQ(
      err("// peak:begin macros\n// peak:end macros\n// peak:begin device\n// peak:end device\n"),
      "kernel.cu: no '// peak:begin host' marker; every source needs the three regions "
      "macros, device and host, in that order");
  EXPECT_EQ(err("int x;\n"),
            "kernel.cu: no '// peak:begin macros' marker; every source needs the three regions "
            "macros, device and host, in that order");
  EXPECT_EQ(err("// peak:begin macros\n// peak:end macros\n// peak:begin device\n// peak:end "
                "device\n// peak:begin device\n"),
            "kernel.cu:5: region 'device' is opened twice (first at line 3)");
  EXPECT_EQ(err("// peak:begin device\n// peak:end device\n"),
            "kernel.cu:1: region 'device' comes before region 'macros'; every source needs the "
            "three regions macros, device and host, in that order");
  EXPECT_EQ(err("// peak:begin macros\n// peak:end macros\n// peak:begin host\n"),
            "kernel.cu:3: region 'host' comes before region 'device'; every source needs the "
            "three regions macros, device and host, in that order");
  EXPECT_EQ(err("// peak:begin macros\n// peak:begin device\n"),
            "kernel.cu:2: region 'device' is opened inside region 'macros'; close 'macros' with "
            "'// peak:end macros' first");
  EXPECT_EQ(
      err("// peak:end macros\n"),
      "kernel.cu:1: '// peak:end macros' without a matching '// peak:begin macros' before it");
  EXPECT_EQ(err("// peak:begin macros\n// peak:end macros\n// peak:end macros\n"),
            "kernel.cu:3: region 'macros' is closed twice (first at line 2)");
  EXPECT_EQ(
      err("// peak:begin macros\nx\n"),
      "kernel.cu:1: region 'macros' opened here is never closed (no '// peak:end macros' marker)");
  EXPECT_EQ(err("// peak:begin kernel\n"),
            "kernel.cu:1: unknown region 'kernel' in a peak marker (regions are macros, device and "
            "host)");
}

TEST(Regions, MarkerTextInsideOtherLinesIsNotAMarker) {
  std::string src(kSource);
  src.insert(src.find("int x;"), "printf(\"// peak:begin device\");\n// peak:beginning\n");
  auto r = split_regions(src, "kernel.cu");
  ASSERT_TRUE(r.is_ok()) << r.error();
  EXPECT_NE(r->host.find("printf"), std::string::npos);
  EXPECT_EQ(join_regions(*r), src);
}

}  // namespace
}  // namespace peak
