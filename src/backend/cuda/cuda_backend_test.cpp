#include "backend/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <set>

#include "backend/cuda/copy_kernel_ptx.h"
#include "backend/cuda/corpus_testing.h"
#include "backend/cuda/fma_bench_ptx.h"
#include "backend/cuda/generate_ptx.h"
#include "runner/device_testing.h"
#include "util/fs.h"
#include "util/host_files_testing.h"
#include "util/process.h"
#include "util/sandbox.h"
#include "util/temp_dir_testing.h"

namespace peak {
namespace {

using namespace cuda;
using testing::CorpusCase;

const fs::path kSource = PEAK_SOURCE_DIR;

// One compile cache per test process: tests that build the same text share artifacts.
auto* const g_cache = testing::ProcessTempDir::add("peak-cuda-test-");
const fs::path& cache_dir() { return g_cache->path(); }

const KernelContext& fp32_context() {
  static KernelContext ctx = [] {
    auto c = load_context(kSource / "examples" / "matmul-cuda-fp32");
    EXPECT_TRUE(c) << c.error();
    return c ? *c : KernelContext{};
  }();
  return ctx;
}

const KernelContext& corpus_context() {
  static KernelContext ctx = [] {
    auto c = testing::corpus_context();
    EXPECT_TRUE(c) << c.error();
    return c ? *c : KernelContext{};
  }();
  return ctx;
}

// The facts an H100 SXM reports (peak-runner-cuda's probe), and an A100's.
DeviceFacts h100() { return testing::h100_facts(); }

DeviceFacts a100() {
  DeviceFacts d = h100();
  d.name = "NVIDIA A100-SXM4-80GB";
  d.arch = "sm_80";
  d.compute_units = 108;
  d.shared_memory_per_group_optin = 166912;
  d.l2_bytes = 41943040;
  return d;
}

BuildResult build(Backend& b, const KernelContext& ctx, const std::string& source,
                  const Config& defines = {}) {
  BuildRequest req;
  req.context = &ctx;
  req.source = source;
  req.defines = defines;
  req.device.arch = "sm_90a";
  req.cache_dir = cache_dir();
  return b.build(req);
}

SourceRegions regions_of(const std::string& text) {
  auto r = split_regions(text, "kernel.cu");
  EXPECT_TRUE(r) << r.error();
  return r ? *r : SourceRegions{};
}

LaunchPlan plan_of(const PlanResult& pr, const KernelContext& ctx) {
  auto p = LaunchPlan::from_json(pr.plan, ctx.arrays.size());
  EXPECT_TRUE(p) << p.error() << "\n" << pr.plan.dump(2);
  return p ? *p : LaunchPlan{};
}

Shape shape(int64_t m, int64_t n, int64_t k) { return Shape{{{"M", m}, {"N", n}, {"K", k}}}; }

bool have_nvcc() { return !find_nvcc().empty(); }

#define REQUIRE_NVCC()                                                                \
  do {                                                                                \
    if (!have_nvcc()) {                                                               \
      GTEST_SKIP() << "nvcc not found (PEAK_NVCC, CUDA_HOME, /usr/local/cuda, PATH)"; \
    }                                                                                 \
  } while (0)

bool contains(const std::string& s, std::string_view what) {
  return s.find(what) != std::string::npos;
}

// Every shape validation and timing use: bench, validation, hidden and sampled hidden shapes.
std::vector<Shape> every_shape(const KernelContext& ctx) {
  std::vector<Shape> s = ctx.bench_shapes;
  for (const auto* list : {&ctx.validation_shapes, &ctx.hidden_shapes, &ctx.small_shapes})
    s.insert(s.end(), list->begin(), list->end());
  for (const Shape& x : sample_shapes(ctx, 4, 0x5eed)) s.push_back(x);
  return s;
}

// A matmul source for fp32_context(): `device` and `host` are the two regions' text.
std::string matmul_source(const std::string& device, const std::string& host) {
  return "// a test kernel\n"
         "// peak:begin macros\n"
         "// peak:end macros\n"
         "// peak:begin device\n" +
         device +
         "// peak:end device\n"
         "// peak:begin host\n" +
         host + "// peak:end host\n";
}

constexpr const char* kNaiveDevice =
    "__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {\n"
    "  int col = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  int row = blockIdx.y * blockDim.y + threadIdx.y;\n"
    "  if (row >= M || col >= N) return;\n"
    "  float acc = 0.0f;\n"
    "  for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];\n"
    "  C[row * N + col] = acc;\n"
    "}\n";

constexpr const char* kNaivePlan =
    "launch matmul\n"
    "  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y))\n"
    "  block = (BLOCK_X, BLOCK_Y)\n"
    "  args = (A, B, C, M, N, K)\n";

// ---- The compile unit and the flags ----

TEST(CudaCompileUnit, BlanksTheHostRegionAndKeepsLineNumbers) {
  std::string src = matmul_source(kNaiveDevice, kNaivePlan);
  SourceRegions r = regions_of(src);
  std::string unit = compile_unit(r, "kernel.cu");
  auto lines = split_lines(unit);
  auto line = std::find(lines.begin(), lines.end(), "#line 1 \"kernel.cu\"");
  ASSERT_NE(line, lines.end()) << unit;
  // The prelude (headers only) comes before it; the plan's words never reach the compiler.
  std::string prelude = join(std::vector<std::string>(lines.begin(), line), "\n");
  EXPECT_TRUE(contains(prelude, "#include <cuda.h>")) << prelude;  // CUtensorMap
  EXPECT_TRUE(contains(prelude, "#include <cuda_fp16.h>")) << prelude;
  EXPECT_FALSE(contains(unit, "launch matmul")) << unit;
  EXPECT_FALSE(contains(unit, "args =")) << unit;
  // After the #line directive, line i is line i of the file, host-region lines blank.
  auto src_lines = split_lines(src);
  std::vector<std::string> body(line + 1, lines.end());
  ASSERT_EQ(body.size(), src_lines.size()) << unit;
  bool in_host = false;
  for (size_t i = 0; i < src_lines.size(); ++i) {
    if (src_lines[i] == "// peak:end host") in_host = false;
    if (in_host) {
      EXPECT_TRUE(trim(body[i]).empty()) << "line " << i + 1 << ": " << body[i];
    } else {
      EXPECT_EQ(body[i], src_lines[i]) << "line " << i + 1;
    }
    if (src_lines[i] == "// peak:begin host") in_host = true;
  }
}

TEST(CudaFlags, PinnedCubinForTheDevicesArchitecture) {
  EXPECT_EQ(gencode_flag("sm_90a"), "-gencode=arch=compute_90a,code=sm_90a");
  EXPECT_EQ(gencode_flag("sm_86"), "-gencode=arch=compute_86,code=sm_86");
  EXPECT_EQ(gencode_flag("sm_100a"), "-gencode=arch=compute_100a,code=sm_100a");
  EXPECT_EQ(gencode_flag(""), "-gencode=arch=compute_90a,code=sm_90a");
  EXPECT_EQ(gencode_flag("sm_90; rm -rf /"), "-gencode=arch=compute_90a,code=sm_90a");
  auto f = pinned_flags("sm_80");
  for (std::string_view want :
       {"-cubin", "-O3", "-std=c++17", "-lineinfo", "-ftz=false", "-prec-div=true",
        "-prec-sqrt=true", "-gencode=arch=compute_80,code=sm_80"})
    EXPECT_NE(std::find(f.begin(), f.end(), want), f.end()) << want;
  auto xptxas = std::find(f.begin(), f.end(), "-Xptxas");
  ASSERT_NE(xptxas, f.end());
  ASSERT_NE(xptxas + 1, f.end());
  EXPECT_EQ(*(xptxas + 1), "-v");  // per-kernel resources
  // Device code only: no host object, no relocatable device code (device-side launches), no
  // fast math.
  for (const auto& flag : f) {
    EXPECT_FALSE(contains(flag, "fast")) << flag;
    EXPECT_FALSE(contains(flag, "rdc")) << flag;
    EXPECT_NE(flag, "-shared");
    EXPECT_NE(flag, "-fPIC");
    EXPECT_NE(flag, "-cudart");
    EXPECT_NE(flag, "-Xcompiler");
  }
}

TEST(CudaFlags, NvccFromEnvironmentFirst) {
  const char* old = std::getenv("PEAK_NVCC");
  std::string saved = old ? old : "";
  ::setenv("PEAK_NVCC", "/bin/true", 1);
  EXPECT_EQ(find_nvcc(), fs::path("/bin/true"));
  ::setenv("PEAK_NVCC", "/nonexistent/nvcc", 1);
  EXPECT_TRUE(find_nvcc().empty());  // a wrong explicit choice is not silently replaced
  if (old)
    ::setenv("PEAK_NVCC", saved.c_str(), 1);
  else
    ::unsetenv("PEAK_NVCC");
}

// ---- ptxas resources ----

// Captured from nvcc 13.0 (-Xptxas -v, sm_90a) for two kernels, one with a local array.
constexpr const char* kPtxasNvcc13 = R"(ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z5spillPfi' for 'sm_90a'
ptxas info    : Function properties for _Z5spillPfi
    1024 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 1024 bytes cumulative stack size, 4096 bytes smem
ptxas info    : Compile time = 32.884 ms
ptxas info    : Compiling entry function '_Z2mmPKfS0_Pfiii' for 'sm_90a'
ptxas info    : Function properties for _Z2mmPKfS0_Pfiii
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers
ptxas info    : Compile time = 7.002 ms
)";

// The older layout (CUDA 11/12): smem and cmem on the "Used" line, a template kernel, a
// non-inlined device function with its own properties, and register spills.
constexpr const char* kPtxasOlder = R"(ptxas info    : 0 bytes gmem
ptxas info    : Function properties for _Z6helperf
    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function '_Z4gemmILi128ELi8EEvPKfS1_Pfiii' for 'sm_80'
ptxas info    : Function properties for _Z4gemmILi128ELi8EEvPKfS1_Pfiii
    64 bytes stack frame, 48 bytes spill stores, 40 bytes spill loads
ptxas info    : Used 255 registers, 33280 bytes smem, 388 bytes cmem[0]
)";

