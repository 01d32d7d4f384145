// A CUDA kernel in which one thread spins forever, committed on the GPU (label gpu): charged
// `timeout` within 60 s of its first launch, then a correct candidate passes on the same device.
#include "cli/timeout_cli_testing.h"

namespace peak {
namespace {

class TimeoutCliGpu : public testing::HangCli {};

TEST_F(TimeoutCliGpu, AHungKernelIsChargedTimeoutOnceAndTheNextCandidatePasses) {
  Commits c = hang_then_pass(fs::path(PEAK_SOURCE_DIR) / "examples" / "matmul-cuda-fp32", "kernel.cu",
                             "  if (row == 0 && col == 0)\n"
                             "    for (;;)\n"
                             "      if (clock64() < 0) break;  // never: the clock only grows\n");
  expect_charged_then_passes(c, 60);
}

}  // namespace
}  // namespace peak
