// The peak binary with its sandbox and device lock, end to end on the CPU Vulkan device: `peak
// doctor` reports the sandbox; a key planted in peak's environment appears in no output, no store
// and no scratch folder; two tunes on one device queue on its lock and take turns; a command that
// changes a workspace another peak is changing stops, or waits with --wait.
#include <gtest/gtest.h>
#include <unistd.h>

#include "cli/sandbox_cli_testing.h"

namespace peak {
namespace {

using json = nlohmann::json;

constexpr const char* kPlantedKey = "sk-planted-cli-1a2b3c4d5e6f7081";

class SandboxCli : public testing::PeakCli {};

TEST_F(SandboxCli, DoctorSaysWhatTheSandboxIs) {
  auto on = peak({"doctor"}, tmp_);
  EXPECT_NE(on.out.find("sandbox: "), std::string::npos) << on.out;
  auto off = peak({"--no-sandbox", "doctor"}, tmp_);
  EXPECT_NE(off.out.find("[MISS] sandbox: off: turned off with --no-sandbox"), std::string::npos)
      << off.out;
  // Without bubblewrap: partial, said once on stderr and reported with its fix.
  auto partial = peak({"doctor"}, tmp_, {{"PEAK_BWRAP", "/nonexistent/bwrap"}});
  EXPECT_NE(partial.out.find("[MISS] sandbox: partial"), std::string::npos) << partial.out;
  EXPECT_NE(partial.out.find("fix: install bubblewrap"), std::string::npos) << partial.out;
  std::string notice = "the sandbox is partial on this host";
  size_t first = partial.err.find(notice);
  EXPECT_NE(first, std::string::npos) << partial.err;
  EXPECT_EQ(partial.err.find(notice, first + 1), std::string::npos) << "said more than once";
}

// A key in peak's environment while it compiles, validates, times and records good and bad
// kernels: nothing it prints, stores or leaves in its scratch folders holds the key.
TEST_F(SandboxCli, APlantedKeyLeaksIntoNoOutputStoreOrScratch) {
  fs::path ws = workspace("ws");
  fs::path scratch = tmp_ / "scratch";
  fs::create_directories(scratch);
  std::map<std::string, std::string> env = {{"OPENAI_API_KEY", kPlantedKey},
                                            {"ANTHROPIC_API_KEY", kPlantedKey},
                                            {"TMPDIR", scratch.string()}};
  std::vector<ProcessResult> runs;
  runs.push_back(peak({"--json", "tune", "--budget", "1"}, ws, env));
  EXPECT_TRUE(runs.back().ok()) << runs.back().err;
  // A kernel that does not compile and one that crashes the runner's checks: the error paths.
  auto src = read_file(ws / "kernel.hlsl");
  ASSERT_TRUE(src);
  ASSERT_TRUE(write_file(ws / "kernel.hlsl", replace_all(*src, "// peak:end device",
                                                         "undefined_name;\n// peak:end device")));
  runs.push_back(peak({"--json", "commit", "-m", "broken", "--budget", "1"}, ws, env));
  EXPECT_EQ(runs.back().exit_code, 1) << runs.back().out << runs.back().err;
  for (const auto& r : runs) {
    EXPECT_EQ(r.out.find(kPlantedKey), std::string::npos);
    EXPECT_EQ(r.err.find(kPlantedKey), std::string::npos);
  }
  for (const fs::path& root : {ws, scratch, locks_})
    EXPECT_TRUE(files_holding(root, kPlantedKey).empty())
        << root << ": " << files_holding(root, kPlantedKey).front();
}

// Two peak processes tune on the same device (lavapipe) while this test holds the device's lock:
// both queue behind it, say so and record the wait, then take turns and finish. (That their
// numbers match the ones measured alone is checked on a GPU, sandbox_cli_gpu_test.cpp: this
// machine may be busy with anything else, and the CPU device shares its cores.)
TEST_F(SandboxCli, ConcurrentTunesQueueOnTheDeviceLock) {
  Tunes t = concurrent_tunes("matmul-hlsl-fp32", {"--json", "tune", "--budget", "1"});
  for (const auto& [name, s] : t.together) {
    SCOPED_TRACE(name);
    EXPECT_EQ(s["device_lock"].value("key", ""), "cpu");
    EXPECT_FALSE(bench(s).empty()) << s.dump();
  }
}

}  // namespace
}  // namespace peak
