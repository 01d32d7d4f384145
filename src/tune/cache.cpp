#include "tune/cache.h"

#include <cmath>

#include <fmt/format.h>

#include "util/fs.h"
#include "util/output.h"

namespace peak {

using json = nlohmann::json;

void TuningCache::add(CacheEntry e) {
  auto it = index_.find(e.config);
  if (it != index_.end()) {
    entries_[it->second] = std::move(e);
    return;
  }
  index_[e.config] = entries_.size();
  entries_.push_back(std::move(e));
}

const CacheEntry* TuningCache::find(const Config& c) const {
  auto it = index_.find(c);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

Result<TuningSpace> TuningCache::space() const {
  return TuningSpace::build(params, valid, device_env(device));
}

const CacheEntry* TuningCache::best() const {
  const CacheEntry* b = nullptr;
  for (const auto& e : entries_)
    if (e.disposition == Disposition::passed && (!b || e.score_ms < b->score_ms)) b = &e;
  return b;
}

json TuningCache::to_json() const {
  json ps = json::array();
  for (const auto& p : params)
    ps.push_back({{"name", p.name}, {"values", p.values}, {"default", p.default_value}});
  json configs = json::array();
  for (const auto& e : entries_) {
    json c = {{"config", config_json(e.config)},
              {"disposition", std::string(to_string(e.disposition))},
              {"stage", std::string(to_string(e.stage))},
              {"reason", e.reason}};
    if (e.disposition == Disposition::passed) c["score_ms"] = e.score_ms;
    c["compile_s"] = e.compile_s;
    c["validate_s"] = e.validate_s;
    c["time_s"] = e.time_s;
    c["resources"] = e.resources;
    c["launch"] = e.launch;
    configs.push_back(std::move(c));
  }
  return {{"format", kCacheFormatName},
          {"version", kCacheFormatVersion},
          {"produced_by", produced_by},
          {"command", command},
          {"kernel", kernel},
          {"transformation", transformation},
          {"source_hash", source_hash},
          {"device", device.to_json()},
          {"toolchain", toolchain},
          {"shape", shape},
          {"work", work_to_json(work)},
          {"objective", objective},
          {"space", {{"parameters", ps}, {"valid", valid}}},
          {"run", {{"strategy", strategy}, {"jobs", jobs}}},
          {"configs", configs}};
}

Result<TuningCache> TuningCache::from_json(const json& j, std::string_view where) {
  auto bad = [&](const std::string& what) {
    return make_error(fmt::format("{}: {}", where, what));
  };
  if (!j.is_object() || j.value("format", "") != kCacheFormatName)
    return bad(fmt::format("not a tuning cache (expected \"format\": \"{}\")", kCacheFormatName));
  if (!j.contains("version") || !j["version"].is_number_integer())
    return bad("the tuning cache has no integer \"version\"");
  int version = j["version"].get<int>();
  if (version > kCacheFormatVersion)
    return bad(fmt::format(
        "tuning cache version {} was written by a newer peak (this peak reads up to {}); upgrade "
        "peak",
        version, kCacheFormatVersion));
  if (version < 1) return bad(fmt::format("tuning cache version {} is not valid", version));
  TuningCache c;
  try {
    c.produced_by = j.value("produced_by", "");
    c.command = j.value("command", "");
    c.kernel = j.value("kernel", "");
    c.transformation = j.value("transformation", "");
    c.source_hash = j.value("source_hash", "");
    auto dev = parse_device_facts(j.value("device", json::object()));
    if (!dev) return bad("device: " + dev.error());
    c.device = *dev;
    c.toolchain = j.value("toolchain", "");
    c.shape = j.value("shape", "");
    c.work = work_from_json(j.value("work", json::object()));
    c.objective = j.value("objective", c.objective);
    const json& space = j.at("space");
    for (const auto& p : space.at("parameters")) {
      SpaceParam sp;
      sp.name = p.at("name").get<std::string>();
      sp.values = p.at("values").get<std::vector<int64_t>>();
      sp.default_value = p.value("default", sp.values.empty() ? int64_t{0} : sp.values.front());
      c.params.push_back(std::move(sp));
    }
    c.valid = space.value("valid", "");
    c.strategy = j.value("run", json::object()).value("strategy", "");
    c.jobs = j.value("run", json::object()).value("jobs", 1);
    size_t n = 0;
    for (const auto& e : j.at("configs")) {
      CacheEntry ce;
      for (const auto& [k, v] : e.at("config").items()) ce.config[k] = v.get<int64_t>();
      auto d = disposition_from_string(e.at("disposition").get<std::string>());
      if (!d)
        return bad(fmt::format("configs[{}]: unknown disposition '{}'", n,
                               e["disposition"].get<std::string>()));
      ce.disposition = *d;
      auto s = stage_from_string(e.at("stage").get<std::string>());
      if (!s)
        return bad(
            fmt::format("configs[{}]: unknown stage '{}'", n, e["stage"].get<std::string>()));
      ce.stage = *s;
      ce.reason = e.value("reason", "");
      if (ce.disposition == Disposition::passed) {
        ce.score_ms = e.at("score_ms").get<double>();
        if (!(ce.score_ms > 0) || !std::isfinite(ce.score_ms))
          return bad(
              fmt::format("configs[{}]: a passed configuration needs a positive score_ms", n));
      }
      ce.compile_s = e.value("compile_s", 0.0);
      ce.validate_s = e.value("validate_s", 0.0);
      ce.time_s = e.value("time_s", 0.0);
      ce.resources = e.value("resources", json::object());
      ce.launch = e.value("launch", json::object());
      c.add(std::move(ce));
      ++n;
    }
  } catch (const json::exception& e) {
    return bad(fmt::format("malformed tuning cache: {}", e.what()));
  }
  return c;
}

Result<TuningCache> read_cache(const fs::path& path) {
  auto text = read_file(path);
  if (!text) return make_error(text.error());
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded()) return make_error(fmt::format("{}: not valid JSON", path.string()));
  return TuningCache::from_json(j, path.string());
}

Status write_cache(const fs::path& path, const TuningCache& cache) {
  return write_output_file(path, cache.to_json().dump(1) + "\n");
}

}  // namespace peak
