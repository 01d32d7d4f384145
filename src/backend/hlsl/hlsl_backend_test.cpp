#include "backend/hlsl/hlsl_backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>

#include "backend/hlsl/spirv_reflect.h"
#include "context/inputs.h"
#include "runner/client.h"
#include "util/fs.h"
#include "util/host_files_testing.h"
#include "util/temp_dir_testing.h"

namespace peak {
namespace {

const fs::path kExample = fs::path(PEAK_SOURCE_DIR) / "examples" / "matmul-hlsl-fp32";
const fs::path kRunner = fs::path(PEAK_BINARY_DIR) / "peak-runner";

KernelContext example_context() {
  auto ctx = load_context(kExample);
  EXPECT_TRUE(ctx) << ctx.error();
  return ctx ? *ctx : KernelContext{};
}

std::string example_source() {
  auto s = read_file(kExample / "kernel.hlsl");
  EXPECT_TRUE(s) << s.error();
  return s ? *s : std::string();
}

// The example with its device region (and optionally its fixed preamble) replaced.
std::string with_device(const std::string& device, const std::string& preamble_from = "",
                        const std::string& preamble_to = "") {
  auto r = split_regions(example_source(), "kernel.hlsl");
  EXPECT_TRUE(r) << r.error();
  r->device = device;
  if (!preamble_from.empty()) r->before = replace_all(r->before, preamble_from, preamble_to);
  return join_regions(*r);
}

// 1-based line of the first line of `text` that contains `needle`.
int line_of(const std::string& text, const std::string& needle) {
  auto lines = split_lines(text);
  for (size_t i = 0; i < lines.size(); ++i)
    if (lines[i].find(needle) != std::string::npos) return static_cast<int>(i) + 1;
  ADD_FAILURE() << "no line contains " << needle;
  return 0;
}

DeviceFacts test_device() {
  DeviceFacts d;
  d.backend = "hlsl";
  d.name = "test device";
  d.max_threads_per_group = 1024;
  d.shared_memory_per_group = 32768;
  d.subgroup_size = 8;
  d.extra["max_workgroup_size"] = "1024 1024 64";
  d.extra["max_workgroup_count"] = "65535 65535 65535";
  return d;
}

Shape shape(int64_t m, int64_t n, int64_t k) { return Shape{{{"M", m}, {"N", n}, {"K", k}}}; }

class HlslBackendTest : public testing::TempDirTest {
 protected:
  HlslBackendTest() : TempDirTest("peak-hlsl-test") {}
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(TempDirTest::SetUp());
    ctx_ = example_context();
    backend_ = make_hlsl_backend();
  }
  BuildResult build(const std::string& source,
                    Config defines = {{"BLOCK_X", 16}, {"BLOCK_Y", 16}}) {
    BuildRequest req;
    req.context = &ctx_;
    req.source = source;
    req.defines = std::move(defines);
    req.device = test_device();
    req.cache_dir = dir_ / "cache";
    return backend_->build(req);
  }
  // Builds `source` with `config` and evaluates its launch plan for shape `s`.
  PlanResult plan(const std::string& source, const Shape& s, const Config& config) {
    auto r = split_regions(source, "kernel.hlsl");
    EXPECT_TRUE(r) << r.error();
    BuildResult b = build(source, config);
    EXPECT_EQ(b.disposition, Disposition::passed) << b.log;
    return backend_->plan(ctx_, *r, s, config, test_device(), b);
  }
  static std::string with_host(const std::string& source, const std::string& host) {
    auto r = split_regions(source, "kernel.hlsl");
    EXPECT_TRUE(r) << r.error();
    r->host = host;
    return join_regions(*r);
  }

