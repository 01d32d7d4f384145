#include "plan/plan_language.h"

#include <algorithm>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "util/fs.h"

namespace peak {
namespace {

using Kind = PlanStatement::Kind;

const std::map<Kind, std::set<std::string>>& attribute_keys() {
  static const std::map<Kind, std::set<std::string>> keys = {
      {Kind::scratch, {"dtype", "count", "zero"}},
      {Kind::memset, {"value", "when"}},
      {Kind::tensor_map, {"array", "dims", "box", "element_strides", "global_strides", "swizzle"}},
      {Kind::launch, {"grid", "block", "shared", "cluster", "args", "when"}},
  };
  return keys;
}

std::string_view statement_word(Kind k) {
  switch (k) {
    case Kind::assign:
      return "assignment";
    case Kind::require:
      return "require";
    case Kind::scratch:
      return "scratch";
    case Kind::memset:
      return "memset";
    case Kind::tensor_map:
      return "tensor_map";
    case Kind::launch:
      return "launch";
  }
  return "statement";
}

bool is_identifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// Strips a `//` or `#` comment and surrounding blanks (and one trailing ';').
std::string code_of(const std::string& line) {
  std::string s = line;
  size_t cut = std::min(s.find("//"), s.find('#'));
  if (cut != std::string::npos) s.erase(cut);
  s = trim(s);
  if (!s.empty() && s.back() == ';') s = trim(s.substr(0, s.size() - 1));
  return s;
}

// 1-based line number, in the joined file, of the host region's first line.
int host_first_line(const SourceRegions& source) {
  SourceRegions r = source;
  r.host.clear();
  r.after.clear();
  std::string joined = join_regions(r);  // ends with the host region's begin marker line
  int lines = static_cast<int>(std::count(joined.begin(), joined.end(), '\n'));
  if (!joined.empty() && joined.back() != '\n') ++lines;
  return lines + 1;
}

// Integer literals in C spelling (hex, u/l suffixes) to the expression language's decimals.
std::string normalize_literals(const std::string& text) {
  static const std::regex kHex(R"(\b0[xX]([0-9a-fA-F]+)[uUlL]*\b)");
  static const std::regex kSuffix(R"(\b([0-9]+)[uUlL]+\b)");
  std::string out;
  size_t last = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kHex); it != std::sregex_iterator();
       ++it) {
    out += text.substr(last, static_cast<size_t>(it->position()) - last);
    try {
      out += std::to_string(std::stoull((*it)[1].str(), nullptr, 16));
    } catch (const std::exception&) {
      return text;  // too large: left as is (it will not evaluate)
    }
    last = static_cast<size_t>(it->position() + it->length());
  }
  out += text.substr(last);
  return std::regex_replace(out, kSuffix, "$1");
}

}  // namespace

std::vector<MacroDef> parse_defines(const std::string& text) {
  static const std::regex kDefine(R"(^\s*#\s*define\s+([A-Za-z_][A-Za-z0-9_]*)(\(?)(.*)$)");
  std::vector<MacroDef> defs;
  std::vector<std::string> lines = split_lines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string line = lines[i];
    while (!line.empty() && line.back() == '\\' && i + 1 < lines.size()) {
      line.pop_back();
      line += " " + lines[++i];
    }
    std::smatch m;
    if (!std::regex_match(line, m, kDefine) || !m[2].str().empty()) continue;
    std::string value = m[3].str();
    for (size_t p; (p = value.find("/*")) != std::string::npos;) {
      size_t e = value.find("*/", p + 2);
      value.erase(p, e == std::string::npos ? std::string::npos : e + 2 - p);
    }
    if (size_t p = value.find("//"); p != std::string::npos) value.erase(p);
    value = trim(value);
    if (!value.empty()) defs.push_back({m[1].str(), normalize_literals(value)});
  }
  return defs;
}

