#include "context/context.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "context/prng.h"
#include "context/reference.h"
#include "util/fs.h"

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
  }
  return "?";
}

std::optional<DType> dtype_from_string(std::string_view s) {
  if (s == "f32") return DType::f32;
  if (s == "f16") return DType::f16;
  if (s == "bf16") return DType::bf16;
  if (s == "i32") return DType::i32;
  return std::nullopt;
}

size_t dtype_size(DType t) { return t == DType::f16 || t == DType::bf16 ? 2 : 4; }

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

// ---- Shapes ----

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
  }
  return "?";
}

std::optional<SuiteClass> suite_class_from_string(std::string_view s) {
  for (SuiteClass c : kAllSuiteClasses)
    if (to_string(c) == s) return c;
  return std::nullopt;
}

const std::vector<SuiteShape>& suite_for(const KernelContext& ctx, bool small) {
  return small && !ctx.suite_small.empty() ? ctx.suite_small : ctx.suite;
}

std::vector<ClassRule> class_rules(const KernelContext& ctx) {
  if (!ctx.classes.empty()) return ctx.classes;
  auto has = [&](const char* n) {
    return std::any_of(ctx.scalars.begin(), ctx.scalars.end(),
                       [&](const ScalarSpec& s) { return s.name == n; });
  };
  if (ctx.family != "matmul" || !has("M") || !has("N") || !has("K")) return {};
  // A long reduction over a small output first (256 x 256 x 131072, and 16 x 16 x 8192 too),
  // then few rows (decode), a short reduction, the LLM layers' wide outputs, the cube.
  return {{SuiteClass::large_k, "K >= 8 * M && K >= 8 * N"},
          {SuiteClass::small_m, "M <= 32"},
          {SuiteClass::small_k, "K <= 64"},
          {SuiteClass::wide, "N >= 2 * M && N >= 2 * K"},
          {SuiteClass::square, "M == N && N == K"},
          {SuiteClass::irregular, ""}};
}

std::string Shape::text() const {
  std::string s;
  for (const auto& [k, v] : values) {
    if (!s.empty()) s += ' ';
    s += fmt::format("{}={}", k, v);
  }
  return s;
}

// ---- kernel.toml parsing ----

namespace {

bool is_identifier(std::string_view s) {
  if (s.empty()) return false;
  auto start = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; };
  if (!start(s[0])) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::string type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    default:
      return "a date or time";
  }
}

struct ParseError {
  std::string message;
};

// Reads one kernel.toml; every error is thrown as ParseError (caught in parse_context) and
// names FILE:LINE:COL of the node at fault.
class Loader {
 public:
  explicit Loader(std::string_view filename) : file_(filename) {}

  std::string where(const toml::source_region& src) const {
    if (src.begin.line == 0) return fmt::format("{}: ", file_);
    return fmt::format("{}:{}:{}: ", file_, src.begin.line, src.begin.column);
  }
  [[noreturn]] void fail(const toml::source_region& src, const std::string& message) const {
    throw ParseError{where(src) + message};
  }
  [[noreturn]] void fail(const toml::node& n, const std::string& message) const {
    fail(n.source(), message);
  }

  // Rejects keys not in `allowed` (typos otherwise pass silently).
  void check_keys(const toml::table& t, std::initializer_list<std::string_view> allowed,
                  std::string_view where_text) const {
    for (auto&& [k, v] : t) {
      if (std::find(allowed.begin(), allowed.end(), k.str()) != allowed.end()) continue;
      std::string list;
      for (auto a : allowed) {
        if (!list.empty()) list += ", ";
        list += a;
      }
      fail(k.source(),
           fmt::format("unknown key '{}' {} (known keys: {})", k.str(), where_text, list));
    }
  }

