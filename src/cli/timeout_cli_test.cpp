// A compute shader that does not end, committed on the CPU Vulkan device (lavapipe): charged
// `timeout` after two runners, then a correct candidate passes.
//
// llvmpipe ends every loop of a shader invocation after 65535 iterations in all (its loop
// limiter), so no shader spins forever there. Every invocation instead runs a loop that never
// ends on a GPU, each iteration 64 dependent sines: the limiter leaves each invocation about
// 4 million of them, thousands of times the seed's work, and the larger validation shapes run
// for minutes. The context's sizes are capped at 128 so that the seed's own validation tasks
// stay short and the deadline is the CPU floor (30 s), whatever shapes the run draws.
#include "cli/timeout_cli_testing.h"

namespace peak {
namespace {

class TimeoutCli : public testing::HangCli {
 protected:
  // matmul-hlsl-fp32 with every scalar's range capped at 128.
  fs::path small_context() {
    const fs::path dir = tmp_ / "matmul-hlsl-fp32-small";
    fs::create_directories(dir);
    const fs::path from = fs::path(PEAK_SOURCE_DIR) / "examples" / "matmul-hlsl-fp32";
    fs::copy_file(from / "kernel.hlsl", dir / "kernel.hlsl");
    auto read = read_file(from / "kernel.toml");
    EXPECT_TRUE(read) << read.error();
    const std::string toml = read ? *read : std::string();
    const std::string capped = replace_all(toml, "range = [1, 1024, 1]", "range = [1, 128, 1]");
    EXPECT_NE(capped, toml) << "the example's ranges changed: update this test";
    EXPECT_TRUE(write_file(dir / "kernel.toml", capped));
    return dir;
  }
};

TEST_F(TimeoutCli, AHungShaderIsChargedTimeoutOnceAndTheNextCandidatePasses) {
  Commits c = hang_then_pass(small_context(), "kernel.hlsl",
                             "  float x = acc;\n"
                             "  [loop] while (A[0] < 2.0f) {  // inputs lie in [-1, 1]\n"
                             "    [unroll] for (int j = 0; j < 64; ++j) x = sin(x) + 0.5f * A[0];\n"
                             "    if (x > 4.0f) C[row * N + col] = x;  // never: |x| <= 1.5\n"
                             "  }\n");
  expect_charged_then_passes(c, 0);  // the time: scripts/cli-cases.sh, case 17
}

}  // namespace
}  // namespace peak
