// The peak binary on a CUDA GPU (label gpu): the CUDA runner and nvcc sandboxed; a key planted in
// peak's environment leaks nowhere; two tunes started together on the GPU queue on its lock and
// measure what each measures alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>

#include "cli/sandbox_cli_testing.h"

namespace peak {
namespace {

using json = nlohmann::json;

constexpr const char* kPlantedKey = "sk-planted-gpu-0f1e2d3c4b5a6978";

class SandboxCliGpu : public testing::PeakCli {
 protected:
  void SetUp() override {
    PeakCli::SetUp();
    auto doctor = peak({"doctor"}, tmp_);
    if (doctor.out.find("sandbox: full") == std::string::npos)
      GTEST_SKIP() << "the sandbox is not full on this host:\n" << doctor.out;
  }
};

// The seed of the CUDA example, compiled, validated, tuned and timed with the sandbox on, with an
// API key in peak's environment: it passes, its summary says the sandbox was full, and the key is
// in no output, no store and no scratch folder.
TEST_F(SandboxCliGpu, TheCudaSeedPassesSandboxedAndLeaksNoKey) {
  fs::path ws = workspace("ws", "matmul-cuda-fp32");
  fs::path scratch = tmp_ / "scratch";
  fs::create_directories(scratch);
  std::map<std::string, std::string> env = {{"OPENAI_API_KEY", kPlantedKey},
                                            {"ANTHROPIC_API_KEY", kPlantedKey},
                                            {"TMPDIR", scratch.string()}};
  auto r = peak({"--json", "tune", "--budget", "2"}, ws, env);
  ASSERT_TRUE(r.ok()) << r.err;
  json s = json::parse(r.out, nullptr, false);
  std::cout << "[ observed ] " << s.value("sandbox", std::string("(no sandbox field)")) << "\n";
  EXPECT_EQ(s.value("sandbox", "").rfind("full", 0), 0u) << r.out;
  EXPECT_FALSE(bench(s).empty()) << r.out;
  EXPECT_EQ(r.out.find(kPlantedKey), std::string::npos);
  EXPECT_EQ(r.err.find(kPlantedKey), std::string::npos);
  for (const fs::path& root : {ws, scratch, locks_})
    EXPECT_TRUE(files_holding(root, kPlantedKey).empty())
        << root << ": " << files_holding(root, kPlantedKey).front();
}

// Two tunes of the CUDA example at once: they queue on the GPU's lock and their bench medians
// agree with the ones measured one after the other, within the spread.
TEST_F(SandboxCliGpu, ConcurrentTunesMeasureWhatTheyMeasureAlone) {
  Tunes t = concurrent_tunes("matmul-cuda-fp32", {"--json", "tune", "--budget", "2"});
  ASSERT_EQ(t.together.size(), 2u);
  for (const auto& [name, s] : t.together) {
    SCOPED_TRACE(name);
    auto mine = bench(s), ref = bench(t.alone[name]);
    ASSERT_FALSE(mine.empty()) << s.dump();
    for (const auto& [shape, m] : mine) {
      ASSERT_TRUE(ref.count(shape)) << shape;
      double spread = std::max({m.second, ref[shape].second, 0.02});
      double ratio = m.first / ref[shape].first;
      std::cout << "[ measured ] " << name << " " << shape << ": " << ref[shape].first
                << " ms alone, " << m.first << " ms with the other tune queued beside it (ratio "
                << ratio << ", spreads " << ref[shape].second << " / " << m.second << ")\n";
      // Disturbed by the other (two kernels sharing the SMs) would be far slower than this.
      EXPECT_LT(ratio, 1 + 3 * spread) << shape;
      EXPECT_GT(ratio, 1 / (1 + 3 * spread)) << shape;
    }
  }
}

}  // namespace
}  // namespace peak
