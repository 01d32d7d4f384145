// The real runner's pruning and compile path, with a fake backend (compile only: nothing runs),
// and its spread of validation and timing over several devices, with both faked per device.
#include "tune/tuner.h"

#include <condition_variable>
#include <mutex>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tune/final_timing.h"
#include "tune/prune.h"
#include "tune/simulation.h"
#include "tune/testing.h"
#include "util/fs.h"

namespace peak {
namespace {

// Builds every configuration except X=3; a group has X * Y threads. The launch plan (kPlan)
// requires that X * Y != 4.
class FakeBackend : public testing::StubBackend {
 public:
  BuildResult build(const BuildRequest& req) override {
    std::lock_guard<std::mutex> lock(mu_);
    built.push_back(req.defines);
    BuildResult r;
    int64_t x = req.defines.at("X"), y = req.defines.at("Y");
    r.seconds = 0.25;
    if (x == 3) {
      r.disposition = Disposition::compile_failed;
      r.log = "kernel.txt:1: X=3 does not compile";
      return r;
    }
    r.disposition = Disposition::passed;
    r.resources = {{"threads", x * y}, {"shared_bytes", 0}};
    return r;
  }
  std::vector<Config> built;

 private:
  std::mutex mu_;
};

SourceRegions with_plan() {
  SourceRegions s;
  s.host = "require X * Y != 4\nlaunch k\n  grid = (X, Y)\n  block = (1)\n";
  return s;
}

TEST(Tuner, PrunesBeforeCompilingAndAfterAndRanksWhatBuilt) {
  KernelContext ctx;
  ctx.name = "fake";
  ctx.tuning = {{"X", {1, 2, 3, 8}, 1}, {"Y", {1, 2, 16}, 1}};
  ctx.tuning_valid = "Y <= 8 || X == 1";
  DeviceFacts dev;
  dev.max_threads_per_group = 8;
  FakeBackend be;
  Validator unused(be, dev, RunnerOptions{}, ReferenceSource{});
  TuneOptions o;
  o.strategy = "exhaustive";
  o.budget = Budget{};
  o.compile_only = true;
  o.jobs = 3;
  o.top_k = 2;
  o.tune_shapes = {Shape{{{"N", 64}}}};
  SourceRegions src = with_plan();
  auto r = tune(be, dev, RunnerOptions{}, unused, ctx, src, o);
  EXPECT_EQ(r.space.total, 12u);
  EXPECT_EQ(r.space.invalid, 3u);  // X = 2, 3, 8 with Y = 16
  EXPECT_EQ(r.space.valid, 9u);
  ASSERT_EQ(r.outcomes.size(), 9u);
  EXPECT_FALSE(r.space.sampled);
  std::map<Config, const ConfigOutcome*> by;
  for (const auto& out : r.outcomes) by[out.config] = &out;
  auto at = [&](int64_t x, int64_t y) { return by.at(Config{{"X", x}, {"Y", y}}); };
  // X * Y == 4: ruled out by the launch plan, never compiled.
  EXPECT_EQ(at(2, 2)->stage, Stage::launch);
  EXPECT_TRUE(at(2, 2)->pruned());
  EXPECT_NE(at(2, 2)->message.find("X * Y != 4"), std::string::npos) << at(2, 2)->message;
  for (const auto& c : be.built) EXPECT_NE(c.at("X") * c.at("Y"), 4);
  EXPECT_EQ(be.built.size(), 8u);
  // X = 3 does not compile.
  EXPECT_EQ(at(3, 1)->disposition, Disposition::compile_failed);
  EXPECT_EQ(at(3, 1)->stage, Stage::compile);
  EXPECT_FALSE(at(3, 1)->pruned());
  // 16 threads per group: over the device's 8, discarded after compiling.
  EXPECT_EQ(at(8, 2)->stage, Stage::resources);
  EXPECT_EQ(at(8, 2)->message, "16 threads per group exceed the device's limit of 8");
  EXPECT_EQ(at(1, 16)->stage, Stage::resources);
  // What built: passed, with its launch plan and compile time.
  EXPECT_EQ(at(8, 1)->disposition, Disposition::passed);
  EXPECT_EQ(resource_usage({}, at(8, 1)->launch).groups, 8) << at(8, 1)->launch.dump();
  EXPECT_EQ(at(8, 1)->compile_seconds, 0.25);
  EXPECT_EQ(r.disposition, Disposition::passed);
  EXPECT_EQ(r.ranking.size(), 2u);
  EXPECT_EQ(r.message, "compile only: 4 of 9 configurations built (nothing run)");
  EXPECT_EQ(r.stop, "space exhausted");
}

TEST(Tuner, ReportsTheCommonestFailureAndUnknownStrategies) {
  KernelContext ctx;
  ctx.name = "fake";
  ctx.tuning = {{"X", {3}, 3}, {"Y", {1, 2}, 1}};
  DeviceFacts dev;
  FakeBackend be;
  Validator unused(be, dev, RunnerOptions{}, ReferenceSource{});
  TuneOptions o;
  o.compile_only = true;
  SourceRegions src;
  auto r = tune(be, dev, RunnerOptions{}, unused, ctx, src, o);
  EXPECT_EQ(r.disposition, Disposition::compile_failed);
  EXPECT_NE(r.message.find("does not compile"), std::string::npos) << r.message;
  o.strategy = "simplex";
  r = tune(be, dev, RunnerOptions{}, unused, ctx, src, o);
  EXPECT_EQ(r.disposition, Disposition::not_run);
  EXPECT_NE(r.message.find("unknown tuning strategy"), std::string::npos);
  ctx.tuning_valid = "X > 3";
  r = tune(be, dev, RunnerOptions{}, unused, ctx, src, o);
  EXPECT_EQ(r.disposition, Disposition::invalid_config);
  EXPECT_EQ(r.message, "no tuning configuration satisfies tuning_valid (2 rejected)");
}

// Validation and timing faked per device: every call records the device it ran on. Y = 2 fails
// validation; X = 2 fails timing; the others take X + Y ms. When `rendezvous` is set, each
// phase's calls wait until every device has made one, so that the spread over the devices shows
// whatever the load of the machine (the wait ends at once when it has happened).
class FakeDevicesRunner : public BackendRunner {
 public:
  using BackendRunner::BackendRunner;
  size_t devices = 2;
  bool rendezvous = true;
  std::mutex mu;
  std::condition_variable cv;
  std::set<size_t> validating, timing;
  std::vector<std::pair<Config, size_t>> validated, timed;  // in call order
  std::vector<size_t> groups;  // per configuration begun: the size of its job's group
  // With shape_times, one measurement per tuning shape: shape k takes (X + Y) * shape_times[k].
  std::vector<double> shape_times;

