#include "report/report.h"

#include <gtest/gtest.h>

namespace peak {
namespace {

using json = nlohmann::json;

TEST(Report, RendersStepsSpeedupsAndFailures) {
  CheckpointRecord seed;
  seed.id = 1;
  seed.message = "seed";
  CheckpointRecord step;
  step.id = 2;
  step.parent = 1;
  step.transformation = "tb-tiling";
  json s1 = {{"disposition", "passed"},
             {"device", {{"name", "llvmpipe"}, {"backend", "hlsl"}, {"measured_fp32_tflops", 0.5}}},
             {"peak", {{"tflops", 0.5}, {"source", "measured"}}},
             {"best", {{"config_text", "BLOCK_X=16"}}},
             {"bench", {{{"shape", "M=256"}, {"disposition", "passed"}, {"median_ms", 2.0}, {"gflops", 16.0},
                         {"pct_of_peak", 3.2}, {"speedup_vs_seed", 1.0}, {"samples_ms", {2.0, 2.1}}}}}};
  json s2 = {{"disposition", "passed"},
             {"best", {{"config_text", "TILE_K=16"},
                       {"resources", {{"max_registers", 40}, {"max_shared_bytes", 8192}, {"spills", false}}}}},
             {"bench", {{{"shape", "M=256"}, {"disposition", "passed"}, {"median_ms", 1.0}, {"gflops", 32.0},
                         {"spread", 0.01}, {"speedup_vs_seed", 2.0}, {"speedup_vs_parent", 2.0}}}}};
  AttemptRecord bad;
  bad.parent_checkpoint = 1;
  bad.transformation = "tb-tiling";
  bad.pass_index = 2;
  bad.attempt = 1;
  bad.disposition = "no_code";
  bad.error = "the reply held no code block\nsecond line";
  AttemptRecord good = bad;
  good.disposition = "passed";
  good.attempt = 2;
  Report r = build_report("/ws", "matmul", {{seed, s1}, {step, s2}}, {bad, good});
  ASSERT_EQ(r.steps.size(), 2u);
  EXPECT_EQ(r.steps[0].transformation, "seed");
  EXPECT_EQ(r.steps[1].attempts, 2);
  EXPECT_EQ(r.steps[1].failed_attempts, 1);
  EXPECT_EQ(r.device, "llvmpipe");
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_EQ(r.failures[0].error, "the reply held no code block");
  std::string text = render_text(r);
  EXPECT_NE(text.find("tb-tiling"), std::string::npos);
  EXPECT_NE(text.find("32.0"), std::string::npos);
  EXPECT_NE(text.find("2.00"), std::string::npos);
  EXPECT_NE(text.find("no_code"), std::string::npos);
  EXPECT_EQ(r.steps[1].resources, "40 registers, 8.0 KiB shared, no spills");
  EXPECT_NE(text.find("40 registers"), std::string::npos);
  std::string md = render_markdown(r);
  EXPECT_NE(md.find("| 2 | tb-tiling | passed | `TILE_K=16` | M=256 | 32.0 |"), std::string::npos) << md;
  json j = render_json(r);
  EXPECT_EQ(j["format"], kReportFormatVersion);
  EXPECT_EQ(j["steps"][1]["bench"][0]["speedup_vs_parent"], 2.0);
  EXPECT_EQ(j["steps"][0]["bench"][0]["samples"], 2);
}

TEST(Report, ShowsTheResourceReportOfEveryCompileTarget) {
  // A HIP build: run on NVIDIA (ptxas's report), also compiled for AMD targets (their reports).
  CheckpointRecord seed;
  seed.id = 1;
  json resources = {
      {"max_registers", 38},
      {"max_shared_bytes", 0},
      {"spills", false},
      {"platform", "nvidia"},
      {"targets",
       {{"gfx1030", {{"summary", "14 VGPRs, 16 SGPRs, 0.0 KiB LDS, no scratch, no spills, 16 waves/SIMD"}}},
        {"gfx90a",
         {{"summary", "12 VGPRs, 0 AGPRs, 18 SGPRs, 0.0 KiB LDS, no scratch, no spills, 8 waves/SIMD"}}}}}};
  json s1 = {{"disposition", "passed"},
             {"device", {{"name", "NVIDIA H100 80GB HBM3"}, {"backend", "hip"}}},
             {"best", {{"config_text", "BLOCK_X=16"}, {"resources", resources}}},
             {"bench", {{{"shape", "M=2048"}, {"disposition", "passed"}, {"median_ms", 2.0}, {"gflops", 16.0}}}}};
  Report r = build_report("/ws", "matmul", {{seed, s1}}, {});
  ASSERT_EQ(r.steps.size(), 1u);
  EXPECT_EQ(r.steps[0].resources,
            "38 registers, 0.0 KiB shared, no spills; gfx1030 (compiled, not run): 14 VGPRs, 16 SGPRs, 0.0 KiB "
            "LDS, no scratch, no spills, 16 waves/SIMD; gfx90a (compiled, not run): 12 VGPRs, 0 AGPRs, 18 SGPRs, "
            "0.0 KiB LDS, no scratch, no spills, 8 waves/SIMD");
  std::string text = render_text(r);
  EXPECT_NE(text.find("NVIDIA H100 80GB HBM3 [hip]"), std::string::npos) << text;
  EXPECT_NE(text.find("gfx90a (compiled, not run)"), std::string::npos) << text;
  EXPECT_NE(render_markdown(r).find("gfx1030 (compiled, not run)"), std::string::npos);
}

}  // namespace
}  // namespace peak
