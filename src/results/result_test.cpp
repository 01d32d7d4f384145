#include "results/result.h"

#include <gtest/gtest.h>

#include <cmath>

namespace peak {
namespace {

const double kNaN = std::nan("");

struct Case {
  const char* what;
  std::vector<ResultCandidate> evaluations;
  std::optional<size_t> result;
};

TEST(ResultRule, PicksTheCheckpointsResult) {
  const std::vector<Case> cases = {
      {"no evaluation", {}, std::nullopt},
      {"one that passed", {{"tune", true, "passed", 10}}, 0},
      {"the highest GFLOP/s among the standard ones",
       {{"tune", true, "passed", 10}, {"tune", true, "passed", 30}, {"tune", true, "passed", 20}},
       1},
      {"the earliest of equals", {{"tune", true, "passed", 10}, {"tune", true, "passed", 10}}, 0},
      {"a faster non-standard one does not count while a standard one passed",
       {{"tune", true, "passed", 10}, {"tune", false, "passed", 99}},
       0},
      {"non-standard ones when no standard one passed",
       {{"tune", true, "incorrect", kNaN},
        {"tune", false, "passed", 5},
        {"tune", false, "passed", 7}},
       2},
      {"a passed one not timed ranks below a timed one",
       {{"checkpoint", true, "passed", kNaN}, {"tune", true, "passed", 1}},
       1},
      {"failed ones are never chosen over one that passed",
       {{"tune", true, "passed", 1}, {"tune", true, "compile_failed", 100}},
       0},
      {"the latest when none passed",
       {{"tune", true, "incorrect", kNaN}, {"validate", false, "timeout", kNaN}},
       1},
      {"a suite benchmark is never the result",
       {{"tune", true, "incorrect", kNaN}, {kSuiteKind, true, "passed", 100}},
       0},
      {"a dispatch table is never the result",
       {{"tune", true, "passed", 1}, {kDispatchKind, true, "passed", 100}},
       0},
      {"nothing when only suites and dispatch tables",
       {{kSuiteKind, true, "passed", 1}, {kDispatchKind, true, "passed", 2}},
       std::nullopt},
  };
  for (const auto& c : cases) EXPECT_EQ(result_index(c.evaluations), c.result) << c.what;
}

TEST(ResultRule, SuiteAndDispatchKindsMayNotBeTheResult) {
  EXPECT_FALSE(kind_may_be_result(kSuiteKind));
  EXPECT_FALSE(kind_may_be_result(kDispatchKind));
  EXPECT_TRUE(kind_may_be_result("checkpoint"));
  EXPECT_TRUE(kind_may_be_result("tune"));
}

}  // namespace
}  // namespace peak