 protected:
  void meet(std::set<size_t>& seen, size_t lane) {
    std::unique_lock<std::mutex> lock(mu);
    seen.insert(lane);
    cv.notify_all();
    if (rendezvous)  // a generous bound: a bug fails the test instead of hanging it
      cv.wait_for(lock, std::chrono::seconds(120), [&] { return seen.size() >= devices; });
  }
  // Each configuration's validation, then (when it passed) its screening, in the group's order
  // as the real runner's one job does; after one hung, the others run nothing. Nothing left to
  // judge.
  std::vector<PendingEvaluation> begin_on(size_t lane, const std::vector<ConfigJob>& group,
                                          const MeasureOptions& mo) override {
    std::vector<PendingEvaluation> out;
    bool hung = false;
    for (const ConfigJob& job : group) {
      {
        std::lock_guard<std::mutex> lock(mu);
        groups.push_back(group.size());
      }
      if (hung) {
        out.push_back({[] { return ConfigEvaluation{}; }, false, true});
        continue;
      }
      const ConfigOutcome& o = *job.outcome;
      ConfigEvaluation e;
      e.validation = job.validated ? *job.validated : validate_on(lane, o, job.validation);
      if (e.validation.disposition == Disposition::passed) e.measurements = time_on(lane, o, mo);
      hung = e.validation.disposition == Disposition::timeout;
      out.push_back({[e] { return e; }, hung});
    }
    return out;
  }
  virtual ValidationOutcome validate_on(size_t lane, const ConfigOutcome& o,
                                        const ValidationOptions&) {
    meet(validating, lane);
    {
      std::lock_guard<std::mutex> lock(mu);
      validated.emplace_back(o.config, lane);
    }
    ValidationOutcome v;
    v.disposition = o.config.at("Y") == 2 ? Disposition::incorrect : Disposition::passed;
    v.message = v.disposition == Disposition::passed ? "ok" : "outputs differ";
    return v;
  }
  std::vector<Measurement> time_on(size_t lane, const ConfigOutcome& o, const MeasureOptions&) {
    meet(timing, lane);
    {
      std::lock_guard<std::mutex> lock(mu);
      timed.emplace_back(o.config, lane);
    }
    Measurement m;
    m.config = o.config;
    m.disposition = o.config.at("X") == 2 ? Disposition::crashed : Disposition::passed;
    m.message = m.disposition == Disposition::passed ? "" : "lost the device";
    m.stats.median = static_cast<double>(o.config.at("X") + o.config.at("Y"));
    m.stats.min = m.stats.median;
    // The driver reports registers of X = 8 (as a Vulkan driver would, at timing).
    if (o.config.at("X") == 8)
      m.kernel_statistics = {{"k", {{"Register Count", 40 + o.config.at("Y")}}}};
    if (shape_times.empty()) return {m};
    std::vector<Measurement> per_shape;
    for (double f : shape_times) {
      per_shape.push_back(m);
      per_shape.back().stats.median = per_shape.back().stats.min = m.stats.median * f;
    }
    return per_shape;
  }
};

struct PhaseCounts : TuneObserver {
  std::map<std::string, std::pair<size_t, size_t>> last;  // phase -> (done, total)
  size_t screened = 0;
  std::set<size_t> screened_on;  // the devices of the configurations screened
  void on_phase(std::string_view phase, size_t done, size_t total) override {
    last[std::string(phase)] = {done, total};
  }
  void on_screened(const ConfigOutcome& c) override {  // called under the runner's lock
    ++screened;
    screened_on.insert(c.device);
  }
};

SourceRegions plain_plan() {
  SourceRegions s;
  s.host = "launch k\n  grid = (X, Y)\n  block = (1)\n";
  return s;
}

std::vector<Config> xy_batch() {
  std::vector<Config> batch;
  for (int64_t x : {1, 2, 4, 8})
    for (int64_t y : {1, 2}) batch.push_back(Config{{"X", x}, {"Y", y}});
  return batch;
}

// A class's shapes rank a configuration by the geometric mean of their times: a shape four times
// longer than another weighs no more than it (their sum would be 5 (X + Y), the mean 2 (X + Y)).
TEST(Tuner, SeveralTuningShapesScoreTheGeometricMeanOfTheirTimes) {
  KernelContext ctx;
  ctx.name = "fake";
  ctx.tuning = {{"X", {1, 2, 4, 8}, 1}, {"Y", {1, 2}, 1}};
  DeviceFacts d0;
  d0.name = "Fake GPU";
  d0.max_threads_per_group = 64;
  FakeBackend be;
  RunnerOptions r0;
  Validator v0(be, d0, r0, ReferenceSource{});
  TuneOptions o;
  o.tune_shapes = {Shape{{{"N", 64}}}, Shape{{{"N", 256}}}};
  SourceRegions src = plain_plan();
  FakeDevicesRunner run(be, {DeviceLane{&d0, &r0, &v0}}, ctx, src, o);
  run.devices = 1;
  run.rendezvous = false;
  run.shape_times = {1.0, 4.0};
  const std::vector<Config> batch = {Config{{"X", 1}, {"Y", 1}}, Config{{"X", 4}, {"Y", 1}}};
  auto out = run.run(batch, nullptr);
  ASSERT_EQ(out.size(), 2u);
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_EQ(out[i].disposition, Disposition::passed) << out[i].message;
    ASSERT_EQ(out[i].measurements.size(), 2u);
    const double xy = static_cast<double>(batch[i].at("X") + batch[i].at("Y"));
    EXPECT_NEAR(out[i].score_ms, 2 * xy, 1e-9);
  }
}

TEST(Tuner, SpreadsValidationAndTimingOverTheDevicesAndKeepsTheOutcomesInOrder) {
  KernelContext ctx;
  ctx.name = "fake";
  ctx.tuning = {{"X", {1, 2, 4, 8}, 1}, {"Y", {1, 2}, 1}};
  DeviceFacts d0, d1;
  d0.name = d1.name = "Fake GPU";
  d0.max_threads_per_group = d1.max_threads_per_group = 64;
  d0.extra["device_index"] = "0";
  d1.extra["device_index"] = "1";
  FakeBackend be;
  RunnerOptions r0, r1;
  r0.device = "0";
  r1.device = "1";
  Validator v0(be, d0, r0, ReferenceSource{}), v1(be, d1, r1, ReferenceSource{});
  TuneOptions o;
  o.jobs = 2;
  o.tune_shapes = {Shape{{{"N", 64}}}};
  SourceRegions src = plain_plan();
  FakeDevicesRunner run(be, {DeviceLane{&d0, &r0, &v0}, DeviceLane{&d1, &r1, &v1}}, ctx, src, o);
  PhaseCounts phases;
  const std::vector<Config> batch = xy_batch();
  auto out = run.run(batch, &phases);
  ASSERT_EQ(out.size(), batch.size());
  // One outcome per configuration, in the batch's order, as with one device.
  for (size_t i = 0; i < batch.size(); ++i) {
    EXPECT_EQ(out[i].config, batch[i]);
    const int64_t x = batch[i].at("X"), y = batch[i].at("Y");
    if (y == 2) {
      EXPECT_EQ(out[i].disposition, Disposition::incorrect);
      EXPECT_EQ(out[i].stage, Stage::validate);
      EXPECT_TRUE(out[i].measurements.empty());
    } else if (x == 2) {
      EXPECT_EQ(out[i].disposition, Disposition::crashed);
      EXPECT_EQ(out[i].message, "lost the device");
    } else {
      EXPECT_EQ(out[i].disposition, Disposition::passed) << out[i].message;
      EXPECT_EQ(out[i].stage, Stage::time);
      EXPECT_EQ(out[i].score_ms, static_cast<double>(x + y));
      ASSERT_EQ(out[i].measurements.size(), 1u);
    }
    EXPECT_LT(out[i].device, 2u);
  }
  // Both devices validated and timed; each outcome names the device that timed it.
  std::set<size_t> validated_on, timed_on;
  for (const auto& [c, lane] : run.validated) validated_on.insert(lane);
  for (const auto& [c, lane] : run.timed) timed_on.insert(lane);
  EXPECT_EQ(validated_on, (std::set<size_t>{0, 1}));
  EXPECT_EQ(timed_on, (std::set<size_t>{0, 1}));
  EXPECT_EQ(run.validated.size(), 8u);  // each configuration once
  ASSERT_EQ(run.timed.size(), 4u);
  for (const auto& [c, lane] : run.timed) {
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& x) { return x.config == c; });
    ASSERT_NE(it, out.end());
    EXPECT_EQ(it->device, lane) << config_text(c);
  }
  EXPECT_EQ(phases.screened, 4u);
  EXPECT_EQ(phases.screened_on, (std::set<size_t>{0, 1}));
  // Counted against the configurations of the batch that were built.
  EXPECT_EQ(phases.last["validate"], (std::pair<size_t, size_t>{8, 8}));
  EXPECT_EQ(phases.last["time"], (std::pair<size_t, size_t>{4, 8}));
}

