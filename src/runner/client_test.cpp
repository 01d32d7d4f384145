// run_job / probe_device against fake runners: small shell scripts that speak the protocol and
// then misbehave in the ways a real runner does (crash, hang, fail at start, lose the device).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "runner/client.h"
#include "util/fs.h"
#include "util/sandbox.h"

namespace peak {
namespace {

// Reads the job, logs the task ids it got (one line per runner started), and defines result().
constexpr const char* kPrelude = R"SH(#!/bin/sh
ulimit -c 0
job=$(cat)
ids=$(printf '%s' "$job" | grep -o '"id":"[^"]*"' | sed 's/^"id":"//; s/"$//')
echo $ids >> "$FAKE_LOG"
begin() { printf '{"event":"begin","id":"%s"}\n' "$1"; }
result() { printf '{"event":"result","id":"%s","disposition":"passed","samples_ms":[1.5,1.25]}\n' "$1"; }
)SH";

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The fake runners are shell scripts, which start processes; the runner sandbox refuses that
    // (runner_sandbox_test.cpp tests the sandbox with a real runner).
    sandbox_was_ = sandbox_enabled();
    set_sandbox_enabled(false);
    auto d = make_temp_dir("peak-client-test");
    ASSERT_TRUE(d) << d.error();
    dir_ = d.value();
    log_ = dir_ / "starts.log";
    job_.family = "matmul";
    for (const char* id : {"t1", "t2", "t3"}) {
      RunnerTask t;
      t.id = id;
      job_.tasks.push_back(t);
    }
    opts_.task_timeout_s = 5;
    opts_.start_timeout_s = 5;
    opts_.env = {{"FAKE_LOG", log_.string()}, {"FAKE_DIR", dir_.string()}};
  }
  void TearDown() override {
    set_sandbox_enabled(sandbox_was_);
    std::filesystem::remove_all(dir_);
  }

  void fake(const std::string& body) {
    opts_.executable = dir_ / "fake-runner";
    ASSERT_TRUE(write_file(opts_.executable, std::string(kPrelude) + body));
    ::chmod(opts_.executable.c_str(), 0755);
  }
  std::vector<std::string> starts() {
    auto s = read_file(log_);
    return s ? split_lines(*s) : std::vector<std::string>{};
  }

  bool sandbox_was_ = true;
  std::filesystem::path dir_, log_;
  RunnerJob job_;
  RunnerOptions opts_;
};

constexpr const char* kNormal = R"SH(
for id in $ids; do
  begin "$id"
  result "$id"
done
echo '{"event":"done"}'
)SH";

TEST_F(ClientTest, NormalRunnerAnswersEveryTask) {
  fake(kNormal);
  std::vector<std::pair<std::string, size_t>> calls;
  auto r = run_job(job_, opts_, [&](const TaskResult& t, size_t done, size_t total) {
    EXPECT_EQ(total, 3u);
    calls.emplace_back(t.id, done);
  });
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*r)[i].id, job_.tasks[i].id);
    EXPECT_EQ((*r)[i].disposition, Disposition::passed) << (*r)[i].message;
    EXPECT_EQ((*r)[i].samples_ms, (std::vector<double>{1.5, 1.25}));
  }
  EXPECT_EQ(calls, (std::vector<std::pair<std::string, size_t>>{{"t1", 1}, {"t2", 2}, {"t3", 3}}));
  EXPECT_EQ(starts(), std::vector<std::string>{"t1 t2 t3"});
}

TEST_F(ClientTest, CrashIsChargedToTheTaskInFlightAndTheRestRunInAFreshRunner) {
  fake(R"SH(
echo "candidate chatter on stdout"
for id in $ids; do
  begin "$id"
  if [ "$id" = t2 ]; then echo "fake: segfault in t2" >&2; kill -SEGV $$; fi
  result "$id"
done
echo '{"event":"done"}'
)SH");
  auto r = run_job(job_, opts_);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ((*r)[0].disposition, Disposition::passed);
  EXPECT_EQ((*r)[1].disposition, Disposition::crashed);
  EXPECT_NE((*r)[1].message.find("signal 11"), std::string::npos) << (*r)[1].message;
  EXPECT_NE((*r)[1].message.find("fake: segfault in t2"), std::string::npos) << (*r)[1].message;
  EXPECT_NE((*r)[1].message.find("candidate chatter"), std::string::npos) << (*r)[1].message;
  EXPECT_EQ((*r)[2].disposition, Disposition::passed) << (*r)[2].message;
  EXPECT_EQ(starts(), (std::vector<std::string>{"t1 t2 t3", "t3"}));
}