  std::optional<std::string> opt_string(const toml::table& t, std::string_view key) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (!n->is_string()) fail(*n, fmt::format("'{}' must be a string, not {}", key, type_name(*n)));
    return n->as_string()->get();
  }
  std::string req_string(const toml::table& t, std::string_view key, std::string_view what) const {
    auto s = opt_string(t, key);
    if (!s) fail(t, fmt::format("missing required key '{}' {}", key, what));
    if (s->empty()) fail(*t.get(key), fmt::format("'{}' must not be empty", key));
    return *s;
  }
  std::optional<int64_t> opt_int(const toml::table& t, std::string_view key) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    return as_int(*n, key);
  }
  int64_t as_int(const toml::node& n, std::string_view what) const {
    if (!n.is_integer()) fail(n, fmt::format("{} must be an integer, not {}", what, type_name(n)));
    return n.as_integer()->get();
  }
  int64_t as_i32(const toml::node& n, std::string_view what) const {
    int64_t v = as_int(n, what);
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
      fail(n, fmt::format("{} = {} does not fit in a 32-bit integer (i32)", what, v));
    }
    return v;
  }
  std::optional<double> opt_number(const toml::table& t, std::string_view key) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (!n->is_number()) fail(*n, fmt::format("'{}' must be a number, not {}", key, type_name(*n)));
    double v = n->value<double>().value_or(0.0);
    if (!std::isfinite(v) || v < 0) fail(*n, fmt::format("'{}' must be a finite number >= 0", key));
    return v;
  }
  const toml::array& req_array_of_tables(const toml::node& n, std::string_view key) const {
    const toml::array* arr = n.as_array();
    if (!arr) {
      fail(n, fmt::format("'{}' must be an array of tables ([[{}]] sections), not {}", key, key,
                          type_name(n)));
    }
    for (const auto& el : *arr) {
      if (!el.is_table()) {
        fail(el, fmt::format("every entry of '{}' must be a table, not {}", key, type_name(el)));
      }
    }
    return *arr;
  }

  // Parses an expression; names what failed and where.
  expr::Expression expression(const toml::node& n, std::string_view what) const {
    if (!n.is_string())
      fail(n, fmt::format("{} must be a string expression, not {}", what, type_name(n)));
    const std::string& text = n.as_string()->get();
    auto e = expr::Expression::parse(text);
    if (!e) fail(n, fmt::format("cannot parse {} = \"{}\": {}", what, text, e.error()));
    return *e;
  }
  // Expression whose identifiers must all be in `known`.
  void check_identifiers(const toml::node& n, const expr::Expression& e, std::string_view what,
                         const std::set<std::string>& known, std::string_view allowed_desc) const {
    for (const auto& id : e.identifiers()) {
      if (known.count(id)) continue;
      std::string list;
      for (const auto& k : known) {
        if (!list.empty()) list += ", ";
        list += k;
      }
      fail(n, fmt::format("{} = \"{}\" uses unknown name '{}' ({} may use {}: {})", what, e.text(),
                          id, what, allowed_desc, list.empty() ? "none declared" : list));
    }
  }

  KernelContext load(std::string_view text, const std::filesystem::path& dir);

 private:
  void load_scalars(const toml::table& root, KernelContext& ctx);
  void load_arrays(const toml::table& root, KernelContext& ctx);
  void load_tuning(const toml::table& root, KernelContext& ctx);
  void load_shapes(const toml::table& root, KernelContext& ctx);
  // Reads the values of every scalar from table `t` (skipping the keys in `skip`) and checks
  // the shape: every scalar given, its sizes evaluate, `valid` holds. `what` names the list.
  Shape read_shape(const KernelContext& ctx, const toml::table& t, const toml::node& el,
                   std::string_view what, std::initializer_list<std::string_view> skip = {});
  void load_suite(const toml::table& root, KernelContext& ctx);
  void load_class_rules(const toml::node& node, KernelContext& ctx, const std::string& classes);
  void check_names(const toml::table& root, const KernelContext& ctx);

  std::string file_;
};

constexpr std::string_view kBackends[] = {"hlsl", "cuda", "hip"};