// One fake device with one worker and one compile at a time, over X in {1, 2, 4, 8} and Y in
// {1, 2}: configurations go through the pipeline in one order.
struct OneFakeDevice {
  OneFakeDevice() {
    ctx.name = "fake";
    ctx.tuning = {{"X", {1, 2, 4, 8}, 1}, {"Y", {1, 2}, 1}};
    dev.max_threads_per_group = 64;
    o.jobs = 1;
    o.workers_per_device = 1;
    o.tune_shapes = {Shape{{{"N", 64}}}};
  }
  KernelContext ctx;
  DeviceFacts dev;
  FakeBackend be;
  RunnerOptions ro;
  Validator v{be, dev, ro, ReferenceSource{}};
  TuneOptions o;
  SourceRegions src = plain_plan();
};

// One compile at a time: the device takes the configurations in the batch's order, each
// validated then (when it passed) timed before the next.
TEST(Tuner, OneDeviceValidatesThenTimesInTheBatchsOrder) {
  OneFakeDevice f;
  auto& [ctx, dev, be, ro, v, o, src] = f;
  FakeDevicesRunner run(be, dev, ro, v, ctx, src, o);
  run.devices = 1;
  const std::vector<Config> batch = xy_batch();
  auto out = run.run(batch, nullptr);
  ASSERT_EQ(run.validated.size(), batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    EXPECT_EQ(run.validated[i].first, batch[i]);
    EXPECT_EQ(run.validated[i].second, 0u);
    EXPECT_EQ(out[i].device, 0u);
  }
  // What the driver said of the code joins the build's resources of the configurations timed.
  for (size_t i = 0; i < batch.size(); ++i) {
    const json& k = out[i].build.resources["kernels"];
    if (batch[i].at("X") == 8 && batch[i].at("Y") == 1) {
      EXPECT_EQ(k["k"]["registers"], 41) << out[i].build.resources.dump();
      EXPECT_EQ(k["k"]["driver_statistics"]["Register Count"], 41);
      EXPECT_EQ(out[i].build.resources["max_registers"], 41);
    } else {
      EXPECT_FALSE(out[i].build.resources.contains("max_registers")) << config_text(batch[i]);
    }
  }
  std::vector<Config> expected_timed;
  for (const auto& c : batch)
    if (c.at("Y") != 2) expected_timed.push_back(c);
  ASSERT_EQ(run.timed.size(), expected_timed.size());
  for (size_t i = 0; i < expected_timed.size(); ++i)
    EXPECT_EQ(run.timed[i].first, expected_timed[i]);
}

