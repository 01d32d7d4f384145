// The helper snippets of the shipped CUDA transformations (transformations/matmul/*.md, their
// [[helpers]]) without a GPU: every helper has a test kernel (helper_snippets_testing.h), and
// each test kernel, with the snippets inserted exactly as shipped, compiles with nvcc for an H100
// (sm_90a) and plans for its shapes there (launch bounds, shared memory, registers, tensor maps).
// A snippet that no longer compiles fails here, in CI; helper_snippets_gpu_test.cpp runs the same
// kernels through peak's validation on a GPU. Skipped where nvcc is missing.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "backend/cuda/corpus_testing.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/helper_snippets_testing.h"
#include "runner/device_testing.h"
#include "util/fs.h"
#include "util/temp_dir_testing.h"

namespace peak {
namespace {

using testing::HelperCase;

auto* const g_snippet_cache = testing::ProcessTempDir::add("peak-cuda-snippet-test-");
const fs::path& snippet_cache_dir() { return g_snippet_cache->path(); }

// Every CUDA helper of the matmul transformations is used by a case: a new helper needs a test
// kernel here before it ships. A helper borrowed from another transformation (`from`) is that
// transformation's code: the case of its source covers it.
TEST(HelperSnippetTest, EveryCudaHelperOfTheMatmulLibraryHasATestKernel) {
  std::set<std::pair<std::string, std::string>> tested;
  for (const HelperCase& c : testing::helper_cases())
    for (const auto& use : c.helpers) tested.insert({use.file, use.helper});
  auto lib = load_library(testing::kMatmulTransformationsDir);
  ASSERT_TRUE(lib) << lib.error();
  int helpers = 0;
  for (const Transformation& t : *lib) {
    for (const HelperSnippet& h : t.helpers) {
      if (!h.backend.empty() && h.backend != "cuda") continue;
      ++helpers;
      const std::string owner = h.from.empty() ? t.name : h.from;
      EXPECT_TRUE(tested.count({owner, h.name}))
          << t.path.filename().string() << ": helper " << h.name
          << (h.from.empty() ? "" : " (from " + h.from + ")")
          << " has no test kernel in src/backend/cuda/helper_snippets_testing.h";
    }
  }
  EXPECT_GE(helpers, 6);
  // And every case names a helper that exists.
  for (const auto& [file, helper] : tested) {
    auto h = testing::shipped_helper({file, helper});
    EXPECT_TRUE(h) << h.error();
  }
}

// The test kernels hold the snippets byte for byte, after the marker peak writes.
TEST(HelperSnippetTest, TestKernelsHoldTheShippedSnippets) {
  for (const HelperCase& c : testing::helper_cases()) {
    auto src = testing::helper_case_source(c);
    ASSERT_TRUE(src) << c.name << ": " << src.error();
    auto regions = split_regions(*src, "kernel.cu");
    ASSERT_TRUE(regions) << c.name << ": " << regions.error();
    for (const auto& use : c.helpers) {
      auto h = testing::shipped_helper(use);
      ASSERT_TRUE(h) << h.error();
      EXPECT_NE(regions->device.find("// peak helper: " + use.helper + "\n" + h->code),
                std::string::npos)
          << c.name << ": " << use.helper;
    }
    EXPECT_FALSE(c.shapes.empty()) << c.name;
  }
}

class HelperSnippetBuild : public ::testing::TestWithParam<HelperCase> {};

// Compiles with the backend's own build (nvcc in the compiler sandbox, the pinned flags, the
// artifact checks) for sm_90a, then plans every shape of the case for an H100.
TEST_P(HelperSnippetBuild, CompilesAndPlansForAnH100) {
  if (cuda::find_nvcc().empty())
    GTEST_SKIP() << "nvcc not found (PEAK_NVCC, CUDA_HOME, /usr/local/cuda, PATH)";
  const HelperCase& c = GetParam();
  auto ctx = load_context(fs::path(PEAK_SOURCE_DIR) / "examples" / c.context);
  ASSERT_TRUE(ctx) << ctx.error();
  auto src = testing::helper_case_source(c);
  ASSERT_TRUE(src) << src.error();
  auto regions = split_regions(*src, "kernel.cu");
  ASSERT_TRUE(regions) << regions.error();
  auto backend = make_cuda_backend();
  const DeviceFacts device = testing::h100_facts();
  const Config config = testing::default_tuning(*ctx);
  BuildRequest req;
  req.context = &*ctx;
  req.source = *src;
  req.defines = config;
  req.device = device;
  req.cache_dir = snippet_cache_dir();
  BuildResult b = backend->build(req);
  ASSERT_EQ(b.disposition, Disposition::passed) << b.log << "\n" << *src;
  ASSERT_TRUE(b.resources["kernels"].contains("matmul")) << b.resources.dump(2);
  EXPECT_EQ(b.resources["spills"], false) << b.log;
  PlanResult res = backend->check_resources(b, device);
  EXPECT_EQ(res.disposition, Disposition::passed) << res.message;
  for (const Shape& s : c.shapes) {
    auto valid = shape_is_valid(*ctx, s);
    ASSERT_TRUE(valid && *valid) << s.text();
    PlanResult p = backend->plan(*ctx, *regions, s, config, device, b);
    EXPECT_EQ(p.disposition, Disposition::passed) << s.text() << ": " << p.message;
  }
}

INSTANTIATE_TEST_SUITE_P(Snippets, HelperSnippetBuild, ::testing::ValuesIn(testing::helper_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace peak
