#pragma once
// Search strategies: which configurations of a tuning space to evaluate next. A strategy only
// proposes; the search loop (tune/search.h) evaluates its proposals in batches through a runner
// (real or simulated), enforces the budget and tells the strategy what it observed. Every
// strategy is deterministic for a seed: the same observations give the same proposals.
//
//   exhaustive  every configuration, in the space's order
//   random      every configuration, in a random order
//   genetic     a genetic algorithm: tournament selection, uniform crossover, mutation
//   annealing   simulated annealing over one-parameter moves
//   basin       basin hopping: greedy descent over one-parameter moves, random hops out
//   bayes       a Gaussian-process surrogate of log(time) with expected improvement
//   auto        the default: bayes, then a greedy descent around the best (see strategy.cpp)
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tune/space.h"
#include "util/result.h"

namespace peak {

inline constexpr std::string_view kDefaultStrategy = "auto";

// What the search loop tells a strategy about one evaluated configuration.
struct Observation {
  size_t index = 0;  // into the space
  bool ok = false;   // passed: built, valid and timed
  double score = 0;  // time on the tuning shape in ms (lower is better); meaningful when ok
};

// A budget of evaluations (the larger of a count and a fraction of the valid space; both zero:
// the whole space) and of seconds (no batch starts once they are spent; 0 = none).
struct Budget {
  size_t evaluations = 0;
  double fraction = 0;
  double seconds = 0;
  // Evaluations allowed in a space of `space_size` valid configurations.
  size_t limit(size_t space_size) const;
  std::string text() const;  // "24,15%,600s"
  // "N", "P%", "T" terms separated by commas: "60", "15%", "300s", "24,15%,600s"; a time is
  // seconds, minutes or hours: "300s", "10m", "1.5h".
  static Result<Budget> parse(std::string_view spec);
};

// A time bound as a person reads it: "45 s", "10 min", "1 h 30 min".
std::string duration_text(double seconds);

// The budget of a strategy named without one: the whole space for exhaustive, `otherwise` for
// the others.
Budget default_budget(std::string_view strategy, const Budget& otherwise);

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  // Called once before the search: the space, the seed and the evaluations the search allows.
  virtual void start(const TuningSpace& space, uint64_t seed, size_t limit) = 0;
  // Up to `max` configurations (indices into the space) to evaluate next, best guesses first;
  // empty when the strategy has nothing more to propose. Configurations already observed are
  // skipped by the search loop.
  virtual std::vector<size_t> ask(size_t max) = 0;
  // What was observed: every evaluated configuration is told once, in evaluation order (the
  // configurations the search starts from included).
  virtual void tell(const std::vector<Observation>& observations) = 0;
  // False when what ask() proposes does not depend on what tell() said: the search may then ask
  // for the next batch before this one is evaluated, and have it built meanwhile.
  virtual bool adaptive() const { return true; }
};

struct StrategyInfo {
  std::string name;
  std::string summary;
};
const std::vector<StrategyInfo>& strategy_infos();
std::vector<std::string> strategy_names();
// An unknown name is an error listing the known ones.
Result<std::unique_ptr<Strategy>> make_strategy(std::string_view name);

}  // namespace peak
