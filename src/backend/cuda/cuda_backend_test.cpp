#include "backend/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>

#include "backend/cuda/fma_bench_ptx.h"
#include "util/fs.h"
#include "util/process.h"

namespace peak {
namespace {

using namespace cuda;

const fs::path kSource = PEAK_SOURCE_DIR;
const fs::path kCorpus = kSource / "tests" / "integrity" / "cuda";

// One compile cache per test process: tests that build the same text share artifacts.
const fs::path& cache_dir() {
  static fs::path dir = [] {
    auto d = make_temp_dir("peak-cuda-test-");
    return d ? *d : fs::temp_directory_path() / "peak-cuda-test";
  }();
  return dir;
}

class CacheCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(cache_dir(), ec);
  }
};
[[maybe_unused]] auto* const g_cleanup = ::testing::AddGlobalTestEnvironment(new CacheCleanup);

KernelContext mixed_context() {
  KernelContext ctx;
  ctx.name = "mixed";
  ctx.backend = "cuda";
  ctx.source_file = "kernel.cu";
  ctx.entry = "run";
  ctx.arrays = {{"X", DType::f32, "n", {}, false},
                {"H", DType::f16, "n", {}, false},
                {"I", DType::i32, "n", {}, true},
                {"F", DType::f32, "n", {}, true}};
  ScalarSpec n;
  n.name = "n";
  ScalarSpec alpha;
  alpha.name = "alpha";
  alpha.dtype = DType::f32;
  ctx.scalars = {n, alpha};
  return ctx;
}

const KernelContext& fp32_context() {
  static KernelContext ctx = [] {
    auto c = load_context(kSource / "examples" / "matmul-cuda-fp32");
    EXPECT_TRUE(c) << c.error();
    return c ? *c : KernelContext{};
  }();
  return ctx;
}

