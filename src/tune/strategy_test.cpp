// Strategies in simulation: determinism per seed, budgets, the start configurations, and how
// quickly each finds the best of a synthetic space.
#include "tune/strategy.h"

#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "tune/search.h"
#include "tune/simulation.h"
#include "tune/testing.h"

namespace peak {
namespace {

// Ends a search once a configuration within `target` of the space's best is found.
class StopAtTarget : public TuneObserver {
 public:
  StopAtTarget(double best_ms, double target) : limit_(best_ms / target * (1 + 1e-12)) {}
  void on_batch(const std::vector<size_t>&, const std::vector<ConfigOutcome>& outcomes,
                double) override {
    for (const auto& o : outcomes)
      if (o.disposition == Disposition::passed && o.score_ms <= limit_) done_ = true;
  }
  bool done() const override { return done_; }

 private:
  double limit_;
  bool done_ = false;
};

SearchResult simulate(const TuningCache& cache, const std::string& strategy, uint64_t seed,
                      Budget budget = {}, size_t batch = 8, std::vector<Config> start = {},
                      double target = 0) {
  auto space = cache.space();
  EXPECT_TRUE(space) << space.error();
  auto s = make_strategy(strategy);
  EXPECT_TRUE(s) << s.error();
  SimulationRunner sim(cache);
  SearchOptions so;
  so.budget = budget;
  so.seed = seed;
  so.batch = batch;
  so.start = std::move(start);
  StopAtTarget stop(cache.best()->score_ms, target > 0 ? target : 1);
  std::vector<TuneObserver*> observers;
  if (target > 0) observers.push_back(&stop);
  return search(*space, **s, sim, so, observers);
}

// Evaluations until the best time found is within `target` of the space's best.
size_t evaluations_to(const TuningCache& cache, const SearchResult& r, double target) {
  double best = cache.best()->score_ms;
  double found = 1e300;
  for (size_t i = 0; i < r.outcomes.size(); ++i) {
    if (r.outcomes[i].disposition == Disposition::passed)
      found = std::min(found, r.outcomes[i].score_ms);
    if (found <= best / target) return i + 1;
  }
  return SIZE_MAX;
}

TEST(Budget, ParsesCountsFractionsAndSeconds) {
  auto b = Budget::parse("24,15%,600s");
  ASSERT_TRUE(b) << b.error();
  EXPECT_EQ(b->evaluations, 24u);
  EXPECT_DOUBLE_EQ(b->fraction, 0.15);
  EXPECT_DOUBLE_EQ(b->seconds, 600);
  EXPECT_EQ(b->text(), "24,15%,600s");
  // The larger of the count and the fraction, never more than the space.
  EXPECT_EQ(b->limit(100), 24u);
  EXPECT_EQ(b->limit(1000), 150u);
  EXPECT_EQ(b->limit(10), 10u);
  EXPECT_EQ(Budget{}.limit(77), 77u);
  EXPECT_EQ(Budget::parse("all")->limit(5), 5u);
  EXPECT_EQ(Budget::parse("90s")->limit(5), 5u);
  // A time in minutes or hours (`--budget 10m`).
  EXPECT_DOUBLE_EQ(Budget::parse("10m")->seconds, 600);
  EXPECT_DOUBLE_EQ(Budget::parse("24,1.5h")->seconds, 5400);
  EXPECT_EQ(Budget::parse("24,1.5h")->evaluations, 24u);
  for (const char* bad : {"", "x", "-3", "1.5", "150%", "10k", "m", "0m", "5,,6", "0"}) {
    auto r = Budget::parse(bad);
    EXPECT_FALSE(r) << bad;
    if (!r) {
      EXPECT_NE(r.error().find("e.g. 24,15%,600s"), std::string::npos) << r.error();
    }
  }
}

TEST(Budget, DurationsReadAsAPersonWritesThem) {
  EXPECT_EQ(duration_text(45), "45 s");
  EXPECT_EQ(duration_text(600), "10 min");
  EXPECT_EQ(duration_text(5400), "90 min");
  EXPECT_EQ(duration_text(7200), "2 h");
  EXPECT_EQ(duration_text(9000), "2 h 30 min");
}

TEST(Strategies, UnknownNameListsTheKnownOnes) {
  auto s = make_strategy("simplex");
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("unknown tuning strategy 'simplex'"), std::string::npos);
  for (const auto& name : strategy_names()) {
    EXPECT_NE(s.error().find(name), std::string::npos) << name;
    auto made = make_strategy(name);
    ASSERT_TRUE(made);
    EXPECT_EQ((*made)->name(), name);
  }
  EXPECT_EQ(strategy_names().front(), std::string(kDefaultStrategy));
  EXPECT_EQ(strategy_names().size(), strategy_infos().size());
}

TEST(Strategies, AreDeterministicPerSeedAndEvaluateEachConfigurationOnce) {
  TuningCache cache = testing::valley_cache();
  for (const auto& name : strategy_names()) {
    SearchResult a = simulate(cache, name, 11, Budget{120, 0, 0});
    SearchResult b = simulate(cache, name, 11, Budget{120, 0, 0});
    EXPECT_EQ(a.indices, b.indices) << name;
    EXPECT_EQ(a.indices.size(), 120u) << name;
    EXPECT_EQ(std::set<size_t>(a.indices.begin(), a.indices.end()).size(), a.indices.size())
        << name;
    EXPECT_EQ(a.stop, "evaluation budget") << name;
    if (name != "exhaustive") {
      SearchResult c = simulate(cache, name, 12, Budget{120, 0, 0});
      EXPECT_NE(a.indices, c.indices) << name << ": another seed, another search";
    }
  }
}

TEST(Strategies, CoverTheWholeSpaceWithoutABudget) {
  std::vector<SpaceParam> params = {
      {"A", {1, 2, 4, 8}, 1}, {"B", {1, 2, 4, 8}, 1}, {"C", {1, 2, 4}, 1}};
  TuningCache cache = testing::synthetic_cache(params, [](const Config& c) {
    return static_cast<double>(c.at("A") * 3 + c.at("B") * c.at("C"));
  });
  size_t n = cache.space()->size();
  for (const auto& name : strategy_names()) {
    SearchResult r = simulate(cache, name, 3);
    // Every strategy either covers the space or says it has nothing more to propose.
    EXPECT_TRUE(r.stop == "space exhausted" || r.stop == "strategy done") << name << ": " << r.stop;
    EXPECT_LE(r.indices.size(), n) << name;
    if (name == "exhaustive" || name == "random") {
      EXPECT_EQ(r.indices.size(), n) << name;
    }
  }
}

// Records the runner's clock after each batch.
class Clock : public TuneObserver {
 public:
  void on_batch(const std::vector<size_t>&, const std::vector<ConfigOutcome>&,
                double elapsed) override {
    after.push_back(elapsed);
  }
  std::vector<double> after;
};

TEST(Strategies, HonorTheTimeBudgetOfTheSimulatedClock) {
  TuningCache cache = testing::valley_cache();
  auto space = cache.space();
  for (const auto& name : strategy_names()) {
    auto s = make_strategy(name);
    SimulationRunner sim(cache);
    SearchOptions so;
    so.budget = Budget{0, 0, 100};
    so.seed = 5;
    Clock clock;
    SearchResult r = search(*space, **s, sim, so, {&clock});
    EXPECT_EQ(r.stop, "time budget") << name;
    // Every batch started before the clock passed 100 s; the search stopped once it had.
    ASSERT_GE(clock.after.size(), 2u) << name;
    for (size_t b = 0; b + 1 < clock.after.size(); ++b) EXPECT_LT(clock.after[b], 100) << name;
    EXPECT_GE(clock.after.back(), 100) << name;
    EXPECT_EQ(r.seconds, clock.after.back()) << name;
  }
}

TEST(Strategies, StartFromTheDefaultsAndTheGivenConfigurations) {
  TuningCache cache = testing::valley_cache();
  auto space = cache.space();
  std::vector<Config> parent = {{{"A", 2}, {"B", 2}, {"C", 2}, {"D", 2}, {"E", 2}},
                                {{"A", 8}, {"B", 4}, {"C", 1}, {"D", 1}, {"E", 8}},
                                {{"A", 8}, {"B", 8}, {"C", 1}, {"D", 1}, {"E", 1}}};  // invalid
  for (const auto& name : strategy_names()) {
    SearchResult r = simulate(cache, name, 2, Budget{10, 0, 0}, 2, parent);
    ASSERT_GE(r.indices.size(), 3u);
    EXPECT_EQ(r.outcomes[0].config, (Config{{"A", 1}, {"B", 1}, {"C", 1}, {"D", 1}, {"E", 1}}))
        << name;
    EXPECT_EQ(r.outcomes[1].config, parent[0]) << name;
    EXPECT_EQ(r.outcomes[2].config, parent[1]) << name;
  }
}

// A runner that is cancelled during its second batch: the configurations after the first two of
// that batch are left unevaluated.
class CancelledDuringSecondBatch : public TuningRunner {
 public:
  explicit CancelledDuringSecondBatch(const TuningCache& cache) : sim_(cache) {}
  std::vector<ConfigOutcome> run(const std::vector<Config>& batch, TuneObserver* o) override {
    auto out = sim_.run(batch, o);
    if (++batches_ == 2) {
      cancelled = true;
      for (size_t k = 2; k < out.size(); ++k) {
        out[k].disposition = Disposition::not_run;
        out[k].message = std::string(kCancelledOutcome);
      }
    }
    return out;
  }
  double elapsed_seconds() const override { return sim_.elapsed_seconds(); }
  bool cancelled = false;

