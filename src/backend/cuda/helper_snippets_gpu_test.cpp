// GPU tests of the helper snippets that transformations insert into CUDA kernels (label gpu: they
// need an NVIDIA GPU). Each test takes the snippet exactly as shipped in
// transformations/matmul/*.md (loaded with the library's parser, inserted as peak inserts it),
// wraps it in a minimal matmul candidate for examples/matmul-cuda-{fp32,fp16,bf16}
// (helper_snippets_testing.h describes each kernel), builds it with the CUDA backend for this
// device and validates it with peak's own validator on a few shapes that the snippet's contract
// allows: it must pass. The sm_90 snippets (tma, wgmma, setmaxnreg, cluster) are skipped on other
// devices.
#include <gtest/gtest.h>

#include <iostream>
#include <set>
#include <string>

#include "backend/cuda/corpus_testing.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/gpu_testing.h"
#include "backend/cuda/helper_snippets_testing.h"
#include "transform/transformation.h"
#include "util/fs.h"
#include "validate/validate.h"

namespace peak {
namespace {

using testing::HelperCase;

using SnippetGpu = testing::CudaGpu;
SnippetGpu& gpu() { return testing::cuda_gpu(); }

RunnerOptions runner_options() {
  RunnerOptions o;
  o.executable = gpu().backend->runner();
  o.task_timeout_s = 30;
  o.start_timeout_s = 30;  // device start-up takes seconds
  return o;
}

std::string describe_checks(const ValidationOutcome& o) {
  std::string s = std::string(to_string(o.disposition)) + ": " + o.message;
  for (const auto& c : o.checks)
    s += "\n  " + c.shape.text() + " seed " + std::to_string(c.seed) + " -> " +
         std::string(to_string(c.disposition)) + " " + c.message;
  return s;
}

class HelperSnippetGpuTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(gpu().error.empty()) << gpu().error; }

  // Builds the case's kernel for this device and validates it on the case's shapes.
  void expect_case_passes(const std::string& name) {
    auto found = testing::find_helper_case(name);
    ASSERT_TRUE(found) << found.error();
    const HelperCase& c = *found;
    if (!arch_meets(gpu().facts.arch, c.required_arch))
      GTEST_SKIP() << c.name << " uses snippets that need " << c.required_arch << "; this device ("
                   << gpu().facts.name << ") is " << gpu().facts.arch;
    auto ctx = load_context(fs::path(PEAK_SOURCE_DIR) / "examples" / c.context);
    ASSERT_TRUE(ctx) << ctx.error();
    auto src = testing::helper_case_source(c);
    ASSERT_TRUE(src) << src.error();
    auto regions = split_regions(*src, "kernel.cu");
    ASSERT_TRUE(regions) << regions.error();
    const Config config = testing::default_tuning(*ctx);

    BuildRequest req;
    req.context = &*ctx;
    req.source = *src;
    req.defines = config;
    req.device = gpu().facts;
    req.cache_dir = gpu().cache;
    BuildResult b = gpu().backend->build(req);
    ASSERT_EQ(b.disposition, Disposition::passed) << b.log << "\n" << *src;

    ValidationOptions opts;
    opts.shapes = c.shapes;  // shapes the snippet's contract allows (c.shapes_note)
    opts.include_hidden = false;
    opts.sampled_hidden_shapes = 0;
    opts.task_timeout_s = 30;  // a barrier that never completes hangs until the deadline
    ReferenceSource ref;
    ref.cache_dir = gpu().cache / "reference";
    Validator v(*gpu().backend, gpu().facts, runner_options(), ref);
    ValidationOutcome out = v.validate(*ctx, *regions, b, config, opts);
    std::cout << "[ observed ] " << c.name << " (" << c.context << "; " << c.shapes_note
              << "): " << to_string(out.disposition) << " in " << out.seconds
              << " s: " << out.message << "\n";
    EXPECT_EQ(out.disposition, Disposition::passed) << describe_checks(out) << "\n" << *src;
    // Every shape ran (none was skipped as invalid for the context).
    EXPECT_EQ(out.checks.size(), c.shapes.size() * static_cast<size_t>(opts.seeds))
        << describe_checks(out);
  }
};

// cp-async (pipelining.md): 4-byte cp.async, FP32 context.
TEST_F(HelperSnippetGpuTest, CpAsyncFp32) { expect_case_passes("CpAsyncFp32"); }

// wmma (tensor-core.md): one warp per 16 x 16 tile.
TEST_F(HelperSnippetGpuTest, WmmaFp16) { expect_case_passes("WmmaFp16"); }
TEST_F(HelperSnippetGpuTest, WmmaBf16) { expect_case_passes("WmmaBf16"); }