Result<std::vector<std::string>> split_tuple(const std::string& value) {
  std::string v = trim(value);
  if (v.size() < 2 || v.front() != '(' || v.back() != ')') {
    if (v.empty()) return make_error("an empty value");
    return std::vector<std::string>{v};
  }
  // The outer parentheses must enclose the whole value: "(a) + (b)" is one expression.
  int depth = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '(') ++depth;
    if (v[i] == ')') --depth;
    if (depth == 0 && i + 1 < v.size()) return std::vector<std::string>{v};
  }
  std::vector<std::string> items;
  std::string cur;
  depth = 0;
  for (size_t i = 1; i + 1 < v.size(); ++i) {
    char c = v[i];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      items.push_back(trim(cur));
      cur.clear();
      continue;
    }
    cur += c;
  }
  if (!trim(cur).empty() || !items.empty()) items.push_back(trim(cur));
  for (const auto& it : items)
    if (it.empty()) return make_error(fmt::format("an empty item in `{}`", v));
  return items;
}

namespace {

class Evaluator {
 public:
  Evaluator(const ParsedPlan& p, const PlanDialect& d, const KernelContext& ctx, expr::Env env)
      : p_(p), d_(d), ctx_(ctx), env_(std::move(env)) {}

  PlanOutcome run() {
    for (const PlanStatement& s : p_.statements) {
      if (!statement(s)) return out_;
    }
    if (out_.plan.launches() == 0) {
      if (skipped_launches_ > 0)
        return fail(Disposition::invalid_config, 0,
                    fmt::format("no launch of the plan runs for this shape: the `when` of each of "
                                "its {} launches is false",
                                skipped_launches_));
      return fail(
          Disposition::compile_failed, 0,
          fmt::format("the plan launches no {} (add `launch NAME` with its grid)", d_.kernel_word));
    }
    if (!check_workspace()) return out_;
    return out_;
  }

 private:
  bool fail_bool(Disposition d, int line, std::string message) {
    fail(d, line, std::move(message));
    return false;
  }
  PlanOutcome fail(Disposition d, int line, std::string message) {
    out_.disposition = d;
    out_.message = line > 0 ? fmt::format("{}:{}: {}", p_.file, line, message) : message;
    return out_;
  }

  Result<int64_t> eval(const std::string& text, int line, std::string_view what) {
    auto v = expr::evaluate(text, env_);
    if (!v)
      return make_error(
          fmt::format("{}:{}: cannot evaluate {} `{}`: {}", p_.file, line, what, text, v.error()));
    return *v;
  }
  bool eval_into(const std::string& text, int line, std::string_view what, int64_t& out) {
    auto v = eval(text, line, what);
    if (!v) {
      out_.disposition = Disposition::compile_failed;
      out_.message = v.error();
      return false;
    }
    out = *v;
    return true;
  }
  bool eval_tuple(const PlanStatement::Attr& a, size_t min_n, size_t max_n,
                  std::vector<int64_t>& out) {
    auto items = split_tuple(a.value);
    if (!items)
      return fail_bool(Disposition::compile_failed, a.line,
                       fmt::format("`{} = {}`: {}", a.key, a.value, items.error()));
    if (items->size() < min_n || items->size() > max_n)
      return fail_bool(
          Disposition::compile_failed, a.line,
          fmt::format(
              "`{}` takes {} value(s) in parentheses, `({})`, not {}", a.key,
              min_n == max_n ? std::to_string(min_n) : fmt::format("{} to {}", min_n, max_n),
              a.key == "grid" || a.key == "block" || a.key == "cluster" ? "x, y, z" : "...",
              items->size()));
    out.clear();
    for (const auto& it : *items) {
      int64_t v = 0;
      if (!eval_into(it, a.line, fmt::format("`{}`", a.key), v)) return false;
      out.push_back(v);
    }
    return true;
  }
  const PlanStatement::Attr* attr(const PlanStatement& s, const char* key) const {
    for (const auto& a : s.attrs)
      if (a.key == key) return &a;
    return nullptr;
  }
  bool forbid(const PlanStatement& s, const char* key, bool allowed, std::string_view why) {
    const PlanStatement::Attr* a = attr(s, key);
    if (a == nullptr || allowed) return true;
    return fail_bool(Disposition::compile_failed, a->line,
                     fmt::format("`{}` is not part of a {} launch plan: {}", key, d_.backend, why));
  }