 private:
  SimulationRunner sim_;
  int batches_ = 0;
};

TEST(Search, ACancelledSearchKeepsWhatWasEvaluatedAndStops) {
  TuningCache cache = testing::valley_cache();
  auto space = cache.space();
  auto s = make_strategy("random");
  CancelledDuringSecondBatch runner(cache);
  SearchOptions so;
  so.cancelled = [&] { return runner.cancelled; };
  SearchResult r = search(*space, **s, runner, so);
  EXPECT_EQ(r.stop, "cancelled");
  ASSERT_EQ(r.outcomes.size(), 10u);  // the first batch of 8, then 2
  for (const auto& o : r.outcomes) EXPECT_NE(o.disposition, Disposition::not_run);
  // Cancelled before it starts: nothing is evaluated.
  runner.cancelled = true;
  auto s2 = make_strategy("random");
  EXPECT_TRUE(search(*space, **s2, runner, so).outcomes.empty());
}

// How many evaluations each strategy needs, at the median over seeds, to come within 1% of the
// best of a 1024-configuration valley. Deterministic: the same every run.
TEST(Strategies, AdaptiveOnesFindTheValleyFloorQuickly) {
  TuningCache cache = testing::valley_cache();
  const size_t n = cache.space()->size();
  auto median_evaluations = [&](const std::string& name) {
    std::vector<size_t> v;
    for (uint64_t seed = 1; seed <= 9; ++seed)
      v.push_back(evaluations_to(cache, simulate(cache, name, seed, {}, 8, {}, 0.99), 0.99));
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  size_t random = median_evaluations("random");
  EXPECT_GT(random, n / 10);  // one configuration in ~800: random search is slow here
  for (const char* name : {"basin", "bayes", "auto"})
    EXPECT_LE(median_evaluations(name), n * 15 / 100) << name;
  for (const char* name : {"genetic", "annealing"})
    EXPECT_LT(median_evaluations(name), random) << name;
}

}  // namespace
}  // namespace peak
