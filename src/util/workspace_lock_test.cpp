#include "util/workspace_lock.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "util/fs.h"

namespace peak {
namespace {

class LockTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = *make_temp_dir("peak-lock-test-"); }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

TEST_F(LockTest, SecondHolderIsRefusedWithTheFirstsName) {
  fs::path path = dir_ / "lock";
  EXPECT_FALSE(WorkspaceLock::holder(path));  // no file yet
  auto first = WorkspaceLock::acquire(path, "peak apply tb-tiling", false);
  ASSERT_TRUE(first) << first.error();
  auto h = WorkspaceLock::holder(path);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->process.pid, ::getpid());
  EXPECT_EQ(h->command, "peak apply tb-tiling");
  // flock belongs to the open file: a second open in the same process conflicts too.
  auto second = WorkspaceLock::acquire(path, "peak checkout 2", false);
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error_kind(), ErrorKind::environment);
  EXPECT_NE(second.error().find("peak apply tb-tiling"), std::string::npos) << second.error();
  EXPECT_NE(second.error().find("pid " + std::to_string(::getpid())), std::string::npos)
      << second.error();
  EXPECT_NE(second.error().find("--wait"), std::string::npos) << second.error();
  first->reset();
  EXPECT_FALSE(WorkspaceLock::holder(path));
  auto third = WorkspaceLock::acquire(path, "peak checkout 2", false);
  EXPECT_TRUE(third) << third.error();
}

TEST_F(LockTest, WaitBlocksUntilTheHolderLetsGo) {
  fs::path path = dir_ / "lock";
  auto first = WorkspaceLock::acquire(path, "peak tune", false);
  ASSERT_TRUE(first);
  std::promise<std::string> waiting;
  auto told = waiting.get_future();
  bool acquired = false;
  std::string error, holder;
  std::thread second([&] {
    auto l = WorkspaceLock::acquire(path, "peak tune 2", true,
                                    [&](const std::string& m) { waiting.set_value(m); });
    acquired = l.is_ok();
    if (!l) error = l.error();
    auto h = WorkspaceLock::holder(path);
    holder = h ? h->command : "";
  });
  std::string message = told.get();  // the waiter says whom it waits for before blocking
  EXPECT_NE(message.find("peak tune"), std::string::npos) << message;
  first->reset();
  second.join();
  ASSERT_TRUE(acquired) << error;
  EXPECT_EQ(holder, "peak tune 2");
}

TEST_F(LockTest, TheLockEndsWithItsProcess) {
  fs::path path = dir_ / "lock";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  if (child == 0) {
    auto l = WorkspaceLock::acquire(path, "peak run", false);
    char c = l ? 'y' : 'n';
    if (::write(ready[1], &c, 1) != 1) _exit(3);
    ::pause();  // until killed
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  auto h = WorkspaceLock::holder(path);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->process.pid, child);
  EXPECT_EQ(liveness(h->process), Liveness::alive);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(WorkspaceLock::holder(path));  // kill -9 leaves no stale lock
  EXPECT_EQ(liveness(h->process), Liveness::dead);
  EXPECT_TRUE(WorkspaceLock::acquire(path, "peak run --resume", false));
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST(ProcessIdentityTest, LivenessTellsPidReuseAndOtherHosts) {
  ProcessIdentity me = this_process();
  EXPECT_EQ(me.pid, ::getpid());
  EXPECT_FALSE(me.host.empty());
  EXPECT_FALSE(me.start.empty());
  EXPECT_EQ(liveness(me), Liveness::alive);
  ProcessIdentity reused = me;
  reused.start = "2001-01-01T00:00:00.00Z";  // the same pid, started at another time
  EXPECT_EQ(liveness(reused), Liveness::dead);
  ProcessIdentity elsewhere = me;
  elsewhere.host = me.host + "-other";
  EXPECT_EQ(liveness(elsewhere), Liveness::unknown);
  EXPECT_EQ(liveness(ProcessIdentity{}), Liveness::dead);
}

// A process that has ended but is not collected yet (a zombie) is dead: it holds nothing.
TEST(ProcessIdentityTest, AZombieIsDead) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  // The child has exited once /proc says so; it stays a zombie until waitpid below.
  bool zombie = false;
  for (int i = 0; i < 600 && !zombie; ++i) {  // one minute at most: a deadline, never a pace
    auto stat = read_file("/proc/" + std::to_string(child) + "/stat");
    zombie = stat && stat->find(") Z ") != std::string::npos;
    if (!zombie) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(zombie);
  ProcessIdentity p;
  p.pid = child;
  p.host = this_process().host;
  EXPECT_EQ(liveness(p), Liveness::dead);
  int status = 0;
  ::waitpid(child, &status, 0);
}

}  // namespace
}  // namespace peak