  const fs::path& dir_ = temp_dir();
  KernelContext ctx_;
  std::unique_ptr<Backend> backend_;
};

// ---- Compilation ----

TEST_F(HlslBackendTest, CompilesTheExampleAndReflectsItsGroupSize) {
  BuildResult b = build(example_source());
  ASSERT_EQ(b.disposition, Disposition::passed) << b.log;
  EXPECT_FALSE(b.cached);
  EXPECT_TRUE(fs::exists(b.artifact));
  EXPECT_EQ(b.artifact.extension(), ".spv");
  const auto& k = b.resources["kernels"]["main"];
  EXPECT_EQ(k["local_size"], nlohmann::json({16, 16, 1}));
  EXPECT_EQ(k["threads"], 256);
  EXPECT_EQ(k["shared_bytes"], 0);
  EXPECT_EQ(k["module"], b.artifact.string());
  EXPECT_NE(b.toolchain.find("shaderc"), std::string::npos) << b.toolchain;
  EXPECT_NE(b.toolchain.find("glslang"), std::string::npos) << b.toolchain;
  EXPECT_NE(b.command.find("-DBLOCK_X=16"), std::string::npos) << b.command;

  BuildResult small = build(example_source(), {{"BLOCK_X", 8}, {"BLOCK_Y", 4}});
  ASSERT_EQ(small.disposition, Disposition::passed) << small.log;
  EXPECT_EQ(small.resources["kernels"]["main"]["local_size"], nlohmann::json({8, 4, 1}));
  EXPECT_NE(small.artifact, b.artifact);
}

TEST_F(HlslBackendTest, CompileErrorNamesTheFileAndLine) {
  std::string src = with_device(
      "[numthreads(BLOCK_X, BLOCK_Y, 1)]\n"
      "void main(uint3 tid : SV_DispatchThreadID) {\n"
      "  C[tid.x] = undefined_thing;\n"
      "}\n");
  BuildResult b = build(src);
  ASSERT_EQ(b.disposition, Disposition::compile_failed);
  int line = line_of(src, "undefined_thing");
  EXPECT_NE(b.log.find("kernel.hlsl:" + std::to_string(line) + ":"), std::string::npos) << b.log;
  EXPECT_NE(b.log.find("undefined_thing"), std::string::npos) << b.log;
  EXPECT_FALSE(fs::exists(b.artifact));
}

// shaderc compiles in peak's own process, with no includer: an #include, by any path, is an
// error that names the path and never shows the file (docs/sandbox.md).
TEST_F(HlslBackendTest, IncludesAreRefusedAndShowNothingOfTheFile) {
  const std::string secret = "sk-planted-hlsl-5e4d3c2b1a";
  ASSERT_TRUE(write_file(dir_ / "secret.hlsl", "static const float leaked = " + secret + ";\n"));
  ASSERT_TRUE(write_file(dir_ / "cache" / "neighbour.hlsl", secret + "\n"));
  for (const std::string& include :
       {"\"" + (dir_ / "secret.hlsl").string() + "\"", std::string("\"neighbour.hlsl\""),
        "<" + (dir_ / "secret.hlsl").string() + ">", std::string("\"/etc/passwd\""),
        std::string("</etc/group>"), std::string("\"../../../../../../../../etc/passwd\"")}) {
    std::string src = with_device("#include " + include +
                                  "\n[numthreads(BLOCK_X, BLOCK_Y, 1)]\n"
                                  "void main(uint3 tid : SV_DispatchThreadID) { C[tid.x] = 0; }\n");
    BuildResult b = build(src);
    EXPECT_EQ(b.disposition, Disposition::compile_failed) << include << ": " << b.log;
    EXPECT_EQ(b.log.find(secret), std::string::npos) << b.log;
    EXPECT_EQ(b.log.find("root:"), std::string::npos) << b.log;
    EXPECT_EQ(testing::host_line_in(b.log), "") << b.log;
    EXPECT_NE(b.log.find("#include"), std::string::npos) << include << ": " << b.log;
  }
  EXPECT_EQ(testing::host_line_under(dir_ / "cache"), "");
}

TEST_F(HlslBackendTest, ParseErrorNamesLineAndColumn) {
  std::string src = with_device(
      "[numthreads(BLOCK_X, BLOCK_Y, 1)]\n"
      "void main(uint3 tid : SV_DispatchThreadID) {\n"
      "  C[tid.x] = (1.0 + ;\n"
      "}\n");
  BuildResult b = build(src);
  ASSERT_EQ(b.disposition, Disposition::compile_failed);
  int line = line_of(src, "(1.0 + ;");
  EXPECT_NE(b.log.find("kernel.hlsl:" + std::to_string(line) + ":"), std::string::npos) << b.log;
  EXPECT_EQ(b.log.find("kernel.hlsl: kernel.hlsl("), std::string::npos) << b.log;
}

TEST_F(HlslBackendTest, HostRegionIsBlankedInTheCompileUnit) {
  std::string src = example_source();
  auto r = split_regions(src, "kernel.hlsl");
  ASSERT_TRUE(r) << r.error();
  std::string unit = hlsl::compile_unit(*r);
  EXPECT_EQ(unit.find("grid ="), std::string::npos);
  EXPECT_EQ(split_lines(unit).size(), split_lines(src).size());
  EXPECT_EQ(line_of(unit, "acc +="), line_of(src, "acc +="));
}

TEST_F(HlslBackendTest, AnEntryPointThePlanLaunchesButTheSourceLacksFails) {
  BuildResult b = build(with_host(example_source(), "launch nope\n  grid = (1)\n"));
  EXPECT_EQ(b.disposition, Disposition::compile_failed);
  EXPECT_NE(b.log.find("entry point `nope` not found (the launch plan launches it)"),
            std::string::npos)
      << b.log;
}

TEST_F(HlslBackendTest, APlanThatDoesNotParseFailsTheBuildWithItsLine) {
  const std::string src = with_host(example_source(), "launch main\n  grid = (1)\nbogus line\n");
  BuildResult b = build(src);
  EXPECT_EQ(b.disposition, Disposition::compile_failed);
  EXPECT_NE(b.log.find("kernel.hlsl:" + std::to_string(line_of(src, "bogus line")) + ":"),
            std::string::npos)
      << b.log;
}

TEST_F(HlslBackendTest, EveryLaunchedEntryPointIsBuiltAsItsOwnModule) {
  std::string src = with_device(
      "[numthreads(64, 1, 1)]\n"
      "void zero_c(uint3 t : SV_DispatchThreadID) { if ((int)t.x < M * N) C[t.x] = 0.0f; }\n"
      "[numthreads(BLOCK_X, BLOCK_Y, 1)]\n"
      "void main(uint3 tid : SV_DispatchThreadID) {\n"
      "  if ((int)tid.y < M && (int)tid.x < N) C[tid.y * N + tid.x] += 1.0f;\n"
      "}\n");
  src = with_host(src,
                  "launch zero_c\n  grid = (ceil_div(M * N, 64))\n"
                  "launch main\n  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y))\n");
  BuildResult b = build(src);
  ASSERT_EQ(b.disposition, Disposition::passed) << b.log;
  const auto& ks = b.resources["kernels"];
  ASSERT_TRUE(ks.contains("zero_c") && ks.contains("main")) << ks.dump();
  EXPECT_EQ(ks["zero_c"]["local_size"], nlohmann::json({64, 1, 1}));
  EXPECT_NE(ks["zero_c"]["module"], ks["main"]["module"]);
  PlanResult p = plan(src, shape(10, 20, 3), {{"BLOCK_X", 16}, {"BLOCK_Y", 16}});
  ASSERT_EQ(p.disposition, Disposition::passed) << p.message;
  auto lp = LaunchPlan::from_json(p.plan, ctx_.arrays.size());
  ASSERT_TRUE(lp) << lp.error();
  ASSERT_EQ(lp->steps.size(), 2u);
  EXPECT_EQ(lp->steps[0].symbol, "zero_c");
  EXPECT_EQ(lp->steps[0].module, ks["zero_c"]["module"].get<std::string>());
  EXPECT_EQ(lp->steps[0].grid, (std::array<int64_t, 3>{4, 1, 1}));
  EXPECT_EQ(lp->steps[1].grid, (std::array<int64_t, 3>{2, 1, 1}));
}

TEST_F(HlslBackendTest, SecondBuildIsACacheHit) {
  BuildResult first = build(example_source());
  ASSERT_EQ(first.disposition, Disposition::passed) << first.log;
  BuildResult second = build(example_source());
  ASSERT_EQ(second.disposition, Disposition::passed) << second.log;
  EXPECT_TRUE(second.cached);
  EXPECT_EQ(second.artifact, first.artifact);
  EXPECT_EQ(second.resources, first.resources);

  // Another define or another source is another artifact.
  EXPECT_FALSE(build(example_source(), {{"BLOCK_X", 32}, {"BLOCK_Y", 8}}).cached);
  EXPECT_FALSE(build(example_source() + "\n// changed\n").cached);

  // A damaged cache entry is rebuilt, not trusted.
  ASSERT_TRUE(write_file(first.artifact, "garbage!"));
  BuildResult third = build(example_source());
  ASSERT_EQ(third.disposition, Disposition::passed) << third.log;
  EXPECT_FALSE(third.cached);
  auto bytes = read_file(third.artifact);
  ASSERT_TRUE(bytes);
  EXPECT_TRUE(spirv::words_from_bytes(*bytes));
}

TEST_F(HlslBackendTest, BuildsInParallel) {
  const std::string src = example_source();
  std::vector<BuildResult> results(6);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < results.size(); ++i)
    threads.emplace_back([&, i] {
      int64_t bx = int64_t{8} << (i % 3), by = int64_t{4} << (i / 3);
      results[i] = build(src, {{"BLOCK_X", bx}, {"BLOCK_Y", by}});
    });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_EQ(results[i].disposition, Disposition::passed) << results[i].log;
    int64_t bx = int64_t{8} << (i % 3), by = int64_t{4} << (i / 3);
    EXPECT_EQ(results[i].resources["kernels"]["main"]["local_size"], nlohmann::json({bx, by, 1}));
  }
}

