#include "util/sandbox.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "util/fs.h"
#include "util/process.h"

extern char** environ;

namespace peak {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

std::atomic<int> g_enabled{-1};  // -1: not set; follow PEAK_NO_SANDBOX

// Half the machine's memory, at least 4 GiB and at most 64 GiB: what one child may take.
uint64_t memory_allowance() {
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  uint64_t phys = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 16 * kGiB;
  return std::clamp<uint64_t>(phys / 2, 4 * kGiB, 64 * kGiB);
}

// What a runner reads of /etc: the loader's files, the time zone and the name-service files
// GPU drivers' libraries look up the user with.
std::vector<fs::path> runner_system_files() {
  return {"/etc/ld.so.cache", "/etc/ld.so.conf",    "/etc/ld.so.conf.d", "/etc/alternatives",
          "/etc/localtime",   "/etc/nsswitch.conf", "/etc/passwd",       "/etc/group"};
}

unsigned hardware_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

bool under(const fs::path& p, const fs::path& dir) {
  auto rel = p.lexically_normal().lexically_relative(dir);
  return !rel.empty() && *rel.begin() != "..";
}

// `p` made absolute and normal, and its resolved form (when it exists and differs).
std::vector<fs::path> spellings(const fs::path& p) {
  std::error_code ec;
  fs::path abs = fs::absolute(p, ec).lexically_normal();
  if (ec) return {};
  std::vector<fs::path> out{abs};
  fs::path real = fs::weakly_canonical(abs, ec);
  if (!ec && real != abs) out.push_back(real);
  return out;
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    std::string part(s.substr(start, end == std::string_view::npos ? end : end - start));
    if (!part.empty()) out.push_back(part);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

bool name_matches(std::string_view name, const std::string& pattern) {
  if (!pattern.empty() && pattern.back() == '*')
    return starts_with(name, std::string_view(pattern).substr(0, pattern.size() - 1));
  return name == pattern;
}

// Paths named by the parent's environment that a GPU runner needs to read (driver libraries and
// ICD manifests carried outside /usr, for example).
std::vector<fs::path> driver_paths_from_environment() {
  static const char* kVars[] = {"LD_LIBRARY_PATH",
                                "VK_ICD_FILENAMES",
                                "VK_DRIVER_FILES",
                                "VK_ADD_DRIVER_FILES",
                                "VK_LAYER_PATH",
                                "VK_ADD_LAYER_PATH",
                                "__EGL_VENDOR_LIBRARY_FILENAMES",
                                "__EGL_VENDOR_LIBRARY_DIRS"};
  std::vector<fs::path> out;
  for (const char* var : kVars) {
    const char* v = std::getenv(var);
    if (!v) continue;
    for (const auto& item : split(v, ':')) {
      fs::path p(item);
      if (p.is_absolute()) out.push_back(p);
    }
  }
  return out;
}

// PEAK_SANDBOX_READ: extra folders every sandboxed child may read (a toolchain in /opt, say).
std::vector<fs::path> extra_readable_from_environment() {
  std::vector<fs::path> out;
  if (const char* v = std::getenv("PEAK_SANDBOX_READ"))
    for (const auto& item : split(v, ':'))
      if (fs::path(item).is_absolute()) out.push_back(item);
  return out;
}

// Tasks (threads included) that processes of `uid` hold now: RLIMIT_NPROC counts them all, so the
// limit is set that far above.
uint64_t tasks_of_user(uid_t uid) {
  uint64_t n = 0;
  std::error_code ec;
  for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    FILE* f = std::fopen((it->path() / "status").c_str(), "r");
    if (!f) continue;
    char line[256];
    long owner = -1, threads = 0;
    while (std::fgets(line, sizeof line, f)) {
      if (std::strncmp(line, "Uid:", 4) == 0) owner = std::strtol(line + 4, nullptr, 10);
      if (std::strncmp(line, "Threads:", 8) == 0) threads = std::strtol(line + 8, nullptr, 10);
    }
    std::fclose(f);
    if (owner == static_cast<long>(uid)) n += static_cast<uint64_t>(std::max(threads, 1L));
  }
  return n;
}

}  // namespace

fs::path find_program(const std::string& program) {
  if (program.find('/') != std::string::npos)
    return ::access(program.c_str(), X_OK) == 0 ? fs::absolute(program) : fs::path();
  if (const char* path = std::getenv("PATH"))
    for (const auto& dir : split(path, ':')) {
      fs::path p = fs::path(dir) / program;
      if (::access(p.c_str(), X_OK) == 0) return fs::absolute(p);
    }
  return {};
}