Config default_config(const KernelContext& ctx) {
  Config c;
  for (const auto& t : ctx.tuning) c[t.name] = t.default_value;
  return c;
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

// ---- Generated code ----

TEST(CudaTrampoline, SignatureFollowsTheInputSpec) {
  KernelContext ctx = mixed_context();
  EXPECT_EQ(array_param_type(ctx.arrays[0]), "const float*");
  EXPECT_EQ(array_param_type(ctx.arrays[1]), "const __half*");
  EXPECT_EQ(array_param_type(ctx.arrays[2]), "int*");
  EXPECT_EQ(array_param_type(ctx.arrays[3]), "float*");
  EXPECT_EQ(scalar_param_type(ctx.scalars[0]), "int");
  EXPECT_EQ(scalar_param_type(ctx.scalars[1]), "float");
  EXPECT_EQ(host_signature(ctx),
            "int run(const float* X, const __half* H, int* I, float* F, int n, float alpha, "
            "cudaStream_t stream)");
}

TEST(CudaTrampoline, CastsEveryArgumentInOrder) {
  std::string t = trampoline(mixed_context());
  EXPECT_TRUE(contains(t, "extern \"C\""));
  EXPECT_TRUE(contains(t,
                       "int peak_entry(void* const* peak_arrays, const long long* peak_scalars, "
                       "cudaStream_t peak_stream)"));
  size_t pos = 0;
  for (std::string_view piece :
       {"return run(", "static_cast<const float*>(peak_arrays[0])",
        "static_cast<const __half*>(peak_arrays[1])", "static_cast<int*>(peak_arrays[2])",
        "static_cast<float*>(peak_arrays[3])", "static_cast<int>(peak_scalars[0])",
        "static_cast<float>(peak_scalars[1])", "peak_stream);"}) {
    size_t at = t.find(piece, pos);
    ASSERT_NE(at, std::string::npos) << "missing or out of order: " << piece << "\n" << t;
    pos = at + piece.size();
  }
}

TEST(CudaTrampoline, MatmulSignature) {
  EXPECT_EQ(host_signature(fp32_context()),
            "int peak_host(const float* A, const float* B, float* C, int M, int N, int K, "
            "cudaStream_t stream)");
}

TEST(CudaCompileUnit, PreludeSourceThenTrampoline) {
  KernelContext ctx = mixed_context();
  std::string unit = compile_unit(ctx, "int x;  // no newline at the end", "kernel.cu");
  auto lines = split_lines(unit);
  ASSERT_GE(lines.size(), 5u);
  EXPECT_EQ(lines[0], "#define PEAK_INVALID_CONFIG (-1)");
  EXPECT_EQ(lines[1], "#define PEAK_OK 0");
  EXPECT_EQ(lines[2], "#line 1 \"kernel.cu\"");
  EXPECT_EQ(lines[3], "int x;  // no newline at the end");
  EXPECT_TRUE(starts_with(lines[4], "#line 1 "));  // the trampoline names itself in diagnostics
  EXPECT_TRUE(contains(unit, trampoline(ctx)));
}

TEST(CudaFlags, PinnedAndArchSpecific) {
  EXPECT_EQ(gencode_flag("sm_90a"), "-gencode=arch=compute_90a,code=sm_90a");
  EXPECT_EQ(gencode_flag("sm_86"), "-gencode=arch=compute_86,code=sm_86");
  EXPECT_EQ(gencode_flag("sm_100a"), "-gencode=arch=compute_100a,code=sm_100a");
  EXPECT_EQ(gencode_flag(""), "-gencode=arch=compute_90a,code=sm_90a");
  EXPECT_EQ(gencode_flag("sm_90; rm -rf /"), "-gencode=arch=compute_90a,code=sm_90a");
  auto f = pinned_flags("sm_80");
  for (std::string_view want :
       {"-O3", "-std=c++17", "-shared", "-fPIC", "-lineinfo", "-v", "-ftz=false", "-prec-div=true",
        "-prec-sqrt=true", "-gencode=arch=compute_80,code=sm_80"})
    EXPECT_NE(std::find(f.begin(), f.end(), want), f.end()) << want;
  auto cudart = std::find(f.begin(), f.end(), "-cudart");
  ASSERT_NE(cudart, f.end());
  ASSERT_NE(cudart + 1, f.end());
  EXPECT_EQ(*(cudart + 1), "shared");
  for (const auto& flag : f) EXPECT_FALSE(contains(flag, "fast")) << flag;
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

TEST(CudaDiagnostics, FileLineStyle) {
  EXPECT_EQ(normalize_diagnostics("kernel.cu(12): error: identifier \"x\" is undefined\n"),
            "kernel.cu:12: error: identifier \"x\" is undefined\n");
  EXPECT_EQ(normalize_diagnostics("kernel.cu(3): warning #177-D: unused\n  detail (x): y\n"),
            "kernel.cu:3: warning #177-D: unused\n  detail (x): y\n");
  EXPECT_EQ(normalize_diagnostics("1 error detected in the compilation of \"a.cu\".\n"),
            "1 error detected in the compilation of \"a.cu\".\n");
}

// ---- Forbidden APIs ----

TEST(CudaForbidden, IncludesOfVendorLibraries) {
  auto m =
      forbidden_include("#include <cuda_runtime.h>\n\n  #  include <cublas_v2.h>\n", "kernel.cu");
  ASSERT_TRUE(m);
  EXPECT_TRUE(contains(*m, "kernel.cu:3:")) << *m;
  EXPECT_TRUE(contains(*m, "cublas_v2.h")) << *m;
  EXPECT_TRUE(forbidden_include("#include \"cublasLt.h\"\n", "k.cu"));
  EXPECT_TRUE(forbidden_include("#include <cudnn.h>\n", "k.cu"));
  EXPECT_FALSE(forbidden_include("#include <cuda_fp16.h>\n// #include <cublas_v2.h>\n", "k.cu"));
  EXPECT_FALSE(forbidden_include("#include <mma.h>\n#include <cuda/pipeline>\n", "k.cu"));
}

TEST(CudaForbidden, SymbolRules) {
  for (std::string_view s :
       {"cublasSgemm_v2",
        "cublasLtMatmul",
        "cudnnConvolutionForward",
        "cudaStreamCreate",
        "cudaStreamCreateWithFlags",
        "cudaStreamCreateWithPriority",
        "cuStreamCreate",
        "pthread_create",
        "pthread_create@GLIBC_2.34",
        "dlopen",
        "dlsym",
        "cudaDeviceSetLimit",
        "cudaStreamSetAttribute",
        "cudaCtxResetPersistingL2Cache",
        "cudaGraphLaunch",
        "cudaGraphInstantiateWithFlags",
        "cudaStreamBeginCapture",
        "fork",
        "system",
        "popen",
        "execve",
        "cudaGetDriverEntryPoint",
        "cuGetProcAddress_v2",
        "_ZNSt6thread15_M_start_threadESt10unique_ptrINS_6_StateESt14default_deleteIS1_EEPFvvE",
        "_ZNSt6thread4joinEv"})
    EXPECT_TRUE(forbidden_symbol_reason(s, false)) << s;
  for (std::string_view s :
       {"cudaLaunchKernel", "__cudaRegisterFatBinary", "cudaFuncSetAttribute", "cudaMemsetAsync",
        "cudaGetLastError", "cuTensorMapEncodeTiled", "systemd_thing", "forkful", "malloc",
        "_Z6matmulPKfS0_Pfiii", "__cxa_atexit", "peak_entry"})
    EXPECT_FALSE(forbidden_symbol_reason(s, false)) << s;
  // Defining a CUDA API function would interpose the runner's own calls.
  EXPECT_TRUE(forbidden_symbol_reason("cudaEventElapsedTime", true));
  EXPECT_TRUE(forbidden_symbol_reason("cuLaunchKernel", true));
  EXPECT_FALSE(forbidden_symbol_reason("cudaEventElapsedTime", false));
  EXPECT_FALSE(forbidden_symbol_reason("peak_entry", true));
  EXPECT_FALSE(forbidden_symbol_reason("cudaish_helper", true));
}

// Builds a host-only shared object with g++ (fast) and scans its dynamic symbols.
TEST(CudaForbidden, ScansTheArtifactsDynamicSymbols) {
  fs::path dir = cache_dir() / "elf";
  fs::create_directories(dir);
  ASSERT_TRUE(write_file(dir / "bad.cpp", R"(#include <thread>
extern "C" int cublasSgemm_v2(void*);
extern "C" int cudaStreamCreate(void**);
extern "C" void* dlopen(const char*, int);
extern "C" int cudaEventElapsedTime(float* ms, void*, void*) { *ms = 0; return 0; }
extern "C" int use() {
  void* s;
  cudaStreamCreate(&s);
  dlopen("x", 0);
  std::thread t([] {});
  t.join();
  return cublasSgemm_v2(nullptr);
}
)"));
  ASSERT_TRUE(write_file(dir / "good.cpp", "extern \"C\" int peak_entry() { return 0; }\n"));
  for (const char* name : {"bad", "good"}) {
    ProcessOptions po;
    po.argv = {"g++",
               "-shared",
               "-fPIC",
               "-O1",
               "-o",
               (dir / (std::string(name) + ".so")).string(),
               (dir / (std::string(name) + ".cpp")).string()};
    po.timeout_s = 60;
    auto r = run_process(po);
    if (!r || !r->ok()) GTEST_SKIP() << "g++ could not build a shared object";
  }
  auto syms = dynamic_symbols(dir / "good.so");
  ASSERT_TRUE(syms) << syms.error();
  EXPECT_TRUE(std::any_of(syms->begin(), syms->end(),
                          [](const ElfSymbol& s) { return s.name == "peak_entry" && s.defined; }));
  auto clean = forbidden_symbols(dir / "good.so");
  ASSERT_TRUE(clean) << clean.error();
  EXPECT_TRUE(clean->empty());

  auto bad = forbidden_symbols(dir / "bad.so");
  ASSERT_TRUE(bad) << bad.error();
  std::string all = join(*bad, "\n");
  for (std::string_view want : {"cublasSgemm_v2 (cuBLAS", "cudaStreamCreate (creates a stream",
                                "dlopen (", "_ZNSt6thread", "cudaEventElapsedTime [defined]"})
    EXPECT_TRUE(contains(all, want)) << want << " not in:\n" << all;

  auto not_elf = dynamic_symbols(dir / "good.cpp");
  ASSERT_FALSE(not_elf);
  EXPECT_TRUE(contains(not_elf.error(), "not a readable 64-bit ELF")) << not_elf.error();
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
  EXPECT_EQ(b->runner().filename(), "peak-runner-cuda");
  auto tc = b->toolchain();
  ASSERT_FALSE(tc.empty());
  EXPECT_EQ(tc[0].first, "nvcc");
  if (have_nvcc()) {
    EXPECT_NE(tc[0].second, "not found");
  }
}

TEST(CudaBackend, PlanIsEmptyAndBaselineIsCublasForMatmul) {
  auto b = make_cuda_backend();
  const KernelContext& ctx = fp32_context();
  DeviceFacts dev;
  auto plan = b->plan(ctx, SourceRegions{}, Shape{}, Config{}, dev);
  EXPECT_EQ(plan.disposition, Disposition::passed);
  EXPECT_TRUE(plan.plan.is_object() && plan.plan.empty());
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
  }
}

TEST(CudaFmaBench, PtxAssembles) {
  fs::path nvcc = find_nvcc();
  if (nvcc.empty()) GTEST_SKIP() << "no CUDA toolkit";
  fs::path ptxas = nvcc.parent_path() / "ptxas";
  if (!fs::exists(ptxas)) GTEST_SKIP() << "no ptxas next to nvcc";
  fs::path dir = cache_dir() / "fma";
  fs::create_directories(dir);
  ASSERT_TRUE(write_file(dir / "fma.ptx", fma_bench_ptx()));
  ProcessOptions po;
  po.argv = {ptxas.string(),
             "-arch=sm_90a",
             "-v",
             "-o",
             (dir / "fma.cubin").string(),
             (dir / "fma.ptx").string()};
  po.timeout_s = 60;
  auto r = run_process(po);
  ASSERT_TRUE(r) << r.error();
  ASSERT_TRUE(r->ok()) << r->out << r->err;
  auto res = parse_ptxas_resources(r->out + r->err);
  EXPECT_TRUE(res["kernels"].contains(kFmaBenchName)) << res.dump(2);
  EXPECT_EQ(res["spills"], false);
}

// ---- Builds with nvcc (each one costs seconds: keep them few) ----

constexpr const char* kMixedSource = R"(#include <cuda_runtime.h>
#include <cuda_fp16.h>
// peak:begin macros
// peak:end macros
// peak:begin device
static_assert(VALUE > 0, "VALUE must reach the compiler as a define");
__global__ void fill(const float* X, const __half* H, int* I, float* F, int n, float alpha) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    I[i] = VALUE;
    F[i] = alpha * X[i] + __half2float(H[i]);
  }
}
// peak:end device
// peak:begin host
int run(const float* X, const __half* H, int* I, float* F, int n, float alpha, cudaStream_t s) {
  if (n <= 0) return PEAK_INVALID_CONFIG;
  fill<<<(n + 255) / 256, 256, 0, s>>>(X, H, I, F, n, alpha);
  return PEAK_OK;
}
// peak:end host
)";

