// The recorded campaigns on a machine without a GPU: every prompt that today's transformations,
// sequence and prompt builder make for them must be the recorded one, and every recorded reply
// must compile for the recording's device (CUDA: with nvcc for the H100, sm_90a; HIP: with hipcc
// for AMD gfx90a and gfx1030, and with nvcc through the mapping header; HLSL: to SPIR-V). A change
// that breaks a recording fails here, in CI, rather than on the GPU host.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/testing.h"
#include "util/fs.h"

namespace peak {
namespace {

using json = nlohmann::json;
using namespace peak::testing;

TEST_F(Cli, TheWholeCudaRecordingCompilesWithNvcc) {
  Out doctor = peak({"doctor"});
  if (doctor.out.find("[ ok ] cuda toolchain") == std::string::npos)
    GTEST_SKIP() << "no CUDA toolkit on this machine:\n" << doctor.out;
  const std::string root = PEAK_SOURCE_DIR;
  fs::path ws = tmp_ / "cuda";
  Out init = peak({"init", root + "/examples/matmul-cuda-fp32", ws.string()});
  ASSERT_EQ(init.code, 0) << init.err;
  // One configuration per step (--strategy-budget bounds the last steps' exhaustive searches too):
  // compiled, not run.
  Out o =
      peak({"-q", "--json", "run", "cuda-fp32", "--llm",
            "replay:" + root + "/recordings/cuda-fp32-full", "--compile-only", "--prompt-device",
            root + "/recordings/cuda-fp32-full/device.json", "--strategy-budget", "1"},
           ws);
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  json j = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << o.out;
  EXPECT_EQ(j["steps_done"], 16) << o.out;
  Out rep = peak({"report", "--format", "json"}, ws);
  ASSERT_EQ(rep.code, 0) << rep.err;
  json r = json::parse(rep.out, nullptr, false);
  // The seed and the fifteen steps kept on the branch (split-k is applied, then set aside).
  std::vector<std::string> kept;
  for (const auto& s : r["steps"]) {
    EXPECT_EQ(s["disposition"], "passed") << s.dump();
    kept.push_back(s["transformation"].get<std::string>());
  }
  const std::vector<std::string> expected = {
      "seed",          "refactor",     "tb-tiling",  "thread-tiling",     "thread-cache",
      "transpose",     "thread-chunk", "pipelining", "register-staging",  "offset",
      "block-swizzle", "warp-tiling",  "vectorize",  "fragment-prefetch", "launch-bounds",
      "stream-k"};
  EXPECT_EQ(kept, expected);
  EXPECT_TRUE(r["failures"].empty()) << r["failures"].dump();
  EXPECT_TRUE(r["infrastructure_failures"].empty()) << r["infrastructure_failures"].dump();
}

// The whole recorded HIP campaign (recordings/hip-fp32-full, the same sequence as CUDA's) against
// today's library: every prompt must be the recorded one, and every recorded reply must build for
// AMD (hipcc: gfx90a and gfx1030, with the resource report) and, where nvcc is, for the H100
// through the mapping header. Compiled only: one configuration per step, except the last two
// steps, whose exhaustive searches of the narrowed space (16 and 8 valid configurations) are the
// sequence's own strategy budget.
TEST_F(Cli, TheWholeHipRecordingCompilesForAmdAndNvidia) {
  Out doctor = peak({"doctor"});
  if (doctor.out.find("[ ok ] hip toolchain") == std::string::npos)
    GTEST_SKIP() << "no HIP toolchain on this machine:\n" << doctor.out;
  const std::string root = PEAK_SOURCE_DIR;
  fs::path ws = tmp_ / "hip";
  Out init = peak({"init", root + "/examples/matmul-hip-fp32", ws.string()});
  ASSERT_EQ(init.code, 0) << init.err;
  Out o = peak({"-q", "--json", "run", "hip-fp32", "--llm",
                "replay:" + root + "/recordings/hip-fp32-full", "--compile-only", "--prompt-device",
                root + "/recordings/hip-fp32-full/device.json", "--strategy-budget", "1"},
               ws);
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  json j = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << o.out;
  EXPECT_EQ(j["steps_done"], 16) << o.out;
  ASSERT_EQ(j["steps"].size(), 16u) << o.out;
  for (const auto& s : j["steps"]) {
    EXPECT_EQ(s["disposition"], "passed") << s.dump();
    EXPECT_EQ(s["attempts"], 1) << s.dump();
    EXPECT_NE(s["message"].get<std::string>().find("configurations built"), std::string::npos)
        << s.dump();
  }
  Out rep = peak({"report", "--format", "json"}, ws);
  ASSERT_EQ(rep.code, 0) << rep.err;
  json r = json::parse(rep.out, nullptr, false);
  ASSERT_TRUE(r.is_object()) << rep.out;
  // The seed and the fifteen steps kept on the branch (split-k is applied, then set aside).
  std::vector<std::string> kept;
  for (const auto& s : r["steps"]) {
    EXPECT_EQ(s["disposition"], "passed") << s.dump();
    kept.push_back(s["transformation"].get<std::string>());
  }
  const std::vector<std::string> expected = {
      "seed",          "refactor",     "tb-tiling",  "thread-tiling",     "thread-cache",
      "transpose",     "thread-chunk", "pipelining", "register-staging",  "offset",
      "block-swizzle", "warp-tiling",  "vectorize",  "fragment-prefetch", "launch-bounds",
      "stream-k"};
  EXPECT_EQ(kept, expected);
  EXPECT_TRUE(r["failures"].empty()) << r["failures"].dump();
  EXPECT_TRUE(r["infrastructure_failures"].empty()) << r["infrastructure_failures"].dump();
}

// The whole recorded HLSL campaign (recordings/hlsl-fp32-full, which `peak demo` replays on a CPU
// device) against today's library: every prompt that the transformations, the sequence and the
// prompt builder make must be the recorded one, and every recorded reply must splice into its
// region and compile to SPIR-V. A change that breaks the recording (a transformation's text or
// tuning parameters, a region check, the prompt builder) fails here. Compiled only, one
// configuration per step: nothing is timed, so a loaded machine gives the same result.
TEST_F(Cli, TheWholeHlslRecordingAnswersEveryPromptAndCompiles) {
  fs::path ws = workspace_with_device("whole", "");
  std::string rec = std::string("replay:") + PEAK_SOURCE_DIR + "/recordings/hlsl-fp32-full";
  Out o = peak({"-q", "--json", "run", "hlsl-fp32", "--llm", rec, "--budget", "1", "--small",
                "--compile-only"},
               ws);
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  json j = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << o.out;
  EXPECT_EQ(j["steps_done"], 14);
  ASSERT_EQ(j["steps"].size(), 14u) << o.out;
  for (const auto& s : j["steps"]) {
    EXPECT_EQ(s["disposition"], "passed") << s.dump();
    EXPECT_EQ(s["attempts"], 1) << s.dump();
    EXPECT_NE(s["message"].get<std::string>().find("1 of 1 configurations built"),
              std::string::npos)
        << s.dump();
  }
  // The seed and the thirteen steps kept on the branch (split-k is applied, then set aside).
  Out rep = peak({"report", "--format", "json"}, ws);
  ASSERT_EQ(rep.code, 0) << rep.err;
  json r = json::parse(rep.out, nullptr, false);
  ASSERT_TRUE(r.is_object()) << rep.out;
  std::vector<std::string> kept;
  for (const auto& s : r["steps"]) kept.push_back(s["transformation"].get<std::string>());
  const std::vector<std::string> expected = {
      "seed",          "refactor",     "tb-tiling",  "thread-tiling",    "thread-cache",
      "transpose",     "thread-chunk", "pipelining", "register-staging", "offset",
      "block-swizzle", "warp-tiling",  "vectorize",  "fragment-prefetch"};
  EXPECT_EQ(kept, expected);
  EXPECT_TRUE(r["failures"].empty()) << r["failures"].dump();
  EXPECT_TRUE(r["infrastructure_failures"].empty()) << r["infrastructure_failures"].dump();
}

}  // namespace
}  // namespace peak