namespace {

Result<int> memfd_with(const std::vector<uint8_t>& bytes) {
  int fd = ::memfd_create("peak-sandbox-filter", MFD_CLOEXEC);
  if (fd < 0) return make_error(fmt::format("memfd_create: {}", std::strerror(errno)));
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (n <= 0) {
      ::close(fd);
      return make_error(
          fmt::format("cannot write the system-call filter: {}", std::strerror(errno)));
    }
    off += static_cast<size_t>(n);
  }
  ::lseek(fd, 0, SEEK_SET);
  return fd;
}

std::string first_line(const std::string& text) {
  auto lines = split_lines(trim(text));
  return lines.empty() ? "" : trim(lines.front());
}

SandboxSupport probe_support() {
  SandboxSupport s;
  if (const char* e = std::getenv("PEAK_BWRAP"); e && *e) {
    if (::access(e, X_OK) != 0) {
      s.level = SandboxSupport::Level::partial;
      s.detail = fmt::format(
          "PEAK_BWRAP={} is not an executable file; point it at a bubblewrap binary or unset it",
          e);
      return s;
    }
    s.bwrap = e;
  } else {
    s.bwrap = find_program("bwrap");
  }
  if (s.bwrap.empty()) {
    s.level = SandboxSupport::Level::partial;
    s.detail =
        "bubblewrap (bwrap) was not found on PATH; install it (Debian/Ubuntu: apt-get install "
        "bubblewrap) or set PEAK_BWRAP to its path";
    return s;
  }
  // A namespace with the mounts a runner gets, running `true`.
  SandboxPolicy probe;
  probe.enabled = true;
  probe.role = "probe";
  probe.gpu = true;
  probe.system_files = runner_system_files();
  ProcessOptions po;
  po.argv = bwrap_arguments(probe, s.bwrap, {}, -1);
  po.argv.push_back("--");
  po.argv.push_back("true");
  po.timeout_s = 20;
  auto r = run_process(po);
  if (!r || !r->ok()) {
    s.level = SandboxSupport::Level::partial;
    s.detail = fmt::format(
        "{} cannot create namespaces here ({}); allow unprivileged user namespaces "
        "(sysctl kernel.unprivileged_userns_clone=1 or "
        "kernel.apparmor_restrict_unprivileged_userns=0)"
        ", or run where they are allowed",
        s.bwrap.string(),
        r ? (first_line(r->err).empty() ? r->describe() : first_line(r->err)) : r.error());
    return s;
  }
  ProcessOptions pv;
  pv.argv = {s.bwrap.string(), "--version"};
  pv.timeout_s = 10;
  auto v = run_process(pv);
  std::string version = v && v->ok() ? first_line(v->out) : "bubblewrap";
  s.level = SandboxSupport::Level::full;
  s.detail = fmt::format("{} ({})", version, s.bwrap.string());
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Policies

SandboxPolicy SandboxPolicy::compiler(std::vector<fs::path> scratch, std::vector<fs::path> tools,
                                      std::vector<fs::path> inputs) {
  SandboxPolicy p;
  p.enabled = sandbox_enabled();
  p.role = "compiler";
  p.writable = std::move(scratch);
  for (auto& i : inputs)
    if (!i.empty()) p.readable.push_back(std::move(i));
  // The loader's cache and the alternatives' links (/usr/bin/cc -> /etc/alternatives/cc): no
  // user names, no host configuration.
  p.system_files = {"/etc/ld.so.cache", "/etc/alternatives"};
  for (const auto& tool : tools) {
    std::error_code ec;
    fs::path real = fs::weakly_canonical(tool, ec);
    if (ec) continue;
    fs::path root = real.parent_path().parent_path();  // <toolkit>/bin/nvcc -> <toolkit>
    if (!root.empty() && root != "/" && !under(root, "/usr")) p.readable.push_back(root);
  }
  p.pass_env = {"PATH", "LANG", "LC_*", "TZ", "CUDA_HOME", "CUDA_PATH", "ROCM_PATH", "HIP_PATH"};
  p.limits.address_space = memory_allowance();
  p.limits.cpu_seconds = 600;
  p.limits.open_files = 1024;
  p.limits.file_size = 4 * kGiB;
  p.limits.tmp_bytes = 4 * kGiB;  // nvcc keeps its intermediate files in /tmp
  p.limits.processes = 256;
  return p;
}

SandboxPolicy SandboxPolicy::runner(const fs::path& executable, std::vector<fs::path> inputs,
                                    std::vector<fs::path> scratch, double wall_budget_s) {
  SandboxPolicy p;
  p.enabled = sandbox_enabled();
  p.role = "runner";
  p.gpu = true;
  p.allow_fork = false;
  if (executable.has_parent_path()) p.readable.push_back(executable);
  for (auto& i : inputs)
    if (!i.empty()) p.readable.push_back(std::move(i));
  p.writable = std::move(scratch);
  p.system_files = runner_system_files();
  p.pass_env = {"PATH",
                "LANG",
                "LC_*",
                "TZ",
                "LD_LIBRARY_PATH",
                "VK_*",
                "MESA_*",
                "LP_*",
                "GALLIUM_*",
                "CUDA_VISIBLE_DEVICES",
                "CUDA_DEVICE_ORDER",
                "CUDA_MODULE_LOADING",
                "NVIDIA_*",
                "__GL*",
                "__EGL*",
                "__NV*",
                "PEAK_RUNNER_*"};
  // GPU drivers reserve address ranges larger than the machine (CUDA's unified addressing), so
  // the runner's memory is capped by what it can write (RLIMIT_DATA), not by its address space.
  p.limits.data = memory_allowance();
  double cpu = std::max(wall_budget_s, 60.0) * hardware_threads();
  p.limits.cpu_seconds = static_cast<uint64_t>(std::ceil(cpu));
  p.limits.open_files = 4096;
  p.limits.file_size = 16 * kGiB;
  p.limits.processes = 64 + 4 * hardware_threads();  // threads: drivers start a few per core
  return p;
}

// ---------------------------------------------------------------------------------------------
// Settings and support

void set_sandbox_enabled(bool enabled) { g_enabled.store(enabled ? 1 : 0); }

bool sandbox_enabled() {
  int v = g_enabled.load();
  if (v >= 0) return v == 1;
  const char* e = std::getenv("PEAK_NO_SANDBOX");
  return !(e && *e && std::strcmp(e, "0") != 0);
}

const char* SandboxSupport::name(Level l) {
  switch (l) {
    case Level::full:
      return "full";
    case Level::partial:
      return "partial";
    case Level::off:
      return "off";
  }
  return "off";
}

std::string SandboxSupport::describe() const {
  switch (level) {
    case Level::full:
      return fmt::format(
          "full: {}; namespaces (no network, read-only system, writes to scratch only), "
          "resource limits, system-call filter",
          detail);
    case Level::partial:
      return fmt::format(
          "partial: clean environment, resource limits and system-call filter, but no "
          "namespaces: {}",
          detail);
    case Level::off:
      return "off: " + detail;
  }
  return "";
}

const SandboxSupport& sandbox_support() {
  static SandboxSupport support;
  static std::once_flag once;
  std::call_once(once, [] {
    support = probe_support();
    if (support.level == SandboxSupport::Level::partial && sandbox_enabled())
      std::fprintf(stderr,
                   "peak: the sandbox is partial on this host: %s. Compilers and runners get a "
                   "clean environment, resource limits and a system-call filter, but they see "
                   "the file system as you do. `peak doctor` reports it; --no-sandbox turns the "
                   "sandbox off.\n",
                   support.detail.c_str());
  });
  return support;
}

std::string sandbox_status() {
  if (!sandbox_enabled())
    return "off: turned off with --no-sandbox (or PEAK_NO_SANDBOX); compilers and runners see "
           "peak's environment and the whole file system";
  return sandbox_support().describe();
}

SandboxSupport::Level sandbox_level(const SandboxPolicy& policy) {
  if (!policy.enabled) return SandboxSupport::Level::off;
  return sandbox_support().level;
}

// ---------------------------------------------------------------------------------------------
// The pieces

bool looks_like_secret(std::string_view name) {
  std::string up(name);
  for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const char* word : {"KEY", "TOKEN", "SECRET", "PASS", "CREDENTIAL", "AUTH", "COOKIE"})
    if (up.find(word) != std::string::npos) return true;
  return false;
}

