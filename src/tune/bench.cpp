#include "tune/bench.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "tune/simulation.h"
#include "util/fs.h"

namespace peak {

using json = nlohmann::json;

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// Watches one simulated search: when the best time found first reaches each target.
class TargetWatch : public TuneObserver {
 public:
  TargetWatch(double best_ms, const std::vector<double>& targets)
      : best_ms_(best_ms),
        targets_(targets),
        evals_(targets.size(), kNever),
        seconds_(targets.size(), kNever) {}
  void on_batch(const std::vector<size_t>&, const std::vector<ConfigOutcome>& outcomes,
                double elapsed) override {
    for (const auto& o : outcomes) {
      ++count_;
      if (o.disposition != Disposition::passed) continue;
      found_ = std::min(found_, o.score_ms);
      for (size_t t = 0; t < targets_.size(); ++t)
        if (evals_[t] == kNever && found_ <= best_ms_ / targets_[t] * (1 + 1e-12)) {
          evals_[t] = static_cast<double>(count_);
          seconds_[t] = elapsed;
        }
    }
  }
  bool done() const override { return evals_.back() != kNever; }
  const std::vector<double>& evaluations() const { return evals_; }
  const std::vector<double>& seconds() const { return seconds_; }

 private:
  double best_ms_;
  std::vector<double> targets_;
  std::vector<double> evals_, seconds_;
  size_t count_ = 0;
  double found_ = kNever;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return kNever;
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    double mean = (static_cast<double>(i) + static_cast<double>(j)) / 2 + 1;
    for (size_t k = i; k <= j; ++k) r[order[k]] = mean;
    i = j + 1;
  }
  return r;
}

std::string cell(double v, const char* fmt_spec) {
  if (v < 0) return "-";
  return fmt::format(fmt::runtime(fmt_spec), v);
}

}  // namespace

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() < 2) return 0;
  std::vector<double> ra = ranks(a), rb = ranks(b);
  double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / static_cast<double>(ra.size());
  double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / static_cast<double>(rb.size());
  double num = 0, da = 0, db = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    num += (ra[i] - ma) * (rb[i] - mb);
    da += (ra[i] - ma) * (ra[i] - ma);
    db += (rb[i] - mb) * (rb[i] - mb);
  }
  return da > 0 && db > 0 ? num / std::sqrt(da * db) : 0;
}

Result<TuningBenchReport> bench_tuning(
    const std::vector<std::pair<std::string, TuningCache>>& caches,
    const TuningBenchOptions& opts) {
  TuningBenchReport rep;
  rep.options = opts;
  if (rep.options.strategies.empty()) rep.options.strategies = strategy_names();
  for (const auto& name : rep.options.strategies)
    if (auto s = make_strategy(name); !s) return Error{s.error()};
  for (const auto& [path, cache] : caches) {
    auto space = cache.space();
    if (!space) return make_error(fmt::format("{}: {}", path, space.error()));
    TuningBenchSpace bs;
    bs.path = path;
    bs.label = fmt::format("{}/{} ({})", cache.kernel,
                           cache.transformation.empty() ? "seed" : cache.transformation,
                           cache.device.name);
    bs.configs = space->size();
    size_t missing = 0;
    for (size_t i = 0; i < space->size(); ++i) {
      const CacheEntry* e = cache.find(space->config(i));
      if (!e) ++missing;
    }
    if (missing > 0)
      return make_error(fmt::format(
          "{}: {} of the space's {} configurations are not in the cache; a benchmark needs an "
          "exhaustive sweep (peak tune --strategy exhaustive, then peak export-space)",
          path, missing, space->size()));
    // The space's best and the whole sweep's simulated time, as the simulation sees them.
    {
      auto all = make_strategy("exhaustive");
      SimulationRunner sim(cache, {opts.jobs});
      SearchOptions so;
      so.batch = opts.batch;
      SearchResult r = search(*space, **all, sim, so);
      bs.exhaustive_seconds = r.seconds;
      std::vector<double> model, speed;
      const DeviceLimits limits = device_limits(cache.device);
      const double ridge = ridge_point(cache.device, cache.work.element_bytes);
      for (const auto& o : r.outcomes) {
        if (o.disposition != Disposition::passed) continue;
        ++bs.passed;
        if (bs.best_ms == 0 || o.score_ms < bs.best_ms) bs.best_ms = o.score_ms;
        model.push_back(
            estimate(resource_usage(o.build.resources, o.launch), limits, cache.work, ridge).score);
        speed.push_back(1 / o.score_ms);
      }
      bs.model_spearman = spearman(model, speed);
      bs.model_points = model.size();
    }
    if (bs.passed == 0)
      return make_error(fmt::format("{}: no configuration passed; nothing to search for", path));
    for (const auto& name : rep.options.strategies) {
      TuningBenchRow row;
      row.space = bs.label;
      row.space_index = rep.spaces.size();
      row.strategy = name;
      std::vector<std::vector<double>> evals(opts.targets.size()), secs(opts.targets.size());
      for (int seed = 1; seed <= opts.seeds; ++seed) {
        auto strategy = make_strategy(name);
        SimulationRunner sim(cache, {opts.jobs});
        TargetWatch watch(bs.best_ms, opts.targets);
        SearchOptions so;
        so.seed = static_cast<uint64_t>(seed);
        so.batch = opts.batch;
        search(*space, **strategy, sim, so, {&watch});
        for (size_t t = 0; t < opts.targets.size(); ++t) {
          evals[t].push_back(watch.evaluations()[t]);
          secs[t].push_back(watch.seconds()[t]);
        }
      }
      for (size_t t = 0; t < opts.targets.size(); ++t) {
        TuningBenchTarget bt;
        bt.target = opts.targets[t];
        bt.reached = static_cast<int>(
            std::count_if(evals[t].begin(), evals[t].end(), [](double v) { return v != kNever; }));
        double me = median(evals[t]), ms = median(secs[t]);
        bt.evaluations = me == kNever ? -1 : me;
        bt.seconds = ms == kNever ? -1 : ms;
        row.targets.push_back(bt);
      }
      rep.rows.push_back(std::move(row));
    }
    rep.spaces.push_back(std::move(bs));
  }
  return rep;
}