TEST(CudaBuild, CompilesTrampolineAndHitsTheCache) {
  REQUIRE_NVCC();
  auto b = make_cuda_backend();
  KernelContext ctx = mixed_context();
  BuildResult first = build(*b, ctx, kMixedSource, {{"VALUE", 7}});
  ASSERT_EQ(first.disposition, Disposition::passed) << first.log;
  EXPECT_FALSE(first.cached);
  EXPECT_TRUE(starts_with(first.toolchain, "nvcc ")) << first.toolchain;
  EXPECT_TRUE(contains(first.command, "-DVALUE=7")) << first.command;
  EXPECT_TRUE(contains(first.command, "-gencode=arch=compute_90a,code=sm_90a")) << first.command;
  EXPECT_EQ(first.artifact.extension(), ".so");
  EXPECT_EQ(first.artifact.parent_path(), cache_dir());
  auto syms = dynamic_symbols(first.artifact);
  ASSERT_TRUE(syms) << syms.error();
  EXPECT_TRUE(std::any_of(syms->begin(), syms->end(),
                          [](const ElfSymbol& s) { return s.name == kEntrySymbol && s.defined; }));
  ASSERT_TRUE(first.resources["kernels"].contains("fill")) << first.resources.dump(2);
  EXPECT_GT(first.resources["kernels"]["fill"]["registers"].get<int>(), 0);
  EXPECT_TRUE(fs::exists(fs::path(first.artifact).replace_extension(".json")));

  BuildResult again = build(*b, ctx, kMixedSource, {{"VALUE", 7}});
  ASSERT_EQ(again.disposition, Disposition::passed) << again.log;
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(again.artifact, first.artifact);
  EXPECT_EQ(again.resources, first.resources);
  EXPECT_EQ(again.log, first.log);
  EXPECT_EQ(again.command, first.command);

  // Another backend object (another process would do the same) finds the same artifact.
  BuildResult other = build(*make_cuda_backend(), ctx, kMixedSource, {{"VALUE", 7}});
  EXPECT_TRUE(other.cached);
  EXPECT_EQ(other.artifact, first.artifact);

  BuildResult changed = build(*b, ctx, kMixedSource, {{"VALUE", 8}});
  ASSERT_EQ(changed.disposition, Disposition::passed) << changed.log;
  EXPECT_FALSE(changed.cached);
  EXPECT_NE(changed.artifact, first.artifact);
}

