#pragma once
// The simulation runner: replays the outcomes of a tuning cache instead of running kernels, with
// a simulated clock (each batch costs the makespan of its compiles on `jobs` parallel workers plus
// the validation and timing seconds of its configurations, as recorded), so strategies are
// developed, tested and benchmarked without the device. The pruning rules (tune/prune.h) are
// applied again to the recorded resources.
#include "tune/cache.h"
#include "tune/search.h"

namespace peak {

// The outcome a cache entry records (as the search loop and the observers see it).
ConfigOutcome outcome_of(const CacheEntry& e);

struct SimulationOptions {
  int jobs = 0;  // parallel compiles (0 = the recorded run's)
};

class SimulationRunner : public TuningRunner {
 public:
  SimulationRunner(const TuningCache& cache, SimulationOptions opts = {});
  // A configuration missing from the cache is not_run ("not in the tuning cache") at no cost.
  std::vector<ConfigOutcome> run(const std::vector<Config>& batch, TuneObserver* observer) override;
  double elapsed_seconds() const override { return clock_; }

 private:
  const TuningCache& cache_;
  int jobs_ = 1;
  double clock_ = 0;
};

}  // namespace peak