KernelContext Loader::load(std::string_view text, const std::filesystem::path& dir) {
  toml::table root;
  try {
    root = toml::parse(text, std::string_view(file_));
  } catch (const toml::parse_error& e) {
    throw ParseError{fmt::format("{}:{}:{}: {}", file_, e.source().begin.line,
                                 e.source().begin.column, e.description())};
  }
  check_keys(root, {"format",    "name",      "description", "backend",      "family",  "precision",
                    "source",    "reference", "flops",       "bytes",        "valid",   "reduction",
                    "workspace", "rtol",      "atol",        "tuning_valid", "arrays",  "scalars",
                    "shapes",    "suite",     "tuning",      "entry",        "supports"},
             "at the top level of kernel.toml");

  KernelContext ctx;
  ctx.dir = dir;
  ctx.format = kContextFormatOldest;  // a file without `format` is format 2
  if (const toml::node* f = root.get("format")) {
    int64_t v = as_int(*f, "'format'");
    if (v > kContextFormatVersion) {
      fail(*f, fmt::format("format {} is newer than this peak supports (format {}); upgrade peak",
                           v, kContextFormatVersion));
    }
    if (v < 1)
      fail(*f, fmt::format("format {} is not a valid format version (use {})", v,
                           kContextFormatVersion));
    if (v < kContextFormatOldest)
      fail(*f, fmt::format("format {} kernel contexts held host code in the host region; format {} "
                           "holds a launch plan there (docs/launch-plan.md): rewrite the host "
                           "region as a plan and set format = {}",
                           v, kContextFormatOldest, kContextFormatVersion));
    ctx.format = static_cast<int>(v);
  }
  ctx.name = req_string(root, "name", "(the kernel context's name)");
  ctx.description = opt_string(root, "description").value_or("");
  ctx.backend = req_string(root, "backend", "(hlsl, cuda or hip)");
  if (std::find(std::begin(kBackends), std::end(kBackends), ctx.backend) == std::end(kBackends)) {
    fail(*root.get("backend"),
         fmt::format("unknown backend '{}' (expected hlsl, cuda or hip)", ctx.backend));
  }
  ctx.family = opt_string(root, "family").value_or("");
  ctx.precision = opt_string(root, "precision").value_or("");
  ctx.source_file = req_string(root, "source", "(the kernel source file next to kernel.toml)");
  if (ctx.source_file.find_first_of("/\\") != std::string::npos || ctx.source_file == "." ||
      ctx.source_file == "..") {
    fail(*root.get("source"),
         fmt::format("source = \"{}\" must be a plain file name next to kernel.toml",
                     ctx.source_file));
  }
  if (const toml::node* e = root.get("entry"))
    fail(*e,
         "'entry' is gone since format 2: the launch plan in the host region names the kernels "
         "it launches (docs/launch-plan.md); remove the key");

  load_scalars(root, ctx);
  load_arrays(root, ctx);
  load_tuning(root, ctx);
  check_names(root, ctx);

  // Expressions over the shape: scalars and <array>.size.
  std::set<std::string> shape_names;
  for (const auto& s : ctx.scalars) shape_names.insert(s.name);
  for (const auto& a : ctx.arrays) shape_names.insert(a.name + ".size");
  struct ShapeExpr {
    std::string_view key;
    std::string* field;
  } shape_exprs[] = {{"flops", &ctx.flops},         {"bytes", &ctx.bytes},
                     {"valid", &ctx.valid},         {"supports", &ctx.supports},
                     {"reduction", &ctx.reduction}, {"workspace", &ctx.workspace}};
  for (auto& se : shape_exprs) {
    const toml::node* n = root.get(se.key);
    if (!n) continue;
    auto e = expression(*n, se.key);
    check_identifiers(*n, e, se.key, shape_names, "the scalars and <array>.size");
    *se.field = e.text();
  }
  if (const toml::node* n = root.get("supports"); n && ctx.format < kContextFormatSupports)
    fail(*n, fmt::format("'supports' needs format = {} (this file is format {})",
                         kContextFormatSupports, ctx.format));
  if (const toml::node* n = root.get("tuning_valid")) {
    // Identifiers here include device limits known only at tuning time; only the syntax is checked.
    ctx.tuning_valid = expression(*n, "tuning_valid").text();
  }

  if (auto v = opt_number(root, "rtol")) ctx.rtol = *v;
  if (auto v = opt_number(root, "atol")) ctx.atol = *v;

  const bool cpu_available = has_cpu_reference(ctx.family);
  ctx.reference = cpu_available ? ReferenceKind::cpu : ReferenceKind::seed;
  if (auto ref = opt_string(root, "reference")) {
    const toml::node& n = *root.get("reference");
    if (*ref == "cpu") {
      if (!cpu_available) {
        fail(n, ctx.family.empty()
                    ? std::string("reference = \"cpu\" needs a family with a CPU reference "
                                  "(family = \"matmul\"); use reference = \"seed\"")
                    : fmt::format("reference = \"cpu\": family '{}' has no CPU reference (only "
                                  "matmul has); use reference = \"seed\"",
                                  ctx.family));
      }
      ctx.reference = ReferenceKind::cpu;
    } else if (*ref == "seed") {
      ctx.reference = ReferenceKind::seed;
    } else {
      fail(n, fmt::format("unknown reference '{}' (expected cpu or seed)", *ref));
    }
  }

  if (ctx.arrays.empty())
    fail(root, "no [[arrays]] declared; a kernel context needs at least one output array");
  if (std::none_of(ctx.arrays.begin(), ctx.arrays.end(),
                   [](const ArraySpec& a) { return a.output; })) {
    fail(*root.get("arrays"),
         "no array is marked output = true; peak compares only outputs, so mark the array(s) the "
         "kernel writes");
  }

  load_shapes(root, ctx);
  load_suite(root, ctx);

  if (ctx.reference == ReferenceKind::cpu) {
    if (Status s = check_cpu_reference(ctx); !s) {
      const toml::node* n = root.get("family");
      fail(
          n ? n->source() : root.source(),
          s.message() + " (or set reference = \"seed\" to compare with the seed kernel's outputs)");
    }
  }
  return ctx;
}

void Loader::load_scalars(const toml::table& root, KernelContext& ctx) {
  const toml::node* node = root.get("scalars");
  if (!node) return;
  for (const auto& el : req_array_of_tables(*node, "scalars")) {
    const toml::table& t = *el.as_table();
    check_keys(t, {"name", "dtype", "values", "range"}, "in [[scalars]]");
    ScalarSpec s;
    s.name = req_string(t, "name", "in [[scalars]]");
    if (auto d = opt_string(t, "dtype")) {
      auto dt = dtype_from_string(*d);
      if (!dt)
        fail(*t.get("dtype"),
             fmt::format("unknown dtype '{}' for scalar '{}' (scalars are i32)", *d, s.name));
      if (*dt != DType::i32) {
        fail(*t.get("dtype"),
             fmt::format("scalar '{}' has dtype {}; scalars are integers (i32)", s.name, *d));
      }
      s.dtype = *dt;
    }
    if (const toml::node* v = t.get("values")) {
      const toml::array* arr = v->as_array();
      if (!arr)
        fail(*v, fmt::format("'values' of scalar '{}' must be an array of integers", s.name));
      if (arr->empty()) fail(*v, fmt::format("'values' of scalar '{}' is empty", s.name));
      for (const auto& x : *arr)
        s.values.push_back(as_i32(x, fmt::format("a value of scalar '{}'", s.name)));
    }
    if (const toml::node* r = t.get("range")) {
      const toml::array* arr = r->as_array();
      if (!arr || (arr->size() != 2 && arr->size() != 3)) {
        fail(*r, fmt::format("'range' of scalar '{}' must be [low, high] or [low, high, step]",
                             s.name));
      }
      s.range_lo = as_i32((*arr)[0], "the range's low end");
      s.range_hi = as_i32((*arr)[1], "the range's high end");
      if (arr->size() == 3) s.range_step = as_i32((*arr)[2], "the range's step");
      if (s.range_hi <= s.range_lo) {
        fail(*r, fmt::format("'range' of scalar '{}' needs high > low (got [{}, {}])", s.name,
                             s.range_lo, s.range_hi));
      }
      if (s.range_step <= 0) {
        fail(*r, fmt::format("'range' of scalar '{}' needs a positive step (got {})", s.name,
                             s.range_step));
      }
    }
    ctx.scalars.push_back(std::move(s));
  }
}