bool process_gone(pid_t pid) {
  for (int i = 0; i < 100; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string pid_s, comm, state;
    if (!(stat >> pid_s >> comm >> state) || state == "Z") return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST_F(ClientTest, HangIsATimeoutAndTheProcessGroupIsKilled) {
  fake(R"SH(
for id in $ids; do
  begin "$id"
  if [ "$id" = t2 ]; then sleep 30 & echo $! > "$FAKE_DIR/sleep.pid"; wait $!; fi
  result "$id"
done
echo '{"event":"done"}'
)SH");
  opts_.task_timeout_s = 1;
  auto t0 = std::chrono::steady_clock::now();
  auto r = run_job(job_, opts_);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ((*r)[0].disposition, Disposition::passed);
  EXPECT_EQ((*r)[1].disposition, Disposition::timeout);
  EXPECT_NE((*r)[1].message.find("killed"), std::string::npos) << (*r)[1].message;
  EXPECT_GE((*r)[1].seconds, 0.9);
  EXPECT_EQ((*r)[2].disposition, Disposition::passed);
  EXPECT_LT(s, 5.0);
  EXPECT_EQ(starts(), (std::vector<std::string>{"t1 t2 t3", "t3"}));
  auto pid = read_file(dir_ / "sleep.pid");
  ASSERT_TRUE(pid) << pid.error();
  EXPECT_TRUE(process_gone(std::stoi(*pid))) << "the hung runner's child survived";
}

TEST_F(ClientTest, StartTimeoutCoversStartUpAndTaskTimeoutEveryTask) {
  // The runner takes 0.6 s to start (within the 5 s start timeout); after its "begin" every task,
  // the first included, gets the 0.3 s task timeout: t1 takes 0.6 s and times out, t2 runs in a
  // fresh runner and passes.
  fake(R"SH(
sleep 0.6
for id in $ids; do
  begin "$id"
  if [ "$id" = t1 ]; then sleep 0.6; fi
  result "$id"
done
echo '{"event":"done"}'
)SH");
  opts_.task_timeout_s = 0.3;
  opts_.start_timeout_s = 5;
  auto r = run_job(job_, opts_);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ((*r)[0].disposition, Disposition::timeout) << (*r)[0].message;
  EXPECT_EQ((*r)[1].disposition, Disposition::passed) << (*r)[1].message;
  EXPECT_EQ((*r)[2].disposition, Disposition::passed) << (*r)[2].message;
}

TEST_F(ClientTest, RunnerThatCannotStartFailsTheCallWithItsStderr) {
  fake(R"SH(
echo "peak-runner: no Vulkan device found (install mesa-vulkan-drivers for a CPU device)" >&2
exit 4
)SH");
  bool called = false;
  auto r = run_job(job_, opts_, [&](const TaskResult&, size_t, size_t) { called = true; });
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("peak-runner: no Vulkan device found"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("exit code 4"), std::string::npos) << r.error();
  EXPECT_FALSE(called);
}

TEST_F(ClientTest, RunnerThatHangsAtStartFailsTheCall) {
  fake(R"SH(
echo "initializing" >&2
sleep 30
)SH");
  opts_.start_timeout_s = 0.5;
  auto t0 = std::chrono::steady_clock::now();
  auto r = run_job(job_, opts_);
  ASSERT_FALSE(r);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3.0);
  EXPECT_NE(r.error().find("initializing"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("started no task"), std::string::npos) << r.error();
}

TEST_F(ClientTest, MissingExecutableSaysHowToBuildIt) {
  opts_.executable = dir_ / "peak-runner";
  auto r = run_job(job_, opts_);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("cannot find the runner 'peak-runner'"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("cmake --build"), std::string::npos) << r.error();
  opts_.executable = "peak-runner-cuda-that-is-not-on-path";
  r = run_job(job_, opts_);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("cannot find the runner"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("CUDA toolkit"), std::string::npos) << r.error();
}

TEST_F(ClientTest, DeviceLostExitRestartsWithoutChargingAnyone) {
  fake(R"SH(
for id in $ids; do
  begin "$id"
  result "$id"
  if [ "$id" = t1 ]; then echo "device lost" >&2; exit 3; fi
done
echo '{"event":"done"}'
)SH");
  auto r = run_job(job_, opts_);
  ASSERT_TRUE(r) << r.error();
  for (const auto& t : *r) EXPECT_EQ(t.disposition, Disposition::passed) << t.id << t.message;
  EXPECT_EQ(starts(), (std::vector<std::string>{"t1 t2 t3", "t2 t3"}));
}

TEST_F(ClientTest, MalformedResultIsACrashOfThatTask) {
  fake(R"SH(
for id in $ids; do
  begin "$id"
  if [ "$id" = t1 ]; then
    printf '{"event":"result","id":"t1","disposition":"exploded"}\n'
  else
    result "$id"
  fi
done
echo '{"event":"done"}'
)SH");
  auto r = run_job(job_, opts_);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ((*r)[0].disposition, Disposition::crashed);
  EXPECT_NE((*r)[0].message.find("exploded"), std::string::npos) << (*r)[0].message;
  EXPECT_EQ((*r)[1].disposition, Disposition::passed);
  EXPECT_EQ((*r)[2].disposition, Disposition::passed);
}

TEST_F(ClientTest, RestartsAreBounded) {
  fake(R"SH(
for id in $ids; do
  begin "$id"
  kill -SEGV $$
done
)SH");
  opts_.max_restarts = 1;
  auto r = run_job(job_, opts_);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ((*r)[0].disposition, Disposition::crashed);
  EXPECT_EQ((*r)[1].disposition, Disposition::crashed);
  EXPECT_EQ((*r)[2].disposition, Disposition::not_run);
  EXPECT_NE((*r)[2].message.find("restarted 1 times"), std::string::npos) << (*r)[2].message;
  EXPECT_EQ(starts().size(), 2u);
}

TEST_F(ClientTest, ProbeReturnsTheDeviceFacts) {
  fake(R"SH(
case "$job" in *'"mode":"probe"'*) ;; *) echo "not a probe job" >&2; exit 9;; esac
printf '{"event":"probe","device":{"name":"Fake GPU","backend":"fake","compute_units":7}}\n'
echo '{"event":"done"}'
)SH");
  auto f = probe_device(job_, opts_);
  ASSERT_TRUE(f) << f.error();
  EXPECT_EQ(f->name, "Fake GPU");
  EXPECT_EQ(f->compute_units, 7);
}

