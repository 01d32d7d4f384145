// Exports on the GPU (label gpu): the final checkpoints of the committed CUDA FP32 (its dispatch
// table), CUDA FP16 and HIP FP32 campaigns exported, each added to a fresh CMake project that
// builds it as a shared library, and run by peak-export-check at every shape of the small suite:
// the outputs of each shape's configuration byte for byte against peak's runner on the same
// inputs (also from four host threads at once, each on a stream of its own), and timed with the
// tool's own events.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/export_cli_testing.h"

namespace peak {
namespace {

using json = nlohmann::json;
using namespace peak::testing;

class ExportGpu : public StoreCli {
 protected:
  // `store` at `ref` exported, built by a fresh project (extra CMake arguments `args`), and
  // checked by peak-export-check; returns its rows.
  json export_and_check(const fs::path& store, const std::string& ref, const std::string& name,
                        const std::string& entry, const std::vector<std::string>& args = {}) {
    fs::path ws = from_store(store, ref, name);
    if (ws.empty()) return {};
    Out o = peak({"-q", "export", ref, "-o", "lib"}, ws);
    EXPECT_EQ(o.code, 0) << o.out << o.err;
    const fs::path project = tmp_ / (name + "-project");
    EXPECT_TRUE(
        write_file(project / "CMakeLists.txt", fmt::format("cmake_minimum_required(VERSION 3.18)\n"
                                                           "project(consumer LANGUAGES C CXX)\n"
                                                           "set(BUILD_SHARED_LIBS ON)\n"
                                                           "add_subdirectory(\"{}\" export)\n",
                                                           (ws / "lib").string())));
    std::vector<std::string> configure = {
        "cmake", "-S", project.string(), "-B", (project / "build").string(), "-G", "Ninja"};
    configure.insert(configure.end(), args.begin(), args.end());
    EXPECT_TRUE(runs(configure, project));
    EXPECT_TRUE(runs({"cmake", "--build", (project / "build").string()}, project));
    const fs::path so = project / "build" / "export" / ("lib" + entry + ".so");
    EXPECT_TRUE(fs::exists(so)) << so;
    const fs::path report = tmp_ / (name + "-check.json");
    EXPECT_TRUE(runs(
        {(fs::path(PEAK_BINARY_DIR) / "peak-export-check").string(), ws.string(), ref, so.string(),
         entry, "--small", "--samples", "5", "--threads", "4", "-o", report.string()},
        ws))
        << "an export's outputs differ from the runner's";
    auto text = read_file(report);
    if (!text) return {};
    return json::parse(*text, nullptr, false);
  }

  static void expect_identical_and_timed(const json& report, size_t min_rows) {
    ASSERT_TRUE(report.is_object());
    size_t timed = 0;
    for (const auto& r : report["rows"]) {
      if (r.value("status", json()) == "refused") continue;
      EXPECT_TRUE(r.value("identical", false)) << r.dump();
      EXPECT_TRUE(r.value("threads_identical", false)) << r.dump();
      EXPECT_GT(r.value("gflops", 0.0), 0.0) << r.dump();
      ++timed;
    }
    EXPECT_GE(timed, min_rows) << report.dump(2);
  }
};

TEST_F(ExportGpu, TheCudaFp32DispatchExportMatchesTheRunner) {
  expect_identical_and_timed(
      export_and_check(kFp32Store, "19", "fp32", "peak_matmul_cuda_fp32",
                       {"-DCUDAToolkit_ROOT=" + nvcc().parent_path().parent_path().string()}),
      6);
}

TEST_F(ExportGpu, TheCudaFp16TmaExportMatchesTheRunner) {
  expect_identical_and_timed(
      export_and_check(kFp16Store, "10", "fp16", "peak_matmul_cuda_fp16",
                       {"-DCUDAToolkit_ROOT=" + nvcc().parent_path().parent_path().string()}),
      6);
}

TEST_F(ExportGpu, TheHipFp32ExportBuiltForNvidiaMatchesTheRunner) {
  expect_identical_and_timed(
      export_and_check(kHipStore, "19", "hip", "peak_matmul_hip_fp32",
                       {"-DPEAK_PLATFORM=nvidia",
                        "-DCUDAToolkit_ROOT=" + nvcc().parent_path().parent_path().string()}),
      6);
}

}  // namespace
}  // namespace peak
