#pragma once
// The peak binary run by tests, with its own lock folder (sandbox_cli_test.cpp on lavapipe,
// sandbox_cli_gpu_test.cpp on a CUDA GPU): workspaces from the examples, planted keys searched for
// in every file, and two tunes started together while the test holds their device's lock.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/device_lock.h"
#include "util/fs.h"
#include "util/process.h"

namespace peak::testing {

class PeakCli : public ::testing::Test {
 protected:
  using json = nlohmann::json;

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
  fs::path workspace(const std::string& name, const std::string& example = "matmul-hlsl-fp32") {
    return workspace_of(name, fs::path(PEAK_SOURCE_DIR) / "examples" / example);
  }
  // A workspace initialized from the kernel context in folder `context`.
  fs::path workspace_of(const std::string& name, const fs::path& context) {
    fs::path ws = tmp_ / name;
    auto r = peak({"init", context.string(), ws.string()}, tmp_);
    EXPECT_TRUE(r.ok()) << r.err;
    return ws;
  }
  // Every regular file under `root` whose content holds `needle`.
  static std::vector<std::string> files_holding(const fs::path& root, const std::string& needle) {
    std::vector<std::string> hits;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      auto text = read_file(it->path());
      if (!text || text->find(needle) != std::string::npos) hits.push_back(it->path().string());
    }
    return hits;
  }
  // Bench medians and spreads by shape from a `peak --json tune` summary.
  static std::map<std::string, std::pair<double, double>> bench(const json& s) {
    std::map<std::string, std::pair<double, double>> m;
    for (const auto& b : s.value("bench", json::array()))
      m[b.value("shape", "")] = {b.value("median_ms", 0.0), b.value("spread", 0.0)};
    return m;
  }

  struct Tunes {
    std::map<std::string, json> alone, together;  // by workspace name: "a", "b"
  };
  // Tunes workspaces a and b of `example` one after the other, then both at once while this
  // process holds their device's lock (the key their summaries name): both must queue behind it
  // and say so before they are let go.
  Tunes concurrent_tunes(const std::string& example, const std::vector<std::string>& tune) {
    Tunes t;
    fs::path a = workspace("a", example), b = workspace("b", example);
    for (const auto& [name, ws] : {std::pair{"a", a}, std::pair{"b", b}}) {
      auto r = peak(tune, ws);
      EXPECT_TRUE(r.ok()) << r.err;
      t.alone[name] = json::parse(r.out, nullptr, false);
      EXPECT_EQ(t.alone[name]["device_lock"].value("waits", -1), 0) << r.out;
    }
    const std::string key = t.alone["a"]["device_lock"].value("key", "");
    EXPECT_FALSE(key.empty()) << t.alone["a"].dump();
    if (key.empty()) return t;
    ::setenv("PEAK_LOCK_DIR", locks_.c_str(), 1);
    DeviceLock lock(key, "the device");  // holds the file (and with it the lock) while it lives
    auto holder = lock.acquire();
    ::unsetenv("PEAK_LOCK_DIR");
    EXPECT_TRUE(holder) << holder.error();
    if (!holder) return t;
    Subprocess pa, pb;
    EXPECT_TRUE(pa.start(command(tune, a)));
    EXPECT_TRUE(pb.start(command(tune, b)));
    // Both reach the device and wait for this process (their progress line says so).
    const std::string holder_pid = "in use by pid " + std::to_string(::getpid());
    for (int i = 0; i < 36000; ++i) {
      std::string line;
      pa.read_line(line, 0.05);
      pb.read_line(line, 0.05);
      if (pa.err().find(holder_pid) != std::string::npos &&
          pb.err().find(holder_pid) != std::string::npos)
        break;
      if (!pa.running() || !pb.running()) break;
    }
    EXPECT_NE(pa.err().find("waiting for "), std::string::npos) << pa.err();
    EXPECT_NE(pa.err().find(holder_pid), std::string::npos) << pa.err();
    EXPECT_NE(pb.err().find(holder_pid), std::string::npos) << pb.err();
    holder = Result<DeviceLock::Guard>(DeviceLock::Guard{});  // let them go
    ProcessResult ra = pa.wait(900), rb = pb.wait(900);
    EXPECT_TRUE(ra.ok()) << ra.err;
    EXPECT_TRUE(rb.ok()) << rb.err;
    t.together = {{"a", json::parse(ra.out, nullptr, false)},
                  {"b", json::parse(rb.out, nullptr, false)}};
    for (const auto& [name, s] : t.together) {
      SCOPED_TRACE(name);
      const json& lock = s["device_lock"];
      EXPECT_EQ(lock.value("key", ""), key) << lock.dump();
      EXPECT_GE(lock.value("waits", 0), 1) << lock.dump();
      EXPECT_FALSE(lock.value("waited_for", json::array()).empty()) << lock.dump();
      if (!lock.value("waited_for", json::array()).empty()) {
        EXPECT_NE(
            lock["waited_for"][0].get<std::string>().find("pid " + std::to_string(::getpid())),
            std::string::npos)
            << lock.dump();
      }
    }
    return t;
  }

  fs::path tmp_, locks_;
};

}  // namespace peak::testing