TEST_F(ClientTest, ProbeFailureCarriesStderr) {
  fake(R"SH(
echo "peak-runner: no Vulkan device found" >&2
exit 4
)SH");
  auto f = probe_device(job_, opts_);
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().find("no Vulkan device found"), std::string::npos) << f.error();
}

// A runner that takes its job from its first line, reports "started", and when the job holds,
// waits for "go" before its tasks (marking in $FAKE_DIR/went that it got it).
constexpr const char* kHeld = R"SH(#!/bin/sh
read -r job
ids=$(printf '%s' "$job" | grep -o '"id":"[^"]*"' | sed 's/^"id":"//; s/"$//')
echo $ids >> "$FAKE_LOG"
printf '{"event":"started","seconds":{"context":0.25,"job":0.5}}\n'
if printf '%s' "$job" | grep -q '"hold":true'; then
  read -r go
  [ "$go" = go ] || exit 0
  touch "$FAKE_DIR/went"
fi
for id in $ids; do
  printf '{"event":"begin","id":"%s"}\n' "$id"
  printf '{"event":"result","id":"%s","disposition":"passed","samples_ms":[1.5],"load_ms":2.5}\n' "$id"
done
echo '{"event":"done"}'
)SH";

// start_before_lock: the runner starts (and says so) while another thread holds the device, and
// runs its tasks once the lock is its; its start-up steps are tallied.
TEST_F(ClientTest, AHeldJobStartsBeforeTheLockAndRunsOnceItIsHeld) {
  opts_.executable = dir_ / "fake-runner";
  ASSERT_TRUE(write_file(opts_.executable, kHeld));
  ::chmod(opts_.executable.c_str(), 0755);
  ::setenv("PEAK_LOCK_DIR", dir_.c_str(), 1);
  opts_.device_lock = std::make_shared<DeviceLock>("held-test", "the test device");
  opts_.start_before_lock = true;
  opts_.tally = std::make_shared<RunnerTally>();
  auto held = std::make_optional(opts_.device_lock->acquire());
  ASSERT_TRUE(*held) << held->error();
  Result<std::vector<TaskResult>> r = make_error("not run");
  std::thread job([&] { r = run_job(job_, opts_); });
  // The runner has started once run_job waits for the lock (an event; bounded for a bug).
  for (int i = 0; i < 120000 && opts_.device_lock->stats().queued == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(opts_.device_lock->stats().queued, 1);
  EXPECT_EQ(starts(), std::vector<std::string>{"t1 t2 t3"});
  EXPECT_FALSE(std::filesystem::exists(dir_ / "went"));  // no task before the lock
  held.reset();
  job.join();
  ::unsetenv("PEAK_LOCK_DIR");
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 3u);
  for (const auto& t : *r) EXPECT_EQ(t.disposition, Disposition::passed) << t.message;
  EXPECT_TRUE(std::filesystem::exists(dir_ / "went"));
  EXPECT_EQ(opts_.tally->starts.load(), 1);
  EXPECT_DOUBLE_EQ(opts_.tally->startup_steps["context"], 0.25);
  EXPECT_NEAR(opts_.tally->load_seconds(), 3 * 0.0025, 1e-9);  // the tasks' load_ms, summed
}

