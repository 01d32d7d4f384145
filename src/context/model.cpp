// The names of the kernel context model's enums (element types, source regions, suite classes)
// and the array initializers.
#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "context/context.h"

namespace peak {

// ---- Small enums ----

std::string_view to_string(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::i32:
      return "i32";
    case DType::e4m3:
      return "e4m3";
  }
  return "?";
}

std::optional<DType> dtype_from_string(std::string_view s) {
  if (s == "f32") return DType::f32;
  if (s == "f16") return DType::f16;
  if (s == "bf16") return DType::bf16;
  if (s == "i32") return DType::i32;
  if (s == "e4m3") return DType::e4m3;
  return std::nullopt;
}

size_t dtype_size(DType t) {
  return t == DType::e4m3 ? 1 : t == DType::f16 || t == DType::bf16 ? 2 : 4;
}

std::string_view to_string(Region r) {
  switch (r) {
    case Region::macros:
      return "macros";
    case Region::device:
      return "device";
    case Region::host:
      return "host";
  }
  return "?";
}

std::optional<Region> region_from_string(std::string_view s) {
  for (Region r : kAllRegions) {
    if (to_string(r) == s) return r;
  }
  return std::nullopt;
}

std::string_view to_string(SuiteClass c) {
  switch (c) {
    case SuiteClass::square:
      return "square";
    case SuiteClass::irregular:
      return "irregular";
    case SuiteClass::large_k:
      return "large-k";
    case SuiteClass::small_k:
      return "small-k";
    case SuiteClass::small_m:
      return "small-m";
    case SuiteClass::wide:
      return "wide";
    case SuiteClass::decode:
      return "decode";
    case SuiteClass::short_rows:
      return "short-rows";
    case SuiteClass::long_rows:
      return "long-rows";
    case SuiteClass::regular:
      return "regular";
  }
  return "?";
}

std::optional<SuiteClass> suite_class_from_string(std::string_view s) {
  for (SuiteClass c : kAllSuiteClasses)
    if (to_string(c) == s) return c;
  return std::nullopt;
}

// ---- Initializers ----

namespace {

// Shortest text that reads back as the same double ("-1", "0.5", "1e-05").
std::string format_double(double v) { return fmt::format("{}", v); }

std::string_view strip(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<double> parse_double(std::string_view s) {
  s = strip(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

constexpr std::string_view kInitializerHelp =
    "expected uniform(low, high), normal(mean, stddev), ones, zeros or iota";

}  // namespace

std::string Initializer::text() const {
  switch (kind) {
    case Kind::uniform:
      return fmt::format("uniform({}, {})", format_double(a), format_double(b));
    case Kind::normal:
      return fmt::format("normal({}, {})", format_double(a), format_double(b));
    case Kind::ones:
      return "ones";
    case Kind::zeros:
      return "zeros";
    case Kind::iota:
      return "iota";
  }
  return "?";
}

Result<Initializer> parse_initializer(std::string_view text) {
  std::string_view s = strip(text);
  std::string_view name = s;
  std::vector<double> args;
  bool has_parens = false;
  if (auto open = s.find('('); open != std::string_view::npos) {
    if (s.back() != ')') {
      return make_error(
          fmt::format("initializer '{}' has no closing ')'; {}", text, kInitializerHelp));
    }
    has_parens = true;
    name = strip(s.substr(0, open));
    std::string_view inner = strip(s.substr(open + 1, s.size() - open - 2));
    if (!inner.empty()) {
      for (;;) {
        size_t comma = inner.find(',');
        auto v = parse_double(inner.substr(0, comma));
        if (!v) {
          return make_error(fmt::format("initializer '{}': '{}' is not a finite number", text,
                                        strip(inner.substr(0, comma))));
        }
        args.push_back(*v);
        if (comma == std::string_view::npos) break;
        inner.remove_prefix(comma + 1);
      }
    }
  }
  Initializer init;
  if (name == "uniform" || name == "normal") {
    init.kind = name == "uniform" ? Initializer::Kind::uniform : Initializer::Kind::normal;
    init.a = name == "uniform" ? -1.0 : 0.0;
    init.b = 1.0;
    if (has_parens || !args.empty()) {
      if (args.size() != 2) {
        return make_error(
            fmt::format("initializer '{}': {} takes two numbers, got {}", text, name, args.size()));
      }
      init.a = args[0];
      init.b = args[1];
    }
    if (init.kind == Initializer::Kind::uniform && !(init.a < init.b)) {
      return make_error(fmt::format(
          "initializer '{}': uniform needs low < high (for constants use ones or zeros)", text));
    }
    if (init.kind == Initializer::Kind::normal && !(init.b > 0)) {
      return make_error(fmt::format("initializer '{}': normal needs a positive stddev", text));
    }
    return init;
  }
  Initializer::Kind kind;
  if (name == "ones") {
    kind = Initializer::Kind::ones;
  } else if (name == "zeros") {
    kind = Initializer::Kind::zeros;
  } else if (name == "iota") {
    kind = Initializer::Kind::iota;
  } else {
    return make_error(fmt::format("unknown initializer '{}'; {}", text, kInitializerHelp));
  }
  if (!args.empty()) {
    return make_error(fmt::format("initializer '{}': {} takes no arguments", text, name));
  }
  init.kind = kind;
  return init;
}

}  // namespace peak
