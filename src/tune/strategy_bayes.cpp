// Model-based search. `bayes`: a Gaussian process (Matern 5/2 kernel, one length scale per
// parameter, fitted by maximizing the marginal likelihood over a grid) models log(time) over
// the parameters' value positions scaled to [0, 1]; failed configurations count as the slowest
// one seen. After an initial design (the configurations the search started from, then spread-out
// random ones), each batch takes the configurations of highest expected improvement, one at a
// time, each pick added to the model at its predicted value (the "kriging believer").
// `auto` (the default strategy) is the same search with a share of every batch given to a greedy
// descent around the best configuration (its not yet evaluated one-parameter neighbors), which
// finishes the search once the model has found the right region.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "tune/strategy_impl.h"

namespace peak::strategy_detail {

namespace {

constexpr size_t kMaxTrain = 160;        // the model learns from the best this many at most
constexpr size_t kMaxCandidates = 2048;  // configurations scored per pick at most
// The expected improvement's exploration margin, in standardized log time.
constexpr double kXi = 0.01;
constexpr double kLengths[] = {0.1, 0.2, 0.4, 0.8, 1.6, 6.4};
constexpr double kNoises[] = {1e-4, 1e-3, 1e-2, 5e-2, 0.2};

double matern52(const std::vector<double>& a, const std::vector<double>& b,
                const std::vector<double>& lengths) {
  double r2 = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double d = (a[i] - b[i]) / lengths[i];
    r2 += d * d;
  }
  double r = std::sqrt(5.0 * r2);
  return (1 + r + r * r / 3) * std::exp(-r);
}

// A Gaussian process with zero mean and unit signal variance on standardized targets.
class Gp {
 public:
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  std::vector<double> lengths;
  double noise = 1e-2;

  // Factorizes K + noise I; false when it is not positive definite.
  bool fit() {
    const size_t n = x.size();
    l_.assign(n * n, 0);
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j <= i; ++j) {
        double s = matern52(x[i], x[j], lengths) + (i == j ? noise + 1e-9 : 0);
        for (size_t k = 0; k < j; ++k) s -= l_[i * n + k] * l_[j * n + k];
        if (i == j) {
          if (s <= 0) return false;
          l_[i * n + i] = std::sqrt(s);
        } else {
          l_[i * n + j] = s / l_[j * n + j];
        }
      }
    alpha_ = y;
    solve_lower(alpha_);
    solve_upper(alpha_);
    return true;
  }

  // Log marginal likelihood (up to a constant) of the last fit.
  double lml() const {
    const size_t n = x.size();
    double fit_term = 0, log_det = 0;
    for (size_t i = 0; i < n; ++i) {
      fit_term += y[i] * alpha_[i];
      log_det += std::log(l_[i * n + i]);
    }
    return -0.5 * fit_term - log_det;
  }

  // The posterior at a set of points, with what an update needs: v = L^-1 k(x, p) per point.
  struct Posterior {
    std::vector<double> mean, var;
    std::vector<std::vector<double>> v;  // per point
  };
  Posterior posterior(const std::vector<std::vector<double>>& pts) const {
    const size_t n = x.size();
    Posterior post;
    std::vector<double> w = y;  // L^-1 y
    solve_lower(w);
    for (const auto& p : pts) {
      std::vector<double> k(n);
      for (size_t i = 0; i < n; ++i) k[i] = matern52(p, x[i], lengths);
      solve_lower(k);
      post.mean.push_back(std::inner_product(k.begin(), k.end(), w.begin(), 0.0));
      post.var.push_back(1.0 - std::inner_product(k.begin(), k.end(), k.begin(), 0.0));
      post.v.push_back(std::move(k));
    }
    w_ = std::move(w);
    return post;
  }

  // Adds an observation (p, value) and updates `post` (of `pts`) in O(n) per point: the new row
  // of the Cholesky factor and of L^-1 k for every point. False when the factor breaks down.
  bool add(const std::vector<double>& p, double value, const std::vector<std::vector<double>>& pts,
           Posterior& post) {
    const size_t n = x.size();
    std::vector<double> k(n);
    for (size_t i = 0; i < n; ++i) k[i] = matern52(p, x[i], lengths);
    solve_lower(k);  // the new row of L
    double d2 = 1.0 + noise + 1e-9 - std::inner_product(k.begin(), k.end(), k.begin(), 0.0);
    if (d2 <= 0) return false;
    const double d = std::sqrt(d2);
    const double w_new = (value - std::inner_product(k.begin(), k.end(), w_.begin(), 0.0)) / d;
    // Grow L to (n + 1) x (n + 1).
    std::vector<double> grown((n + 1) * (n + 1), 0);
    for (size_t r = 0; r < n; ++r)
      for (size_t c = 0; c <= r; ++c) grown[r * (n + 1) + c] = l_[r * n + c];
    for (size_t c = 0; c < n; ++c) grown[n * (n + 1) + c] = k[c];
    grown[n * (n + 1) + n] = d;
    l_ = std::move(grown);
    x.push_back(p);
    y.push_back(value);
    w_.push_back(w_new);
    for (size_t c = 0; c < pts.size(); ++c) {
      double kc = matern52(pts[c], p, lengths);
      double vn = (kc - std::inner_product(k.begin(), k.end(), post.v[c].begin(), 0.0)) / d;
      post.v[c].push_back(vn);
      post.mean[c] += vn * w_new;
      post.var[c] -= vn * vn;
    }
    return true;
  }