void Loader::load_arrays(const toml::table& root, KernelContext& ctx) {
  const toml::node* node = root.get("arrays");
  if (!node) return;
  std::set<std::string> scalar_names;
  for (const auto& s : ctx.scalars) scalar_names.insert(s.name);
  for (const auto& el : req_array_of_tables(*node, "arrays")) {
    const toml::table& t = *el.as_table();
    check_keys(t, {"name", "dtype", "size", "init", "output"}, "in [[arrays]]");
    ArraySpec a;
    a.name = req_string(t, "name", "in [[arrays]]");
    std::string what = fmt::format("for array '{}'", a.name);
    std::string d = req_string(t, "dtype", what + " (f32, f16 or i32)");
    auto dt = dtype_from_string(d);
    if (!dt) {
      fail(*t.get("dtype"),
           fmt::format("unknown dtype '{}' for array '{}' (expected f32, f16 or i32)", d, a.name));
    }
    a.dtype = *dt;
    const toml::node* size = t.get("size");
    if (!size)
      fail(t,
           fmt::format("missing required key 'size' {} (an expression such as \"M * K\")", what));
    auto e = expression(*size, fmt::format("the size of array '{}'", a.name));
    check_identifiers(*size, e, fmt::format("the size of array '{}'", a.name), scalar_names,
                      "the scalars");
    a.size = e.text();
    if (auto init = opt_string(t, "init")) {
      auto r = parse_initializer(*init);
      if (!r) fail(*t.get("init"), fmt::format("array '{}': {}", a.name, r.error()));
      a.init = *r;
    }
    if (const toml::node* o = t.get("output")) {
      if (!o->is_boolean())
        fail(*o, fmt::format("'output' must be true or false, not {}", type_name(*o)));
      a.output = o->as_boolean()->get();
    }
    ctx.arrays.push_back(std::move(a));
  }
}

void Loader::load_tuning(const toml::table& root, KernelContext& ctx) {
  const toml::node* node = root.get("tuning");
  if (!node) return;
  for (const auto& el : req_array_of_tables(*node, "tuning")) {
    const toml::table& t = *el.as_table();
    check_keys(t, {"name", "values", "default"}, "in [[tuning]]");
    TuningParam p;
    p.name = req_string(t, "name", "in [[tuning]]");
    const toml::node* v = t.get("values");
    if (!v) fail(t, fmt::format("missing required key 'values' for tuning parameter '{}'", p.name));
    const toml::array* arr = v->as_array();
    if (!arr || arr->empty()) {
      fail(*v,
           fmt::format("'values' of tuning parameter '{}' must be a non-empty array of integers",
                       p.name));
    }
    for (const auto& x : *arr) {
      int64_t val = as_int(x, fmt::format("a value of tuning parameter '{}'", p.name));
      if (std::find(p.values.begin(), p.values.end(), val) != p.values.end()) {
        fail(x, fmt::format("tuning parameter '{}' lists the value {} twice", p.name, val));
      }
      p.values.push_back(val);
    }
    p.default_value = p.values.front();
    if (const toml::node* d = t.get("default")) {
      p.default_value = as_int(*d, "'default'");
      if (std::find(p.values.begin(), p.values.end(), p.default_value) == p.values.end()) {
        fail(*d, fmt::format("default {} of tuning parameter '{}' is not one of its values",
                             p.default_value, p.name));
      }
    }
    ctx.tuning.push_back(std::move(p));
  }
}

void Loader::check_names(const toml::table& root, const KernelContext& ctx) {
  // Arrays, scalars and tuning parameters share one namespace (expressions and defines).
  std::map<std::string, std::string> seen;  // name -> what
  auto check = [&](std::string_view section, size_t index, const std::string& name,
                   std::string_view what) {
    const toml::node& n = *(*root.get(section)->as_array())[index].as_table()->get("name");
    if (!is_identifier(name)) {
      fail(n, fmt::format("{} name '{}' is not an identifier (letters, digits and _, not starting "
                          "with a digit)",
                          what, name));
    }
    auto [it, inserted] = seen.emplace(name, std::string(what));
    if (!inserted) {
      fail(n,
           fmt::format("duplicate name '{}': already used by {} '{}' (arrays, scalars and tuning "
                       "parameters share one namespace)",
                       name, it->second, name));
    }
  };
  for (size_t i = 0; i < ctx.arrays.size(); ++i) check("arrays", i, ctx.arrays[i].name, "array");
  for (size_t i = 0; i < ctx.scalars.size(); ++i)
    check("scalars", i, ctx.scalars[i].name, "scalar");
  for (size_t i = 0; i < ctx.tuning.size(); ++i)
    check("tuning", i, ctx.tuning[i].name, "tuning parameter");
}

