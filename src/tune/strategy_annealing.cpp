// Simulated annealing: a walk over one-parameter moves. A move to a better configuration is
// always taken; a move to a worse one with probability exp(-(worse/current - 1) / T), the
// temperature T falling geometrically from kHot to kCold as the evaluation budget is spent.
// Moves to configurations already evaluated cost nothing and are taken the same way; a batch
// holds several candidate moves from the current configuration.
#include <algorithm>
#include <cmath>

#include "tune/strategy_impl.h"

namespace peak::strategy_detail {

namespace {

constexpr double kHot = 0.5;     // a 50% slower move is taken with probability 1/e at the start
constexpr double kCold = 0.002;  // and almost never at the end
constexpr int kFreeMoves = 256;  // moves over evaluated configurations per proposal at most

class Annealing : public Strategy {
 public:
  std::string name() const override { return "annealing"; }

  void start(const TuningSpace& space, uint64_t seed, size_t limit) override {
    m_.reset(space, seed);
    limit_ = std::max<size_t>(limit, 1);
    current_.reset();
    jump_.reset();
    proposed_.clear();
  }

  std::vector<size_t> ask(size_t max) override {
    if (!current_) current_ = m_.best();
    if (!current_) return jump();
    std::vector<size_t> out;
    for (int free = 0; out.size() < max && free < kFreeMoves;) {
      std::vector<size_t> n = m_.space().neighbors(*current_, false);
      if (n.empty()) break;
      size_t j = n[m_.below(n.size())];
      if (m_.seen(j)) {
        consider(j);
        ++free;
        continue;
      }
      if (std::find(out.begin(), out.end(), j) != out.end()) {
        ++free;
        continue;
      }
      out.push_back(j);
    }
    if (out.empty()) return jump();
    proposed_.insert(proposed_.end(), out.begin(), out.end());
    return out;
  }

  void tell(const std::vector<Observation>& obs) override {
    m_.record(obs);
    for (const auto& o : obs) {
      if (jump_ && o.index == *jump_) {
        current_ = o.index;  // a restart: the walk continues from here
        jump_.reset();
      } else if (std::find(proposed_.begin(), proposed_.end(), o.index) != proposed_.end()) {
        consider(o.index);
      } else if (!current_) {
        current_ = m_.best();
      }
    }
    proposed_.clear();
  }

 private:
  double temperature() const {
    double progress = std::min(1.0, static_cast<double>(m_.count()) / static_cast<double>(limit_));
    return kHot * std::pow(kCold / kHot, progress);
  }

  // The Metropolis rule for a move from the current configuration to `j`.
  void consider(size_t j) {
    double now = m_.score(*current_), next = m_.score(j);
    if (next <= now) {
      current_ = j;
      return;
    }
    if (!std::isfinite(next)) return;
    double p = std::exp(-(next / now - 1) / temperature());
    if (m_.uniform() < p) current_ = j;
  }

  // Every neighbor explored: restart from a random configuration not evaluated yet.
  std::vector<size_t> jump() {
    if (jump_ && !m_.seen(*jump_)) return {};  // one restart at a time
    jump_ = m_.random_unseen();
    if (!jump_) return {};
    return {*jump_};
  }

  Memory m_;
  size_t limit_ = 1;
  std::optional<size_t> current_, jump_;
  std::vector<size_t> proposed_;
};

}  // namespace

std::unique_ptr<Strategy> make_annealing() { return std::make_unique<Annealing>(); }

}  // namespace peak::strategy_detail