TEST(CudaResources, ParsesNvcc13Output) {
  auto r = parse_ptxas_resources(kPtxasNvcc13);
  ASSERT_TRUE(r["kernels"].contains("spill")) << r.dump(2);
  ASSERT_TRUE(r["kernels"].contains("mm")) << r.dump(2);
  const auto& s = r["kernels"]["spill"];
  EXPECT_EQ(s["registers"], 32);
  EXPECT_EQ(s["shared_bytes"], 4096);
  EXPECT_EQ(s["stack_frame"], 1024);
  EXPECT_EQ(s["spill_stores"], 0);
  EXPECT_EQ(s["barriers"], 1);
  EXPECT_EQ(s["mangled"], "_Z5spillPfi");
  EXPECT_EQ(s["arch"], "sm_90a");
  const auto& m = r["kernels"]["mm"];
  EXPECT_EQ(m["registers"], 40);
  EXPECT_EQ(m["shared_bytes"], 0);
  EXPECT_EQ(r["max_registers"], 40);
  EXPECT_EQ(r["max_shared_bytes"], 4096);
  EXPECT_EQ(r["spills"], false);
}

TEST(CudaResources, ParsesOlderOutputWithSpillsAndTemplates) {
  auto r = parse_ptxas_resources(kPtxasOlder);
  ASSERT_EQ(r["kernels"].size(), 1u) << r.dump(2);  // helper() is not a kernel
  ASSERT_TRUE(r["kernels"].contains("gemm<128, 8>")) << r.dump(2);
  const auto& g = r["kernels"]["gemm<128, 8>"];
  EXPECT_EQ(g["registers"], 255);
  EXPECT_EQ(g["shared_bytes"], 33280);
  EXPECT_EQ(g["spill_stores"], 48);
  EXPECT_EQ(g["spill_loads"], 40);
  EXPECT_EQ(g["stack_frame"], 64);
  EXPECT_EQ(r["spills"], true);
  EXPECT_EQ(r["max_registers"], 255);
  EXPECT_EQ(r["max_shared_bytes"], 33280);
}

TEST(CudaResources, EmptyLogGivesEmptyResources) {
  auto r = parse_ptxas_resources("kernel.cu:3: error: something\n");
  EXPECT_TRUE(r["kernels"].empty());
  EXPECT_EQ(r["max_registers"], 0);
  EXPECT_EQ(r["spills"], false);
}

// ---- The instruction mix (cuobjdump -sass) ----

// What `cuobjdump -sass` prints for a cubin of two kernels (shortened; the layout of CUDA 12 and
// 13: a "Function :" header, then one line per instruction with its address and its encoding,
// and a second line with the rest of the encoding).
constexpr const char* kSass = R"SASS(
Fatbin elf code:
================
arch = sm_90a
code version = [1,8]
host = linux
compile_size = 64bit

	code for sm_90a
		Function : _Z6matmulPKfS0_Pfiii
	.headerflags	@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                            /* 0x00000a00ff017b82 */
                                                                                      /* 0x000fe40000000800 */
        /*0010*/                   S2R R0, SR_TID.X ;                                 /* 0x0000000000007919 */
                                                                                      /* 0x000e220000002100 */
        /*0020*/                   LDG.E.128 R4, desc[UR4][R2.64] ;                   /* 0x0000000402047981 */
                                                                                      /* 0x000ea8000c1e1d00 */
        /*0030*/                   STS.128 [R0], R4 ;                                 /* 0x0000000400007388 */
                                                                                      /* 0x0041e80000000c00 */
        /*0040*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;                      /* 0x0000000000007b1d */
                                                                                      /* 0x000fec0000010000 */
        /*0050*/                   LDS.64 R8, [R0+0x10] ;                             /* 0x0000100000087984 */
                                                                                      /* 0x000e240000000a00 */
        /*0060*/                   FFMA R10, R8, R9, R10 ;                            /* 0x000000090a0a7223 */
                                                                                      /* 0x001fe2000000000a */
        /*0070*/               @P0 FFMA R11, R8, R9, R11 ;                            /* 0x00000009080b0223 */
                                                                                      /* 0x000fe2000000000b */
        /*0080*/                   WARPGROUP.ARRIVE ;                                 /* 0x00000000000079c7 */
                                                                                      /* 0x000fe20000000000 */
        /*0090*/                   HGMMA.64x128x16.F32 R24, gdesc[UR4], RZ, !UPT ;    /* 0x00e00000041879f0 */
                                                                                      /* 0x000fe2000bf00018 */
        /*00a0*/              @!P0 BRA 0x120 ;                                        /* 0x0000000000008947 */
                                                                                      /* 0x000fea0003800000 */
        /*00b0*/                   STG.E desc[UR4][R2.64], R10 ;                      /* 0x0000000a02007986 */
                                                                                      /* 0x000fe2000c101904 */
        /*00c0*/                   EXIT ;                                             /* 0x000000000000794d */
                                                                                      /* 0x000fea0003800000 */
