// The examples of the families beyond matmul end to end where a CPU can run them: the HLSL seeds
// of softmax and attention validated against their family's float64 CPU reference on lavapipe,
// on their validation and hidden shapes (softmax: a shape of every suite class, rows of 1, row
// lengths that are no multiple of 4 or 32; attention: decode and prefill, causal and not, more
// queries than keys).
#include <gtest/gtest.h>

#include "engine/workspace.h"
#include "util/fs.h"

namespace peak {
namespace {

// Validates the seed of examples/NAME on lavapipe (one configuration, the small shapes).
void expect_seed_validates(const std::string& name) {
  auto tmp = make_temp_dir("peak-family-examples-");
  ASSERT_TRUE(tmp) << tmp.error();
  ::setenv("PEAK_DATA_DIR", PEAK_SOURCE_DIR, 1);
  auto ws = Workspace::init(fs::path(PEAK_SOURCE_DIR) / "examples" / name, *tmp / "ws");
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

TEST(RowExamples, TheHlslSoftmaxSeedValidatesOnTheCpuDevice) {
  expect_seed_validates("softmax-hlsl-fp32");
}

TEST(AttentionExamples, TheHlslSeedValidatesOnTheCpuDevice) {
  expect_seed_validates("attention-hlsl-fp32");
}

}  // namespace
}  // namespace peak