void Loader::load_shapes(const toml::table& root, KernelContext& ctx) {
  const toml::node* node = root.get("shapes");
  if (!node) return;
  const toml::table* shapes = node->as_table();
  if (!shapes)
    fail(*node, fmt::format("'shapes' must be a table ([shapes]), not {}", type_name(*node)));
  check_keys(*shapes, {"bench", "validation", "hidden", "small"}, "in [shapes]");
  struct List {
    std::string_view key;
    std::vector<Shape>* out;
  } lists[] = {{"bench", &ctx.bench_shapes},
               {"validation", &ctx.validation_shapes},
               {"hidden", &ctx.hidden_shapes},
               {"small", &ctx.small_shapes}};
  for (auto& list : lists) {
    const toml::node* n = shapes->get(list.key);
    if (!n) continue;
    const toml::array* arr = n->as_array();
    if (!arr) {
      fail(*n, fmt::format("shapes.{} must be an array of tables like [{{ M = 64, N = 64 }}]",
                           list.key));
    }
    for (const auto& el : *arr) {
      const toml::table* t = el.as_table();
      if (!t)
        fail(el, fmt::format("every entry of shapes.{} must be a table like {{ M = 64 }}, not {}",
                             list.key, type_name(el)));
      list.out->push_back(read_shape(ctx, *t, el, fmt::format("shapes.{}", list.key)));
    }
  }
}

Shape Loader::read_shape(const KernelContext& ctx, const toml::table& t, const toml::node& el,
                         std::string_view what, std::initializer_list<std::string_view> skip) {
  Shape shape;
  for (auto&& [k, v] : t) {
    std::string key(k.str());
    if (std::find(skip.begin(), skip.end(), key) != skip.end()) continue;
    bool known = std::any_of(ctx.scalars.begin(), ctx.scalars.end(),
                             [&](const ScalarSpec& s) { return s.name == key; });
    if (!known)
      fail(k.source(),
           fmt::format("shape in {} gives a value to '{}', which is not a declared scalar", what,
                       key));
    shape.values[key] = as_i32(v, fmt::format("scalar '{}'", key));
  }
  for (const auto& s : ctx.scalars) {
    if (!shape.values.count(s.name)) {
      fail(el, fmt::format("shape in {} gives no value to scalar '{}'; every shape must give a "
                           "value to every scalar",
                           what, s.name));
    }
  }
  auto sizes = array_sizes(ctx, shape);
  if (!sizes) fail(el, fmt::format("shape {}: {}", shape.text(), sizes.error()));
  auto ok = shape_in_problem(ctx, shape);
  if (!ok) fail(el, fmt::format("shape {}: {}", shape.text(), ok.error()));
  if (!*ok) {
    fail(el, fmt::format("shape {} does not satisfy valid = \"{}\"", shape.text(), ctx.valid));
  }
  return shape;
}

void Loader::load_suite(const toml::table& root, KernelContext& ctx) {
  const toml::node* node = root.get("suite");
  if (!node) return;
  // A format-2 peak would call [suite] an unknown key; the format says what the file needs.
  if (ctx.format < kContextFormatSuite)
    fail(*node, fmt::format("[suite] needs kernel context format {}; write 'format = {}' at the "
                            "top of kernel.toml",
                            kContextFormatSuite, kContextFormatSuite));
  const toml::table* suite = node->as_table();
  if (!suite)
    fail(*node, fmt::format("'suite' must be a table ([suite]), not {}", type_name(*node)));
  check_keys(*suite, {"shapes", "small", "classes"}, "in [suite]");
  for (const auto& s : ctx.scalars)
    if (s.name == "name" || s.name == "class")
      fail(*node, fmt::format("a suite entry uses the key '{}' for itself, so a context with a "
                              "scalar named '{}' cannot have a suite; rename the scalar",
                              s.name, s.name));
  std::string classes;
  for (SuiteClass c : kAllSuiteClasses)
    classes += (classes.empty() ? "" : ", ") + std::string(to_string(c));
  if (const toml::node* n = suite->get("classes")) load_class_rules(*n, ctx, classes);
  struct List {
    std::string_view key;
    std::vector<SuiteShape>* out;
  } lists[] = {{"shapes", &ctx.suite}, {"small", &ctx.suite_small}};
  for (auto& list : lists) {
    const toml::node* n = suite->get(list.key);
    if (!n) continue;
    const toml::array* arr = n->as_array();
    if (!arr)
      fail(*n, fmt::format("suite.{} must be an array of tables like [{{ name = \"square-2048\", "
                           "class = \"square\", M = 2048, N = 2048, K = 2048 }}]",
                           list.key));
    std::map<std::string, const toml::node*> seen;
    for (const auto& el : *arr) {
      const toml::table* t = el.as_table();
      if (!t)
        fail(el, fmt::format("every entry of suite.{} must be a table like {{ name = \"square\", "
                             "class = \"square\", M = 64 }}, not {}",
                             list.key, type_name(el)));
      SuiteShape ss;
      const std::string what = fmt::format("suite.{}", list.key);
      ss.name = req_string(*t, "name", fmt::format("in an entry of {} (the shape's name)", what));
      auto cls =
          req_string(*t, "class", fmt::format("in entry '{}' of {} ({})", ss.name, what, classes));
      auto c = suite_class_from_string(cls);
      if (!c)
        fail(*t->get("class"), fmt::format("unknown class '{}' of suite shape '{}' (the classes "
                                           "are {})",
                                           cls, ss.name, classes));
      ss.cls = *c;
      auto [it, fresh] = seen.emplace(ss.name, t->get("name"));
      if (!fresh)
        fail(*t->get("name"),
             fmt::format("duplicate name '{}' in {} (first at line {}); every suite shape needs a "
                         "name of its own",
                         ss.name, what, it->second->source().begin.line));
      ss.shape =
          read_shape(ctx, *t, el, fmt::format("{} ('{}')", what, ss.name), {"name", "class"});
      list.out->push_back(std::move(ss));
    }
  }
}