  // A buffer named in the plan: an array of the context or a scratch buffer declared above.
  std::optional<PlanBufferRef> buffer(const std::string& name) const {
    for (size_t i = 0; i < ctx_.arrays.size(); ++i)
      if (ctx_.arrays[i].name == name)
        return PlanBufferRef{PlanBufferRef::Kind::array, static_cast<int>(i)};
    for (size_t i = 0; i < out_.plan.scratch.size(); ++i)
      if (out_.plan.scratch[i].name == name)
        return PlanBufferRef{PlanBufferRef::Kind::scratch, static_cast<int>(i)};
    return std::nullopt;
  }
  DType buffer_dtype(const PlanBufferRef& r) const {
    return r.kind == PlanBufferRef::Kind::array
               ? ctx_.arrays[static_cast<size_t>(r.index)].dtype
               : out_.plan.scratch[static_cast<size_t>(r.index)].dtype;
  }
  std::string buffer_names() const {
    std::vector<std::string> names;
    for (const auto& a : ctx_.arrays) names.push_back(a.name);
    for (const auto& s : out_.plan.scratch) names.push_back(s.name);
    return join(names, ", ");
  }
  bool name_taken(const std::string& name) const {
    return buffer(name).has_value() || env_.count(name) > 0 ||
           std::any_of(out_.plan.tensor_maps.begin(), out_.plan.tensor_maps.end(),
                       [&](const PlanTensorMap& t) { return t.name == name; });
  }

  bool statement(const PlanStatement& s) {
    switch (s.kind) {
      case Kind::assign: {
        if (buffer(s.name))
          return fail_bool(Disposition::compile_failed, s.line,
                           fmt::format("`{}` names a buffer; choose another name", s.name));
        if (defined_.count(s.name) == 0 && env_.count(s.name) > 0 && locked_.count(s.name))
          return fail_bool(Disposition::compile_failed, s.line,
                           fmt::format("`{}` is already a scalar, tuning parameter or device fact "
                                       "and cannot be redefined in the plan",
                                       s.name));
        int64_t v = 0;
        if (!eval_into(s.expr, s.line, "the value", v)) return false;
        env_[s.name] = v;
        defined_.insert(s.name);
        return true;
      }
      case Kind::require: {
        int64_t v = 0;
        if (!eval_into(s.expr, s.line, "the requirement", v)) return false;
        if (v == 0)
          return fail_bool(Disposition::invalid_config, s.line,
                           fmt::format("requirement `{}` does not hold", s.expr));
        return true;
      }
      case Kind::scratch:
        return scratch(s);
      case Kind::memset: {
        bool runs = true;
        if (!when(s, runs)) return false;
        return runs ? memset(s) : true;
      }
      case Kind::tensor_map:
        return tensor_map(s);
      case Kind::launch: {
        bool runs = true;
        if (!when(s, runs)) return false;
        if (!runs) ++skipped_launches_;
        return runs ? launch(s) : true;
      }
    }
    return true;
  }

  // A step's `when = EXPR`: the step is part of the plan only for the shapes and configurations
  // where EXPR is nonzero (a launch plan that dispatches on the shape to one of two kernels).
  bool when(const PlanStatement& s, bool& runs) {
    runs = true;
    const auto* w = attr(s, "when");
    if (w == nullptr) return true;
    int64_t v = 0;
    if (!eval_into(w->value, w->line, "`when`", v)) return false;
    runs = v != 0;
    return true;
  }

  bool scratch(const PlanStatement& s) {
    if (name_taken(s.name))
      return fail_bool(Disposition::compile_failed, s.line,
                       fmt::format("`{}` is already a name of the plan; scratch buffers need a new "
                                   "name",
                                   s.name));
    PlanScratch ps;
    ps.name = s.name;
    const auto* dt = attr(s, "dtype");
    const auto* count = attr(s, "count");
    if (dt == nullptr || count == nullptr)
      return fail_bool(Disposition::compile_failed, s.line,
                       fmt::format("scratch `{}` needs `dtype = f32|f16|bf16|i32` and `count = "
                                   "ELEMENTS` on the lines after it",
                                   s.name));
    auto d = dtype_from_string(trim(dt->value));
    if (!d)
      return fail_bool(Disposition::compile_failed, dt->line,
                       fmt::format("unknown dtype `{}` (use f32, f16, bf16 or i32)", dt->value));
    ps.dtype = *d;
    if (!eval_into(count->value, count->line, "the element count", ps.count)) return false;
    if (ps.count < 1)
      return fail_bool(
          Disposition::invalid_config, count->line,
          fmt::format("scratch `{}` has {} elements; it needs at least 1", s.name, ps.count));
    if (ps.count > kMaxScratchBytes / static_cast<int64_t>(dtype_size(ps.dtype)))
      return fail_bool(Disposition::launch_failed, count->line,
                       fmt::format("scratch `{}` has {} elements of {} bytes: more than the {} "
                                   "bytes any device can allocate",
                                   s.name, ps.count, dtype_size(ps.dtype), kMaxScratchBytes));
    ps.bytes = ps.count * static_cast<int64_t>(dtype_size(ps.dtype));
    out_.plan.scratch.push_back(ps);
    int64_t zero = 0;
    if (const auto* z = attr(s, "zero")) {
      if (!eval_into(z->value, z->line, "`zero`", zero)) return false;
    }
    if (zero != 0) {
      PlanStep st;
      st.op = PlanStep::Op::memset;
      st.line = s.line;
      st.target = {PlanBufferRef::Kind::scratch, static_cast<int>(out_.plan.scratch.size() - 1)};
      out_.plan.steps.push_back(st);
    }
    return true;
  }

