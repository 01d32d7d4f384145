#include "util/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "util/fs.h"

extern char** environ;

namespace peak {

namespace {
bool executable_file(const std::filesystem::path& p) {
  std::error_code ec;
  return !p.empty() && std::filesystem::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}
}  // namespace

std::filesystem::path find_tool(const ToolSearch& search) {
  if (const char* e = std::getenv(search.override_env.c_str()); e && *e)
    return executable_file(e) ? std::filesystem::path(e) : std::filesystem::path();
  for (const auto& var : search.home_envs)
    if (const char* h = std::getenv(var.c_str()); h && *h)
      if (auto p = std::filesystem::path(h) / "bin" / search.name; executable_file(p)) return p;
  for (const auto& p : search.defaults)
    if (executable_file(p)) return p;
  if (auto p = find_program(search.name); executable_file(p)) return p;
  return {};
}

Result<std::string> tool_version_output(const std::filesystem::path& tool, std::string_view expect,
                                        double timeout_s) {
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(tool.string()); it != cache.end()) return it->second;
  ProcessOptions po;
  po.argv = {tool.string(), "--version"};
  po.timeout_s = timeout_s;
  auto r = run_process(po);
  if (!r) return make_error(fmt::format("cannot run {}: {}", tool.string(), r.error()));
  if (!r->ok() || (!expect.empty() && r->out.find(expect) == std::string::npos))
    return make_error(
        fmt::format("{} --version failed ({}): {}", tool.string(), r->describe(), trim(r->err)));
  cache[tool.string()] = r->out;
  return r->out;
}

std::string ProcessResult::describe() const {
  if (timed_out) return fmt::format("timed out after {:.1f} s", seconds);
  if (term_signal)
    return fmt::format("killed by signal {} ({})", term_signal, ::strsignal(term_signal));
  return fmt::format("exit code {}", exit_code);
}

namespace {
double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// `in_bwrap`: bubblewrap reports a program killed by signal N as exit status 128 + N.
void decode_status(int status, ProcessResult& r, bool in_bwrap) {
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
  if (in_bwrap && r.exit_code > 128 && r.exit_code < 128 + NSIG) {
    r.term_signal = r.exit_code - 128;
    r.exit_code = -1;
  }
}
}  // namespace

Subprocess::~Subprocess() {
  close_stdin();
  if (pid_ > 0) kill_group();
  if (out_fd_ >= 0) ::close(out_fd_);
  if (err_fd_ >= 0) ::close(err_fd_);
}

