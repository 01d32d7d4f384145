#include "validate/validate.h"

#include <gtest/gtest.h>

namespace peak {
namespace {

TEST(Tolerance, ScalesWithReductionAndCatchesTf32) {
  double t64 = default_tolerance(DType::f32, DType::f32, 64);
  double t4096 = default_tolerance(DType::f32, DType::f32, 4096);
  EXPECT_GT(t4096, t64);
  EXPECT_NEAR(t4096, 6.4e-5, 1e-6);
  // TF32 errors are about 3e-4 of the output scale: well over the fp32 tolerance.
  EXPECT_LT(t4096, 3e-4 / 2);
  // fp16 inputs with fp32 accumulation get a looser bound; fp16 outputs add their rounding.
  EXPECT_GT(default_tolerance(DType::f16, DType::f32, 4096), t4096);
  EXPECT_GT(default_tolerance(DType::f16, DType::f16, 4096),
            default_tolerance(DType::f16, DType::f32, 4096));
  EXPECT_EQ(default_tolerance(DType::i32, DType::i32, 100), 0);
}

}  // namespace
}  // namespace peak