TEST_F(HlslBackendTest, ReflectsLocalSizeAndSharedMemory) {
  std::string src = with_device(
      "groupshared float tile[16][17];\n"
      "groupshared float4 vecs[3];\n"
      "groupshared uint nested[2][3][5];\n"
      "[numthreads(8, 4, 2)]\n"
      "void main(uint3 t : SV_DispatchThreadID, uint3 l : SV_GroupThreadID) {\n"
      "  tile[l.y][l.x] = A[t.x];\n"
      "  vecs[l.z] = float4(1, 2, 3, 4);\n"
      "  nested[l.z][l.y % 3][l.x % 5] = 7;\n"
      "  GroupMemoryBarrierWithGroupSync();\n"
      "  C[t.x] = tile[l.x][l.y] + vecs[l.y % 3].x + nested[1][2][l.x % 5];\n"
      "}\n");
  BuildResult b = build(src);
  ASSERT_EQ(b.disposition, Disposition::passed) << b.log;
  const auto& k = b.resources["kernels"]["main"];
  EXPECT_EQ(k["local_size"], nlohmann::json({8, 4, 2}));
  EXPECT_EQ(k["threads"], 64);
  EXPECT_EQ(k["shared_bytes"], 16 * 17 * 4 + 3 * 16 + 2 * 3 * 5 * 4);
  EXPECT_EQ(b.resources["max_shared_bytes"], 16 * 17 * 4 + 3 * 16 + 2 * 3 * 5 * 4);
}

