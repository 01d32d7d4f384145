#include "tune/strategy.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "tune/strategy_impl.h"
#include "util/fs.h"

namespace peak {

// ---- budgets ---------------------------------------------------------------------------------

size_t Budget::limit(size_t space_size) const {
  if (evaluations == 0 && fraction <= 0) return space_size;
  size_t by_fraction = static_cast<size_t>(std::ceil(fraction * static_cast<double>(space_size)));
  return std::min(space_size, std::max(evaluations, by_fraction));
}

std::string Budget::text() const {
  std::vector<std::string> parts;
  if (evaluations > 0) parts.push_back(std::to_string(evaluations));
  if (fraction > 0) parts.push_back(fmt::format("{:g}%", fraction * 100));
  if (seconds > 0) parts.push_back(fmt::format("{:g}s", seconds));
  return parts.empty() ? "all" : join(parts, ",");
}

Result<Budget> Budget::parse(std::string_view spec) {
  Budget b;
  std::string s(spec);
  if (trim(s) == "all") return b;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    std::string term = trim(s.substr(start, comma == std::string::npos ? comma : comma - start));
    auto bad = [&] {
      return make_error(fmt::format(
          "budget '{}': '{}' is not N (evaluations), P% (of the space) or a time (Ts, Tm or Th: "
          "seconds, minutes, hours); e.g. 24,15%,600s or 10m",
          spec, term));
    };
    if (term.empty()) return bad();
    char unit = term.back();
    const bool time = unit == 's' || unit == 'm' || unit == 'h';
    std::string number = (unit == '%' || time) ? term.substr(0, term.size() - 1) : term;
    char* end = nullptr;
    double v = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || !(v > 0) || !std::isfinite(v))
      return bad();
    if (unit == '%') {
      if (v > 100) return bad();
      b.fraction = v / 100;
    } else if (time) {
      b.seconds = v * (unit == 'h' ? 3600 : unit == 'm' ? 60 : 1);
    } else {
      if (v != std::floor(v)) return bad();
      b.evaluations = static_cast<size_t>(v);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return b;
}

std::string duration_text(double seconds) {
  if (seconds < 120) return fmt::format("{:g} s", std::round(seconds * 10) / 10);
  const auto minutes = static_cast<long>(std::lround(seconds / 60));
  if (minutes < 120) return fmt::format("{} min", minutes);
  return minutes % 60 == 0 ? fmt::format("{} h", minutes / 60)
                           : fmt::format("{} h {} min", minutes / 60, minutes % 60);
}

Budget default_budget(std::string_view strategy, const Budget& otherwise) {
  return strategy == "exhaustive" ? Budget{} : otherwise;
}

// ---- shared memory of the strategies ---------------------------------------------------------

namespace strategy_detail {

void Memory::reset(const TuningSpace& space, uint64_t seed) {
  space_ = &space;
  rng.seed(seed);
  seen_.assign(space.size(), 0);
  score_.assign(space.size(), kFailed);
  unseen_.resize(space.size());
  where_.resize(space.size());
  for (size_t i = 0; i < space.size(); ++i) unseen_[i] = where_[i] = i;
  history_.clear();
  best_.reset();
  count_ = 0;
}

void Memory::record(const std::vector<Observation>& observations) {
  for (const auto& o : observations) {
    if (o.index >= seen_.size() || seen_[o.index]) continue;
    seen_[o.index] = 1;
    ++count_;
    history_.push_back(o.index);
    score_[o.index] = o.ok && std::isfinite(o.score) ? o.score : kFailed;
    // Remove from unseen_ by swapping with the last element.
    size_t pos = where_[o.index];
    size_t last = unseen_.back();
    unseen_[pos] = last;
    where_[last] = pos;
    unseen_.pop_back();
    if (score_[o.index] < kFailed && (!best_ || score_[o.index] < score_[*best_])) best_ = o.index;
  }
}

std::optional<size_t> Memory::random_unseen() {
  if (unseen_.empty()) return std::nullopt;
  return unseen_[below(unseen_.size())];
}

std::optional<size_t> Memory::repair(std::vector<int> coords, int tries) {
  const auto& params = space_->params();
  for (int t = 0; t <= tries; ++t) {
    if (auto i = space_->find_coords(coords)) return i;
    size_t p = below(params.size());
    coords[p] = static_cast<int>(below(params[p].values.size()));
  }
  return std::nullopt;
}

std::vector<size_t> unseen_neighbors(Memory& m, size_t from, size_t max) {
  std::vector<size_t> out;
  for (bool adjacent : {true, false}) {
    std::vector<size_t> n = m.space().neighbors(from, adjacent);
    std::shuffle(n.begin(), n.end(), m.rng);
    for (size_t j : n)
      if (!m.seen(j) && std::find(out.begin(), out.end(), j) == out.end() && out.size() < max)
        out.push_back(j);
  }
  return out;
}

namespace {

class Exhaustive : public Strategy {
 public:
  std::string name() const override { return "exhaustive"; }
  void start(const TuningSpace& space, uint64_t seed, size_t) override {
    m_.reset(space, seed);
    next_ = 0;
  }
  std::vector<size_t> ask(size_t max) override {
    std::vector<size_t> out;
    for (; next_ < m_.size() && out.size() < max; ++next_)
      if (!m_.seen(next_)) out.push_back(next_);
    return out;
  }
  void tell(const std::vector<Observation>& obs) override { m_.record(obs); }
  bool adaptive() const override { return false; }

