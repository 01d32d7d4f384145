#include "export/plan_code.h"

#include <algorithm>
#include <functional>
#include <set>

#include <fmt/format.h>

#include "backend/backend.h"
#include "expr/expr.h"
#include "util/fs.h"

namespace peak::exporter {
namespace {

using Kind = PlanStatement::Kind;

// The device facts a plan reads, by the names backend/backend.h gives them.
bool is_device_fact(const std::string& n) {
  static const expr::Env facts = device_plan_env(DeviceFacts{});
  return facts.count(n) > 0;
}

int dtype_code(DType t) { return static_cast<int>(t); }

// The C names of the shape: scalars and array sizes (`A.size` -> s->A_size).
Result<std::string> shape_name(const KernelContext& ctx, const std::string& n,
                               const std::string& s) {
  for (const auto& sc : ctx.scalars)
    if (sc.name == n) return fmt::format("{}->{}", s, sc.name);
  for (const auto& a : ctx.arrays)
    if (n == a.name + ".size") return fmt::format("{}->{}_size", s, a.name);
  return make_error(fmt::format("unknown identifier '{}'", n));
}

// Writes one plan function: the statements in order, each value through the expression helpers,
// a failed expression or check returning its status at once.
class Coder {
 public:
  explicit Coder(const PlanFunctionInput& in) : in_(in) {
    for (const MacroDef& d : parse_defines(in.regions->macros)) macros_[d.name].push_back(d.value);
    kernels_ = in.plan->kernels();
  }

  Result<std::string> run() {
    for (const PlanStatement& s : in_.plan->statements)
      if (auto st = statement(s); !st) return Error{st.message()};
    std::string out = fmt::format(
        "static int {}(const pk_shape* s, const pk_dev* d, pk_plan* p) {{\n"
        "  int e_ = 0;\n  int ran_ = 0;\n  (void)s;\n  (void)d;\n"
        "  memset(p, 0, sizeof(*p));\n",
        in_.name);
    out += macro_code_;
    out += body_;
    out += "  if (ran_ == 0) return PK_ST_SHAPE; /* no launch's `when` holds */\n";
    out += "  return PK_ST_OK;\n}\n";
    return out;
  }

 private:
  // ---- names ----
  Result<std::string> name(const std::string& n) {
    if (locals_.count(n)) return "p_" + n;
    if (auto v = shape_name(*in_.ctx, n, "s")) return *v;
    if (auto c = in_.config.find(n); c != in_.config.end())
      return fmt::format("((int64_t){}LL)", c->second);
    if (is_device_fact(n)) return "d->" + n;
    if (macros_.count(n)) {
      auto m = macro(n);
      if (!m) return m;
      // A macro that failed to evaluate fails only the expressions that read it.
      return fmt::format("pk_x_use({}, em_{}, {})", err_, n, *m);
    }
    return make_error(fmt::format("unknown identifier '{}'", n));
  }

  // An integer macro of the macros region, defined once at the top of the function: the first
  // definition of the name whose value is an expression over names the plan may read.
  Result<std::string> macro(const std::string& n) {
    if (done_macros_.count(n)) return "m_" + n;
    if (visiting_.count(n)) return make_error(fmt::format("macro '{}' refers to itself", n));
    visiting_.insert(n);
    std::string why;
    for (const std::string& value : macros_[n]) {
      auto e = expr::Expression::parse(value);
      if (!e) {
        why = e.error();
        continue;
      }
      // Macros read the shape, the configuration, the device and other macros; not plan names.
      auto saved = locals_;
      const std::string saved_err = err_;
      locals_.clear();
      err_ = "&em_" + n;
      const std::string err = err_;  // err_ changes while the macros it reads are written
      auto c = e->to_c([&](const std::string& id) { return name(id); }, err);
      locals_ = saved;
      err_ = saved_err;
      if (!c) {
        why = c.error();
        continue;
      }
      visiting_.erase(n);
      done_macros_.insert(n);
      // Its dependencies are written first (name() above), so their flags exist already.
      macro_code_ += fmt::format(
          "  int em_{} = 0;\n  const int64_t m_{} = {}; /* #define {} {} */\n", n, n, *c, n, value);
      return "m_" + n;
    }
    visiting_.erase(n);
    return make_error(fmt::format("macro '{}' is not an integer expression ({})", n, why));
  }