// cp-async-16 (tensor-pipelining.md): 16-byte cp.async (K % 8 == 0 && N % 8 == 0).
TEST_F(HelperSnippetGpuTest, CpAsync16Fp16) { expect_case_passes("CpAsync16Fp16"); }
TEST_F(HelperSnippetGpuTest, CpAsync16Bf16) { expect_case_passes("CpAsync16Bf16"); }

// tma (tma-loads.md): boxes without swizzle, one mbarrier of two arrivals (sm_90).
TEST_F(HelperSnippetGpuTest, TmaFp16) { expect_case_passes("TmaFp16"); }
TEST_F(HelperSnippetGpuTest, TmaBf16) { expect_case_passes("TmaBf16"); }

// wgmma (wgmma.md) with tma: one warpgroup per 64 x N tile, 128-byte swizzle (sm_90a).
TEST_F(HelperSnippetGpuTest, WgmmaN64Fp16) { expect_case_passes("WgmmaN64Fp16"); }
TEST_F(HelperSnippetGpuTest, WgmmaN128Fp16) { expect_case_passes("WgmmaN128Fp16"); }
TEST_F(HelperSnippetGpuTest, WgmmaN256Fp16) { expect_case_passes("WgmmaN256Fp16"); }
TEST_F(HelperSnippetGpuTest, WgmmaN64Bf16) { expect_case_passes("WgmmaN64Bf16"); }
TEST_F(HelperSnippetGpuTest, WgmmaN128Bf16) { expect_case_passes("WgmmaN128Bf16"); }
TEST_F(HelperSnippetGpuTest, WgmmaN256Bf16) { expect_case_passes("WgmmaN256Bf16"); }

// setmaxnreg (warp-specialization.md): warpgroup 0 releases to 40, the others claim 232 (sm_90a).
TEST_F(HelperSnippetGpuTest, SetmaxnregFp16) { expect_case_passes("SetmaxnregFp16"); }
TEST_F(HelperSnippetGpuTest, SetmaxnregBf16) { expect_case_passes("SetmaxnregBf16"); }
TEST_F(HelperSnippetGpuTest, Setmaxnreg2ConsumersFp16) {
  expect_case_passes("Setmaxnreg2ConsumersFp16");
}

// cluster (cluster.md) with tma: clusters of two blocks multicasting B slices and arriving on
// each other's barriers, and a cluster of one block (a launch without clusters) (sm_90a).
TEST_F(HelperSnippetGpuTest, Cluster2Fp16) { expect_case_passes("Cluster2Fp16"); }
TEST_F(HelperSnippetGpuTest, Cluster2Bf16) { expect_case_passes("Cluster2Bf16"); }
TEST_F(HelperSnippetGpuTest, ClusterOfOneFp16) { expect_case_passes("ClusterOfOneFp16"); }
TEST_F(HelperSnippetGpuTest, ClusterOfOneBf16) { expect_case_passes("ClusterOfOneBf16"); }

// wgmma-e4m3 (fp8-wgmma.md) with tma and wgmma: one warpgroup per 64 x N tile, both operands
// K-major, e4m3 inputs, a scaled BF16 output (sm_90a).
TEST_F(HelperSnippetGpuTest, WgmmaE4m3N64) { expect_case_passes("WgmmaE4m3N64"); }
TEST_F(HelperSnippetGpuTest, WgmmaE4m3N128) { expect_case_passes("WgmmaE4m3N128"); }
TEST_F(HelperSnippetGpuTest, WgmmaE4m3N256) { expect_case_passes("WgmmaE4m3N256"); }

// tma-store (tma-store-epilogue.md) on the e4m3 case: the results staged in swizzled buffers and
// written by TMA stores, nothing outside C (sm_90a).
TEST_F(HelperSnippetGpuTest, TmaStoreE4m3) { expect_case_passes("TmaStoreE4m3"); }

// Every case of helper_snippets_testing.h has a test above.
TEST(HelperSnippetGpuCases, EveryCaseHasAGpuTest) {
  std::set<std::string> tests;
  const ::testing::UnitTest& u = *::testing::UnitTest::GetInstance();
  for (int i = 0; i < u.total_test_suite_count(); ++i) {
    const ::testing::TestSuite* s = u.GetTestSuite(i);
    if (std::string(s->name()) != "HelperSnippetGpuTest") continue;
    for (int j = 0; j < s->total_test_count(); ++j) tests.insert(s->GetTestInfo(j)->name());
  }
  for (const HelperCase& c : testing::helper_cases())
    EXPECT_TRUE(tests.count(c.name)) << "no HelperSnippetGpuTest." << c.name;
}

}  // namespace
}  // namespace peak
