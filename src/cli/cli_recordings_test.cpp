// The recorded CUDA campaign on a machine without a GPU: every prompt that today's
// transformations, sequence and prompt builder make for it must be the recorded one, and every
// recorded reply must compile with nvcc for the recording's device (the H100, sm_90a). A change
// that breaks the recording fails here, in CI, rather than on the GPU host.
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
  // One configuration per step (the last steps' exhaustive searches too): compiled, not run.
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

}  // namespace
}  // namespace peak