  bool memset(const PlanStatement& s) {
    auto ref = buffer(s.name);
    if (!ref)
      return fail_bool(Disposition::compile_failed, s.line,
                       fmt::format("memset `{}`: no array or scratch buffer of that name (buffers: "
                                   "{})",
                                   s.name, buffer_names()));
    PlanStep st;
    st.op = PlanStep::Op::memset;
    st.line = s.line;
    st.target = *ref;
    if (const auto* v = attr(s, "value")) {
      int64_t x = 0;
      if (!eval_into(v->value, v->line, "the byte value", x)) return false;
      if (x < 0 || x > 255)
        return fail_bool(Disposition::compile_failed, v->line,
                         fmt::format("memset value {} is not a byte (0..255)", x));
      st.value = static_cast<int>(x);
    }
    out_.plan.steps.push_back(st);
    return true;
  }

  bool tensor_map(const PlanStatement& s) {
    if (!d_.tensor_maps)
      return fail_bool(Disposition::compile_failed, s.line,
                       fmt::format("tensor maps are not part of a {} launch plan", d_.backend));
    if (name_taken(s.name))
      return fail_bool(Disposition::compile_failed, s.line,
                       fmt::format("`{}` is already a name of the plan", s.name));
    PlanTensorMap t;
    t.name = s.name;
    const auto* arr = attr(s, "array");
    const auto* dims = attr(s, "dims");
    const auto* box = attr(s, "box");
    if (arr == nullptr || dims == nullptr || box == nullptr)
      return fail_bool(
          Disposition::compile_failed, s.line,
          fmt::format("tensor_map `{}` needs `array = NAME`, `dims = (...)` and `box = "
                      "(...)`",
                      s.name));
    auto ref = buffer(trim(arr->value));
    if (!ref)
      return fail_bool(Disposition::compile_failed, arr->line,
                       fmt::format("tensor_map `{}`: `{}` is not an array or scratch buffer "
                                   "(buffers: {})",
                                   s.name, trim(arr->value), buffer_names()));
    t.buffer = *ref;
    t.dtype = buffer_dtype(*ref);
    if (!eval_tuple(*dims, 1, 5, t.dims)) return false;
    if (!eval_tuple(*box, t.dims.size(), t.dims.size(), t.box)) return false;
    t.element_strides.assign(t.dims.size(), 1);
    if (const auto* es = attr(s, "element_strides")) {
      if (!eval_tuple(*es, t.dims.size(), t.dims.size(), t.element_strides)) return false;
    }
    const int64_t esize = static_cast<int64_t>(dtype_size(t.dtype));
    if (const auto* gs = attr(s, "global_strides")) {
      if (t.dims.size() < 2)
        return fail_bool(Disposition::compile_failed, gs->line,
                         "`global_strides` gives the byte strides of dimensions 1.., so it needs "
                         "at least two dims");
      if (!eval_tuple(*gs, t.dims.size() - 1, t.dims.size() - 1, t.global_strides)) return false;
    } else {
      int64_t stride = esize;
      for (size_t i = 1; i < t.dims.size(); ++i) {
        stride *= t.dims[i - 1];
        t.global_strides.push_back(stride);
      }
    }
    int64_t sw = 0;
    if (const auto* w = attr(s, "swizzle")) {
      if (!eval_into(w->value, w->line, "`swizzle`", sw)) return false;
      if (sw != 0 && sw != 32 && sw != 64 && sw != 128)
        return fail_bool(Disposition::compile_failed, w->line,
                         fmt::format("swizzle {} is not one of 0, 32, 64, 128 (bytes)", sw));
    }
    t.swizzle = static_cast<int>(sw);
    // The limits of cuTensorMapEncodeTiled: shapes that break them cannot use this plan.
    auto bad = [&](std::string why) {
      return fail_bool(Disposition::invalid_config, s.line,
                       fmt::format("tensor_map `{}`: {}", s.name, why));
    };
    for (size_t i = 0; i < t.dims.size(); ++i) {
      if (t.dims[i] < 1)
        return bad(fmt::format("dims[{}] = {} (must be at least 1)", i, t.dims[i]));
      if (t.box[i] < 1 || t.box[i] > 256)
        return bad(fmt::format("box[{}] = {} (must be 1..256)", i, t.box[i]));
      if (t.element_strides[i] < 1 || t.element_strides[i] > 8)
        return bad(fmt::format("element_strides[{}] = {} (must be 1..8)", i, t.element_strides[i]));
    }
    if ((t.box[0] * esize) % 16 != 0)
      return bad(fmt::format("the inner box dimension is {} bytes; it must be a multiple of 16",
                             t.box[0] * esize));
    if (t.swizzle > 0 && t.box[0] * esize > t.swizzle)
      return bad(fmt::format("the inner box dimension is {} bytes, more than the {}-byte swizzle",
                             t.box[0] * esize, t.swizzle));
    for (size_t i = 0; i < t.global_strides.size(); ++i)
      if (t.global_strides[i] % 16 != 0 || t.global_strides[i] <= 0)
        return bad(
            fmt::format("global stride {} is {} bytes; TMA needs a positive multiple of 16 "
                        "(require the matching alignment of the shape)",
                        i + 1, t.global_strides[i]));
    out_.plan.tensor_maps.push_back(t);
    return true;
  }

