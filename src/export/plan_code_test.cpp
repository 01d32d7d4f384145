// The launch plan as C (export/plan_code.h) against peak's own evaluator (plan/plan_language.h):
// the generated functions are compiled with the system's C++ compiler into a program that prints
// the filled `pk_plan` for a list of shapes, configurations and device facts, and every line must
// be what evaluate_plan gives for the same inputs: the same disposition class (passed or not),
// scratch buffers, tensor maps, memsets and launches, field by field.
#include "export/plan_code.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "plan/plan_language.h"
#include "util/fs.h"
#include "util/process.h"

namespace peak::exporter {
namespace {

namespace fs = std::filesystem;

PlanDialect cuda() {
  PlanDialect d;
  d.backend = "cuda";
  d.cluster = true;
  d.tensor_maps = true;
  return d;
}

ScalarSpec scalar(const std::string& name) { return {name, DType::i32, {}, 0, 0, 1}; }

const char* const kFactNames[] = {"compute_units",       "max_threads",   "shared_memory",
                                  "shared_memory_optin", "subgroup_size", "l2_bytes"};

// H100-like, a small device, and one that reports no opt-in limit.
const std::vector<std::vector<int64_t>> kDevices = {{132, 1024, 49152, 232448, 32, 52428800},
                                                    {2, 256, 16384, 16384, 64, 1048576},
                                                    {1, 1024, 49152, 0, 32, 0}};

expr::Env device_env(const std::vector<int64_t>& facts) {
  expr::Env env;
  for (size_t i = 0; i < facts.size(); ++i) env[kFactNames[i]] = facts[i];
  return env;
}

// One plan of one kernel context, with the configurations, shapes and devices it runs at.
struct PlanCase {
  KernelContext ctx;
  SourceRegions regions;
  std::vector<std::map<std::string, int64_t>> configs;
  std::vector<std::vector<int64_t>> shapes;  // the scalars' values, in ctx.scalars order
  std::vector<std::vector<int64_t>> devices = kDevices;
  std::map<std::string, std::vector<int64_t>> params;  // kernel -> bytes of its parameters
  std::vector<ClassRule> rules;                        // compared too when not empty
};

// What one (configuration, shape, device) gave: the exporter's status code (the evaluator's:
// 0 passed, 1 anything else) and the plan as text.
struct Outcome {
  int status = 0;
  std::string text;
  std::string message;  // the evaluator's
};
using Outcomes = std::map<std::string, Outcome>;  // "config shape device"

std::string key(size_t c, size_t s, size_t d) { return fmt::format("{} {} {}", c, s, d); }

std::string c_int(int64_t v) {
  if (v == INT64_MIN) return "(-9223372036854775807LL - 1)";
  return fmt::format("{}LL", v);
}

Result<ParsedPlan> parse(const PlanCase& pc) {
  return parse_plan_text(pc.regions.host, 1, "kernel.cu");
}

std::vector<KernelSymbol> symbols(const PlanCase& pc, const ParsedPlan& plan) {
  std::vector<KernelSymbol> out;
  for (const std::string& k : plan.kernels()) {
    KernelSymbol s;
    s.symbol = "_Z" + k;
    if (auto it = pc.params.find(k); it != pc.params.end()) s.param_bytes = it->second;
    out.push_back(s);
  }
  return out;
}

// ---- peak's evaluator ----

std::string plan_text(const LaunchPlan& p, const std::vector<std::string>& kernels,
                      const std::vector<KernelSymbol>& syms) {
  std::string out =
      fmt::format("counts {} {} {}\n", p.scratch.size(), p.tensor_maps.size(), p.steps.size());
  for (const auto& s : p.scratch)
    out += fmt::format("scratch {} {} {}\n", static_cast<int>(s.dtype), s.count, s.bytes);
  for (const auto& t : p.tensor_maps) {
    out += fmt::format("map {} {} {} {} {} |", t.buffer.kind == PlanBufferRef::Kind::array ? 0 : 1,
                       t.buffer.index, static_cast<int>(t.dtype), t.dims.size(), t.swizzle);
    for (auto v : t.dims) out += fmt::format(" {}", v);
    out += " |";
    for (auto v : t.box) out += fmt::format(" {}", v);
    out += " |";
    for (auto v : t.element_strides) out += fmt::format(" {}", v);
    out += " |";
    for (auto v : t.global_strides) out += fmt::format(" {}", v);
    out += "\n";
  }
  for (const auto& st : p.steps) {
    if (st.op == PlanStep::Op::memset) {
      out += fmt::format("memset {} {} {} line {}\n",
                         st.target.kind == PlanBufferRef::Kind::array ? 0 : 1, st.target.index,
                         st.value, st.line);
      continue;
    }
    const size_t k =
        static_cast<size_t>(std::find(kernels.begin(), kernels.end(), st.kernel) - kernels.begin());
    out += fmt::format(
        "launch {} line {} grid {} {} {} block {} {} {} cluster {} {} {} shared {} "
        "args {}:",
        k, st.line, st.grid[0], st.grid[1], st.grid[2], st.block[0], st.block[1], st.block[2],
        st.cluster[0], st.cluster[1], st.cluster[2], st.shared, st.args.size());
    for (size_t i = 0; i < st.args.size(); ++i) {
      const PlanArg& a = st.args[i];
      const int kind = a.kind == PlanArg::Kind::array        ? 0
                       : a.kind == PlanArg::Kind::scratch    ? 1
                       : a.kind == PlanArg::Kind::tensor_map ? 2
                                                             : 3;
      int64_t bytes = 0;
      if (kind == 3 && k < syms.size() && i < syms[k].param_bytes.size())
        bytes = syms[k].param_bytes[i];
      out += fmt::format(" {}/{}/{}/{}", kind, kind == 3 ? 0 : a.index, kind == 3 ? a.value : 0,
                         bytes);
    }
    out += "\n";
  }
  return out;
}

Outcomes run_peak(const PlanCase& pc) {
  Outcomes out;
  auto plan = parse(pc);
  EXPECT_TRUE(plan) << plan.error();
  if (!plan) return out;
  const auto syms = symbols(pc, *plan);
  for (size_t c = 0; c < pc.configs.size(); ++c)
    for (size_t s = 0; s < pc.shapes.size(); ++s)
      for (size_t d = 0; d < pc.devices.size(); ++d) {
        Shape shape;
        for (size_t i = 0; i < pc.ctx.scalars.size(); ++i)
          shape.values[pc.ctx.scalars[i].name] = pc.shapes[s][i];
        Outcome o;
        auto valid = shape_is_valid(pc.ctx, shape);
        if (!valid || !*valid) {
          o.status = 1;
          o.message = valid ? "outside valid/supports" : valid.error();
        } else {
          expr::Env env =
              plan_env(pc.ctx, pc.regions, shape, pc.configs[c], device_env(pc.devices[d]));
          PlanOutcome r = evaluate_plan(*plan, cuda(), pc.ctx, env);
          o.status = r.disposition == Disposition::passed ? 0 : 1;
          o.message = fmt::format("{}: {}", to_string(r.disposition), r.message);
          if (o.status == 0) o.text = plan_text(r.plan, plan->kernels(), syms);
        }
        out[key(c, s, d)] = o;
      }
  return out;
}

// ---- the generated C ----

const char* const kPrinter = R"C(
static void pk_print(int c, int i, int j, int st, const pk_plan* p) {
  printf("case %d %d %d %d\n", c, i, j, st);
  if (st != 0) return;
  printf("counts %d %d %d\n", p->nscratch, p->nmaps, p->nsteps);
  for (int k = 0; k < p->nscratch && k < PK_MAX_SCRATCH; ++k)
    printf("scratch %d %lld %lld\n", p->scratch[k].dtype, (long long)p->scratch[k].count,
           (long long)p->scratch[k].bytes);
  for (int k = 0; k < p->nmaps && k < PK_MAX_MAPS; ++k) {
    const pk_tmap* m = &p->maps[k];
    printf("map %d %d %d %d %d |", m->buffer.kind, m->buffer.index, m->dtype, m->rank, m->swizzle);
    for (int r = 0; r < m->rank; ++r) printf(" %lld", (long long)m->dims[r]);
    printf(" |");
    for (int r = 0; r < m->rank; ++r) printf(" %lld", (long long)m->box[r]);
    printf(" |");
    for (int r = 0; r < m->rank; ++r) printf(" %lld", (long long)m->element_strides[r]);
    printf(" |");
    for (int r = 0; r + 1 < m->rank; ++r) printf(" %lld", (long long)m->global_strides[r]);
    printf("\n");
  }
  for (int k = 0; k < p->nsteps && k < PK_MAX_STEPS; ++k) {
    const pk_step* t = &p->steps[k];
    if (t->op == PK_OP_MEMSET) {
      printf("memset %d %d %d line %d\n", t->target.kind, t->target.index, t->value, t->line);
      continue;
    }
    printf("launch %d line %d grid %lld %lld %lld block %lld %lld %lld cluster %lld %lld %lld "
           "shared %lld args %d:",
           t->kernel, t->line, (long long)t->grid[0], (long long)t->grid[1],
           (long long)t->grid[2], (long long)t->block[0], (long long)t->block[1],
           (long long)t->block[2], (long long)t->cluster[0], (long long)t->cluster[1],
           (long long)t->cluster[2], (long long)t->shared, t->nargs);
    for (int a = 0; a < t->nargs && a < PK_MAX_ARGS; ++a)
      printf(" %d/%d/%lld/%d", t->args[a].kind, t->args[a].index, (long long)t->args[a].value,
             t->args[a].bytes);
    printf("\n");
  }
}
)C";

// The program: the shared declarations, the shape check, the class rules (when given), one plan
// function per configuration, and a main that prints every case.
Result<std::string> program(const PlanCase& pc) {
  auto plan = parse(pc);
  if (!plan) return Error{plan.error()};
  std::string out = "#include <stdint.h>\n#include <stdio.h>\n#include <string.h>\n\n";
  out += plan_types(pc.ctx, plan_capacity(*plan));
  auto shape = shape_function(pc.ctx, "pk_shape_check");
  if (!shape) return shape;
  out += *shape;
  if (!pc.rules.empty()) {
    auto cls = class_function(pc.ctx, pc.rules, "pk_class");
    if (!cls) return cls;
    out += *cls;
  }
  const auto syms = symbols(pc, *plan);
  for (size_t c = 0; c < pc.configs.size(); ++c) {
    PlanFunctionInput in{
        &pc.ctx, &pc.regions, &*plan, cuda(), pc.configs[c], syms, fmt::format("pk_plan_{}", c)};
    auto f = plan_function(in);
    if (!f) return make_error(fmt::format("configuration {}: {}", c, f.error()));
    out += *f;
  }
  out += kPrinter;
  std::string shapes, devices, plans, set;
  for (const auto& s : pc.shapes) {
    std::vector<std::string> v;
    for (auto x : s) v.push_back(c_int(x));
    shapes += "{" + join(v, ", ") + "},\n";
  }
  for (const auto& d : pc.devices) {
    std::vector<std::string> v;
    for (auto x : d) v.push_back(c_int(x));
    devices += "{" + join(v, ", ") + "},\n";
  }
  for (size_t c = 0; c < pc.configs.size(); ++c) plans += fmt::format("pk_plan_{}, ", c);
  for (size_t i = 0; i < pc.ctx.scalars.size(); ++i)
    set += fmt::format("    s.{} = shapes[i][{}];\n", pc.ctx.scalars[i].name, i);
  out += fmt::format(R"C(
typedef int (*pk_plan_fn)(const pk_shape*, const pk_dev*, pk_plan*);
static const long long shapes[][{nsc}] = {{
{shapes}}};
static const long long devs[][6] = {{
{devices}}};
static const pk_plan_fn plans[] = {{{plans}}};
static pk_plan plan_memory;

int main(void) {{
  const int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
  const int ndevs = (int)(sizeof devs / sizeof devs[0]);
  const int nplans = (int)(sizeof plans / sizeof plans[0]);
  for (int i = 0; i < nshapes; ++i) {{
    pk_shape s;
    memset(&s, 0, sizeof s);
{set}    const int st = pk_shape_check(&s);
    if (st == 0 && {rules}) printf("class %d %d\n", i, {cls});
    for (int c = 0; c < nplans; ++c)
      for (int j = 0; j < ndevs; ++j) {{
        pk_dev d = {{devs[j][0], devs[j][1], devs[j][2], devs[j][3], devs[j][4], devs[j][5]}};
        memset(&plan_memory, 0xAB, sizeof plan_memory); /* the plan function clears it */
        const int r = st != 0 ? st : plans[c](&s, &d, &plan_memory);
        pk_print(c, i, j, r, &plan_memory);
      }}
  }}
  return 0;
}}
)C",
                     fmt::arg("nsc", pc.ctx.scalars.size()), fmt::arg("shapes", shapes),
                     fmt::arg("devices", devices), fmt::arg("plans", plans), fmt::arg("set", set),
                     fmt::arg("rules", pc.rules.empty() ? "0" : "1"),
                     fmt::arg("cls", pc.rules.empty() ? "-1" : "pk_class(&s)"));
  return out;
}

