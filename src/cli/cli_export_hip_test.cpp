// `peak export` of a HIP checkpoint (the FP32 campaign's final one under results/, with its
// dispatch table), built as its README says for both platforms, without a GPU: the AMD targets
// with hipcc (HIP's module API on the host), and NVIDIA with nvcc through peak_hip_to_cuda.h
// (CUDA's runtime on the host). Each code object must define the kernels the host code looks up.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/export_cli_testing.h"

namespace peak {
namespace {

using json = nlohmann::json;
using namespace peak::testing;

class ExportHipCli : public StoreCli {};

// The symbols export.json lists for configuration `i`.
std::vector<std::string> symbols_of(const json& manifest, size_t i) {
  std::vector<std::string> out;
  for (const auto& k : manifest["configurations"][i]["kernels"])
    out.push_back(k.get<std::string>());
  return out;
}

void expect_defines(const fs::path& code_object, const std::vector<std::string>& symbols) {
  auto bytes = read_file(code_object);
  ASSERT_TRUE(bytes) << code_object;
  for (const auto& s : symbols)
    EXPECT_NE(bytes->find(s + '\0'), std::string::npos) << code_object << " lacks " << s;
}

TEST_F(ExportHipCli, TheFp32DispatchTableExportsAndBuildsForAmdAndNvidia) {
  if (nvcc().empty() || find_program("hipcc").empty())
    GTEST_SKIP() << "a HIP build needs hipcc and nvcc (peak builds HIP for AMD and NVIDIA)";
  fs::path ws = from_store(kHipStore, "19", "hip");
  if (ws.empty()) GTEST_SKIP() << "the committed store cannot be decompressed here";
  Out o = peak({"--json", "export", "19", "-o", "lib"}, ws);
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  const json r = json::parse(o.out);
  EXPECT_EQ(r["entry"], "peak_matmul_hip_fp32");
  EXPECT_EQ(r["configurations"], 2);
  const fs::path out = ws / "lib";
  for (const char* f :
       {"peak_matmul_hip_fp32.h", "peak_matmul_hip_fp32.cpp", "kernels/config_0.hip",
        "kernels/config_0.cu", "kernels/config_1.hip", "include/peak_hip_to_cuda.h",
        "include/hip/hip_runtime.h", "CMakeLists.txt", "README.md", "export.json"})
    EXPECT_TRUE(fs::exists(out / f)) << f;
  auto text = read_file(out / "export.json");
  ASSERT_TRUE(text);
  const json manifest = json::parse(*text);
  EXPECT_EQ(manifest["backend"], "hip");
  auto header = read_file(out / "peak_matmul_hip_fp32.h");
  ASSERT_TRUE(header);
  EXPECT_NE(header->find("hipStream_t stream"), std::string::npos) << *header;
  auto unit = read_file(out / "kernels/config_0.cu");
  ASSERT_TRUE(unit);
  EXPECT_NE(unit->find("#include \"peak_hip_to_cuda.h\""), std::string::npos);
  if (find_program("cmake").empty() || find_program("ninja").empty())
    GTEST_SKIP() << "no cmake or ninja: the export is not built here";

  // AMD (the default platform): one code object per configuration and target.
  ASSERT_TRUE(
      runs({"cmake", "-S", out.string(), "-B", (out / "amd").string(), "-G", "Ninja"}, out));
  ASSERT_TRUE(runs({"cmake", "--build", (out / "amd").string()}, out));
  EXPECT_TRUE(fs::exists(out / "amd" / "libpeak_matmul_hip_fp32.a"));
  for (size_t i = 0; i < 2; ++i)
    for (const char* t : {"gfx90a", "gfx1030"})
      expect_defines(out / "amd" / fmt::format("config_{}_{}.co", i, t), symbols_of(manifest, i));

  // NVIDIA: nvcc through the mapping header, the cubins beside CUDA's runtime.
  const std::string root = "-DCUDAToolkit_ROOT=" + nvcc().parent_path().parent_path().string();
  ASSERT_TRUE(runs({"cmake", "-S", out.string(), "-B", (out / "nvidia").string(), "-G", "Ninja",
                    "-DPEAK_PLATFORM=nvidia", root},
                   out));
  ASSERT_TRUE(runs({"cmake", "--build", (out / "nvidia").string()}, out));
  EXPECT_TRUE(fs::exists(out / "nvidia" / "libpeak_matmul_hip_fp32.a"));
  for (size_t i = 0; i < 2; ++i)
    expect_defines(out / "nvidia" / fmt::format("config_{}.co", i), symbols_of(manifest, i));

  // Another platform is refused by the CMake configuration, naming the two.
  ProcessOptions bad;
  bad.cwd = out;
  bad.timeout_s = 120;
  bad.argv = {"cmake", "-S", out.string(), "-B", (out / "other").string(), "-DPEAK_PLATFORM=intel"};
  auto refused = run_process(bad);
  ASSERT_TRUE(refused);
  EXPECT_FALSE(refused->ok());
  EXPECT_NE((refused->out + refused->err).find("PEAK_PLATFORM is amd or nvidia"), std::string::npos)
      << refused->out << refused->err;
}

}  // namespace
}  // namespace peak
