// The sandbox's pieces (environment, bubblewrap command line, filter) and each of its rules,
// tried by real programs: a shell, dd, the C preprocessor and nvcc where it is installed. Rules
// that need namespaces skip, saying why, where the host allows only a partial sandbox; the partial
// sandbox itself is tried explicitly.
#include "util/sandbox.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "util/fs.h"
#include "util/host_files_testing.h"
#include "util/process.h"

namespace peak {
namespace {

constexpr const char* kSecret = "sk-planted-0a1b2c3d4e5f60718293";

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

class Sandbox : public ::testing::Test {
 protected:
  void SetUp() override {
    was_ = sandbox_enabled();
    set_sandbox_enabled(true);
    auto d = make_temp_dir("peak-sandbox-test-");
    ASSERT_TRUE(d) << d.error();
    dir_ = *d;
    scratch_ = dir_ / "scratch";
    outside_ = dir_ / "outside";
    fs::create_directories(scratch_);
    fs::create_directories(outside_);
    ASSERT_TRUE(write_file(outside_ / "secret.h", std::string("int leaked = ") + kSecret + ";\n"));
  }
  void TearDown() override {
    set_sandbox_enabled(was_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static bool full() { return sandbox_support().level == SandboxSupport::Level::full; }
  SandboxPolicy shell_policy() {
    SandboxPolicy p = SandboxPolicy::compiler({scratch_}, {});
    p.role = "test";
    return p;
  }
  Result<ProcessResult> run(const SandboxPolicy& p, std::vector<std::string> argv,
                            std::map<std::string, std::string> env = {}) {
    ProcessOptions o;
    o.argv = std::move(argv);
    o.sandbox = p;
    o.env = std::move(env);
    o.timeout_s = 120;
    return run_process(o);
  }
  // A source in scratch that includes a file outside it by its absolute path.
  fs::path hostile_source(const std::string& name) {
    fs::path src = scratch_ / name;
    EXPECT_TRUE(write_file(src, "#include \"" + (outside_ / "secret.h").string() + "\"\n"));
    return src;
  }

  bool was_ = true;
  fs::path dir_, scratch_, outside_;
};

#define REQUIRE_NAMESPACES()                                                                 \
  if (!full())                                                                               \
  GTEST_SKIP() << "the file-system rules need namespaces, and the sandbox is partial here: " \
               << sandbox_support().detail

TEST(SandboxPieces, CredentialNamesAreRecognized) {
  for (const char* n : {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GITHUB_TOKEN",
                        "AWS_SECRET_ACCESS_KEY", "PGPASSWORD", "HF_AUTH", "session_cookie"})
    EXPECT_TRUE(looks_like_secret(n)) << n;
  for (const char* n :
       {"PATH", "LANG", "VK_ICD_FILENAMES", "CUDA_VISIBLE_DEVICES", "LP_NUM_THREADS"})
    EXPECT_FALSE(looks_like_secret(n)) << n;
}

TEST(SandboxPieces, TheEnvironmentKeepsOnlyWhatThePolicyNames) {
  SandboxPolicy p = SandboxPolicy::runner("/x/peak-runner", {}, {"/s/out"}, 60);
  std::vector<std::string> parent = {"PATH=/usr/bin",
                                     "HOME=/home/u",
                                     "OPENAI_API_KEY=sk-1",
                                     "VK_ICD_FILENAMES=/e/icd.json",
                                     "VK_DEBUG_TOKEN=t",
                                     "LC_ALL=C.UTF-8",
                                     "SSH_AUTH_SOCK=/run/ssh",
                                     "TMPDIR=/home/u/tmp",
                                     "PEAK_RUNNER_FENCE_TIMEOUT_S=3"};
  auto full_env = sandbox_environment(p, parent, SandboxSupport::Level::full);
  EXPECT_TRUE(has(full_env, "PATH=/usr/bin"));
  EXPECT_TRUE(has(full_env, "VK_ICD_FILENAMES=/e/icd.json"));
  EXPECT_TRUE(has(full_env, "LC_ALL=C.UTF-8"));
  EXPECT_TRUE(has(full_env, "PEAK_RUNNER_FENCE_TIMEOUT_S=3"));
  EXPECT_TRUE(has(full_env, "HOME=/tmp"));
  EXPECT_TRUE(has(full_env, "TMPDIR=/tmp"));
  for (const auto& kv : full_env) {
    EXPECT_EQ(kv.find("sk-1"), std::string::npos) << kv;
    EXPECT_EQ(kv.find("/home/u"), std::string::npos) << kv;
    EXPECT_EQ(kv.find("VK_DEBUG_TOKEN"), std::string::npos) << kv;  // a driver prefix is no pass
    EXPECT_EQ(kv.find("SSH_AUTH_SOCK"), std::string::npos) << kv;
  }
  auto partial = sandbox_environment(p, parent, SandboxSupport::Level::partial);
  EXPECT_TRUE(has(partial, "HOME=/s/out"));
  EXPECT_TRUE(has(partial, "TMPDIR=/s/out"));
}

TEST(SandboxPieces, BubblewrapSeesTheSystemReadOnlyAndScratchWritable) {
  SandboxPolicy p = SandboxPolicy::compiler({"/work/ws/.peak/cache"}, {"/opt/cuda-13/bin/nvcc"});
  auto a = bwrap_arguments(p, "/usr/bin/bwrap", "/work/ws/.peak/cache", 7);
  std::string line = join(a, " ");
  EXPECT_EQ(a.front(), "/usr/bin/bwrap");
  for (const char* flag : {"--unshare-all", "--die-with-parent", "--new-session", "--cap-drop ALL",
                           "--ro-bind /usr /usr", "--proc /proc", "--dev /dev", "--tmpfs /tmp",
                           "--bind /work/ws/.peak/cache /work/ws/.peak/cache",
                           "--ro-bind-try /opt/cuda-13 /opt/cuda-13", "--remount-ro /",
                           "--chdir /work/ws/.peak/cache", "--seccomp 7"})
    EXPECT_NE(line.find(flag), std::string::npos) << flag << " in " << line;
  // Nothing of the user's files: no bind of /, /home, /root, /etc or /work beyond scratch.
  for (const char* path : {" / ", " /home", " /root", " /etc ", " /work "})
    EXPECT_EQ(line.find(std::string("bind") + path), std::string::npos) << path << " in " << line;
  EXPECT_EQ(line.find("--share-net"), std::string::npos);
  EXPECT_EQ(line.find("--dev-bind"), std::string::npos);  // a compiler gets no device node
  // A runner reaches the GPUs and /sys.
  auto r = bwrap_arguments(SandboxPolicy::runner("/b/peak-runner", {}, {}, 60), "bwrap", {}, -1);
  EXPECT_TRUE(has(r, "/sys"));
}

TEST(SandboxPieces, TheFilterCompiles) {
  SandboxPolicy p = SandboxPolicy::runner("/b/peak-runner", {}, {}, 60);
  auto full_filter = sandbox_filter(p, false);
  ASSERT_TRUE(full_filter) << full_filter.error();
  auto partial_filter = sandbox_filter(p, true);
  ASSERT_TRUE(partial_filter) << partial_filter.error();
  EXPECT_NE(*full_filter, *partial_filter);
}

TEST_F(Sandbox, TheChildGetsACleanEnvironment) {
  ::setenv("OPENAI_API_KEY", kSecret, 1);
  auto r = run(shell_policy(), {"env"}, {{"EXPLICIT", "given by the caller"}});
  ::unsetenv("OPENAI_API_KEY");
  ASSERT_TRUE(r) << r.error();
  ASSERT_TRUE(r->ok()) << r->describe() << r->err;
  EXPECT_EQ(r->out.find(kSecret), std::string::npos) << r->out;
  EXPECT_NE(r->out.find("EXPLICIT=given by the caller"), std::string::npos) << r->out;
  EXPECT_NE(r->out.find("PATH="), std::string::npos) << r->out;
}

TEST_F(Sandbox, FilesOutsideScratchCannotBeReadOrWritten) {
  REQUIRE_NAMESPACES();
  auto r = run(
      shell_policy(),
      {"sh", "-c",
       "cat " + (outside_ / "secret.h").string() + "; echo x > " + (outside_ / "w").string() +
           "; echo y > " + (scratch_ / "w").string() + "; ls /root /home 2>&1; cat /etc/hostname"});
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->out.find(kSecret), std::string::npos) << r->out;
  EXPECT_EQ(r->err.find(kSecret), std::string::npos) << r->err;
  EXPECT_NE(r->err.find("No such file or directory"), std::string::npos) << r->err;
  EXPECT_FALSE(fs::exists(outside_ / "w"));
  EXPECT_TRUE(fs::exists(scratch_ / "w"));
}

// A compile error never shows a file from outside the candidate: the preprocessor cannot open it.
TEST_F(Sandbox, ACompilerCannotIncludeAFileOutsideScratch) {
  REQUIRE_NAMESPACES();
  fs::path cc = find_program("cc");
  ASSERT_FALSE(cc.empty()) << "no C compiler on PATH";
  fs::path src = hostile_source("kernel.c");
  auto r = run(SandboxPolicy::compiler({scratch_}, {cc}), {cc.string(), "-E", src.string()});
  ASSERT_TRUE(r) << r.error();
  EXPECT_FALSE(r->ok());
  std::string all = r->out + r->err;
  EXPECT_EQ(all.find(kSecret), std::string::npos) << all;
  EXPECT_NE(all.find("No such file or directory"), std::string::npos) << all;
  // Without the sandbox the same command shows the secret: the check above can fail.
  set_sandbox_enabled(false);
  auto open = run(SandboxPolicy::compiler({scratch_}, {cc}), {cc.string(), "-E", src.string()});
  ASSERT_TRUE(open) << open.error();
  EXPECT_NE((open->out + open->err).find(kSecret), std::string::npos);
}

// A compiler sees its toolchain, its inputs and its scratch folder: of /etc only the loader's
// cache and the alternatives' links, so including a host file by any path fails and shows nothing.
TEST_F(Sandbox, ACompilerSeesNoHostFileOfEtc) {
  REQUIRE_NAMESPACES();
  fs::path cc = find_program("cc");
  ASSERT_FALSE(cc.empty()) << "no C compiler on PATH";
  ASSERT_FALSE(testing::host_file_lines().empty()) << "no /etc/passwd to hide";
  for (const std::string& include : testing::hostile_includes()) {
    SCOPED_TRACE(include);
    fs::path src = scratch_ / "kernel.c";
    ASSERT_TRUE(write_file(src, include + "\nint after;\n"));
    auto r = run(SandboxPolicy::compiler({scratch_}, {cc}), {cc.string(), "-E", src.string()});
    ASSERT_TRUE(r) << r.error();
    EXPECT_FALSE(r->ok());
    std::string all = r->out + r->err;
    EXPECT_EQ(testing::host_line_in(all), "") << all;
    EXPECT_NE(all.find("No such file or directory"), std::string::npos) << all;
  }
  auto ls = run(SandboxPolicy::compiler({scratch_}, {cc}), {"ls", "-A", "/etc"});
  ASSERT_TRUE(ls) << ls.error();
  std::vector<std::string> names = split_lines(trim(ls->out));
  std::sort(names.begin(), names.end());
  for (const std::string& n : names)
    EXPECT_TRUE(n == "ld.so.cache" || n == "alternatives") << "/etc/" << n << " is visible";
  auto line =
      join(bwrap_arguments(SandboxPolicy::compiler({scratch_}, {cc}), "bwrap", {}, -1), " ");
  for (const char* f : {"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hostname"})
    EXPECT_EQ(line.find(f), std::string::npos) << f << " in " << line;
}

TEST_F(Sandbox, NvccCannotIncludeAFileOutsideScratch) {
  REQUIRE_NAMESPACES();
  fs::path nvcc = find_program("nvcc");
  if (nvcc.empty() && ::access("/usr/local/cuda/bin/nvcc", X_OK) == 0)
    nvcc = "/usr/local/cuda/bin/nvcc";
  if (nvcc.empty()) GTEST_SKIP() << "nvcc is not installed";
  fs::path src = hostile_source("kernel.cu");
  auto r = run(SandboxPolicy::compiler({scratch_}, {nvcc}),
               {nvcc.string(), "-E", src.string(), "-o", (scratch_ / "kernel.ii").string()});
  ASSERT_TRUE(r) << r.error();
  EXPECT_FALSE(r->ok());
  std::string all = r->out + r->err;
  EXPECT_EQ(all.find(kSecret), std::string::npos) << all;
  EXPECT_NE(all.find("No such file or directory"), std::string::npos) << all;
}

TEST_F(Sandbox, NoNetwork) {
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len), 0);
  std::string port = std::to_string(ntohs(a.sin_port));
  auto r = run(shell_policy(), {"bash", "-c", "echo hello > /dev/tcp/127.0.0.1/" + port});
  ASSERT_TRUE(r) << r.error();
  EXPECT_FALSE(r->ok());
  EXPECT_NE(r->err.find("Permission denied"), std::string::npos) << r->err;
  EXPECT_LT(::accept(listener, nullptr, nullptr), 0) << "a connection arrived";
  ::close(listener);
}

TEST_F(Sandbox, ARunnerPolicyStartsNoProcess) {
  SandboxPolicy p = shell_policy();
  p.allow_fork = false;
  auto r = run(p, {"sh", "-c", "/bin/true; echo after"});
  ASSERT_TRUE(r) << r.error();
  EXPECT_NE(r->err.find("Cannot fork"), std::string::npos) << r->err;
  EXPECT_EQ(r->out.find("after"), std::string::npos) << r->out;
}

TEST_F(Sandbox, LimitsAreApplied) {
  SandboxPolicy p = shell_policy();
  p.limits.open_files = 16;
  auto r = run(p, {"sh", "-c", "ulimit -n"});
  ASSERT_TRUE(r && r->ok()) << (r ? r->err : r.error());
  EXPECT_EQ(trim(r->out), "16");
}

TEST_F(Sandbox, AFileOverTheSizeLimitStopsTheWriter) {
  SandboxPolicy p = shell_policy();
  p.limits.file_size = 1 << 20;
  auto r = run(p, {"dd", "if=/dev/zero", "of=" + (scratch_ / "big").string(), "bs=1M", "count=2"});
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->term_signal, SIGXFSZ) << r->describe() << r->err;
  EXPECT_LE(fs::file_size(scratch_ / "big"), uint64_t{1} << 20);
}