// Every configuration hangs: the first is charged `timeout`; the others of the batch share its
// code and are neither validated nor timed.
class HangingRunner : public FakeDevicesRunner {
 public:
  using FakeDevicesRunner::FakeDevicesRunner;

 protected:
  ValidationOutcome validate_on(size_t lane, const ConfigOutcome& o,
                                const ValidationOptions& vo) override {
    FakeDevicesRunner::validate_on(lane, o, vo);
    ValidationOutcome v;
    v.disposition = Disposition::timeout;
    v.message = "no result within 10 s";
    return v;
  }
};

TEST(Tuner, AfterAConfigurationHangsTheOthersAreNotRun) {
  KernelContext ctx;
  ctx.name = "fake";
  ctx.tuning = {{"X", {1, 2, 4, 8}, 1}, {"Y", {1, 2}, 1}};
  DeviceFacts dev;
  dev.max_threads_per_group = 64;
  FakeBackend be;
  Validator v(be, dev, RunnerOptions{}, ReferenceSource{});
  TuneOptions o;
  o.jobs = 1;  // built in the batch's order: the first configuration is the first evaluated
  o.workers_per_device = 1;
  o.tune_shapes = {Shape{{{"N", 64}}}};
  SourceRegions src = plain_plan();
  RunnerOptions ro;
  HangingRunner run(be, dev, ro, v, ctx, src, o);
  run.devices = 1;
  const std::vector<Config> batch = xy_batch();
  auto out = run.run(batch, nullptr);
  ASSERT_EQ(out.size(), batch.size());
  ASSERT_EQ(run.validated.size(), 1u);
  EXPECT_EQ(run.validated[0].first, batch[0]);
  EXPECT_TRUE(run.timed.empty());
  EXPECT_EQ(out[0].disposition, Disposition::timeout);
  for (size_t i = 1; i < out.size(); ++i) {
    EXPECT_EQ(out[i].disposition, Disposition::not_run) << config_text(batch[i]);
    EXPECT_EQ(out[i].message, kNotRunAfterTimeout);
  }
}

// A time budget already spent: the batch goes on only until a configuration has passed, and
// those begun after that are not run (the device runs at most one job ahead of its checks, so the
// first three may have begun before the first passed).
TEST(Tuner, PastTheTimeBudgetABatchEndsOnceAConfigurationPassed) {
  KernelContext ctx;
  ctx.name = "fake";
  ctx.tuning = {{"X", {1, 2, 4, 8}, 1}, {"Y", {1, 2}, 1}};
  DeviceFacts dev;
  dev.max_threads_per_group = 64;
  FakeBackend be;
  Validator v(be, dev, RunnerOptions{}, ReferenceSource{});
  TuneOptions o;
  o.jobs = 1;
  o.workers_per_device = 1;
  o.configs_per_job = 1;
  o.budget.seconds = 1e-9;
  o.tune_shapes = {Shape{{{"N", 64}}}};
  SourceRegions src = plain_plan();
  FakeDevicesRunner run(be, dev, RunnerOptions{}, v, ctx, src, o);
  run.devices = 1;
  const std::vector<Config> batch = xy_batch();
  auto out = run.run(batch, nullptr);
  ASSERT_EQ(out.size(), batch.size());
  EXPECT_EQ(out[0].disposition, Disposition::passed) << out[0].message;
  size_t ran = 0;
  while (ran < out.size() && out[ran].message != kNotRunAfterTimeBudget) ++ran;
  EXPECT_GE(ran, 1u);
  EXPECT_LE(ran, 3u);
  EXPECT_EQ(run.validated.size(), ran);
  for (size_t i = ran; i < out.size(); ++i) {
    EXPECT_EQ(out[i].disposition, Disposition::not_run) << config_text(batch[i]);
    EXPECT_EQ(out[i].message, kNotRunAfterTimeBudget) << config_text(batch[i]);
  }
}

// A runner whose clock passes the time budget during its first batch, and which ends that batch
// after its first configuration as BackendRunner does.
class BudgetSpentRunner : public TuningRunner {
 public:
  std::vector<ConfigOutcome> run(const std::vector<Config>& batch, TuneObserver*) override {
    ++batches;
    std::vector<ConfigOutcome> out(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      out[i].config = batch[i];
      out[i].disposition = i == 0 ? Disposition::passed : Disposition::not_run;
      out[i].score_ms = 1;
      if (i > 0) out[i].message = std::string(kNotRunAfterTimeBudget);
    }
    return out;
  }
  double elapsed_seconds() const override { return batches == 0 ? 0 : 100; }
  int batches = 0;
};