  Result<std::string> expr(const std::string& text, int line, std::string_view what) {
    auto e = expr::Expression::parse(text);
    if (!e)
      return make_error(fmt::format("{}:{}: cannot read {} `{}`: {}", in_.plan->file, line, what,
                                    text, e.error()));
    const std::string err = err_;
    auto c = e->to_c([&](const std::string& id) { return name(id); }, err);
    if (!c)
      return make_error(fmt::format("{}:{}: cannot evaluate {} `{}`: {}", in_.plan->file, line,
                                    what, text, c.error()));
    return *c;
  }

  // `int64_t VAR = EXPR;` and the check that it evaluated.
  Status value(const std::string& var, const std::string& text, int line, std::string_view what,
               bool declare = true) {
    auto c = expr(text, line, what);
    if (!c) return Error{c.error()};
    body_ += fmt::format("  {}{} = {};\n  if (e_) return PK_ST_SHAPE; /* line {}: {} */\n",
                         declare ? "int64_t " : "", var, *c, line, what);
    return Status::ok();
  }

  const PlanStatement::Attr* attr(const PlanStatement& s, const char* key) const {
    for (const auto& a : s.attrs)
      if (a.key == key) return &a;
    return nullptr;
  }

  std::optional<std::pair<int, int>> buffer(const std::string& n) const {
    for (size_t i = 0; i < in_.ctx->arrays.size(); ++i)
      if (in_.ctx->arrays[i].name == n) return std::pair{0, static_cast<int>(i)};
    for (size_t i = 0; i < scratch_.size(); ++i)
      if (scratch_[i].first == n) return std::pair{1, static_cast<int>(i)};
    return std::nullopt;
  }
  DType buffer_dtype(std::pair<int, int> b) const {
    return b.first == 0 ? in_.ctx->arrays[static_cast<size_t>(b.second)].dtype
                        : scratch_[static_cast<size_t>(b.second)].second;
  }

  Status fail(int line, const std::string& m) {
    return make_error(fmt::format("{}:{}: {}", in_.plan->file, line, m));
  }

  // ---- statements ----
  Status statement(const PlanStatement& s) {
    switch (s.kind) {
      case Kind::assign: {
        if (buffer(s.name) || in_.config.count(s.name) || is_device_fact(s.name) ||
            macros_.count(s.name) || shape_name(*in_.ctx, s.name, "s"))
          return fail(s.line, fmt::format("`{}` cannot be redefined in the plan", s.name));
        const bool declare = locals_.insert(s.name).second;
        // The value is read before the name is (re)defined: `x = x + 1` reads the old x.
        auto c = expr(s.expr, s.line, "the value");
        if (!c) return Error{c.error()};
        body_ += fmt::format("  {}p_{} = {};\n  if (e_) return PK_ST_SHAPE; /* line {} */\n",
                             declare ? "int64_t " : "", s.name, *c, s.line);
        return Status::ok();
      }
      case Kind::require: {
        auto c = expr(s.expr, s.line, "the requirement");
        if (!c) return Error{c.error()};
        body_ +=
            fmt::format("  if (({}) == 0 || e_) return PK_ST_SHAPE; /* line {}: require {} */\n",
                        *c, s.line, s.expr);
        return Status::ok();
      }
      case Kind::scratch:
        return scratch(s);
      case Kind::memset:
        return guarded(s, [&] { return memset(s); });
      case Kind::tensor_map:
        return tensor_map(s);
      case Kind::launch:
        return guarded(s, [&] { return launch(s); });
    }
    return Status::ok();
  }

  // A step with `when = EXPR`: its code runs only where EXPR is nonzero.
  Status guarded(const PlanStatement& s, const std::function<Status()>& step) {
    const auto* w = attr(s, "when");
    if (w == nullptr) return step();
    auto c = expr(w->value, w->line, "`when`");
    if (!c) return Error{c.error()};
    body_ += fmt::format(
        "  {{\n  int64_t w_ = {};\n  if (e_) return PK_ST_SHAPE;\n  if (w_ != 0) {{\n", *c);
    auto st = step();
    body_ += "  }\n  }\n";
    return st;
  }