TEST_F(HlslBackendTest, CheckResourcesAgainstDeviceLimits) {
  DeviceFacts dev = test_device();
  BuildResult b;
  b.disposition = Disposition::passed;
  auto kernel = [](nlohmann::json k) { return nlohmann::json{{"kernels", {{"main", k}}}}; };
  b.resources = kernel({{"local_size", {16, 16, 1}}, {"threads", 256}, {"shared_bytes", 16384}});
  EXPECT_EQ(backend_->check_resources(b, dev).disposition, Disposition::passed);

  b.resources["kernels"]["main"]["shared_bytes"] = 40000;
  PlanResult p = backend_->check_resources(b, dev);
  EXPECT_EQ(p.disposition, Disposition::invalid_config);
  EXPECT_NE(p.message.find("maxComputeSharedMemorySize"), std::string::npos) << p.message;
  EXPECT_NE(p.message.find("32768"), std::string::npos) << p.message;

  BuildResult big =
      build(with_device("[numthreads(32, 32, 2)]\n"
                        "void main(uint3 t : SV_DispatchThreadID) { C[t.x] = 1.0f; }\n"));
  ASSERT_EQ(big.disposition, Disposition::passed) << big.log;
  p = backend_->check_resources(big, dev);
  EXPECT_EQ(p.disposition, Disposition::invalid_config);
  EXPECT_NE(p.message.find("2048 threads"), std::string::npos) << p.message;
  EXPECT_NE(p.message.find("maxComputeWorkGroupInvocations"), std::string::npos) << p.message;

  b.resources = kernel({{"local_size", {1, 1, 128}}, {"threads", 128}, {"shared_bytes", 0}});
  p = backend_->check_resources(b, dev);
  EXPECT_EQ(p.disposition, Disposition::invalid_config);
  EXPECT_NE(p.message.find("numthreads z = 128"), std::string::npos) << p.message;
}

// ---- Launch plans (the language itself: src/plan/plan_language_test.cpp) ----

TEST_F(HlslBackendTest, PlanEvaluatesTheHostRegion) {
  PlanResult p = plan(example_source(), shape(100, 70, 5), {{"BLOCK_X", 16}, {"BLOCK_Y", 8}});
  ASSERT_EQ(p.disposition, Disposition::passed) << p.message;
  auto lp = LaunchPlan::from_json(p.plan, ctx_.arrays.size());
  ASSERT_TRUE(lp) << lp.error();
  ASSERT_EQ(lp->steps.size(), 1u);
  EXPECT_EQ(lp->steps[0].grid, (std::array<int64_t, 3>{5, 13, 1}));
  EXPECT_EQ(lp->steps[0].symbol, "main");
}

TEST_F(HlslBackendTest, PlanReadsMacrosAndDeviceLimits) {
  std::string src = example_source();
  auto r = split_regions(src, "kernel.hlsl");
  ASSERT_TRUE(r);
  r->macros =
      "#define ROWS (TILE / 4)  // uses a macro defined below\n"
      "#define TILE (BLOCK_X * 2)\n"
      "#define OFFSET 0x10u\n";
  r->host =
      "items = M * N  // elements of C\n"
      "require BLOCK_X * BLOCK_Y <= max_threads && subgroup_size == 8\n"
      "require shared_memory == 32768\n"
      "launch main\n"
      "  grid = (ceil_div(N, TILE), ceil_div(M, ROWS) + OFFSET - 16, items / items)\n";
  PlanResult p = plan(join_regions(*r), shape(64, 100, 8), {{"BLOCK_X", 16}, {"BLOCK_Y", 4}});
  ASSERT_EQ(p.disposition, Disposition::passed) << p.message;
  auto lp = LaunchPlan::from_json(p.plan, ctx_.arrays.size());
  ASSERT_TRUE(lp) << lp.error();
  // TILE = 32, ROWS = 8: x = ceil(100 / 32) = 4, y = 64 / 8 = 8.
  EXPECT_EQ(lp->steps[0].grid, (std::array<int64_t, 3>{4, 8, 1}));
}

