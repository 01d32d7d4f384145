#pragma once
// Private to the strategies (strategy*.cpp): what every strategy remembers, and the factories.
#include <optional>
#include <random>

#include "tune/strategy.h"

namespace peak::strategy_detail {

inline constexpr double kFailed = std::numeric_limits<double>::infinity();

// The observations so far and a random engine; every strategy holds one.
class Memory {
 public:
  void reset(const TuningSpace& space, uint64_t seed);
  void record(const std::vector<Observation>& observations);
  const TuningSpace& space() const { return *space_; }
  size_t size() const { return space_->size(); }
  bool seen(size_t i) const { return seen_[i] != 0; }
  size_t count() const { return count_; }
  // The time of a configuration; kFailed when it failed or was not evaluated.
  double score(size_t i) const { return score_[i]; }
  std::optional<size_t> best() const { return best_; }
  // The observed configurations in the order they were told.
  const std::vector<size_t>& history() const { return history_; }
  // A configuration not evaluated yet, uniformly at random (nullopt when none is left).
  std::optional<size_t> random_unseen();
  // A valid configuration near `coords`: itself when valid, else `coords` with random values of
  // random parameters redrawn (up to `tries` times); nullopt when none was found.
  std::optional<size_t> repair(std::vector<int> coords, int tries = 32);
  std::mt19937_64 rng;
  double uniform() { return std::uniform_real_distribution<double>(0, 1)(rng); }
  size_t below(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }

 private:
  const TuningSpace* space_ = nullptr;
  std::vector<uint8_t> seen_;
  std::vector<double> score_;
  std::vector<size_t> unseen_;  // configurations not evaluated yet (any order)
  std::vector<size_t> where_;   // index -> position in unseen_
  std::vector<size_t> history_;
  std::optional<size_t> best_;
  size_t count_ = 0;
};

std::unique_ptr<Strategy> make_exhaustive();
std::unique_ptr<Strategy> make_random();
std::unique_ptr<Strategy> make_genetic();
std::unique_ptr<Strategy> make_annealing();
std::unique_ptr<Strategy> make_basin();
std::unique_ptr<Strategy> make_bayes();
std::unique_ptr<Strategy> make_auto();

// Up to `max` one-parameter neighbors of `from` not evaluated yet, in random order with the
// adjacent values (the next smaller or larger one) first: the step of a greedy descent.
std::vector<size_t> unseen_neighbors(Memory& m, size_t from, size_t max);

}  // namespace peak::strategy_detail
