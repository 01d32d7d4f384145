#pragma once
// Child processes with deadlines. Each child leads its own process group so that a timeout kills
// everything it started (compilers, runners, LLM commands), never peak itself.
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"
#include "util/sandbox.h"

namespace peak {

struct ProcessOptions {
  std::vector<std::string> argv;
  std::string stdin_data;
  bool keep_stdin_open = false;  // after stdin_data: more with write_stdin, then close_stdin
  double timeout_s = 0;          // 0: no limit
  std::filesystem::path cwd;
  std::map<std::string, std::string> env;  // added to (or overriding) the parent's environment
  size_t max_output = 64 << 20;            // bytes kept of each of stdout and stderr
  // Confinement for children that touch untrusted input (util/sandbox.h). When enabled, the
  // child's environment is the policy's (plus `env`), not the parent's.
  SandboxPolicy sandbox;
};

struct ProcessResult {
  int exit_code = -1;   // valid when !signaled && !timed_out
  int term_signal = 0;  // the signal that ended it, if any
  bool timed_out = false;
  std::string out;
  std::string err;
  double seconds = 0;
  bool ok() const { return !timed_out && term_signal == 0 && exit_code == 0; }
  std::string describe() const;  // "exit code 2", "killed by signal 11 (Segmentation fault)", ...
};

// Runs a program to completion (or its deadline). Fails only if it cannot be started.
Result<ProcessResult> run_process(const ProcessOptions& opts);

// Where a toolchain program (nvcc, hipcc, compute-sanitizer) is looked for, in order: the
// variable `override_env` (when set, its value or nothing: a wrong path is not silently replaced),
// bin/NAME under each variable of `home_envs`, the `defaults`, then NAME on $PATH.
struct ToolSearch {
  std::string name;
  std::string override_env;
  std::vector<std::string> home_envs;
  std::vector<std::filesystem::path> defaults;
};
// The first executable file found; empty when none.
std::filesystem::path find_tool(const ToolSearch& search);
// The output of `TOOL --version`, run once per path in this process; an error when it cannot be
// run, fails, or does not contain `expect` (when given).
Result<std::string> tool_version_output(const std::filesystem::path& tool,
                                        std::string_view expect = {}, double timeout_s = 60);

// A running child whose stdout is read line by line (the runner protocol).
class Subprocess {
 public:
  Subprocess() = default;
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  Status start(const ProcessOptions& opts);
  enum class ReadStatus { line, eof, timeout };
  // Reads one line of stdout (without the newline), waiting at most `timeout_s` (<=0: forever).
  // stderr is collected in the background and available from err().
  ReadStatus read_line(std::string& line, double timeout_s);
  // More input for a child started with keep_stdin_open; false when it cannot be written.
  bool write_stdin(const std::string& data);
  void close_stdin();
  // Kills the whole process group (SIGKILL) and reaps the child.
  void kill_group();
  // Waits for exit; returns the final status (exit code / signal) and collected stderr.
  ProcessResult wait(double timeout_s = 0);
  bool running() const { return pid_ > 0; }
  int pid() const { return pid_; }
  const std::string& err() const { return err_; }

 private:
  void pump(double timeout_s);  // moves available bytes into buffers
  int pid_ = -1;
  int in_fd_ = -1, out_fd_ = -1, err_fd_ = -1;
  std::string out_buf_, err_;
  bool out_eof_ = false, err_eof_ = false;
  bool in_bwrap_ = false;  // started inside bubblewrap (util/sandbox.h)
  std::chrono::steady_clock::time_point started_;
};

}  // namespace peak
