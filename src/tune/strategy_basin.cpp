// Basin hopping: a greedy descent over one-parameter moves (every not yet evaluated neighbor of
// the current configuration, adjacent values first, then a move to the best one that improves)
// until a local minimum; then a hop: half of the parameters of the best configuration found so
// far redrawn at random, and a new descent from there.
#include <algorithm>

#include "tune/strategy_impl.h"

namespace peak::strategy_detail {

namespace {

class Basin : public Strategy {
 public:
  std::string name() const override { return "basin"; }

  void start(const TuningSpace& space, uint64_t seed, size_t) override {
    m_.reset(space, seed);
    current_.reset();
    hop_.reset();
  }

  std::vector<size_t> ask(size_t max) override {
    if (!current_) current_ = m_.best();
    if (!current_) return hop();
    // Free moves: an evaluated neighbor that is better (evaluated meanwhile by a hop or the
    // configurations the search started from).
    for (bool moved = true; moved;) {
      moved = false;
      for (size_t j : m_.space().neighbors(*current_, false))
        if (m_.seen(j) && m_.score(j) < m_.score(*current_)) {
          current_ = j;
          moved = true;
        }
    }
    std::vector<size_t> out = unseen_neighbors(m_, *current_, max);
    if (out.empty()) return hop();
    return out;
  }

  void tell(const std::vector<Observation>& obs) override {
    m_.record(obs);
    for (const auto& o : obs) {
      if (hop_ && o.index == *hop_) {
        current_ = o.index;
        hop_.reset();
      } else if (current_ && m_.score(o.index) < m_.score(*current_)) {
        current_ = o.index;
      }
    }
  }

 private:
  // Out of a local minimum: redraw half of the best configuration's parameters.
  std::vector<size_t> hop() {
    if (hop_ && !m_.seen(*hop_)) return {};  // one hop at a time
    hop_.reset();
    if (auto best = m_.best()) {
      std::vector<int> c = m_.space().coords(*best);
      const auto& params = m_.space().params();
      for (int tries = 0; tries < 32 && !hop_; ++tries) {
        std::vector<int> h = c;
        size_t redraw = std::max<size_t>(1, params.size() / 2);
        for (size_t k = 0; k < redraw; ++k) {
          size_t p = m_.below(params.size());
          h[p] = static_cast<int>(m_.below(params[p].values.size()));
        }
        auto j = m_.space().find_coords(h);
        if (j && !m_.seen(*j)) hop_ = j;
      }
    }
    if (!hop_) hop_ = m_.random_unseen();
    if (!hop_) return {};
    return {*hop_};
  }

  Memory m_;
  std::optional<size_t> current_, hop_;
};

}  // namespace

std::unique_ptr<Strategy> make_basin() { return std::make_unique<Basin>(); }

}  // namespace peak::strategy_detail