bool have_compiler() {
  ProcessOptions o;
  o.argv = {"c++", "--version"};
  o.timeout_s = 60;
  auto r = run_process(o);
  return r && r->ok();
}

// Compiles `source` with the system's C++ compiler and runs it; its standard output.
Result<std::string> compile_and_run(const std::string& source) {
  auto dir = make_temp_dir("peak-plan-code-");
  if (!dir) return Error{dir.error()};
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } cleanup{*dir};
  if (auto s = write_file(*dir / "plan.cpp", source); !s) return make_error(s.message());
  ProcessOptions cc;
  cc.argv = {"c++",
             "-std=c++17",
             "-O1",
             "-Wall",
             "-Wno-unused-function",
             "-Wno-unused-variable",
             "-Wno-unused-but-set-variable",
             "-o",
             (*dir / "plan").string(),
             (*dir / "plan.cpp").string()};
  cc.timeout_s = 300;
  auto built = run_process(cc);
  if (!built) return Error{built.error()};
  if (!built->ok()) return make_error("c++ failed: " + built->err);
  ProcessOptions run;
  run.argv = {(*dir / "plan").string()};
  run.timeout_s = 120;
  auto ran = run_process(run);
  if (!ran) return Error{ran.error()};
  if (!ran->ok()) return make_error("the program failed: " + ran->describe() + "\n" + ran->err);
  return ran->out;
}