// The search keeps what ran, drops what the runner left unevaluated, and ends on its time budget.
TEST(Tuner, ASearchDropsWhatItsTimeBudgetLeftUnevaluatedAndEnds) {
  KernelContext ctx;
  ctx.name = "fake";
  ctx.tuning = {{"X", {1, 2, 4, 8}, 1}, {"Y", {1, 2}, 1}};
  DeviceFacts dev;
  dev.max_threads_per_group = 64;
  auto space = space_for(ctx, dev, {});
  ASSERT_TRUE(space) << space.error();
  auto strategy = make_strategy("exhaustive");
  ASSERT_TRUE(strategy);
  SearchOptions so;
  so.budget = Budget{8, 0, 10};
  so.batch = 4;
  BudgetSpentRunner run;
  SearchResult sr = search(*space, **strategy, run, so);
  EXPECT_EQ(run.batches, 1);
  EXPECT_EQ(sr.stop, "time budget");
  ASSERT_EQ(sr.outcomes.size(), 1u);
  EXPECT_EQ(sr.outcomes[0].disposition, Disposition::passed);
}

// Outcomes replayed from a cache: a hung configuration among failures of another kind is what the
// search is charged with, and the search ends after its batch.
TEST(Tuner, AHungConfigurationIsChargedAndEndsTheSearch) {
  KernelContext ctx;
  ctx.name = "fake";
  ctx.tuning = {{"X", {1, 2, 4, 8}, 1}, {"Y", {1, 2, 4, 8}, 1}};
  DeviceFacts dev;
  dev.max_threads_per_group = 64;
  FakeBackend be;
  Validator v(be, dev, RunnerOptions{}, ReferenceSource{});
  TuningCache known;
  known.params = {{"X", {1, 2, 4, 8}, 1}, {"Y", {1, 2, 4, 8}, 1}};
  for (int64_t x : {1, 2, 4, 8})
    for (int64_t y : {1, 2, 4, 8}) {
      CacheEntry e;
      e.config = Config{{"X", x}, {"Y", y}};
      e.stage = Stage::validate;
      e.disposition = x == 2 && y == 2 ? Disposition::timeout : Disposition::incorrect;
      e.reason = e.disposition == Disposition::timeout ? "hung" : "outputs differ";
      known.add(e);
    }
  TuneOptions o;
  o.strategy = "exhaustive";
  o.batch = 4;
  o.start = {Config{{"X", 2}, {"Y", 2}}};  // in the first batch, after the defaults
  o.reuse = &known;
  SourceRegions src = plain_plan();
  auto r = tune(be, dev, RunnerOptions{}, v, ctx, src, o);
  EXPECT_EQ(r.stop, "timeout");
  EXPECT_EQ(r.outcomes.size(), 4u);
  EXPECT_EQ(r.disposition, Disposition::timeout) << r.message;
  EXPECT_EQ(r.message, "hung");
}

// Every event an evaluation tells its observers, in order ("final" from tune/final_timing.h).
struct EventLog : TuneObserver {
  std::vector<std::string> events;
  void on_start(const TuningSpace&, const std::string&, size_t) override {
    events.push_back("start");
  }
  void on_phase(std::string_view phase, size_t, size_t) override { events.emplace_back(phase); }
  void on_screened(const ConfigOutcome& o) override {
    events.push_back("screened " + config_text(o.config));
  }
  void on_batch(const std::vector<size_t>&, const std::vector<ConfigOutcome>& outcomes,
                double) override {
    events.push_back("batch of " + std::to_string(outcomes.size()));
  }
  void on_evaluated(const ConfigOutcome& o) override {
    events.push_back("evaluated " + config_text(o.config));
  }
  void on_finish(const SearchResult& r) override { events.push_back("finish: " + r.stop); }
  void on_final(const Measurement& m) override { events.push_back("final " + m.shape.text()); }
};

// A final timing whose runner task passes every shape at 2 GFLOP/s.
class FakeFinalTimer : public FinalTimer {
 public:
  using FinalTimer::FinalTimer;
  std::vector<uint64_t> seeds;

 protected:
  std::vector<Measurement> measure_on(const BuildResult&, const Config& config,
                                      const std::vector<Shape>& shapes,
                                      const MeasureOptions& mo) override {
    seeds.push_back(mo.seed);
    std::vector<Measurement> ms;
    for (const Shape& s : shapes) {
      Measurement m;
      m.shape = s;
      m.config = config;
      m.disposition = Disposition::passed;
      m.gflops = 2;
      ms.push_back(m);
    }
    return ms;
  }
};

