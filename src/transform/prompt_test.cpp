#include "transform/prompt.h"

#include <gtest/gtest.h>

#include "transform/testing.h"
#include "util/sha256.h"

namespace peak {
namespace {

using testing::expect_golden;
using testing::matmul_context;
using testing::matmul_source;

const char* kTiling = R"MD(+++
format = 1
name = "tb-tiling"
version = 3
title = "Thread-block tiling through shared memory"
backends = ["cuda", "hlsl"]

[[tuning]]
name = "TILE_K"
values = [8, 16, 32]
default = 16

[translations.cuda]
"barrier" = "__syncthreads()"
"shared memory" = "__shared__ arrays | sized at compile time"

[translations.hlsl]
"barrier" = "GroupMemoryBarrierWithGroupSync()"

[devices."H100"]
note = "Static shared memory is limited to 48 KiB per block."

[devices."llvmpipe"]
note = "A CPU device."
+++
Stage tiles of A and B through shared memory.

## Pass 1: macros
Define BLOCK_TILE_M and BLOCK_TILE_N.

## Pass 2: device
Load tiles into shared memory, then wait at a barrier.

## Pass 3: host
Fix the launch grid.
)MD";

Transformation tiling() {
  auto t = parse_transformation(kTiling, "tb-tiling.md");
  EXPECT_TRUE(t.is_ok()) << t.error();
  return t.is_ok() ? *t : Transformation{};
}

struct Fixture {
  Transformation tr = tiling();
  KernelContext ctx = matmul_context();
  SourceRegions src = matmul_source();
  PromptInput input() const {
    PromptInput in;
    in.transformation = &tr;
    in.pass_index = 2;
    in.context = &ctx;
    in.source = &src;
    in.backend = "cuda";
    in.backend_translation = {{"barrier", "__syncthreads"},
                              {"thread index within the block", "threadIdx"},
                              {"block index", "blockIdx"}};
    in.device_facts = {{"Name", "NVIDIA H100 80GB HBM3"},
                       {"Subgroup size", "32"},
                       {"Shared memory per block", "48 KiB"},
                       {"Empty fact", ""}};
    in.device_name = "NVIDIA H100 80GB HBM3";
    in.plan_reference = "The host region is a launch plan (reference text for the tests).\n";
    in.extra_instructions = "Prefer float4 loads where aligned.";
    in.feedback = "compile_failed: matmul.cu(12): error: identifier \"TILE\" is undefined";
    return in;
  }
};

TEST(Prompt, GoldenCudaDevicePass) {
  Fixture f;
  Prompt p = build_prompt(f.input());
  expect_golden("prompt_golden_1.txt", "=== system ===\n" + p.system + "=== user ===\n" + p.user);
}

TEST(Prompt, GoldenHlslMacrosPassMinimal) {
  Fixture f;
  f.ctx.backend = "hlsl";
  f.ctx.tuning_valid = "";
  auto src = split_regions(
      "RWStructuredBuffer<float> A : register(u0);\n"
      "// peak:begin macros\n"
      "#define UNUSED 1\n"
      "// peak:end macros\n"
      "// peak:begin device\n"
      "[numthreads(BLOCK_X, BLOCK_Y, 1)]\n"
      "void main(uint3 id : SV_DispatchThreadID) { }\n"
      "// peak:end device\n"
      "// peak:begin host\n"
      "// peak:end host\n",
      "matmul.hlsl");
  ASSERT_TRUE(src.is_ok()) << src.error();
  f.src = *src;
  PromptInput in = f.input();
  in.pass_index = 1;
  in.backend = "hlsl";
  in.backend_translation.clear();
  in.device_facts.clear();
  in.device_name = "AMD Radeon";
  in.extra_instructions = "  ";
  in.feedback = "";
  Prompt p = build_prompt(in);
  expect_golden("prompt_golden_2.txt", "=== system ===\n" + p.system + "=== user ===\n" + p.user);
}

TEST(Prompt, DeterministicAndKeyed) {
  Fixture f;
  Prompt a = build_prompt(f.input());
  Fixture g;  // separately built, equal inputs
  Prompt b = build_prompt(g.input());
  EXPECT_EQ(a.system, b.system);
  EXPECT_EQ(a.user, b.user);
  EXPECT_EQ(a.key(), b.key());
  std::string joined = a.system;
  joined.push_back('\0');
  joined += a.user;
  EXPECT_EQ(a.key(), sha256_hex(joined));
  EXPECT_NE(a.key(), sha256_hex(a.system + a.user));
  EXPECT_EQ(a.key().size(), 64u);

  PromptInput in = f.input();
  in.feedback = "something else";
  EXPECT_NE(build_prompt(in).key(), a.key());
  in = f.input();
  in.pass_index = 3;
  EXPECT_NE(build_prompt(in).key(), a.key());
}

TEST(Prompt, HiddenAndSmallShapesNeverAppear) {
  Fixture f;
  for (int pass = 1; pass <= 3; ++pass) {
    PromptInput in = f.input();
    in.pass_index = pass;
    Prompt p = build_prompt(in);
    for (const Shape& s : f.ctx.hidden_shapes) {
      for (const auto& [k, v] : s.values) {
        EXPECT_EQ(p.user.find(std::to_string(v)), std::string::npos) << k << "=" << v;
        EXPECT_EQ(p.system.find(std::to_string(v)), std::string::npos) << k << "=" << v;
      }
    }
    for (const Shape& s : f.ctx.small_shapes)
      for (const auto& [k, v] : s.values)
        EXPECT_EQ(p.user.find(std::to_string(v)), std::string::npos) << k << "=" << v;
    // Bench and validation shapes are shown, each once.
    EXPECT_NE(p.user.find("  - K=2048 M=2048 N=2048\n"), std::string::npos);
    EXPECT_NE(p.user.find("  - K=4096 M=4096 N=4096\n"), std::string::npos);
    EXPECT_NE(p.user.find("  - K=300 M=1000 N=1200\n"), std::string::npos);
    EXPECT_EQ(p.user.find("K=2048 M=2048 N=2048"), p.user.rfind("K=2048 M=2048 N=2048"));
  }
  // A validation shape that is also hidden stays hidden.
  f.ctx.validation_shapes.push_back(f.ctx.hidden_shapes[0]);
  Prompt p = build_prompt(f.input());
  EXPECT_EQ(p.user.find("777"), std::string::npos);
}

// The shape suite (`peak bench`) is measurement, not specification: no prompt shows its shapes,
// names or classes, whichever pass, and the example shapes stay the bench and validation ones.
TEST(Prompt, ShapeSuiteNeverAppears) {
  Fixture f;
  auto suite_shape = [](const char* name, SuiteClass c, int64_t m, int64_t n, int64_t k) {
    return SuiteShape{name, c, Shape{{{"M", m}, {"N", n}, {"K", k}}}};
  };
  f.ctx.suite = {suite_shape("square-2048", SuiteClass::square, 2048, 2048, 2048),
                 suite_shape("odd-8205-5921-2949", SuiteClass::irregular, 8205, 5921, 2949),
                 suite_shape("llm-4096-11008-4096", SuiteClass::wide, 4096, 11008, 4096),
                 suite_shape("large-k-128k", SuiteClass::large_k, 256, 256, 131072),
                 suite_shape("decode-m16", SuiteClass::small_m, 16, 4096, 4096)};
  f.ctx.suite_small = {suite_shape("odd-257-185-93", SuiteClass::irregular, 257, 185, 93)};
  Fixture plain;
  for (int pass = 1; pass <= 3; ++pass) {
    PromptInput in = f.input();
    in.pass_index = pass;
    Prompt p = build_prompt(in);
    PromptInput without = plain.input();
    without.pass_index = pass;
    EXPECT_EQ(p.user, build_prompt(without).user) << "pass " << pass;
    EXPECT_EQ(p.system, build_prompt(without).system) << "pass " << pass;
    for (const char* word :
         {"8205", "5921", "2949", "11008", "131072", "odd-257", "suite", "decode-m16", "large-k"}) {
      EXPECT_EQ(p.user.find(word), std::string::npos) << word;
      EXPECT_EQ(p.system.find(word), std::string::npos) << word;
    }
  }
}

TEST(Prompt, SectionsInOrder) {
  Fixture f;
  Prompt p = build_prompt(f.input());
  const std::vector<std::string> order = {
      "# Transformation: Thread-block tiling through shared memory (tb-tiling v3)\n",
      "Stage tiles of A and B through shared memory.\n",
      "## This pass (2 of 3): edit the device region\n",
      "Load tiles into shared memory, then wait at a barrier.\n",
      "## Device-specific notes\n",
      "## Additional instructions\n",
      "## Backend vocabulary (cuda)\n",
      "## Device\n",
      "## Kernel context\n",
      "## The launch plan (host region)\n",
      "## Current source\n",
      "## The previous attempt failed\n",
      "compile_failed: matmul.cu(12)",
      "Reply with exactly one fenced code block holding the complete new text of the device "
      "region"};
  size_t pos = 0;
  for (const auto& s : order) {
    size_t at = p.user.find(s, pos);
    ASSERT_NE(at, std::string::npos) << "missing or out of order: " << s;
    pos = at + s.size();
  }
  // The reminder is the last line.
  EXPECT_EQ(p.user.back(), '\n');
  EXPECT_EQ(p.user.find('\n', pos), p.user.size() - 1);
}

TEST(Prompt, OptionalSectionsAreOmitted) {
  Fixture f;
  PromptInput in = f.input();
  in.device_name = "Some GPU";
  in.extra_instructions = "";
  in.feedback = "  \n";
  in.device_facts.clear();
  in.backend_translation.clear();
  in.backend = "hip";  // the transformation has no table for hip either
  Prompt p = build_prompt(in);
  EXPECT_EQ(p.user.find("## Device-specific notes"), std::string::npos);
  EXPECT_EQ(p.user.find("## Additional instructions"), std::string::npos);
  EXPECT_EQ(p.user.find("## The previous attempt failed"), std::string::npos);
  EXPECT_EQ(p.user.find("## Backend vocabulary"), std::string::npos);
  EXPECT_EQ(p.user.find("## Device\n"), std::string::npos);
  EXPECT_NE(p.user.find("## Kernel context"), std::string::npos);
}

// `requires` adds one line under the title, with the device's architecture; a transformation
// without it renders exactly as before (its recordings keep their keys).
TEST(Prompt, RequiresLineOnlyWhenTheTransformationHasOne) {
  Fixture f;
  PromptInput in = f.input();
  const Prompt before = build_prompt(in);
  in.device_arch = "sm_90a";
  const Prompt without = build_prompt(in);
  EXPECT_EQ(without.user, before.user);
  EXPECT_EQ(without.key(), before.key());
  EXPECT_EQ(without.user.find("Requires:"), std::string::npos);

  f.tr.required_arch = "sm_90a";
  const Prompt with = build_prompt(in);
  EXPECT_NE(with.user.find("# Transformation: Thread-block tiling through shared memory "
                           "(tb-tiling v3)\n\nRequires: sm_90a (this device: sm_90a)\n\nStage "
                           "tiles of A and B"),
            std::string::npos)
      << with.user;
  EXPECT_NE(with.key(), before.key());
  in.device_arch = "";
  EXPECT_NE(build_prompt(in).user.find("Requires: sm_90a (this device: unknown)\n"),
            std::string::npos);
}

TEST(Prompt, HostPassesTeachTheWholePlanOthersSummarizeIt) {
  Fixture f;
  PromptInput in = f.input();
  in.pass_index = 3;
  Prompt host = build_prompt(in);
  EXPECT_NE(host.user.find("reference text for the tests"), std::string::npos);
  in.pass_index = 2;
  Prompt device = build_prompt(in);
  EXPECT_EQ(device.user.find("reference text for the tests"), std::string::npos);
  EXPECT_NE(device.user.find("must keep matching the plan's `args`"), std::string::npos);
  in.plan_reference.clear();
  EXPECT_EQ(build_prompt(in).user.find("## The launch plan"), std::string::npos);
}

TEST(Prompt, SystemPromptStatesTheRules) {
  Fixture f;
  Prompt p = build_prompt(f.input());
  EXPECT_NE(p.system.find("expert GPU performance engineer"), std::string::npos);
  EXPECT_NE(p.system.find("Edit ONLY the device region"), std::string::npos);
  EXPECT_NE(p.system.find("(here: BLOCK_X, BLOCK_Y, TILE_K)"), std::string::npos);
  EXPECT_NE(p.system.find("never #define"), std::string::npos);
  EXPECT_NE(p.system.find("not multiples of any tile size"), std::string::npos);
  EXPECT_NE(p.system.find("exactly one fenced code block containing the complete new text of the "
                          "device region"),
            std::string::npos);
  PromptInput in = f.input();
  in.pass_index = 3;
  EXPECT_NE(build_prompt(in).system.find("Edit ONLY the host region"), std::string::npos);
}

TEST(Prompt, VocabularyMergedSortedAndOverridden) {
  Fixture f;
  Prompt p = build_prompt(f.input());
  // The transformation's cuda entry overrides the backend's; pipes are escaped.
  EXPECT_NE(p.user.find("| barrier | __syncthreads() |\n"), std::string::npos);
  EXPECT_EQ(p.user.find("| barrier | __syncthreads |\n"), std::string::npos);
  EXPECT_NE(p.user.find("| shared memory | __shared__ arrays \\| sized at compile time |\n"),
            std::string::npos);
  size_t a = p.user.find("| barrier |"), b = p.user.find("| block index |"),
         c = p.user.find("| shared memory |"), d = p.user.find("| thread index within the block |");
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  EXPECT_LT(c, d);
  EXPECT_EQ(p.user.find("GroupMemoryBarrierWithGroupSync"), std::string::npos);
}

TEST(Prompt, DeviceNotesMatchBySubstring) {
  Fixture f;
  PromptInput in = f.input();
  in.device_name = "nvidia h100 pcie";  // case does not matter
  Prompt p = build_prompt(in);
  EXPECT_NE(p.user.find("Static shared memory is limited to 48 KiB per block."), std::string::npos);
  EXPECT_EQ(p.user.find("A CPU device."), std::string::npos);
  in.device_name = "llvmpipe (LLVM 15.0.6, 256 bits)";
  p = build_prompt(in);
  EXPECT_EQ(p.user.find("48 KiB per block"), std::string::npos);
  EXPECT_NE(p.user.find("A CPU device."), std::string::npos);
}

TEST(Prompt, SourceShownWholeWithTheTargetFlagged) {
  Fixture f;
  for (int pass = 1; pass <= 3; ++pass) {
    PromptInput in = f.input();
    in.pass_index = pass;
    Prompt p = build_prompt(in);
    const std::string region(to_string(f.tr.passes[static_cast<size_t>(pass - 1)].region));
    const std::string flagged = "<<< EDIT THIS REGION >>>\n// peak:begin " + region + "\n";
    size_t at = p.user.find(flagged);
    ASSERT_NE(at, std::string::npos) << region;
    // The flag line appears once (besides its mention in the explanation).
    EXPECT_EQ(p.user.find("<<< EDIT THIS REGION >>>\n"), at);
    EXPECT_EQ(p.user.rfind("<<< EDIT THIS REGION >>>\n"), at);
    // Without the flag line, the fenced source is the file itself.
    std::string shown = p.user;
    shown.erase(at, std::string("<<< EDIT THIS REGION >>>\n").size());
    EXPECT_NE(shown.find("```cuda\n" + std::string(testing::kMatmulSource) + "```\n"),
              std::string::npos);
  }
}

TEST(Prompt, FenceOutgrowsBackticksInTheSource) {
  Fixture f;
  f.src.device = "// a comment with ```` four backticks\n" + f.src.device;
  Prompt p = build_prompt(f.input());
  EXPECT_NE(p.user.find("`````cuda\n"), std::string::npos);
}

TEST(Prompt, TuningParametersOfContextAndTransformation) {
  Fixture f;
  Prompt p = build_prompt(f.input());
  EXPECT_NE(p.user.find("  - BLOCK_X: values 8, 16, 32 (default 16)\n"), std::string::npos);
  EXPECT_NE(p.user.find("  - TILE_K: values 8, 16, 32 (default 16); introduced by this "
                        "transformation\n"),
            std::string::npos);
  // A parameter the context already has (merged by the caller) is listed once, with the
  // context's values, and still marked as this transformation's.
  f.ctx.tuning.push_back({"TILE_K", {32}, 32});
  p = build_prompt(f.input());
  EXPECT_NE(p.user.find("  - TILE_K: values 32 (default 32); introduced by this transformation\n"),
            std::string::npos);
  EXPECT_EQ(p.user.find("TILE_K: values 8"), std::string::npos);
  EXPECT_EQ(p.system.find("TILE_K, TILE_K"), std::string::npos);
}

TEST(Prompt, LaterPassesAreAnnounced) {
  Fixture f;
  PromptInput in = f.input();
  in.pass_index = 1;
  EXPECT_NE(build_prompt(in).user.find("Passes still to come: 2 (device), 3 (host)."),
            std::string::npos);
  in.pass_index = 3;
  EXPECT_NE(build_prompt(in).user.find("This is the last pass"), std::string::npos);
}

TEST(Prompt, RealLibraryRendersEveryPass) {
  auto lib = load_library(std::string(PEAK_SOURCE_DIR) + "/transformations");
  ASSERT_TRUE(lib.is_ok()) << lib.error();
  KernelContext ctx = matmul_context();
  SourceRegions src = matmul_source();
  for (const auto& t : *lib) {
    for (const char* backend : {"cuda", "hlsl"}) {
      if (!t.supports(backend)) continue;  // launch bounds have no HLSL counterpart
      for (const auto& pass : t.passes) {
        PromptInput in;
        in.transformation = &t;
        in.pass_index = pass.index;
        in.context = &ctx;
        in.source = &src;
        in.backend = backend;
        in.device_name = "NVIDIA H100 80GB HBM3";
        Prompt p = build_prompt(in);
        EXPECT_NE(p.user.find(pass.instruction), std::string::npos);
        EXPECT_NE(p.user.find("## Backend vocabulary (" + std::string(backend) + ")"),
                  std::string::npos)
            << t.name;
        EXPECT_EQ(p.user.find("777"), std::string::npos);
        EXPECT_EQ(p.key(), build_prompt(in).key());
      }
    }
  }
}

}  // namespace
}  // namespace peak