.L_x_0:
        /*00d0*/                   BRA `(.L_x_0);                                     /* 0xfffffffc00fc7947 */
                                                                                      /* 0x000fc0000383ffff */
        /*00e0*/                   NOP;                                               /* 0x0000000000007918 */
                                                                                      /* 0x000fc00000000000 */
		..........


		Function : _Z6reducePfi
	.headerflags	@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                            /* 0x00000a00ff017b82 */
                                                                                      /* 0x000fe40000000800 */
        /*0010*/              @!PT SHFL.IDX PT, RZ, RZ, RZ, RZ ;                      /* 0x000000fffffff389 */
                                                                                      /* 0x000fe200000e00ff */
        /*0020*/                   EXIT ;                                             /* 0x000000000000794d */
                                                                                      /* 0x000fea0003800000 */
		..........
)SASS";

TEST(CudaSass, CountsOpcodesPerFunctionWithoutPredicatesAndModifiers) {
  auto mix = parse_sass_mix(kSass);
  ASSERT_EQ(mix.size(), 2u) << mix.dump(2);
  const auto& m = mix["_Z6matmulPKfS0_Pfiii"];
  EXPECT_EQ(m["instructions"], 15);
  const nlohmann::json expected = {
      {"LDC", 1},       {"S2R", 1},   {"LDG", 1}, {"STS", 1}, {"BAR", 1},  {"LDS", 1}, {"FFMA", 2},
      {"WARPGROUP", 1}, {"HGMMA", 1}, {"BRA", 2}, {"STG", 1}, {"EXIT", 1}, {"NOP", 1}};
  EXPECT_EQ(m["opcodes"], expected) << m.dump(2);
  const auto& r = mix["_Z6reducePfi"];
  EXPECT_EQ(r["instructions"], 3);
  EXPECT_EQ(r["opcodes"], (nlohmann::json{{"LDC", 1}, {"SHFL", 1}, {"EXIT", 1}}));
  EXPECT_TRUE(parse_sass_mix("").empty());
  EXPECT_TRUE(parse_sass_mix("        /*0000*/  FFMA R1, R2, R3, R4 ;\n").empty())
      << "an instruction outside any function is not counted";
}

TEST(CudaSass, CuobjdumpFromEnvironmentElseBesideNvcc) {
  const char* old = std::getenv("PEAK_CUOBJDUMP");
  std::string saved = old ? old : "";
  ::setenv("PEAK_CUOBJDUMP", "/bin/true", 1);
  EXPECT_EQ(find_cuobjdump(), fs::path("/bin/true"));
  ::setenv("PEAK_CUOBJDUMP", "/nonexistent/cuobjdump", 1);
  EXPECT_TRUE(find_cuobjdump().empty());  // a wrong explicit choice is not silently replaced
  ::unsetenv("PEAK_CUOBJDUMP");
  fs::path found = find_cuobjdump();
  if (!found.empty()) {
    EXPECT_EQ(found.parent_path(), find_nvcc().parent_path());
  }
  if (old) ::setenv("PEAK_CUOBJDUMP", saved.c_str(), 1);
}

TEST(CudaDiagnostics, FileLineStyle) {
  EXPECT_EQ(normalize_diagnostics("kernel.cu(12): error: identifier \"x\" is undefined\n"),
            "kernel.cu:12: error: identifier \"x\" is undefined\n");
  EXPECT_EQ(normalize_diagnostics("kernel.cu(3): warning #177-D: unused\n  detail (x): y\n"),
            "kernel.cu:3: warning #177-D: unused\n  detail (x): y\n");
  EXPECT_EQ(normalize_diagnostics("1 error detected in the compilation of \"a.cu\".\n"),
            "1 error detected in the compilation of \"a.cu\".\n");
}

// ---- The artifact: a cubin, its kernels and what it needs from the driver ----

TEST(CudaCubin, FindsEntryKernelsAndUndefinedSymbols) {
  REQUIRE_NVCC();
  fs::path dir = cache_dir() / "inspect";
  fs::create_directories(dir);
  ASSERT_TRUE(write_file(dir / "k.cu", R"(#include <cstdio>
#include <cassert>
__device__ __noinline__ float helper(float x) { return x * 2.0f + 1.0f; }
__global__ void fill(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = helper(i);
}
template <int S>
__global__ void scaled(float* out) { out[threadIdx.x] *= S; }
template __global__ void scaled<3>(float*);
__global__ void chatty(int n) {
  printf("n = %d\n", n);
  assert(n > 0);
}
__global__ void grabby(float** keep, int n) {
  float* p = static_cast<float*>(malloc(n * sizeof(float)));
  keep[0] = p;
  if (n < 0) free(p);
}
)"));
  ProcessOptions po;
  po.argv.push_back(find_nvcc().string());
  for (const auto& f : pinned_flags("sm_90a")) po.argv.push_back(f);
  po.argv.insert(po.argv.end(), {"-o", (dir / "k.cubin").string(), (dir / "k.cu").string()});
  po.timeout_s = 120;
  auto r = run_process(po);
  ASSERT_TRUE(r) << r.error();
  ASSERT_TRUE(r->ok()) << r->out << r->err;

  auto info = inspect_cubin(dir / "k.cubin");
  ASSERT_TRUE(info) << info.error();
  EXPECT_TRUE(info->cuda);
  EXPECT_EQ(info->sm, 90);
  std::set<std::string> kernels(info->kernels.begin(), info->kernels.end());
  // Entry functions (st_other's CUDA entry flag), template instances included; device
  // functions are not kernels.
  EXPECT_EQ(kernels, (std::set<std::string>{"_Z4fillPfi", "_Z6scaledILi3EEvPf", "_Z6chattyi",
                                            "_Z6grabbyPPfi"}))
      << join(info->kernels, " ");
  std::set<std::string> undefined(info->undefined.begin(), info->undefined.end());
  for (const char* s : {"vprintf", "__assertfail", "malloc", "free"})
    EXPECT_TRUE(undefined.count(s)) << s << " not in: " << join(info->undefined, " ");
  EXPECT_FALSE(undefined.count("_Z6helperf"));

  // The same names, resolved from ptxas's log for the plan (short names).
  auto res = parse_ptxas_resources(r->out + r->err);
  EXPECT_EQ(res["kernels"]["fill"]["mangled"], "_Z4fillPfi") << res.dump(2);
  EXPECT_TRUE(res["kernels"].contains("scaled<3>")) << res.dump(2);
}

TEST(CudaCubin, RefusesWhatIsNotACubin) {
  fs::path dir = cache_dir() / "not-cubin";
  fs::create_directories(dir);
  ASSERT_TRUE(write_file(dir / "text.cubin", "__global__ void k() {}\n"));
  auto text = inspect_cubin(dir / "text.cubin");
  ASSERT_FALSE(text);
  EXPECT_TRUE(contains(text.error(), "not a readable cubin")) << text.error();
  ASSERT_TRUE(write_file(dir / "short.cubin", std::string(1, '\x7f') + "ELF"));
  EXPECT_FALSE(inspect_cubin(dir / "short.cubin"));
  EXPECT_FALSE(inspect_cubin(dir / "missing.cubin"));
  // A host ELF file reads, but is not device code.
  fs::path elf = fs::exists("/bin/true") ? fs::path("/bin/true") : fs::path("/usr/bin/true");
  auto host = inspect_cubin(elf);
  ASSERT_TRUE(host) << host.error();
  EXPECT_FALSE(host->cuda);
}

TEST(CudaCubin, ForbiddenDeviceSymbols) {
  for (std::string_view s : {"malloc", "free", "__nv_malloc"}) {
    auto why = forbidden_device_symbol(s);
    ASSERT_TRUE(why) << s;
    EXPECT_TRUE(contains(*why, "allocation")) << *why;
  }
  for (std::string_view s :
       {"cudaLaunchDevice", "cudaLaunchDeviceV2", "cudaGetParameterBuffer",
        "cudaGetParameterBufferV2", "cudaDeviceSynchronize", "cudaCGGetIntrinsicHandle"}) {
    auto why = forbidden_device_symbol(s);
    ASSERT_TRUE(why) << s;
    EXPECT_TRUE(contains(*why, "launches belong in the plan")) << *why;
  }
  // Anything else the driver would have to provide is refused too.
  for (std::string_view s : {"__cudaCDP2GetParameterBuffer", "cublasSgemm_v2", "my_extern"})
    EXPECT_TRUE(forbidden_device_symbol(s)) << s;
  // printf and assert are harmless; so are the compiler's own .nv. symbols.
  for (std::string_view s : {"vprintf", "__assertfail", ".nv.reservedSmem.offset0"})
    EXPECT_FALSE(forbidden_device_symbol(s)) << s;
}

// ---- Backend facts ----

TEST(CudaBackend, DescribesItself) {
  auto b = make_cuda_backend();
  EXPECT_EQ(b->name(), "cuda");
  EXPECT_EQ(b->source_extension(), ".cu");
  auto t = b->translation_table();
  EXPECT_EQ(t["thread index within the block"], "threadIdx");
  EXPECT_EQ(t["block index"], "blockIdx");
  EXPECT_EQ(t["block size"], "blockDim");
  EXPECT_EQ(t["shared memory"], "__shared__");
  EXPECT_EQ(t["barrier"], "__syncthreads()");
  EXPECT_EQ(t["global thread index"], "blockIdx * blockDim + threadIdx");
  EXPECT_TRUE(contains(t["tensor memory accelerator"], "tensor_map"))
      << t["tensor memory accelerator"];
  EXPECT_EQ(b->runner().filename(), "peak-runner-cuda");
  auto tc = b->toolchain();
  ASSERT_FALSE(tc.empty());
  EXPECT_EQ(tc[0].first, "nvcc");
  if (have_nvcc()) {
    EXPECT_NE(tc[0].second, "not found");
  }
  PlanDialect d = b->plan_dialect();
  EXPECT_EQ(d.backend, "cuda");
  EXPECT_TRUE(d.block && d.args && d.shared && d.cluster && d.tensor_maps);
  auto facts = b->prompt_facts(h100());
  std::string all;
  for (const auto& [k, v] : facts) all += k + ": " + v + "\n";
  EXPECT_TRUE(contains(all, "shared_memory_optin")) << all;
  EXPECT_TRUE(contains(all, "clusters")) << all;
}

TEST(CudaBackend, BaselineIsCublasForMatmul) {
  auto b = make_cuda_backend();
  const KernelContext& ctx = fp32_context();
  DeviceFacts dev;
  EXPECT_EQ(b->baseline(ctx, dev), "cublas");
  KernelContext half = ctx;
  half.arrays[0].dtype = half.arrays[1].dtype = DType::f16;
  EXPECT_EQ(b->baseline(half, dev), "cublas");
  KernelContext ints = ctx;
  ints.arrays[0].dtype = ints.arrays[1].dtype = DType::i32;
  EXPECT_EQ(b->baseline(ints, dev), "");
  KernelContext mixed = ctx;
  mixed.arrays[0].dtype = DType::f16;
  EXPECT_EQ(b->baseline(mixed, dev), "");
  KernelContext generic = ctx;
  generic.family = "";
  EXPECT_EQ(b->baseline(generic, dev), "");
}

TEST(CudaBackend, CheckResourcesAgainstSharedMemoryLimit) {
  auto b = make_cuda_backend();
  BuildResult br;
  br.resources = parse_ptxas_resources(kPtxasOlder);  // 33280 bytes of static shared memory
  DeviceFacts dev;
  dev.name = "Small GPU";
  dev.shared_memory_per_group = 16384;
  auto pr = b->check_resources(br, dev);
  EXPECT_EQ(pr.disposition, Disposition::invalid_config);
  EXPECT_TRUE(contains(pr.message, "33280")) << pr.message;
  dev.shared_memory_per_group = 49152;
  dev.shared_memory_per_group_optin = 232448;
  EXPECT_EQ(b->check_resources(br, dev).disposition, Disposition::passed);
  EXPECT_EQ(b->check_resources(BuildResult{}, dev).disposition, Disposition::passed);
}

TEST(CudaBackend, ProbeWithoutAGpuFailsClearly) {
  auto b = make_cuda_backend();
  auto facts = b->probe("", false);
  if (facts) {  // a machine with a GPU
    EXPECT_EQ(facts->backend, "cuda");
    EXPECT_TRUE(starts_with(facts->arch, "sm_")) << facts->arch;
    return;
  }
  EXPECT_FALSE(facts.error().empty());
  std::error_code ec;
  if (fs::exists(b->runner(), ec)) {
    EXPECT_TRUE(contains(facts.error(), "CUDA")) << facts.error();
  } else {
    EXPECT_TRUE(contains(facts.error(), "peak-runner-cuda")) << facts.error();
  }
}

// The PTX the runner ships (`stem`.ptx) assembles for sm_90a with kernel `name`, spilling nothing.
void expect_ptx_assembles(const std::string& stem, const std::string& ptx, const char* name) {
  fs::path nvcc = find_nvcc();
  if (nvcc.empty()) GTEST_SKIP() << "no CUDA toolkit";
  fs::path ptxas = nvcc.parent_path() / "ptxas";
  if (!fs::exists(ptxas)) GTEST_SKIP() << "no ptxas next to nvcc";
  fs::path dir = cache_dir() / stem;
  fs::create_directories(dir);
  ASSERT_TRUE(write_file(dir / (stem + ".ptx"), ptx));
  ProcessOptions po;
  po.argv = {ptxas.string(),
             "-arch=sm_90a",
             "-v",
             "-o",
             (dir / (stem + ".cubin")).string(),
             (dir / (stem + ".ptx")).string()};
  po.timeout_s = 60;
  auto r = run_process(po);
  ASSERT_TRUE(r) << r.error();
  ASSERT_TRUE(r->ok()) << r->out << r->err;
  auto res = parse_ptxas_resources(r->out + r->err);
  EXPECT_TRUE(res["kernels"].contains(name)) << res.dump(2);
  EXPECT_EQ(res["spills"], false);
}

TEST(CudaFmaBench, PtxAssembles) { expect_ptx_assembles("fma", fma_bench_ptx(), kFmaBenchName); }

TEST(CudaCopyKernel, PtxAssembles) {
  expect_ptx_assembles("copy", copy_kernel_ptx(), kCopyKernelName);
}

// Both input generators: the one of every GPU, and the one that also writes e4m3 (sm_89 and newer).
TEST(CudaInputGenerator, BothModulesAssemble) {
  expect_ptx_assembles("generate", generate_ptx(false), kGenerateName);
  expect_ptx_assembles("generate-fp8", generate_ptx(true), kGenerateName);
  EXPECT_EQ(generate_ptx(false).find("e4m3"), std::string::npos);
  EXPECT_NE(generate_ptx(true).find("cvt.rn.satfinite.e4m3x2.f32"), std::string::npos);
}

// ---- Builds with nvcc (each one costs seconds: keep them few) ----

TEST(CudaBuild, ExampleCompilesToACubinAndHitsTheCache) {
  REQUIRE_NVCC();
  auto b = make_cuda_backend();
  const KernelContext& ctx = fp32_context();
  auto text = read_file(ctx.dir / ctx.source_file);
  ASSERT_TRUE(text) << text.error();
  Config config = testing::default_tuning(ctx);
  BuildResult first = build(*b, ctx, *text, config);
  ASSERT_EQ(first.disposition, Disposition::passed) << first.log;
  EXPECT_FALSE(first.cached);
  EXPECT_TRUE(starts_with(first.toolchain, "nvcc ")) << first.toolchain;
  for (std::string_view want :
       {"-cubin", "-DBLOCK_X=16", "-DBLOCK_Y=16", "-gencode=arch=compute_90a,code=sm_90a"})
    EXPECT_TRUE(contains(first.command, want)) << want << " not in " << first.command;
  EXPECT_EQ(first.artifact.extension(), ".cubin");
  EXPECT_EQ(first.artifact.parent_path(), cache_dir());
  ASSERT_TRUE(first.resources["kernels"].contains("matmul")) << first.resources.dump(2);
  EXPECT_GT(first.resources["kernels"]["matmul"]["registers"].get<int>(), 0);
  EXPECT_EQ(first.resources["spills"], false);
  auto info = inspect_cubin(first.artifact);
  ASSERT_TRUE(info) << info.error();
  EXPECT_TRUE(info->cuda);
  EXPECT_EQ(info->sm, 90);
  EXPECT_EQ(info->kernels, std::vector<std::string>{"_Z6matmulPKfS0_Pfiii"});
  EXPECT_TRUE(fs::exists(fs::path(first.artifact).replace_extension(".json")));
  // What nvcc compiled: the device code under the file's own name, without the plan.
  auto unit = read_file(fs::path(first.artifact).replace_extension(".cu"));
  ASSERT_TRUE(unit) << unit.error();
  EXPECT_TRUE(contains(*unit, "#line 1 \"kernel.cu\"")) << *unit;
  EXPECT_FALSE(contains(*unit, "launch matmul")) << *unit;

  BuildResult again = build(*b, ctx, *text, config);
  ASSERT_EQ(again.disposition, Disposition::passed) << again.log;
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(again.artifact, first.artifact);
  EXPECT_EQ(again.resources, first.resources);
  EXPECT_EQ(again.log, first.log);
  EXPECT_EQ(again.command, first.command);

  // Another backend object (another process would do the same) finds the same artifact.
  BuildResult other = build(*make_cuda_backend(), ctx, *text, config);
  EXPECT_TRUE(other.cached);
  EXPECT_EQ(other.artifact, first.artifact);

  // A plan that launches the same kernels differently needs no new compilation.
  std::string replanned =
      replace_all(*text, "block = (BLOCK_X, BLOCK_Y)", "block = (BLOCK_X, BLOCK_Y, 1)");
  ASSERT_NE(replanned, *text);
  BuildResult same = build(*b, ctx, replanned, config);
  EXPECT_TRUE(same.cached);
  EXPECT_EQ(same.artifact, first.artifact);

  // Other tuning values are another compilation.
  Config wide = config;
  wide["BLOCK_X"] = 32;
  BuildResult changed = build(*b, ctx, *text, wide);
  ASSERT_EQ(changed.disposition, Disposition::passed) << changed.log;
  EXPECT_FALSE(changed.cached);
  EXPECT_NE(changed.artifact, first.artifact);
}

TEST(CudaBuild, TuningValuesReachTheCompilerAsDefines) {
  REQUIRE_NVCC();
  auto b = make_cuda_backend();
  std::string src = matmul_source(
      std::string("static_assert(BLOCK_X * BLOCK_Y == 512, \"the tuning values\");\n") +
          kNaiveDevice,
      kNaivePlan);
  BuildResult ok = build(*b, fp32_context(), src, {{"BLOCK_X", 32}, {"BLOCK_Y", 16}});
  EXPECT_EQ(ok.disposition, Disposition::passed) << ok.log;
  BuildResult bad = build(*b, fp32_context(), src, {{"BLOCK_X", 16}, {"BLOCK_Y", 16}});
  EXPECT_EQ(bad.disposition, Disposition::compile_failed);
  EXPECT_TRUE(contains(bad.log, "kernel.cu:5:")) << bad.log;
  EXPECT_TRUE(contains(bad.log, "the tuning values")) << bad.log;
}

TEST(CudaBuild, CompileErrorNamesKernelCuAndLine) {
  REQUIRE_NVCC();
  auto b = make_cuda_backend();
  const KernelContext& ctx = fp32_context();
  std::string src = matmul_source(
      "__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {\n"
      "  C[0] = undefined_name;\n"
      "}\n",
      kNaivePlan);
  BuildResult r = build(*b, ctx, src, testing::default_tuning(ctx));
  EXPECT_EQ(r.disposition, Disposition::compile_failed);
  EXPECT_TRUE(contains(r.log, "kernel.cu:6:")) << r.log;
  EXPECT_TRUE(contains(r.log, "undefined_name")) << r.log;
  EXPECT_TRUE(r.artifact.empty());
  BuildResult again = build(*b, ctx, src, testing::default_tuning(ctx));
  EXPECT_EQ(again.disposition, Disposition::compile_failed);
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(again.log, r.log);
}

// The real build path: nvcc runs in the compiler sandbox, so a candidate that includes a file from
// outside the workspace by its path gets a compile error that shows nothing of the file.
TEST(CudaBuild, IncludingAFileOutsideTheCandidateShowsNothingOfIt) {
  REQUIRE_NVCC();
  if (sandbox_support().level != SandboxSupport::Level::full)
    GTEST_SKIP() << "the sandbox has no namespaces here: " << sandbox_support().detail;
  auto dir = make_temp_dir("peak-cuda-secret-");
  ASSERT_TRUE(dir) << dir.error();
  const std::string secret = "sk_planted_cuda_6f5e4d3c2b1a";
  ASSERT_TRUE(write_file(*dir / "id_ed25519", "int " + secret + " = ;\n"));
  auto b = make_cuda_backend();
  const KernelContext& ctx = fp32_context();
  auto source = [&](const std::string& tag) {
    return matmul_source(
        "#include \"" + (*dir / "id_ed25519").string() + "\"\n// " + tag + "\n" + kNaiveDevice,
        kNaivePlan);
  };
  BuildResult r = build(*b, ctx, source("sandboxed"), testing::default_tuning(ctx));
  EXPECT_EQ(r.disposition, Disposition::compile_failed);
  EXPECT_EQ(r.log.find(secret), std::string::npos) << r.log;
  EXPECT_TRUE(contains(r.log, "id_ed25519")) << r.log;
  // Without the sandbox nvcc shows the line it could not parse: the check above can fail.
  bool was = sandbox_enabled();
  set_sandbox_enabled(false);
  BuildResult open = build(*b, ctx, source("unsandboxed"), testing::default_tuning(ctx));
  set_sandbox_enabled(was);
  EXPECT_TRUE(contains(open.log, secret)) << open.log;
  std::error_code ec;
  fs::remove_all(*dir, ec);
}

// nvcc sees its toolkit, the compile unit and its scratch folder: /etc/passwd, /etc/group (by
// path, as a system header, by a relative path out of the cache) and the cache's other files are
// not there, so each include fails and neither the log nor the cache holds a line of them.
TEST(CudaBuild, IncludingHostFilesShowsNothingOfThem) {
  REQUIRE_NVCC();
  if (sandbox_support().level != SandboxSupport::Level::full)
    GTEST_SKIP() << "the sandbox has no namespaces here: " << sandbox_support().detail;
  ASSERT_FALSE(testing::host_file_lines().empty()) << "no /etc/passwd to hide";
  const std::string secret = "sk_planted_neighbour_1a2b3c";
  ASSERT_TRUE(write_file(cache_dir() / "neighbour.h", "int " + secret + " = ;\n"));
  std::vector<std::string> includes = testing::hostile_includes();
  includes.push_back("#include \"neighbour.h\"");
  auto b = make_cuda_backend();
  const KernelContext& ctx = fp32_context();
  for (const std::string& include : includes) {
    SCOPED_TRACE(include);
    BuildResult r = build(*b, ctx, matmul_source(include + "\n" + kNaiveDevice, kNaivePlan),
                          testing::default_tuning(ctx));
    EXPECT_EQ(r.disposition, Disposition::compile_failed) << r.log;
    EXPECT_EQ(testing::host_line_in(r.log), "") << r.log;
    EXPECT_EQ(r.log.find(secret), std::string::npos) << r.log;
    EXPECT_TRUE(contains(r.log, "No such file or directory")) << r.log;
  }
  std::error_code ec;
  fs::remove(cache_dir() / "neighbour.h", ec);
  EXPECT_EQ(testing::host_line_under(cache_dir()), "");
}

// A kernel that keeps `bytes` of static __device__ data (`decl` declares `keep` of that size).
std::string static_data_source(const std::string& decl) {
  return matmul_source(
      decl +
          "\n__global__ void matmul(const float* A, const float* B, float* C, int M, int N, "
          "int K) {\n"
          "  int col = blockIdx.x * blockDim.x + threadIdx.x;\n"
          "  int row = blockIdx.y * blockDim.y + threadIdx.y;\n"
          "  if (row >= M || col >= N) return;\n"
          "  float acc = 0.0f;\n"
          "  for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];\n"
          "  unsigned long long at = (unsigned long long)row * 65536ull * 1024ull + col;\n"
          "  keep[at % (sizeof(keep) / sizeof(keep[0]))] = acc;\n"
          "  C[row * N + col] = acc + keep[col];\n"
          "}\n",
      kNaivePlan);
}

// Static data is read from the cubin's sections and symbols (ptxas's "bytes gmem" wraps at 4 GiB:
// it says 0 for an 8 GiB array): every size above 64 KiB, initialized or not, is
// workspace_exceeded at build time, whatever its size; 64 KiB itself passes.
TEST(CudaBuild, StaticDeviceDataAbove64KiBIsWorkspaceExceeded) {
  REQUIRE_NVCC();
  auto b = make_cuda_backend();
  const KernelContext& ctx = fp32_context();
  struct Case {
    std::string decl;
    int64_t bytes;
  };
  const int64_t KiB = 1024, GiB = int64_t{1} << 30;
  const std::vector<Case> over = {
      {"__device__ float keep[16385];", 64 * KiB + 4},
      {"__device__ float keep[16385] = {1.0f, 2.0f};", 64 * KiB + 4},
      {"__device__ float keep[1u << 28];", 1 * GiB},
      {"__device__ unsigned char keep[4294967296ull];", 4 * GiB},
      {"__device__ unsigned char keep[4294967296ull + 65540ull];", 4 * GiB + 64 * KiB + 4},
      {"__device__ unsigned char keep[8589934592ull];", 8 * GiB},
      {"__device__ unsigned char keep[4294967296ull];\n"
       "__device__ unsigned char keep2[4294967296ull];\n"
       "__global__ void other(float* C) { keep2[(unsigned long long)C[0]] = 1; C[1] = keep2[5]; }",
       8 * GiB},
      {"__device__ unsigned char keep[12884901888ull];", 12 * GiB},
  };
  for (const Case& c : over) {
    SCOPED_TRACE(c.decl);
    BuildResult r = build(*b, ctx, static_data_source(c.decl), testing::default_tuning(ctx));
    ASSERT_EQ(r.disposition, Disposition::passed) << r.log;
    EXPECT_GE(r.resources.value("global_bytes", int64_t{0}), c.bytes) << r.resources.dump();
    PlanResult pr = b->check_resources(r, h100());
    EXPECT_EQ(pr.disposition, Disposition::workspace_exceeded) << pr.message;
    EXPECT_TRUE(contains(pr.message, "65536")) << pr.message;
  }
  BuildResult fits = build(*b, ctx, static_data_source("__device__ float keep[16384];"),
                           testing::default_tuning(ctx));
  ASSERT_EQ(fits.disposition, Disposition::passed) << fits.log;
  EXPECT_EQ(fits.resources.value("global_bytes", int64_t{0}), 64 * KiB) << fits.resources.dump();
  EXPECT_EQ(b->check_resources(fits, h100()).disposition, Disposition::passed);
  // A build cached with a smaller figure is measured again from its cubin.
  BuildResult big = build(*b, ctx, static_data_source(over[5].decl), testing::default_tuning(ctx));
  fs::path meta = fs::path(big.artifact).replace_extension(".json");
  auto j = nlohmann::json::parse(*read_file(meta));
  j["resources"]["global_bytes"] = 0;
  ASSERT_TRUE(write_file(meta, j.dump()));
  BuildResult again =
      build(*b, ctx, static_data_source(over[5].decl), testing::default_tuning(ctx));
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(b->check_resources(again, h100()).disposition, Disposition::workspace_exceeded);
}

TEST(CudaBuild, PlanLaunchingAKernelTheDeviceRegionLacksFailsTheBuild) {
  REQUIRE_NVCC();
  auto b = make_cuda_backend();
  const KernelContext& ctx = fp32_context();
  std::string src =
      matmul_source(kNaiveDevice, replace_all(kNaivePlan, "launch matmul", "launch matmul_fast"));
  BuildResult r = build(*b, ctx, src, testing::default_tuning(ctx));
  EXPECT_EQ(r.disposition, Disposition::compile_failed);
  EXPECT_TRUE(contains(r.log, "`matmul_fast`")) << r.log;
  EXPECT_TRUE(contains(r.log, "kernels: matmul")) << r.log;
}

TEST(CudaBuild, TemplateKernelNeedsANonTemplateWrapper) {
  REQUIRE_NVCC();
  auto b = make_cuda_backend();
  const KernelContext& ctx = fp32_context();
  std::string device =
      "template <int UNROLL>\n"
      "__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {\n"
      "  C[0] = A[0] * B[0] * UNROLL;\n"
      "}\n"
      "template __global__ void matmul<4>(const float*, const float*, float*, int, int, int);\n";
  BuildResult r = build(*b, ctx, matmul_source(device, kNaivePlan), testing::default_tuning(ctx));
  EXPECT_EQ(r.disposition, Disposition::compile_failed);
  EXPECT_TRUE(contains(r.log, "matmul<4>")) << r.log;
  EXPECT_TRUE(contains(r.log, "non-template __global__ wrapper")) << r.log;
}

TEST(CudaBuild, PlanThatDoesNotParseFailsNamingTheLine) {
  // Refused before nvcc runs: no toolkit needed.
  auto b = make_cuda_backend();
  const KernelContext& ctx = fp32_context();
  std::string plan = std::string(kNaivePlan) + "matmul<<<grid, block>>>(A, B, C, M, N, K);\n";
  std::string src = matmul_source(kNaiveDevice, plan);
  int line = 0;
  auto lines = split_lines(src);
  for (size_t i = 0; i < lines.size(); ++i)
    if (contains(lines[i], "<<<")) line = static_cast<int>(i) + 1;
  ASSERT_GT(line, 0);
  BuildResult r = build(*b, ctx, src);
  EXPECT_EQ(r.disposition, Disposition::compile_failed);
  EXPECT_TRUE(contains(r.log, "kernel.cu:" + std::to_string(line) + ":")) << r.log;
  EXPECT_TRUE(contains(r.log, "launch plan")) << r.log;
  EXPECT_TRUE(r.command.empty()) << r.command;
  EXPECT_TRUE(r.artifact.empty());

  // An attribute outside any statement is refused the same way.
  BuildResult stray =
      build(*b, ctx, matmul_source(kNaiveDevice, "grid = (1)\n" + std::string(kNaivePlan)));
  EXPECT_EQ(stray.disposition, Disposition::compile_failed);
  EXPECT_TRUE(contains(stray.log, "kernel.cu:")) << stray.log;
  EXPECT_TRUE(contains(stray.log, "attribute")) << stray.log;
}

TEST(CudaBuild, DeviceMallocIsForbiddenApi) {
  REQUIRE_NVCC();
  auto text = read_file(testing::kCudaCorpusDir / "device_malloc.cu");
  ASSERT_TRUE(text) << text.error();
  BuildResult r = build(*make_cuda_backend(), corpus_context(), *text,
                        testing::default_tuning(corpus_context()));
  EXPECT_EQ(r.disposition, Disposition::forbidden_api) << r.log;
  EXPECT_TRUE(contains(r.log, "malloc (device-side allocation")) << r.log;
  EXPECT_TRUE(contains(r.log, "candidates may not use")) << r.log;
}

TEST(CudaBuild, DeviceSideLaunchIsACompileFailure) {
  REQUIRE_NVCC();
  auto text = read_file(testing::kCudaCorpusDir / "device_launch.cu");
  ASSERT_TRUE(text) << text.error();
  BuildResult r = build(*make_cuda_backend(), corpus_context(), *text,
                        testing::default_tuning(corpus_context()));
  EXPECT_EQ(r.disposition, Disposition::compile_failed) << r.log;
  EXPECT_TRUE(contains(r.log, "separate compilation")) << r.log;
  EXPECT_TRUE(contains(r.log, "kernel.cu:")) << r.log;
}

// Sets an environment variable for one scope (restores the previous value).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) saved_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (saved_)
      ::setenv(name_, saved_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

// The mix reaches the build's resources through the sandboxed cuobjdump (a stand-in printing
// kSass here, so that the data path is checked on machines whose toolkit has no cuobjdump), is
// absent when cuobjdump is missing or fails, and is added to a build cached without one.
TEST(CudaBuild, InstructionMixIsRecordedWithTheResources) {
  REQUIRE_NVCC();
  auto dir = make_temp_dir("peak-cuobjdump-");
  ASSERT_TRUE(dir) << dir.error();
  fs::path tool = *dir / "bin" / "cuobjdump";
  ASSERT_TRUE(write_file(tool, std::string("#!/bin/sh\n[ \"$1\" = -sass ] && [ -f \"$2\" ] || "
                                           "exit 3\ncat <<'EOF'\n") +
                                   kSass + "EOF\n"));
  fs::permissions(tool, fs::perms::owner_all);
  fs::path failing = *dir / "bin" / "failing";
  ASSERT_TRUE(write_file(failing, "#!/bin/sh\necho 'cuobjdump fatal' >&2\nexit 1\n"));
  fs::permissions(failing, fs::perms::owner_all);
  auto b = make_cuda_backend();
  // A source no other test builds: its first build is not cached.
  const std::string src =
      matmul_source(std::string("// the instruction-mix test\n") + kNaiveDevice, kNaivePlan);
  const Config config = {{"BLOCK_X", 16}, {"BLOCK_Y", 16}};
  {
    ScopedEnv env("PEAK_CUOBJDUMP", "/nonexistent/cuobjdump");
    BuildResult none = build(*b, fp32_context(), src, config);
    ASSERT_EQ(none.disposition, Disposition::passed) << none.log;
    EXPECT_FALSE(none.cached);
    EXPECT_FALSE(none.resources.contains("sass")) << none.resources.dump(2);
  }
  {
    ScopedEnv env("PEAK_CUOBJDUMP", failing.string());
    BuildResult failed = build(*b, fp32_context(), src, config);
    ASSERT_EQ(failed.disposition, Disposition::passed) << failed.log;
    EXPECT_TRUE(failed.cached);
    EXPECT_FALSE(failed.resources.contains("sass"));
  }
  ScopedEnv env("PEAK_CUOBJDUMP", tool.string());
  BuildResult r = build(*b, fp32_context(), src, config);
  ASSERT_EQ(r.disposition, Disposition::passed) << r.log;
  EXPECT_TRUE(r.cached);  // cached before the mix was recorded: it is added now
  ASSERT_TRUE(r.resources.contains("sass")) << r.resources.dump(2);
  const auto& sass = r.resources["sass"];
  EXPECT_EQ(sass["format"], 1);
  // Named as ptxas's kernels are; a function that is no kernel of the report by its short name.
  ASSERT_TRUE(sass["kernels"].contains("matmul")) << sass.dump(2);
  EXPECT_EQ(sass["kernels"]["matmul"]["mangled"], "_Z6matmulPKfS0_Pfiii");
  EXPECT_EQ(sass["kernels"]["matmul"]["instructions"], 15);
  EXPECT_EQ(sass["kernels"]["matmul"]["opcodes"]["HGMMA"], 1);
  EXPECT_EQ(sass["kernels"]["reduce"]["instructions"], 3);
  EXPECT_TRUE(r.resources["kernels"].contains("matmul"));  // ptxas's report is unchanged
  // The cache entry now holds it: a later build reads it without running cuobjdump.
  auto meta = read_file(fs::path(r.artifact).replace_extension(".json"));
  ASSERT_TRUE(meta) << meta.error();
  EXPECT_EQ(nlohmann::json::parse(*meta)["resources"]["sass"], sass);
  ScopedEnv gone("PEAK_CUOBJDUMP", "/nonexistent/cuobjdump");
  BuildResult again = build(*b, fp32_context(), src, config);
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(again.resources, r.resources);
  fs::remove_all(*dir);
}

// The real disassembler on a real cubin: a kernel of fmaf calls has FFMA instructions.
TEST(CudaBuild, InstructionMixOfARealCubinCountsFfma) {
  REQUIRE_NVCC();
  if (find_cuobjdump().empty())
    GTEST_SKIP() << "no cuobjdump beside nvcc (" << find_nvcc() << ") and no PEAK_CUOBJDUMP";
  auto b = make_cuda_backend();
  const std::string device =
      "// the FFMA instruction-mix test\n"
      "__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {\n"
      "  int col = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  int row = blockIdx.y * blockDim.y + threadIdx.y;\n"
      "  if (row >= M || col >= N) return;\n"
      "  float acc = 0.0f;\n"
      "  for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);\n"
      "  C[row * N + col] = acc;\n"
      "}\n";
  BuildResult r = build(*b, fp32_context(), matmul_source(device, kNaivePlan),
                        {{"BLOCK_X", 16}, {"BLOCK_Y", 16}});
  ASSERT_EQ(r.disposition, Disposition::passed) << r.log;
  ASSERT_TRUE(r.resources.contains("sass")) << "cuobjdump " << find_cuobjdump() << " gave no mix";
  const auto& k = r.resources["sass"]["kernels"]["matmul"];
  EXPECT_EQ(k["mangled"], "_Z6matmulPKfS0_Pfiii");
  ASSERT_TRUE(k["opcodes"].contains("FFMA")) << k.dump(2);
  EXPECT_GT(k["opcodes"]["FFMA"].get<int64_t>(), 0);
  EXPECT_GT(k["instructions"].get<int64_t>(), k["opcodes"]["FFMA"].get<int64_t>());
  EXPECT_TRUE(k["opcodes"].contains("EXIT")) << k.dump(2);
}

TEST(CudaBuild, MissingNvccIsACompileFailureWithAHint) {
  const char* old = std::getenv("PEAK_NVCC");
  std::string saved = old ? old : "";
  ::setenv("PEAK_NVCC", "/nonexistent/nvcc", 1);
  auto b = make_cuda_backend();
  BuildResult r = build(*b, fp32_context(), matmul_source(kNaiveDevice, kNaivePlan));
  if (old)
    ::setenv("PEAK_NVCC", saved.c_str(), 1);
  else
    ::unsetenv("PEAK_NVCC");
  EXPECT_EQ(r.disposition, Disposition::compile_failed);
  EXPECT_TRUE(contains(r.log, "PEAK_NVCC")) << r.log;
  EXPECT_TRUE(contains(r.log, "nvcc was not found")) << r.log;
}

// ---- Backend::plan: the evaluated plan checked against the device and resolved ----

// A build's resources as ptxas reports them, without compiling (CI machines may lack nvcc).
BuildResult fake_build(std::string_view ptxas_log) {
  BuildResult b;
  b.disposition = Disposition::passed;
  b.artifact = "/nonexistent/fake.cubin";
  b.resources = parse_ptxas_resources(ptxas_log);
  return b;
}

constexpr const char* kMatmulPtxas =
    R"(ptxas info    : Compiling entry function '_Z6matmulPKfS0_Pfiii' for 'sm_90a'
ptxas info    : Function properties for _Z6matmulPKfS0_Pfiii
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers
)";

PlanResult plan_for(const std::string& host, const Shape& s, const DeviceFacts& dev,
                    std::string_view ptxas = kMatmulPtxas,
                    const KernelContext& ctx = fp32_context(),
                    const std::string& device = kNaiveDevice) {
  auto b = make_cuda_backend();
  return b->plan(ctx, regions_of(matmul_source(device, host)), s, testing::default_tuning(ctx), dev,
                 fake_build(ptxas));
}

TEST(CudaPlan, ResolvesTheMangledSymbolAndBindsTheArguments) {
  PlanResult pr = plan_for(kNaivePlan, shape(384, 320, 200), h100());
  ASSERT_EQ(pr.disposition, Disposition::passed) << pr.message;
  LaunchPlan p = plan_of(pr, fp32_context());
  ASSERT_EQ(p.steps.size(), 1u);
  const PlanStep& st = p.steps[0];
  EXPECT_EQ(st.op, PlanStep::Op::launch);
  EXPECT_EQ(st.kernel, "matmul");
  EXPECT_EQ(st.symbol, "_Z6matmulPKfS0_Pfiii");
  EXPECT_EQ(st.grid, (std::array<int64_t, 3>{20, 24, 1}));
  EXPECT_EQ(st.block, (std::array<int64_t, 3>{16, 16, 1}));
  EXPECT_EQ(st.cluster, (std::array<int64_t, 3>{1, 1, 1}));
  EXPECT_EQ(st.shared, 0);
  ASSERT_EQ(st.args.size(), 6u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(st.args[static_cast<size_t>(i)].kind, PlanArg::Kind::array);
    EXPECT_EQ(st.args[static_cast<size_t>(i)].index, i);  // A, B, C in kernel.toml order
  }
  EXPECT_EQ(st.args[3].kind, PlanArg::Kind::value);
  EXPECT_EQ(st.args[3].value, 384);
  EXPECT_EQ(st.args[4].value, 320);
  EXPECT_EQ(st.args[5].value, 200);
  EXPECT_TRUE(p.scratch.empty());
  EXPECT_TRUE(p.tensor_maps.empty());

  // A kernel the build does not hold (a stale build for this plan) fails to resolve.
  PlanResult missing =
      plan_for(replace_all(kNaivePlan, "launch matmul", "launch other"), shape(64, 64, 64), h100());
  EXPECT_EQ(missing.disposition, Disposition::compile_failed);
  EXPECT_TRUE(contains(missing.message, "`other`")) << missing.message;
}

TEST(CudaPlan, DynamicSharedMemoryAboveTheOptInIsInvalidConfig) {
  // 33280 bytes of static shared memory (the ptxas log), plus what the plan asks for.
  constexpr const char* kStatic =
      R"(ptxas info    : Compiling entry function '_Z6matmulPKfS0_Pfiii' for 'sm_90a'
ptxas info    : Used 40 registers, used 1 barriers, 33280 bytes smem
)";
  auto with_shared = [](const std::string& bytes) {
    return replace_all(kNaivePlan, "  args =", "  shared = " + bytes + "\n  args =");
  };
  PlanResult fits = plan_for(with_shared("150 * 1024"), shape(256, 256, 256), h100(), kStatic);
  ASSERT_EQ(fits.disposition, Disposition::passed) << fits.message;
  EXPECT_EQ(plan_of(fits, fp32_context()).steps[0].shared, 150 * 1024);
  // 153600 + 33280 bytes: more than an A100 allows one block.
  PlanResult a100_too_much =
      plan_for(with_shared("150 * 1024"), shape(256, 256, 256), a100(), kStatic);
  EXPECT_EQ(a100_too_much.disposition, Disposition::invalid_config);
  EXPECT_TRUE(contains(a100_too_much.message, "186880")) << a100_too_much.message;
  EXPECT_TRUE(contains(a100_too_much.message, "166912")) << a100_too_much.message;
  // 200 KiB + 33280 bytes: more than an H100 allows.
  PlanResult h100_too_much =
      plan_for(with_shared("200 * 1024"), shape(256, 256, 256), h100(), kStatic);
  EXPECT_EQ(h100_too_much.disposition, Disposition::invalid_config);
  EXPECT_TRUE(contains(h100_too_much.message, "232448")) << h100_too_much.message;
  // The device facts are plan names: a plan can size its tiles to the device.
  PlanResult sized =
      plan_for(with_shared("shared_memory_optin - 33280"), shape(256, 256, 256), a100(), kStatic);
  ASSERT_EQ(sized.disposition, Disposition::passed) << sized.message;
  EXPECT_EQ(plan_of(sized, fp32_context()).steps[0].shared, 166912 - 33280);
}

TEST(CudaPlan, RegistersTimesThreadsOverTheLimitIsInvalidConfig) {
  constexpr const char* k255 =
      R"(ptxas info    : Compiling entry function '_Z6matmulPKfS0_Pfiii' for 'sm_90a'
ptxas info    : Used 255 registers, used 0 barriers
)";
  auto with_block = [](const std::string& block) {
    return replace_all(kNaivePlan, "block = (BLOCK_X, BLOCK_Y)", "block = " + block);
  };
  EXPECT_EQ(plan_for(with_block("(16, 16)"), shape(256, 256, 256), h100(), k255).disposition,
            Disposition::passed);  // 65280 registers
  PlanResult pr = plan_for(with_block("(32, 32)"), shape(256, 256, 256), h100(), k255);
  EXPECT_EQ(pr.disposition, Disposition::invalid_config);
  EXPECT_TRUE(contains(pr.message, "261120")) << pr.message;
  EXPECT_TRUE(contains(pr.message, "65536")) << pr.message;
  // More threads than a block may have fails before the registers are counted.
  PlanResult threads = plan_for(with_block("(64, 32)"), shape(256, 256, 256), h100());
  EXPECT_EQ(threads.disposition, Disposition::invalid_config);
  EXPECT_TRUE(contains(threads.message, "2048 threads")) << threads.message;
}

TEST(CudaPlan, ClustersAndTensorMapsNeedSm90) {
  std::string cluster = replace_all(kNaivePlan, "  args =", "  cluster = (2, 1, 1)\n  args =");
  cluster = replace_all(cluster, "grid = (ceil_div(N, BLOCK_X), ",
                        "grid = (round_up(ceil_div(N, BLOCK_X), 2), ");
  PlanResult on_h100 = plan_for(cluster, shape(256, 256, 256), h100());
  ASSERT_EQ(on_h100.disposition, Disposition::passed) << on_h100.message;
  EXPECT_EQ(plan_of(on_h100, fp32_context()).steps[0].cluster, (std::array<int64_t, 3>{2, 1, 1}));
  PlanResult on_a100 = plan_for(cluster, shape(256, 256, 256), a100());
  EXPECT_EQ(on_a100.disposition, Disposition::invalid_config);
  EXPECT_TRUE(contains(on_a100.message, "sm_90")) << on_a100.message;
  EXPECT_TRUE(contains(on_a100.message, "sm_80")) << on_a100.message;
  // A grid that is not a multiple of the cluster cannot launch.
  PlanResult odd = plan_for(replace_all(cluster, "round_up(ceil_div(N, BLOCK_X), 2)", "3"),
                            shape(256, 256, 256), h100());
  EXPECT_EQ(odd.disposition, Disposition::invalid_config);
  // 16 blocks per cluster is sm_90's non-portable limit (the runner allows it for the kernel);
  // more is refused before anything runs.
  auto with_cluster = [&](int blocks) {
    return replace_all(replace_all(cluster, "cluster = (2, 1, 1)",
                                   "cluster = (" + std::to_string(blocks) + ", 1, 1)"),
                       "round_up(ceil_div(N, BLOCK_X), 2)", std::to_string(blocks));
  };
  PlanResult sixteen = plan_for(with_cluster(16), shape(256, 256, 256), h100());
  EXPECT_EQ(sixteen.disposition, Disposition::passed) << sixteen.message;
  PlanResult big = plan_for(with_cluster(32), shape(256, 256, 256), h100());
  EXPECT_EQ(big.disposition, Disposition::invalid_config);
  EXPECT_TRUE(contains(big.message, "exceeds 16")) << big.message;

  std::string tma =
      "tensor_map a_map\n"
      "  array = A\n"
      "  dims = (K, M)\n"
      "  box = (32, 16)\n" +
      std::string(kNaivePlan);
  PlanResult map_h100 = plan_for(tma, shape(256, 256, 256), h100());
  ASSERT_EQ(map_h100.disposition, Disposition::passed) << map_h100.message;
  LaunchPlan p = plan_of(map_h100, fp32_context());
  ASSERT_EQ(p.tensor_maps.size(), 1u);
  EXPECT_EQ(p.tensor_maps[0].dims, (std::vector<int64_t>{256, 256}));
  EXPECT_EQ(p.tensor_maps[0].global_strides, (std::vector<int64_t>{1024}));
  PlanResult map_a100 = plan_for(tma, shape(256, 256, 256), a100());
  EXPECT_EQ(map_a100.disposition, Disposition::invalid_config);
  EXPECT_TRUE(contains(map_a100.message, "sm_90")) << map_a100.message;
  // A row stride that is not a multiple of 16 bytes cannot be a tensor map.
  EXPECT_EQ(plan_for(tma, shape(256, 256, 129), h100()).disposition, Disposition::invalid_config);
}

TEST(CudaPlan, RequireFalseIsInvalidConfig) {
  std::string plan = "require K % 64 == 0\n" + std::string(kNaivePlan);
  EXPECT_EQ(plan_for(plan, shape(256, 256, 256), h100()).disposition, Disposition::passed);
  PlanResult pr = plan_for(plan, shape(384, 320, 200), h100());
  EXPECT_EQ(pr.disposition, Disposition::invalid_config);
  EXPECT_TRUE(contains(pr.message, "kernel.cu:")) << pr.message;
  EXPECT_TRUE(contains(pr.message, "K=200")) << pr.message;  // the shape it refused
}

TEST(CudaPlan, ScratchBeyondTheWorkspaceIsWorkspaceExceeded) {
  std::string plan =
      "scratch partial\n"
      "  dtype = f32\n"
      "  count = 2 * M * N\n" +
      replace_all(kNaivePlan, "args = (A, B, C, M, N, K)", "args = (A, B, partial, M, N, K)");
  KernelContext granted = fp32_context();
  granted.workspace = "8 * M * N";
  PlanResult ok = plan_for(plan, shape(256, 256, 256), h100(), kMatmulPtxas, granted);
  ASSERT_EQ(ok.disposition, Disposition::passed) << ok.message;
  LaunchPlan p = plan_of(ok, granted);
  ASSERT_EQ(p.scratch.size(), 1u);
  EXPECT_EQ(p.scratch[0].bytes, 8 * 256 * 256);
  EXPECT_EQ(p.steps[0].args[2].kind, PlanArg::Kind::scratch);

  KernelContext small = fp32_context();
  small.workspace = "4 * M * N";
  PlanResult over = plan_for(plan, shape(256, 256, 256), h100(), kMatmulPtxas, small);
  EXPECT_EQ(over.disposition, Disposition::workspace_exceeded);
  EXPECT_TRUE(contains(over.message, "524288")) << over.message;
  EXPECT_TRUE(contains(over.message, "262144")) << over.message;
  // A context that grants nothing refuses every scratch buffer.
  EXPECT_EQ(plan_for(plan, shape(256, 256, 256), h100()).disposition,
            Disposition::workspace_exceeded);
}

// ---- The example contexts ----

// Plans `ctx`'s seed at every shape (the suite's included) with its default configuration,
// builds it and plans it again against the build; the build, for the caller's checks.
BuildResult plans_every_shape_and_builds(const KernelContext& ctx,
                                         const std::vector<std::string>& kernels) {
  auto text = read_file(ctx.dir / ctx.source_file);
  EXPECT_TRUE(text) << text.error();
  auto regions = split_regions(text ? *text : "", ctx.source_file);
  EXPECT_TRUE(regions) << regions.error();
  auto parsed = parse_plan(*regions, ctx.source_file);
  EXPECT_TRUE(parsed) << parsed.error();
  if (!text || !regions || !parsed) return {};
  EXPECT_EQ(parsed->kernels(), kernels);
  Config config = testing::default_tuning(ctx);
  auto backend = make_cuda_backend();
  for (const Shape& s : every_shape(ctx)) {
    PlanOutcome o = evaluate_plan(*parsed, backend->plan_dialect(), ctx,
                                  plan_env(ctx, *regions, s, config, device_plan_env(h100())));
    EXPECT_EQ(o.disposition, Disposition::passed) << s.text() << ": " << o.message;
  }
  if (!have_nvcc()) return {};
  BuildResult r = build(*backend, ctx, *text, config);
  EXPECT_EQ(r.disposition, Disposition::passed) << r.log;
  if (r.disposition != Disposition::passed) return r;
  for (const Shape& s : every_shape(ctx)) {
    PlanResult pr = backend->plan(ctx, *regions, s, config, h100(), r);
    EXPECT_EQ(pr.disposition, Disposition::passed) << s.text() << ": " << pr.message;
    // Each launch names its kernel's entry by the symbol the build found.
    for (const PlanStep& st : plan_of(pr, ctx).steps) {
      if (st.op != PlanStep::Op::launch) continue;
      EXPECT_EQ(st.symbol, r.resources["kernels"][st.kernel]["mangled"].get<std::string>());
    }
  }
  return r;
}

class CudaExample : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaExample, PlansEveryShapeAndBuilds) {
  auto ctx = load_context(kSource / "examples" / GetParam());
  ASSERT_TRUE(ctx) << ctx.error();
  EXPECT_EQ(ctx->backend, "cuda");
  EXPECT_EQ(ctx->family, "matmul");
  EXPECT_EQ(make_cuda_backend()->baseline(*ctx, DeviceFacts{}), "cublas");
  BuildResult r = plans_every_shape_and_builds(*ctx, {"matmul"});
  REQUIRE_NVCC();
  ASSERT_EQ(r.disposition, Disposition::passed);
  EXPECT_EQ(r.resources["spills"], false);
}

INSTANTIATE_TEST_SUITE_P(Examples, CudaExample,
                         ::testing::Values("matmul-cuda-fp32", "matmul-cuda-fp16"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// The attention seeds, fp16 and bf16 (three kernels, the scores in a scratch buffer the
// context's workspace grants): planned at every shape, the suite's 8192-token prefill included,
// and built; timed beside cuDNN's fused attention (their arrays are fp16 or bf16).
TEST(CudaAttentionExample, PlansEveryShapeAndBuilds) {
  for (const char* example : {"attention-cuda-fp16", "attention-cuda-bf16"}) {
    auto ctx = load_context(kSource / "examples" / example);
    ASSERT_TRUE(ctx) << ctx.error();
    EXPECT_EQ(ctx->family, "attention");
    EXPECT_EQ(make_cuda_backend()->baseline(*ctx, DeviceFacts{}), "cudnn") << example;
    BuildResult r = plans_every_shape_and_builds(*ctx, {"scores", "probabilities", "weighted_sum"});
    REQUIRE_NVCC();
    EXPECT_EQ(r.disposition, Disposition::passed) << example << ": " << r.log;
  }
}

// ---- The integrity corpus (tests/integrity/cuda): build-time and plan-time dispositions ----

// Decided without running anything: by the build, or by the plan checked against the device.
const std::set<std::string> kBuildTime = {"forbidden_api", "compile_failed"};
const std::set<std::string> kPlanTime = {"invalid_config", "workspace_exceeded"};

TEST(CudaCorpus, CoversTheKnownAttacks) {
  auto cases = testing::corpus_cases();
  std::set<std::string> files;
  for (const CorpusCase& c : cases) {
    files.insert(c.file);
    for (const auto& p : c.problems) ADD_FAILURE() << c.file << ": " << p;
    bool control = starts_with(c.file, "correct_");
    if (control) {
      EXPECT_EQ(c.expect, std::set<std::string>{"passed"}) << c.file;
    } else if (c.expect.count("passed") && !c.harmless.empty()) {
      // An attack that passes because it gains nothing: timing shows it (every timed launch is
      // read back and right).
      EXPECT_EQ(c.timed, "passed") << c.file << ": a harmless attack is timed and passes";
    } else if (c.expect.count("passed")) {
      // An attack the gate lets through is a known gap: it says so, and timing must catch it.
      EXPECT_FALSE(c.gap.empty()) << c.file << ": an attack expected to pass needs `// gap:`";
      EXPECT_FALSE(c.timed.empty() || c.timed == "passed")
          << c.file << ": an attack expected to pass validation needs a `// timed:` rejection";
    }
    int stages = 0;
    for (const auto& d : c.expect) stages += kBuildTime.count(d) + kPlanTime.count(d);
    if (stages > 0) {
      EXPECT_EQ(c.expect.size(), 1u) << c.file
                                     << ": a build- or plan-time disposition is "
                                        "decided before anything runs; list it alone";
    }
  }
  // Device-side attacks and accidents (docs/validation.md says why the host-side ones are gone),
  // and attempts to reach memory the kernel was not given. A case cannot silently disappear.
  for (const char* f : {"correct_tiled.cu",
                        "out_of_bounds.cu",
                        "race_missing_syncthreads.cu",
                        "unwritten_tile.cu",
                        "partial_computation.cu",
                        "stale_output.cu",
                        "inputs_modified.cu",
                        "hardcoded_shape.cu",
                        "infinite_loop.cu",
                        "sticky_error.cu",
                        "fp16_accumulate.cu",
                        "silent_tf32.cu",
                        "smem_over_limit.cu",
                        "static_smem_over_limit.cu",
                        "cached_by_pointer.cu",
                        "baseline_leftovers.cu",
                        "oob_read_next_allocation.cu",
                        "scan_previous_scratch.cu",
                        "scratch_beyond_workspace.cu",
                        "device_malloc.cu",
                        "device_launch.cu",
                        "cache_static_content_hash.cu",
                        "cache_scratch_content_hash.cu",
                        "cache_pointer_key.cu",
                        "cache_shape_key.cu",
                        "cache_call_counter.cu"})
    EXPECT_TRUE(files.count(f)) << "missing corpus case " << f;
  // Every case is in the table of docs/backend-cuda.md.
  auto doc = read_file(kSource / "docs" / "backend-cuda.md");
  ASSERT_TRUE(doc) << doc.error();
  for (const auto& c : cases)
    EXPECT_TRUE(contains(*doc, "`" + c.file + "`")) << c.file << " is not in docs/backend-cuda.md";
  for (const auto& c : testing::corpus_cases(testing::kCudaPassingDir))
    EXPECT_TRUE(contains(*doc, "`passing/" + c.file + "`"))
        << "passing/" << c.file << " is not in docs/backend-cuda.md";
}

