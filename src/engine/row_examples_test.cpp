// The row-kernel examples end to end where a CPU can run them: the HLSL seed of softmax validated
// against the family's float64 CPU reference on lavapipe, on its validation and hidden shapes (a
// shape of every suite class, rows of 1, row lengths that are no multiple of 4 or 32).
#include <gtest/gtest.h>

#include "engine/workspace.h"
#include "util/fs.h"

namespace peak {
namespace {

TEST(RowExamples, TheHlslSoftmaxSeedValidatesOnTheCpuDevice) {
  auto tmp = make_temp_dir("peak-row-examples-");
  ASSERT_TRUE(tmp) << tmp.error();
  ::setenv("PEAK_DATA_DIR", PEAK_SOURCE_DIR, 1);
  auto ws =
      Workspace::init(fs::path(PEAK_SOURCE_DIR) / "examples" / "softmax-hlsl-fp32", *tmp / "ws");
  ASSERT_TRUE(ws) << ws.error();
  (*ws)->progress().set_quiet(true);
  EvalChoices choices;
  choices.budget = 1;
  choices.small = true;
  auto opts = (*ws)->eval_options(choices);
  ASSERT_TRUE(opts) << opts.error();
  auto e = (*ws)->evaluate_checkpoint(1, *opts, true, "validate");
  ASSERT_TRUE(e) << e.error();
  EXPECT_EQ(e->disposition, Disposition::passed) << e->message;
  std::error_code ec;
  fs::remove_all(*tmp, ec);
}

}  // namespace
}  // namespace peak
