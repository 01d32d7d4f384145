// The peak binary with its sandbox and device lock, end to end on the CPU Vulkan device: `peak
// doctor` reports the sandbox; a key planted in peak's environment appears in no output, no store
// and no scratch folder; two tunes on one device queue on its lock and take turns; a command that
// changes a workspace another peak is changing stops, or waits with --wait.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fmt/format.h>

#include "cli/sandbox_cli_testing.h"
#include "util/host_files_testing.h"
#include "util/sandbox.h"

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

// A model that answers with device code including host files (/etc/passwd by path, /etc/group
// as a system header, /etc/passwd by a relative path out of every folder): each attempt fails to
// compile, its log reaches the next attempt's prompt, and no line of those files reaches the
// output, the store or any prompt. `extra` are the run's options beyond the manual model.
struct HostileIncludes {
  std::string example, sequence, recording, fence, kernel;
  std::vector<std::string> extra;
};

class SandboxCliIncludes : public SandboxCli {
 protected:
  void check(const HostileIncludes& h) {
    ASSERT_FALSE(testing::host_file_lines().empty()) << "no /etc/passwd to hide";
    fs::path ws = workspace("ws", h.example);
    fs::path recs = fs::path(PEAK_SOURCE_DIR) / "recordings" / h.recording;
    fs::path rec;  // the recorded reply to the first prompt: the macros region of `refactor`
    for (const auto& e : fs::directory_iterator(recs))
      if (e.path().filename().string().rfind("0001-", 0) == 0) rec = e.path();
    ASSERT_FALSE(rec.empty());
    const std::string macros = json::parse(*read_file(rec))["reply"].get<std::string>();
    const std::vector<std::string> includes = testing::hostile_includes();
    std::vector<std::string> run = {"--json", "run",      h.sequence, "--llm", "manual",
                                    "--budget", "1",      "--small",  "--by",  "test"};
    run.insert(run.end(), h.extra.begin(), h.extra.end());
    std::vector<ProcessResult> runs = {peak(run, ws)};
    run.push_back("--resume");
    size_t used = 0;
    bool log_in_prompt = false;
    for (int round = 0; round < 10 && runs.back().exit_code == 3; ++round) {
      json waiting = json::parse(runs.back().out, nullptr, false);
      ASSERT_TRUE(waiting.is_object()) << runs.back().out;
      std::string id = waiting["prompt"]["id"].get<std::string>();
      auto prompt = read_file(ws / waiting["prompt"]["path"].get<std::string>());
      ASSERT_TRUE(prompt) << runs.back().out;
      EXPECT_EQ(testing::host_line_in(*prompt), "") << id << ":\n" << *prompt;
      if (used > 0 && (prompt->find("etc/passwd") != std::string::npos ||
                       prompt->find("etc/group") != std::string::npos))
        log_in_prompt = true;  // the failed attempt's compile log, naming the path it refused
      std::string reply;
      if (prompt->find("edit the macros region") != std::string::npos) {
        reply = macros;
      } else if (used < includes.size()) {
        reply = "```" + h.fence + "\n" + includes[used++] + "\n" + h.kernel + "```\n";
      } else {
        break;
      }
      ASSERT_TRUE(write_file(tmp_ / "reply.md", reply));
      runs.push_back(peak({"respond", id, (tmp_ / "reply.md").string(), "--by", "test"}, ws));
      ASSERT_EQ(runs.back().exit_code, 0) << runs.back().err;
      runs.push_back(peak(run, ws));
    }
    EXPECT_EQ(used, includes.size()) << runs.back().out << runs.back().err;
    EXPECT_TRUE(log_in_prompt) << "no prompt showed a failed attempt's compile log";
    for (const auto& r : runs) {
      EXPECT_EQ(testing::host_line_in(r.out), "") << r.out;
      EXPECT_EQ(testing::host_line_in(r.err), "") << r.err;
    }
    EXPECT_EQ(testing::host_line_under(ws), "");
  }
};

TEST_F(SandboxCliIncludes, HostFilesAnHlslCandidateIncludesReachNoLogStoreOrPrompt) {
  check({"matmul-hlsl-fp32", "hlsl-fp32", "hlsl-fp32", "hlsl",
         "[numthreads(BLOCK_X, BLOCK_Y, 1)]\n"
         "void main(uint3 tid : SV_DispatchThreadID) {\n"
         "  int col = C_COL;\n  int row = C_ROW;\n"
         "  if (row >= M || col >= N) return;\n"
         "  float acc = 0.0f;\n"
         "  for (int k = 0; k < K; ++k) acc += A_AT(row, k) * B_AT(k, col);\n"
         "  C_AT(row, col) = acc;\n}\n",
         {}});
}

// The same through nvcc, compile-only for the recording's device (no GPU needed): nvcc quotes the
// lines of a file it includes in its errors, so only the sandbox keeps them out.
TEST_F(SandboxCliIncludes, HostFilesACudaCandidateIncludesReachNoLogStoreOrPrompt) {
  if (find_program("nvcc").empty() && !fs::exists("/usr/local/cuda/bin/nvcc"))
    GTEST_SKIP() << "nvcc is not installed";
  std::string rec = std::string(PEAK_SOURCE_DIR) + "/recordings/cuda-fp32";
  check({"matmul-cuda-fp32", "cuda-fp32", "cuda-fp32", "cuda",
         "__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) "
         "{}\n",
         {"--compile-only", "--prompt-device", rec + "/device.json"}});
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
