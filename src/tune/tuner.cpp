#include "tune/tuner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "util/fs.h"

namespace peak {

namespace {
double elapsed(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

expr::Env device_env(const DeviceFacts& d) {
  expr::Env env;
  env["max_threads"] = d.max_threads_per_group > 0 ? d.max_threads_per_group : 1024;
  env["shared_memory"] = d.shared_memory_per_group > 0 ? d.shared_memory_per_group : 32768;
  env["shared_memory_optin"] =
      d.shared_memory_per_group_optin > 0 ? d.shared_memory_per_group_optin : env["shared_memory"];
  env["subgroup_size"] = d.subgroup_size > 0 ? d.subgroup_size : 32;
  env["compute_units"] = d.compute_units;
  return env;
}

Result<Space> enumerate_space(const KernelContext& ctx, const DeviceFacts& device,
                              const SpaceOptions& opts) {
  Space space;
  std::vector<TuningParam> params = ctx.tuning;
  for (auto& p : params) {
    auto it = opts.overrides.find(p.name);
    if (it != opts.overrides.end() && !it->second.empty()) p.values = it->second;
  }
  for (const auto& [name, vals] : opts.overrides) {
    bool known = std::any_of(params.begin(), params.end(),
                             [&](const TuningParam& p) { return p.name == name; });
    if (!known)
      return make_error(
          fmt::format("tuning override for unknown parameter {} (known: {})", name, [&] {
            std::vector<std::string> n;
            for (const auto& p : params) n.push_back(p.name);
            return join(n, ", ");
          }()));
  }
  std::optional<expr::Expression> constraint;
  if (!ctx.tuning_valid.empty()) {
    auto e = expr::Expression::parse(ctx.tuning_valid);
    if (!e) return make_error("kernel.toml tuning_valid: " + e.error());
    constraint = std::move(*e);
  }
  space.total = 1;
  for (const auto& p : params) space.total *= std::max<size_t>(p.values.size(), 1);
  const size_t kEnumerateLimit = 1u << 20;
  if (space.total > kEnumerateLimit)
    return make_error(
        fmt::format("the tuning space has {} configurations; narrow the value sets", space.total));
  expr::Env base = device_env(device);
  std::vector<Config> valid;
  std::vector<size_t> idx(params.size(), 0);
  for (size_t n = 0; n < space.total; ++n) {
    Config c;
    for (size_t i = 0; i < params.size(); ++i)
      if (!params[i].values.empty()) c[params[i].name] = params[i].values[idx[i]];
    bool ok = true;
    if (constraint) {
      expr::Env env = base;
      for (const auto& [k, v] : c) env[k] = v;
      auto r = constraint->eval(env);
      if (!r) return make_error("kernel.toml tuning_valid: " + r.error());
      ok = *r != 0;
    }
    if (ok)
      valid.push_back(std::move(c));
    else
      ++space.invalid;
    for (size_t i = 0; i < params.size(); ++i) {
      if (++idx[i] < std::max<size_t>(params[i].values.size(), 1)) break;
      idx[i] = 0;
    }
  }
  // Defaults first, then configurations the caller insists on, then the rest.
  Config defaults;
  for (const auto& p : params) defaults[p.name] = p.default_value;
  std::vector<Config> ordered;
  auto add = [&](const Config& c) {
    if (std::find(ordered.begin(), ordered.end(), c) != ordered.end()) return;
    if (std::find(valid.begin(), valid.end(), c) == valid.end()) return;
    ordered.push_back(c);
  };
  add(defaults);
  for (const auto& c : opts.must_include) add(c);
  if (valid.size() > opts.budget) {
    space.sampled = true;
    std::mt19937_64 rng(opts.seed);
    std::shuffle(valid.begin(), valid.end(), rng);
  }
  for (const auto& c : valid) {
    if (ordered.size() >= std::max<size_t>(opts.budget, 1)) break;
    add(c);
  }
  space.configs = std::move(ordered);
  return space;
}

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
  auto stop = [&] { return opts.cancelled && opts.cancelled(); };
  std::mutex mu;
  auto worker = [&] {
    for (;;) {
      size_t i = next.fetch_add(1);
      if (i >= n || stop()) return;
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
  for (size_t i = 0; i < n && !stop(); ++i) {
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
    if (stop()) break;
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
      if (opts.on_timed) opts.on_timed(o);
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
