#pragma once
// Test helpers of the tuning module: synthetic measured spaces for the simulation runner, and a
// backend that compiles nothing (backend/testing.h).
#include <cmath>
#include <functional>

#include "backend/testing.h"
#include "tune/cache.h"

namespace peak::testing {

// A measured space over `params` whose passing configurations take `time(config)` ms (a
// non-positive time makes the configuration fail validation as incorrect); every configuration
// costs `compile_s` to compile, 1 s to validate and 0.5 s to time. The space's validity
// expression is `valid`.
inline TuningCache synthetic_cache(std::vector<SpaceParam> params,
                                   const std::function<double(const Config&)>& time,
                                   const std::string& valid = "", double compile_s = 2.0) {
  TuningCache c;
  c.kernel = "synthetic";
  c.transformation = "test";
  c.device.backend = "hlsl";
  c.device.name = "simulated device";
  c.device.max_threads_per_group = 1024;
  c.params = std::move(params);
  c.valid = valid;
  c.strategy = "exhaustive";
  c.jobs = 4;
  auto space = c.space();
  for (size_t i = 0; i < space->size(); ++i) {
    CacheEntry e;
    e.config = space->config(i);
    double t = time(e.config);
    e.compile_s = compile_s;
    e.validate_s = 1.0;
    if (t > 0) {
      e.disposition = Disposition::passed;
      e.stage = Stage::time;
      e.score_ms = t;
      e.time_s = 0.5;
    } else {
      e.disposition = Disposition::incorrect;
      e.stage = Stage::validate;
      e.reason = "outputs differ";
    }
    c.add(std::move(e));
  }
  return c;
}

// Five parameters of 1, 2, 4, 8 (1024 configurations minus those with A * B > 32): a smooth
// valley around A=4 B=8 C=2 D=4 E=1 (1 ms there), with configurations where C = 8 and D = 8
// failing.
inline TuningCache valley_cache() {
  std::vector<SpaceParam> params;
  for (const char* n : {"A", "B", "C", "D", "E"}) params.push_back({n, {1, 2, 4, 8}, 1});
  auto time = [](const Config& c) {
    if (c.at("C") == 8 && c.at("D") == 8) return -1.0;
    auto l = [&](const char* n) { return std::log2(static_cast<double>(c.at(n))); };
    double d = 0.6 * std::pow(l("A") - 2, 2) + 0.4 * std::pow(l("B") - 3, 2) +
               0.3 * std::pow(l("C") - 1, 2) + 0.2 * std::pow(l("D") - 2, 2) + 0.1 * l("E") +
               0.15 * (l("A") - 2) * (l("C") - 1);
    return 1.0 + d;
  };
  return synthetic_cache(params, time, "A * B <= 32");
}

}  // namespace peak::testing