// A final timing spread over two devices: the shapes dealt in turn, both devices timing at once
// (each waits until the other has started; a bug fails the test instead of hanging it), the
// measurements back in the shapes' order, each naming its device, told to the observers in
// that order.
TEST(Tuner, ASpreadFinalTimingDealsTheShapesOverTheDevicesAtOnce) {
  struct Meeting {
    std::mutex mu;
    std::condition_variable cv;
    int arrived = 0;
  } meeting;
  struct Timer : FakeFinalTimer {
    using FakeFinalTimer::FakeFinalTimer;
    Meeting* meet = nullptr;
    std::vector<std::string> shapes;
    bool met = false;
    std::vector<Measurement> measure_on(const BuildResult& b, const Config& c,
                                        const std::vector<Shape>& s,
                                        const MeasureOptions& mo) override {
      for (const Shape& x : s) shapes.push_back(x.text());
      std::unique_lock<std::mutex> lock(meet->mu);
      ++meet->arrived;
      meet->cv.notify_all();
      met = meet->cv.wait_for(lock, std::chrono::seconds(120), [&] { return meet->arrived >= 2; });
      lock.unlock();
      return FakeFinalTimer::measure_on(b, c, s, mo);
    }
  };
  KernelContext ctx;
  DeviceFacts dev;
  FakeBackend be;
  RunnerOptions ro;
  Validator v{be, dev, ro, ReferenceSource{}};
  SourceRegions src = plain_plan();
  Timer t0(be, dev, ro, v, ctx, src, FinalTimingOptions{});
  Timer t1(be, dev, ro, v, ctx, src, FinalTimingOptions{});
  t0.meet = t1.meet = &meeting;
  EventLog log;
  const std::vector<Shape> shapes = {Shape{{{"N", 64}}}, Shape{{{"N", 128}}}, Shape{{{"N", 256}}}};
  auto ms = time_spread({&t0, &t1}, {"2", "3"}, BuildResult{}, Config{{"X", 1}}, shapes, {&log});
  EXPECT_TRUE(t0.met && t1.met);
  EXPECT_EQ(t0.shapes, (std::vector<std::string>{"N=64", "N=256"}));
  EXPECT_EQ(t1.shapes, (std::vector<std::string>{"N=128"}));
  ASSERT_EQ(ms.size(), 3u);
  const std::vector<std::string> devices = {"2", "3", "2"};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(ms[i].shape.text(), shapes[i].text());
    EXPECT_EQ(ms[i].device, devices[i]);
  }
  EXPECT_EQ(log.events, (std::vector<std::string>{"final N=64", "final N=128", "final N=256"}));
}

// Four configurations (X of 1 and 4, Y of 1 and 2) searched on one fake device, one compile at a
// time so that the events come in one order.
struct FourConfigurations {
  FourConfigurations() {
    ctx.name = "fake";
    ctx.tuning = {{"X", {1, 4}, 1}, {"Y", {1, 2}, 1}};
    dev.max_threads_per_group = 64;
    o.jobs = 1;
    o.workers_per_device = 1;
    o.tune_shapes = {Shape{{{"N", 64}}}};
    run.devices = 1;
  }
  KernelContext ctx;
  DeviceFacts dev;
  FakeBackend be;
  RunnerOptions ro;
  Validator v{be, dev, ro, ReferenceSource{}};
  TuneOptions o;
  SourceRegions src = plain_plan();
  FakeDevicesRunner run{be, dev, ro, v, ctx, src, o};
};

TEST(Tuner, ObserversHearTheSearchThenTheOutcomesThenTheFinalTiming) {
  FourConfigurations f;
  auto& [ctx, dev, be, ro, v, o, src, run] = f;
  auto space = space_for(ctx, dev, {});
  ASSERT_TRUE(space) << space.error();
  auto strategy = make_strategy("exhaustive");
  ASSERT_TRUE(strategy);
  SearchOptions so;
  so.budget = Budget{4, 0, 0};
  so.batch = 4;
  EventLog log;
  SearchResult sr = search(*space, **strategy, run, so, {&log});
  ASSERT_EQ(sr.outcomes.size(), 4u);
  FinalTimingOptions fo;
  fo.peak_tflops = 0.01;  // 10 GFLOP/s
  FakeFinalTimer timer(be, dev, ro, v, ctx, src, fo, {&log});
  const ConfigOutcome& best = sr.outcomes[sr.ranking().front()];
  auto ms = timer.time(best.build, best.config, {Shape{{{"N", 64}}}, Shape{{{"N", 128}}}}, 7);
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_DOUBLE_EQ(ms[0].pct_of_peak, 20.0);
  EXPECT_EQ(timer.seeds, std::vector<uint64_t>{7});

  // The search's configurations in evaluation order (Y = 2 fails validation: not screened).
  std::vector<std::string> configs, screened;
  for (const auto& c : sr.outcomes) {
    configs.push_back(config_text(c.config));
    if (c.config.at("Y") == 1) screened.push_back(config_text(c.config));
  }
  // Each configuration's build ends before the device takes it; the compiles of the next ones
  // go on meanwhile, so they are counted apart.
  std::vector<std::string> events;
  size_t compiles = 0;
  for (const auto& e : log.events) {
    if (e == "compile") {
      ++compiles;
      EXPECT_LE(std::count(events.begin(), events.end(), "validate"), compiles - 1);
    } else {
      events.push_back(e);
    }
  }
  EXPECT_EQ(compiles, 4u);
  std::vector<std::string> want = {"start"};
  for (const auto& c : configs) {
    want.push_back("validate");
    if (std::find(screened.begin(), screened.end(), c) == screened.end()) continue;
    want.push_back("screened " + c);
    want.push_back("time");
  }
  want.push_back("batch of 4");
  for (const auto& c : configs) want.push_back("evaluated " + c);
  want.push_back("finish: " + sr.stop);
  want.push_back("final N=64");
  want.push_back("final N=128");
  EXPECT_EQ(events, want);
}