TEST_F(HlslBackendTest, PlanRequirementThatFailsIsInvalidConfig) {
  std::string src = example_source();
  auto r = split_regions(src, "kernel.hlsl");
  ASSERT_TRUE(r);
  r->host = "require K % BLOCK_X == 0\n" + r->host;
  src = join_regions(*r);
  Config c{{"BLOCK_X", 16}, {"BLOCK_Y", 16}};
  EXPECT_EQ(plan(src, shape(64, 64, 32), c).disposition, Disposition::passed);
  PlanResult p = plan(src, shape(64, 64, 33), c);
  EXPECT_EQ(p.disposition, Disposition::invalid_config);
  EXPECT_NE(p.message.find("requirement `K % BLOCK_X == 0` does not hold"), std::string::npos)
      << p.message;
}

TEST_F(HlslBackendTest, PlanRefusesWhatVulkanCannotExpress) {
  Config c{{"BLOCK_X", 8}, {"BLOCK_Y", 8}};
  // Too many groups for the device.
  PlanResult p = plan(example_source(), shape(8, 8 * 70000, 1), c);
  EXPECT_EQ(p.disposition, Disposition::invalid_config);
  EXPECT_NE(p.message.find("grid.x = 70000"), std::string::npos) << p.message;
  // block, args, shared memory, clusters and tensor maps are not part of an HLSL plan.
  for (const std::string attr : {"  block = (8, 8)\n", "  args = (A, B, C)\n", "  shared = 1024\n",
                                 "  cluster = (2, 1, 1)\n"}) {
    std::string src = with_host(example_source(), "launch main\n  grid = (1, 1)\n" + attr);
    auto r = split_regions(src, "kernel.hlsl");
    BuildResult b = build(src, c);
    ASSERT_EQ(b.disposition, Disposition::passed) << b.log;
    p = backend_->plan(ctx_, *r, shape(8, 8, 8), c, test_device(), b);
    EXPECT_EQ(p.disposition, Disposition::compile_failed) << attr;
    EXPECT_NE(p.message.find("is not part of a hlsl launch plan"), std::string::npos) << p.message;
  }
}

TEST_F(HlslBackendTest, DescribesItself) {
  EXPECT_EQ(backend_->name(), "hlsl");
  EXPECT_EQ(backend_->source_extension(), ".hlsl");
  auto t = backend_->translation_table();
  EXPECT_EQ(t.at("thread index within the block"), "SV_GroupThreadID");
  EXPECT_EQ(t.at("block index"), "SV_GroupID");
  EXPECT_EQ(t.at("global thread index"), "SV_DispatchThreadID");
  EXPECT_EQ(t.at("shared memory"), "groupshared");
  EXPECT_EQ(t.at("barrier"), "GroupMemoryBarrierWithGroupSync()");
  EXPECT_GE(t.size(), 10u);
  EXPECT_EQ(backend_->baseline(ctx_, test_device()), "");
  bool has_glslang = false;
  for (const auto& [k, v] : backend_->toolchain()) has_glslang = has_glslang || k == "glslang";
  EXPECT_TRUE(has_glslang);
}

TEST(SpirvReflect, RejectsWhatIsNotAModule) {
  EXPECT_FALSE(spirv::words_from_bytes("short"));
  EXPECT_FALSE(spirv::words_from_bytes(std::string(24, 'x')));
  std::vector<uint32_t> words = {0x07230203, 0x00010300, 0, 10, 0, (5u << 16) | 15u};
  auto r = spirv::reflect(words);  // an OpEntryPoint claiming 5 words with only 1 present
  EXPECT_FALSE(r);
}

// ---- Through the real runner (lavapipe in CI) ----