Status Subprocess::start(const ProcessOptions& opts) {
  if (opts.argv.empty()) return Status::error("internal: empty command line");
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) || ::pipe2(out_pipe, O_CLOEXEC) || ::pipe2(err_pipe, O_CLOEXEC))
    return Status::error(fmt::format("pipe: {}", std::strerror(errno)));
  std::optional<PreparedSandbox> sandbox;
  // A program that cannot be found runs nowhere: its exec fails below as it would unsandboxed.
  if (sandbox_level(opts.sandbox) != SandboxSupport::Level::off &&
      !find_program(opts.argv.front()).empty()) {
    auto prepared = prepare_sandbox(opts.sandbox, opts.argv, opts.env, opts.cwd);
    if (!prepared) {
      for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]})
        ::close(fd);
      return Status::error(prepared.error());
    }
    sandbox = std::move(*prepared);
    in_bwrap_ = sandbox->level == SandboxSupport::Level::full;
  }
  std::vector<std::string> envs;
  if (sandbox) {
    envs = sandbox->env;
  } else {
    for (char** e = environ; *e; ++e) {
      std::string kv = *e;
      auto eq = kv.find('=');
      if (eq != std::string::npos && opts.env.count(kv.substr(0, eq))) continue;
      envs.push_back(kv);
    }
    for (const auto& [k, v] : opts.env) envs.push_back(k + "=" + v);
  }
  std::vector<char*> envp, argv;
  for (auto& s : envs) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = sandbox ? sandbox->argv : opts.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  started_ = std::chrono::steady_clock::now();
  pid_t pid = ::fork();
  if (pid < 0) return Status::error(fmt::format("fork: {}", std::strerror(errno)));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(in_pipe[0], 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    if (!opts.cwd.empty() && ::chdir(opts.cwd.c_str()) != 0) _exit(126);
    if (sandbox) enter_sandbox_in_child(*sandbox);
    ::execvpe(argv[0], argv.data(), envp.data());
    std::string msg = fmt::format("cannot run {}: {}\n", argv[0], std::strerror(errno));
    (void)!::write(2, msg.data(), msg.size());
    _exit(127);
  }
  ::setpgid(pid, pid);
  pid_ = pid;
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  out_fd_ = out_pipe[0];
  err_fd_ = err_pipe[0];
  // Feed stdin (small payloads; the protocol sends one job document).
  signal(SIGPIPE, SIG_IGN);
  size_t off = 0;
  const std::string& in = opts.stdin_data;
  while (off < in.size()) {
    ssize_t n = ::write(in_pipe[1], in.data() + off, in.size() - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  if (opts.keep_stdin_open)
    in_fd_ = in_pipe[1];
  else
    ::close(in_pipe[1]);
  return Status::ok();
}

bool Subprocess::write_stdin(const std::string& data) {
  size_t off = 0;
  while (in_fd_ >= 0 && off < data.size()) {
    ssize_t n = ::write(in_fd_, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return in_fd_ >= 0;
}

void Subprocess::close_stdin() {
  if (in_fd_ >= 0) ::close(in_fd_);
  in_fd_ = -1;
}

void Subprocess::pump(double timeout_s) {
  pollfd fds[2];
  int n = 0;
  if (!out_eof_) fds[n++] = {out_fd_, POLLIN, 0};
  if (!err_eof_) fds[n++] = {err_fd_, POLLIN, 0};
  if (n == 0) return;
  int ms = timeout_s < 0 ? -1 : static_cast<int>(timeout_s * 1000);
  int rc = ::poll(fds, n, ms);
  if (rc <= 0) return;
  char buf[65536];
  for (int i = 0; i < n; ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
    bool is_out = fds[i].fd == out_fd_;
    if (got <= 0) {
      (is_out ? out_eof_ : err_eof_) = true;
    } else if (is_out) {
      out_buf_.append(buf, static_cast<size_t>(got));
    } else if (err_.size() < (16u << 20)) {
      err_.append(buf, static_cast<size_t>(got));
    }
  }
}

Subprocess::ReadStatus Subprocess::read_line(std::string& line, double timeout_s) {
  auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    auto nl = out_buf_.find('\n');
    if (nl != std::string::npos) {
      line = out_buf_.substr(0, nl);
      out_buf_.erase(0, nl + 1);
      return ReadStatus::line;
    }
    if (out_eof_) {
      if (!out_buf_.empty()) {
        line = std::move(out_buf_);
        out_buf_.clear();
        return ReadStatus::line;
      }
      return ReadStatus::eof;
    }
    double left = timeout_s > 0 ? timeout_s - since(t0) : -1;
    if (timeout_s > 0 && left <= 0) return ReadStatus::timeout;
    pump(timeout_s > 0 ? std::min(left, 0.25) : 0.25);
  }
}

void Subprocess::kill_group() {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

ProcessResult Subprocess::wait(double timeout_s) {
  ProcessResult r;
  auto t0 = std::chrono::steady_clock::now();
  while (!(out_eof_ && err_eof_)) {
    if (timeout_s > 0 && since(t0) > timeout_s) {
      r.timed_out = true;
      break;
    }
    pump(0.1);
    if (out_buf_.size() > (64u << 20)) out_buf_.resize(64u << 20);
  }
  if (r.timed_out) {
    kill_group();
  } else if (pid_ > 0) {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    decode_status(status, r, in_bwrap_);
    // Anything the child left behind in its group goes too.
    ::kill(-pid_, SIGKILL);
    pid_ = -1;
  }
  r.out = std::move(out_buf_);
  out_buf_.clear();
  r.err = err_;
  r.seconds = since(started_);
  return r;
}

Result<ProcessResult> run_process(const ProcessOptions& opts) {
  Subprocess p;
  if (auto s = p.start(opts); !s) return Error{s.message()};
  ProcessResult r = p.wait(opts.timeout_s);
  if (r.out.size() > opts.max_output) r.out.resize(opts.max_output);
  if (r.err.size() > opts.max_output) r.err.resize(opts.max_output);
  if (r.exit_code == 127 && r.err.find("cannot run") != std::string::npos)
    return make_error(r.err.substr(0, r.err.find('\n')));
  return r;
}

}  // namespace peak
