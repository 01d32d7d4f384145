// The transformation library and sequences shipped with peak: every file parses, every pass
// renders for every backend, and the rendered prompts match the golden files under
// src/transform/testdata/library/ (PEAK_UPDATE_GOLDEN=1 rewrites them after an intended change).
#include <set>

#include <gtest/gtest.h>

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

std::string fmt_pass_header(int index) {
  return "######## pass " + std::to_string(index) + "\n";
}

std::vector<Transformation> library() {
  auto lib = load_library(std::string(PEAK_SOURCE_DIR) + "/transformations");
  EXPECT_TRUE(lib.is_ok()) << lib.error();
  return lib.is_ok() ? *lib : std::vector<Transformation>{};
}

// Every pass of `t` for `backend`, as the workspace would render it on an H100 (device notes
// for "H100" apply), the context as the transformation leaves it.
std::string render_all_passes(const Transformation& t, const std::string& backend) {
  KernelContext ctx = transformed_context(t, testing::matmul_context());
  ctx.backend = backend;
  SourceRegions src = testing::matmul_source();
  if (backend == "hlsl") {
    auto r = split_regions(kHlslSource, "kernel.hlsl");
    EXPECT_TRUE(r.is_ok()) << r.error();
    if (r.is_ok()) src = *r;
  }
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