std::vector<std::string> sandbox_environment(const SandboxPolicy& policy,
                                             const std::vector<std::string>& parent,
                                             SandboxSupport::Level level) {
  std::vector<std::string> env;
  std::string parent_tmp;
  for (const auto& kv : parent) {
    auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string name = kv.substr(0, eq);
    if (name == "TMPDIR") parent_tmp = kv.substr(eq + 1);
    if (looks_like_secret(name)) continue;
    if (std::any_of(policy.pass_env.begin(), policy.pass_env.end(),
                    [&](const std::string& p) { return name_matches(name, p); }))
      env.push_back(kv);
  }
  // HOME and TMPDIR point at scratch: nothing of the user's home is named or reachable.
  std::string scratch = policy.writable.empty() ? "" : policy.writable.front().string();
  if (level == SandboxSupport::Level::full) {
    env.push_back("HOME=/tmp");
    env.push_back("TMPDIR=/tmp");
  } else {
    env.push_back("HOME=" + (scratch.empty() ? std::string("/nonexistent") : scratch));
    std::string tmp = scratch.empty() ? parent_tmp : scratch;
    if (!tmp.empty()) env.push_back("TMPDIR=" + tmp);
  }
  return env;
}

std::vector<std::string> bwrap_arguments(const SandboxPolicy& policy, const fs::path& bwrap,
                                         const fs::path& cwd, int filter_fd) {
  std::vector<std::string> a = {bwrap.string(),  "--unshare-all", "--die-with-parent",
                                "--new-session", "--cap-drop",    "ALL"};
  auto add = [&](std::initializer_list<std::string> items) {
    a.insert(a.end(), items.begin(), items.end());
  };
  std::error_code ec;
  // The system, read-only: /usr and the merged-/usr links, the policy's files of /etc (not /etc
  // itself), a fresh /proc (this namespace's processes only), a minimal /dev and a private /tmp.
  add({"--ro-bind", "/usr", "/usr"});
  for (const char* d : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    if (fs::is_symlink(d, ec))
      add({"--symlink", fs::read_symlink(d, ec).string(), d});
    else if (fs::is_directory(d, ec))
      add({"--ro-bind", d, d});
  }
  for (const auto& f : policy.system_files) add({"--ro-bind-try", f.string(), f.string()});
  add({"--proc", "/proc", "--dev", "/dev", "--size", std::to_string(policy.limits.tmp_bytes),
       "--tmpfs", "/tmp"});
  std::vector<fs::path> readable = policy.readable;
  if (policy.gpu) {
    add({"--ro-bind", "/sys", "/sys"});
    for (fs::directory_iterator it("/dev", ec), end; !ec && it != end; it.increment(ec)) {
      std::string n = it->path().filename().string();
      if (starts_with(n, "nvidia") || n == "dri" || n == "kfd")
        add({"--dev-bind", it->path().string(), it->path().string()});
    }
    for (const char* d : {"/etc/vulkan", "/etc/glvnd", "/etc/OpenCL"}) add({"--ro-bind-try", d, d});
    for (auto& p : driver_paths_from_environment()) readable.push_back(p);
  }
  for (auto& p : extra_readable_from_environment()) readable.push_back(p);
  for (const auto& r : readable) {
    auto names = spellings(r);
    if (names.empty()) continue;
    const std::string src = names.back().string();  // the resolved path
    for (const auto& dest : names)
      if (!under(dest, "/usr")) add({"--ro-bind-try", src, dest.string()});
  }
  for (const auto& w : policy.writable) {
    auto names = spellings(w);
    if (names.empty()) continue;
    const std::string src = names.back().string();
    for (const auto& dest : names) add({"--bind", src, dest.string()});
  }
  add({"--remount-ro", "/"});  // the folders made for mount points: nothing to write there
  if (!cwd.empty()) add({"--chdir", fs::absolute(cwd, ec).lexically_normal().string()});
  if (filter_fd >= 0) add({"--seccomp", std::to_string(filter_fd)});
  return a;
}