TEST(CudaBuild, CompileErrorNamesKernelCuAndLine) {
  REQUIRE_NVCC();
  auto b = make_cuda_backend();
  const KernelContext& ctx = fp32_context();
  std::string src = R"(#include <cuda_runtime.h>
// peak:begin macros
// peak:end macros
// peak:begin device
__global__ void k(float* C) { C[0] = undefined_name; }
// peak:end device
// peak:begin host
int peak_host(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t s) {
  k<<<1, 1, 0, s>>>(C);
  return PEAK_OK;
}
// peak:end host
)";
  BuildResult r = build(*b, ctx, src, default_config(ctx));
  EXPECT_EQ(r.disposition, Disposition::compile_failed);
  EXPECT_TRUE(contains(r.log, "kernel.cu:5:")) << r.log;
  EXPECT_TRUE(contains(r.log, "undefined_name")) << r.log;
  EXPECT_TRUE(r.artifact.empty());
  BuildResult again = build(*b, ctx, src, default_config(ctx));
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
    return "#include <cuda_runtime.h>\n// peak:begin macros\n// peak:end macros\n"
           "// peak:begin device\n#include \"" +
           (*dir / "id_ed25519").string() + "\"\n__global__ void k(float* C) { C[0] = 1; }\n// " +
           tag +
           "\n// peak:end device\n// peak:begin host\n"
           "int peak_host(const float* A, const float* B, float* C, int M, int N, int K, "
           "cudaStream_t s) {\n  k<<<1, 1, 0, s>>>(C);\n  return PEAK_OK;\n}\n// peak:end host\n";
  };
  BuildResult r = build(*b, ctx, source("sandboxed"), default_config(ctx));
  EXPECT_EQ(r.disposition, Disposition::compile_failed);
  EXPECT_EQ(r.log.find(secret), std::string::npos) << r.log;
  EXPECT_TRUE(contains(r.log, "id_ed25519")) << r.log;
  // Without the sandbox nvcc shows the line it could not parse: the check above can fail.
  bool was = sandbox_enabled();
  set_sandbox_enabled(false);
  BuildResult open = build(*b, ctx, source("unsandboxed"), default_config(ctx));
  set_sandbox_enabled(was);
  EXPECT_TRUE(contains(open.log, secret)) << open.log;
  std::error_code ec;
  fs::remove_all(*dir, ec);
}