// A strategy that does not need outcomes to propose (exhaustive): each batch's successor is built
// while the batch is evaluated, and every configuration is built once.
TEST(Tuner, TheNextBatchIsBuiltWhileTheDevicesEvaluateThisOne) {
  OneFakeDevice f;
  auto& [ctx, dev, be, ro, v, o, src] = f;
  // Records how many builds had been made when each configuration was validated.
  struct Counting : FakeDevicesRunner {
    using FakeDevicesRunner::FakeDevicesRunner;
    FakeBackend* backend = nullptr;
    std::vector<size_t> builds_seen;
    ValidationOutcome validate_on(size_t lane, const ConfigOutcome& c,
                                  const ValidationOptions& vo) override {
      {
        std::lock_guard<std::mutex> lock(mu);
        builds_seen.push_back(backend->built.size());
      }
      return FakeDevicesRunner::validate_on(lane, c, vo);
    }
  } run(be, dev, ro, v, ctx, src, o);
  run.devices = 1;
  run.backend = &be;
  auto space = space_for(ctx, dev, {});
  ASSERT_TRUE(space) << space.error();
  SearchOptions so;
  so.budget = Budget{8, 0, 0};
  so.batch = 4;
  PhaseCounts phases;
  SearchResult sr = search(*space, **make_strategy("exhaustive"), run, so, {&phases});
  ASSERT_EQ(sr.outcomes.size(), 8u);
  EXPECT_EQ(be.built.size(), 8u);  // none twice
  std::set<Config> distinct(be.built.begin(), be.built.end());
  EXPECT_EQ(distinct.size(), 8u);
  // The second batch's configurations were all built before any of them was validated.
  ASSERT_EQ(run.builds_seen.size(), 8u);
  for (size_t k = 4; k < 8; ++k) EXPECT_EQ(run.builds_seen[k], 8u) << k;
  EXPECT_EQ(phases.last["compile"], (std::pair<size_t, size_t>{4, 4}));
}

// Configurations built before a device takes them share its runner jobs, up to configs_per_job
// each; each is judged on its own.
TEST(Tuner, BuiltConfigurationsShareARunnerJobUpToTheLimit) {
  OneFakeDevice f;
  auto& [ctx, dev, be, ro, v, o, src] = f;
  o.configs_per_job = 3;
  FakeDevicesRunner run(be, dev, ro, v, ctx, src, o);
  run.devices = 1;
  const std::vector<Config> batch = xy_batch();
  run.prefetch(batch);  // built during the first run: all ready when the second starts
  run.run({batch[0]}, nullptr);
  run.groups.clear();
  run.validated.clear();
  auto out = run.run(batch, nullptr);
  EXPECT_EQ(run.groups, (std::vector<size_t>{3, 3, 3, 3, 3, 3, 2, 2}));
  ASSERT_EQ(run.validated.size(), batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    const Config& c = batch[i];
    EXPECT_EQ(run.validated[i].first, c);
    const Disposition want = c.at("Y") == 2   ? Disposition::incorrect
                             : c.at("X") == 2 ? Disposition::crashed
                                              : Disposition::passed;
    EXPECT_EQ(out[i].disposition, want) << config_text(c);
    if (want == Disposition::passed) {
      EXPECT_EQ(out[i].score_ms, static_cast<double>(c.at("X") + c.at("Y")));
    }
  }
  // A worker takes its share of what is left to take: of five with two workers, the first takes
  // three, and the other two go one each.
  o.workers_per_device = 2;
  o.configs_per_job = 4;
  FakeDevicesRunner two(be, dev, ro, v, ctx, src, o);
  two.devices = 1;
  two.prefetch({batch.begin(), batch.begin() + 5});
  two.run({batch[0]}, nullptr);
  two.groups.clear();
  two.run({batch.begin(), batch.begin() + 5}, nullptr);
  std::multiset<size_t> sizes(two.groups.begin(), two.groups.end());
  EXPECT_EQ(sizes, (std::multiset<size_t>{3, 3, 3, 1, 1}));
}

// Builds whose module holds X alone: configurations that differ only in Y make the same binary.
class SameBinaryBackend : public FakeBackend {
 public:
  explicit SameBinaryBackend(fs::path dir) : dir_(std::move(dir)) {}
  BuildResult build(const BuildRequest& req) override {
    BuildResult r = FakeBackend::build(req);
    const auto y = req.defines.at("Y"), x = req.defines.at("X");
    r.artifact = dir_ / fmt::format("k-x{}-y{}.bin", x, y);
    EXPECT_TRUE(write_file(r.artifact, fmt::format("kernel for X={}", x)));
    return r;
  }

 private:
  fs::path dir_;
};

// One fake device whose builds write their modules into a folder of their own (SameBinaryBackend),
// removed at the end, under the launch plan `host`; its runners use that one device.
struct SameBinaryDevice : OneFakeDevice {
  explicit SameBinaryDevice(const std::string& host)
      : made(make_temp_dir("peak-tuner-binaries-")), binaries(made ? *made : fs::path()) {
    src.host = host;
  }
  ~SameBinaryDevice() {
    std::error_code ec;
    if (made) fs::remove_all(*made, ec);
  }
  std::unique_ptr<FakeDevicesRunner> runner(const TuneOptions& opts) {
    auto r = std::make_unique<FakeDevicesRunner>(binaries, dev, ro, v, ctx, src, opts);
    r->devices = 1;
    return r;
  }
  Result<fs::path> made;
  SameBinaryBackend binaries;
};