Result<std::vector<uint8_t>> sandbox_filter(const SandboxPolicy& policy, bool partial) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) return make_error("seccomp_init failed");
  auto done = [&] { seccomp_release(ctx); };
  std::string problem;
  auto rule = [&](uint32_t action, const char* name, std::vector<scmp_arg_cmp> args = {}) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) return;  // not a system call on this architecture
    int rc = seccomp_rule_add_array(ctx, action, nr, static_cast<unsigned>(args.size()),
                                    args.empty() ? nullptr : args.data());
    if (rc < 0 && problem.empty())
      problem = fmt::format("seccomp rule for {}: {}", name, std::strerror(-rc));
  };
  // No network: only Unix sockets, and none when the file system is not hidden.
  if (partial)
    rule(SCMP_ACT_ERRNO(EACCES), "socket");
  else
    rule(SCMP_ACT_ERRNO(EACCES), "socket", {SCMP_A0_32(SCMP_CMP_NE, AF_UNIX)});
  // No new processes for runners (threads stay allowed); clone3 hides its flags from the filter,
  // so it answers ENOSYS and the C library falls back to clone.
  if (!policy.allow_fork) {
    rule(SCMP_ACT_ERRNO(EPERM), "fork");
    rule(SCMP_ACT_ERRNO(EPERM), "vfork");
    rule(SCMP_ACT_ERRNO(EPERM), "clone", {SCMP_A0_64(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0)});
    rule(SCMP_ACT_ERRNO(ENOSYS), "clone3");
  }
  // Nothing a compiler or a runner needs: other processes' memory, kernel keys, BPF, mounts and
  // namespaces, modules, clocks, io_uring (whose operations the filter cannot see), device nodes.
  for (const char* name : {"ptrace",
                           "process_vm_readv",
                           "process_vm_writev",
                           "kcmp",
                           "keyctl",
                           "add_key",
                           "request_key",
                           "bpf",
                           "userfaultfd",
                           "perf_event_open",
                           "mount",
                           "umount2",
                           "pivot_root",
                           "chroot",
                           "unshare",
                           "setns",
                           "fsopen",
                           "fsmount",
                           "move_mount",
                           "open_tree",
                           "swapon",
                           "swapoff",
                           "reboot",
                           "kexec_load",
                           "kexec_file_load",
                           "init_module",
                           "finit_module",
                           "delete_module",
                           "acct",
                           "quotactl",
                           "syslog",
                           "settimeofday",
                           "clock_settime",
                           "clock_adjtime",
                           "adjtimex",
                           "iopl",
                           "ioperm",
                           "open_by_handle_at",
                           "name_to_handle_at",
                           "io_uring_setup",
                           "io_uring_enter",
                           "io_uring_register",
                           "mknod",
                           "mknodat",
                           "lookup_dcookie",
                           "vhangup",
                           "fanotify_init"})
    rule(SCMP_ACT_ERRNO(EPERM), name);
  if (!problem.empty()) {
    done();
    return make_error(problem);
  }
  int fd = ::memfd_create("peak-seccomp-export", MFD_CLOEXEC);
  if (fd < 0) {
    done();
    return make_error(fmt::format("memfd_create: {}", std::strerror(errno)));
  }
  int rc = seccomp_export_bpf(ctx, fd);
  done();
  if (rc < 0) {
    ::close(fd);
    return make_error(fmt::format("seccomp_export_bpf: {}", std::strerror(-rc)));
  }
  std::vector<uint8_t> bytes;
  ::lseek(fd, 0, SEEK_SET);
  uint8_t buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) bytes.insert(bytes.end(), buf, buf + n);
  ::close(fd);
  if (bytes.empty() || bytes.size() % sizeof(sock_filter) != 0)
    return make_error("the exported system-call filter is empty or malformed");
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// Applying a policy

