// The GPU of a CUDA GPU test binary: one CUDA backend probed once, and a build cache removed when
// the binary ends. Shared by the test files of backend_cuda_gpu_tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "util/fs.h"

namespace peak::testing {

struct CudaGpu {
  std::unique_ptr<Backend> backend;
  DeviceFacts facts;
  std::string error;  // why the probe failed ("" when it did not)
  fs::path cache;
};

inline CudaGpu& cuda_gpu() {
  static CudaGpu g = [] {
    CudaGpu g;
    g.backend = make_cuda_backend();
    auto facts = g.backend->probe("", false);
    if (!facts)
      g.error = "probe failed: " + facts.error();
    else
      g.facts = *facts;
    auto dir = make_temp_dir("peak-cuda-gpu-test-");
    g.cache = dir ? *dir : fs::temp_directory_path() / "peak-cuda-gpu-test";
    return g;
  }();
  return g;
}

class CudaGpuCacheCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(cuda_gpu().cache, ec);
  }
};
inline auto* const g_cuda_gpu_cleanup =
    ::testing::AddGlobalTestEnvironment(new CudaGpuCacheCleanup);

}  // namespace peak::testing
