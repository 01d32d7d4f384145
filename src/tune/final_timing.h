#pragma once
// The final timing of an evaluation: a configuration's build timed on the bench shapes (or a
// shape suite's, or a class's), the vendor baseline timed in the same runner task, interleaved
// with it (tune/measure.h), after the search picked the configuration (or, for `peak bench`,
// without one). Each shape comes back as a typed measurement with its disposition and its share of
// the peak, and is told to the observers (TuneObserver::on_final), which record it.
#include <cstdint>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "tune/measure.h"
#include "tune/search.h"
#include "validate/validate.h"

namespace peak {

struct FinalTimingOptions {
  // The timing policy, the baseline on or off, the deadline of a bench task and the peak above
  // which a result is rejected (MeasureOptions::peak_tflops: the limit).
  MeasureOptions measure;
  double peak_tflops = 0;  // the peak a measurement's % of peak is of (0: none)
};

// Times builds on one device: its runner (holding the device's lock) and its validator, which
// re-checks the outputs of the timed launches.
class FinalTimer {
 public:
  FinalTimer(Backend& backend, const DeviceFacts& device, const RunnerOptions& runner,
             Validator& validator, const KernelContext& ctx, const SourceRegions& source,
             FinalTimingOptions opts, std::vector<TuneObserver*> observers = {});
  virtual ~FinalTimer() = default;
  FinalTimer(const FinalTimer&) = delete;
  FinalTimer& operator=(const FinalTimer&) = delete;

  // `build` (of `config`) timed on `shapes` in one runner task, one measurement per shape in
  // order; `seed` seeds the task's inputs (MeasureOptions::seed when none).
  std::vector<Measurement> time(const BuildResult& build, const Config& config,
                                const std::vector<Shape>& shapes,
                                std::optional<uint64_t> seed = std::nullopt);

 protected:
  // The runner task (tests replace it).
  virtual std::vector<Measurement> measure_on(const BuildResult& build, const Config& config,
                                              const std::vector<Shape>& shapes,
                                              const MeasureOptions& mo);

 private:
  Backend& backend_;
  const DeviceFacts& device_;
  const RunnerOptions& runner_;
  Validator& validator_;
  const KernelContext& ctx_;
  const SourceRegions& source_;
  FinalTimingOptions opts_;
  std::vector<TuneObserver*> observers_;
};

// The final timing spread over several devices of one model: `shapes` dealt in turn to `timers`
// (one per device, `selectors` naming them; built without observers), timed at once, each shape
// in its own device's runner task against the baseline timed there. The measurements come back
// in the order of `shapes`, each naming its device, and are told to `observers` in that order.
std::vector<Measurement> time_spread(const std::vector<FinalTimer*>& timers,
                                     const std::vector<std::string>& selectors,
                                     const BuildResult& build, const Config& config,
                                     const std::vector<Shape>& shapes,
                                     const std::vector<TuneObserver*>& observers);

}  // namespace peak
