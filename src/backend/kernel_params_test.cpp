#include "backend/kernel_params.h"

#include <gtest/gtest.h>

namespace peak {
namespace {

TEST(KernelParams, TheMangledNameGivesTheParameterSizes) {
  // scale(float const*, float*, int)
  EXPECT_EQ(mangled_param_sizes("_Z5scalePKfPfi"), (std::vector<int64_t>{8, 8, 4}));
  // k<64>(float const*, unsigned long, long long, CUtensorMap_st) as nvcc mangles a template.
  EXPECT_EQ(mangled_param_sizes("_Z1kILi64EEvPKfmx14CUtensorMap_st"),
            (std::vector<int64_t>{8, 8, 8, 128}));
  EXPECT_EQ(mangled_param_sizes("_Z4noopv"), (std::vector<int64_t>{}));
  EXPECT_EQ(mangled_param_sizes("_Z1k4Pair"), (std::vector<int64_t>{-1}));  // a struct
  EXPECT_FALSE(mangled_param_sizes("scale"));                               // extern "C": no types
}

TEST(KernelParams, ArgumentsAreCheckedAsTheRunnerChecksThem) {
  BuildResult b;
  b.resources = {
      {"kernels", {{"scale", {{"mangled", "_Z5scalePKfPfi"}}}, {"raw", {{"mangled", "raw"}}}}}};
  LaunchPlan p;
  PlanStep st;
  st.kernel = "scale";
  st.line = 12;
  PlanArg x{PlanArg::Kind::array, 0, 0, "X"}, y{PlanArg::Kind::array, 1, 0, "Y"},
      n{PlanArg::Kind::value, 0, 100, "N"};
  st.args = {x, y, n};
  p.steps = {st};
  std::vector<std::string> unchecked;
  EXPECT_EQ(check_plan_args(p, b, &unchecked).disposition, Disposition::passed);
  p.steps[0].args = {x, y};
  PlanResult r = check_plan_args(p, b);
  EXPECT_EQ(r.disposition, Disposition::launch_failed);
  EXPECT_EQ(r.message, "line 12: kernel `scale` takes 3 parameters; the plan's args pass 2");
  p.steps[0].args = {x, n, y};  // a pointer where the kernel takes an int
  r = check_plan_args(p, b);
  EXPECT_EQ(r.disposition, Disposition::launch_failed);
  EXPECT_NE(r.message.find("argument 3 of `scale` (`Y`) is a pointer (8 bytes), but the kernel's "
                           "parameter 3 takes 4 bytes"),
            std::string::npos)
      << r.message;
  p.steps[0].args = {x, y, PlanArg{PlanArg::Kind::value, 0, int64_t{1} << 40, "BIG"}};
  EXPECT_EQ(check_plan_args(p, b).disposition, Disposition::launch_failed);
  // An extern "C" kernel: left to the driver, and named.
  p.steps[0].kernel = "raw";
  p.steps[0].args = {x};
  EXPECT_EQ(check_plan_args(p, b, &unchecked).disposition, Disposition::passed);
  EXPECT_EQ(unchecked, (std::vector<std::string>{"raw"}));
}

}  // namespace
}  // namespace peak
