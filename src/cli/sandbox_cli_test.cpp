// The peak binary with its sandbox and device lock, end to end on the CPU Vulkan device: `peak
// doctor` reports the sandbox; a key planted in peak's environment appears in no output, no store
// and no scratch folder; two tunes on one device queue on its lock and measure what they measure
// alone; a command that changes a workspace another peak is changing stops, or waits with --wait.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "util/device_lock.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/workspace_lock.h"

namespace peak {
namespace {

using json = nlohmann::json;

constexpr const char* kPlantedKey = "sk-planted-cli-1a2b3c4d5e6f7081";

class SandboxCli : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = make_temp_dir("peak-sandbox-cli-");
    ASSERT_TRUE(d) << d.error();
    tmp_ = *d;
    locks_ = tmp_ / "locks";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
  ProcessOptions command(std::vector<std::string> args, const fs::path& cwd,
                         std::map<std::string, std::string> env = {}) {
    ProcessOptions o;
    o.argv = {std::string(PEAK_BINARY_DIR) + "/peak"};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.cwd = cwd;
    o.timeout_s = 900;
    o.env = std::move(env);
    o.env["PEAK_DATA_DIR"] = PEAK_SOURCE_DIR;
    o.env["PEAK_LOCK_DIR"] = locks_.string();
    return o;
  }
  ProcessResult peak(std::vector<std::string> args, const fs::path& cwd,
                     std::map<std::string, std::string> env = {}) {
    auto r = run_process(command(std::move(args), cwd, std::move(env)));
    EXPECT_TRUE(r) << r.error();
    return r ? *r : ProcessResult{};
  }
  fs::path workspace(const std::string& name) {
    fs::path ws = tmp_ / name;
    auto r = peak(
        {"init", std::string(PEAK_SOURCE_DIR) + "/examples/matmul-hlsl-fp32", ws.string()}, tmp_);
    EXPECT_TRUE(r.ok()) << r.err;
    return ws;
  }
  // Bench medians by shape from a `peak --json tune` summary.
  static std::map<std::string, std::pair<double, double>> bench(const json& s) {
    std::map<std::string, std::pair<double, double>> m;
    for (const auto& b : s.value("bench", json::array()))
      m[b.value("shape", "")] = {b.value("median_ms", 0.0), b.value("spread", 0.0)};
    return m;
  }

  fs::path tmp_, locks_;
};

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
  for (const fs::path& root : {ws, scratch, locks_}) {
    std::error_code ec;
    for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      auto text = read_file(it->path());
      ASSERT_TRUE(text) << it->path();
      EXPECT_EQ(text->find(kPlantedKey), std::string::npos) << it->path();
    }
  }
}

