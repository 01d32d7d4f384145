#include "backend/hip/hip_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "backend/cuda/corpus_testing.h"
#include "runner/device_testing.h"
#include "transform/transformation.h"
#include "util/fs.h"
#include "util/host_files_testing.h"
#include "util/process.h"
#include "util/sandbox.h"
#include "util/temp_dir_testing.h"

namespace peak {
namespace {

using namespace hip;
using testing::CorpusCase;

const fs::path kSource = PEAK_SOURCE_DIR;
const fs::path kHipCorpus = kSource / "tests" / "integrity" / "hip";

auto* const g_cache = testing::ProcessTempDir::add("peak-hip-test-");
const fs::path& cache_dir() { return g_cache->path(); }

bool contains(const std::string& s, std::string_view what) {
  return s.find(what) != std::string::npos;
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

bool have_hipcc() { return !find_hipcc().empty(); }
bool have_nvcc() { return !cuda::find_nvcc().empty(); }

#define REQUIRE_HIPCC()                                                            \
  do {                                                                             \
    if (!have_hipcc()) {                                                           \
      GTEST_SKIP() << "hipcc not found (PEAK_HIPCC, ROCM_PATH, /opt/rocm, PATH): " \
                      "scripts/setup-debian.sh installs Debian's hipcc";           \
    }                                                                              \
  } while (0)

KernelContext load(const std::string& example) {
  auto c = load_context(kSource / "examples" / example);
  EXPECT_TRUE(c) << c.error();
  return c ? *c : KernelContext{};
}

const KernelContext& hip_corpus_context() {
  static KernelContext ctx = [] {
    KernelContext c = load("matmul-hip-fp32");
    c.workspace = testing::kCorpusWorkspace;
    return c;
  }();
  return ctx;
}

DeviceFacts h100() { return testing::h100_facts("hip"); }

BuildResult build(Backend& b, const KernelContext& ctx, const std::string& source,
                  const Config& defines) {
  BuildRequest req;
  req.context = &ctx;
  req.source = source;
  req.defines = defines;
  req.device.arch = "sm_90a";
  req.cache_dir = cache_dir();
  return b.build(req);
}

std::string example_source(const KernelContext& ctx) {
  auto t = read_file(ctx.dir / ctx.source_file);
  EXPECT_TRUE(t) << t.error();
  return t ? *t : std::string();
}

// ---- The AMD resource report: clang's kernel-resource-usage remarks, as hipcc 5.2 prints them
// ----

// hipcc --cuda-device-only --offload-arch=gfx90a -Rpass-analysis=kernel-resource-usage, on a
// file with an extern "C" kernel using 1 KiB of LDS and a C++ kernel.
constexpr const char* kGfx90aRemarks =
    "k.hip:3:1: remark: Function Name: mm [-Rpass-analysis=kernel-resource-usage]\n"
    "extern \"C\" __global__ void mm(const float* A, float* C, int n) {\n"
    "^\n"
    "k.hip:3:1: remark:     SGPRs: 18 [-Rpass-analysis=kernel-resource-usage]\n"
    "k.hip:3:1: remark:     VGPRs: 11 [-Rpass-analysis=kernel-resource-usage]\n"
    "k.hip:3:1: remark:     AGPRs: 0 [-Rpass-analysis=kernel-resource-usage]\n"
    "k.hip:3:1: remark:     ScratchSize [bytes/lane]: 0 [-Rpass-analysis=kernel-resource-usage]\n"
    "k.hip:3:1: remark:     Occupancy [waves/SIMD]: 8 [-Rpass-analysis=kernel-resource-usage]\n"
    "k.hip:3:1: remark:     SGPRs Spill: 0 [-Rpass-analysis=kernel-resource-usage]\n"
    "k.hip:3:1: remark:     VGPRs Spill: 0 [-Rpass-analysis=kernel-resource-usage]\n"
    "k.hip:3:1: remark:     LDS Size [bytes/block]: 1024 [-Rpass-analysis=kernel-resource-usage]\n"
    "k.hip:9:1: remark: Function Name: _Z3mm2Pf [-Rpass-analysis=kernel-resource-usage]\n"
    "__global__ void mm2(float* C) { C[threadIdx.x] = 0; }\n"
    "^\n"
    "k.hip:9:1: remark:     SGPRs: 6 [-Rpass-analysis=kernel-resource-usage]\n"
    "k.hip:9:1: remark:     VGPRs: 2 [-Rpass-analysis=kernel-resource-usage]\n"
    "k.hip:9:1: remark:     AGPRs: 0 [-Rpass-analysis=kernel-resource-usage]\n"
    "k.hip:9:1: remark:     ScratchSize [bytes/lane]: 0 [-Rpass-analysis=kernel-resource-usage]\n"
    "k.hip:9:1: remark:     Occupancy [waves/SIMD]: 8 [-Rpass-analysis=kernel-resource-usage]\n"
    "k.hip:9:1: remark:     SGPRs Spill: 0 [-Rpass-analysis=kernel-resource-usage]\n"
    "k.hip:9:1: remark:     VGPRs Spill: 0 [-Rpass-analysis=kernel-resource-usage]\n"
    "k.hip:9:1: remark:     LDS Size [bytes/block]: 0 [-Rpass-analysis=kernel-resource-usage]\n";

// The same for gfx1030 (no AGPRs), with a kernel whose dynamically indexed local array lives in
// scratch memory, followed by a warning that is not part of the report.
constexpr const char* kGfx1030Scratch =
    "sp.hip:2:1: remark: Function Name: _Z6matmulPKfS0_Pfiii "
    "[-Rpass-analysis=kernel-resource-usage]\n"
    "__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {\n"
    "^\n"
    "sp.hip:2:1: remark:     SGPRs: 14 [-Rpass-analysis=kernel-resource-usage]\n"
    "sp.hip:2:1: remark:     VGPRs: 6 [-Rpass-analysis=kernel-resource-usage]\n"
    "sp.hip:2:1: remark:     ScratchSize [bytes/lane]: 272 "
    "[-Rpass-analysis=kernel-resource-usage]\n"
    "sp.hip:2:1: remark:     Occupancy [waves/SIMD]: 16 [-Rpass-analysis=kernel-resource-usage]\n"
    "sp.hip:2:1: remark:     SGPRs Spill: 0 [-Rpass-analysis=kernel-resource-usage]\n"
    "sp.hip:2:1: remark:     VGPRs Spill: 0 [-Rpass-analysis=kernel-resource-usage]\n"
    "sp.hip:2:1: remark:     LDS Size [bytes/block]: 0 [-Rpass-analysis=kernel-resource-usage]\n"
    "sp.hip:5:3: warning: loop not unrolled [-Wpass-failed=transform-warning]\n";

TEST(HipResources, ParsesEveryKernelOfAGfx90aReport) {
  auto r = parse_amd_resources(kGfx90aRemarks);
  ASSERT_TRUE(r["kernels"].contains("mm")) << r.dump(2);
  ASSERT_TRUE(r["kernels"].contains("mm2")) << r.dump(2);
  const auto& mm = r["kernels"]["mm"];
  EXPECT_EQ(mm["mangled"], "mm");
  EXPECT_EQ(mm["sgprs"], 18);
  EXPECT_EQ(mm["vgprs"], 11);
  EXPECT_EQ(mm["agprs"], 0);
  EXPECT_EQ(mm["scratch_bytes"], 0);
  EXPECT_EQ(mm["occupancy"], 8);
  EXPECT_EQ(mm["sgpr_spills"], 0);
  EXPECT_EQ(mm["vgpr_spills"], 0);
  EXPECT_EQ(mm["lds_bytes"], 1024);
  EXPECT_EQ(r["kernels"]["mm2"]["mangled"], "_Z3mm2Pf");
  EXPECT_EQ(r["kernels"]["mm2"]["vgprs"], 2);
  EXPECT_EQ(r["max_vgprs"], 11);
  EXPECT_EQ(r["max_sgprs"], 18);
  EXPECT_EQ(r["max_agprs"], 0);
  EXPECT_EQ(r["max_lds_bytes"], 1024);
  EXPECT_EQ(r["min_occupancy"], 8);
  EXPECT_EQ(r["spills"], false);
  EXPECT_EQ(r["summary"],
            "11 VGPRs, 0 AGPRs, 18 SGPRs, 1.0 KiB LDS, no scratch, no spills, "
            "8 waves/SIMD");
}

TEST(HipResources, ScratchAndNoAgprsOnGfx1030) {
  auto r = parse_amd_resources(kGfx1030Scratch);
  ASSERT_EQ(r["kernels"].size(), 1u) << r.dump(2);
  const auto& k = r["kernels"]["matmul"];
  EXPECT_EQ(k["mangled"], "_Z6matmulPKfS0_Pfiii");
  EXPECT_EQ(k["vgprs"], 6);
  EXPECT_EQ(k["sgprs"], 14);
  EXPECT_EQ(k["vgpr_spills"], 0);
  EXPECT_EQ(k["scratch_bytes"], 272);
  EXPECT_FALSE(k.contains("agprs"));
  EXPECT_FALSE(r.contains("max_agprs"));
  EXPECT_EQ(r["spills"], false);
  EXPECT_EQ(r["max_scratch_bytes"], 272);
  EXPECT_EQ(r["min_occupancy"], 16);
  EXPECT_EQ(r["summary"],
            "6 VGPRs, 14 SGPRs, 0.0 KiB LDS, 272 B/lane scratch, no spills, 16 waves/SIMD");
  // Spill counts, where the compiler reports them, mark the report.
  std::string spilled = kGfx1030Scratch;
  spilled.replace(spilled.find("VGPRs Spill: 0"), 14, "VGPRs Spill: 31");
  auto s = parse_amd_resources(spilled);
  EXPECT_EQ(s["kernels"]["matmul"]["vgpr_spills"], 31);
  EXPECT_EQ(s["spills"], true);
  EXPECT_TRUE(contains(s["summary"].get<std::string>(), "SPILLS"));
}

TEST(HipResources, NoRemarksGiveAnEmptyReport) {
  auto r = parse_amd_resources("kernel.hip:3:5: error: use of undeclared identifier 'x'\n");
  EXPECT_TRUE(r["kernels"].empty());
  EXPECT_EQ(r["max_vgprs"], 0);
  EXPECT_FALSE(r.contains("min_occupancy"));
  EXPECT_EQ(describe_amd_resources(nlohmann::json::object()), "");
}

TEST(HipToolchain, VersionTextAndFlags) {
  EXPECT_EQ(hipcc_version_number("HIP version: 5.2.21153-0\nDebian clang version 15.0.6\n"
                                 "Target: x86_64-pc-linux-gnu\n"),
            "hipcc 5.2.21153-0 (clang 15.0.6)");
  EXPECT_EQ(hipcc_version_number("garbage"), "hipcc unknown");
  auto f = hipcc_flags("gfx90a");
  EXPECT_NE(std::find(f.begin(), f.end(), "--offload-arch=gfx90a"), f.end());
  EXPECT_NE(std::find(f.begin(), f.end(), "--cuda-device-only"), f.end());
  EXPECT_NE(std::find(f.begin(), f.end(), "--no-gpu-bundle-output"), f.end());
  EXPECT_NE(std::find(f.begin(), f.end(), "-Rpass-analysis=kernel-resource-usage"), f.end());
  EXPECT_EQ(amd_targets(), (std::vector<std::string>{"gfx90a", "gfx1030"}));
}

TEST(HipToolchain, HipccFromEnvironmentFirst) {
  {
    ScopedEnv env("PEAK_HIPCC", "/nonexistent/hipcc");
    EXPECT_TRUE(find_hipcc().empty());
  }
  auto dir = make_temp_dir("peak-hipcc-env-");
  ASSERT_TRUE(dir) << dir.error();
  fs::path fake = *dir / "hipcc";
  ASSERT_TRUE(write_file(fake, "#!/bin/sh\nexit 0\n"));
  fs::permissions(fake, fs::perms::owner_all);
  {
    ScopedEnv env("PEAK_HIPCC", fake.c_str());
    EXPECT_EQ(find_hipcc(), fake);
  }
  std::error_code ec;
  fs::remove_all(*dir, ec);
}

TEST(HipCompileUnit, HipHeadersFirstAndTheHostRegionBlanked) {
  KernelContext ctx = load("matmul-hip-fp32");
  auto regions = split_regions(example_source(ctx), "kernel.hip");
  ASSERT_TRUE(regions) << regions.error();
  std::string unit = compile_unit(*regions, "kernel.hip");
  EXPECT_TRUE(starts_with(unit.substr(unit.find('\n') + 1), "#include <hip/hip_runtime.h>"));
  EXPECT_TRUE(contains(unit, "#line 1 \"kernel.hip\"\n"));
  EXPECT_FALSE(contains(unit, "launch matmul"));
  EXPECT_TRUE(contains(unit, "__global__ void matmul"));
  // Line numbers survive: the kernel stays on its line of the file.
  std::string body = unit.substr(unit.find("#line 1 \"kernel.hip\"\n") + 21);
  auto lines = split_lines(body);
  auto file_lines = split_lines(example_source(ctx));
  ASSERT_GE(lines.size(), 15u);
  for (size_t i = 0; i < file_lines.size() && i < lines.size(); ++i)
    if (contains(file_lines[i], "__global__")) {
      EXPECT_EQ(lines[i], file_lines[i]) << i;
    }
}

// ---- The mapping header ----

TEST(HipMapping, DialectAnswersTheHipIncludesWithTheMappingHeader) {
  NvccDialect d = nvcc_dialect();
  EXPECT_EQ(d.name, "hip");
  EXPECT_EQ(d.extension, ".hip");
  EXPECT_TRUE(contains(d.prelude, "peak_hip_to_cuda.h"));
  for (const char* h : {"hip/hip_runtime.h", "hip/hip_fp16.h", "hip/hip_runtime_api.h"}) {
    ASSERT_TRUE(d.include_files.count(h)) << h;
    EXPECT_TRUE(contains(d.include_files[h], "peak_hip_to_cuda.h")) << h;
  }
  // The text built into peak is the file in the source tree.
  auto file = read_file(kSource / "src" / "backend" / "hip" / "peak_hip_to_cuda.h");
  ASSERT_TRUE(file) << file.error();
  EXPECT_EQ(d.include_files["peak_hip_to_cuda.h"], *file);
  for (const char* name : {"hipThreadIdx_x", "hipBlockIdx_y", "hipBlockDim_z", "hipGridDim_x",
                           "hipMalloc", "hipStream_t", "hipLaunchKernelGGL", "__shfl_xor",
                           "HIP_DYNAMIC_SHARED", "__HIP_PLATFORM_NVIDIA__"})
    EXPECT_TRUE(contains(*file, name)) << name;
}

TEST(HipMapping, NvccCompilesEveryMappedDeviceName) {
  if (!have_nvcc()) GTEST_SKIP() << "nvcc not found (PEAK_NVCC, CUDA_HOME, /usr/local/cuda)";
  std::string device =
      "#include <hip/hip_runtime.h>\n"
      "#include <hip/hip_fp16.h>\n"
      "HIP_DYNAMIC_SHARED_ATTRIBUTE __global__ void matmul(const float* A, const float* B,\n"
      "    float* C, int M, int N, int K) {\n"
      "  HIP_DYNAMIC_SHARED(float, tile)\n"
      "  int col = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;\n"
      "  int row = hipBlockIdx_y * hipBlockDim_y + hipThreadIdx_y;\n"
      "  int z = hipBlockIdx_z + hipThreadIdx_z + hipBlockDim_z + hipGridDim_x + hipGridDim_y +\n"
      "          hipGridDim_z;\n"
      "  if (row >= M || col >= N) return;\n"
      "  float acc = 0.0f;\n"
      "  for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];\n"
      "  acc += __shfl_xor(acc, 1) * 0.0f + __shfl(acc, 0) * 0.0f + __shfl_up(acc, 1u) * 0.0f +\n"
      "         __shfl_down(acc, 1u) * 0.0f;\n"
      "  unsigned long long b = __ballot(acc > 0) + __any(1) + __all(1) + __lane_id() + z;\n"
      "  tile[hipThreadIdx_x] = __half2float(__float2half(acc));\n"
      "  C[row * N + col] = tile[hipThreadIdx_x] + (b == ~0ull ? 1.0f : 0.0f);\n"
      "}\n";
  std::string src = "// peak:begin macros\n// peak:end macros\n// peak:begin device\n" + device +
                    "// peak:end device\n// peak:begin host\nlaunch matmul\n"
                    "  grid = (ceil_div(N, 16), ceil_div(M, 16))\n  block = (16, 16)\n"
                    "  shared = 64\n  args = (A, B, C, M, N, K)\n// peak:end host\n";
  KernelContext ctx = load("matmul-hip-fp32");
  ScopedEnv no_hipcc("PEAK_HIPCC", "/nonexistent/hipcc");  // the NVIDIA build alone
  auto b = make_hip_backend();
  BuildResult r = build(*b, ctx, src, {});
  ASSERT_EQ(r.disposition, Disposition::passed) << r.log;
  EXPECT_EQ(r.resources["platform"], "nvidia");
  EXPECT_TRUE(r.resources["kernels"].contains("matmul")) << r.resources.dump(2);
  EXPECT_TRUE(contains(r.log, "hipcc was not found")) << r.log;
}

// ---- The backend ----

TEST(HipBackend, DescribesItself) {
  auto b = make_hip_backend();
  EXPECT_EQ(b->name(), "hip");
  EXPECT_EQ(b->source_extension(), ".hip");
  auto t = b->translation_table();
  EXPECT_TRUE(contains(t["warp"], "warpSize")) << t["warp"];
  EXPECT_TRUE(contains(t["tensor cores"], "MFMA")) << t["tensor cores"];
  EXPECT_TRUE(contains(t["warp shuffle"], "__shfl_xor"));
  EXPECT_EQ(b->runner().filename(), "peak-runner-cuda");
  PlanDialect d = b->plan_dialect();
  EXPECT_EQ(d.backend, "hip");
  EXPECT_TRUE(d.block && d.args && d.shared);
  EXPECT_FALSE(d.cluster);
  EXPECT_FALSE(d.tensor_maps);
  std::map<std::string, std::string> tc;
  for (const auto& [k, v] : b->toolchain()) tc[k] = v;
  EXPECT_EQ(tc["amd_targets"], "gfx90a, gfx1030");
  EXPECT_TRUE(contains(tc["run_platform"], "NVIDIA")) << tc["run_platform"];
  EXPECT_TRUE(tc.count("hipcc") && tc.count("nvcc"));
  if (have_hipcc()) {
    EXPECT_TRUE(starts_with(tc["hipcc"], "5.")) << tc["hipcc"];
  }
  std::string facts;
  for (const auto& [k, v] : b->prompt_facts(h100())) facts += k + ": " + v + "\n";
  EXPECT_TRUE(contains(facts, "gfx90a")) << facts;
  EXPECT_TRUE(contains(facts, "NVIDIA")) << facts;
}

TEST(HipBackend, BaselineIsTheVendorLibraryOfTheRunPlatform) {
  auto b = make_hip_backend();
  KernelContext ctx = load("matmul-hip-fp32");
  EXPECT_EQ(b->baseline(ctx, h100()), "cublas");
  KernelContext generic = ctx;
  generic.family = "";
  EXPECT_EQ(b->baseline(generic, h100()), "");
}

TEST(HipBackend, ProbeWithoutAGpuFailsClearly) {
  ScopedEnv env("CUDA_VISIBLE_DEVICES", "");
  auto b = make_hip_backend();
  auto facts = b->probe("", false);
  if (facts) GTEST_SKIP() << "a GPU answered: " << facts->name;
  EXPECT_FALSE(facts.error().empty());
}

class HipExample : public ::testing::TestWithParam<std::string> {};

// Every example builds for gfx90a and gfx1030 with hipcc, the resource report of each target is
// recorded with the build, and (where nvcc is) the NVIDIA cubin is what the plan resolves to.
TEST_P(HipExample, BuildsForEveryAmdTargetWithItsResourceReport) {
  KernelContext ctx = load(GetParam());
  EXPECT_EQ(ctx.backend, "hip");
  EXPECT_EQ(ctx.source_file, "kernel.hip");
  std::string text = example_source(ctx);
  auto regions = split_regions(text, ctx.source_file);
  ASSERT_TRUE(regions) << regions.error();
  auto parsed = parse_plan(*regions, ctx.source_file);
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(parsed->kernels(), std::vector<std::string>{"matmul"});
  REQUIRE_HIPCC();
  auto b = make_hip_backend();
  Config config = testing::default_tuning(ctx);
  BuildResult r = build(*b, ctx, text, config);
  ASSERT_EQ(r.disposition, Disposition::passed) << r.log << "\n" << r.command;
  EXPECT_TRUE(contains(r.toolchain, "hipcc 5.")) << r.toolchain;
  EXPECT_TRUE(contains(r.command, "--offload-arch=gfx90a")) << r.command;
  EXPECT_TRUE(contains(r.command, "--offload-arch=gfx1030")) << r.command;
  ASSERT_TRUE(r.resources.contains("targets")) << r.resources.dump(2);
  for (const std::string& t : amd_targets()) {
    const auto& tr = r.resources["targets"][t];
    ASSERT_TRUE(tr.contains("kernels")) << t << ": " << r.resources.dump(2);
    const auto& k = tr["kernels"]["matmul"];
    EXPECT_GT(k.value("vgprs", 0), 0) << t;
    EXPECT_GT(k.value("sgprs", 0), 0) << t;
    EXPECT_EQ(k.value("lds_bytes", -1), 0) << t;
    EXPECT_EQ(k.value("scratch_bytes", -1), 0) << t;
    EXPECT_GT(k.value("occupancy", 0), 0) << t;
    EXPECT_EQ(tr["spills"], false) << t;
    EXPECT_FALSE(tr.value("summary", "").empty());
    EXPECT_EQ(k.contains("agprs"), t == "gfx90a") << t;  // AGPRs exist on CDNA only
  }
  // The code objects in the cache are AMD GPU ELF files for their targets with the kernel.
  int objects = 0;
  for (const auto& e : fs::directory_iterator(cache_dir())) {
    if (e.path().extension() != ".co") continue;
    auto info = inspect_code_object(e.path());
    ASSERT_TRUE(info) << info.error();
    EXPECT_TRUE(info->amdgpu);
    EXPECT_TRUE(contains(e.path().filename().string(), "." + info->target + ".co"))
        << e.path() << " holds " << info->target;
    ++objects;
  }
  EXPECT_GE(objects, 2);
  // The second build of the same text comes from the cache, report included.
  BuildResult again = build(*b, ctx, text, config);
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(again.resources, r.resources);
  if (!have_nvcc()) {
    EXPECT_EQ(r.resources["platform"], "amd-only");
    PlanResult pr = b->plan(ctx, *regions, ctx.validation_shapes.at(0), config, h100(), r);
    EXPECT_EQ(pr.disposition, Disposition::launch_failed);
    EXPECT_TRUE(contains(pr.message, "CUDA toolkit")) << pr.message;
    return;
  }
  EXPECT_EQ(r.resources["platform"], "nvidia");
  EXPECT_EQ(r.artifact.extension(), ".cubin");
  EXPECT_TRUE(contains(r.command, "nvcc"));
  EXPECT_TRUE(r.resources["kernels"].contains("matmul"));
  for (const Shape& s : ctx.validation_shapes) {
    PlanResult pr = b->plan(ctx, *regions, s, config, h100(), r);
    ASSERT_EQ(pr.disposition, Disposition::passed) << s.text() << ": " << pr.message;
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, HipExample,
                         ::testing::Values("matmul-hip-fp32", "matmul-hip-fp16"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(HipBuild, AmdOnlyWhereNoNvccIs) {
  REQUIRE_HIPCC();
  ScopedEnv no_nvcc("PEAK_NVCC", "/nonexistent/nvcc");
  KernelContext ctx = load("matmul-hip-fp32");
  std::string text = example_source(ctx);
  auto b = make_hip_backend();
  BuildResult r = build(*b, ctx, text, testing::default_tuning(ctx));
  ASSERT_EQ(r.disposition, Disposition::passed) << r.log;
  EXPECT_EQ(r.resources["platform"], "amd-only");
  EXPECT_TRUE(contains(r.log, "nvcc was not found")) << r.log;
  auto info = inspect_code_object(r.artifact);
  ASSERT_TRUE(info) << info.error();
  EXPECT_EQ(info->target, "gfx90a");
  EXPECT_EQ(info->kernels.size(), 1u);
  auto regions = split_regions(text, ctx.source_file);
  ASSERT_TRUE(regions);
  PlanResult pr =
      b->plan(ctx, *regions, ctx.validation_shapes.at(0), testing::default_tuning(ctx), h100(), r);
  EXPECT_EQ(pr.disposition, Disposition::launch_failed);
}

TEST(HipBuild, NoToolchainAtAllIsACompileFailureWithAHint) {
  ScopedEnv no_nvcc("PEAK_NVCC", "/nonexistent/nvcc");
  ScopedEnv no_hipcc("PEAK_HIPCC", "/nonexistent/hipcc");
  KernelContext ctx = load("matmul-hip-fp32");
  auto b = make_hip_backend();
  BuildResult r = build(*b, ctx, example_source(ctx), testing::default_tuning(ctx));
  EXPECT_EQ(r.disposition, Disposition::compile_failed);
  EXPECT_TRUE(contains(r.log, "apt-get install hipcc")) << r.log;
}

TEST(HipBuild, CompileErrorNamesKernelHipAndLine) {
  REQUIRE_HIPCC();
  KernelContext ctx = load("matmul-hip-fp32");
  std::string text = example_source(ctx);
  size_t at = text.find("float acc = 0.0f;");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 17, "float acc = undeclared_name;");
  auto b = make_hip_backend();
  BuildResult r = build(*b, ctx, text, testing::default_tuning(ctx));
  EXPECT_EQ(r.disposition, Disposition::compile_failed);
  EXPECT_TRUE(contains(r.log, "kernel.hip:18:15: error")) << r.log;
  EXPECT_TRUE(contains(r.log, "undeclared_name")) << r.log;
  EXPECT_TRUE(contains(r.log, "hipcc, AMD gfx90a")) << r.log;
  EXPECT_FALSE(contains(r.log, "kernel-resource-usage")) << r.log;
  EXPECT_FALSE(contains(r.log, "hipcc, AMD gfx1030")) << "a failed target ends the build";
}

// hipcc and nvcc compile in the compiler sandbox: a candidate that includes /etc/passwd or
// /etc/group (by path, as a system header, by a relative path out of the cache) fails to build,
// and neither the log nor the build cache holds a line of them.
TEST(HipBuild, IncludingHostFilesShowsNothingOfThem) {
  REQUIRE_HIPCC();
  if (sandbox_support().level != SandboxSupport::Level::full)
    GTEST_SKIP() << "the sandbox has no namespaces here: " << sandbox_support().detail;
  ASSERT_FALSE(testing::host_file_lines().empty()) << "no /etc/passwd to hide";
  KernelContext ctx = load("matmul-hip-fp32");
  std::string text = example_source(ctx);
  auto b = make_hip_backend();
  for (const std::string& include : testing::hostile_includes()) {
    SCOPED_TRACE(include);
    std::string src = replace_all(text, "#include <hip/hip_runtime.h>\n",
                                  "#include <hip/hip_runtime.h>\n" + include + "\n");
    ASSERT_NE(src, text);
    BuildResult r = build(*b, ctx, src, testing::default_tuning(ctx));
    EXPECT_EQ(r.disposition, Disposition::compile_failed) << r.log;
    EXPECT_EQ(testing::host_line_in(r.log), "") << r.log;
    EXPECT_TRUE(contains(r.log, "not found") || contains(r.log, "No such file")) << r.log;
  }
  EXPECT_EQ(testing::host_line_under(cache_dir()), "");
}

// On NVIDIA a HIP build runs as a cubin, whose static data is read from the cubin itself: an
// 8 GiB __device__ array (ptxas's summary says 0 bytes) is workspace_exceeded.
TEST(HipBuild, StaticDeviceDataAbove64KiBIsWorkspaceExceededOnNvidia) {
  if (!have_nvcc()) GTEST_SKIP() << "nvcc not found: HIP builds run on NVIDIA only through it";
  KernelContext ctx = load("matmul-hip-fp32");
  std::string text = example_source(ctx);
  std::string src = replace_all(
      replace_all(text, "// One thread per element of C.\n",
                  "__device__ unsigned char keep[8589934592ull];\n"),
      "C[row * N + col] = acc;",
      "keep[(unsigned long long)row * 4294967296ull + col] = 1;\n  C[row * N + col] = acc + "
      "keep[col];");
  ASSERT_NE(src, text);
  auto b = make_hip_backend();
  BuildResult r = build(*b, ctx, src, testing::default_tuning(ctx));
  ASSERT_EQ(r.disposition, Disposition::passed) << r.log;
  EXPECT_GE(r.resources.value("global_bytes", int64_t{0}), int64_t{8} << 30) << r.resources.dump();
  PlanResult pr = b->check_resources(r, h100());
  EXPECT_EQ(pr.disposition, Disposition::workspace_exceeded) << pr.message;
}

TEST(HipBuild, PlanLaunchingAKernelTheCodeObjectLacksFailsTheBuild) {
  REQUIRE_HIPCC();
  KernelContext ctx = load("matmul-hip-fp32");
  std::string text = example_source(ctx);
  size_t at = text.find("launch matmul");
  text.replace(at, 13, "launch matmul_missing");
  auto b = make_hip_backend();
  BuildResult r = build(*b, ctx, text, testing::default_tuning(ctx));
  EXPECT_EQ(r.disposition, Disposition::compile_failed);
  EXPECT_TRUE(contains(r.log, "matmul_missing")) << r.log;
  EXPECT_TRUE(contains(r.log, "kernels: matmul")) << r.log;
}

// ---- The HIP integrity corpus (tests/integrity/hip): build-time dispositions for AMD ----

std::vector<CorpusCase> hip_corpus() {
  std::vector<CorpusCase> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(kHipCorpus, ec)) {
    if (!e.is_regular_file() || e.path().extension() != ".hip") continue;
    auto text = read_file(e.path());
    CorpusCase c = testing::parse_corpus_header(e.path(), text ? *text : "");
    if (!text) c.problems.push_back(text.error());
    out.push_back(c);
  }
  std::sort(out.begin(), out.end(),
            [](const CorpusCase& a, const CorpusCase& b) { return a.file < b.file; });
  return out;
}

TEST(HipCorpus, CoversTheCasesThatMakeSenseInHip) {
  std::set<std::string> files;
  for (const CorpusCase& c : hip_corpus()) {
    files.insert(c.file);
    for (const auto& p : c.problems) ADD_FAILURE() << c.file << ": " << p;
  }
  for (const char* f :
       {"correct_tiled.hip", "out_of_bounds.hip", "race_missing_syncthreads.hip",
        "unwritten_tile.hip", "stale_output.hip", "inputs_modified.hip", "side_stream.hip",
        "hipblas_call.hip", "infinite_loop.hip", "sticky_error.hip", "lds_over_limit.hip",
        "device_malloc.hip", "device_launch.hip"})
    EXPECT_TRUE(files.count(f)) << "missing corpus case " << f;
  auto doc = read_file(kSource / "docs" / "backend-hip.md");
  ASSERT_TRUE(doc) << doc.error();
  for (const auto& f : files)
    EXPECT_TRUE(contains(*doc, "`" + f + "`")) << f << " is not in docs/backend-hip.md";
}

class HipCorpusBuild : public ::testing::TestWithParam<CorpusCase> {};

// A case decided at build time fails its build with that disposition (on AMD already, where
// hipcc refuses it; forbidden_api comes from the NVIDIA cubin's checks); every other case builds
// for both AMD targets and, where nvcc is, plans on every validation shape of the H100.
TEST_P(HipCorpusBuild, BuildTimeCasesFailAndTheRestBuildForAmd) {
  const CorpusCase& c = GetParam();
  ASSERT_TRUE(c.problems.empty()) << c.file << ": " << join(c.problems, "; ");
  REQUIRE_HIPCC();
  const KernelContext& ctx = hip_corpus_context();
  auto text = read_file(c.path);
  ASSERT_TRUE(text) << text.error();
  Config config = testing::default_tuning(ctx);
  auto b = make_hip_backend();
  BuildResult r = build(*b, ctx, *text, config);
  const std::string& first = *c.expect.begin();
  if (first == "forbidden_api" && !have_nvcc()) {
    // Device malloc is valid HIP for AMD; the NVIDIA build is the one that refuses it.
    EXPECT_EQ(r.disposition, Disposition::passed) << r.log;
    return;
  }
  if (first == "compile_failed" || first == "forbidden_api") {
    EXPECT_EQ(std::string(to_string(r.disposition)), first) << c.file << "\n" << r.log;
    EXPECT_FALSE(r.log.empty());
    if (first == "compile_failed") {
      EXPECT_TRUE(contains(r.log, "hipcc, AMD gfx90a")) << r.log;
    }
    return;
  }
  ASSERT_EQ(r.disposition, Disposition::passed) << c.file << "\n" << r.log;
  for (const std::string& t : amd_targets())
    EXPECT_FALSE(r.resources["targets"][t]["kernels"].empty()) << c.file << " " << t;
  if (!have_nvcc()) return;
  auto regions = split_regions(*text, "kernel.hip");
  ASSERT_TRUE(regions) << regions.error();
  for (const Shape& s : ctx.validation_shapes) {
    PlanResult pr = b->plan(ctx, *regions, s, config, h100(), r);
    EXPECT_EQ(pr.disposition, Disposition::passed)
        << c.file << " " << s.text() << ": " << pr.message;
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, HipCorpusBuild, ::testing::ValuesIn(hip_corpus()),
                         [](const auto& info) {
                           std::string n = fs::path(info.param.file).stem().string();
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// tensor-core's HIP helper (transformations/matmul/tensor-core.md, helper mfma), as shipped, in a
// kernel of 4 warps (two 64-lane wavefronts on gfx90a): hipcc's assembly for gfx90a holds the
// matrix-core instruction, gfx1030 (no matrix cores) builds its FMA path. The NVIDIA build
// through the mapping header is the recorded campaign's (Recordings.TheHipTensorCoreRecording...).
TEST(HipHelper, MfmaUsesTheMatrixCoresOnGfx90aAndBuildsForGfx1030) {
  const fs::path hipcc = find_hipcc();
  if (hipcc.empty()) GTEST_SKIP() << "hipcc not found";
  auto t = load_transformation(kSource / "transformations" / "matmul" / "tensor-core.md");
  ASSERT_TRUE(t) << t.error();
  auto h = std::find_if(t->helpers.begin(), t->helpers.end(),
                        [](const HelperSnippet& x) { return x.name == "mfma"; });
  ASSERT_NE(h, t->helpers.end());
  EXPECT_EQ(h->backend, "hip");
  auto dir = make_temp_dir("peak-mfma-", cache_dir());
  ASSERT_TRUE(dir) << dir.error();
  const std::string kernel = h->code + R"(
#define WARPS 4
__global__ void tile(const __half* A, const __half* B, float* C, int K) {
  __shared__ __half As[16 * WARPS * 16];
  __shared__ __half Bs[16 * 16];
  __shared__ float Cs[WARPS][256];
  int w = threadIdx.x / 32;
  peak_mma::fragment<peak_mma::accumulator, float> acc;
  peak_mma::fill_fragment(acc, 0.0f);
  for (int k0 = 0; k0 < K; k0 += 16) {
    for (int e = threadIdx.x; e < 16 * WARPS * 16; e += blockDim.x)
      As[e] = A[(e / 16) * K + k0 + e % 16];
    for (int e = threadIdx.x; e < 256; e += blockDim.x) Bs[e] = B[(k0 + e / 16) * 16 + e % 16];
    __syncthreads();
    peak_mma::fragment<peak_mma::matrix_a, __half> a;
    peak_mma::fragment<peak_mma::matrix_b, __half> b;
    peak_mma::load_matrix_sync(a, &As[16 * 16 * w], 16);
    peak_mma::load_matrix_sync(b, Bs, 16);
    peak_mma::mma_sync(acc, a, b, acc);
    __syncthreads();
  }
  peak_mma::store_matrix_sync(Cs[w], acc, 16);
  __syncthreads();
  for (int e = threadIdx.x % 32; e < 256; e += 32) C[(16 * w + e / 16) * 16 + e % 16] = Cs[w][e];
}
)";
  ASSERT_TRUE(write_file(*dir / "tile.hip", kernel));
  for (const std::string& target : amd_targets()) {
    SCOPED_TRACE(target);
    ProcessOptions po;
    po.argv = {hipcc.string()};
    for (const auto& f : hipcc_flags(target))
      if (f != "-c") po.argv.push_back(f);
    po.argv.insert(po.argv.end(),
                   {"-S", "-o", (*dir / (target + ".s")).string(), (*dir / "tile.hip").string()});
    po.timeout_s = 300;
    auto r = run_process(po);
    ASSERT_TRUE(r) << r.error();
    ASSERT_TRUE(r->ok()) << r->describe() << "\n" << r->err;
    auto isa = read_file(*dir / (target + ".s"));
    ASSERT_TRUE(isa) << isa.error();
    const bool mfma = contains(*isa, "v_mfma_f32_16x16x16f16");
    EXPECT_EQ(mfma, target == "gfx90a");
  }
}

}  // namespace
}  // namespace peak
