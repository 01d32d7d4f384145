#include "report/dispatch.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "report/suite.h"
#include "util/fs.h"

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
  for (const auto& v : t.variants)
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
      t.variants.push_back(std::move(v));
    }
  return t;
}

std::optional<DispatchTable> latest_dispatch(const Store& store, int64_t checkpoint) {
  auto part = latest_summary_part(store, checkpoint, kDispatchKind, "dispatch", true);
  if (!part) return std::nullopt;
  DispatchTable t = dispatch_from_json(part->second);
  t.evaluation = part->first.id;
  t.created_at = part->first.created_at;
  return t;
}

std::string dispatch_text(const DispatchTable& t) {
  std::ostringstream o;
  o << fmt::format("checkpoint {}: one configuration per shape class{}{}", t.checkpoint,
                   t.device.empty() ? "" : ", on " + t.device, t.small ? ", small suite" : "");
  if (t.evaluation > 0) o << fmt::format(" (evaluation {}, {})", t.evaluation, t.created_at);
  o << "\n";
  std::vector<std::vector<std::string>> rows = {{"class", "rule", "tuned on", "configuration",
                                                 "evaluated", "seconds", "GFLOP/s",
                                                 "vendor GFLOP/s"}};
  auto num = [](double v) { return v > 0 ? fmt::format("{:.1f}", v) : std::string("-"); };
  for (const auto& v : t.variants) {
    std::string config = v.config.empty()
                             ? fmt::format("(none found: {}; runs the fallback)", v.disposition)
                             : v.config_text;
    rows.push_back({v.cls, v.when.empty() ? "(any other shape)" : v.when, join(v.shapes, ", "),
                    config, fmt::format("{} of {}", v.evaluated, v.space),
                    fmt::format("{:.1f}", v.seconds), num(v.gflops), num(v.baseline_gflops)});
  }
  std::vector<size_t> w(rows[0].size(), 0);
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      bool right = i >= 4;
      line += (right ? fmt::format("{:>{}}", r[i], w[i]) : fmt::format("{:<{}}", r[i], w[i]));
      if (i + 1 < r.size()) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    o << "  " << line << "\n";
  }
  o << fmt::format("evaluations over all classes: {}; other shapes run the fallback, {}\n",
                   dispatch_evaluations(t),
                   t.fallback_text.empty() ? "no tuning parameters" : t.fallback_text);
  return o.str();
}

}  // namespace peak
