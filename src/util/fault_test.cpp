#include "util/fault.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

namespace peak {
namespace {

TEST(Fault, ActiveOnTheNamedHitsOnly) {
  ::setenv("PEAK_FAULT", "other,eval.task-timeout#2,always", 1);
  EXPECT_FALSE(fault_active("eval.task-timeout"));  // hit 1
  EXPECT_TRUE(fault_active("eval.task-timeout"));   // hit 2
  EXPECT_FALSE(fault_active("eval.task-timeout"));  // hit 3
  EXPECT_TRUE(fault_active("always"));
  EXPECT_TRUE(fault_active("always"));
  EXPECT_FALSE(fault_active("never"));
  ::unsetenv("PEAK_FAULT");
  EXPECT_FALSE(fault_active("always"));
}

TEST(Fault, KillPointEndsTheProcessWithSigkill) {
  pid_t child = ::fork();
  if (child == 0) {
    ::setenv("PEAK_FAULT", "kill@here", 1);
    fault_point("not-here");
    fault_point("here");
    _exit(0);  // not reached
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

}  // namespace
}  // namespace peak