  Status scratch(const PlanStatement& s) {
    if (buffer(s.name) || locals_.count(s.name))
      return fail(s.line, fmt::format("`{}` is already a name of the plan", s.name));
    const auto* dt = attr(s, "dtype");
    const auto* count = attr(s, "count");
    if (dt == nullptr || count == nullptr)
      return fail(s.line, fmt::format("scratch `{}` needs `dtype` and `count`", s.name));
    auto d = dtype_from_string(trim(dt->value));
    if (!d) return fail(dt->line, fmt::format("unknown dtype `{}`", dt->value));
    const size_t i = scratch_.size();
    scratch_.emplace_back(s.name, *d);
    body_ += "  {\n";
    if (auto st = value("c_", count->value, count->line, "the element count"); !st) return st;
    const int64_t esize = static_cast<int64_t>(dtype_size(*d));
    body_ += fmt::format(
        "  if (c_ < 1 || c_ > PK_MAX_SCRATCH_BYTES / {}) return PK_ST_SHAPE; /* scratch {} */\n"
        "  p->scratch[{}].dtype = {};\n  p->scratch[{}].count = c_;\n"
        "  p->scratch[{}].bytes = c_ * {};\n  p->nscratch = {};\n",
        esize, s.name, i, dtype_code(*d), i, i, esize, i + 1);
    body_ += "  }\n";
    if (const auto* z = attr(s, "zero")) {
      auto c = expr(z->value, z->line, "`zero`");
      if (!c) return Error{c.error()};
      body_ += fmt::format(
          "  {{\n  int64_t z_ = {};\n  if (e_) return PK_ST_SHAPE;\n  if (z_ != 0) {{\n"
          "  pk_step* t_ = &p->steps[p->nsteps++];\n  t_->op = PK_OP_MEMSET;\n  t_->line = {};\n"
          "  t_->target.kind = 1;\n  t_->target.index = {};\n  t_->value = 0;\n  }}\n  }}\n",
          *c, s.line, i);
    }
    return Status::ok();
  }

  Status memset(const PlanStatement& s) {
    auto ref = buffer(s.name);
    if (!ref) return fail(s.line, fmt::format("memset `{}`: no buffer of that name", s.name));
    body_ += fmt::format(
        "  {{\n  pk_step* t_ = &p->steps[p->nsteps++];\n  t_->op = PK_OP_MEMSET;\n  t_->line = "
        "{};\n"
        "  t_->target.kind = {};\n  t_->target.index = {};\n",
        s.line, ref->first, ref->second);
    if (const auto* v = attr(s, "value")) {
      if (auto st = value("v_", v->value, v->line, "the byte value"); !st) return st;
      body_ += "  if (v_ < 0 || v_ > 255) return PK_ST_SHAPE;\n  t_->value = (int)v_;\n";
    }
    body_ += "  }\n";
    return Status::ok();
  }

  // `KEY = (a, b, c)` into `TARGET[0..]`, with at least `lo` and at most `hi` items.
  Status tuple(const PlanStatement::Attr& a, size_t lo, size_t hi, const std::string& target,
               size_t* n = nullptr) {
    auto items = split_tuple(a.value);
    if (!items) return fail(a.line, fmt::format("`{} = {}`: {}", a.key, a.value, items.error()));
    if (items->size() < lo || items->size() > hi)
      return fail(a.line, fmt::format("`{}` has {} values", a.key, items->size()));
    for (size_t i = 0; i < items->size(); ++i) {
      auto c = expr((*items)[i], a.line, fmt::format("`{}`", a.key));
      if (!c) return Error{c.error()};
      body_ += fmt::format("  {}[{}] = {};\n", target, i, *c);
    }
    body_ += "  if (e_) return PK_ST_SHAPE;\n";
    if (n) *n = items->size();
    return Status::ok();
  }