void Loader::load_class_rules(const toml::node& node, KernelContext& ctx,
                              const std::string& classes) {
  if (ctx.format < kContextFormatClasses)
    fail(node, fmt::format("suite.classes needs format = {} (this file is format {})",
                           kContextFormatClasses, ctx.format));
  const toml::array* arr = node.as_array();
  if (!arr)
    fail(node,
         "suite.classes must be an array of tables like [{ class = \"small-m\", when = "
         "\"M <= 32\" }, { class = \"irregular\" }]");
  std::set<std::string> shape_names;
  for (const auto& s : ctx.scalars) shape_names.insert(s.name);
  for (const auto& a : ctx.arrays) shape_names.insert(a.name + ".size");
  for (const auto& el : *arr) {
    const toml::table* t = el.as_table();
    if (!t)
      fail(el, fmt::format("every entry of suite.classes must be a table like {{ class = "
                           "\"small-m\", when = \"M <= 32\" }}, not {}",
                           type_name(el)));
    check_keys(*t, {"class", "when"}, "in an entry of suite.classes");
    auto cls = req_string(*t, "class", fmt::format("in an entry of suite.classes ({})", classes));
    auto c = suite_class_from_string(cls);
    if (!c)
      fail(*t->get("class"),
           fmt::format("unknown class '{}' in suite.classes (the classes are {})", cls, classes));
    ClassRule r;
    r.cls = *c;
    if (const toml::node* w = t->get("when")) {
      const std::string key = fmt::format("suite.classes ({})", cls);
      auto e = expression(*w, key);
      check_identifiers(*w, e, key, shape_names, "the scalars and <array>.size");
      r.when = e.text();
    }
    ctx.classes.push_back(std::move(r));
  }
  if (ctx.classes.empty())
    fail(node, "suite.classes is empty: leave it out to use the family's default rules");
}

// ---- to_toml ----

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
  std::string s = format_double(v);
  if (s.find_first_of(".eEni") == std::string::npos) s += ".0";
  return s;
}

std::string int_list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

Result<KernelContext> parse_context(std::string_view toml_text, std::string_view filename,
                                    const std::filesystem::path& dir) {
  try {
    Loader loader(filename);
    return loader.load(toml_text, dir);
  } catch (const ParseError& e) {
    return make_error(e.message);
  } catch (const std::exception& e) {  // toml++ or allocation failures
    return make_error(fmt::format("{}: {}", filename, e.what()));
  }
}

Result<KernelContext> load_context(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::path file = path;
  if (std::filesystem::is_directory(path, ec)) file = path / "kernel.toml";
  if (!std::filesystem::exists(file, ec)) {
    return make_error(
        fmt::format("{}: no such file; a kernel context is a directory holding "
                    "kernel.toml and the kernel source",
                    file.string()));
  }
  auto text = read_file(file);
  if (!text) return Error{text.error()};
  std::filesystem::path dir = file.parent_path();
  auto ctx = parse_context(*text, file.string(), dir);
  if (!ctx) return ctx;
  std::filesystem::path src = dir / ctx->source_file;
  if (!std::filesystem::is_regular_file(src, ec)) {
    return make_error(fmt::format("{}: source = \"{}\" names a file that does not exist ({})",
                                  file.string(), ctx->source_file, src.string()));
  }
  return ctx;
}

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

// ---- Shape evaluation ----

Result<expr::Env> shape_env(const KernelContext& ctx, const Shape& shape) {
  expr::Env env;
  for (const auto& [k, v] : shape.values) env[k] = v;
  for (const auto& s : ctx.scalars) {
    if (!env.count(s.name)) {
      return make_error(
          fmt::format("shape '{}' gives no value to scalar '{}'", shape.text(), s.name));
    }
  }
  expr::Env scalars = env;
  for (const auto& a : ctx.arrays) {
    auto n = expr::evaluate(a.size, scalars);
    if (!n) {
      return make_error(fmt::format("size of array '{}' (\"{}\"): {}", a.name, a.size, n.error()));
    }
    if (*n < 0) {
      return make_error(
          fmt::format("size of array '{}' (\"{}\") is negative ({})", a.name, a.size, *n));
    }
    env[a.name + ".size"] = *n;
  }
  return env;
}