struct ExportRun {
  Outcomes cases;
  std::map<size_t, int> classes;  // shape -> rule index (-1: none)
};

Result<ExportRun> run_export(const PlanCase& pc) {
  auto src = program(pc);
  if (!src) return Error{src.error()};
  auto text = compile_and_run(*src);
  if (!text) return make_error(text.error() + "\n--- program ---\n" + *src);
  ExportRun out;
  Outcome* open = nullptr;
  for (const std::string& line : split_lines(*text)) {
    int c = 0, i = 0, j = 0, st = 0;
    if (std::sscanf(line.c_str(), "case %d %d %d %d", &c, &i, &j, &st) == 4) {
      open =
          &out.cases[key(static_cast<size_t>(c), static_cast<size_t>(i), static_cast<size_t>(j))];
      open->status = st;
      continue;
    }
    if (std::sscanf(line.c_str(), "class %d %d", &i, &c) == 2) {
      out.classes[static_cast<size_t>(i)] = c;
      continue;
    }
    if (open != nullptr) open->text += line + "\n";
  }
  return out;
}

std::string shape_text(const PlanCase& pc, size_t s) {
  std::vector<std::string> v;
  for (size_t i = 0; i < pc.ctx.scalars.size(); ++i)
    v.push_back(fmt::format("{}={}", pc.ctx.scalars[i].name, pc.shapes[s][i]));
  return join(v, " ");
}

