// The transformation library and sequences shipped with peak: every file parses, every pass
// renders for every backend, and the rendered prompts match the golden files under
// src/transform/testdata/library/ (PEAK_UPDATE_GOLDEN=1 rewrites them after an intended change).
#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include "context/context.h"
#include "transform/prompt.h"
#include "transform/testing.h"
#include "transform/transformation.h"
#include "util/fs.h"

namespace peak {
namespace {

using testing::expect_golden;

const char* kHlslSource =
    "[[vk::binding(0, 0)]] StructuredBuffer<float> A;\n"
    "[[vk::binding(1, 0)]] StructuredBuffer<float> B;\n"
    "[[vk::binding(2, 0)]] RWStructuredBuffer<float> C;\n"
    "[[vk::binding(3, 0)]] cbuffer Scalars { int M; int N; int K; };\n"
    "// peak:begin macros\n"
    "// peak:end macros\n"
    "// peak:begin device\n"
    "[numthreads(BLOCK_X, BLOCK_Y, 1)]\n"
    "void main(uint3 tid : SV_DispatchThreadID) {\n"
    "  int col = (int)tid.x, row = (int)tid.y;\n"
    "  if (row >= M || col >= N) return;\n"
    "  float acc = 0.0f;\n"
    "  for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];\n"
    "  C[row * N + col] = acc;\n"
    "}\n"
    "// peak:end device\n"
    "// peak:begin host\n"
    "launch main\n"
    "  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y))\n"
    "// peak:end host\n";

// The softmax seed in HLSL, for the row transformations' HLSL prompts.
const char* kHlslSoftmaxSource =
    "[[vk::binding(0, 0)]] StructuredBuffer<float> X;\n"
    "[[vk::binding(1, 0)]] RWStructuredBuffer<float> Y;\n"
    "[[vk::binding(2, 0)]] cbuffer Scalars { int R; int N; };\n"
    "// peak:begin macros\n"
    "// peak:end macros\n"
    "// peak:begin device\n"
    "[numthreads(BLOCK, 1, 1)]\n"
    "void softmax(uint3 tid : SV_DispatchThreadID) {\n"
    "  int r = (int)tid.x;\n"
    "  if (r >= R) return;\n"
    "  float m = X[r * N];\n"
    "  for (int c = 1; c < N; ++c) m = max(m, X[r * N + c]);\n"
    "  float s = 0.0f;\n"
    "  for (int c = 0; c < N; ++c) s += exp(X[r * N + c] - m);\n"
    "  for (int c = 0; c < N; ++c) Y[r * N + c] = exp(X[r * N + c] - m) / s;\n"
    "}\n"
    "// peak:end device\n"
    "// peak:begin host\n"
    "launch softmax\n"
    "  grid = (ceil_div(R, BLOCK))\n"
    "// peak:end host\n";

std::string fmt_pass_header(int index) { return "######## pass " + std::to_string(index) + "\n"; }

std::vector<Transformation> library() {
  auto lib = load_library(std::string(PEAK_SOURCE_DIR) + "/transformations");
  EXPECT_TRUE(lib.is_ok()) << lib.error();
  return lib.is_ok() ? *lib : std::vector<Transformation>{};
}

// The seed of examples/attention-BACKEND-* (HIP: CUDA's) as the context and source of the
// attention transformations' prompts.
std::pair<KernelContext, SourceRegions> attention_seed(const std::string& backend) {
  const std::string dir = std::string(PEAK_SOURCE_DIR) + "/examples/attention-" +
                          (backend == "hlsl" ? "hlsl-fp32" : "cuda-fp16");
  auto ctx = load_context(dir);
  EXPECT_TRUE(ctx.is_ok()) << ctx.error();
  if (!ctx.is_ok()) return {};
  auto text = read_file(ctx->dir / ctx->source_file);
  EXPECT_TRUE(text.is_ok()) << text.error();
  auto src = split_regions(text.is_ok() ? *text : "", ctx->source_file);
  EXPECT_TRUE(src.is_ok()) << src.error();
  return {*ctx, src.is_ok() ? *src : SourceRegions{}};
}

// Every pass of `t` for `backend`, as the workspace would render it on an H100 (device notes
// for "H100" apply), the context as the transformation leaves it: the matmul seed for the
// transformations that suit matmul, the attention examples' seeds for attention's, the softmax
// seed for those of the row families.
std::string render_all_passes(const Transformation& t, const std::string& backend) {
  const bool matmul = t.suits_family("matmul");
  KernelContext ctx;
  SourceRegions src;
  if (t.suits_family("attention")) {
    std::tie(ctx, src) = attention_seed(backend);
    ctx = transformed_context(t, ctx);
  } else {
    ctx = transformed_context(t, matmul ? testing::matmul_context() : testing::softmax_context());
    src = matmul ? testing::matmul_source() : testing::softmax_source();
    if (backend == "hlsl") {
      auto r = split_regions(matmul ? kHlslSource : kHlslSoftmaxSource, "kernel.hlsl");
      EXPECT_TRUE(r.is_ok()) << r.error();
      if (r.is_ok()) src = *r;
    }
  }
  ctx.backend = backend;
  std::string out;
  for (const auto& pass : t.passes) {
    PromptInput in;
    in.transformation = &t;
    in.pass_index = pass.index;
    in.context = &ctx;
    in.source = &src;
    in.backend = backend;
    in.device_facts = {{"name", "NVIDIA H100 80GB HBM3"}, {"subgroup (warp) size", "32"}};
    in.device_name = "NVIDIA H100 80GB HBM3";
    in.device_arch = "sm_90a";  // shown only by transformations with `requires`
    in.plan_reference = "The host region is a launch plan (reference text for the tests).\n";
    Prompt p = build_prompt(in);
    out += fmt_pass_header(pass.index) + p.user;  // the system prompt has goldens of its own
  }
  return out;
}

TEST(ShippedLibrary, EveryTransformationRendersItsGoldenPromptsPerBackend) {
  auto lib = library();
  ASSERT_GE(lib.size(), 13u);
  for (const auto& t : lib)
    for (const std::string backend : {"cuda", "hip", "hlsl"}) {
      if (!t.supports(backend)) continue;
      SCOPED_TRACE(t.name + " / " + backend);
      expect_golden("library/" + t.name + "." + backend + ".txt", render_all_passes(t, backend));
    }
}

// Every shipped transformation says which families it is written for: the folder's.
TEST(ShippedLibrary, EachFolderNamesItsFamilies) {
  const std::set<std::string> rows = {"softmax", "rmsnorm", "layernorm"};
  size_t row_count = 0;
  for (const auto& t : library()) {
    SCOPED_TRACE(t.name);
    const std::string folder = t.path.parent_path().filename().string();
    ASSERT_FALSE(t.families.empty());
    if (folder == "matmul") {
      EXPECT_EQ(t.families, std::vector<std::string>{"matmul"});
    }
    if (folder != "rows") continue;
    ++row_count;
    for (const auto& f : t.families) EXPECT_TRUE(rows.count(f)) << f;
    // Written for every backend, but for a step that needs an architecture's feature
    // (`requires`: thread-block clusters), which is CUDA's alone, and one that compiles a kernel
    // per row length from a function template, which glslang's HLSL front end does not compile.
    const bool templates = t.name == "sized-instances";
    for (const std::string backend : {"cuda", "hip", "hlsl"})
      EXPECT_EQ(t.supports(backend),
                (t.required_arch.empty() || backend == "cuda") && !(templates && backend == "hlsl"))
          << backend;
  }
  EXPECT_GE(row_count, 8u);
}

// Every step of every shipped sequence names a transformation of the library that supports the
// sequence's backend (a word of its name), and all its steps suit one family at least.
// (Which family's context a sequence is meant for is not written in it: the family of each
// step is checked against a context where a run or a campaign starts.)
TEST(ShippedLibrary, EverySequenceNamesTransformationsOfOneFamily) {
  const auto lib = library();
  size_t count = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(PEAK_SOURCE_DIR) + "/sequences")) {
    if (e.path().extension() != ".toml") continue;
    ++count;
    SCOPED_TRACE(e.path().filename().string());
    auto seq = load_sequence(e.path());
    ASSERT_TRUE(seq) << seq.error();
    std::string backend;  // "softmax-hip" and "hip-fp32" are for HIP
    const std::string stem = "-" + e.path().stem().string() + "-";
    for (const char* b : {"cuda", "hip", "hlsl"})
      if (stem.find(std::string("-") + b + "-") != std::string::npos) backend = b;
    std::set<std::string> families = {"matmul", "softmax", "rmsnorm", "layernorm", "attention"};
    for (const auto& st : seq->steps) {
      auto t = find_transformation(lib, st.transformation);
      ASSERT_TRUE(t) << t.error();
      if (!backend.empty()) {
        EXPECT_TRUE(t->supports(backend)) << st.transformation;
      }
      std::erase_if(families, [&](const std::string& f) { return !t->suits_family(f); });
    }
    EXPECT_FALSE(families.empty()) << "no family suits every step";
  }
  EXPECT_GE(count, 12u);
}

TEST(ShippedLibrary, HelpersAreInsertedOncePerBackend) {
  for (const auto& t : library()) {
    for (const auto& h : t.helpers) {
      EXPECT_FALSE(h.code.empty()) << t.name << " helper " << h.name;
      // The pass text names every helper it inserts, so that the model knows to keep and call it.
      std::string text;
      for (const auto& p : t.passes) text += p.instruction;
      for (const auto& [backend, table] : t.translations)
        for (const auto& [phrase, spelling] : table) text += spelling;
      EXPECT_NE(text.find(h.name), std::string::npos) << t.name << " never names " << h.name;
    }
  }
}

}  // namespace
}  // namespace peak