// Two peak processes tune on the same device (lavapipe) while this test holds the device's lock:
// both queue behind it, say so, and record the wait; then they take turns. Their numbers agree
// with the ones each workspace measures alone.
TEST_F(SandboxCli, ConcurrentTunesQueueOnTheDeviceLockAndMeasureAsAlone) {
  fs::path a = workspace("a"), b = workspace("b");
  std::vector<std::string> tune = {"--json", "tune", "--budget", "1"};
  std::map<std::string, json> alone;
  for (const auto& [name, ws] : {std::pair{"a", a}, std::pair{"b", b}}) {
    auto r = peak(tune, ws);
    ASSERT_TRUE(r.ok()) << r.err;
    alone[name] = json::parse(r.out, nullptr, false);
    EXPECT_EQ(alone[name]["device_lock"].value("waits", -1), 0) << r.out;
  }

  ::setenv("PEAK_LOCK_DIR", locks_.c_str(), 1);
  auto holder = DeviceLock("cpu", "the CPU").acquire();
  ::unsetenv("PEAK_LOCK_DIR");
  ASSERT_TRUE(holder) << holder.error();
  Subprocess pa, pb;
  ASSERT_TRUE(pa.start(command(tune, a)));
  ASSERT_TRUE(pb.start(command(tune, b)));
  // Both reach the device and wait for this process (their progress line says so).
  const std::string waiting = "waiting for the CPU";
  const std::string holder_pid = "in use by pid " + std::to_string(::getpid());
  for (int i = 0; i < 3600; ++i) {
    std::string line;
    pa.read_line(line, 0.1);
    pb.read_line(line, 0.1);
    if (pa.err().find(waiting) != std::string::npos && pb.err().find(waiting) != std::string::npos)
      break;
    ASSERT_TRUE(pa.running() && pb.running());
  }
  EXPECT_NE(pa.err().find(holder_pid), std::string::npos) << pa.err();
  EXPECT_NE(pb.err().find(holder_pid), std::string::npos) << pb.err();
  holder = Result<DeviceLock::Guard>(DeviceLock::Guard{});  // let them go
  ProcessResult ra = pa.wait(900), rb = pb.wait(900);
  ASSERT_TRUE(ra.ok()) << ra.err;
  ASSERT_TRUE(rb.ok()) << rb.err;
  std::map<std::string, json> together = {{"a", json::parse(ra.out, nullptr, false)},
                                          {"b", json::parse(rb.out, nullptr, false)}};
  for (const auto& [name, s] : together) {
    SCOPED_TRACE(name);
    const json& lock = s["device_lock"];
    EXPECT_EQ(lock.value("key", ""), "cpu") << lock.dump();
    EXPECT_GE(lock.value("waits", 0), 1) << lock.dump();
    ASSERT_FALSE(lock["waited_for"].empty()) << lock.dump();
    EXPECT_NE(lock["waited_for"][0].get<std::string>().find("pid " + std::to_string(::getpid())),
              std::string::npos)
        << lock.dump();
    // The same numbers as alone, within their spread: a run disturbed by the other would be
    // about twice as slow on this CPU device.
    auto mine = bench(s), ref = bench(alone[name]);
    ASSERT_FALSE(mine.empty());
    for (const auto& [shape, m] : mine) {
      ASSERT_TRUE(ref.count(shape)) << shape;
      double spread = std::max(m.second, ref[shape].second);
      double ratio = m.first / ref[shape].first;
      double allowed = 1 + std::max(0.5, 4 * spread);
      EXPECT_LT(ratio, allowed) << shape << ": " << m.first << " ms together, " << ref[shape].first
                                << " ms alone";
      EXPECT_GT(ratio, 1 / allowed)
          << shape << ": " << m.first << " ms together, " << ref[shape].first << " ms alone";
    }
  }
}

// The workspace lock, held here as another peak would hold it: commands that change the workspace
// name the holder and stop (or queue with --wait); commands that read it go on.
TEST_F(SandboxCli, AChangingCommandStopsOrWaitsWhileAnotherChangesTheWorkspace) {
  fs::path ws = workspace("ws");
  auto held = WorkspaceLock::acquire(ws / ".peak", false);
  ASSERT_TRUE(held) << held.error();
  const std::string holder = "is being changed by pid " + std::to_string(::getpid());
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"checkout", "HEAD"}, {"branch", "other"},
        {"tune", "--budget", "1"}, {"commit", "-m", "x"}}) {
    auto r = peak(args, ws);
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.out << r.err;
    EXPECT_NE(r.err.find(holder), std::string::npos) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("--wait"), std::string::npos) << args[0] << ": " << r.err;
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"log"}, {"show", "HEAD"}, {"branch"}}) {
    auto r = peak(args, ws);
    EXPECT_TRUE(r.ok()) << args[0] << ": " << r.err;
  }
  // With --wait the command queues, says for whom, and runs once the holder lets go.
  Subprocess p;
  ASSERT_TRUE(p.start(command({"checkout", "--wait", "HEAD"}, ws)));
  for (int i = 0; i < 3600 && p.err().find(holder) == std::string::npos; ++i) {
    std::string line;
    p.read_line(line, 0.1);
    ASSERT_TRUE(p.running()) << p.err();
  }
  EXPECT_NE(p.err().find("waiting for the workspace"), std::string::npos) << p.err();
  *held = WorkspaceLock();
  ProcessResult r = p.wait(300);
  EXPECT_TRUE(r.ok()) << r.err;
  EXPECT_NE(r.out.find("HEAD is now at HEAD"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace peak
