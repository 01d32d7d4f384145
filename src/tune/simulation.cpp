#include "tune/simulation.h"

#include <algorithm>

#include "tune/prune.h"

namespace peak {

ConfigOutcome outcome_of(const CacheEntry& e) {
  ConfigOutcome o;
  o.config = e.config;
  o.disposition = e.disposition;
  o.stage = e.stage;
  o.message = e.reason;
  o.score_ms = e.score_ms;
  o.build.resources = e.resources;
  o.build.disposition =
      e.stage == Stage::compile || e.stage == Stage::launch ? e.disposition : Disposition::passed;
  o.launch = e.launch;
  o.compile_seconds = e.compile_s;
  o.validate_seconds = e.validate_s;
  o.time_seconds = e.time_s;
  return o;
}

SimulationRunner::SimulationRunner(const TuningCache& cache, SimulationOptions opts)
    : cache_(cache), jobs_(std::max(1, opts.jobs > 0 ? opts.jobs : cache.jobs)) {}

std::vector<ConfigOutcome> SimulationRunner::run(const std::vector<Config>& batch,
                                                 TuneObserver* observer) {
  const DeviceLimits limits = device_limits(cache_.device);
  std::vector<ConfigOutcome> out;
  std::vector<double> workers(static_cast<size_t>(jobs_), 0.0);
  double serial = 0;
  for (const Config& c : batch) {
    const CacheEntry* e = cache_.find(c);
    if (!e) {
      ConfigOutcome o;
      o.config = c;
      o.disposition = Disposition::not_run;
      o.message = "not in the tuning cache";
      out.push_back(std::move(o));
      continue;
    }
    ConfigOutcome o = outcome_of(*e);
    if (e->stage == Stage::validate || e->stage == Stage::time) {
      std::string why = resource_prune_reason(resource_usage(e->resources, e->launch), limits);
      if (!why.empty()) {
        o.disposition = Disposition::invalid_config;
        o.stage = Stage::resources;
        o.message = why;
        o.score_ms = 0;
        o.validate_seconds = o.time_seconds = 0;
      }
    }
    // The compiles of a batch run on `jobs` workers, each taking the next one in order.
    *std::min_element(workers.begin(), workers.end()) += o.compile_seconds;
    serial += o.validate_seconds + o.time_seconds;
    out.push_back(std::move(o));
  }
  clock_ += *std::max_element(workers.begin(), workers.end()) + serial;
  if (observer) observer->on_phase("time", batch.size(), batch.size());
  return out;
}

}  // namespace peak
