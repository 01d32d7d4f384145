// The device lock between processes: a second process waits (and says for whom) while the first
// holds the device, and gets it once the first lets go or dies. Ordering is observed through a
// pipe, never through timing.
#include "util/device_lock.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "util/fs.h"
#include "util/temp_dir_testing.h"

namespace peak {
namespace {

class DeviceLockTest : public testing::TempDirTest {
 protected:
  DeviceLockTest() : TempDirTest("peak-lock-test-") {}
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(TempDirTest::SetUp());
    const char* old = std::getenv("PEAK_LOCK_DIR");
    old_ = old ? old : "";
    ::setenv("PEAK_LOCK_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    if (old_.empty())
      ::unsetenv("PEAK_LOCK_DIR");
    else
      ::setenv("PEAK_LOCK_DIR", old_.c_str(), 1);
    TempDirTest::TearDown();
  }
  // Reads one line from `fd` (blocking).
  static std::string line_from(int fd) {
    std::string s;
    char c;
    while (::read(fd, &c, 1) == 1 && c != '\n') s.push_back(c);
    return s;
  }
  static void say(int fd, const std::string& s) {
    std::string line = s + "\n";
    (void)!::write(fd, line.data(), line.size());
  }

  const fs::path& dir_ = temp_dir();
  std::string old_;
};

TEST(DeviceLockKey, OneKeyPerPhysicalDevice) {
  // CUDA's cudaDeviceGetPCIBusId and Vulkan's VK_EXT_pci_bus_info name the same GPU the same way.
  EXPECT_EQ(device_lock_key("0000:1B:00.0", false, "NVIDIA H100 80GB HBM3"), "pci-0000-1b-00.0");
  EXPECT_EQ(device_lock_key("0000:1b:00.0", false, "NVIDIA H100 (Vulkan)"), "pci-0000-1b-00.0");
  EXPECT_NE(device_lock_key("0000:1c:00.0", false, "NVIDIA H100"), "pci-0000-1b-00.0");
  // Every CPU device shares the CPU.
  EXPECT_EQ(device_lock_key("", true, "llvmpipe (LLVM 15.0.6, 256 bits)"), "cpu");
  EXPECT_EQ(device_lock_key("", false, "Some GPU / 8 GB"), "gpu-some-gpu-8-gb");
}

// Another thread of the process waits for the holder's release; the holder's own holds nest.
TEST_F(DeviceLockTest, AnotherThreadWaitsForTheHoldersRelease) {
  DeviceLock lock("cpu", "the CPU");
  auto held = std::make_optional(lock.acquire());
  ASSERT_TRUE(*held) << held->error();
  std::atomic<bool> got{false};
  std::thread other([&] {
    auto g = lock.acquire();
    got = static_cast<bool>(g);
  });
  // Its wait has begun once the statistics count it (an event, with a bound for a broken lock).
  for (int i = 0; i < 120000 && lock.stats().queued == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(lock.stats().queued, 1);
  EXPECT_EQ(lock.stats().waits, 0);  // no other process
  EXPECT_FALSE(got);
  auto nested = lock.acquire();  // this thread's own hold nests
  ASSERT_TRUE(nested);
  { [[maybe_unused]] auto gone = std::move(*nested); }
  EXPECT_FALSE(got);
  held.reset();
  other.join();
  EXPECT_TRUE(got);
  EXPECT_EQ(lock.stats().acquisitions, 2);
}

TEST_F(DeviceLockTest, NestedHoldsShareOneLockAndCountOnce) {
  DeviceLock lock("cpu", "the CPU");
  {
    auto a = lock.acquire();
    ASSERT_TRUE(a) << a.error();
    auto b = lock.acquire();
    ASSERT_TRUE(b) << b.error();
    EXPECT_EQ(lock.path(), dir_ / "cpu.lock");
    auto holder = read_file(lock.path());
    ASSERT_TRUE(holder);
    EXPECT_NE(holder->find("pid " + std::to_string(::getpid())), std::string::npos) << *holder;
  }
  DeviceLockStats s = lock.stats();
  EXPECT_EQ(s.acquisitions, 1);
  EXPECT_EQ(s.waits, 0);
  EXPECT_EQ(*read_file(lock.path()), "");  // released: no holder named
  EXPECT_EQ(DeviceLock::for_device("k", "x"), DeviceLock::for_device("k", "y"));
}

TEST_F(DeviceLockTest, ASecondProcessWaitsSaysForWhomAndGetsItAfterwards) {
  DeviceLock mine("pci-0000-01-00.0", "GPU 0000:01:00.0");
  auto held = mine.acquire();
  ASSERT_TRUE(held) << held.error();
  int to_parent[2];
  ASSERT_EQ(::pipe(to_parent), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(to_parent[0]);
    DeviceLock theirs("pci-0000-01-00.0", "GPU 0000:01:00.0");
    theirs.set_wait_notice([&](const std::string& m) { say(to_parent[1], "notice " + m); });
    auto g = theirs.acquire();
    DeviceLockStats s = theirs.stats();
    say(to_parent[1], fmt::format("acquired waits={} for={}", s.waits,
                                  s.waited_for.empty() ? "" : s.waited_for.front()));
    ::_exit(g ? 0 : 1);
  }
  ::close(to_parent[1]);
  // The child cannot have the device while this process holds it: its first word is a wait.
  std::string first = line_from(to_parent[0]);
  EXPECT_TRUE(starts_with(
      first, "notice waiting for GPU 0000:01:00.0: in use by pid " + std::to_string(::getpid())))
      << first;
  held = Result<DeviceLock::Guard>(DeviceLock::Guard{});  // let go
  std::string line;
  do {
    line = line_from(to_parent[0]);
  } while (starts_with(line, "notice "));
  EXPECT_TRUE(starts_with(line, "acquired waits=1 for=pid " + std::to_string(::getpid()))) << line;
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ::close(to_parent[0]);
}

TEST_F(DeviceLockTest, AKilledHolderLeavesNoStaleLock) {
  int to_parent[2];
  ASSERT_EQ(::pipe(to_parent), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    DeviceLock theirs("cpu", "the CPU");
    auto g = theirs.acquire();
    say(to_parent[1], g ? "held" : "failed");
    ::pause();
    ::_exit(0);
  }
  ::close(to_parent[1]);
  ASSERT_EQ(line_from(to_parent[0]), "held");
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  DeviceLock mine("cpu", "the CPU");
  auto g = mine.acquire();
  ASSERT_TRUE(g) << g.error();
  EXPECT_EQ(mine.stats().waits, 0);
  ::close(to_parent[0]);
}

TEST_F(DeviceLockTest, AnUnusableLockFolderIsAClearError) {
  ::setenv("PEAK_LOCK_DIR", "/proc/peak-locks", 1);
  DeviceLock lock("cpu", "the CPU");
  auto g = lock.acquire();
  ASSERT_FALSE(g);
  EXPECT_NE(g.error().find("PEAK_LOCK_DIR=/proc/peak-locks"), std::string::npos) << g.error();
}

}  // namespace
}  // namespace peak
