// The genetic algorithm: a population of configurations; each generation draws parents by
// tournament, crosses them uniformly (each parameter from either parent), mutates each parameter
// with probability 1/parameters (to an adjacent value or any value), repairs children that break
// the validity expression, and keeps the best of parents and children (elitist).
#include <algorithm>

#include "tune/strategy_impl.h"

namespace peak::strategy_detail {

namespace {

constexpr size_t kPopulation = 16;

class Genetic : public Strategy {
 public:
  std::string name() const override { return "genetic"; }

  void start(const TuningSpace& space, uint64_t seed, size_t) override {
    m_.reset(space, seed);
    population_.clear();
    pending_.clear();
  }

  std::vector<size_t> ask(size_t max) override {
    if (std::all_of(pending_.begin(), pending_.end(), [&](size_t i) { return m_.seen(i); })) {
      if (population_.empty())
        first_generation();
      else
        next_generation();
    }
    std::vector<size_t> out;
    for (size_t i : pending_)
      if (!m_.seen(i) && out.size() < max) out.push_back(i);
    return out;
  }

  void tell(const std::vector<Observation>& obs) override { m_.record(obs); }

 private:
  size_t population_size() const { return std::min(kPopulation, m_.size()); }

  // The configurations observed so far (those the search started from), best first, then
  // random ones to fill the population.
  void first_generation() {
    std::vector<size_t> known = m_.history();
    rank(known);
    for (size_t i : known)
      if (population_.size() < population_size()) population_.push_back(i);
    fill_with_random(population_);
    pending_ = population_;
  }

  void next_generation() {
    // Survivors: the best of the population and its children.
    std::vector<size_t> all = population_;
    for (size_t i : pending_)
      if (std::find(all.begin(), all.end(), i) == all.end()) all.push_back(i);
    rank(all);
    all.resize(std::min(all.size(), population_size()));
    population_ = all;
    // Children.
    std::vector<size_t> children;
    const size_t want = population_size();
    for (size_t tries = 0; children.size() < want && tries < want * 20; ++tries) {
      const auto& a = m_.space().coords(tournament());
      const auto& b = m_.space().coords(tournament());
      std::vector<int> c(a.size());
      for (size_t p = 0; p < c.size(); ++p) c[p] = m_.uniform() < 0.5 ? a[p] : b[p];
      mutate(c);
      auto child = m_.repair(c);
      if (!child || m_.seen(*child) ||
          std::find(children.begin(), children.end(), *child) != children.end())
        continue;
      children.push_back(*child);
    }
    // A population that converged gets fresh random members.
    if (children.size() < want / 2) fill_with_random(children, want / 2);
    pending_ = children;
  }

  void mutate(std::vector<int>& c) {
    const auto& params = m_.space().params();
    const double rate = 1.0 / static_cast<double>(std::max<size_t>(params.size(), 1));
    for (size_t p = 0; p < c.size(); ++p) {
      const int n = static_cast<int>(params[p].values.size());
      if (n < 2 || m_.uniform() >= rate) continue;
      if (m_.uniform() < 0.5) {
        int step = (c[p] == 0) ? 1 : (c[p] == n - 1) ? -1 : (m_.uniform() < 0.5 ? -1 : 1);
        c[p] += step;
      } else {
        c[p] = static_cast<int>(m_.below(static_cast<size_t>(n)));
      }
    }
  }

  size_t tournament() {
    size_t a = population_[m_.below(population_.size())];
    size_t b = population_[m_.below(population_.size())];
    return better(a, b) ? a : b;
  }

  bool better(size_t a, size_t b) const {
    double sa = m_.score(a), sb = m_.score(b);
    return sa != sb ? sa < sb : a < b;
  }

  void rank(std::vector<size_t>& v) const {
    std::sort(v.begin(), v.end(), [&](size_t a, size_t b) { return better(a, b); });
  }

  void fill_with_random(std::vector<size_t>& v, size_t want = 0) {
    if (want == 0) want = population_size();
    for (size_t tries = 0; v.size() < want && tries < want * 20; ++tries) {
      auto r = m_.random_unseen();
      if (!r) break;
      if (std::find(v.begin(), v.end(), *r) == v.end()) v.push_back(*r);
    }
  }

  Memory m_;
  std::vector<size_t> population_;
  std::vector<size_t> pending_;  // this generation's members still to evaluate
};

}  // namespace

std::unique_ptr<Strategy> make_genetic() { return std::make_unique<Genetic>(); }

}  // namespace peak::strategy_detail