  Status tensor_map(const PlanStatement& s) {
    if (!in_.dialect.tensor_maps)
      return fail(s.line,
                  fmt::format("tensor maps are not part of a {} launch plan", in_.dialect.backend));
    const auto* arr = attr(s, "array");
    const auto* dims = attr(s, "dims");
    const auto* box = attr(s, "box");
    if (arr == nullptr || dims == nullptr || box == nullptr)
      return fail(s.line, fmt::format("tensor_map `{}` needs array, dims and box", s.name));
    auto ref = buffer(trim(arr->value));
    if (!ref) return fail(arr->line, fmt::format("`{}` is not a buffer", trim(arr->value)));
    const size_t i = maps_.size();
    maps_.push_back(s.name);
    const int64_t esize = static_cast<int64_t>(dtype_size(buffer_dtype(*ref)));
    body_ += fmt::format(
        "  {{\n  pk_tmap* m_ = &p->maps[{}];\n  p->nmaps = {};\n  m_->buffer.kind = {};\n"
        "  m_->buffer.index = {};\n  m_->dtype = {};\n",
        i, i + 1, ref->first, ref->second, dtype_code(buffer_dtype(*ref)));
    size_t rank = 0;
    if (auto st = tuple(*dims, 1, 5, "m_->dims", &rank); !st) return st;
    if (auto st = tuple(*box, rank, rank, "m_->box"); !st) return st;
    body_ += fmt::format("  m_->rank = {};\n", rank);
    if (const auto* es = attr(s, "element_strides")) {
      if (auto st = tuple(*es, rank, rank, "m_->element_strides"); !st) return st;
    } else {
      for (size_t k = 0; k < rank; ++k) body_ += fmt::format("  m_->element_strides[{}] = 1;\n", k);
    }
    if (const auto* gs = attr(s, "global_strides")) {
      if (rank < 2) return fail(gs->line, "`global_strides` needs at least two dims");
      if (auto st = tuple(*gs, rank - 1, rank - 1, "m_->global_strides"); !st) return st;
    } else {
      body_ += fmt::format("  {{\n  int64_t st_ = {};\n", esize);
      for (size_t k = 1; k < rank; ++k)
        body_ += fmt::format(
            "  st_ = pk_x_mul(&e_, st_, m_->dims[{}]);\n"
            "  m_->global_strides[{}] = st_;\n",
            k - 1, k - 1);
      body_ += "  }\n  if (e_) return PK_ST_SHAPE;\n";
    }
    int64_t sw = 0;
    if (const auto* w = attr(s, "swizzle")) {
      auto e = expr::Expression::parse(w->value);
      auto v = e ? e->eval(expr::Env{}) : Result<int64_t>(make_error("not a constant"));
      if (!v) {
        // A swizzle that depends on names: evaluated at run time.
        if (auto st = value("sw_", w->value, w->line, "`swizzle`"); !st) return st;
        body_ +=
            "  if (sw_ != 0 && sw_ != 32 && sw_ != 64 && sw_ != 128) return PK_ST_SHAPE;\n"
            "  m_->swizzle = (int)sw_;\n";
      } else {
        sw = *v;
        if (sw != 0 && sw != 32 && sw != 64 && sw != 128)
          return fail(w->line, fmt::format("swizzle {} is not one of 0, 32, 64, 128", sw));
        body_ += fmt::format("  m_->swizzle = {};\n", sw);
      }
    }
    // The limits of cuTensorMapEncodeTiled, as peak's evaluator checks them.
    body_ += fmt::format(
        "  if (pk_check_tmap(m_, {}) != 0) return PK_ST_SHAPE; /* tensor_map {} */\n  }}\n", esize,
        s.name);
    return Status::ok();
  }