  bool triple(const PlanStatement& s, const char* key, std::array<int64_t, 3>& out, bool required) {
    const auto* a = attr(s, key);
    if (a == nullptr) {
      if (!required) return true;
      return fail_bool(
          Disposition::compile_failed, s.line,
          fmt::format("launch `{}` needs `{} = (x, y, z)` on the lines after it", s.name, key));
    }
    std::vector<int64_t> v;
    if (!eval_tuple(*a, 1, 3, v)) return false;
    out = {1, 1, 1};
    for (size_t i = 0; i < v.size(); ++i) out[i] = v[i];
    for (size_t i = 0; i < 3; ++i)
      if (out[i] < 1)
        return fail_bool(Disposition::invalid_config, a->line,
                         fmt::format("{}.{} = {} for launch `{}` (must be at least 1)", key,
                                     "xyz"[i], out[i], s.name));
    return true;
  }

  bool launch(const PlanStatement& s) {
    if (!forbid(s, "block", d_.block, "the thread-group size is the kernel's [numthreads]"))
      return false;
    if (!forbid(s, "args", d_.args,
                "parameters are bound by the declared bindings (arrays, then the scalars' "
                "cbuffer, then scratch buffers)"))
      return false;
    if (!forbid(s, "shared", d_.shared, "shared memory is declared in the kernel")) return false;
    if (!forbid(s, "cluster", d_.cluster, "clusters are not available")) return false;
    PlanStep st;
    st.op = PlanStep::Op::launch;
    st.line = s.line;
    st.kernel = s.name;
    if (!triple(s, "grid", st.grid, true)) return false;
    if (d_.block && !triple(s, "block", st.block, true)) return false;
    if (!triple(s, "cluster", st.cluster, false)) return false;
    if (const auto* sh = attr(s, "shared")) {
      if (!eval_into(sh->value, sh->line, "the shared memory size", st.shared)) return false;
      if (st.shared < 0)
        return fail_bool(Disposition::invalid_config, sh->line,
                         fmt::format("shared = {} bytes is negative", st.shared));
      auto optin = env_.find("shared_memory_optin");
      if (optin != env_.end() && optin->second > 0 && st.shared > optin->second)
        return fail_bool(Disposition::invalid_config, sh->line,
                         fmt::format("launch `{}` asks for {} bytes of dynamic shared memory; the "
                                     "device allows at most {} per block (shared_memory_optin)",
                                     s.name, st.shared, optin->second));
    }
    if (d_.block) {
      int64_t threads = st.block[0] * st.block[1] * st.block[2];
      auto mt = env_.find("max_threads");
      if (mt != env_.end() && mt->second > 0 && threads > mt->second)
        return fail_bool(Disposition::invalid_config, s.line,
                         fmt::format("launch `{}` has {} threads per block; the device allows {}",
                                     s.name, threads, mt->second));
    }
    for (int i = 0; i < 3; ++i)
      if (st.grid[static_cast<size_t>(i)] % st.cluster[static_cast<size_t>(i)] != 0)
        return fail_bool(Disposition::invalid_config, s.line,
                         fmt::format("grid.{} = {} is not a multiple of cluster.{} = {}", "xyz"[i],
                                     st.grid[static_cast<size_t>(i)], "xyz"[i],
                                     st.cluster[static_cast<size_t>(i)]));
    if (d_.args) {
      const auto* a = attr(s, "args");
      if (a == nullptr)
        return fail_bool(Disposition::compile_failed, s.line,
                         fmt::format("launch `{}` needs `args = (...)`: the kernel's parameters in "
                                     "order (arrays, scratch buffers, tensor maps or integer "
                                     "expressions)",
                                     s.name));
      auto items = split_tuple(a->value);
      if (!items)
        return fail_bool(Disposition::compile_failed, a->line,
                         fmt::format("`args = {}`: {}", a->value, items.error()));
      if (trim(a->value) == "()") items->clear();
      for (const std::string& item : *items) {
        PlanArg arg;
        arg.text = item;
        if (auto ref = buffer(item)) {
          arg.kind = ref->kind == PlanBufferRef::Kind::array ? PlanArg::Kind::array
                                                             : PlanArg::Kind::scratch;
          arg.index = ref->index;
        } else if (auto it =
                       std::find_if(out_.plan.tensor_maps.begin(), out_.plan.tensor_maps.end(),
                                    [&](const PlanTensorMap& t) { return t.name == item; });
                   it != out_.plan.tensor_maps.end()) {
          arg.kind = PlanArg::Kind::tensor_map;
          arg.index = static_cast<int>(it - out_.plan.tensor_maps.begin());
        } else {
          arg.kind = PlanArg::Kind::value;
          if (!eval_into(item, a->line, "the argument", arg.value)) return false;
        }
        st.args.push_back(arg);
      }
    }
    out_.plan.steps.push_back(st);
    return true;
  }

