#include "tune/final_timing.h"

#include <utility>

namespace peak {

FinalTimer::FinalTimer(Backend& backend, const DeviceFacts& device, const RunnerOptions& runner,
                       Validator& validator, const KernelContext& ctx, const SourceRegions& source,
                       FinalTimingOptions opts, std::vector<TuneObserver*> observers)
    : backend_(backend),
      device_(device),
      runner_(runner),
      validator_(validator),
      ctx_(ctx),
      source_(source),
      opts_(std::move(opts)),
      observers_(std::move(observers)) {}

std::vector<Measurement> FinalTimer::measure_on(const BuildResult& build, const Config& config,
                                                const std::vector<Shape>& shapes,
                                                const MeasureOptions& mo) {
  return measure(backend_, device_, runner_, validator_, ctx_, source_, build, config, shapes, mo);
}

std::vector<Measurement> FinalTimer::time(const BuildResult& build, const Config& config,
                                          const std::vector<Shape>& shapes,
                                          std::optional<uint64_t> seed) {
  MeasureOptions mo = opts_.measure;
  if (seed) mo.seed = *seed;
  std::vector<Measurement> ms = measure_on(build, config, shapes, mo);
  for (auto& m : ms) {
    // The share of the peak for the precision; the limit that rejects a result may be wider.
    if (opts_.peak_tflops > 0) m.pct_of_peak = 100.0 * m.gflops / (opts_.peak_tflops * 1e3);
    for (auto* o : observers_) o->on_final(m);
  }
  return ms;
}

}  // namespace peak