 private:
  Memory m_;
  size_t next_ = 0;
};

class Random : public Strategy {
 public:
  std::string name() const override { return "random"; }
  void start(const TuningSpace& space, uint64_t seed, size_t) override {
    m_.reset(space, seed);
    order_.resize(space.size());
    for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
    std::shuffle(order_.begin(), order_.end(), m_.rng);
    next_ = 0;
  }
  std::vector<size_t> ask(size_t max) override {
    std::vector<size_t> out;
    for (; next_ < order_.size() && out.size() < max; ++next_)
      if (!m_.seen(order_[next_])) out.push_back(order_[next_]);
    return out;
  }
  void tell(const std::vector<Observation>& obs) override { m_.record(obs); }
  bool adaptive() const override { return false; }

 private:
  Memory m_;
  std::vector<size_t> order_;
  size_t next_ = 0;
};

}  // namespace

std::unique_ptr<Strategy> make_exhaustive() { return std::make_unique<Exhaustive>(); }
std::unique_ptr<Strategy> make_random() { return std::make_unique<Random>(); }

}  // namespace strategy_detail

// ---- the registry ----------------------------------------------------------------------------

namespace {
struct Entry {
  StrategyInfo info;
  std::unique_ptr<Strategy> (*make)();
};
const std::vector<Entry>& entries() {
  using namespace strategy_detail;
  static const std::vector<Entry> e = {
      {{"auto", "the default: Bayesian optimization, then a greedy descent around the best"},
       make_auto},
      {{"exhaustive", "every configuration, in the space's order"}, make_exhaustive},
      {{"random", "every configuration, in a random order"}, make_random},
      {{"genetic", "genetic algorithm: tournament selection, uniform crossover, mutation"},
       make_genetic},
      {{"annealing", "simulated annealing over one-parameter moves"}, make_annealing},
      {{"basin", "basin hopping: greedy descent over one-parameter moves, random hops out"},
       make_basin},
      {{"bayes", "Gaussian-process surrogate of log(time), expected improvement"}, make_bayes},
  };
  return e;
}
}  // namespace

const std::vector<StrategyInfo>& strategy_infos() {
  static const std::vector<StrategyInfo> infos = [] {
    std::vector<StrategyInfo> v;
    for (const auto& e : entries()) v.push_back(e.info);
    return v;
  }();
  return infos;
}

std::vector<std::string> strategy_names() {
  std::vector<std::string> v;
  for (const auto& e : entries()) v.push_back(e.info.name);
  return v;
}

Result<std::unique_ptr<Strategy>> make_strategy(std::string_view name) {
  for (const auto& e : entries())
    if (e.info.name == name) return e.make();
  return make_error(
      fmt::format("unknown tuning strategy '{}' (known: {})", name, join(strategy_names(), ", ")));
}

}  // namespace peak
