// kernel.toml: the top level, [[scalars]], [[arrays]] and [[tuning]], the names they share,
// and the entry points parse_context and load_context. [shapes] is read in shapes.cpp and
// [suite] in suites.cpp.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "context/context.h"
#include "context/loader.h"
#include "context/reference_rules.h"
#include "util/fs.h"

namespace peak {

namespace kernel_toml {

namespace {

bool is_identifier(std::string_view s) {
  if (s.empty()) return false;
  auto start = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; };
  if (!start(s[0])) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

constexpr std::string_view kBackends[] = {"hlsl", "cuda", "hip"};

}  // namespace

KernelContext Loader::load(std::string_view text, const std::filesystem::path& dir) {
  const toml::table root = parse_root(text);
  KernelContext ctx;
  ctx.dir = dir;
  load_identity(root, ctx);
  load_scalars(root, ctx);
  load_arrays(root, ctx);
  load_tuning(root, ctx);
  check_names(root, ctx);
  load_expressions(root, ctx);
  load_reference(root, ctx);
  check_outputs(root, ctx);
  load_shapes(root, ctx);
  load_suite(root, ctx);
  check_reference(root, ctx);
  return ctx;
}

toml::table Loader::parse_root(std::string_view text) const {
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
  return root;
}

void Loader::load_identity(const toml::table& root, KernelContext& ctx) const {
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
}

void Loader::load_expressions(const toml::table& root, KernelContext& ctx) const {
  const std::set<std::string> names = shape_names(ctx);
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
    check_identifiers(*n, e, se.key, names, "the scalars and <array>.size");
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
}

void Loader::load_reference(const toml::table& root, KernelContext& ctx) const {
  const ReferenceRules& rules = reference_rules();
  const bool cpu_available = rules.has_cpu_reference && rules.has_cpu_reference(ctx.family);
  ctx.reference = cpu_available ? ReferenceKind::cpu : ReferenceKind::seed;
  if (auto ref = opt_string(root, "reference")) {
    const toml::node& n = *root.get("reference");
    if (*ref == "cpu") {
      if (!cpu_available) {
        fail(n, ctx.family.empty()
                    ? std::string("reference = \"cpu\" needs a family with a CPU reference "
                                  "(family = \"matmul\", \"softmax\", \"rmsnorm\" or "
                                  "\"layernorm\"); use reference = \"seed\"")
                    : fmt::format("reference = \"cpu\": family '{}' has no CPU reference "
                                  "(matmul, softmax, rmsnorm, layernorm and attention have); use "
                                  "reference = \"seed\"",
                                  ctx.family));
      }
      ctx.reference = ReferenceKind::cpu;
    } else if (*ref == "seed") {
      ctx.reference = ReferenceKind::seed;
    } else {
      fail(n, fmt::format("unknown reference '{}' (expected cpu or seed)", *ref));
    }
  }
}

void Loader::check_outputs(const toml::table& root, const KernelContext& ctx) const {
  if (ctx.arrays.empty())
    fail(root, "no [[arrays]] declared; a kernel context needs at least one output array");
  if (std::none_of(ctx.arrays.begin(), ctx.arrays.end(),
                   [](const ArraySpec& a) { return a.output; })) {
    fail(*root.get("arrays"),
         "no array is marked output = true; peak compares only outputs, so mark the array(s) the "
         "kernel writes");
  }
}

void Loader::check_reference(const toml::table& root, const KernelContext& ctx) const {
  const ReferenceRules& rules = reference_rules();
  if (ctx.reference == ReferenceKind::cpu && rules.check_cpu_reference) {
    if (Status s = rules.check_cpu_reference(ctx); !s) {
      const toml::node* n = root.get("family");
      fail(
          n ? n->source() : root.source(),
          s.message() + " (or set reference = \"seed\" to compare with the seed kernel's outputs)");
    }
  }
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
    std::string d = req_string(t, "dtype", what + " (f32, f16, bf16, e4m3 or i32)");
    auto dt = dtype_from_string(d);
    if (!dt) {
      fail(*t.get("dtype"),
           fmt::format("unknown dtype '{}' for array '{}' (expected f32, f16, bf16, e4m3 or i32)",
                       d, a.name));
    }
    if (*dt == DType::e4m3 && !ctx.backend.empty() && ctx.backend != "cuda") {
      fail(*t.get("dtype"),
           fmt::format("array '{}' has dtype e4m3, which only backend cuda runs (fp8 tensor cores "
                       "of sm_89 and newer), not {}",
                       a.name, ctx.backend));
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

}  // namespace kernel_toml

Result<KernelContext> parse_context(std::string_view toml_text, std::string_view filename,
                                    const std::filesystem::path& dir) {
  try {
    kernel_toml::Loader loader(filename);
    return loader.load(toml_text, dir);
  } catch (const kernel_toml::ParseError& e) {
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

}  // namespace peak

namespace peak {

namespace {
ReferenceRules& installed_rules() {
  static ReferenceRules rules;
  return rules;
}
}  // namespace

void install_reference_rules(const ReferenceRules& rules) { installed_rules() = rules; }

const ReferenceRules& reference_rules() { return installed_rules(); }

}  // namespace peak