Result<std::map<std::string, int64_t>> array_sizes(const KernelContext& ctx, const Shape& shape) {
  auto env = shape_env(ctx, shape);
  if (!env) return Error{env.error()};
  std::map<std::string, int64_t> out;
  for (const auto& a : ctx.arrays) out[a.name] = env->at(a.name + ".size");
  return out;
}

namespace {
// `expr` (kernel.toml's `key`) holds for the shape's environment; an empty expression holds.
Result<bool> holds(const std::string& expr, std::string_view key, const expr::Env& env) {
  if (expr.empty()) return true;
  auto v = expr::evaluate(expr, env);
  if (!v) return make_error(fmt::format("{} = \"{}\": {}", key, expr, v.error()));
  return *v != 0;
}
}  // namespace

Result<std::optional<SuiteClass>> classify_shape(const KernelContext& ctx, const Shape& shape) {
  const std::vector<ClassRule> rules = class_rules(ctx);
  if (rules.empty()) return std::optional<SuiteClass>{};
  auto env = shape_env(ctx, shape);
  if (!env) return Error{env.error()};
  for (const auto& r : rules) {
    auto h = holds(r.when, fmt::format("the rule of class {}", to_string(r.cls)), *env);
    if (!h) return Error{h.error()};
    if (*h) return std::optional<SuiteClass>{r.cls};
  }
  return std::optional<SuiteClass>{};
}

Result<bool> shape_in_problem(const KernelContext& ctx, const Shape& shape) {
  auto env = shape_env(ctx, shape);
  if (!env) return Error{env.error()};
  return holds(ctx.valid, "valid", *env);
}

Result<bool> shape_is_valid(const KernelContext& ctx, const Shape& shape) {
  auto env = shape_env(ctx, shape);
  if (!env) return Error{env.error()};
  auto in = holds(ctx.valid, "valid", *env);
  if (!in || !*in) return in;
  return holds(ctx.supports, "supports", *env);
}

namespace {

Result<double> shape_count(const KernelContext& ctx, const Shape& shape, const std::string& text,
                           std::string_view what) {
  if (text.empty()) return 0.0;
  auto env = shape_env(ctx, shape);
  if (!env) return Error{env.error()};
  auto v = expr::evaluate(text, *env);
  if (!v) return make_error(fmt::format("{} = \"{}\": {}", what, text, v.error()));
  return static_cast<double>(*v);
}

}  // namespace

Result<double> shape_flops(const KernelContext& ctx, const Shape& shape) {
  return shape_count(ctx, shape, ctx.flops, "flops");
}

Result<double> shape_bytes(const KernelContext& ctx, const Shape& shape) {
  return shape_count(ctx, shape, ctx.bytes, "bytes");
}

std::vector<Shape> sample_shapes(const KernelContext& ctx, int count, uint64_t seed) {
  std::vector<Shape> out;
  if (count <= 0 || ctx.scalars.empty()) return out;
  bool any_declared = std::any_of(ctx.scalars.begin(), ctx.scalars.end(), [](const ScalarSpec& s) {
    return !s.values.empty() || s.has_range();
  });
  if (!any_declared) return out;

  // Scalars with neither values nor range draw from the values the declared shapes give them.
  std::set<std::map<std::string, int64_t>> seen;
  std::map<std::string, std::vector<int64_t>> pools;
  for (const auto* list :
       {&ctx.bench_shapes, &ctx.validation_shapes, &ctx.hidden_shapes, &ctx.small_shapes}) {
    for (const auto& shape : *list) {
      seen.insert(shape.values);
      for (const auto& [k, v] : shape.values) pools[k].push_back(v);
    }
  }
  for (auto& [k, v] : pools) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  for (const auto& s : ctx.scalars) {
    if (s.values.empty() && !s.has_range() && pools[s.name].empty()) return out;
  }

  prng::SplitMix64 rng(prng::mix(seed ^ 0x5EED5A3B1E5ull));
  const int attempts = std::max(1000, 100 * count);
  for (int attempt = 0; attempt < attempts && static_cast<int>(out.size()) < count; ++attempt) {
    Shape shape;
    for (const auto& s : ctx.scalars) {
      int64_t v;
      if (!s.values.empty()) {
        v = s.values[rng.below(s.values.size())];
      } else if (s.has_range()) {
        uint64_t n = static_cast<uint64_t>((s.range_hi - s.range_lo) / s.range_step) + 1;
        v = s.range_lo + s.range_step * static_cast<int64_t>(rng.below(n));
      } else {
        const auto& pool = pools[s.name];
        v = pool[rng.below(pool.size())];
      }
      shape.values[s.name] = v;
    }
    if (seen.count(shape.values)) continue;
    auto ok = shape_is_valid(ctx, shape);
    if (!ok || !*ok) continue;
    seen.insert(shape.values);
    out.push_back(std::move(shape));
  }
  return out;
}

// ---- Source regions ----