  bool check_workspace() {
    int64_t need = out_.plan.scratch_bytes();
    if (need == 0) return true;
    int64_t grant = 0;
    if (!trim(ctx_.workspace).empty()) {
      auto v = expr::evaluate(ctx_.workspace, env_);
      if (!v) {
        fail(Disposition::compile_failed, 0,
             fmt::format("kernel.toml: cannot evaluate workspace `{}`: {}", ctx_.workspace,
                         v.error()));
        return false;
      }
      grant = *v;
    }
    if (need > grant) {
      fail(Disposition::workspace_exceeded, 0,
           fmt::format("the plan's scratch buffers need {} bytes; the context grants {} bytes of "
                       "workspace for this shape (kernel.toml `workspace`{}{})",
                       need, grant, ctx_.workspace.empty() ? "" : " = ", ctx_.workspace));
      return false;
    }
    return true;
  }

  const ParsedPlan& p_;
  const PlanDialect& d_;
  const KernelContext& ctx_;
  expr::Env env_;
  std::set<std::string> defined_;
  std::set<std::string> locked_;
  PlanOutcome out_;
  int skipped_launches_ = 0;

 public:
  void lock_names(const expr::Env& names) {
    for (const auto& [k, v] : names) locked_.insert(k);
  }
};

}  // namespace

std::vector<std::string> ParsedPlan::kernels() const {
  std::vector<std::string> out;
  for (const auto& s : statements)
    if (s.kind == Kind::launch && std::find(out.begin(), out.end(), s.name) == out.end())
      out.push_back(s.name);
  return out;
}