// Runs both and compares every case; returns the exporter's outcomes for further checks.
ExportRun expect_same(const PlanCase& pc) {
  auto exported = run_export(pc);
  EXPECT_TRUE(exported) << exported.error();
  if (!exported) return {};
  const Outcomes peak = run_peak(pc);
  EXPECT_EQ(exported->cases.size(), peak.size());
  size_t passed = 0, refused = 0;
  for (size_t c = 0; c < pc.configs.size(); ++c)
    for (size_t s = 0; s < pc.shapes.size(); ++s)
      for (size_t d = 0; d < pc.devices.size(); ++d) {
        const std::string k = key(c, s, d);
        SCOPED_TRACE(
            fmt::format("configuration {}, shape {} ({}), device {}", c, s, shape_text(pc, s), d));
        auto e = exported->cases.find(k);
        auto p = peak.find(k);
        EXPECT_NE(e, exported->cases.end());
        EXPECT_NE(p, peak.end());
        if (e == exported->cases.end() || p == peak.end()) continue;
        EXPECT_EQ(e->second.status == kStatusOk, p->second.status == 0)
            << "exported status " << e->second.status << "; peak: " << p->second.message;
        if (e->second.status == kStatusOk && p->second.status == 0) {
          EXPECT_EQ(e->second.text, p->second.text);
          ++passed;
        } else {
          ++refused;
        }
      }
  // The cases are chosen so that both outcomes occur.
  EXPECT_GT(passed, 0u);
  EXPECT_GT(refused, 0u);
  for (size_t s = 0; s < pc.shapes.size() && !pc.rules.empty(); ++s) {
    Shape shape;
    for (size_t i = 0; i < pc.ctx.scalars.size(); ++i)
      shape.values[pc.ctx.scalars[i].name] = pc.shapes[s][i];
    auto valid = shape_is_valid(pc.ctx, shape);
    if (!valid || !*valid) {
      EXPECT_EQ(exported->classes.count(s), 0u) << shape_text(pc, s);
      continue;
    }
    auto cls = classify_shape(pc.rules, pc.ctx, shape);
    EXPECT_TRUE(cls) << cls.error();
    if (!cls) continue;
    int want = -1;
    for (size_t r = 0; r < pc.rules.size() && *cls; ++r)
      if (pc.rules[r].cls == **cls) {
        want = static_cast<int>(r);
        break;
      }
    EXPECT_EQ(exported->classes.count(s), 1u) << shape_text(pc, s);
    EXPECT_EQ(exported->classes[s], want) << shape_text(pc, s);
  }
  return std::move(*exported);
}

#define SKIP_WITHOUT_COMPILER() \
  if (!have_compiler()) GTEST_SKIP() << "no C++ compiler (c++) on this machine"

// ---- the kernels ----

// A matmul whose plan dispatches on M between a tiled kernel and a split small-M path, with
// scratch buffers (one zeroed only on that path), a memset of C, macros over macros, and names
// assigned twice.
PlanCase matmul_case() {
  PlanCase pc;
  pc.ctx.name = "mm";
  pc.ctx.backend = "cuda";
  pc.ctx.source_file = "kernel.cu";
  pc.ctx.arrays = {{"A", DType::f32, "M * K", {}, false},
                   {"B", DType::f32, "K * N", {}, false},
                   {"C", DType::f32, "M * N", {}, true}};
  pc.ctx.scalars = {scalar("M"), scalar("N"), scalar("K")};
  pc.ctx.valid = "M > 0 && N > 0 && K > 0";
  pc.ctx.supports = "N % 2 == 0";
  pc.ctx.workspace = "1 << 50";
  pc.regions.macros = R"(#include <cuda_fp16.h>
#ifndef TILE_K
#define TILE_K 8
#endif
#define BLOCK_TILE_M (BLOCK_Y * TRD_Y)
#define BLOCK_TILE_N (BLOCK_X * 4u)
#define THREADS (BLOCK_X * BLOCK_Y)
#define SMEM_BYTES (BLOCK_TILE_M * TILE_K * 4 + 0x10)  /* padding */
#define K_PER_SPLIT ((K + SPLITS - 1) / SPLITS)
#define NAME_STR "mm"
#define SCALE 1.5f
#define IDX(r, c) ((r) * N + (c))
)";
  pc.regions.host = R"(// the launch plan
tiles_m = ceil_div(M, BLOCK_TILE_M)
tiles_n = ceil_div(N, BLOCK_TILE_N)
work = tiles_m
work = work * tiles_n
require K % 4 == 0
require N / (N - 2) >= 0
require work <= compute_units * 4096 || M <= SMALL_M
scratch partial
  dtype = f32
  count = M <= SMALL_M ? SPLITS * M * N : 1
  zero = M <= SMALL_M
scratch flags
  dtype = i32
  count = compute_units
  zero = 1
scratch halves
  dtype = f16
  count = work + 1
memset C
  value = FILL
  when = M > SMALL_M
launch matmul
  grid = (tiles_n, tiles_m)
  block = (BLOCK_X, BLOCK_Y)
  shared = SMEM_BYTES
  args = (A, B, C, flags, M, N, K)
  when = M > SMALL_M
launch small_m
  grid = (ceil_div(N, 128), SPLITS)
  block = (THREADS)
  args = (A, B, partial, M, N, K_PER_SPLIT)
  when = M <= SMALL_M