  Status launch(const PlanStatement& s) {
    auto forbid = [&](const char* key, bool allowed) -> Status {
      if (attr(s, key) != nullptr && !allowed)
        return fail(s.line,
                    fmt::format("`{}` is not part of a {} launch plan", key, in_.dialect.backend));
      return Status::ok();
    };
    for (auto [key, ok] : {std::pair{"block", in_.dialect.block},
                           {"args", in_.dialect.args},
                           {"shared", in_.dialect.shared},
                           {"cluster", in_.dialect.cluster}})
      if (auto st = forbid(key, ok); !st) return st;
    const auto k = std::find(kernels_.begin(), kernels_.end(), s.name) - kernels_.begin();
    const KernelSymbol* sym = static_cast<size_t>(k) < in_.kernels.size()
                                  ? &in_.kernels[static_cast<size_t>(k)]
                                  : nullptr;
    body_ += fmt::format(
        "  {{\n  pk_step* t_ = &p->steps[p->nsteps++];\n  t_->op = PK_OP_LAUNCH;\n"
        "  t_->line = {};\n  t_->kernel = {};\n  ran_ = 1;\n"
        "  t_->grid[0] = t_->grid[1] = t_->grid[2] = 1;\n"
        "  t_->block[0] = t_->block[1] = t_->block[2] = {};\n"
        "  t_->cluster[0] = t_->cluster[1] = t_->cluster[2] = 1;\n",
        s.line, k, in_.dialect.block ? 1 : 0);
    const auto* grid = attr(s, "grid");
    if (grid == nullptr) return fail(s.line, fmt::format("launch `{}` needs `grid`", s.name));
    if (auto st = tuple(*grid, 1, 3, "t_->grid"); !st) return st;
    if (in_.dialect.block) {
      const auto* block = attr(s, "block");
      if (block == nullptr) return fail(s.line, fmt::format("launch `{}` needs `block`", s.name));
      if (auto st = tuple(*block, 1, 3, "t_->block"); !st) return st;
      body_ +=
          "  if (t_->block[0] < 1 || t_->block[1] < 1 || t_->block[2] < 1) return PK_ST_SHAPE;\n";
    }
    if (const auto* c = attr(s, "cluster"))
      if (auto st = tuple(*c, 1, 3, "t_->cluster"); !st) return st;
    if (const auto* sh = attr(s, "shared")) {
      if (auto st = value("t_->shared", sh->value, sh->line, "the shared memory size", false); !st)
        return st;
    }
    if (in_.dialect.args) {
      const auto* a = attr(s, "args");
      if (a == nullptr) return fail(s.line, fmt::format("launch `{}` needs `args`", s.name));
      if (auto st = args(s, *a, sym); !st) return st;
    }
    body_ += "  if (pk_check_launch(t_, d) != 0) return PK_ST_LIMITS;\n  }\n";
    return Status::ok();
  }

  Status args(const PlanStatement& s, const PlanStatement::Attr& a, const KernelSymbol* sym) {
    auto items = split_tuple(a.value);
    if (!items) return fail(a.line, fmt::format("`args = {}`: {}", a.value, items.error()));
    if (trim(a.value) == "()") items->clear();
    if (sym && !sym->param_bytes.empty() && sym->param_bytes.size() != items->size())
      return fail(a.line, fmt::format("launch `{}` passes {} arguments; the kernel takes {}",
                                      s.name, items->size(), sym->param_bytes.size()));
    body_ += fmt::format("  t_->nargs = {};\n", items->size());
    for (size_t i = 0; i < items->size(); ++i) {
      const std::string& item = (*items)[i];
      const int64_t want = sym && i < sym->param_bytes.size() ? sym->param_bytes[i] : int64_t{-1};
      if (auto ref = buffer(item)) {
        body_ += fmt::format("  t_->args[{}].kind = {};\n  t_->args[{}].index = {};\n", i,
                             ref->first, i, ref->second);
      } else if (auto m = std::find(maps_.begin(), maps_.end(), item); m != maps_.end()) {
        body_ += fmt::format("  t_->args[{}].kind = 2;\n  t_->args[{}].index = {};\n", i, i,
                             m - maps_.begin());
      } else {
        if (want != 4 && want != 8)
          return fail(a.line,
                      fmt::format("argument {} of `{}` (`{}`): the kernel's parameter size is {}; "
                                  "an export passes integers to 4- or 8-byte parameters of a "
                                  "kernel whose C++ name gives them",
                                  i + 1, s.name, item,
                                  want < 0 ? std::string("unknown") : std::to_string(want)));
        auto c = expr(item, a.line, "the argument");
        if (!c) return Error{c.error()};
        body_ += fmt::format(
            "  t_->args[{}].kind = 3;\n  t_->args[{}].value = {};\n  t_->args[{}].bytes = {};\n", i,
            i, *c, i, want);
      }
    }
    body_ += "  if (e_) return PK_ST_SHAPE;\n";
    return Status::ok();
  }

