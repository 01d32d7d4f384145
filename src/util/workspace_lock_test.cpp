// The workspace lock. flock(2) locks belong to an open file, so a second acquisition in this
// process contends with the first exactly as another process would; a child process shows that
// a waiter gets the lock once the holder lets go. Ordering is observed, never timed.
#include "util/workspace_lock.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "util/fs.h"

namespace peak {
namespace {

class WorkspaceLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = make_temp_dir("peak-ws-lock-");
    ASSERT_TRUE(d) << d.error();
    dir_ = *d;
    fs::create_directories(dir_ / ".peak");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

TEST_F(WorkspaceLockTest, ASecondWriterIsToldWhoHoldsItAndWhatToDo) {
  auto first = WorkspaceLock::acquire(dir_ / ".peak", false);
  ASSERT_TRUE(first) << first.error();
  EXPECT_TRUE(first->held());
  auto second = WorkspaceLock::acquire(dir_ / ".peak", false);
  ASSERT_FALSE(second);
  EXPECT_NE(second.error().find("the workspace " + dir_.string() + " is being changed by pid " +
                                std::to_string(::getpid())),
            std::string::npos)
      << second.error();
  EXPECT_NE(second.error().find("--wait"), std::string::npos) << second.error();
  *first = WorkspaceLock();  // released
  EXPECT_EQ(*read_file(dir_ / ".peak" / "lock"), "");
  auto third = WorkspaceLock::acquire(dir_ / ".peak", false);
  EXPECT_TRUE(third) << third.error();
}

TEST_F(WorkspaceLockTest, WithWaitTheSecondQueuesUntilTheFirstLetsGo) {
  auto first = WorkspaceLock::acquire(dir_ / ".peak", false);
  ASSERT_TRUE(first) << first.error();
  int to_parent[2];
  ASSERT_EQ(::pipe(to_parent), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(to_parent[0]);
    bool told = false;
    auto lock = WorkspaceLock::acquire(dir_ / ".peak", true, [&](const std::string& m) {
      if (told) return;
      told = true;
      std::string line = m + "\n";
      (void)!::write(to_parent[1], line.data(), line.size());
    });
    std::string done = lock ? "got it\n" : "failed: " + lock.error() + "\n";
    (void)!::write(to_parent[1], done.data(), done.size());
    ::_exit(lock ? 0 : 1);
  }
  ::close(to_parent[1]);
  auto line = [&] {
    std::string s;
    char c;
    while (::read(to_parent[0], &c, 1) == 1 && c != '\n') s.push_back(c);
    return s;
  };
  std::string waiting = line();  // the child is waiting: it said so, naming this process
  EXPECT_NE(waiting.find("waiting for the workspace " + dir_.string()), std::string::npos)
      << waiting;
  EXPECT_NE(waiting.find("pid " + std::to_string(::getpid())), std::string::npos) << waiting;
  *first = WorkspaceLock();
  EXPECT_EQ(line(), "got it");
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ::close(to_parent[0]);
}

TEST_F(WorkspaceLockTest, AMissingStateFolderIsAClearError) {
  auto l = WorkspaceLock::acquire(dir_ / "nowhere" / ".peak", false);
  ASSERT_FALSE(l);
  EXPECT_NE(l.error().find("cannot open the workspace lock"), std::string::npos) << l.error();
}

}  // namespace
}  // namespace peak
