#include "tune/tuner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "util/fs.h"

namespace peak {

namespace {
double elapsed(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

TuneResult tune(Backend& backend, const DeviceFacts& device, const RunnerOptions& runner,
                Validator& validator, const KernelContext& ctx, const SourceRegions& source,
                const TuneOptions& opts, const TuneProgress& progress) {
  TuneResult res;
  auto space = enumerate_space(ctx, device, opts.space);
  if (!space) {
    res.disposition = Disposition::invalid_config;
    res.message = space.error();
    return res;
  }
  res.space = *space;
  if (res.space.configs.empty()) {
    res.disposition = Disposition::invalid_config;
    res.message = fmt::format("no tuning configuration satisfies tuning_valid ({} rejected)",
                              res.space.invalid);
    return res;
  }
  const size_t n = res.space.configs.size();
  res.outcomes.resize(n);
  std::string full = join_regions(source);

  // 1. Compile every configuration in parallel.
  auto t0 = std::chrono::steady_clock::now();
  int jobs = opts.jobs > 0 ? opts.jobs
                           : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<size_t> next{0}, done{0};
  std::mutex mu;
  auto worker = [&] {
    for (;;) {
      size_t i = next.fetch_add(1);
      if (i >= n) return;
      BuildRequest req;
      req.context = &ctx;
      req.source = full;
      req.defines = res.space.configs[i];
      req.device = device;
      req.cache_dir = opts.cache_dir;
      ConfigOutcome& o = res.outcomes[i];
      o.config = res.space.configs[i];
      o.build = backend.build(req);
      size_t d = ++done;
      if (progress) {
        std::lock_guard<std::mutex> lock(mu);
        progress("compile", d, n);
      }
    }
  };
  std::vector<std::thread> pool;
  for (int j = 0; j < std::min<int>(jobs, static_cast<int>(n)); ++j) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  res.compile_seconds = elapsed(t0);
  if (opts.compile_only) {
    for (size_t i = 0; i < n; ++i) {
      ConfigOutcome& o = res.outcomes[i];
      o.disposition = o.build.disposition;
      if (o.disposition != Disposition::passed)
        o.message = o.build.log;
      else if (res.ranking.size() < static_cast<size_t>(std::max(opts.top_k, 1)))
        res.ranking.push_back(i);
    }
    auto built =
        std::count_if(res.outcomes.begin(), res.outcomes.end(),
                      [](const ConfigOutcome& o) { return o.disposition == Disposition::passed; });
    if (built > 0) {
      res.disposition = Disposition::passed;
      res.message =
          fmt::format("compile only: {} of {} configurations built (nothing run)", built, n);
    } else {
      res.disposition = res.outcomes[0].disposition;
      res.message = fmt::format("configuration {}: {}", config_text(res.outcomes[0].config),
                                res.outcomes[0].build.log);
    }
    return res;
  }

  // 2. Validate every configuration that built.
  t0 = std::chrono::steady_clock::now();
  bool sanitized = false;
  for (size_t i = 0; i < n; ++i) {
    ConfigOutcome& o = res.outcomes[i];
    if (o.build.disposition != Disposition::passed) {
      o.disposition = o.build.disposition;
      o.message = o.build.log;
    } else {
      PlanResult check = backend.check_resources(o.build, device);
      if (check.disposition != Disposition::passed) {
        o.disposition = check.disposition;
        o.message = check.message;
      } else {
        ValidationOptions vo = opts.validation;
        // The sanitizer is slow: it checks one configuration (the first that builds: the defaults).
        vo.sanitize = opts.validation.sanitize && !sanitized;
        sanitized = sanitized || vo.sanitize;
        o.validation = validator.validate(ctx, source, o.build, o.config, vo);
        o.disposition = o.validation.disposition;
        o.message = o.validation.message;
      }
    }
    if (progress) progress("validate", i + 1, n);
  }
  res.validate_seconds = elapsed(t0);

  // 3. Time the survivors on the tuning shapes and rank them.
  t0 = std::chrono::steady_clock::now();
  std::vector<size_t> passing;
  for (size_t i = 0; i < n; ++i)
    if (res.outcomes[i].disposition == Disposition::passed) passing.push_back(i);
  size_t timed = 0;
  for (size_t i : passing) {
    ConfigOutcome& o = res.outcomes[i];
    if (!opts.tune_shapes.empty()) {
      MeasureOptions mo = opts.screening;
      mo.with_baseline = false;
      o.measurements = measure(backend, device, runner, validator, ctx, source, o.build, o.config,
                               opts.tune_shapes, mo);
      double total = 0;
      for (const auto& m : o.measurements) {
        if (m.disposition != Disposition::passed) {
          o.disposition = m.disposition;
          o.message = m.message;
          break;
        }
        total += m.stats.median;
      }
      o.score_ms = total;
    }
    if (progress) progress("time", ++timed, passing.size());
  }
  res.time_seconds = elapsed(t0);
  for (size_t i : passing)
    if (res.outcomes[i].disposition == Disposition::passed) res.ranking.push_back(i);
  std::stable_sort(res.ranking.begin(), res.ranking.end(), [&](size_t a, size_t b) {
    return res.outcomes[a].score_ms < res.outcomes[b].score_ms;
  });
  if (res.ranking.size() > static_cast<size_t>(std::max(opts.top_k, 1)))
    res.ranking.resize(static_cast<size_t>(std::max(opts.top_k, 1)));
  if (!res.ranking.empty()) {
    res.disposition = Disposition::passed;
    res.message = fmt::format("{} of {} configurations passed", passing.size(), n);
  } else {
    // The most informative failure: the first configuration's, or the most common one.
    std::map<Disposition, size_t> counts;
    for (const auto& o : res.outcomes) counts[o.disposition]++;
    Disposition worst = res.outcomes[0].disposition;
    size_t best = 0;
    for (const auto& [d, c] : counts)
      if (d != Disposition::invalid_config && c > best) {
        best = c;
        worst = d;
      }
    res.disposition = worst;
    for (const auto& o : res.outcomes)
      if (o.disposition == worst) {
        res.message = o.message;
        break;
      }
  }
  return res;
}

}  // namespace peak
