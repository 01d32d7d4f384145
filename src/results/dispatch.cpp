#include "results/dispatch.h"

namespace peak {

using json = nlohmann::json;

const DispatchVariant* dispatch_variant(const DispatchTable& t, const std::string& cls) {
  for (const auto& v : t.variants)
    if (v.cls == cls && !v.config.empty()) return &v;
  return nullptr;
}

const std::map<std::string, int64_t>& dispatch_config(const DispatchTable& t,
                                                      const std::string& cls) {
  const DispatchVariant* v = dispatch_variant(t, cls);
  return v ? v->config : t.fallback;
}

size_t dispatch_evaluations(const DispatchTable& t) {
  size_t n = 0;
  for (const auto& v : t.variants) n += v.evaluated;
  return n;
}

namespace {

json config_object(const std::map<std::string, int64_t>& c) {
  json j = json::object();
  for (const auto& [k, v] : c) j[k] = v;
  return j;
}

std::map<std::string, int64_t> config_map(const json& j) {
  std::map<std::string, int64_t> c;
  if (j.is_object())
    for (const auto& [k, v] : j.items())
      if (v.is_number_integer()) c[k] = v.get<int64_t>();
  return c;
}

}  // namespace

json dispatch_json(const DispatchTable& t) {
  json variants = json::array();
  for (const auto& v : t.variants) {
    variants.push_back({{"class", v.cls},
                        {"when", v.when},
                        {"shapes", v.shapes},
                        {"config", config_object(v.config)},
                        {"config_text", v.config_text},
                        {"disposition", v.disposition},
                        {"message", v.message},
                        {"evaluated", v.evaluated},
                        {"space", v.space},
                        {"seconds", v.seconds},
                        {"gflops", v.gflops},
                        {"baseline_gflops", v.baseline_gflops}});
    if (v.bytes_headline)
      variants.back().update({{"headline", "bytes"},
                              {"gbs", v.gbs},
                              {"baseline_gbs", v.baseline_gbs},
                              {"pct_of_copy", v.pct_of_copy}});
  }
  return {{"kind", "peak-dispatch"},
          {"format", kDispatchFormatVersion},
          {"checkpoint", t.checkpoint},
          {"evaluation", t.evaluation},
          {"created_at", t.created_at},
          {"device", t.device},
          {"small", t.small},
          {"fallback", config_object(t.fallback)},
          {"fallback_text", t.fallback_text},
          {"evaluations", dispatch_evaluations(t)},
          {"variants", variants}};
}

DispatchTable dispatch_from_json(const json& j) {
  DispatchTable t;
  if (!j.is_object()) return t;
  t.checkpoint = j.value("checkpoint", int64_t{0});
  t.evaluation = j.value("evaluation", int64_t{0});
  t.created_at = j.value("created_at", "");
  t.device = j.value("device", "");
  t.small = j.value("small", false);
  t.fallback = config_map(j.value("fallback", json::object()));
  t.fallback_text = j.value("fallback_text", "");
  if (j.contains("variants") && j["variants"].is_array())
    for (const auto& e : j["variants"]) {
      if (!e.is_object()) continue;
      DispatchVariant v;
      v.cls = e.value("class", "");
      v.when = e.value("when", "");
      if (e.contains("shapes") && e["shapes"].is_array())
        for (const auto& s : e["shapes"])
          if (s.is_string()) v.shapes.push_back(s.get<std::string>());
      v.config = config_map(e.value("config", json::object()));
      v.config_text = e.value("config_text", "");
      v.disposition = e.value("disposition", "not_run");
      v.message = e.value("message", "");
      v.evaluated = e.value("evaluated", size_t{0});
      v.space = e.value("space", size_t{0});
      v.seconds = e.value("seconds", 0.0);
      v.gflops = e.value("gflops", 0.0);
      v.baseline_gflops = e.value("baseline_gflops", 0.0);
      v.bytes_headline = e.value("headline", "") == "bytes";
      v.gbs = e.value("gbs", 0.0);
      v.baseline_gbs = e.value("baseline_gbs", 0.0);
      v.pct_of_copy = e.value("pct_of_copy", 0.0);
      t.variants.push_back(std::move(v));
    }
  return t;
}

}  // namespace peak