class HlslRunnerTest : public HlslBackendTest {
 protected:
  void SetUp() override {
    HlslBackendTest::SetUp();
    if (!fs::exists(kRunner)) GTEST_SKIP() << "no runner at " << kRunner;
  }
  RunnerJob job() const {
    RunnerJob j;
    j.family = ctx_.family;
    j.arrays = ctx_.arrays;
    j.scalars = ctx_.scalars;
    return j;
  }
  // A checked task for `source` (default tuning) on one shape.
  RunnerTask task(const std::string& id, const std::string& source, const Shape& s) {
    BuildResult b = build(source);
    EXPECT_EQ(b.disposition, Disposition::passed) << b.log;
    PlanResult p = plan(source, s, {{"BLOCK_X", 16}, {"BLOCK_Y", 16}});
    EXPECT_EQ(p.disposition, Disposition::passed) << p.message;
    EXPECT_EQ(p.disposition, Disposition::passed) << p.message;
    RunnerTask t;
    t.id = id;
    t.artifact = b.artifact.string();
    t.plan = p.plan;
    t.shape = s;
    auto sizes = array_sizes(ctx_, s);
    EXPECT_TRUE(sizes) << sizes.error();
    if (sizes) t.sizes = *sizes;
    t.seed = 7;
    t.output_dir = (dir_ / "out").string();
    fs::create_directories(t.output_dir);
    return t;
  }
  std::vector<TaskResult> run(const RunnerJob& j, std::map<std::string, std::string> env = {},
                              double task_timeout_s = 30) {
    RunnerOptions opts;
    opts.executable = kRunner;
    opts.env = std::move(env);
    opts.task_timeout_s = task_timeout_s;
    auto r = run_job(j, opts);
    EXPECT_TRUE(r) << r.error();
    return r ? *r : std::vector<TaskResult>{};
  }
  static std::vector<float> read_floats(const std::string& path) {
    auto bytes = read_file(path);
    EXPECT_TRUE(bytes) << bytes.error();
    std::vector<float> v(bytes ? bytes->size() / 4 : 0);
    if (!v.empty()) std::memcpy(v.data(), bytes->data(), v.size() * 4);
    return v;
  }
  // max |got - ref| / max(|ref|, 1) against a float64 CPU product of the task's inputs.
  double max_rel_error(const RunnerTask& t, const std::vector<float>& c) {
    const int64_t m = t.shape.values.at("M"), n = t.shape.values.at("N"),
                  k = t.shape.values.at("K");
    // The inputs as the runner draws them (runner/execute.cpp, validate/validate.cpp).
    auto bytes_a = generate_array(ctx_.arrays[0], m * k, array_seed(t.seed, "A"), t.variant);
    auto bytes_b = generate_array(ctx_.arrays[1], k * n, array_seed(t.seed, "B"), t.variant);
    std::vector<float> a(m * k), b(k * n);
    std::memcpy(a.data(), bytes_a.data(), a.size() * 4);
    std::memcpy(b.data(), bytes_b.data(), b.size() * 4);
    EXPECT_EQ(c.size(), static_cast<size_t>(m * n));
    double worst = 0;
    for (int64_t i = 0; i < m && c.size() == static_cast<size_t>(m * n); ++i)
      for (int64_t j = 0; j < n; ++j) {
        double ref = 0;
        for (int64_t p = 0; p < k; ++p) ref += double(a[i * k + p]) * double(b[p * n + j]);
        double err = std::abs(double(c[i * n + j]) - ref) / std::max(std::abs(ref), 1.0);
        if (!(err <= worst)) worst = std::isnan(err) ? INFINITY : err;
      }
    return worst;
  }
};

TEST_F(HlslRunnerTest, ProbeFindsLavapipeAndMeasuresFma) {
  auto facts = backend_->probe("llvmpipe", true);
  ASSERT_TRUE(facts) << facts.error();
  EXPECT_EQ(facts->backend, "hlsl");
  EXPECT_NE(facts->name.find("llvmpipe"), std::string::npos) << facts->name;
  EXPECT_TRUE(facts->is_cpu);
  EXPECT_GE(facts->max_threads_per_group, 128);
  EXPECT_GT(facts->shared_memory_per_group, 0);
  EXPECT_GT(facts->subgroup_size, 0);
  EXPECT_GT(facts->memory_bytes, 0);
  EXPECT_EQ(facts->extra["l2"], "unknown");
  EXPECT_GT(facts->measured_fp32_tflops, 0.0);

  auto none = backend_->probe("no-such-device-xyz", false);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().find("llvmpipe"), std::string::npos) << none.error();  // lists devices
}

TEST_F(HlslRunnerTest, SeedMatmulMatchesAFloat64Reference) {
  RunnerJob j = job();
  j.tasks.push_back(task("square", example_source(), shape(64, 64, 64)));
  j.tasks.push_back(task("ragged", example_source(), shape(67, 129, 33)));
  j.tasks[1].timing = TimingPolicy{1, 3, 3, 2.0, 0.5, true};
  auto results = run(j);
  ASSERT_EQ(results.size(), 2u);
  for (size_t i = 0; i < results.size(); ++i) {
    const TaskResult& r = results[i];
    ASSERT_EQ(r.disposition, Disposition::passed) << r.id << ": " << r.message;
    EXPECT_FALSE(r.nondeterministic);
    ASSERT_TRUE(r.outputs.count("C"));
    EXPECT_LT(max_rel_error(j.tasks[i], read_floats(r.outputs.at("C"))), 1e-4) << r.id;
  }
  ASSERT_EQ(results[1].samples_ms.size(), 3u);
  for (double ms : results[1].samples_ms) EXPECT_GT(ms, 0.0);
  EXPECT_EQ(results[1].host_ms.size(), 3u);

  // The same through staging buffers (the path of discrete GPUs).
  j.tasks.resize(1);
  j.tasks[0].id = "staged";
  results = run(j, {{"PEAK_RUNNER_VK_STAGING", "1"}});
  ASSERT_EQ(results.size(), 1u);
  ASSERT_EQ(results[0].disposition, Disposition::passed) << results[0].message;
  EXPECT_LT(max_rel_error(j.tasks[0], read_floats(results[0].outputs.at("C"))), 1e-4);
}