std::string& SourceRegions::get(Region r) {
  switch (r) {
    case Region::macros:
      return macros;
    case Region::device:
      return device;
    case Region::host:
      return host;
  }
  return host;
}

const std::string& SourceRegions::get(Region r) const {
  return const_cast<SourceRegions*>(this)->get(r);
}

std::string begin_marker(Region r) { return fmt::format("// peak:begin {}", to_string(r)); }
std::string end_marker(Region r) { return fmt::format("// peak:end {}", to_string(r)); }

namespace {

constexpr std::string_view kRegionOrderHelp =
    "every source needs the three regions macros, device and host, in that order";

struct Marker {
  bool begin = false;
  std::string region;  // as written (may be unknown)
};

// A marker line: optional leading blanks, "// peak:begin NAME" or "// peak:end NAME", optional
// trailing blanks and '\r'.
std::optional<Marker> parse_marker(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
    line.remove_suffix(1);
  }
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  constexpr std::string_view kPrefix = "// peak:";
  if (line.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  line.remove_prefix(kPrefix.size());
  Marker m;
  if (line.substr(0, 6) == "begin ") {
    m.begin = true;
    line.remove_prefix(6);
  } else if (line.substr(0, 4) == "end ") {
    line.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  m.region = std::string(line);
  return m;
}

}  // namespace

Result<SourceRegions> split_regions(std::string_view source, std::string_view filename) {
  // Byte offsets of each marker line: start and one past its line terminator.
  struct Seen {
    size_t line_no = 0;
    size_t start = 0, end = 0;
  };
  std::optional<Seen> begins[3], ends[3];
  int open = -1;       // region currently open
  int next_begin = 0;  // index of the region whose begin marker must come next
  size_t pos = 0, line_no = 0;
  while (pos < source.size()) {
    ++line_no;
    size_t nl = source.find('\n', pos);
    size_t line_end = nl == std::string_view::npos ? source.size() : nl + 1;
    std::string_view line =
        source.substr(pos, (nl == std::string_view::npos ? source.size() : nl) - pos);
    auto m = parse_marker(line);
    if (m) {
      auto loc = [&] { return fmt::format("{}:{}: ", filename, line_no); };
      auto region = region_from_string(m->region);
      if (!region) {
        return make_error(loc() + fmt::format("unknown region '{}' in a peak marker (regions are "
                                              "macros, device and host)",
                                              m->region));
      }
      int r = static_cast<int>(*region);
      std::string name(to_string(*region));
      if (m->begin) {
        if (begins[r]) {
          return make_error(loc() + fmt::format("region '{}' is opened twice (first at line {})",
                                                name, begins[r]->line_no));
        }
        if (open >= 0) {
          std::string cur(to_string(static_cast<Region>(open)));
          return make_error(loc() + fmt::format("region '{}' is opened inside region '{}'; close "
                                                "'{}' with '{}' first",
                                                name, cur, cur,
                                                end_marker(static_cast<Region>(open))));
        }
        if (r != next_begin) {
          std::string expected(to_string(static_cast<Region>(next_begin)));
          return make_error(loc() + fmt::format("region '{}' comes before region '{}'; {}", name,
                                                expected, kRegionOrderHelp));
        }
        begins[r] = Seen{line_no, pos, line_end};
        open = r;
        ++next_begin;
      } else {
        if (ends[r]) {
          return make_error(loc() + fmt::format("region '{}' is closed twice (first at line {})",
                                                name, ends[r]->line_no));
        }
        if (open != r) {
          return make_error(loc() + fmt::format("'{}' without a matching '{}' before it",
                                                end_marker(*region), begin_marker(*region)));
        }
        ends[r] = Seen{line_no, pos, line_end};
        open = -1;
      }
    }
    pos = line_end;
  }
  if (open >= 0) {
    Region r = static_cast<Region>(open);
    return make_error(fmt::format("{}:{}: region '{}' opened here is never closed (no '{}' marker)",
                                  filename, begins[open]->line_no, to_string(r), end_marker(r)));
  }
  for (Region r : kAllRegions) {
    int i = static_cast<int>(r);
    if (!begins[i]) {
      return make_error(
          fmt::format("{}: no '{}' marker; {}", filename, begin_marker(r), kRegionOrderHelp));
    }
  }
  auto slice = [&](size_t a, size_t b) { return std::string(source.substr(a, b - a)); };
  SourceRegions out;
  out.before = slice(0, begins[0]->end);
  out.macros = slice(begins[0]->end, ends[0]->start);
  out.between_macros_device = slice(ends[0]->start, begins[1]->end);
  out.device = slice(begins[1]->end, ends[1]->start);
  out.between_device_host = slice(ends[1]->start, begins[2]->end);
  out.host = slice(begins[2]->end, ends[2]->start);
  out.after = slice(ends[2]->start, source.size());
  return out;
}

std::string join_regions(const SourceRegions& r) {
  // Region text is whole lines; a region whose last line lacks its newline gets one, so the end
  // marker that follows stays on a line of its own.
  auto region = [](const std::string& s) { return (s.empty() || s.back() == '\n') ? s : s + "\n"; };
  return r.before + region(r.macros) + r.between_macros_device + region(r.device) +
         r.between_device_host + region(r.host) + r.after;
}

}  // namespace peak
