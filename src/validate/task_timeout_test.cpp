#include "validate/task_timeout.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "runner/hostile_testing.h"
#include "util/fs.h"
#include "util/temp_dir_testing.h"

namespace peak {
namespace {

TEST(TaskBudget, WithoutAMeasurementTheDefaultStands) {
  TaskBudget b = task_budget(TaskKind::validate, false, {}, 60);
  EXPECT_EQ(b.timeout_s, 60);
  EXPECT_EQ(b.reference_s, 0);
  EXPECT_NE(b.basis.find("no validation task measured here yet"), std::string::npos) << b.basis;
  // A reference that measured other kinds only gives nothing for this one.
  TaskSeconds only_bench;
  only_bench.bench = 3;
  b = task_budget(TaskKind::screen, true, {{"seed", only_bench}}, 120);
  EXPECT_EQ(b.timeout_s, 120);
}

TEST(TaskBudget, TheSlowestReferenceTimesTheFactorAboveTheDeviceFloor) {
  TaskSeconds seed, parent;
  seed.validate = 0.2;
  parent.validate = 1.5;
  TaskBudget b = task_budget(TaskKind::validate, false, {{"seed", seed}, {"parent", parent}}, 60);
  EXPECT_DOUBLE_EQ(b.reference_s, 1.5);
  EXPECT_DOUBLE_EQ(b.timeout_s, kTimeoutFactor * 1.5);
  EXPECT_NE(b.basis.find("parent"), std::string::npos) << b.basis;
  // A fast reference: the floor of the device kind, higher on a CPU device.
  seed.validate = 0.01;
  EXPECT_DOUBLE_EQ(task_budget(TaskKind::validate, false, {{"seed", seed}}, 60).timeout_s,
                   kGpuFloorSeconds);
  EXPECT_DOUBLE_EQ(task_budget(TaskKind::validate, true, {{"seed", seed}}, 60).timeout_s,
                   kCpuFloorSeconds);
  // What a timing policy may legitimately sample raises the floor.
  TaskSeconds bench;
  bench.bench = 0.5;
  TimingPolicy policy;
  policy.max_seconds = 5;
  double allowance = timing_allowance(policy, true);
  EXPECT_DOUBLE_EQ(allowance, 100);
  EXPECT_DOUBLE_EQ(task_budget(TaskKind::bench, false, {{"seed", bench}}, 480, allowance).timeout_s,
                   100);
}

TEST(TaskBudget, SecondsRoundTripThroughTheSummary) {
  TaskSeconds t;
  t.validate = 0.25;
  t.screen = 1;
  t.bench = 2.5;
  TaskSeconds back = TaskSeconds::from_json(t.to_json());
  EXPECT_EQ(back.validate, 0.25);
  EXPECT_EQ(back.screen, 1);
  EXPECT_EQ(back.bench, 2.5);
  EXPECT_EQ(TaskSeconds::from_json(nlohmann::json()).validate, 0);  // older summaries
}

// Deadlines against peak-hostile-runner (runner/hostile_device_main.cpp), whose "kernel" hangs
// always, or once per task (a machine that was busy for a moment).
class Retry : public testing::TempDirTest {
 protected:
  Retry() : TempDirTest("peak-task-timeout-") {}
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(TempDirTest::SetUp());
    job_ = testing::hostile_job({"a", "b"}, (dir_ / "out").string());
    opts_.executable = fs::path(PEAK_BINARY_DIR) / "peak-hostile-runner";
    opts_.start_timeout_s = 120;
    // The deadline a hung kernel runs into; a task that does nothing ends far within it, even on
    // a machine busy with other work.
    budget_.timeout_s = 10;
    budget_.reference_s = 0.05;
    budget_.basis = "20x the seed's slowest validation task here (0.05 s), at least 10 s";
  }
  std::vector<TaskResult> run(const std::string& attack,
                              const std::function<void(const TaskResult&)>& on_hung = {}) {
    opts_.env = {{"PEAK_HOSTILE_ATTACK", attack},
                 {"PEAK_HOSTILE_TARGET", (dir_ / "out" / "hung").string()}};
    auto r = run_job_retrying_timeouts(job_, opts_, budget_, on_hung);
    EXPECT_TRUE(r) << r.error();
    return r ? *r : std::vector<TaskResult>{};
  }