// A held job abandoned once the lock is taken runs no task: every task not_run, kAbandoned.
TEST_F(ClientTest, AHeldJobAbandonedAtTheLockRunsNothing) {
  opts_.executable = dir_ / "fake-runner";
  ASSERT_TRUE(write_file(opts_.executable, kHeld));
  ::chmod(opts_.executable.c_str(), 0755);
  ::setenv("PEAK_LOCK_DIR", dir_.c_str(), 1);
  opts_.device_lock = std::make_shared<DeviceLock>("abandon-test", "the test device");
  opts_.start_before_lock = true;
  opts_.abandon = [] { return true; };
  opts_.tally = std::make_shared<RunnerTally>();
  auto r = run_job(job_, opts_);
  ::unsetenv("PEAK_LOCK_DIR");
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 3u);
  for (const auto& t : *r) {
    EXPECT_EQ(t.disposition, Disposition::not_run);
    EXPECT_EQ(t.message, kAbandoned);
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "went"));
  EXPECT_EQ(opts_.tally->starts.load(), 1);
  EXPECT_EQ(opts_.tally->abandoned.load(), 1);
}

// Without start_before_lock the job is not held, and the runner goes straight to its tasks.
TEST_F(ClientTest, AJobTakesTheLockFirstByDefault) {
  opts_.executable = dir_ / "fake-runner";
  ASSERT_TRUE(write_file(opts_.executable, kHeld));
  ::chmod(opts_.executable.c_str(), 0755);
  auto r = run_job(job_, opts_);
  ASSERT_TRUE(r) << r.error();
  for (const auto& t : *r) EXPECT_EQ(t.disposition, Disposition::passed) << t.message;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "went"));
}

TEST(FindRunner, SearchesPathAndFallsBackToTheName) {
  EXPECT_EQ(find_runner("peak-no-such-runner-xyz"),
            std::filesystem::path("peak-no-such-runner-xyz"));
  auto sh = find_runner("sh");
  EXPECT_TRUE(sh.is_absolute()) << sh;
  EXPECT_EQ(sh.filename(), "sh");
}

}  // namespace
}  // namespace peak