PreparedSandbox::PreparedSandbox(PreparedSandbox&& o) noexcept { *this = std::move(o); }

PreparedSandbox& PreparedSandbox::operator=(PreparedSandbox&& o) noexcept {
  if (this != &o) {
    if (filter_fd >= 0) ::close(filter_fd);
    level = o.level;
    argv = std::move(o.argv);
    env = std::move(o.env);
    limits = std::move(o.limits);
    filter = std::move(o.filter);
    filter_fd = o.filter_fd;
    o.filter_fd = -1;
  }
  return *this;
}

PreparedSandbox::~PreparedSandbox() {
  if (filter_fd >= 0) ::close(filter_fd);
}

Result<PreparedSandbox> prepare_sandbox(const SandboxPolicy& policy,
                                        const std::vector<std::string>& argv,
                                        const std::map<std::string, std::string>& extra_env,
                                        const fs::path& cwd) {
  return prepare_sandbox(policy, argv, extra_env, cwd, sandbox_support());
}

Result<PreparedSandbox> prepare_sandbox(const SandboxPolicy& policy,
                                        const std::vector<std::string>& argv,
                                        const std::map<std::string, std::string>& extra_env,
                                        const fs::path& cwd, const SandboxSupport& support) {
  PreparedSandbox s;
  s.level = policy.enabled ? support.level : SandboxSupport::Level::off;
  if (s.level == SandboxSupport::Level::off) return make_error("internal: the sandbox is off");
  if (argv.empty()) return make_error("internal: empty command line");
  // The program itself must be visible inside (by the path the parent found).
  fs::path program = find_program(argv.front());
  if (program.empty())
    return make_error(fmt::format("cannot run {}: {}", argv.front(), std::strerror(ENOENT)));
  for (const auto& w : policy.writable) {
    std::error_code ec;
    fs::create_directories(w, ec);
    if (ec)
      return make_error(fmt::format("cannot create the {}'s scratch folder {}: {}", policy.role,
                                    w.string(), ec.message()));
  }
  std::vector<std::string> parent;
  for (char** e = environ; *e; ++e) parent.emplace_back(*e);
  s.env = sandbox_environment(policy, parent, s.level);
  for (const auto& [k, v] : extra_env) {
    std::erase_if(s.env, [&](const std::string& kv) { return starts_with(kv, k + "="); });
    s.env.push_back(k + "=" + v);
  }
  const ResourceLimits& l = policy.limits;
  auto limit = [&](int resource, uint64_t value) {
    if (value > 0) s.limits.emplace_back(resource, static_cast<rlim_t>(value));
  };
  limit(RLIMIT_AS, l.address_space);
  limit(RLIMIT_DATA, l.data);
  limit(RLIMIT_CPU, l.cpu_seconds);
  limit(RLIMIT_NOFILE, l.open_files);
  limit(RLIMIT_FSIZE, l.file_size);
  // RLIMIT_NPROC counts every task of the user (root is exempt): the allowance goes on top.
  if (l.processes > 0 && ::getuid() != 0)
    limit(RLIMIT_NPROC, tasks_of_user(::getuid()) + l.processes);

  bool partial = s.level == SandboxSupport::Level::partial;
  auto filter = sandbox_filter(policy, partial);
  if (!filter) return make_error(fmt::format("the {} sandbox: {}", policy.role, filter.error()));
  if (partial) {
    s.filter = std::move(*filter);
    s.argv = argv;
    return s;
  }
  auto fd = memfd_with(*filter);
  if (!fd) return Error{fd.error()};
  s.filter_fd = *fd;
  SandboxPolicy with_program = policy;
  with_program.readable.push_back(program);
  s.argv = bwrap_arguments(with_program, support.bwrap, cwd, s.filter_fd);
  s.argv.push_back("--");
  s.argv.push_back(program.string());
  s.argv.insert(s.argv.end(), argv.begin() + 1, argv.end());
  return s;
}

