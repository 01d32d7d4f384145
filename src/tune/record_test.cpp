// Tuning searches recorded in a store, and exported back as tuning caches.
#include "tune/record.h"

#include <cstdint>

#include <gtest/gtest.h>

#include "tune/simulation.h"
#include "tune/testing.h"
#include "tune/tuner.h"
#include "util/fs.h"
#include "util/temp_dir_testing.h"

namespace peak {
namespace {

class RecordTest : public testing::TempDirTest {
 protected:
  RecordTest() : TempDirTest("peak-record-test-") {}
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(TempDirTest::SetUp());
    auto s = Store::open(dir_ / ".peak", true);
    ASSERT_TRUE(s) << s.error();
    store_ = std::move(*s);
    CheckpointRecord c;
    c.transformation = "thread-tiling";
    c.message = "apply thread-tiling";
    c.context_blob = *store_->put_blob("kernel");
    c.source_blob = *store_->put_blob("source");
    checkpoint_ = *store_->add_checkpoint(c);
  }
  void TearDown() override {
    store_.reset();
    TempDirTest::TearDown();
  }
  // Ends a search once `n` configurations were evaluated, as a killed process would.
  class KillAfter : public TuneObserver {
   public:
    explicit KillAfter(size_t n) : n_(n) {}
    void on_batch(const std::vector<size_t>& indices, const std::vector<ConfigOutcome>&,
                  double) override {
      seen_ += indices.size();
    }
    bool done() const override { return seen_ >= n_; }

   private:
    size_t n_, seen_ = 0;
  };
  // Runs `strategy` over the valley in simulation, recording into the store; stopped after
  // `kill_after` evaluations when that is not 0.
  std::pair<SearchResult, int64_t> record(const TuningCache& cache, const std::string& strategy,
                                          Budget budget, size_t kill_after = 0) {
    auto space = cache.space();
    auto s = make_strategy(strategy);
    SimulationRunner sim(cache);
    RecordTarget t;
    t.checkpoint_id = checkpoint_;
    t.source_hash = std::string(64, 'b');
    t.kernel = cache.kernel;
    t.shape = "M=256 N=256 K=256";
    t.toolchain = "test";
    t.device = cache.device;
    t.jobs = cache.jobs;
    t.work.flops = 1e6;
    t.options = {{"budget", budget.text()}};
    StoreRecorder rec(*store_, t);
    SearchOptions so;
    so.budget = budget;
    KillAfter kill(kill_after > 0 ? kill_after : SIZE_MAX);
    SearchResult r = search(*space, **s, sim, so, {&rec, &kill});
    EXPECT_EQ(rec.error(), "");
    EXPECT_TRUE(rec.run_id());
    return {r, rec.run_id().value_or(0)};
  }
  const fs::path& dir_ = temp_dir();
  std::unique_ptr<Store> store_;
  int64_t checkpoint_ = 0;
};

TEST_F(RecordTest, EveryConfigurationIsRecordedPrunedOnesWithWhy) {
  TuningCache cache = testing::valley_cache();
  auto [result, run] = record(cache, "auto", Budget{40, 0, 0});
  auto rows = store_->tuning_configs(run);
  ASSERT_TRUE(rows);
  auto space = cache.space();
  ASSERT_EQ(rows->size(), space->pruned().size() + 40);
  size_t validity = 0;
  for (const auto& r : *rows) {
    if (r.position < 0) {
      ++validity;
      EXPECT_EQ(r.stage, "validity");
      EXPECT_EQ(r.disposition, "invalid_config");
      EXPECT_NE(r.reason.find("tuning_valid: `A * B <= 32` is false"), std::string::npos);
    }
  }
  EXPECT_EQ(validity, space->pruned().size());
  auto runs = store_->tuning_runs();
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ(runs->front().strategy, "auto");
  EXPECT_NE(runs->front().options_json.find("\"limit\":40"), std::string::npos);
  EXPECT_EQ(*latest_tuning_run(*store_, checkpoint_), run);
  auto none = latest_tuning_run(*store_, checkpoint_ + 1);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().find("peak tune"), std::string::npos);
}