// A held job (start_before_lock): the runner starts its device, says so, and runs its tasks once
// the parent holds the device lock and says go; its start-up is tallied, and the lock is free
// again when run_job returns.
TEST_F(HlslRunnerTest, AHeldJobRunsOnceTheLockIsHeld) {
  auto locks = make_temp_dir("peak-held-locks-");
  ASSERT_TRUE(locks) << locks.error();
  ::setenv("PEAK_LOCK_DIR", locks->c_str(), 1);
  RunnerJob j = job();
  j.tasks.push_back(task("held", example_source(), shape(64, 64, 64)));
  RunnerOptions opts;
  opts.executable = kRunner;
  opts.task_timeout_s = 30;
  opts.device_lock = std::make_shared<DeviceLock>("held-runner", "lavapipe");
  opts.start_before_lock = true;
  opts.tally = std::make_shared<RunnerTally>();
  auto r = run_job(j, opts);
  ::unsetenv("PEAK_LOCK_DIR");
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 1u);
  ASSERT_EQ((*r)[0].disposition, Disposition::passed) << (*r)[0].message;
  EXPECT_LT(max_rel_error(j.tasks[0], read_floats((*r)[0].outputs.at("C"))), 1e-4);
  EXPECT_EQ(opts.tally->starts.load(), 1);
  EXPECT_TRUE(opts.tally->startup_steps.count("job"));  // the runner's "started" event
  EXPECT_EQ(opts.device_lock->stats().acquisitions, 1);
  fs::remove_all(*locks);
}

// The same-traffic copy (RunnerTask::copy_bytes): vkCmdCopyBuffer and the runner's vector copy
// shader, each checked on a poisoned destination (a method whose bytes do not all arrive is left
// out with a note in the message), the faster timed beside the candidate, sample for sample; none
// when the task asks for none.
TEST_F(HlslRunnerTest, TheSameTrafficCopyIsTimedBesideTheKernel) {
  RunnerJob j = job();
  j.tasks.push_back(task("copied", example_source(), shape(64, 64, 64)));
  j.tasks[0].timing = TimingPolicy{1, 3, 3, 2.0, 0.5, true};
  j.tasks[0].copy_bytes = 4 * 3 * 64 * 64;  // A and B read, C written
  j.tasks.push_back(j.tasks[0]);
  j.tasks[1].id = "uncopied";
  j.tasks[1].copy_bytes = 0;
  auto results = run(j);
  ASSERT_EQ(results.size(), 2u);
  for (const TaskResult& r : results) {
    ASSERT_EQ(r.disposition, Disposition::passed) << r.id << ": " << r.message;
    EXPECT_EQ(r.samples_ms.size(), 3u) << r.id;
  }
  EXPECT_TRUE(results[0].message.empty()) << results[0].message;  // nothing left out
  EXPECT_TRUE(results[0].copy_method == "vulkan-copy" || results[0].copy_method == "vector-shader")
      << results[0].copy_method;
  ASSERT_EQ(results[0].copy_samples_ms.size(), 3u) << results[0].message;
  for (double ms : results[0].copy_samples_ms) EXPECT_GT(ms, 0.0);
  EXPECT_TRUE(results[1].copy_samples_ms.empty());
  EXPECT_TRUE(results[1].copy_method.empty());

  // Between buffers the host cannot map (the path of discrete GPUs): every byte still arrives.
  j.tasks.resize(1);
  results = run(j, {{"PEAK_RUNNER_VK_STAGING", "1"}});
  ASSERT_EQ(results.size(), 1u);
  ASSERT_EQ(results[0].disposition, Disposition::passed) << results[0].message;
  EXPECT_TRUE(results[0].message.empty()) << results[0].message;
  EXPECT_EQ(results[0].copy_samples_ms.size(), 3u);
}

TEST_F(HlslRunnerTest, TwoLaunchesThroughAScratchBufferAndAMemset) {
  std::string src = with_device(
      "[[vk::binding(4, 0)]] RWStructuredBuffer<float> S;  // the plan's scratch buffer\n"
      "[numthreads(BLOCK_X, BLOCK_Y, 1)]\n"
      "void main(uint3 tid : SV_DispatchThreadID) {\n"
      "  int col = (int)tid.x, row = (int)tid.y;\n"
      "  if (row >= M || col >= N) return;\n"
      "  float acc = 0.0f;\n"
      "  for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];\n"
      "  S[row * N + col] += acc;  // the memset before this launch zeroed S\n"
      "}\n"
      "[numthreads(64, 1, 1)]\n"
      "void copy_out(uint3 t : SV_DispatchThreadID) {\n"
      "  if ((int)t.x < M * N) C[t.x] = S[t.x];\n"
      "}\n");
  src = with_host(src,
                  "scratch S\n  dtype = f32\n  count = M * N\n"
                  "memset S\n"
                  "launch main\n  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y))\n"
                  "launch copy_out\n  grid = (ceil_div(M * N, 64))\n");
  // Without a workspace the scratch buffer is refused before anything runs.
  PlanResult refused = plan(src, shape(33, 17, 9), {{"BLOCK_X", 16}, {"BLOCK_Y", 16}});
  EXPECT_EQ(refused.disposition, Disposition::workspace_exceeded) << refused.message;
  ctx_.workspace = "4 * M * N";
  RunnerJob j = job();
  j.tasks.push_back(task("two-launches", src, shape(33, 17, 9)));
  auto results = run(j);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_EQ(results[0].disposition, Disposition::passed) << results[0].message;
  EXPECT_FALSE(results[0].nondeterministic);
  EXPECT_LT(max_rel_error(j.tasks[0], read_floats(results[0].outputs.at("C"))), 1e-4);
}

