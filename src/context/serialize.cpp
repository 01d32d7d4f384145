// to_toml: a kernel context written back as kernel.toml text.
#include <algorithm>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "context/context.h"
#include "util/fs.h"

namespace peak {

namespace {

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += fmt::format("\\u{:04X}", static_cast<unsigned>(c));
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

std::string toml_float(double v) {
  std::string s = fmt::format("{}", v);  // the shortest text that reads back as the same double
  if (s.find_first_of(".eEni") == std::string::npos) s += ".0";
  return s;
}

std::string int_list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

std::string to_toml(const KernelContext& ctx) {
  std::ostringstream o;
  auto kv = [&](std::string_view key, const std::string& value, bool always = false) {
    if (always || !value.empty()) o << key << " = " << quote(value) << "\n";
  };
  o << "# peak kernel context (format documented in docs/kernel-context.md)\n";
  const bool has_suite = !ctx.suite.empty() || !ctx.suite_small.empty() || !ctx.classes.empty();
  int format = has_suite ? std::max(ctx.format, kContextFormatSuite) : ctx.format;
  if (!ctx.supports.empty()) format = std::max(format, kContextFormatSupports);
  if (!ctx.classes.empty()) format = std::max(format, kContextFormatClasses);
  o << "format = " << format << "\n";
  kv("name", ctx.name, true);
  kv("description", ctx.description);
  kv("backend", ctx.backend, true);
  kv("family", ctx.family);
  kv("precision", ctx.precision);
  kv("source", ctx.source_file, true);
  o << "reference = " << quote(ctx.reference == ReferenceKind::cpu ? "cpu" : "seed") << "\n";
  kv("flops", ctx.flops);
  kv("bytes", ctx.bytes);
  kv("valid", ctx.valid);
  kv("supports", ctx.supports);
  kv("reduction", ctx.reduction);
  kv("workspace", ctx.workspace);
  if (ctx.rtol != 0) o << "rtol = " << toml_float(ctx.rtol) << "\n";
  if (ctx.atol != 0) o << "atol = " << toml_float(ctx.atol) << "\n";
  kv("tuning_valid", ctx.tuning_valid);

  for (const auto& a : ctx.arrays) {
    o << "\n[[arrays]]\n";
    kv("name", a.name, true);
    kv("dtype", std::string(to_string(a.dtype)), true);
    kv("size", a.size, true);
    kv("init", a.init.text(), true);
    o << "output = " << (a.output ? "true" : "false") << "\n";
  }
  for (const auto& s : ctx.scalars) {
    o << "\n[[scalars]]\n";
    kv("name", s.name, true);
    kv("dtype", std::string(to_string(s.dtype)), true);
    if (!s.values.empty()) o << "values = " << int_list(s.values) << "\n";
    if (s.has_range()) o << "range = " << int_list({s.range_lo, s.range_hi, s.range_step}) << "\n";
  }
  const std::pair<std::string_view, const std::vector<Shape>*> lists[] = {
      {"bench", &ctx.bench_shapes},
      {"validation", &ctx.validation_shapes},
      {"hidden", &ctx.hidden_shapes},
      {"small", &ctx.small_shapes}};
  bool any_shape = std::any_of(std::begin(lists), std::end(lists),
                               [](const auto& l) { return !l.second->empty(); });
  if (any_shape) {
    o << "\n[shapes]\n";
    for (const auto& [key, shapes] : lists) {
      if (shapes->empty()) continue;
      o << key << " = [\n";
      for (const auto& shape : *shapes) {
        // Declared scalar order first (readable), then anything else in name order.
        std::vector<std::string> parts;
        std::set<std::string> done;
        for (const auto& s : ctx.scalars) {
          auto it = shape.values.find(s.name);
          if (it == shape.values.end()) continue;
          parts.push_back(fmt::format("{} = {}", s.name, it->second));
          done.insert(s.name);
        }
        for (const auto& [k, v] : shape.values) {
          if (!done.count(k)) parts.push_back(fmt::format("{} = {}", k, v));
        }
        o << "  { " << join(parts, ", ") << " },\n";
      }
      o << "]\n";
    }
  }
  if (has_suite) {
    o << "\n[suite]\n";
    const std::pair<std::string_view, const std::vector<SuiteShape>*> suites[] = {
        {"shapes", &ctx.suite}, {"small", &ctx.suite_small}};
    for (const auto& [key, list] : suites) {
      if (list->empty()) continue;
      o << key << " = [\n";
      for (const auto& ss : *list) {
        std::vector<std::string> parts = {fmt::format("name = {}", quote(ss.name)),
                                          fmt::format("class = {}", quote(to_string(ss.cls)))};
        for (const auto& s : ctx.scalars)
          if (auto it = ss.shape.values.find(s.name); it != ss.shape.values.end())
            parts.push_back(fmt::format("{} = {}", s.name, it->second));
        o << "  { " << join(parts, ", ") << " },\n";
      }
      o << "]\n";
    }
    if (!ctx.classes.empty()) {
      o << "classes = [\n";
      for (const auto& r : ctx.classes) {
        o << "  { class = " << quote(to_string(r.cls));
        if (!r.when.empty()) o << ", when = " << quote(r.when);
        o << " },\n";
      }
      o << "]\n";
    }
  }
  for (const auto& t : ctx.tuning) {
    o << "\n[[tuning]]\n";
    kv("name", t.name, true);
    o << "values = " << int_list(t.values) << "\n";
    o << "default = " << t.default_value << "\n";
  }
  return o.str();
}

}  // namespace peak
