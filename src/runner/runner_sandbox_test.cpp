// Hostile runners under the runner sandbox: peak-hostile-runner (hostile_device_main.cpp) is the
// real runner with a device whose launches attack the host. Each test starts it through run_job,
// the path every runner takes, and checks that the attack is refused with a clear disposition and
// that nothing leaks. The file-system rules need namespaces (bubblewrap); those tests say so and
// skip where the host allows only a partial sandbox.
#include "runner/runner_sandbox.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "runner/hostile_testing.h"
#include "util/fs.h"

namespace peak {
namespace {

constexpr const char* kPlantedKey = "sk-planted-9f8e7d6c5b4a39281706";

class RunnerSandbox : public ::testing::Test {
 protected:
  void SetUp() override {
    sandbox_was_ = sandbox_enabled();
    set_sandbox_enabled(true);  // these tests are about the sandbox, whatever PEAK_NO_SANDBOX says
    auto d = make_temp_dir("peak-runner-sandbox-");
    ASSERT_TRUE(d) << d.error();
    dir_ = *d;
    scratch_ = dir_ / "scratch";
    outside_ = dir_ / "outside";
    fs::create_directories(outside_);
    job_ = testing::hostile_job({"attack"}, (scratch_ / "out").string());
    opts_.executable = fs::path(PEAK_BINARY_DIR) / "peak-hostile-runner";
    opts_.task_timeout_s = 120;
    opts_.start_timeout_s = 120;
    opts_.max_restarts = 0;
  }
  void TearDown() override {
    set_sandbox_enabled(sandbox_was_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  TaskResult attack(const std::string& kind, const std::string& target = "") {
    opts_.env = {{"PEAK_HOSTILE_ATTACK", kind}, {"PEAK_HOSTILE_TARGET", target}};
    auto r = run_job(job_, opts_);
    EXPECT_TRUE(r) << r.error();
    if (!r || r->empty()) return {};
    return r->front();
  }
  static bool full() { return sandbox_support().level == SandboxSupport::Level::full; }
  // Every file under `root` whose content holds `needle`.
  static std::vector<std::string> files_holding(const fs::path& root, const std::string& needle) {
    std::vector<std::string> hits;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      auto text = read_file(it->path());
      if (text && text->find(needle) != std::string::npos) hits.push_back(it->path().string());
    }
    return hits;
  }

  bool sandbox_was_ = true;
  fs::path dir_, scratch_, outside_;
  RunnerJob job_;
  RunnerOptions opts_;
};

#define REQUIRE_NAMESPACES()                                                                 \
  if (!full())                                                                               \
  GTEST_SKIP() << "the file-system rules need namespaces, and the sandbox is partial here: " \
               << sandbox_support().detail

TEST_F(RunnerSandbox, PolicyCoversTheJobsArtifactsAndOutputFolders) {
  job_.tasks[0].artifact = (dir_ / "k.spv").string();
  RunnerTask second = job_.tasks[0];
  second.id = "again";
  job_.tasks.push_back(second);
  SandboxPolicy p = runner_sandbox(opts_, job_);
  EXPECT_EQ(p.role, "runner");
  EXPECT_TRUE(p.gpu);
  EXPECT_FALSE(p.allow_fork);
  EXPECT_EQ(p.writable, std::vector<fs::path>{scratch_ / "out"});
  EXPECT_EQ(p.readable, (std::vector<fs::path>{opts_.executable, dir_ / "k.spv"}));
  EXPECT_GT(p.limits.data, 0u);
  EXPECT_EQ(p.limits.address_space, 0u);  // GPU drivers reserve more than the machine has
  EXPECT_GE(p.limits.cpu_seconds, static_cast<uint64_t>(2 * 120 + 2 * 120));
}

TEST_F(RunnerSandbox, APlantedKeyReachesNoOutputNoFileAndNoScratchFolder) {
  ::setenv("OPENAI_API_KEY", kPlantedKey, 1);
  ::setenv("PEAK_TEST_SESSION_TOKEN", kPlantedKey, 1);
  ::setenv("VK_TEST_API_KEY", kPlantedKey, 1);  // a driver prefix does not let a key through
  std::error_code ec;
  fs::remove("/tmp/stolen-environment.txt", ec);
  TaskResult r = attack("environment");
  ::unsetenv("OPENAI_API_KEY");
  ::unsetenv("PEAK_TEST_SESSION_TOKEN");
  ::unsetenv("VK_TEST_API_KEY");
  // The runner aborted after dumping its environment on stderr: the crash message shows it.
  EXPECT_EQ(r.disposition, Disposition::crashed) << r.message;
  EXPECT_NE(r.message.find("PATH="), std::string::npos) << r.message;
  EXPECT_EQ(r.message.find(kPlantedKey), std::string::npos) << r.message;
  EXPECT_EQ(r.message.find("OPENAI_API_KEY"), std::string::npos) << r.message;
  // The dump went to the output folder, HOME and TMPDIR too: none holds the key.
  EXPECT_FALSE(files_holding(scratch_, "PATH=").empty());
  EXPECT_EQ(files_holding(dir_, kPlantedKey), std::vector<std::string>{});
  if (full()) {
    EXPECT_NE(r.message.find("HOME=/tmp"), std::string::npos) << r.message;
    EXPECT_FALSE(fs::exists("/tmp/stolen-environment.txt", ec)) << "the runner wrote to /tmp";
  }
  fs::remove("/tmp/stolen-environment.txt", ec);
}

TEST_F(RunnerSandbox, FilesOutsideTheJobCannotBeRead) {
  REQUIRE_NAMESPACES();
  ASSERT_TRUE(write_file(outside_ / "id_ed25519", kPlantedKey));
  TaskResult r = attack("read", (outside_ / "id_ed25519").string());
  EXPECT_EQ(r.disposition, Disposition::launch_failed) << r.message;
  EXPECT_NE(r.message.find("No such file or directory"), std::string::npos) << r.message;
  EXPECT_EQ(r.message.find(kPlantedKey), std::string::npos);
  // Nor the user's home, nor /etc beyond the loader's files.
  for (const char* path : {"/root/.bashrc", "/etc/shadow", "/etc/hostname"}) {
    TaskResult h = attack("read", path);
    EXPECT_EQ(h.disposition, Disposition::launch_failed) << path << ": " << h.message;
  }
}

TEST_F(RunnerSandbox, WritesOutsideTheOutputFolderFail) {
  REQUIRE_NAMESPACES();
  TaskResult r = attack("write", (outside_ / "planted.txt").string());
  EXPECT_EQ(r.disposition, Disposition::launch_failed) << r.message;
  EXPECT_NE(r.message.find("cannot create"), std::string::npos) << r.message;
  EXPECT_FALSE(fs::exists(outside_ / "planted.txt"));
  // Nor next to its own executable, nor anywhere in the sandbox's root. (A build folder under
  // /tmp lies inside the sandbox's private /tmp, where a write lands in that tmpfs and is gone
  // with the sandbox: it must not reach the real folder.)
  const bool build_in_tmp =
      fs::path(PEAK_BINARY_DIR).lexically_normal().string().rfind("/tmp/", 0) == 0;
  for (const fs::path& p : {fs::path(PEAK_BINARY_DIR) / "planted.txt", fs::path("/planted.txt")}) {
    TaskResult w = attack("write", p.string());
    if (!(build_in_tmp && p.parent_path() == fs::path(PEAK_BINARY_DIR))) {
      EXPECT_EQ(w.disposition, Disposition::launch_failed) << p << ": " << w.message;
      EXPECT_NE(w.message.find("Read-only file system"), std::string::npos) << w.message;
    }
    EXPECT_FALSE(fs::exists(p)) << p;
  }
  // The output folder is where it may write.
  TaskResult ok = attack("write", (scratch_ / "out" / "allowed.txt").string());
  EXPECT_EQ(ok.disposition, Disposition::passed) << ok.message;
  EXPECT_TRUE(fs::exists(scratch_ / "out" / "allowed.txt"));
}

TEST_F(RunnerSandbox, NoConnectionToALoopbackPort) {
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len), 0);
  TaskResult r = attack("connect", std::to_string(ntohs(a.sin_port)));
  EXPECT_EQ(r.disposition, Disposition::launch_failed) << r.message;
  EXPECT_NE(r.message.find("socket(AF_INET): Permission denied"), std::string::npos) << r.message;
  EXPECT_LT(::accept(listener, nullptr, nullptr), 0) << "a connection arrived";
  ::close(listener);
}

TEST_F(RunnerSandbox, AForkBombStartsNoProcess) {
  TaskResult r = attack("fork");
  EXPECT_EQ(r.disposition, Disposition::launch_failed) << r.message;
  EXPECT_NE(r.message.find("fork refused after 0 processes: Operation not permitted"),
            std::string::npos)
      << r.message;
}

TEST_F(RunnerSandbox, HundredGibibytesOfHostMemoryAreRefused) {
  TaskResult r = attack("memory");
  EXPECT_EQ(r.disposition, Disposition::crashed) << r.message;
  EXPECT_NE(r.message.find("host memory refused after"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("Cannot allocate memory"), std::string::npos) << r.message;
}

// The control: the same runner without the sandbox gets what it asks for, so the tests above
// would fail if the sandbox did nothing.
TEST_F(RunnerSandbox, WithoutTheSandboxTheSameAttacksSucceed) {
  set_sandbox_enabled(false);
  ASSERT_TRUE(write_file(outside_ / "id_ed25519", kPlantedKey));
  TaskResult read = attack("read", (outside_ / "id_ed25519").string());
  EXPECT_EQ(read.disposition, Disposition::crashed) << read.message;
  EXPECT_NE(read.message.find(kPlantedKey), std::string::npos);
  TaskResult fork = attack("fork");
  EXPECT_EQ(fork.disposition, Disposition::passed) << fork.message;
  TaskResult memory = attack("memory");
  EXPECT_EQ(memory.disposition, Disposition::passed) << memory.message;
}

// Not an attack: the hostile device reports the kernel and copy times it is told (for the tests
// of how the parent judges a kernel faster than a copy of its traffic).
TEST_F(RunnerSandbox, TheHostileDeviceReportsTheTimesItIsTold) {
  TimingPolicy p;
  p.warmup = 1;
  p.min_samples = 3;
  p.max_samples = 3;
  job_.tasks[0].timing = p;
  job_.tasks[0].copy_bytes = 128;
  opts_.env = {{"PEAK_HOSTILE_ATTACK", "none"},
               {"PEAK_HOSTILE_KERNEL_MS", "0.25"},
               {"PEAK_HOSTILE_COPY_MS", "2"}};
  auto r = run_job(job_, opts_);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->size(), 1u);
  ASSERT_EQ(r->at(0).disposition, Disposition::passed) << r->at(0).message;
  EXPECT_EQ(r->at(0).samples_ms, std::vector<double>(3, 0.25));
  EXPECT_EQ(r->at(0).copy_method, "hostile-copy");
  EXPECT_EQ(r->at(0).copy_samples_ms, std::vector<double>(3, 2.0));

  opts_.env.erase("PEAK_HOSTILE_COPY_MS");  // no copy method, as before the knob
  r = run_job(job_, opts_);
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->at(0).disposition, Disposition::passed) << r->at(0).message;
  EXPECT_TRUE(r->at(0).copy_samples_ms.empty());
  EXPECT_TRUE(r->at(0).copy_method.empty());
}

}  // namespace
}  // namespace peak