TEST(CudaBuild, WrongHostSignatureExplainsTheConvention) {
  REQUIRE_NVCC();
  auto b = make_cuda_backend();
  const KernelContext& ctx = fp32_context();
  std::string src = R"(#include <cuda_runtime.h>
// peak:begin macros
// peak:end macros
// peak:begin device
// peak:end device
// peak:begin host
int peak_host(float* C, int M, cudaStream_t s) { return PEAK_OK; }
// peak:end host
)";
  BuildResult r = build(*b, ctx, src);
  EXPECT_EQ(r.disposition, Disposition::compile_failed);
  EXPECT_TRUE(contains(r.log, host_signature(ctx))) << r.log;
  EXPECT_TRUE(contains(r.log, "peak_entry.generated.cu:")) << r.log;
}

TEST(CudaBuild, ForbiddenIncludeIsRefusedBeforeCompiling) {
  auto b = make_cuda_backend();
  const KernelContext& ctx = fp32_context();
  BuildResult r = build(*b, ctx, "#include <cuda_runtime.h>\n#include <cublas_v2.h>\n");
  EXPECT_EQ(r.disposition, Disposition::forbidden_api);
  EXPECT_TRUE(contains(r.log, "kernel.cu:2:")) << r.log;
  EXPECT_TRUE(r.command.empty());
}