launch reduce
  grid = (ceil_div(M * N, 256))
  block = (256)
  args = (partial, C, M * N, SPLITS)
  when = M <= SMALL_M && SPLITS > 1
)";
  pc.configs = {
      {{"BLOCK_X", 16},
       {"BLOCK_Y", 16},
       {"TRD_Y", 4},
       {"TILE_K", 16},
       {"SPLITS", 4},
       {"SMALL_M", 16},
       {"FILL", 0}},
      // TILE_K from the macro's default
      {{"BLOCK_X", 32},
       {"BLOCK_Y", 32},
       {"TRD_Y", 8},
       {"SPLITS", 1},
       {"SMALL_M", 0},
       {"FILL", 255}},
      // 2048 threads: over every device's limit; a memset value that is no byte
      {{"BLOCK_X", 64},
       {"BLOCK_Y", 32},
       {"TRD_Y", 2},
       {"TILE_K", 64},
       {"SPLITS", 8},
       {"SMALL_M", 64},
       {"FILL", 300}},
      // 512 KiB of shared memory
      {{"BLOCK_X", 8},
       {"BLOCK_Y", 8},
       {"TRD_Y", 256},
       {"TILE_K", 64},
       {"SPLITS", 2},
       {"SMALL_M", 8},
       {"FILL", 3}},
  };
  pc.shapes = {{64, 64, 64},
               {8, 128, 256},
               {16, 64, 62},  // K % 4 != 0: require
               {1, 2, 4},     // N / (N - 2): division by zero
               {1000, 3000, 4096},
               {0, 4, 4},  // outside valid
               {4, 3, 4},  // outside supports
               {17, 1024, 8},
               {4096, 4096, 4096},
               {1 << 20, 1 << 20, 4},      // require work <= ... fails
               {16, int64_t{1} << 58, 4},  // SPLITS * M * N overflows on the small-M path
               {int64_t{1} << 32, int64_t{1} << 32, 4},  // the size of C overflows
               {64, 2, 8},
               {9, 4, 12}};
  pc.params = {
      {"matmul", {8, 8, 8, 8, 4, 4, 4}}, {"small_m", {8, 8, 8, 4, 4, 4}}, {"reduce", {8, 8, 8, 4}}};
  pc.rules = {{SuiteClass::large_k, "K >= 8 * M && K >= 8 * N"},
              {SuiteClass::small_m, "M <= 32"},
              {SuiteClass::square, "M == N && N == K"},
              {SuiteClass::irregular, ""}};
  return pc;
}

// An FP16 matmul with TMA: tensor maps with default and explicit strides, a swizzle that is a
// tuning value, element strides, a map over a scratch buffer, clusters and dynamic shared
// memory.
PlanCase tma_case() {
  PlanCase pc;
  pc.ctx.name = "tma";
  pc.ctx.backend = "cuda";
  pc.ctx.source_file = "kernel.cu";
  pc.ctx.arrays = {{"A", DType::f16, "M * K", {}, false},
                   {"B", DType::bf16, "K * N", {}, false},
                   {"C", DType::f32, "M * N", {}, true}};
  pc.ctx.scalars = {scalar("M"), scalar("N"), scalar("K")};
  pc.ctx.valid = "M > 0 && N > 0 && K > 0";
  pc.ctx.workspace = "M * N * 4 + 4096";
  pc.regions.macros = R"(#define BM 128
#define BN (WN * 2)
#define STAGE_BYTES ((BM * BK + BK * BN) * 2)
#define SMEM (STAGES * STAGE_BYTES + 1024)
)";
  pc.regions.host = R"(require K % 8 == 0
tensor_map a_map
  array = A
  dims = (K, M)
  box = (BK, BM)
  swizzle = 128
tensor_map b_map
  array = B
  dims = (N, K)
  box = (BN, BK)
  element_strides = (1, ES)
  global_strides = (N * 2)
  swizzle = SW
scratch acc
  dtype = i32
  count = ceil_div(M, BM) * ceil_div(N, BN) * 4
tensor_map acc_map
  array = acc
  dims = (ceil_div(N, BN) * 4, ceil_div(M, BM), 1)
  box = (4, 1, 1)
tensor_map c_map
  array = C
  dims = (N, M)
  box = (BN, 1)
launch gemm
  grid = (ceil_div(N, BN) * CX, ceil_div(M, BM))
  block = (128, 1, 1)
  cluster = (CX, CY)
  shared = SMEM
  args = (a_map, b_map, c_map, acc_map, C, M, N, K)
)";
  pc.configs = {
      {{"WN", 32}, {"BK", 64}, {"SW", 128}, {"ES", 1}, {"CX", 2}, {"CY", 1}, {"STAGES", 3}},
      {{"WN", 16}, {"BK", 32}, {"SW", 0}, {"ES", 2}, {"CX", 1}, {"CY", 2}, {"STAGES", 4}},
      // the inner box of A (256 bytes) is wider than its 128-byte swizzle
      {{"WN", 32}, {"BK", 128}, {"SW", 64}, {"ES", 1}, {"CX", 1}, {"CY", 1}, {"STAGES", 2}},
      // no swizzle of that size; element strides past 8
      {{"WN", 64}, {"BK", 64}, {"SW", 48}, {"ES", 9}, {"CX", 1}, {"CY", 1}, {"STAGES", 2}},
      // 246784 bytes of shared memory
      {{"WN", 32}, {"BK", 64}, {"SW", 128}, {"ES", 1}, {"CX", 4}, {"CY", 1}, {"STAGES", 10}},
  };
  pc.shapes = {{128, 128, 64}, {256, 64, 64},   {100, 72, 8},    {128, 128, 12},
               {1, 8, 8},      {384, 1000, 16}, {128, 36, 8},    {4096, 4096, 4096},
               {512, 256, 8},  {0, 8, 8},       {8192, 8200, 64}};
  pc.params = {{"gemm", {128, 128, 128, 128, 8, 4, 4, 4}}};
  return pc;
}

