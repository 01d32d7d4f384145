// A compute shader in which one invocation never ends, committed on the CPU Vulkan device
// (lavapipe): charged `timeout` after two runners, then a correct candidate passes.
#include "cli/timeout_cli_testing.h"

namespace peak {
namespace {

class TimeoutCli : public testing::HangCli {};

TEST_F(TimeoutCli, AHungShaderIsChargedTimeoutOnceAndTheNextCandidatePasses) {
  Commits c = hang_then_pass("matmul-hlsl-fp32", "kernel.hlsl",
                             "  if (row == 0 && col == 0) {\n"
                             "    [loop] while (A[0] < 2.0f) {  // inputs lie in [-1, 1]\n"
                             "      C[0] = acc;\n"
                             "    }\n"
                             "  }\n");
  expect_charged_then_passes(c, 0);  // the time: scripts/cli-cases.sh, case 17
}

}  // namespace
}  // namespace peak
