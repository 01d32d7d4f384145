#include "tune/search.h"

#include <algorithm>
#include <array>

namespace peak {

namespace {
constexpr std::array<std::string_view, 6> kStages = {"validity",  "launch",   "compile",
                                                     "resources", "validate", "time"};
// Empty proposals in a row after which the strategy is considered done.
constexpr int kMaxStalls = 3;

// Passes the runner's progress and its timed configurations to every observer.
class Fanout : public TuneObserver {
 public:
  explicit Fanout(const std::vector<TuneObserver*>& all) : all_(all) {}
  void on_phase(std::string_view phase, size_t done, size_t total) override {
    for (auto* o : all_) o->on_phase(phase, done, total);
  }
  void on_screened(const ConfigOutcome& outcome) override {
    for (auto* o : all_) o->on_screened(outcome);
  }

 private:
  const std::vector<TuneObserver*>& all_;
};

// The end of a search, told to every observer: each configuration it evaluated (unless it was
// cancelled: its evaluation ends not_run, and records none), then its result.
void tell_finish(const std::vector<TuneObserver*>& observers, const SearchResult& res) {
  if (res.stop != "cancelled")
    for (auto* o : observers)
      for (const auto& outcome : res.outcomes) o->on_evaluated(outcome);
  for (auto* o : observers) o->on_finish(res);
}
}  // namespace

std::string_view to_string(Stage s) { return kStages[static_cast<size_t>(s)]; }

std::optional<Stage> stage_from_string(std::string_view s) {
  for (size_t i = 0; i < kStages.size(); ++i)
    if (kStages[i] == s) return static_cast<Stage>(i);
  return std::nullopt;
}

std::vector<size_t> SearchResult::ranking() const {
  std::vector<size_t> r;
  for (size_t i = 0; i < outcomes.size(); ++i)
    if (outcomes[i].disposition == Disposition::passed) r.push_back(i);
  std::stable_sort(r.begin(), r.end(),
                   [&](size_t a, size_t b) { return outcomes[a].score_ms < outcomes[b].score_ms; });
  return r;
}

SearchResult search(const TuningSpace& space, Strategy& strategy, TuningRunner& runner,
                    const SearchOptions& opts, const std::vector<TuneObserver*>& observers) {
  SearchResult res;
  res.strategy = strategy.name();
  res.limit = opts.budget.limit(space.size());
  const size_t batch_size = std::max<size_t>(
      !strategy.adaptive() && opts.steady_batch > 0 ? opts.steady_batch : opts.batch, 1);
  std::vector<uint8_t> evaluated(space.size(), 0);
  // The defaults, then the configurations the caller starts from.
  std::vector<size_t> first;
  auto add_first = [&](std::optional<size_t> i) {
    if (i && std::find(first.begin(), first.end(), *i) == first.end()) first.push_back(*i);
  };
  add_first(space.default_index());
  for (const auto& c : opts.start) add_first(space.find(c));
  strategy.start(space, opts.seed, res.limit);
  for (auto* o : observers) o->on_start(space, res.strategy, res.limit);
  size_t next_first = 0;
  // The next batch: the configurations to start from, then the strategy's proposals, none
  // evaluated or in `taken`; `counted` evaluations are spent or committed.
  auto next_batch = [&](size_t counted, const std::vector<size_t>& taken) {
    const size_t room = std::min(batch_size, res.limit - std::min(res.limit, counted));
    std::vector<size_t> batch;
    auto take = [&](size_t i) {
      if (i < space.size() && !evaluated[i] &&
          std::find(batch.begin(), batch.end(), i) == batch.end() &&
          std::find(taken.begin(), taken.end(), i) == taken.end() && batch.size() < room)
        batch.push_back(i);
    };
    while (next_first < first.size() && batch.size() < room) take(first[next_first++]);
    // The strategy fills the rest; asked again when some of its proposals were already taken.
    for (int tries = 0; tries < 3 && batch.size() < room; ++tries) {
      const size_t before = batch.size();
      for (size_t i : strategy.ask(room - batch.size())) take(i);
      if (batch.size() == before) break;
    }
    return batch;
  };
  std::vector<size_t> ahead;  // the next batch, asked for early (a strategy that is not adaptive)
  int stalls = 0;
  for (;;) {
    if (res.indices.size() >= space.size()) {
      res.stop = "space exhausted";
      break;
    }
    if (res.indices.size() >= res.limit) {
      res.stop = "evaluation budget";
      break;
    }
    if (opts.cancelled && opts.cancelled()) {
      res.stop = "cancelled";
      break;
    }
    if (opts.budget.seconds > 0 && runner.elapsed_seconds() >= opts.budget.seconds) {
      res.stop = "time budget";
      break;
    }
    std::vector<size_t> batch = std::move(ahead);
    ahead.clear();
    if (batch.empty()) batch = next_batch(res.indices.size(), {});
    if (batch.empty()) {
      if (++stalls >= kMaxStalls) {
        res.stop = "strategy done";
        break;
      }
      continue;
    }
    stalls = 0;
    std::vector<Config> configs;
    for (size_t i : batch) configs.push_back(space.config(i));
    // The batch after this one, when the strategy does not need this one's outcomes to propose it.
    if (!strategy.adaptive()) {
      ahead = next_batch(res.indices.size() + batch.size(), batch);
      std::vector<Config> next;
      for (size_t i : ahead) next.push_back(space.config(i));
      if (!next.empty()) runner.prefetch(next);
    }
    Fanout fanout(observers);
    std::vector<ConfigOutcome> outcomes = runner.run(configs, &fanout);
    // Configurations the runner skipped (the search was cancelled, or another one hung) were not
    // evaluated.
    const bool cancelled = opts.cancelled && opts.cancelled();
    std::vector<size_t> kept_batch;
    std::vector<ConfigOutcome> kept;
    bool hung = false;
    for (size_t k = 0; k < batch.size(); ++k) {
      const ConfigOutcome& o = outcomes[k];
      if (o.disposition == Disposition::not_run &&
          (o.message == kCancelledOutcome || o.message == kNotRunAfterTimeout ||
           o.message == kNotRunAfterTimeBudget))
        continue;
      hung = hung || o.disposition == Disposition::timeout;
      kept_batch.push_back(batch[k]);
      kept.push_back(std::move(outcomes[k]));
    }
    batch = std::move(kept_batch);
    outcomes = std::move(kept);
    std::vector<Observation> obs;
    for (size_t k = 0; k < batch.size(); ++k) {
      evaluated[batch[k]] = 1;
      const ConfigOutcome& o = outcomes[k];
      obs.push_back({batch[k], o.disposition == Disposition::passed, o.score_ms});
      res.indices.push_back(batch[k]);
      res.outcomes.push_back(o);
    }
    strategy.tell(obs);
    const double now = runner.elapsed_seconds();
    bool done = false;
    for (auto* o : observers) {
      o->on_batch(batch, outcomes, now);
      done = done || o->done();
    }
    if (cancelled) {
      res.stop = "cancelled";
      break;
    }
    if (hung) {  // the configurations share the kernel's code: the next would hang as well
      res.stop = "timeout";
      break;
    }
    if (done) {
      res.stop = "target reached";
      break;
    }
  }
  res.seconds = runner.elapsed_seconds();
  tell_finish(observers, res);
  return res;
}

}  // namespace peak
