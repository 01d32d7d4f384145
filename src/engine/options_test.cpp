// What a user asks of an evaluation, read into options: the budget as a count, a time or both.
#include "engine/options.h"

#include <gtest/gtest.h>

namespace peak {
namespace {

EvalOptions options_for(const EvalChoices& c) {
  EvalDevices d;
  d.facts = DeviceFacts{};
  d.facts->name = "a GPU";
  return eval_options_for(c, d);
}

TEST(BudgetOption, ACountATimeOrBoth) {
  EvalChoices c;
  ASSERT_TRUE(read_budget_option("24", c));
  EXPECT_EQ(c.budget, 24u);
  EXPECT_EQ(c.budget_seconds, 0);
  ASSERT_TRUE(read_budget_option("10m", c));
  EXPECT_EQ(c.budget, 0u);
  EXPECT_DOUBLE_EQ(c.budget_seconds, 600);
  ASSERT_TRUE(read_budget_option("24,1h", c));
  EXPECT_EQ(c.budget, 24u);
  EXPECT_DOUBLE_EQ(c.budget_seconds, 3600);
  EvalChoices untouched;
  ASSERT_TRUE(read_budget_option("", untouched));
  EXPECT_EQ(untouched.budget, 0u);
}

TEST(BudgetOption, AShareOfTheSpaceIsTheStrategyBudgets) {
  EvalChoices c;
  Status s = read_budget_option("15%", c);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("--strategy-budget"), std::string::npos) << s.message();
  EXPECT_FALSE(read_budget_option("ten", c));
}

TEST(BudgetOption, AGpuSearchEndsByDefaultAndATimeReplacesTheBound) {
  EvalChoices c;
  EvalOptions def = options_for(c);
  EXPECT_DOUBLE_EQ(def.budget.seconds, kDefaultGpuTuningSeconds);
  EXPECT_EQ(def.budget.evaluations, 48u);
  ASSERT_TRUE(read_budget_option("2m", c));
  EvalOptions timed = options_for(c);
  EXPECT_DOUBLE_EQ(timed.budget.seconds, 120);
  EXPECT_EQ(timed.budget.evaluations, 48u);  // the default count stays
  EvalChoices counted;
  ASSERT_TRUE(read_budget_option("5", counted));
  EXPECT_EQ(options_for(counted).budget.evaluations, 5u);
  EXPECT_EQ(options_for(counted).budget.seconds, 0);  // a count the user gave is not cut short
}

}  // namespace
}  // namespace peak