namespace {
[[noreturn]] void child_fail(const char* what) {
  const char* why = ::strerrorname_np(errno);  // a static string: safe after fork
  if (why == nullptr) why = "unknown error";
  const char* prefix = "peak: cannot enter the sandbox: ";
  (void)!::write(2, prefix, std::strlen(prefix));
  (void)!::write(2, what, std::strlen(what));
  (void)!::write(2, ": ", 2);
  (void)!::write(2, why, std::strlen(why));
  (void)!::write(2, "\n", 1);
  ::_exit(kSandboxExitStatus);
}
}  // namespace

void enter_sandbox_in_child(const PreparedSandbox& s) {
  for (const auto& [resource, value] : s.limits) {
    // CPU time: SIGXCPU at the limit ("CPU time limit exceeded"), SIGKILL a little later.
    rlimit rl{value, resource == RLIMIT_CPU ? value + 5 : value};
    rlimit cur{};
    if (::getrlimit(resource, &cur) == 0 && cur.rlim_max != RLIM_INFINITY &&
        cur.rlim_max < rl.rlim_max)
      rl = {std::min(rl.rlim_cur, cur.rlim_max), cur.rlim_max};  // never above peak's own
    if (::setrlimit(resource, &rl) != 0) child_fail("setrlimit");
  }
  if (s.level == SandboxSupport::Level::full) {
    if (s.filter_fd >= 0 && ::fcntl(s.filter_fd, F_SETFD, 0) != 0) child_fail("fcntl");
    return;
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) child_fail("prctl(PR_SET_NO_NEW_PRIVS)");
  sock_fprog prog{};
  prog.len = static_cast<unsigned short>(s.filter.size() / sizeof(sock_filter));
  prog.filter = reinterpret_cast<sock_filter*>(const_cast<uint8_t*>(s.filter.data()));
  if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0)
    child_fail("installing the system-call filter");
}

}  // namespace peak