 private:
  void solve_lower(std::vector<double>& b) const {
    const size_t n = x.size();
    for (size_t i = 0; i < n; ++i) {
      double s = b[i];
      for (size_t k = 0; k < i; ++k) s -= l_[i * n + k] * b[k];
      b[i] = s / l_[i * n + i];
    }
  }
  void solve_upper(std::vector<double>& b) const {
    const size_t n = x.size();
    for (size_t i = n; i-- > 0;) {
      double s = b[i];
      for (size_t k = i + 1; k < n; ++k) s -= l_[k * n + i] * b[k];
      b[i] = s / l_[i * n + i];
    }
  }
  std::vector<double> l_;  // lower Cholesky factor, row-major
  std::vector<double> alpha_;
  mutable std::vector<double> w_;  // L^-1 y, for updates
};

double normal_pdf(double z) { return std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI); }
double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

class Bayes : public Strategy {
 public:
  Bayes(std::string name, double local_share) : name_(std::move(name)), local_share_(local_share) {}

  std::string name() const override { return name_; }

  void start(const TuningSpace& space, uint64_t seed, size_t limit) override {
    m_.reset(space, seed);
    const size_t d = space.params().size();
    initial_ = std::clamp<size_t>(2 * d, 6, 12);
    initial_ = std::min(initial_, std::max<size_t>(limit / 3, 2));
    lengths_.assign(d, 0.4);
    noise_ = 1e-2;
    fits_ = 0;
  }

  std::vector<size_t> ask(size_t max) override {
    std::vector<size_t> out;
    size_t ok = 0;
    for (size_t i : m_.history()) ok += m_.score(i) < kFailed;
    if (m_.count() < initial_ || ok < 2) {
      spread_out(out, max);
      return out;
    }
    const size_t local =
        local_share_ > 0 ? static_cast<size_t>(std::ceil(local_share_ * static_cast<double>(max)))
                         : 0;
    improve(out, max, local);
    if (out.empty()) spread_out(out, 1);
    return out;
  }

  void tell(const std::vector<Observation>& obs) override { m_.record(obs); }

 private:
  std::vector<double> point(size_t i) const {
    const auto& c = m_.space().coords(i);
    const auto& params = m_.space().params();
    std::vector<double> p(c.size());
    for (size_t k = 0; k < c.size(); ++k) {
      size_t n = params[k].values.size();
      p[k] = n > 1 ? static_cast<double>(c[k]) / static_cast<double>(n - 1) : 0.0;
    }
    return p;
  }

  static double distance2(const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += (a[i] - b[i]) * (a[i] - b[i]);
    return s;
  }

  // Random configurations far from every one evaluated or picked (best of a few draws each).
  void spread_out(std::vector<size_t>& out, size_t want) {
    std::vector<std::vector<double>> taken;
    for (size_t i : m_.history()) taken.push_back(point(i));
    for (size_t i : out) taken.push_back(point(i));
    while (out.size() < want) {
      std::optional<size_t> pick;
      double far = -1;
      for (int draw = 0; draw < 32; ++draw) {
        auto r = m_.random_unseen();
        if (!r) break;
        if (std::find(out.begin(), out.end(), *r) != out.end()) continue;
        double nearest = std::numeric_limits<double>::infinity();
        for (const auto& t : taken) nearest = std::min(nearest, distance2(point(*r), t));
        if (nearest > far) {
          far = nearest;
          pick = r;
        }
      }
      if (!pick) return;
      out.push_back(*pick);
      taken.push_back(point(*pick));
    }
  }

