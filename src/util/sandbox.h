#pragma once
// Confinement of the child processes that touch untrusted input: compilers reading a candidate's
// source and runners loading its device code (docs/sandbox.md).
//
// A policy gives the child a clean environment (no API keys, no HOME), no network, a read-only
// view of the system and the toolchains, write access to its scratch folders only, resource
// limits (rlimits) and a system-call filter (seccomp, through libseccomp). Namespaces come from
// bubblewrap (`bwrap` on PATH, or PEAK_BWRAP). Where bubblewrap is missing or the host refuses
// namespaces, the sandbox is *partial* (environment, limits and filter, but the child sees the
// file system as the user does): peak says so once on stderr, `peak doctor` reports it, and every
// evaluation summary records it. `--no-sandbox` (or PEAK_NO_SANDBOX=1) turns it off knowingly.
#include <sys/resource.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "util/result.h"

namespace peak {

// 0 leaves a limit as the parent has it.
struct ResourceLimits {
  uint64_t address_space = 0;  // RLIMIT_AS, bytes
  uint64_t data = 0;           // RLIMIT_DATA, bytes (private writable memory)
  uint64_t cpu_seconds = 0;    // RLIMIT_CPU, per process
  uint64_t open_files = 0;     // RLIMIT_NOFILE
  uint64_t file_size = 0;      // RLIMIT_FSIZE, bytes
  uint64_t processes = 0;      // RLIMIT_NPROC allowance: tasks (threads count) the child may add
  uint64_t tmp_bytes = uint64_t{1} << 30;  // size of the private /tmp (namespaces only)
};

struct SandboxPolicy {
  bool enabled = false;  // false: the child runs as before (inherits peak's environment)
  std::string role;      // "compiler", "runner": named in messages
  std::vector<std::filesystem::path> writable;  // scratch folders (created when missing)
  std::vector<std::filesystem::path> readable;  // files or folders beyond the system's
  // Files and folders of /etc the child reads, bound one by one, read-only (the rest of /etc is
  // not there): a compiler gets only the loader's cache and the alternatives' links.
  std::vector<std::filesystem::path> system_files;
  bool gpu = false;        // GPU device nodes, /sys, driver and ICD locations from the environment
  bool allow_fork = true;  // false: the filter refuses new processes (threads stay allowed)
  // Names taken from peak's environment; a trailing '*' matches a prefix. Names that look like
  // credentials (KEY, TOKEN, SECRET, PASSWORD, ...) are never passed, whatever the list says.
  std::vector<std::string> pass_env;
  ResourceLimits limits;

  // The policies peak applies; `enabled` follows sandbox_enabled().
  // A compiler (nvcc, hipcc): writes only `scratch`, reads `inputs` (the candidate's files) and
  // its toolchain; `tools` are executables whose toolkit folder (the parent of their bin/) is
  // made readable when it lies outside /usr. Of /etc it sees only `system_files`.
  static SandboxPolicy compiler(std::vector<std::filesystem::path> scratch,
                                std::vector<std::filesystem::path> tools,
                                std::vector<std::filesystem::path> inputs = {});
  // A runner: reads its executable and `inputs` (artifacts), writes `scratch` (output folders),
  // reaches the GPUs, starts no process; `wall_budget_s` (the longest the parent lets it live)
  // sets the CPU-time backstop.
  static SandboxPolicy runner(const std::filesystem::path& executable,
                              std::vector<std::filesystem::path> inputs,
                              std::vector<std::filesystem::path> scratch, double wall_budget_s);
};

// --no-sandbox. Initially on unless PEAK_NO_SANDBOX is set to a non-empty value other than 0.
void set_sandbox_enabled(bool enabled);
bool sandbox_enabled();

// What this host allows, probed once per process (bubblewrap found and able to create namespaces).
struct SandboxSupport {
  enum class Level { full, partial, off };
  Level level = Level::off;
  std::filesystem::path bwrap;   // when found
  std::string detail;            // why it is partial or off, and what to do
  std::string describe() const;  // one line: "full (bubblewrap 0.8.0: namespaces, ...)"
  static const char* name(Level l);
};
// Probes on first use (and prints the one-time notice when the sandbox is partial).
const SandboxSupport& sandbox_support();
// One line for summaries and `peak doctor`: off (and why), or what the host supports.
std::string sandbox_status();
// The level a policy gets now: off when disabled, else what the host supports.
SandboxSupport::Level sandbox_level(const SandboxPolicy& policy);

// Everything a child needs to enter the sandbox, prepared in the parent before fork (the parent
// may be multithreaded: the child only makes async-signal-safe calls).
struct PreparedSandbox {
  SandboxSupport::Level level = SandboxSupport::Level::off;
  std::vector<std::string> argv;  // what to exec (bwrap ... -- argv, or argv itself)
  std::vector<std::string> env;   // NAME=VALUE, the whole environment
  std::vector<std::pair<int, rlim_t>> limits;
  std::vector<uint8_t> filter;  // partial: the BPF program the child installs itself
  int filter_fd = -1;           // full: a memfd holding it, given to bwrap as --seccomp FD
  PreparedSandbox() = default;
  PreparedSandbox(PreparedSandbox&& o) noexcept;
  PreparedSandbox& operator=(PreparedSandbox&& o) noexcept;
  PreparedSandbox(const PreparedSandbox&) = delete;
  PreparedSandbox& operator=(const PreparedSandbox&) = delete;
  ~PreparedSandbox();
};

// `extra_env` (the caller's own settings, e.g. a runner's test hooks) is added after the policy's
// environment. Fails when the policy cannot be honoured (a scratch folder cannot be created).
Result<PreparedSandbox> prepare_sandbox(const SandboxPolicy& policy,
                                        const std::vector<std::string>& argv,
                                        const std::map<std::string, std::string>& extra_env,
                                        const std::filesystem::path& cwd);
// The same for a given host support (tests prepare a partial sandbox on a host that has full).
Result<PreparedSandbox> prepare_sandbox(const SandboxPolicy& policy,
                                        const std::vector<std::string>& argv,
                                        const std::map<std::string, std::string>& extra_env,
                                        const std::filesystem::path& cwd,
                                        const SandboxSupport& support);
// In the forked child, before exec: limits, then (partial) no_new_privs and the filter, or (full)
// the filter's descriptor made inheritable for bwrap. On failure writes why to fd 2 and _exits
// with kSandboxExitStatus.
void enter_sandbox_in_child(const PreparedSandbox& s);
inline constexpr int kSandboxExitStatus = 125;

// Where execvp would find `program` (absolute), or "" when it would not.
std::filesystem::path find_program(const std::string& program);

// The pieces, exposed for tests and `peak doctor`.
// The bubblewrap command line (without the program) for a policy.
std::vector<std::string> bwrap_arguments(const SandboxPolicy& policy,
                                         const std::filesystem::path& bwrap,
                                         const std::filesystem::path& cwd, int filter_fd);
// The environment a policy gives its child, from `parent` (NAME=VALUE entries).
std::vector<std::string> sandbox_environment(const SandboxPolicy& policy,
                                             const std::vector<std::string>& parent,
                                             SandboxSupport::Level level);
// True for names that look like credentials (OPENAI_API_KEY, GITHUB_TOKEN, ...).
bool looks_like_secret(std::string_view name);
// The seccomp program (BPF) for a policy; `partial` also refuses Unix sockets (the file system
// is not hidden then).
Result<std::vector<uint8_t>> sandbox_filter(const SandboxPolicy& policy, bool partial);

}  // namespace peak