TEST_F(Sandbox, AddressSpaceIsCapped) {
  SandboxPolicy p = shell_policy();
  p.limits.address_space = uint64_t{256} << 20;
  auto r = run(p, {"dd", "if=/dev/zero", "of=/dev/null", "bs=512M", "count=1"});
  ASSERT_TRUE(r) << r.error();
  EXPECT_FALSE(r->ok());
  EXPECT_NE(r->err.find("memory exhausted"), std::string::npos) << r->err;
}

TEST_F(Sandbox, CpuTimeIsCapped) {
  SandboxPolicy p = shell_policy();
  p.limits.cpu_seconds = 1;
  auto r = run(p, {"sh", "-c", "while :; do :; done"});
  ASSERT_TRUE(r) << r.error();
  EXPECT_FALSE(r->timed_out) << "the CPU limit never stopped it";
  EXPECT_EQ(r->term_signal, SIGXCPU) << r->describe();
}

// The partial sandbox (no namespaces): environment, limits and filter, prepared for a host that
// has no bubblewrap and entered by a child the test starts itself.
TEST_F(Sandbox, APartialSandboxStillFiltersAndCleansTheEnvironment) {
  SandboxSupport partial;
  partial.level = SandboxSupport::Level::partial;
  partial.detail = "test";
  SandboxPolicy p = shell_policy();
  p.allow_fork = false;
  ::setenv("ANTHROPIC_API_KEY", kSecret, 1);
  auto s = prepare_sandbox(p,
                           {"bash", "-c",
                            "export -p; echo > /dev/tcp/127.0.0.1/9 || echo NET-REFUSED; "
                            "touch " +
                                (scratch_ / "forked").string() + "; echo done"},
                           {}, {}, partial);
  ::unsetenv("ANTHROPIC_API_KEY");
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ(s->argv.front(), "bash");  // no bubblewrap
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  std::vector<char*> argv, envp;
  std::vector<std::string> args = s->argv, env = s->env;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    enter_sandbox_in_child(*s);
    ::execvpe(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(out[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) text.append(buf, size_t(n));
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_EQ(text.find(kSecret), std::string::npos) << text;
  EXPECT_NE(text.find("PATH="), std::string::npos) << text;
  EXPECT_NE(text.find("NET-REFUSED"), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(scratch_ / "forked")) << "a process was started: " << text;
}

TEST_F(Sandbox, SupportIsDescribedInOneLine) {
  const SandboxSupport& s = sandbox_support();
  std::string line = s.describe();
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_TRUE(starts_with(line, SandboxSupport::name(s.level))) << line;
  EXPECT_FALSE(s.detail.empty());
}

}  // namespace
}  // namespace peak