// Row kernels: a plan none of whose launches may run, a `when` that divides by zero, launches
// without arguments, three-dimensional blocks and macros with a conditional.
PlanCase rows_case() {
  PlanCase pc;
  pc.ctx.name = "rows";
  pc.ctx.backend = "cuda";
  pc.ctx.source_file = "kernel.cu";
  pc.ctx.arrays = {{"X", DType::f32, "R * N", {}, false}, {"Y", DType::f32, "R * N", {}, true}};
  pc.ctx.scalars = {scalar("R"), scalar("N")};
  pc.ctx.valid = "R > 0 && N > 0";
  pc.regions.macros = R"(#define ROWS_PER_BLOCK (WARPS * 2)
#define VEC ((N % 4 == 0) ? 4 : 1)
#define LIMIT_N (MAX_N - 0)
)";
  pc.regions.host = R"(rows_per = ROWS_PER_BLOCK
require N <= LIMIT_N
launch prep
  grid = (1)
  block = (32, 2, 2)
  args = ()
  when = R > 100
launch rows
  grid = (ceil_div(R, rows_per), 1, 1)
  block = (32, WARPS)
  args = (X, Y, R, N / VEC)
  when = N / (R - 5) > 0
launch tail
  grid = (R)
  block = (min(N, 1024, max_threads))
  args = (X, Y, N)
  when = R < 3
)";
  pc.configs = {{{"WARPS", 4}, {"MAX_N", 4096}}, {{"WARPS", 8}, {"MAX_N", 100000}}};
  pc.shapes = {{10, 64},  {5, 64}, {50, 20}, {200, 8}, {1, 4096},
               {2, 5000}, {6, 3},  {101, 1}, {0, 1}};
  pc.params = {{"prep", {}}, {"rows", {8, 8, 4, 8}}, {"tail", {8, 8, 4}}};
  return pc;
}

// ---- equivalence ----

TEST(PlanCode, MatmulPlansMatchPeaksEvaluator) {
  SKIP_WITHOUT_COMPILER();
  PlanCase pc = matmul_case();
  ExportRun r = expect_same(pc);
  if (HasFailure()) return;
  // The statuses say why: a shape the plan refuses, and a device whose limits it exceeds.
  EXPECT_EQ(r.cases[key(0, 2, 0)].status, kStatusInvalidShape);  // require K % 4 == 0
  EXPECT_EQ(r.cases[key(0, 3, 0)].status, kStatusInvalidShape);  // division by zero
  EXPECT_EQ(r.cases[key(0, 5, 0)].status, kStatusInvalidShape);  // outside valid
  EXPECT_EQ(r.cases[key(0, 6, 0)].status, kStatusInvalidShape);  // outside supports
  EXPECT_EQ(r.cases[key(2, 0, 0)].status, kStatusDeviceLimits);  // 2048 threads
  EXPECT_EQ(r.cases[key(2, 4, 0)].status, kStatusInvalidShape);  // memset value 300
  EXPECT_EQ(r.cases[key(0, 0, 1)].status, kStatusOk);            // 256 threads fit
  EXPECT_EQ(r.cases[key(3, 0, 0)].status, kStatusDeviceLimits);  // 512 KiB of shared memory
  EXPECT_EQ(r.cases[key(3, 0, 2)].status, kStatusOk);            // no opt-in limit reported
}

TEST(PlanCode, TensorMapPlansMatchPeaksEvaluator) {
  SKIP_WITHOUT_COMPILER();
  PlanCase pc = tma_case();
  ExportRun r = expect_same(pc);
  if (HasFailure()) return;
  EXPECT_EQ(r.cases[key(0, 0, 0)].status, kStatusOk);
  EXPECT_EQ(r.cases[key(0, 3, 0)].status, kStatusInvalidShape);  // K % 8
  EXPECT_EQ(r.cases[key(4, 0, 0)].status, kStatusDeviceLimits);  // shared memory
  EXPECT_EQ(r.cases[key(4, 0, 2)].status, kStatusOk);            // no opt-in limit reported
}

TEST(PlanCode, RowPlansMatchPeaksEvaluator) {
  SKIP_WITHOUT_COMPILER();
  PlanCase pc = rows_case();
  ExportRun r = expect_same(pc);
  if (HasFailure()) return;
  EXPECT_EQ(r.cases[key(0, 1, 0)].status, kStatusInvalidShape);  // `when` divides by zero
  EXPECT_EQ(r.cases[key(0, 2, 0)].status, kStatusInvalidShape);  // no launch runs
  EXPECT_EQ(r.cases[key(0, 5, 0)].status, kStatusInvalidShape);  // require
  EXPECT_EQ(r.cases[key(1, 5, 0)].status, kStatusOk);
}

// A cluster of more than 16 blocks, sm_90's largest (non-portable) size, is refused as over the
// device's limits (peak's CUDA runner refuses it as invalid_config before it runs); 16 passes the
// check, as there.
TEST(PlanCode, ClustersOfMoreThanSixteenBlocksExceedTheLimits) {
  SKIP_WITHOUT_COMPILER();
  PlanCase pc = tma_case();
  pc.configs = {pc.configs[0], pc.configs[0], pc.configs[0]};
  pc.configs[1]["CX"] = 16;
  pc.configs[2]["CX"] = 32;
  pc.shapes = {{128, 128, 64}};
  auto r = run_export(pc);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->cases[key(0, 0, 0)].status, kStatusOk);
  EXPECT_EQ(r->cases[key(1, 0, 0)].status, kStatusOk);
  EXPECT_EQ(r->cases[key(2, 0, 0)].status, kStatusDeviceLimits);
}

