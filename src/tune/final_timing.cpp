#include "tune/final_timing.h"

#include <thread>
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

std::vector<Measurement> time_spread(const std::vector<FinalTimer*>& timers,
                                     const std::vector<std::string>& selectors,
                                     const BuildResult& build, const Config& config,
                                     const std::vector<Shape>& shapes,
                                     const std::vector<TuneObserver*>& observers) {
  const size_t n = std::min(timers.size(), shapes.size());
  std::vector<std::vector<size_t>> dealt(n);  // per device, its shapes' indices
  for (size_t i = 0; i < shapes.size(); ++i) dealt[i % n].push_back(i);
  std::vector<Measurement> out(shapes.size());
  auto on_device = [&](size_t d) {
    std::vector<Shape> mine;
    for (size_t i : dealt[d]) mine.push_back(shapes[i]);
    std::vector<Measurement> ms = timers[d]->time(build, config, mine);
    for (size_t k = 0; k < ms.size() && k < dealt[d].size(); ++k) {
      ms[k].device = d < selectors.size() ? selectors[d] : std::to_string(d);
      out[dealt[d][k]] = std::move(ms[k]);
    }
  };
  std::vector<std::thread> others;
  for (size_t d = 1; d < n; ++d) others.emplace_back(on_device, d);
  if (n > 0) on_device(0);
  for (auto& t : others) t.join();
  for (const auto& m : out)
    for (auto* o : observers) o->on_final(m);
  return out;
}

}  // namespace peak
