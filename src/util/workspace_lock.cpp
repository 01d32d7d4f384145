#include "util/workspace_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/fs.h"

namespace peak {

namespace {

using nlohmann::json;

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

// Seconds since the epoch at which the system booted (btime in /proc/stat), or -1.
long long boot_time() {
  auto text = read_file("/proc/stat");
  if (!text) return -1;
  for (const auto& line : split_lines(*text))
    if (starts_with(line, "btime ")) return std::atoll(line.c_str() + 6);
  return -1;
}

std::string iso8601(double epoch_seconds) {
  auto secs = static_cast<time_t>(std::floor(epoch_seconds));
  int centis = static_cast<int>(std::lround((epoch_seconds - static_cast<double>(secs)) * 100));
  if (centis >= 100) {
    centis -= 100;
    ++secs;
  }
  struct tm t {};
  gmtime_r(&secs, &t);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:02}Z", t.tm_year + 1900, t.tm_mon + 1,
                     t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, centis);
}

// The start time of process `pid` from /proc (field 22 of /proc/PID/stat, in clock ticks
// since boot), or "" when it cannot be read.
std::string process_start(int pid) {
  auto text = read_file(fmt::format("/proc/{}/stat", pid));
  if (!text) return "";
  // The command name (field 2) is in parentheses and may hold spaces: count after the last ')'.
  auto close = text->rfind(')');
  if (close == std::string::npos) return "";
  std::vector<std::string> fields;
  std::string cur;
  for (size_t i = close + 2; i < text->size(); ++i) {
    char c = (*text)[i];
    if (c == ' ' || c == '\n') {
      if (!cur.empty()) fields.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) fields.push_back(cur);
  // After ')' come fields 3, 4, ...: field 22 is at index 19.
  if (fields.size() < 20) return "";
  long long ticks = std::atoll(fields[19].c_str());
  long long boot = boot_time();
  long hz = ::sysconf(_SC_CLK_TCK);
  if (boot < 0 || hz <= 0) return "";
  return iso8601(static_cast<double>(boot) + static_cast<double>(ticks) / static_cast<double>(hz));
}

std::string now_iso() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return iso8601(static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9);
}

std::optional<LockHolder> read_holder(int fd) {
  std::string text;
  char buf[4096];
  ssize_t n;
  off_t off = 0;
  while ((n = ::pread(fd, buf, sizeof buf, off)) > 0) {
    text.append(buf, static_cast<size_t>(n));
    off += n;
  }
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  LockHolder h;
  h.process.pid = j.value("pid", 0);
  h.process.host = j.value("host", "");
  h.process.start = j.value("start", "");
  h.command = j.value("command", "");
  h.since = j.value("since", "");
  return h;
}

}  // namespace

ProcessIdentity this_process() {
  // Cached per pid: a forked child is another process.
  static std::mutex mu;
  static ProcessIdentity self;
  std::lock_guard lock(mu);
  int pid = static_cast<int>(::getpid());
  if (self.pid != pid) {
    self.pid = pid;
    self.host = host_name();
    self.start = process_start(pid);
  }
  return self;
}

Liveness liveness(const ProcessIdentity& p) {
  if (p.pid <= 0) return Liveness::dead;
  if (p.host != host_name()) return Liveness::unknown;
  if (::kill(p.pid, 0) != 0 && errno == ESRCH) return Liveness::dead;
  // A zombie has ended (its locks are released, it runs nothing); only its parent has not
  // collected it yet, which for an orphan can take its new parent a while.
  if (auto stat = read_file(fmt::format("/proc/{}/stat", p.pid))) {
    auto close = stat->rfind(')');
    if (close != std::string::npos && close + 2 < stat->size() && (*stat)[close + 2] == 'Z')
      return Liveness::dead;
  }
  // The pid exists; it is the same process only if it started when the record says.
  if (!p.start.empty()) {
    std::string now = process_start(p.pid);
    if (!now.empty() && now != p.start) return Liveness::dead;
  }
  return Liveness::alive;
}

std::string LockHolder::describe() const {
  std::string who = command.empty() ? "another peak process" : command;
  std::string where = process.host.empty() ? "" : " on " + process.host;
  std::string when = since.empty() ? "" : ", since " + since;
  if (process.pid <= 0) return who;
  return fmt::format("{} (pid {}{}{})", who, process.pid, where, when);
}

WorkspaceLock::~WorkspaceLock() {
  if (fd_ >= 0) {
    // Leave no stale name behind: the next holder writes its own.
    if (::ftruncate(fd_, 0) != 0) {
    }
    ::close(fd_);  // releases the flock
  }
}

Result<std::unique_ptr<WorkspaceLock>> WorkspaceLock::acquire(
    const std::filesystem::path& path, const std::string& command, bool wait,
    const std::function<void(const std::string&)>& on_wait) {
  // O_CLOEXEC: children (compilers, runners) must not keep the lock after peak ends.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    int e = errno;
    return make_error(
        fmt::format("cannot open the workspace lock {}: {}{}", path.string(), std::strerror(e),
                    e == EACCES || e == EROFS
                        ? "; the workspace is read-only: commands that change it need write "
                          "access to its .peak folder"
                        : ""),
        ErrorKind::environment);
  }
  // A reader asking who holds the lock (holder()) takes it shared for a moment; such a
  // moment is not a holder: try again briefly while the file names nobody.
  bool got = false;
  for (int tries = 0;; ++tries) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      got = true;
      break;
    }
    if (errno != EWOULDBLOCK) {
      int e = errno;
      ::close(fd);
      return make_error(
          fmt::format("cannot lock the workspace ({}): {}", path.string(), std::strerror(e)),
          ErrorKind::environment);
    }
    if (read_holder(fd) || tries >= 20) break;
    ::usleep(5000);
  }
  if (!got) {
    auto h = read_holder(fd);
    std::string who = h ? h->describe() : "another peak process";
    if (!wait) {
      ::close(fd);
      return make_error(fmt::format("the workspace is busy: {} is changing it. Wait for it to "
                                    "finish, or run this command again with --wait",
                                    who),
                        ErrorKind::environment);
    }
    if (on_wait) on_wait(fmt::format("waiting for {} to finish with the workspace ...", who));
    while (::flock(fd, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return make_error(
          fmt::format("cannot lock the workspace ({}): {}", path.string(), std::strerror(e)),
          ErrorKind::environment);
    }
  }
  ProcessIdentity me = this_process();
  json j = {{"format", 1},       {"pid", me.pid},      {"host", me.host},
            {"start", me.start}, {"command", command}, {"since", now_iso()}};
  std::string text = j.dump() + "\n";
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    // The lock is held; only the holder's name could not be written (e.g. disk full).
  }
  std::unique_ptr<WorkspaceLock> lock(new WorkspaceLock());
  lock->fd_ = fd;
  return lock;
}

std::optional<LockHolder> WorkspaceLock::holder(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  if (::flock(fd, LOCK_SH | LOCK_NB) == 0) {
    ::close(fd);
    return std::nullopt;
  }
  auto h = read_holder(fd);
  ::close(fd);
  return h ? *h : LockHolder{};
}

}  // namespace peak