Result<ParsedPlan> parse_plan_text(std::string_view text, int first_line, std::string_view file) {
  static const std::regex kAssign(R"(^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$)");
  static const std::regex kKeyword(R"(^(require|scratch|memset|tensor_map|launch)\b\s*(.*)$)");
  ParsedPlan p;
  p.file = std::string(file);
  std::vector<std::string> lines = split_lines(text);
  PlanStatement* open = nullptr;  // the statement attribute lines attach to
  auto error = [&](int line, std::string m) {
    return make_error(fmt::format("{}:{}: {}", file, line, m));
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    const int lineno = first_line + static_cast<int>(i);
    std::string line = code_of(lines[i]);
    if (line.empty()) continue;
    std::smatch m;
    if (std::regex_match(line, m, kKeyword)) {
      std::string word = m[1].str();
      std::string rest = trim(m[2].str());
      PlanStatement s;
      s.line = lineno;
      if (word == "require") {
        if (!rest.empty() && rest[0] == '=') rest = trim(rest.substr(1));
        if (rest.empty()) return error(lineno, "`require` needs a condition: `require K % 4 == 0`");
        s.kind = Kind::require;
        s.expr = rest;
        p.statements.push_back(s);
        open = nullptr;
        continue;
      }
      s.kind = word == "scratch"      ? Kind::scratch
               : word == "memset"     ? Kind::memset
               : word == "tensor_map" ? Kind::tensor_map
                                      : Kind::launch;
      if (!is_identifier(rest))
        return error(lineno, fmt::format("`{}` is followed by one name on its line (`{} NAME`), "
                                         "then its attributes as `key = value` lines; got `{}`",
                                         word, word, trim(lines[i])));
      s.name = rest;
      p.statements.push_back(s);
      open = &p.statements.back();
      continue;
    }
    if (!std::regex_match(line, m, kAssign) || starts_with(m[2].str(), "=")) {
      return error(lineno,
                   fmt::format("expected `name = expression`, `require EXPR`, or a `launch`, "
                               "`scratch`, `memset` or `tensor_map` statement; got `{}` (the "
                               "host region is a launch plan: docs/launch-plan.md)",
                               trim(lines[i])));
    }
    std::string key = m[1].str();
    std::string value = trim(m[2].str());
    if (value.empty()) return error(lineno, fmt::format("`{} =` has no value", key));
    bool is_attr_somewhere = false;
    for (const auto& [kind, keys] : attribute_keys()) is_attr_somewhere |= keys.count(key) > 0;
    if (open != nullptr && attribute_keys().at(open->kind).count(key)) {
      for (const auto& a : open->attrs)
        if (a.key == key)
          return error(lineno, fmt::format("`{}` is given twice for {} `{}`", key,
                                           statement_word(open->kind), open->name));
      open->attrs.push_back({key, value, lineno});
      continue;
    }
    if (is_attr_somewhere) {
      if (open == nullptr)
        return error(lineno, fmt::format("`{}` is an attribute: write it on the lines after the "
                                         "`launch`, `scratch`, `memset` or `tensor_map` statement "
                                         "it belongs to",
                                         key));
      return error(
          lineno, fmt::format("`{}` is not an attribute of {} `{}` (its attributes: {})", key,
                              statement_word(open->kind), open->name,
                              join(std::vector<std::string>(attribute_keys().at(open->kind).begin(),
                                                            attribute_keys().at(open->kind).end()),
                                   ", ")));
    }
    PlanStatement s;
    s.kind = Kind::assign;
    s.line = lineno;
    s.name = key;
    s.expr = value;
    p.statements.push_back(s);
    open = nullptr;
  }
  return p;
}

Result<ParsedPlan> parse_plan(const SourceRegions& source, std::string_view file) {
  return parse_plan_text(source.host, host_first_line(source), file);
}

expr::Env plan_env(const KernelContext& ctx, const SourceRegions& source, const Shape& shape,
                   const std::map<std::string, int64_t>& config, const expr::Env& device) {
  expr::Env env;
  if (auto se = shape_env(ctx, shape)) env = *se;
  for (const auto& [k, v] : shape.values) env.emplace(k, v);
  for (const auto& [k, v] : config) env[k] = v;
  for (const auto& [k, v] : device) env.emplace(k, v);
  std::vector<MacroDef> defs = parse_defines(source.macros);
  for (bool progress = true; progress;) {
    progress = false;
    for (const MacroDef& d : defs) {
      if (env.count(d.name)) continue;
      if (auto v = expr::evaluate(d.value, env)) {
        env[d.name] = *v;
        progress = true;
      }
    }
  }
  return env;
}