  const PlanFunctionInput& in_;
  std::map<std::string, std::vector<std::string>> macros_;
  std::set<std::string> done_macros_, visiting_, locals_;
  std::vector<std::pair<std::string, DType>> scratch_;
  std::vector<std::string> maps_;
  std::vector<std::string> kernels_;
  std::string macro_code_, body_;
  std::string err_ = "&e_";  // the error flag expressions set (a macro's own while it is written)
};

}  // namespace

Result<std::string> plan_function(const PlanFunctionInput& in) { return Coder(in).run(); }

std::string c_identifier(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "k_" + out;
  return out;
}

PlanCapacity plan_capacity(const ParsedPlan& plan) {
  PlanCapacity c{0, 0, 0, 0};
  for (const auto& s : plan.statements) {
    if (s.kind == Kind::scratch) {
      ++c.scratch;
      for (const auto& a : s.attrs) c.steps += a.key == "zero" ? 1 : 0;
    }
    if (s.kind == Kind::tensor_map) ++c.tensor_maps;
    if (s.kind == Kind::memset || s.kind == Kind::launch) ++c.steps;
    for (const auto& a : s.attrs)
      if (a.key == "args")
        if (auto items = split_tuple(a.value)) c.args = std::max(c.args, items->size());
  }
  return max_capacity(c, PlanCapacity{1, 1, 1, 1});
}

PlanCapacity max_capacity(const PlanCapacity& a, const PlanCapacity& b) {
  return {std::max(a.scratch, b.scratch), std::max(a.tensor_maps, b.tensor_maps),
          std::max(a.steps, b.steps), std::max(a.args, b.args)};
}

std::string plan_types(const KernelContext& ctx, const PlanCapacity& cap) {
  std::string shape;
  for (const auto& s : ctx.scalars) shape += fmt::format("  int64_t {};\n", s.name);
  for (const auto& a : ctx.arrays)
    shape += fmt::format("  int64_t {}_size; /* elements */\n", a.name);
  std::string out = std::string(expr::c_helpers());
  out += fmt::format(R"C(
enum {{ PK_ST_OK = 0, PK_ST_SHAPE = {}, PK_ST_WORKSPACE = {}, PK_ST_DEVICE = {}, PK_ST_LIMITS = {},
       PK_ST_LAUNCH = {}, PK_ST_ARGUMENT = {} }};
enum {{ PK_OP_MEMSET = 0, PK_OP_LAUNCH = 1 }};
enum {{ PK_F32 = 0, PK_F16 = 1, PK_BF16 = 2, PK_I32 = 3, PK_E4M3 = 4 }};
#define PK_MAX_SCRATCH_BYTES ((int64_t)1 << 40)
/* A macro's value where it is read: its own failure becomes the reader's. */
static inline int64_t pk_x_use(int* e, int failed, int64_t v) {{ if (failed) *e = 1; return v; }}
#define PK_MAX_SCRATCH {}
#define PK_MAX_MAPS {}
#define PK_MAX_STEPS {}
#define PK_MAX_ARGS {}

/* The shape: the scalars and every array's element count. */
typedef struct pk_shape {{
{}}} pk_shape;

/* The device facts a launch plan reads (docs/launch-plan.md). */
typedef struct pk_dev {{
  int64_t compute_units, max_threads, shared_memory, shared_memory_optin, subgroup_size, l2_bytes;
}} pk_dev;

typedef struct pk_buffer {{ int kind; int index; }} pk_buffer; /* kind 0: array, 1: scratch */
typedef struct pk_scratch {{ int dtype; int64_t count; int64_t bytes; }} pk_scratch;
typedef struct pk_tmap {{
  pk_buffer buffer;
  int dtype, rank, swizzle;
  int64_t dims[5], box[5], element_strides[5], global_strides[4];
}} pk_tmap;
/* kind 0: array, 1: scratch buffer, 2: tensor map, 3: an integer of `bytes` bytes */
typedef struct pk_arg {{ int kind; int index; int64_t value; int bytes; }} pk_arg;
typedef struct pk_step {{
  int op, line, kernel, value, nargs;
  pk_buffer target;
  int64_t grid[3], block[3], cluster[3], shared;
  pk_arg args[PK_MAX_ARGS];
}} pk_step;
typedef struct pk_plan {{
  int nscratch, nmaps, nsteps;
  pk_scratch scratch[PK_MAX_SCRATCH];
  pk_tmap maps[PK_MAX_MAPS];
  pk_step steps[PK_MAX_STEPS];
}} pk_plan;

/* The rules of cuTensorMapEncodeTiled, as peak checks them before a run. */
static int pk_check_tmap(const pk_tmap* m, int64_t esize) {{
  for (int i = 0; i < m->rank; ++i) {{
    if (m->dims[i] < 1 || m->box[i] < 1 || m->box[i] > 256) return 1;
    if (m->element_strides[i] < 1 || m->element_strides[i] > 8) return 1;
  }}
  if ((m->box[0] * esize) % 16 != 0) return 1;
  if (m->swizzle > 0 && m->box[0] * esize > m->swizzle) return 1;
  for (int i = 0; i + 1 < m->rank; ++i)
    if (m->global_strides[i] <= 0 || m->global_strides[i] % 16 != 0) return 1;
  return 0;
}}

/* Positive sizes, the device's limits, a grid that is a multiple of the cluster. */
static int pk_check_launch(const pk_step* t, const pk_dev* d) {{
  for (int i = 0; i < 3; ++i) {{
    if (t->grid[i] < 1 || t->cluster[i] < 1) return 1;
    if (t->grid[i] % t->cluster[i] != 0) return 1;
  }}
  if (t->shared < 0 || (d->shared_memory_optin > 0 && t->shared > d->shared_memory_optin)) return 1;
  if (t->block[0] > 0 && d->max_threads > 0 &&
      t->block[0] * t->block[1] * t->block[2] > d->max_threads) return 1;
  if (t->cluster[0] * t->cluster[1] * t->cluster[2] > 16) return 1;
  return 0;
}}
)C",
                     kStatusInvalidShape, kStatusWorkspace, kStatusDevice, kStatusDeviceLimits,
                     kStatusLaunch, kStatusArgument, cap.scratch, cap.tensor_maps, cap.steps,
                     cap.args, shape);
  return out;
}

