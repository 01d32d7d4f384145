#include "plan/plan_language.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "util/fs.h"

namespace peak {
namespace {

KernelContext matmul() {
  KernelContext ctx;
  ctx.name = "matmul";
  ctx.backend = "cuda";
  ctx.source_file = "kernel.cu";
  ctx.arrays = {{"A", DType::f16, "M * K", {}, false},
                {"B", DType::f16, "K * N", {}, false},
                {"C", DType::f32, "M * N", {}, true}};
  ctx.scalars = {{"M", DType::i32, {}, 0, 0, 1},
                 {"N", DType::i32, {}, 0, 0, 1},
                 {"K", DType::i32, {}, 0, 0, 1}};
  return ctx;
}

expr::Env device() {
  return {{"compute_units", 132},          {"max_threads", 1024}, {"shared_memory", 49152},
          {"shared_memory_optin", 232448}, {"subgroup_size", 32}, {"l2_bytes", 50331648}};
}

PlanDialect cuda() {
  PlanDialect d;
  d.backend = "cuda";
  d.cluster = true;
  d.tensor_maps = true;
  return d;
}

PlanDialect hlsl() {
  PlanDialect d;
  d.backend = "hlsl";
  d.block = d.args = d.shared = false;
  d.kernel_word = "entry point";
  return d;
}

SourceRegions regions(const std::string& macros, const std::string& host) {
  SourceRegions r;
  r.before = "// header\n// peak:begin macros\n";
  r.macros = macros;
  r.between_macros_device = "// peak:end macros\n// peak:begin device\n";
  r.device = "__global__ void k() {}\n";
  r.between_device_host = "// peak:end device\n// peak:begin host\n";
  r.host = host;
  r.after = "// peak:end host\n";
  return r;
}

struct PlanRun {
  PlanOutcome out;
  std::string parse_error;
};

PlanRun evaluate(const std::string& host, std::map<std::string, int64_t> config = {},
                 Shape shape = Shape{{{"M", 256}, {"N", 512}, {"K", 1024}}},
                 const PlanDialect& d = cuda(), const KernelContext& ctx = matmul(),
                 const std::string& macros = "") {
  SourceRegions r = regions(macros, host);
  PlanRun run;
  auto parsed = parse_plan(r, "kernel.cu");
  if (!parsed) {
    run.parse_error = parsed.error();
    run.out.disposition = Disposition::compile_failed;
    return run;
  }
  run.out = evaluate_plan(*parsed, d, ctx, plan_env(ctx, r, shape, config, device()));
  return run;
}

// The host region of regions() starts at line 8 (without macros; one macro line makes it 9).
constexpr int kFirst = 8;

TEST(PlanLanguage, OneLaunchWithNamesMacrosAndDeviceFacts) {
  PlanRun r = evaluate(
      "// comment\n"
      "tiles = ceil_div(M, TILE_M)\n"
      "launch gemm\n"
      "  grid = (ceil_div(N, TILE_N), tiles)   # trailing comment\n"
      "  block = (THREADS)\n"
      "  shared = 2 * TILE_M * 64\n"
      "  args = (A, B, C, M, N, K, compute_units, N * K)\n",
      {{"TILE_N", 128}, {"THREADS", 256}}, Shape{{{"M", 300}, {"N", 512}, {"K", 64}}}, cuda(),
      matmul(), "#define TILE_M (THREADS / 2)\n");
  ASSERT_EQ(r.out.disposition, Disposition::passed) << r.parse_error << r.out.message;
  const LaunchPlan& p = r.out.plan;
  ASSERT_EQ(p.steps.size(), 1u);
  const PlanStep& s = p.steps[0];
  EXPECT_EQ(s.kernel, "gemm");
  EXPECT_EQ(s.line, kFirst + 1 + 2);  // one macro line, then the `launch` on the third plan line
  EXPECT_EQ(s.grid, (std::array<int64_t, 3>{4, 3, 1}));
  EXPECT_EQ(s.block, (std::array<int64_t, 3>{256, 1, 1}));
  EXPECT_EQ(s.cluster, (std::array<int64_t, 3>{1, 1, 1}));
  EXPECT_EQ(s.shared, 2 * 128 * 64);
  ASSERT_EQ(s.args.size(), 8u);
  EXPECT_EQ(s.args[0].kind, PlanArg::Kind::array);
  EXPECT_EQ(s.args[2].index, 2);
  EXPECT_EQ(s.args[3].kind, PlanArg::Kind::value);
  EXPECT_EQ(s.args[3].value, 300);
  EXPECT_EQ(s.args[6].value, 132);
  EXPECT_EQ(s.args[7].value, 512 * 64);
  EXPECT_EQ(s.args[7].text, "N * K");
}

// `zero` is an expression: a scratch buffer only one path reads is cleared only for the shapes
// that take it (the row kernels' counters, which their cluster and split paths do not use).
TEST(PlanLanguage, ScratchIsClearedOnlyWhereItsZeroHolds) {
  const std::string plan =
      "counted = M > 8\n"
      "scratch counter\n"
      "  dtype = i32\n"
      "  count = 2\n"
      "  zero = counted\n"
      "launch k\n"
      "  grid = (1)\n"
      "  block = (32)\n"
      "  args = (A, B, C, counter)\n";
  KernelContext ctx = matmul();
  ctx.workspace = "64";
  PlanRun wide = evaluate(plan, {}, Shape{{{"M", 16}, {"N", 8}, {"K", 8}}}, cuda(), ctx);
  ASSERT_EQ(wide.out.disposition, Disposition::passed) << wide.parse_error << wide.out.message;
  ASSERT_EQ(wide.out.plan.steps.size(), 2u);
  EXPECT_EQ(wide.out.plan.steps[0].op, PlanStep::Op::memset);
  PlanRun narrow = evaluate(plan, {}, Shape{{{"M", 4}, {"N", 8}, {"K", 8}}}, cuda(), ctx);
  ASSERT_EQ(narrow.out.disposition, Disposition::passed) << narrow.out.message;
  ASSERT_EQ(narrow.out.plan.steps.size(), 1u);
  EXPECT_EQ(narrow.out.plan.steps[0].kernel, "k");
  EXPECT_EQ(narrow.out.plan.scratch.size(), 1u);  // allocated either way
}

TEST(PlanLanguage, ScratchMemsetsAndTwoLaunchesInOrder) {
  KernelContext ctx = matmul();
  ctx.workspace = "4 * SPLITS_MAX * M * N";
  ctx.tuning = {{"SPLITS", {2, 4}, 2}};
  PlanRun r = evaluate(
      "require K % SPLITS == 0\n"
      "scratch partial\n"
      "  dtype = f32\n"
      "  count = SPLITS * M * N\n"
      "  zero = 1\n"
      "memset C\n"
      "launch partial_gemm\n"
      "  grid = (1, 2, SPLITS)\n"
      "  block = (128)\n"
      "  args = (A, B, partial)\n"
      "launch reduce\n"
      "  grid = (ceil_div(M * N, 256))\n"
      "  block = (256)\n"
      "  args = (partial, C, M * N, SPLITS)\n",
      {{"SPLITS", 4}}, Shape{{{"M", 16}, {"N", 8}, {"K", 64}}}, cuda(), ctx,
      "#define SPLITS_MAX 4\n");
  ASSERT_EQ(r.out.disposition, Disposition::passed) << r.parse_error << r.out.message;
  const LaunchPlan& p = r.out.plan;
  ASSERT_EQ(p.scratch.size(), 1u);
  EXPECT_EQ(p.scratch[0].bytes, 4 * 16 * 8 * 4);
  EXPECT_EQ(p.scratch_bytes(), 4 * 16 * 8 * 4);
  ASSERT_EQ(p.steps.size(), 4u);
  EXPECT_EQ(p.steps[0].op, PlanStep::Op::memset);  // zero = 1
  EXPECT_EQ(p.steps[0].target.kind, PlanBufferRef::Kind::scratch);
  EXPECT_EQ(p.steps[1].op, PlanStep::Op::memset);
  EXPECT_EQ(p.steps[1].target.kind, PlanBufferRef::Kind::array);
  EXPECT_EQ(p.steps[1].target.index, 2);
  EXPECT_EQ(p.steps[2].kernel, "partial_gemm");
  EXPECT_EQ(p.steps[2].args[2].kind, PlanArg::Kind::scratch);
  EXPECT_EQ(p.steps[3].kernel, "reduce");
  EXPECT_EQ(p.launches(), 2);

  // The same plan parsed once names both kernels, in order.
  auto parsed = parse_plan_text(
      "launch b\n grid = (1)\nlaunch a\n grid = (1)\nlaunch b\n"
      " grid = (1)\n",
      1, "k.cu");
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(parsed->kernels(), (std::vector<std::string>{"b", "a"}));
}

TEST(PlanLanguage, WhenDispatchesOnTheShape) {
  KernelContext ctx = matmul();
  ctx.tuning = {{"ROWS", {8, 16}, 16}, {"SPLITS", {1, 4}, 1}};
  const std::string host =
      "launch big\n"
      "  grid = (ceil_div(N, 128), ceil_div(M, 128))\n"
      "  block = (256)\n"
      "  when = M > ROWS\n"
      "  args = (A, B, C, M, N, K)\n"
      "memset C\n"
      "  when = M <= ROWS && SPLITS > 1\n"
      "launch small\n"
      "  grid = (ceil_div(N, 128), SPLITS)\n"
      "  block = (32, 8)\n"
      "  when = M <= ROWS\n"
      "  args = (A, B, C, M, N, K)\n";
  auto kernels = [](const LaunchPlan& p) {
    std::vector<std::string> out;
    for (const auto& st : p.steps)
      out.push_back(st.op == PlanStep::Op::launch ? st.kernel : std::string("memset"));
    return out;
  };
  PlanRun r = evaluate(host, {{"ROWS", 16}, {"SPLITS", 4}},
                       Shape{{{"M", 2048}, {"N", 2048}, {"K", 2048}}}, cuda(), ctx);
  ASSERT_EQ(r.out.disposition, Disposition::passed) << r.parse_error << r.out.message;
  EXPECT_EQ(kernels(r.out.plan), (std::vector<std::string>{"big"}));
  r = evaluate(host, {{"ROWS", 16}, {"SPLITS", 4}}, Shape{{{"M", 16}, {"N", 4096}, {"K", 4096}}},
               cuda(), ctx);
  ASSERT_EQ(r.out.disposition, Disposition::passed) << r.out.message;
  EXPECT_EQ(kernels(r.out.plan), (std::vector<std::string>{"memset", "small"}));
  EXPECT_EQ(r.out.plan.steps[1].grid, (std::array<int64_t, 3>{32, 4, 1}));
  r = evaluate(host, {{"ROWS", 8}, {"SPLITS", 1}}, Shape{{{"M", 16}, {"N", 4096}, {"K", 4096}}},
               cuda(), ctx);
  EXPECT_EQ(kernels(r.out.plan), (std::vector<std::string>{"big"}));

  // Both kernels are the plan's, whatever the shape: the build checks that both exist.
  auto parsed = parse_plan_text(host, 1, "k.cu");
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(parsed->kernels(), (std::vector<std::string>{"big", "small"}));

  // A shape for which no launch runs cannot use the configuration; a `when` that cannot be
  // evaluated is the plan's mistake, with its line.
  r = evaluate("launch k\n  grid = (1)\n  block = (32)\n  when = M < 8\n  args = (A)\n", {},
               Shape{{{"M", 16}, {"N", 8}, {"K", 8}}}, cuda(), ctx);
  EXPECT_EQ(r.out.disposition, Disposition::invalid_config);
  EXPECT_NE(r.out.message.find("`when`"), std::string::npos) << r.out.message;
  r = evaluate("launch k\n  grid = (1)\n  block = (32)\n  when = ROWZ > 1\n  args = (A)\n", {},
               Shape{{{"M", 16}, {"N", 8}, {"K", 8}}}, cuda(), ctx);
  EXPECT_EQ(r.out.disposition, Disposition::compile_failed);
  EXPECT_NE(r.out.message.find(fmt::format("kernel.cu:{}:", kFirst + 3)), std::string::npos)
      << r.out.message;
  // `when` belongs to steps: a scratch buffer or a tensor map has none.
  parsed = parse_plan_text("scratch s\n  dtype = f32\n  count = 4\n  when = M > 1\n", 1, "k.cu");
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.error().find("not an attribute of scratch `s`"), std::string::npos)
      << parsed.error();
}

// What the device facts rule out is refused by the plan itself, with or without the device.
TEST(PlanLanguage, DynamicSharedMemoryAndScratchBeyondAnyDeviceAreRefused) {
  const std::string launch = "launch k\n  grid = (1)\n  block = (32)\n  args = (A)\n";
  PlanRun fits = evaluate(launch + "  shared = 232448\n");
  EXPECT_EQ(fits.out.disposition, Disposition::passed) << fits.out.message;
  PlanRun over = evaluate(launch + "  shared = 232449\n");
  EXPECT_EQ(over.out.disposition, Disposition::invalid_config) << over.out.message;
  EXPECT_NE(over.out.message.find("232449 bytes of dynamic shared memory; the device allows at "
                                  "most 232448"),
            std::string::npos)
      << over.out.message;
  KernelContext ctx = matmul();
  ctx.workspace = "1 << 60";
  PlanRun tera = evaluate("scratch s\n  dtype = f32\n  count = 1 << 40\n" + launch, {},
                          Shape{{{"M", 256}, {"N", 512}, {"K", 1024}}}, cuda(), ctx);
  EXPECT_EQ(tera.out.disposition, Disposition::launch_failed) << tera.out.message;
  EXPECT_NE(tera.out.message.find("more than the 1099511627776 bytes any device can allocate"),
            std::string::npos)
      << tera.out.message;
}

TEST(PlanLanguage, ScratchBeyondTheWorkspaceIsRefused) {
  const std::string host =
      "scratch s\n  dtype = f32\n  count = M * N\nlaunch k\n  grid = (1)\n  block = (1)\n"
      "  args = (s)\n";
  PlanRun none = evaluate(host);
  EXPECT_EQ(none.out.disposition, Disposition::workspace_exceeded);
  EXPECT_NE(none.out.message.find("grants 0 bytes"), std::string::npos) << none.out.message;
  KernelContext ctx = matmul();
  ctx.workspace = "2 * M * N";  // half of what the plan asks for
  PlanRun half = evaluate(host, {}, Shape{{{"M", 256}, {"N", 512}, {"K", 1024}}}, cuda(), ctx);
  EXPECT_EQ(half.out.disposition, Disposition::workspace_exceeded);
  ctx.workspace = "4 * M * N";
  PlanRun enough = evaluate(host, {}, Shape{{{"M", 256}, {"N", 512}, {"K", 1024}}}, cuda(), ctx);
  EXPECT_EQ(enough.out.disposition, Disposition::passed) << enough.out.message;
}

TEST(PlanLanguage, TensorMapsFollowTheTmaRules) {
  const std::string host =
      "tensor_map tma_a\n"
      "  array = A\n"
      "  dims = (K, M)\n"
      "  box = (64, 128)\n"
      "  swizzle = 128\n"
      "launch k\n"
      "  grid = (2, 1)\n"
      "  block = (384)\n"
      "  cluster = (2, 1, 1)\n"
      "  args = (tma_a, C)\n";
  PlanRun r = evaluate(host);
  ASSERT_EQ(r.out.disposition, Disposition::passed) << r.parse_error << r.out.message;
  ASSERT_EQ(r.out.plan.tensor_maps.size(), 1u);
  const PlanTensorMap& t = r.out.plan.tensor_maps[0];
  EXPECT_EQ(t.dtype, DType::f16);
  EXPECT_EQ(t.dims, (std::vector<int64_t>{1024, 256}));
  EXPECT_EQ(t.global_strides, (std::vector<int64_t>{2048}));  // packed rows of K halves
  EXPECT_EQ(t.element_strides, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(r.out.plan.steps[0].cluster, (std::array<int64_t, 3>{2, 1, 1}));
  EXPECT_EQ(r.out.plan.steps[0].args[0].kind, PlanArg::Kind::tensor_map);

  // A row stride that is not a multiple of 16 bytes cannot be a tensor map: invalid_config.
  PlanRun ragged = evaluate(host, {}, Shape{{{"M", 256}, {"N", 512}, {"K", 1001}}});
  EXPECT_EQ(ragged.out.disposition, Disposition::invalid_config);
  EXPECT_NE(ragged.out.message.find("multiple of 16"), std::string::npos) << ragged.out.message;
  // An inner box wider than the swizzle.
  PlanRun wide = evaluate(replace_all(host, "box = (64, 128)", "box = (128, 64)"));
  EXPECT_EQ(wide.out.disposition, Disposition::invalid_config);
  EXPECT_NE(wide.out.message.find("more than the 128-byte swizzle"), std::string::npos)
      << wide.out.message;
  // A grid that is not a multiple of the cluster.
  PlanRun odd = evaluate(replace_all(host, "grid = (2, 1)", "grid = (3, 1)"));
  EXPECT_EQ(odd.out.disposition, Disposition::invalid_config);
  EXPECT_NE(odd.out.message.find("not a multiple of cluster.x"), std::string::npos);
  // Not in an HLSL plan.
  PlanRun h = evaluate(host, {}, Shape{{{"M", 256}, {"N", 512}, {"K", 1024}}}, hlsl());
  EXPECT_EQ(h.out.disposition, Disposition::compile_failed);
  EXPECT_NE(h.out.message.find("tensor maps are not part of a hlsl launch plan"), std::string::npos)
      << h.out.message;
}

TEST(PlanLanguage, RequireAndLimitsAreInvalidConfigurations) {
  PlanRun r = evaluate("require K % 8 == 0\nlaunch k\n  grid = (1)\n  block = (64)\n  args = ()\n",
                       {}, Shape{{{"M", 16}, {"N", 16}, {"K", 12}}});
  EXPECT_EQ(r.out.disposition, Disposition::invalid_config);
  EXPECT_EQ(r.out.message, "kernel.cu:8: requirement `K % 8 == 0` does not hold");
  PlanRun threads = evaluate("launch k\n  grid = (1)\n  block = (32, 64)\n  args = ()\n");
  EXPECT_EQ(threads.out.disposition, Disposition::invalid_config);
  EXPECT_NE(threads.out.message.find("2048 threads per block"), std::string::npos);
  PlanRun zero = evaluate("launch k\n  grid = (M - M)\n  block = (1)\n  args = ()\n");
  EXPECT_EQ(zero.out.disposition, Disposition::invalid_config);
  EXPECT_NE(zero.out.message.find("grid.x = 0"), std::string::npos) << zero.out.message;
}

TEST(PlanLanguage, MistakesNameTheLineAndSayWhatToDo) {
  struct Case {
    std::string host;
    std::string want;
  };
  const Case cases[] = {
      {"launch k\n  grid = (1)\n  block = (1)\n", "kernel.cu:8: launch `k` needs `args = (...)`"},
      {"launch k\n  block = (1)\n  args = ()\n",
       "kernel.cu:8: launch `k` needs `grid = (x, y, z)`"},
      {"grid = (1)\n", "kernel.cu:8: `grid` is an attribute: write it on the lines after"},
      {"scratch s\n  grid = (1)\n", "kernel.cu:9: `grid` is not an attribute of scratch `s`"},
      {"launch k\n  grid = (1)\n  grid = (2)\n", "kernel.cu:10: `grid` is given twice"},
      {"launch k k2\n", "kernel.cu:8: `launch` is followed by one name"},
      {"this is not a plan\n", "kernel.cu:8: expected `name = expression`"},
      {"launch k\n  grid = (1, 2, 3, 4)\n  block = (1)\n  args = ()\n",
       "kernel.cu:9: `grid` takes 1 to 3 value(s)"},
      {"launch k\n  grid = (ceil_div(N, NOPE))\n  block = (1)\n  args = ()\n",
       "kernel.cu:9: cannot evaluate `grid`"},
      {"M = 4\nlaunch k\n  grid = (1)\n  block = (1)\n  args = ()\n",
       "kernel.cu:8: `M` is already a scalar, tuning parameter or device fact"},
      {"memset Q\nlaunch k\n  grid = (1)\n  block = (1)\n  args = ()\n",
       "kernel.cu:8: memset `Q`: no array or scratch buffer of that name (buffers: A, B, C)"},
      {"x = 1\n", "the plan launches no kernel"},
      {"scratch s\n  count = 4\n", "kernel.cu:8: scratch `s` needs `dtype"},
  };
  for (const Case& c : cases) {
    PlanRun r = evaluate(c.host);
    std::string got = r.parse_error.empty() ? r.out.message : r.parse_error;
    EXPECT_EQ(r.out.disposition, Disposition::compile_failed) << c.host;
    EXPECT_NE(got.find(c.want), std::string::npos) << "plan:\n" << c.host << "got: " << got;
  }
}

TEST(PlanLanguage, HlslDialectRefusesWhatItCannotExpress) {
  PlanRun ok = evaluate("launch main\n  grid = (ceil_div(N, 16), ceil_div(M, 16))\n", {},
                        Shape{{{"M", 100}, {"N", 33}, {"K", 1}}}, hlsl());
  ASSERT_EQ(ok.out.disposition, Disposition::passed) << ok.out.message;
  EXPECT_EQ(ok.out.plan.steps[0].block, (std::array<int64_t, 3>{0, 0, 0}));
  EXPECT_EQ(ok.out.plan.steps[0].grid, (std::array<int64_t, 3>{3, 7, 1}));
  PlanRun args = evaluate("launch main\n  grid = (1)\n  args = (A)\n", {},
                          Shape{{{"M", 1}, {"N", 1}, {"K", 1}}}, hlsl());
  EXPECT_EQ(args.out.disposition, Disposition::compile_failed);
  EXPECT_NE(args.out.message.find("bound by the declared bindings"), std::string::npos);
  PlanRun none = evaluate("x = 1\n", {}, Shape{{{"M", 1}, {"N", 1}, {"K", 1}}}, hlsl());
  EXPECT_NE(none.out.message.find("launches no entry point"), std::string::npos);
}

TEST(PlanLanguage, JsonRoundTripAndStrictReading) {
  KernelContext ctx = matmul();
  ctx.workspace = "1 << 30";
  PlanRun r = evaluate(
      "scratch s\n  dtype = i32\n  count = 7\n  zero = 1\n"
      "tensor_map t\n  array = s\n  dims = (4)\n  box = (4)\n"
      "launch k\n  grid = (2)\n  block = (32)\n  cluster = (2)\n  shared = 100000\n"
      "  args = (A, s, t, -5)\n",
      {}, Shape{{{"M", 1}, {"N", 1}, {"K", 1}}}, cuda(), ctx);
  ASSERT_EQ(r.out.disposition, Disposition::passed) << r.out.message;
  nlohmann::json j = r.out.plan.to_json();
  auto back = LaunchPlan::from_json(j, 3);
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(*back, r.out.plan);

  nlohmann::json bad = j;
  bad["steps"][1]["args"][0]["index"] = 3;  // only 3 arrays
  EXPECT_FALSE(LaunchPlan::from_json(bad, 3));
  bad = j;
  bad["format"] = 99;
  auto newer = LaunchPlan::from_json(bad, 3);
  ASSERT_FALSE(newer);
  EXPECT_NE(newer.error().find("format 99"), std::string::npos);
  bad = j;
  bad["scratch"][0]["bytes"] = 1;  // does not match count * 4
  EXPECT_FALSE(LaunchPlan::from_json(bad, 3));
}

TEST(PlanLanguage, ReferenceTextFollowsTheDialect) {
  std::string c = plan_reference(cuda());
  EXPECT_NE(c.find("`block = (x, y, z)`"), std::string::npos);
  EXPECT_NE(c.find("`cluster = (x, y, z)`"), std::string::npos);
  EXPECT_NE(c.find("`tensor_map NAME`"), std::string::npos);
  std::string h = plan_reference(hlsl());
  EXPECT_EQ(h.find("`block = (x, y, z)`"), std::string::npos);
  EXPECT_EQ(h.find("tensor_map"), std::string::npos);
  EXPECT_NE(h.find("[numthreads(X, Y, Z)]"), std::string::npos);
  EXPECT_NE(h.find("bindings 0, 1, ..."), std::string::npos);
}

}  // namespace
}  // namespace peak