TEST(CudaBuild, MissingNvccIsACompileFailureWithAHint) {
  const char* old = std::getenv("PEAK_NVCC");
  std::string saved = old ? old : "";
  ::setenv("PEAK_NVCC", "/nonexistent/nvcc", 1);
  auto b = make_cuda_backend();
  BuildResult r = build(*b, fp32_context(), "int x;\n");
  if (old)
    ::setenv("PEAK_NVCC", saved.c_str(), 1);
  else
    ::unsetenv("PEAK_NVCC");
  EXPECT_EQ(r.disposition, Disposition::compile_failed);
  EXPECT_TRUE(contains(r.log, "PEAK_NVCC")) << r.log;
}

// ---- The example contexts ----

class CudaExample : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaExample, LoadsSplitsAndBuilds) {
  auto ctx = load_context(kSource / "examples" / GetParam());
  ASSERT_TRUE(ctx) << ctx.error();
  EXPECT_EQ(ctx->backend, "cuda");
  EXPECT_EQ(ctx->entry, "peak_host");
  EXPECT_EQ(ctx->family, "matmul");
  auto text = read_file(ctx->dir / ctx->source_file);
  ASSERT_TRUE(text) << text.error();
  auto regions = split_regions(*text, ctx->source_file);
  ASSERT_TRUE(regions) << regions.error();
  // The host region defines the host function with the signature the trampoline expects.
  std::string host;
  for (char c : regions->host) host += (c == '\n') ? ' ' : c;
  std::string squeezed;
  for (char c : host)
    if (!(c == ' ' && !squeezed.empty() && squeezed.back() == ' ')) squeezed += c;
  std::string sig = host_signature(*ctx);
  EXPECT_TRUE(contains(squeezed, sig.substr(0, sig.size() - 1))) << squeezed << "\nwant: " << sig;
  EXPECT_TRUE(contains(regions->before, "#include <cuda_runtime.h>"));
  EXPECT_TRUE(contains(regions->before, "#include <cuda_fp16.h>"));
  EXPECT_EQ(make_cuda_backend()->baseline(*ctx, DeviceFacts{}), "cublas");
  REQUIRE_NVCC();
  BuildResult r = build(*make_cuda_backend(), *ctx, *text, default_config(*ctx));
  ASSERT_EQ(r.disposition, Disposition::passed) << r.log;
  EXPECT_TRUE(r.resources["kernels"].contains("matmul")) << r.resources.dump(2);
  EXPECT_EQ(r.resources["spills"], false);
}