Result<std::string> shape_function(const KernelContext& ctx, const std::string& name) {
  auto scalar = [&](const std::string& n) -> Result<std::string> {
    for (const auto& s : ctx.scalars)
      if (s.name == n) return "s->" + n;
    return make_error(fmt::format("unknown identifier '{}' (array sizes read the scalars)", n));
  };
  std::string out = fmt::format("static int {}(pk_shape* s) {{\n  int e_ = 0;\n", name);
  for (const auto& a : ctx.arrays) {
    auto e = expr::Expression::parse(a.size);
    if (!e) return make_error(fmt::format("size of array '{}': {}", a.name, e.error()));
    auto c = e->to_c(scalar, "&e_");
    if (!c) return make_error(fmt::format("size of array '{}': {}", a.name, c.error()));
    out += fmt::format("  s->{}_size = {};\n  if (e_ || s->{}_size < 0) return PK_ST_SHAPE;\n",
                       a.name, *c, a.name);
  }
  auto all = [&](const std::string& n) { return shape_name(ctx, n, "s"); };
  for (auto [key, text] : {std::pair{"valid", ctx.valid}, {"supports", ctx.supports}}) {
    if (trim(text).empty()) continue;
    auto e = expr::Expression::parse(text);
    if (!e) return make_error(fmt::format("{} = \"{}\": {}", key, text, e.error()));
    auto c = e->to_c(all, "&e_");
    if (!c) return make_error(fmt::format("{} = \"{}\": {}", key, text, c.error()));
    out += fmt::format("  if (({}) == 0 || e_) return PK_ST_SHAPE; /* {} = {} */\n", *c, key, text);
  }
  out += "  return PK_ST_OK;\n}\n";
  return out;
}

Result<std::string> class_function(const KernelContext& ctx, const std::vector<ClassRule>& rules,
                                   const std::string& name) {
  auto all = [&](const std::string& n) { return shape_name(ctx, n, "s"); };
  std::string out =
      fmt::format("static int {}(const pk_shape* s) {{\n  int e_ = 0;\n  (void)s;\n", name);
  for (size_t i = 0; i < rules.size(); ++i) {
    const std::string& w = rules[i].when;
    if (trim(w).empty()) {
      out += fmt::format("  return {}; /* {} */\n", i, to_string(rules[i].cls));
      break;
    }
    auto e = expr::Expression::parse(w);
    if (!e)
      return make_error(
          fmt::format("the rule of class {}: {}", to_string(rules[i].cls), e.error()));
    auto c = e->to_c(all, "&e_");
    if (!c)
      return make_error(
          fmt::format("the rule of class {}: {}", to_string(rules[i].cls), c.error()));
    out += fmt::format("  if (({}) != 0 && !e_) return {}; /* {}: {} */\n  e_ = 0;\n", *c, i,
                       to_string(rules[i].cls), w);
  }
  out += "  return -1;\n}\n";
  return out;
}

}  // namespace peak::exporter