// A space where the validity expression rules out more configurations than get rows: the store
// keeps their count per false conjunct, and the exported search still holds every one of them,
// with the same reason, rebuilt from the space's definition.
TEST_F(RecordTest, ALargePrunedSetIsSummarizedAndRebuiltOnExport) {
  std::vector<SpaceParam> params;
  for (const char* n : {"A", "B", "C", "D", "E", "F"}) params.push_back({n, {1, 2, 4, 8}, 1});
  TuningCache cache = testing::synthetic_cache(
      params, [](const Config& c) { return 1.0 + static_cast<double>(c.at("A") * c.at("F")); },
      "A * B * C <= 4 && D * E <= 8");
  auto space = cache.space();
  ASSERT_TRUE(space) << space.error();
  ASSERT_GT(space->pruned().size(), kValidityRowLimit);
  auto [result, run] = record(cache, "exhaustive", Budget{});
  auto rows = store_->tuning_configs(run);
  ASSERT_TRUE(rows);
  EXPECT_EQ(rows->size(), space->size());  // the evaluated ones only
  auto runs = store_->tuning_runs();
  ASSERT_EQ(runs->size(), 1u);
  auto sp = nlohmann::json::parse(runs->front().space_json);
  const auto& vp = sp["validity_pruned"];
  EXPECT_EQ(vp["count"], space->pruned().size());
  EXPECT_EQ(vp["rows"], false);
  int64_t by_reason = 0;
  for (const auto& [conjunct, n] : vp["by_reason"].items()) {
    EXPECT_EQ(conjunct.rfind("tuning_valid: `", 0), 0u) << conjunct;
    by_reason += n.get<int64_t>();
  }
  EXPECT_EQ(by_reason, static_cast<int64_t>(space->pruned().size()));
  auto back = cache_from_store(*store_, run);
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->entries().size(), space->size() + space->pruned().size());
  for (const auto& p : space->pruned()) {
    const CacheEntry* b = back->find(p.config);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->stage, Stage::validity);
    EXPECT_EQ(b->reason, p.reason);
  }
}

TEST_F(RecordTest, AnExhaustiveSearchExportsTheCacheItReplayed) {
  TuningCache cache = testing::valley_cache();
  auto [result, run] = record(cache, "exhaustive", Budget{});
  auto back = cache_from_store(*store_, run);
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->transformation, "thread-tiling");
  EXPECT_EQ(back->kernel, cache.kernel);
  EXPECT_EQ(back->params, cache.params);
  EXPECT_EQ(back->valid, cache.valid);
  EXPECT_EQ(back->jobs, cache.jobs);
  EXPECT_EQ(back->strategy, "exhaustive");
  EXPECT_EQ(back->shape, "M=256 N=256 K=256");
  EXPECT_EQ(back->work.flops, 1e6);
  // The same outcomes (plus the configurations the validity expression ruled out).
  auto space = cache.space();
  EXPECT_EQ(back->entries().size(), space->size() + space->pruned().size());
  for (const auto& e : cache.entries()) {
    const CacheEntry* b = back->find(e.config);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->disposition, e.disposition);
    EXPECT_EQ(b->score_ms, e.score_ms);
    EXPECT_EQ(b->compile_s, e.compile_s);
    EXPECT_EQ(b->validate_s, e.validate_s);
  }
  // Replaying the export gives the search the same results as the original.
  auto s1 = make_strategy("bayes");
  auto s2 = make_strategy("bayes");
  SimulationRunner a(cache), b(*back);
  SearchOptions so;
  so.budget = Budget{30, 0, 0};
  EXPECT_EQ(search(*space, **s1, a, so).indices, search(*back->space(), **s2, b, so).indices);
  EXPECT_FALSE(cache_from_store(*store_, run + 7));
}

TEST_F(RecordTest, AnInterruptedSearchResumesWithoutMeasuringAgain) {
  TuningCache cache = testing::valley_cache();
  // A search of 40 evaluations killed after three batches (24 evaluations).
  auto [first, run] = record(cache, "bayes", Budget{40, 0, 0}, 24);
  ASSERT_EQ(first.outcomes.size(), 24u);
  auto known =
      recorded_outcomes(*store_, std::string(64, 'b'), "M=256 N=256 K=256", cache.device.name);
  ASSERT_TRUE(known) << known.error();
  EXPECT_EQ(known->entries().size(), 24u);  // the evaluated ones, not the ruled-out ones
  EXPECT_TRUE(
      recorded_outcomes(*store_, std::string(64, 'c'), "M=256 N=256 K=256", cache.device.name)
          ->entries()
          .empty());
  EXPECT_TRUE(recorded_outcomes(*store_, std::string(64, 'b'), "M=1 N=1 K=1", cache.device.name)
                  ->entries()
                  .empty());
  // The same search again, on a device that now measures everything twice as slow: the first 24
  // outcomes are the recorded ones (the same proposals, since the strategy is told the same
  // outcomes), the rest come from the device.
  TuningCache slower = cache;
  for (auto e : cache.entries()) {
    e.score_ms *= 2;
    slower.add(e);
  }
  SimulationRunner device(slower);
  ReuseRunner resumed(device, *known);
  auto s = make_strategy("bayes");
  SearchOptions so;
  so.budget = Budget{40, 0, 0};
  SearchResult r = search(*cache.space(), **s, resumed, so);
  EXPECT_EQ(resumed.reused, 24u);
  ASSERT_EQ(r.outcomes.size(), 40u);
  for (size_t i = 0; i < 24; ++i) {
    EXPECT_EQ(r.indices[i], first.indices[i]);
    EXPECT_EQ(r.outcomes[i].score_ms, first.outcomes[i].score_ms);
  }
  for (size_t i = 24; i < 40; ++i) {
    if (r.outcomes[i].disposition == Disposition::passed) {
      EXPECT_EQ(r.outcomes[i].score_ms, 2 * cache.find(r.outcomes[i].config)->score_ms);
    }
  }
}

}  // namespace
}  // namespace peak