  // Fills `out` up to `max` with the configurations of highest expected improvement: the first
  // `local` among the one-parameter neighbors of the best configuration, the rest among all.
  void improve(std::vector<size_t>& out, size_t max, size_t local) {
    Gp gp;
    if (!train(gp)) return;
    // Candidates: every configuration not evaluated (a random sample of them in large spaces,
    // with the neighbors of the best added).
    std::vector<size_t> cand;
    for (size_t i = 0; i < m_.size(); ++i)
      if (!m_.seen(i)) cand.push_back(i);
    std::vector<size_t> near;
    if (m_.best()) near = m_.space().neighbors(*m_.best(), false);
    if (cand.size() > kMaxCandidates) {
      std::shuffle(cand.begin(), cand.end(), m_.rng);
      cand.resize(kMaxCandidates);
      for (size_t j : near)
        if (!m_.seen(j) && std::find(cand.begin(), cand.end(), j) == cand.end()) cand.push_back(j);
    }
    if (cand.empty()) return;
    std::vector<uint8_t> is_near(cand.size(), 0);
    for (size_t c = 0; c < cand.size(); ++c)
      is_near[c] = std::find(near.begin(), near.end(), cand[c]) != near.end();
    std::vector<std::vector<double>> pts;
    for (size_t i : cand) pts.push_back(point(i));
    // The posterior of every candidate, kept up to date as picks join the model.
    Gp::Posterior post = gp.posterior(pts);
    const double best_y = *std::min_element(gp.y.begin(), gp.y.end());
    std::vector<uint8_t> taken(cand.size(), 0);
    while (out.size() < max) {
      const bool local_pick = out.size() < local;
      double top = -1;
      size_t pick = SIZE_MAX;
      for (size_t c = 0; c < cand.size(); ++c) {
        if (taken[c] || (local_pick && !is_near[c])) continue;
        double sd = std::sqrt(std::max(post.var[c], 1e-12));
        double gain = best_y - post.mean[c] - kXi;
        double z = gain / sd;
        double ei = gain * normal_cdf(z) + sd * normal_pdf(z);
        if (ei > top) {
          top = ei;
          pick = c;
        }
      }
      if (pick == SIZE_MAX) {
        if (local_pick) {
          local = out.size();  // the neighborhood is explored: global picks from here
          continue;
        }
        return;
      }
      taken[pick] = 1;
      out.push_back(cand[pick]);
      // The kriging believer: the pick joins the model at its predicted value.
      if (!gp.add(pts[pick], post.mean[pick], pts, post)) return;
    }
  }

  // The model of the observations: standardized log times, failures at the slowest time seen.
  bool train(Gp& gp) {
    std::vector<size_t> obs = m_.history();
    double worst = -std::numeric_limits<double>::infinity();
    for (size_t i : obs)
      if (m_.score(i) < kFailed) worst = std::max(worst, std::log(m_.score(i)));
    auto value = [&](size_t i) { return m_.score(i) < kFailed ? std::log(m_.score(i)) : worst; };
    if (obs.size() > kMaxTrain) {
      std::stable_sort(obs.begin(), obs.end(),
                       [&](size_t a, size_t b) { return value(a) < value(b); });
      obs.resize(kMaxTrain);
    }
    std::vector<double> ys;
    for (size_t i : obs) ys.push_back(value(i));
    double mean = std::accumulate(ys.begin(), ys.end(), 0.0) / static_cast<double>(ys.size());
    double var = 0;
    for (double v : ys) var += (v - mean) * (v - mean);
    double sd = std::sqrt(var / static_cast<double>(ys.size()));
    if (!(sd > 1e-12)) sd = 1;
    for (size_t k = 0; k < obs.size(); ++k) {
      gp.x.push_back(point(obs[k]));
      gp.y.push_back((ys[k] - mean) / sd);
    }
    // Hyperparameters: coordinate search over the grids, starting from the last choice.
    auto score = [&](const std::vector<double>& lengths, double noise) {
      gp.lengths = lengths;
      gp.noise = noise;
      return gp.fit() ? gp.lml() : -std::numeric_limits<double>::infinity();
    };
    double best = score(lengths_, noise_);
    // A full search while the data is small, then every fourth batch.
    const int sweeps = obs.size() < 64 || fits_ % 4 == 0 ? 2 : 0;
    ++fits_;
    for (int sweep = 0; sweep < sweeps; ++sweep) {
      for (size_t d = 0; d < lengths_.size(); ++d)
        for (double l : kLengths) {
          std::vector<double> trial = lengths_;
          trial[d] = l;
          double s = score(trial, noise_);
          if (s > best) {
            best = s;
            lengths_ = trial;
          }
        }
      for (double n : kNoises) {
        double s = score(lengths_, n);
        if (s > best) {
          best = s;
          noise_ = n;
        }
      }
    }
    gp.lengths = lengths_;
    gp.noise = noise_;
    return gp.fit();
  }

  std::string name_;
  double local_share_ = 0;
  Memory m_;
  size_t initial_ = 6;
  std::vector<double> lengths_;
  double noise_ = 1e-2;
  size_t fits_ = 0;
};

}  // namespace

std::unique_ptr<Strategy> make_bayes() { return std::make_unique<Bayes>("bayes", 0.0); }
std::unique_ptr<Strategy> make_auto() {
  return std::make_unique<Bayes>("auto", 0.25);  // a quarter of every batch to the descent
}

}  // namespace peak::strategy_detail