class CudaCorpusBuild : public ::testing::TestWithParam<CorpusCase> {};

TEST_P(CudaCorpusBuild, BuildAndPlanGiveTheirDispositionsAndTheRestIsRunnable) {
  const CorpusCase& c = GetParam();
  ASSERT_TRUE(c.problems.empty()) << c.file << ": " << join(c.problems, "; ");
  REQUIRE_NVCC();
  const KernelContext& ctx = corpus_context();
  auto text = read_file(c.path);
  ASSERT_TRUE(text) << text.error();
  Config config = testing::default_tuning(ctx);
  auto backend = make_cuda_backend();
  BuildResult r = build(*backend, ctx, *text, config);
  const std::string& first = *c.expect.begin();
  if (kBuildTime.count(first)) {
    EXPECT_EQ(std::string(to_string(r.disposition)), first) << c.file << "\n" << r.log;
    if (first == "forbidden_api") {
      EXPECT_TRUE(contains(r.log, "candidates may not use")) << r.log;
    }
    EXPECT_TRUE(r.artifact.empty() || first == "forbidden_api");
    EXPECT_FALSE(r.log.empty());
    return;
  }
  ASSERT_EQ(r.disposition, Disposition::passed) << c.file << "\n" << r.log;
  auto info = inspect_cubin(r.artifact);
  ASSERT_TRUE(info) << info.error();
  EXPECT_TRUE(info->cuda);
  auto regions = split_regions(*text, "kernel.cu");
  ASSERT_TRUE(regions) << regions.error();
  if (kPlanTime.count(first)) {
    PlanResult pr = backend->check_resources(r, h100());
    if (pr.disposition == Disposition::passed)
      pr = backend->plan(ctx, *regions, ctx.validation_shapes.at(0), config, h100(), r);
    EXPECT_EQ(std::string(to_string(pr.disposition)), first) << c.file << ": " << pr.message;
    return;
  }
  // Everything else reaches the runner: its plan holds on every shape the gate uses.
  for (const Shape& s : every_shape(ctx)) {
    PlanResult pr = backend->plan(ctx, *regions, s, config, h100(), r);
    EXPECT_EQ(pr.disposition, Disposition::passed)
        << c.file << " " << s.text() << ": " << pr.message;
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, CudaCorpusBuild, ::testing::ValuesIn(testing::corpus_cases()),
                         [](const auto& info) { return testing::corpus_test_name(info.param); });

// ---- Kernels that use the plan's features and must pass the gate (GPU-tested) ----

TEST(CudaPassingKernels, ThereIsOneForEveryFeature) {
  auto cases = testing::corpus_cases(testing::kCudaPassingDir);
  std::set<std::string> files;
  for (const auto& c : cases) {
    files.insert(c.file);
    for (const auto& p : c.problems) ADD_FAILURE() << c.file << ": " << p;
    EXPECT_EQ(c.expect, std::set<std::string>{"passed"}) << c.file;
  }
  for (const char* f : {"split_k.cu", "split_k_atomic.cu", "large_smem.cu", "tma_cluster.cu"})
    EXPECT_TRUE(files.count(f)) << "missing tests/integrity/cuda/passing/" << f;
}

class CudaPassingBuild : public ::testing::TestWithParam<CorpusCase> {};

TEST_P(CudaPassingBuild, BuildsForSm90aAndPlansEveryShape) {
  const CorpusCase& c = GetParam();
  REQUIRE_NVCC();
  const KernelContext& ctx = corpus_context();
  auto text = read_file(c.path);
  ASSERT_TRUE(text) << text.error();
  Config config = testing::default_tuning(ctx);
  auto backend = make_cuda_backend();
  BuildResult r = build(*backend, ctx, *text, config);
  ASSERT_EQ(r.disposition, Disposition::passed) << c.file << "\n" << r.log;
  EXPECT_EQ(r.resources["spills"], false) << r.resources.dump(2);
  auto regions = split_regions(*text, "kernel.cu");
  ASSERT_TRUE(regions) << regions.error();
  for (const Shape& s : every_shape(ctx)) {
    PlanResult pr = backend->plan(ctx, *regions, s, config, h100(), r);
    ASSERT_EQ(pr.disposition, Disposition::passed)
        << c.file << " " << s.text() << ": " << pr.message;
    LaunchPlan p = plan_of(pr, ctx);
    const int64_t M = s.values.at("M"), N = s.values.at("N"), K = s.values.at("K");
    if (c.file == "split_k.cu") {
      ASSERT_EQ(p.launches(), 2);
      ASSERT_EQ(p.scratch.size(), 1u);
      EXPECT_EQ(p.scratch[0].bytes, 4 * 4 * M * N);
      EXPECT_EQ(p.steps[0].grid[2], 4);
      EXPECT_EQ(p.steps[0].args[2].kind, PlanArg::Kind::scratch);
      EXPECT_EQ(p.steps[1].args[0].kind, PlanArg::Kind::scratch);
    } else if (c.file == "large_smem.cu") {
      ASSERT_EQ(p.launches(), 1);
      EXPECT_GT(p.steps[0].shared, 48 * 1024);
      EXPECT_EQ(p.steps[0].shared, (64 * 192 + 192 * 64) * 4);
    } else if (c.file == "tma_cluster.cu") {
      ASSERT_EQ(p.launches(), 2);
      ASSERT_EQ(p.tensor_maps.size(), 1u);
      const int64_t kp = (K + 31) / 32 * 32;
      EXPECT_EQ(p.tensor_maps[0].dims, (std::vector<int64_t>{kp, M}));
      EXPECT_EQ(p.tensor_maps[0].box, (std::vector<int64_t>{32, 16}));
      EXPECT_EQ(p.tensor_maps[0].buffer.kind, PlanBufferRef::Kind::scratch);
      EXPECT_EQ(p.steps[1].cluster, (std::array<int64_t, 3>{2, 1, 1}));
      EXPECT_EQ(p.steps[1].grid[0] % 2, 0);
      EXPECT_EQ(p.steps[1].args[0].kind, PlanArg::Kind::tensor_map);
      EXPECT_EQ(p.steps[1].grid[0], (N + 63) / 64 * 2);
    }
  }
  if (c.needs_sm >= 90) {
    PlanResult old = backend->plan(ctx, *regions, ctx.validation_shapes.at(0), config, a100(), r);
    EXPECT_EQ(old.disposition, Disposition::invalid_config) << old.message;
    EXPECT_TRUE(contains(old.message, "sm_90")) << old.message;
  }
}

INSTANTIATE_TEST_SUITE_P(Passing, CudaPassingBuild,
                         ::testing::ValuesIn(testing::corpus_cases(testing::kCudaPassingDir)),
                         [](const auto& info) { return testing::corpus_test_name(info.param); });

}  // namespace
}  // namespace peak