  const fs::path& dir_ = temp_dir();
  RunnerJob job_;
  RunnerOptions opts_;
  TaskBudget budget_;
};

// The device stays held from the first miss to the verdict: one acquisition for both runners, and
// the verdict is told while this process still holds the lock (its file names the holder).
TEST_F(Retry, AHungKernelIsChargedTimeoutWithTheRatio) {
  job_.tasks.resize(1);
  ::setenv("PEAK_LOCK_DIR", dir_.c_str(), 1);
  opts_.device_lock = std::make_shared<DeviceLock>("retry-test", "the test device");
  int told = 0;
  auto r = run("hang", [&](const TaskResult& hung) {
    ++told;
    EXPECT_EQ(hung.disposition, Disposition::timeout);
    auto holder = read_file(opts_.device_lock->path());
    ASSERT_TRUE(holder) << holder.error();
    EXPECT_NE(holder->find("pid " + std::to_string(::getpid())), std::string::npos) << *holder;
  });
  ::unsetenv("PEAK_LOCK_DIR");
  EXPECT_EQ(told, 1);
  EXPECT_EQ(opts_.device_lock->stats().acquisitions, 1);
  EXPECT_EQ(*read_file(opts_.device_lock->path()), "");  // let go once judged
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].id, "a");
  EXPECT_EQ(r[0].disposition, Disposition::timeout);
  EXPECT_NE(r[0].message.find("retried alone in a fresh runner"), std::string::npos)
      << r[0].message;
  EXPECT_NE(r[0].message.find("x the slowest reference task"), std::string::npos) << r[0].message;
  EXPECT_NE(r[0].message.find("a hung kernel, not a slow machine"), std::string::npos)
      << r[0].message;
  EXPECT_NE(r[0].message.find(budget_.basis), std::string::npos) << r[0].message;
  EXPECT_GE(r[0].seconds, budget_.timeout_s);
}

// However many tasks a job has, a kernel that hangs costs two launches (two runners): the first
// task in the job's runner, then alone in a fresh one. It is charged `timeout` and the tasks
// after it are not run.
TEST_F(Retry, AHungKernelHangsTwiceAndTheTasksLeftAreNotRun) {
  for (const char* id : {"c", "d", "e"}) {
    job_.tasks.push_back(job_.tasks.front());
    job_.tasks.back().id = id;
  }
  auto r = run("hang");
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(r[0].id, "a");
  EXPECT_EQ(r[0].disposition, Disposition::timeout) << r[0].message;
  for (size_t i = 1; i < r.size(); ++i) {
    SCOPED_TRACE(job_.tasks[i].id);
    EXPECT_EQ(r[i].id, job_.tasks[i].id);
    EXPECT_EQ(r[i].disposition, Disposition::not_run) << r[i].message;
    EXPECT_NE(r[i].message.find("task a missed its deadline twice"), std::string::npos)
        << r[i].message;
  }
  auto launches = read_file(dir_ / "out" / "hung");
  ASSERT_TRUE(launches) << launches.error();
  EXPECT_EQ(*launches, "a\na\n");
}

TEST_F(Retry, TasksThatMissTheDeadlineOnceAreNotCharged) {
  auto r = run("hang-once");
  ASSERT_EQ(r.size(), 2u);
  for (size_t i = 0; i < r.size(); ++i) {
    SCOPED_TRACE(r[i].id);
    EXPECT_EQ(r[i].id, job_.tasks[i].id);
    EXPECT_EQ(r[i].disposition, Disposition::passed) << r[i].message;
    EXPECT_TRUE(fs::exists(dir_ / "out" / ("hung." + r[i].id)));
  }
}

TEST_F(Retry, WithoutAReferenceTheChargeSaysSo) {
  job_.tasks.resize(1);
  budget_.reference_s = 0;
  auto r = run("hang");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].disposition, Disposition::timeout);
  EXPECT_NE(r[0].message.find("no reference task measured on this device yet"), std::string::npos)
      << r[0].message;
}

}  // namespace
}  // namespace peak