INSTANTIATE_TEST_SUITE_P(Examples, CudaExample,
                         ::testing::Values("matmul-cuda-fp32", "matmul-cuda-fp16"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// ---- The integrity corpus: every file builds, or is refused at build time ----

struct CorpusCase {
  std::string file;
  std::set<std::string> expect;
  std::string description;
};

void PrintTo(const CorpusCase& c, std::ostream* os) { *os << c.file; }

std::vector<CorpusCase> corpus_cases() {
  std::vector<CorpusCase> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(kCorpus, ec)) {
    if (e.path().extension() != ".cu") continue;
    CorpusCase c;
    c.file = e.path().filename().string();
    auto text = read_file(e.path());
    if (text) {
      auto lines = split_lines(*text);
      if (lines.size() > 1 && starts_with(lines[0], "// expect: ")) {
        std::string list = lines[0].substr(std::string("// expect: ").size());
        size_t start = 0;
        for (;;) {
          size_t bar = list.find('|', start);
          c.expect.insert(trim(list.substr(start, bar - start)));
          if (bar == std::string::npos) break;
          start = bar + 1;
        }
        if (starts_with(lines[1], "// ")) c.description = lines[1].substr(3);
      }
    }
    out.push_back(c);
  }
  std::sort(out.begin(), out.end(),
            [](const CorpusCase& a, const CorpusCase& b) { return a.file < b.file; });
  return out;
}

TEST(CudaCorpus, CoversTheKnownAttacks) {
  auto cases = corpus_cases();
  EXPECT_GE(cases.size(), 15u);
  std::set<std::string> files;
  for (const auto& c : cases) {
    files.insert(c.file);
    EXPECT_FALSE(c.expect.empty()) << c.file << ": first line must be `// expect: <disposition>`";
    EXPECT_FALSE(c.description.empty()) << c.file << ": second line must describe the case";
    for (const auto& d : c.expect) EXPECT_TRUE(disposition_from_string(d)) << c.file << ": " << d;
  }
  for (const char* f :
       {"correct_tiled.cu", "out_of_bounds.cu", "race_missing_syncthreads.cu", "unwritten_tile.cu",
        "partial_computation.cu", "stale_output.cu", "inputs_modified.cu", "side_stream.cu",
        "legacy_stream_return.cu", "cached_by_pointer.cu", "silent_tf32.cu", "fp16_accumulate.cu",
        "hardcoded_shape.cu", "cublas_call.cu", "infinite_loop.cu", "smem_over_limit.cu",
        "sticky_error.cu", "background_thread.cu", "persistent_l2.cu"})
    EXPECT_TRUE(files.count(f)) << "missing corpus case " << f;
}

class CudaCorpusBuild : public ::testing::TestWithParam<CorpusCase> {};

TEST_P(CudaCorpusBuild, ForbiddenApisAreCaughtAndTheRestCompile) {
  const CorpusCase& c = GetParam();
  auto text = read_file(kCorpus / c.file);
  ASSERT_TRUE(text) << text.error();
  const KernelContext& ctx = fp32_context();
  auto regions = split_regions(*text, c.file);
  ASSERT_TRUE(regions) << regions.error();
  bool forbidden = c.expect.count("forbidden_api") > 0;
  if (forbidden) {
    EXPECT_EQ(c.expect.size(), 1u) << "forbidden_api is decided at build time alone";
  }
  if (!forbidden || !forbidden_include(*text, "kernel.cu")) REQUIRE_NVCC();
  BuildResult r = build(*make_cuda_backend(), ctx, *text, default_config(ctx));
  if (forbidden) {
    EXPECT_EQ(r.disposition, Disposition::forbidden_api) << c.file << "\n" << r.log;
    EXPECT_TRUE(contains(r.log, "candidates may not") || contains(r.log, "may not use")) << r.log;
  } else {
    EXPECT_EQ(r.disposition, Disposition::passed) << c.file << "\n" << r.log;
    EXPECT_FALSE(r.artifact.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, CudaCorpusBuild, ::testing::ValuesIn(corpus_cases()),
                         [](const auto& info) {
                           std::string n = info.param.file.substr(0, info.param.file.size() - 3);
                           return n;
                         });

}  // namespace
}  // namespace peak
