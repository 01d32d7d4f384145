// The real runner's pruning and compile path, with a fake backend (compile only: nothing runs).
#include "tune/tuner.h"

#include <mutex>

#include <gtest/gtest.h>

#include "tune/prune.h"

namespace peak {
namespace {

// Builds every configuration except X=3; a group has X * Y threads. The launch plan (kPlan)
// requires that X * Y != 4.
class FakeBackend : public Backend {
 public:
  std::string name() const override { return "fake"; }
  std::string source_extension() const override { return ".txt"; }
  std::map<std::string, std::string> translation_table() const override { return {}; }
  std::filesystem::path runner() const override { return {}; }
  std::vector<std::pair<std::string, std::string>> toolchain() const override { return {}; }
  Result<DeviceFacts> probe(const std::string&, bool) override { return DeviceFacts{}; }
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
  PlanDialect plan_dialect() const override {
    PlanDialect d;
    d.backend = "fake";
    d.args = false;
    d.shared = false;
    return d;
  }
  std::string baseline(const KernelContext&, const DeviceFacts&) const override { return ""; }
  std::vector<Config> built;

 protected:
  PlanResult resolve_plan(LaunchPlan&, const BuildResult&, const DeviceFacts&) override {
    return {};
  }

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

}  // namespace
}  // namespace peak
