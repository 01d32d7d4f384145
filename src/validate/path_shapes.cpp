#include "validate/path_shapes.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "context/bound.h"
#include "util/fs.h"

namespace peak {
namespace {

// The values a scalar may take: its list, or lo..hi by step.
struct Domain {
  std::vector<int64_t> values;
  int64_t lo = 1, hi = 1, step = 1;
  int64_t snap(int64_t v) const {
    v = std::clamp(v, lo, hi);
    return lo + (v - lo) / step * step;
  }
};

class Drawer {
 public:
  Drawer(const KernelContext& ctx, const SourceRegions& source, const Config& config,
         const PlanDialect& dialect, const expr::Env& device, uint64_t seed)
      : ctx_(ctx),
        source_(source),
        config_(config),
        dialect_(dialect),
        device_(device),
        rng_(seed ^ 0x7A115EEDull) {}

  // False when the scalars declare no values or ranges (nothing to draw from).
  bool domains() {
    std::map<std::string, int64_t> largest;
    for (const Shape& s : listed_)
      for (const auto& [k, v] : s.values) largest[k] = std::max(largest[k], v);
    bool declared = false;
    for (const ScalarSpec& s : ctx_.scalars) {
      Domain d;
      if (!s.values.empty()) {
        d.values = s.values;
      } else if (s.has_range()) {
        d.lo = s.range_lo;
        d.hi = s.range_hi;
        d.step = std::max<int64_t>(1, s.range_step);
      } else if (largest[s.name] > 0) {
        d.hi = largest[s.name];
      } else {
        return false;
      }
      declared = declared || !s.values.empty() || s.has_range();
      domains_[s.name] = d;
    }
    return declared;
  }

  void list(const std::vector<Shape>& shapes) {
    for (const Shape& s : shapes) listed_.push_back(s);
  }

  // The context's own validation sizes bound what is drawn: no drawn shape costs more than the
  // costliest of its validation and hidden shapes (none listed: no bound).
  void bound_by(const std::vector<Shape>& shapes) {
    for (const Shape& s : shapes) max_cost_ = std::max(max_cost_, cost(s));
  }

  // The steps of the plan that run for `shape` (their lines), or nullopt when the configuration
  // does not run it.
  std::optional<std::string> path_of(const Shape& shape) {
    auto bound = bind_shape(ctx_, shape);
    if (!bound || !bound->runs) return std::nullopt;
    expr::Env env = plan_env(ctx_, source_, shape, config_, device_);
    PlanOutcome o = evaluate_plan(*plan_, dialect_, ctx_, env);
    if (o.disposition != Disposition::passed) return std::nullopt;
    std::string key;
    for (const PlanStep& st : o.plan.steps) key += std::to_string(st.line) + ",";
    return key;
  }

  // One shape inside each path, with tails, then draws the plan runs, up to `count` in all.
  std::vector<Shape> shapes(int count) {
    auto parsed = parse_plan(source_, "kernel");
    if (!parsed) return {};
    plan_ = &*parsed;
    // A path's shape starts from one of its listed shapes (sizes the context validates anyway),
    // else from one of the draws that take it.
    std::map<std::string, std::vector<Shape>> listed, drawn;
    std::vector<Shape> draws;
    for (const Shape& s : listed_)
      if (auto key = path_of(s)) listed[*key].push_back(s);
    for (int i = 0; i < 128; ++i) {
      draws.push_back(draw());
      if (auto key = path_of(draws.back())) drawn[*key].push_back(draws.back());
    }
    for (const auto& [key, shapes] : drawn)
      if (!listed.count(key)) listed[key] = shapes;
    std::vector<Shape> out;
    for (auto& [key, shapes] : listed) {
      Shape s = cheapest(shapes);
      with_tails(s, key);
      if (!known(s, out)) out.push_back(s);
    }
    for (const Shape& s : draws) {
      if (static_cast<int>(out.size()) >= count) break;
      if (within_bound(s) && path_of(s) && !known(s, out)) out.push_back(s);
    }
    plan_ = nullptr;
    return out;
  }

  bool known(const Shape& s, const std::vector<Shape>& more) const {
    return std::find(listed_.begin(), listed_.end(), s) != listed_.end() ||
           std::find(more.begin(), more.end(), s) != more.end();
  }

 private:
  uint64_t below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }

  // What a shape costs to validate: its work (the context's `flops`), else its arrays' bytes,
  // else its elements.
  double cost(const Shape& s) const {
    auto bound = bind_shape(ctx_, s);
    if (!bound) return 0;
    if (!ctx_.flops.empty() && bound->flops) return *bound->flops;
    if (!ctx_.bytes.empty() && bound->bytes) return *bound->bytes;
    double n = 0;
    for (const auto& [name, size] : bound->sizes) n += static_cast<double>(size);
    return n;
  }
  bool within_bound(const Shape& s) const { return max_cost_ <= 0 || cost(s) <= max_cost_; }

  // A path's starting shape: the cheapest of those that take it (one of them at random where
  // several cost the same), so that a path is validated at the smallest size that reaches it.
  Shape cheapest(const std::vector<Shape>& shapes) {
    std::vector<Shape> best;
    double least = 0;
    for (const Shape& s : shapes) {
      const double c = cost(s);
      if (best.empty() || c < least) {
        best = {s};
        least = c;
      } else if (c == least) {
        best.push_back(s);
      }
    }
    return best[below(best.size())];
  }

  // Log-uniform over each scalar's range (small sizes as often as large ones, so that the drawn
  // shapes stay affordable on a CPU device), or one of its values.
  Shape draw() {
    Shape s;
    for (const auto& [name, d] : domains_) {
      if (!d.values.empty()) {
        s.values[name] = d.values[below(d.values.size())];
        continue;
      }
      const double lo = std::log(static_cast<double>(std::max<int64_t>(1, d.lo)));
      const double hi = std::log(static_cast<double>(std::max<int64_t>(1, d.hi)));
      const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
      s.values[name] = d.snap(std::llround(std::exp(lo + u * (hi - lo))));
    }
    return s;
  }

  // Moves each dimension of `s` in turn to a value near it that divides by as few tile sizes
  // as possible, keeping the shape valid and on the same path.
  void with_tails(Shape& s, const std::string& key) {
    for (const auto& [name, d] : domains_) {
      const int64_t v = s.values[name];
      std::vector<int64_t> candidates;
      for (int j = 0; j < 32; ++j) {
        if (!d.values.empty()) {
          candidates.push_back(d.values[below(d.values.size())]);
        } else if (j < 8) {
          candidates.push_back(d.snap(v + static_cast<int64_t>(below(9)) - 4));
        } else {
          const int64_t lo = std::max(d.lo, v / 2), hi = std::min(d.hi, v + v / 2 + 1);
          candidates.push_back(d.snap(lo + static_cast<int64_t>(below(static_cast<uint64_t>(
                                               std::max<int64_t>(1, hi - lo + 1))))));
        }
      }
      int best = tile_multiples(v) + 1;  // a move to another value is preferred at equal score
      int64_t pick = v;
      for (int64_t c : candidates) {
        const int score = tile_multiples(c);
        if (score >= best) continue;
        Shape t = s;
        t.values[name] = c;
        if (path_of(t) != key) continue;
        best = score;
        pick = c;
      }
      s.values[name] = pick;
    }
  }

  const KernelContext& ctx_;
  const SourceRegions& source_;
  const Config& config_;
  const PlanDialect& dialect_;
  const expr::Env& device_;
  std::mt19937_64 rng_;
  std::map<std::string, Domain> domains_;
  std::vector<Shape> listed_;
  double max_cost_ = 0;
  const ParsedPlan* plan_ = nullptr;
};

}  // namespace

uint64_t random_validation_seed() {
  std::random_device rd;
  uint64_t s = 0;
  while (s == 0) s = ((uint64_t{rd()} << 32) ^ rd()) & ((uint64_t{1} << 53) - 1);
  return s;
}

int tile_multiples(int64_t v) {
  int n = 0;
  for (int64_t t = 2; t <= 64; ++t) n += v % t == 0 ? 1 : 0;
  return n;
}

std::vector<Shape> hidden_validation_shapes(const KernelContext& ctx, const SourceRegions& source,
                                            const Config& config, const PlanDialect& dialect,
                                            const expr::Env& device, int count, uint64_t seed) {
  Drawer d(ctx, source, config, dialect, device, seed);
  for (const auto* list :
       {&ctx.bench_shapes, &ctx.validation_shapes, &ctx.hidden_shapes, &ctx.small_shapes})
    d.list(*list);
  for (const auto* suite : {&ctx.suite, &ctx.suite_small})
    for (const SuiteShape& s : *suite) d.list({s.shape});
  d.bound_by(ctx.validation_shapes);
  d.bound_by(ctx.hidden_shapes);
  if (count <= 0 || !d.domains()) return {};
  return d.shapes(count);
}

}  // namespace peak
