#pragma once
// The tuning benchmark (`peak bench tuning`): every strategy searches every measured space in
// simulation, once per seed; for each, the number of evaluations and the simulated wall time
// until the best configuration found is within 95% and 99% of the space's best (its time at
// most best / 0.95, best / 0.99), as medians over the seeds. Numbers, not a timed test: the
// simulation is deterministic, so the table is the same on every machine.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tune/cache.h"

namespace peak {

inline constexpr int kBenchFormatVersion = 1;

struct TuningBenchOptions {
  std::vector<std::string> strategies;  // empty = every strategy
  int seeds = 20;                       // seeds 1..seeds
  size_t batch = 8;                     // configurations per batch
  int jobs = 0;                         // parallel compiles (0 = each cache's recorded run)
  std::vector<double> targets = {0.95, 0.99};
};

struct TuningBenchTarget {
  double target = 0;        // fraction of the best performance (0.99)
  double evaluations = -1;  // median over the seeds; -1 when most runs never reached it
  double seconds = -1;      // median simulated seconds; -1 likewise
  int reached = 0;          // runs that reached it
};

struct TuningBenchRow {
  std::string space;       // the cache's label (two caches may share one: same kernel and step)
  size_t space_index = 0;  // its space in TuningBenchReport::spaces
  std::string strategy;
  std::vector<TuningBenchTarget> targets;
};

struct TuningBenchSpace {
  std::string label;  // kernel/transformation (device), from the cache
  std::string path;
  size_t configs = 0;  // valid configurations
  size_t passed = 0;   // configurations that passed
  double best_ms = 0;
  double exhaustive_seconds = 0;  // simulated time of evaluating every configuration
  double model_spearman = 0;      // rank correlation of the model's estimate with speed
  size_t model_points = 0;        // passing configurations the correlation was computed on
};

struct TuningBenchReport {
  TuningBenchOptions options;
  std::vector<TuningBenchSpace> spaces;
  std::vector<TuningBenchRow> rows;  // per space, per strategy
  nlohmann::json to_json() const;
  std::string text() const;
  // The fraction of a space's configurations a row needed to reach `target` (-1 when not).
  double fraction_of_space(const TuningBenchRow& row, size_t target_index) const;
};

// Fails on an unknown strategy or a cache that does not cover its whole space.
Result<TuningBenchReport> bench_tuning(
    const std::vector<std::pair<std::string, TuningCache>>& caches, const TuningBenchOptions& opts);

// Spearman's rank correlation of two equally long series (ties get their mean rank).
double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace peak