// Configurations that build the same module and launch it alike (a launch plan reading X alone)
// are evaluated once: in one batch, and across batches. Y = 2 would fail validation on its own;
// sharing the evaluation of its Y = 1 twin, it passes with it.
TEST(Tuner, ConfigurationsWithTheSameBinaryShareOneEvaluation) {
  SameBinaryDevice f("launch k\n  grid = (X)\n  block = (1)\n");
  ASSERT_TRUE(f.made) << f.made.error();
  auto runner = f.runner(f.o);
  FakeDevicesRunner& run = *runner;
  const std::vector<Config> batch = xy_batch();
  auto out = run.run(batch, nullptr);
  ASSERT_EQ(out.size(), batch.size());
  std::vector<Config> want;
  for (const auto& c : batch)
    if (c.at("Y") == 1) want.push_back(c);
  std::vector<Config> validated;
  for (const auto& [c, lane] : run.validated) validated.push_back(c);
  EXPECT_EQ(validated, want);
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].at("Y") == 1) continue;
    const ConfigOutcome& twin = out[i - 1];  // (X, 1) comes just before (X, 2)
    EXPECT_EQ(out[i].disposition, twin.disposition) << config_text(batch[i]);
    EXPECT_EQ(out[i].score_ms, twin.score_ms);
    EXPECT_EQ(out[i].message.rfind("the evaluation of " + config_text(twin.config), 0), 0u)
        << out[i].message;
    for (const auto& m : out[i].measurements) EXPECT_EQ(m.config, batch[i]);
  }
  // A later batch: its twins were evaluated before, and nothing runs.
  run.validated.clear();
  auto again = run.run({Config{{"X", 4}, {"Y", 2}}}, nullptr);
  EXPECT_TRUE(run.validated.empty());
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].disposition, Disposition::passed);
  EXPECT_EQ(again[0].score_ms, 5.0);
}

// Searches that validate on the same shapes (one shape seed: `peak tune --classes`, a search per
// class) share their passed validations through a ValidationMemo: a binary that one search
// validated is only screened by the next, on that search's own tuning shapes. A failed
// validation is not shared, and without a fixed seed (hidden shapes drawn afresh) nothing is.
TEST(Tuner, SearchesSharingAValidationMemoValidateABinaryOnce) {
  // Every configuration its own binary: the plan reads both parameters.
  SameBinaryDevice f("launch k\n  grid = (X, Y)\n  block = (1)\n");
  ASSERT_TRUE(f.made) << f.made.error();
  TuneOptions& o = f.o;
  o.validation.shape_seed = 42;
  o.validation_memo = std::make_shared<ValidationMemo>();
  const std::vector<Config> batch = xy_batch();
  auto first_runner = f.runner(o);
  FakeDevicesRunner& first = *first_runner;
  auto one = first.run(batch, nullptr);
  EXPECT_EQ(first.validated.size(), batch.size());
  EXPECT_EQ(o.validation_memo->size(), 4u);  // Y = 1 passes validation, Y = 2 does not

  TuneOptions o2 = o;  // the next class: other tuning shapes, the same memo and seed
  o2.tune_shapes = {Shape{{{"N", 128}}}};
  auto second_runner = f.runner(o2);
  FakeDevicesRunner& second = *second_runner;
  auto two = second.run(batch, nullptr);
  ASSERT_EQ(two.size(), batch.size());
  std::vector<Config> revalidated, failed;
  for (const auto& [c, lane] : second.validated) revalidated.push_back(c);
  for (const auto& c : batch)
    if (c.at("Y") == 2) failed.push_back(c);
  EXPECT_EQ(revalidated, failed);
  EXPECT_EQ(second.timed, first.timed);  // every configuration that passed is screened again
  for (size_t i = 0; i < batch.size(); ++i) {
    EXPECT_EQ(two[i].disposition, one[i].disposition) << config_text(batch[i]);
    if (batch[i].at("Y") == 1 && batch[i].at("X") != 2) {  // X = 2 crashes when timed
      EXPECT_EQ(two[i].message.rfind("validated by an earlier search", 0), 0u) << two[i].message;
    }
  }

  TuneOptions fresh = o2;  // hidden shapes drawn afresh by every search
  fresh.validation.shape_seed = 0;
  fresh.validation_memo = std::make_shared<ValidationMemo>();
  auto a = f.runner(fresh), b = f.runner(fresh);
  a->run(batch, nullptr);
  b->run(batch, nullptr);
  EXPECT_EQ(fresh.validation_memo->size(), 0u);
  EXPECT_EQ(b->validated.size(), batch.size());
}

// An adaptive strategy is told each batch's outcomes before it proposes the next: nothing is
// built ahead.
TEST(Tuner, AnAdaptiveStrategysNextBatchIsNotBuiltAhead) {
  OneFakeDevice f;
  auto& [ctx, dev, be, ro, v, o, src] = f;
  FakeDevicesRunner run(be, dev, ro, v, ctx, src, o);
  run.devices = 1;
  auto space = space_for(ctx, dev, {});
  ASSERT_TRUE(space) << space.error();
  SearchOptions so;
  so.budget = Budget{4, 0, 0};
  so.batch = 2;
  auto strategy = make_strategy("annealing");
  ASSERT_TRUE(strategy);
  ASSERT_TRUE((*strategy)->adaptive());
  SearchResult sr = search(*space, **strategy, run, so, {});
  EXPECT_EQ(be.built.size(), sr.outcomes.size());
}

// A cancelled search tells no outcomes: its evaluation ends not_run, recording no builds.
TEST(Tuner, ACancelledSearchTellsNoOutcomes) {
  const TuningCache cache = testing::valley_cache();
  SimulationRunner sim(cache);
  size_t polls = 0;
  SearchOptions so;
  so.budget = Budget{16, 0, 0};
  so.cancelled = [&] { return ++polls > 1; };  // after the first batch
  EventLog log;
  SearchResult sr = search(*cache.space(), **make_strategy("exhaustive"), sim, so, {&log});
  EXPECT_EQ(sr.stop, "cancelled");
  EXPECT_FALSE(sr.outcomes.empty());
  for (const auto& e : log.events) EXPECT_EQ(e.rfind("evaluated", 0), std::string::npos) << e;
  EXPECT_EQ(log.events.back(), "finish: cancelled");
}

}  // namespace
}  // namespace peak