// A launch whose block has no threads in a dimension cannot run: peak's evaluator refuses it
// (invalid_config), and so must the export.
TEST(PlanCode, ABlockWithoutThreadsIsRefused) {
  SKIP_WITHOUT_COMPILER();
  PlanCase pc = rows_case();
  pc.regions.host = R"(launch rows
  grid = (R)
  block = (N / 64 * 32, 1)
  args = (X, Y, R, N)
)";
  pc.configs = {{{"WARPS", 4}, {"MAX_N", 4096}}};
  pc.shapes = {{4, 128}, {4, 32}};
  pc.devices = {kDevices[0]};
  expect_same(pc);
}

// A macro that does not evaluate for a configuration (a division by zero) refuses only the
// shapes whose plan reads it, as with peak's evaluator: here the path that reads it does not run
// for M > 16.
TEST(PlanCode, AMacroThatFailsOnAPathThatDoesNotRunRefusesNothing) {
  SKIP_WITHOUT_COMPILER();
  PlanCase pc = matmul_case();
  pc.ctx.supports = "";
  pc.regions.host = R"(launch big
  grid = (N)
  block = (32)
  args = ()
  when = M > 16
launch small
  grid = (K_PER_SPLIT)
  block = (32)
  args = ()
  when = M <= 16
)";
  pc.configs = {{{"SPLITS", 0}}, {{"SPLITS", 2}}};
  pc.shapes = {{64, 64, 64}, {8, 64, 64}};
  pc.devices = {kDevices[0]};
  pc.params = {{"big", {}}, {"small", {}}};
  pc.rules.clear();
  expect_same(pc);
}

// ---- export-time errors ----

PlanFunctionInput input_for(const PlanCase& pc, const ParsedPlan& plan,
                            const std::vector<KernelSymbol>& syms, size_t config = 0) {
  return PlanFunctionInput{&pc.ctx, &pc.regions, &plan, cuda(), pc.configs[config], syms, "pk_f"};
}

TEST(PlanCode, AnUnknownIdentifierIsAnExportTimeErrorNamingIt) {
  PlanCase pc = matmul_case();
  pc.regions.host = R"(tiles = ceil_div(N, TILEZ)
launch matmul
  grid = (tiles)
  block = (32)
  args = (A, B, C, A, M, N, K)
)";
  auto plan = parse(pc);
  ASSERT_TRUE(plan) << plan.error();
  auto f = plan_function(input_for(pc, *plan, symbols(pc, *plan)));
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().find("unknown identifier 'TILEZ'"), std::string::npos) << f.error();
  EXPECT_NE(f.error().find("kernel.cu:1"), std::string::npos) << f.error();

  // A macro whose value is no integer expression, read by the plan.
  pc.regions.host = R"(launch matmul
  grid = (SCALE)
  block = (32)
  args = (A, B, C, A, M, N, K)
)";
  plan = parse(pc);
  ASSERT_TRUE(plan) << plan.error();
  f = plan_function(input_for(pc, *plan, symbols(pc, *plan)));
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().find("SCALE"), std::string::npos) << f.error();

  // A macro over an unknown name.
  pc.regions.macros += "#define BAD (M * NOPE)\n";
  pc.regions.host = R"(launch matmul
  grid = (BAD)
  block = (32)
  args = (A, B, C, A, M, N, K)
)";
  plan = parse(pc);
  ASSERT_TRUE(plan) << plan.error();
  f = plan_function(input_for(pc, *plan, symbols(pc, *plan)));
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().find("BAD"), std::string::npos) << f.error();
  EXPECT_NE(f.error().find("NOPE"), std::string::npos) << f.error();

  // The plan may not redefine a scalar, a tuning value or a macro.
  for (const char* line : {"M = 3", "SPLITS = 2", "THREADS = 4"}) {
    pc.regions.host = std::string(line) +
                      "\nlaunch matmul\n  grid = (1)\n  block = (32)\n"
                      "  args = (A, B, C, A, M, N, K)\n";
    plan = parse(pc);
    ASSERT_TRUE(plan) << plan.error();
    f = plan_function(input_for(pc, *plan, symbols(pc, *plan)));
    ASSERT_FALSE(f) << line;
    EXPECT_NE(f.error().find("cannot be redefined"), std::string::npos) << f.error();
  }

  // The size of an array over a name that is no scalar.
  KernelContext bad = pc.ctx;
  bad.arrays[0].size = "M * KK";
  auto s = shape_function(bad, "pk_shape_check");
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("KK"), std::string::npos) << s.error();
}

// An integer argument goes to a parameter of 4 or 8 bytes as the kernel's mangled name gives
// them; without them (an extern "C" kernel) the export cannot pass it.
TEST(PlanCode, IntegerArgumentsNeedTheParameterSizes) {
  PlanCase pc = matmul_case();
  pc.regions.host = R"(launch matmul
  grid = (1)
  block = (32)
  args = (A, B, C, A, M, N, K)
)";
  auto plan = parse(pc);
  ASSERT_TRUE(plan) << plan.error();
  std::vector<KernelSymbol> syms = {{"matmul", {}}};
  auto f = plan_function(input_for(pc, *plan, syms));
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().find("argument 5 of `matmul` (`M`)"), std::string::npos) << f.error();
  syms = {{"_Z6matmul", {8, 8, 8, 8, 4, 4}}};
  f = plan_function(input_for(pc, *plan, syms));
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().find("passes 7 arguments; the kernel takes 6"), std::string::npos)
      << f.error();
  syms = {{"_Z6matmul", {8, 8, 8, 8, 4, 2, 4}}};
  f = plan_function(input_for(pc, *plan, syms));
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().find("parameter size is 2"), std::string::npos) << f.error();
  syms = {{"_Z6matmul", {8, 8, 8, 8, 4, 8, 4}}};
  f = plan_function(input_for(pc, *plan, syms));
  ASSERT_TRUE(f) << f.error();
  EXPECT_NE(f->find("t_->args[5].bytes = 8;"), std::string::npos) << *f;
  EXPECT_NE(f->find("static int pk_f(const pk_shape* s, const pk_dev* d, pk_plan* p)"),
            std::string::npos)
      << *f;
}