PlanOutcome evaluate_plan(const ParsedPlan& plan, const PlanDialect& dialect,
                          const KernelContext& ctx, const expr::Env& env) {
  Evaluator e(plan, dialect, ctx, env);
  // Scalars, tuning parameters and device facts cannot be redefined by the plan; macros may be
  // shadowed (a plan-local name with the same spelling is harmless but confusing, so refuse it
  // too).
  e.lock_names(env);
  return e.run();
}

// `when` is not taught here: this text is part of every host pass's prompt, and recorded
// campaigns are found by their prompts' keys. A transformation whose plan dispatches with `when`
// says how to write it.
std::string plan_reference(const PlanDialect& d) {
  std::string k = d.kernel_word;
  std::string out;
  out +=
      "The host region is a launch plan: not code, but statements that the tool evaluates for "
      "each shape and tuning configuration, one per line (comments start with //):\n\n";
  out += "- `NAME = EXPR` defines an integer usable in later lines.\n";
  out +=
      "- `require EXPR`: the configuration cannot run this shape unless EXPR is nonzero (it is "
      "skipped as an invalid configuration, not an error).\n";
  out += fmt::format(
      "- `launch NAME` launches the {} NAME of the device region; the lines after "
      "it give its attributes:\n",
      k);
  out +=
      "  - `grid = (x, y, z)`: the number of thread blocks in each dimension (y and z default "
      "to 1);\n";
  if (d.block) out += "  - `block = (x, y, z)`: the threads per block (required);\n";
  if (!d.block)
    out += "  - the threads per thread group are the entry point's [numthreads(X, Y, Z)];\n";
  if (d.shared)
    out +=
        "  - `shared = BYTES`: dynamic shared memory (`extern __shared__` in the kernel); the "
        "tool raises the kernel's limit itself, up to `shared_memory_optin` bytes per block;\n";
  if (d.cluster)
    out +=
        "  - `cluster = (x, y, z)`: thread-block cluster dimensions (the grid must be a "
        "multiple of them);\n";
  if (d.args)
    out += fmt::format(
        "  - `args = (...)`: the {}'s parameters in order: an array name passes "
        "its device pointer, a scratch buffer name its pointer, a tensor map name "
        "the map (a `const __grid_constant__ CUtensorMap` parameter), and any "
        "other expression an integer (an `int` or 64-bit parameter);\n",
        k);
  if (!d.args)
    out +=
        "  - parameters are bound by declaration: the arrays at bindings 0, 1, ... in "
        "kernel.toml order, the scalars' cbuffer next, then scratch buffers in the order the "
        "plan declares them;\n";
  out +=
      "  Launches run in order on one stream: each one sees everything the previous ones "
      "wrote.\n";
  out +=
      "- `scratch NAME` declares a device buffer for intermediate results, with `dtype = "
      "f32` (or f16, bf16, i32) and `count = ELEMENTS` on the lines after it, and `zero = 1` "
      "to clear it before the launches that follow; its contents are undefined otherwise. The "
      "kernel context limits the scratch bytes (its workspace).\n";
  out +=
      "- `memset NAME` sets every byte of an array or scratch buffer to 0 (or `value = "
      "BYTE`), in order with the launches, e.g. to clear C before accumulating into it with "
      "atomics.\n";
  if (d.tensor_maps)
    out +=
        "- `tensor_map NAME` declares a TMA tensor map with `array = BUFFER`, `dims = (...)` "
        "(elements, innermost first), `box = (...)` (elements copied per dimension), optional "
        "`element_strides = (...)`, `global_strides = (...)` (bytes of dims 1.., packed by "
        "default) and `swizzle = 0|32|64|128`; the tool creates it for each launch and passes "
        "it where `args` names it.\n";
  out +=
      "\nExpressions use integers, + - * / % (integer division), comparisons, && || !, "
      "c ? a : b, and the functions ceil_div(a, b), min(...), max(...), round_up(a, b). They "
      "may read the scalars, `ARRAY.size`, the tuning parameters, the integer `#define`s of "
      "the macros region, and the device facts compute_units, max_threads, shared_memory, "
      "shared_memory_optin, subgroup_size and l2_bytes.\n";
  return out;
}

}  // namespace peak