TEST_F(HlslRunnerTest, HangIsATimeoutAndTheNextTaskRunsInAFreshRunner) {
  std::string hang = with_device(
      "[numthreads(BLOCK_X, BLOCK_Y, 1)]\n"
      "void main(uint3 tid : SV_DispatchThreadID) {\n"
      "  // The inputs lie in [-1, 1): the condition always holds.\n"
      "  [loop] for (uint i = 0; A[i % 4] < 2.0f; ++i) C[tid.x % 4] = (float)i;\n"
      "}\n");
  RunnerJob j = job();
  j.tasks.push_back(task("hang", hang, shape(16, 16, 16)));
  // lavapipe stops any loop after 65535 iterations; 65535 groups of them still take minutes.
  j.tasks.back().plan["steps"][0]["grid"] = {65535, 1, 1};
  j.tasks.push_back(task("good", example_source(), shape(64, 64, 64)));
  auto results = run(j, {{"PEAK_RUNNER_FENCE_TIMEOUT_S", "2"}}, 10);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].disposition, Disposition::timeout) << results[0].message;
  ASSERT_EQ(results[1].disposition, Disposition::passed) << results[1].message;
  EXPECT_LT(max_rel_error(j.tasks[1], read_floats(results[1].outputs.at("C"))), 1e-4);
}

TEST_F(HlslRunnerTest, WritePastTheEndIsOutOfBounds) {
  std::string oob = with_device(
      "[numthreads(BLOCK_X, BLOCK_Y, 1)]\n"
      "void main(uint3 tid : SV_DispatchThreadID) {\n"
      "  int col = (int)tid.x, row = (int)tid.y;\n"
      "  if (row >= M || col >= N) return;\n"
      "  C[row * N + col] = 1.0f;\n"
      "  if (row == 0 && col == 0) C[M * N + 3] = 2.0f;\n"
      "}\n");
  RunnerJob j = job();
  j.tasks.push_back(task("oob", oob, shape(32, 32, 8)));
  auto results = run(j);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].disposition, Disposition::out_of_bounds) << results[0].message;
  EXPECT_TRUE(results[0].guard_overwritten);
}

TEST_F(HlslRunnerTest, UnwrittenHalfKeepsThePoison) {
  std::string half = with_device(
      "[numthreads(BLOCK_X, BLOCK_Y, 1)]\n"
      "void main(uint3 tid : SV_DispatchThreadID) {\n"
      "  int col = (int)tid.x, row = (int)tid.y;\n"
      "  if (row >= M / 2 || col >= N) return;\n"
      "  C[row * N + col] = 1.0f;\n"
      "}\n");
  RunnerJob j = job();
  j.tasks.push_back(task("half", half, shape(32, 16, 8)));
  auto results = run(j);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_TRUE(results[0].outputs.count("C")) << results[0].message;
  auto bytes = read_file(results[0].outputs.at("C"));
  ASSERT_TRUE(bytes);
  ASSERT_EQ(bytes->size(), 32u * 16u * 4u);
  const auto* p = reinterpret_cast<const uint8_t*>(bytes->data());
  for (size_t i = 0; i < 32 * 16; ++i) {
    bool poison = is_poison(DType::f32, p + 4 * i);
    ASSERT_EQ(poison, i >= 16 * 16) << "element " << i;
  }
}

TEST_F(HlslRunnerTest, WriteIntoAnInputIsInputsModified) {
  std::string writes_a = with_device(
      "[numthreads(BLOCK_X, BLOCK_Y, 1)]\n"
      "void main(uint3 tid : SV_DispatchThreadID) {\n"
      "  int col = (int)tid.x, row = (int)tid.y;\n"
      "  if (row >= M || col >= N) return;\n"
      "  C[row * N + col] = 0.0f;\n"
      "  if (row == 0 && col == 0) A[0] = 42.0f;\n"
      "}\n",
      "StructuredBuffer<float> A;", "RWStructuredBuffer<float> A;");
  RunnerJob j = job();
  j.tasks.push_back(task("writes-a", writes_a, shape(16, 16, 16)));
  auto results = run(j);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].disposition, Disposition::inputs_modified) << results[0].message;
}

}  // namespace
}  // namespace peak