// What the dialect does not have is an export-time error, as it is compile_failed for peak.
TEST(PlanCode, WhatTheDialectLacksIsAnExportTimeError) {
  PlanCase pc = tma_case();
  auto plan = parse(pc);
  ASSERT_TRUE(plan) << plan.error();
  PlanFunctionInput in = input_for(pc, *plan, symbols(pc, *plan));
  in.dialect.tensor_maps = false;
  auto f = plan_function(in);
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().find("tensor maps are not part of a cuda launch plan"), std::string::npos)
      << f.error();
  in = input_for(pc, *plan, symbols(pc, *plan));
  in.dialect.cluster = false;
  f = plan_function(in);
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().find("`cluster` is not part"), std::string::npos) << f.error();
  // A constant swizzle that is no size of TMA is refused when the export is written.
  pc.regions.host = R"(tensor_map a_map
  array = A
  dims = (K, M)
  box = (8, 8)
  swizzle = 96
launch gemm
  grid = (1)
  block = (128)
  args = (a_map, a_map, a_map, a_map, C, M, N, K)
)";
  plan = parse(pc);
  ASSERT_TRUE(plan) << plan.error();
  f = plan_function(input_for(pc, *plan, symbols(pc, *plan)));
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().find("swizzle 96"), std::string::npos) << f.error();
}

// ---- names and capacities ----

TEST(PlanCode, CIdentifiers) {
  EXPECT_EQ(c_identifier("matmul-cuda-fp32"), "matmul_cuda_fp32");
  EXPECT_EQ(c_identifier("softmax.hip fp16"), "softmax_hip_fp16");
  EXPECT_EQ(c_identifier("ok_name_2"), "ok_name_2");
  EXPECT_EQ(c_identifier("9lives"), "k_9lives");
  EXPECT_EQ(c_identifier(""), "k_");
  EXPECT_EQ(c_identifier("a\xc3\xa9"), "a__");
  for (const char* n : {"matmul-cuda-fp32", "9lives", "x y", ""})
    EXPECT_EQ(c_identifier(c_identifier(n)), c_identifier(n)) << n;
}

TEST(PlanCode, CapacitiesCountWhatAPlanMayFill) {
  PlanCase mm = matmul_case();
  auto plan = parse(mm);
  ASSERT_TRUE(plan) << plan.error();
  PlanCapacity c = plan_capacity(*plan);
  EXPECT_EQ(c.scratch, 3u);
  EXPECT_EQ(c.tensor_maps, 1u);  // none, at least one
  EXPECT_EQ(c.steps, 6u);        // two zeroed scratch buffers, a memset, three launches
  EXPECT_EQ(c.args, 7u);

  PlanCase tma = tma_case();
  auto tplan = parse(tma);
  ASSERT_TRUE(tplan) << tplan.error();
  PlanCapacity t = plan_capacity(*tplan);
  EXPECT_EQ(t.scratch, 1u);
  EXPECT_EQ(t.tensor_maps, 4u);
  EXPECT_EQ(t.steps, 1u);
  EXPECT_EQ(t.args, 8u);

  PlanCapacity m = max_capacity(c, t);
  EXPECT_EQ(m.scratch, 3u);
  EXPECT_EQ(m.tensor_maps, 4u);
  EXPECT_EQ(m.steps, 6u);
  EXPECT_EQ(m.args, 8u);

  auto empty = parse_plan_text("", 1, "kernel.cu");
  ASSERT_TRUE(empty);
  PlanCapacity e = plan_capacity(*empty);
  EXPECT_EQ(e.scratch, 1u);
  EXPECT_EQ(e.tensor_maps, 1u);
  EXPECT_EQ(e.steps, 1u);
  EXPECT_EQ(e.args, 1u);

  std::string types = plan_types(mm.ctx, c);
  EXPECT_NE(types.find("#define PK_MAX_SCRATCH 3\n"), std::string::npos);
  EXPECT_NE(types.find("#define PK_MAX_STEPS 6\n"), std::string::npos);
  EXPECT_NE(types.find("int64_t C_size;"), std::string::npos);
  EXPECT_NE(types.find("int64_t K;"), std::string::npos);
}

// The text is deterministic for its inputs.
TEST(PlanCode, TheTextIsDeterministic) {
  PlanCase pc = matmul_case();
  auto plan = parse(pc);
  ASSERT_TRUE(plan) << plan.error();
  auto a = plan_function(input_for(pc, *plan, symbols(pc, *plan), 1));
  auto b = plan_function(input_for(pc, *plan, symbols(pc, *plan), 1));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, *b);
  auto c = plan_function(input_for(pc, *plan, symbols(pc, *plan), 0));
  ASSERT_TRUE(c);
  EXPECT_NE(*a, *c);
}

}  // namespace
}  // namespace peak::exporter