double TuningBenchReport::fraction_of_space(const TuningBenchRow& row, size_t t) const {
  if (row.space_index >= spaces.size() || t >= row.targets.size() || row.targets[t].evaluations < 0)
    return -1;
  return row.targets[t].evaluations / static_cast<double>(spaces[row.space_index].configs);
}

json TuningBenchReport::to_json() const {
  json spaces_j = json::array();
  for (const auto& s : spaces)
    spaces_j.push_back({{"space", s.label},
                        {"path", s.path},
                        {"configs", s.configs},
                        {"passed", s.passed},
                        {"best_ms", s.best_ms},
                        {"exhaustive_seconds", s.exhaustive_seconds},
                        {"model_spearman", s.model_spearman},
                        {"model_points", s.model_points}});
  json rows_j = json::array();
  for (const auto& r : rows) {
    json t = json::array();
    for (size_t i = 0; i < r.targets.size(); ++i) {
      const auto& bt = r.targets[i];
      t.push_back({{"target", bt.target},
                   {"evaluations", bt.evaluations},
                   {"fraction_of_space", fraction_of_space(r, i)},
                   {"seconds", bt.seconds},
                   {"reached", bt.reached}});
    }
    rows_j.push_back({{"space", r.space},
                      {"path", r.space_index < spaces.size() ? spaces[r.space_index].path : ""},
                      {"strategy", r.strategy},
                      {"targets", t}});
  }
  return {{"format", "peak-tuning-bench"},
          {"version", kBenchFormatVersion},
          {"seeds", options.seeds},
          {"batch", options.batch},
          {"jobs", options.jobs},
          {"spaces", spaces_j},
          {"rows", rows_j}};
}

std::string TuningBenchReport::text() const {
  std::string out;
  out += fmt::format(
      "Median over {} seeds; batches of {}; evaluations and simulated seconds until the best "
      "configuration found is within the target of the space's best.\n",
      options.seeds, options.batch);
  for (size_t si = 0; si < spaces.size(); ++si) {
    const TuningBenchSpace& s = spaces[si];
    out += fmt::format(
        "\n{}, {}: {} configurations, {} passed, best {:.4g} ms; exhaustive sweep {:.1f} s "
        "simulated; model rank correlation {:.2f} over {} configurations\n",
        s.label, fs::path(s.path).filename().string(), s.configs, s.passed, s.best_ms,
        s.exhaustive_seconds, s.model_spearman, s.model_points);
    std::string head = fmt::format("  {:<11}", "strategy");
    for (double t : options.targets)
      head += fmt::format(" {:>9} {:>7} {:>9} {:>7}", fmt::format("evals@{:g}", t * 100), "%space",
                          fmt::format("sim s@{:g}", t * 100), "reached");
    out += head + "\n";
    for (const auto& r : rows) {
      if (r.space_index != si) continue;
      std::string line = fmt::format("  {:<11}", r.strategy);
      for (size_t i = 0; i < r.targets.size(); ++i) {
        const auto& bt = r.targets[i];
        double frac = fraction_of_space(r, i);
        line += fmt::format(" {:>9} {:>7} {:>9} {:>7}", cell(bt.evaluations, "{:g}"),
                            frac < 0 ? "-" : fmt::format("{:.1f}%", 100 * frac),
                            cell(bt.seconds, "{:.1f}"),
                            fmt::format("{}/{}", bt.reached, options.seeds));
      }
      out += line + "\n";
    }
  }
  return out;
}

}  // namespace peak
