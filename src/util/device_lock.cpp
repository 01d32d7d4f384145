#include "util/device_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "util/fs.h"

namespace peak {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string sanitized(std::string_view s) {
  std::string out;
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '.' || c == '_')
      out.push_back(static_cast<char>(std::tolower(u)));
    else if (!out.empty() && out.back() != '-')
      out.push_back('-');
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "unnamed" : out;
}

// A usable lock folder: it exists (made here when missing; `shared` ones open to every user, as
// /tmp is) and this process can create files in it.
bool usable(const fs::path& dir, bool shared) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    if (::mkdir(dir.c_str(), shared ? 01777 : 0700) != 0 && errno != EEXIST) return false;
    if (shared) ::chmod(dir.c_str(), 01777);  // mkdir's mode went through the umask
  }
  return ::access(dir.c_str(), W_OK | X_OK) == 0;
}

}  // namespace

std::string process_description() {
  std::string cmd;
  if (auto text = read_file("/proc/self/cmdline")) {
    std::string s = *text;
    std::replace(s.begin(), s.end(), '\0', ' ');
    cmd = trim(s);
    if (auto slash = cmd.rfind('/', cmd.find(' ')); slash != std::string::npos)
      cmd = cmd.substr(slash + 1);
    if (cmd.size() > 120) cmd = cmd.substr(0, 117) + "...";
  }
  char host[256] = "";
  ::gethostname(host, sizeof host - 1);
  std::error_code ec;
  std::string cwd = fs::current_path(ec).string();
  std::time_t now = std::time(nullptr);
  char when[32] = "";
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  return fmt::format("pid {} on {}: {} (in {}) since {}", ::getpid(), host, cmd, cwd, when);
}

std::string read_holder(int fd) {
  char buf[512];
  ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return "";
  return trim(std::string_view(buf, static_cast<size_t>(n)));
}

int open_lock_file(const fs::path& path) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0) return fd;
    if (errno == EACCES) return ::open(path.c_str(), O_RDONLY | O_CLOEXEC);  // another user's
    if (errno != ENOENT) return -1;
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      ::fchmod(fd, 0666);  // the umask must not keep other users out
      return fd;
    }
    if (errno != EEXIST) return -1;
  }
  return -1;
}

std::string device_lock_key(std::string_view pci_bus_id, bool is_cpu, std::string_view name) {
  if (is_cpu) return "cpu";
  if (!trim(pci_bus_id).empty()) return "pci-" + sanitized(trim(pci_bus_id));
  return "gpu-" + sanitized(name);
}

Result<fs::path> device_lock_dir() {
  if (const char* e = std::getenv("PEAK_LOCK_DIR"); e && *e) {
    std::error_code ec;
    fs::create_directories(e, ec);
    if (!usable(e, false))
      return make_error(fmt::format(
          "PEAK_LOCK_DIR={} is not a folder peak can create lock files in; fix it or unset it", e));
    return fs::path(e);
  }
  if (usable("/run/lock/peak", true)) return fs::path("/run/lock/peak");
  if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x && *x)
    if (usable(fs::path(x) / "peak-locks", false)) return fs::path(x) / "peak-locks";
  std::error_code ec;
  fs::path tmp = fs::temp_directory_path(ec) / "peak-locks";
  if (!ec && usable(tmp, true)) return tmp;
  return make_error(
      "no folder for device locks: /run/lock/peak, $XDG_RUNTIME_DIR and the temp folder are not "
      "writable; set PEAK_LOCK_DIR to one that is");
}

DeviceLockStats DeviceLockStats::since(const DeviceLockStats& before) const {
  DeviceLockStats d;
  d.acquisitions = acquisitions - before.acquisitions;
  d.waits = waits - before.waits;
  d.waited_s = waited_s - before.waited_s;
  d.queued = queued - before.queued;
  d.queued_s = queued_s - before.queued_s;
  for (size_t i = std::min(before.waited_for.size(), waited_for.size()); i < waited_for.size(); ++i)
    d.waited_for.push_back(waited_for[i]);
  return d;
}

std::shared_ptr<DeviceLock> DeviceLock::for_device(const std::string& key,
                                                   const std::string& label) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<DeviceLock>> locks;
  std::lock_guard<std::mutex> lock(mu);
  if (auto existing = locks[key].lock()) return existing;
  auto made = std::make_shared<DeviceLock>(key, label);
  locks[key] = made;
  return made;
}

DeviceLock::DeviceLock(std::string key, std::string label)
    : key_(std::move(key)), label_(std::move(label)) {}

DeviceLock::~DeviceLock() {
  if (fd_ >= 0) ::close(fd_);
}

void DeviceLock::set_wait_notice(WaitNotice notice) {
  std::lock_guard<std::mutex> lock(mu_);
  notice_ = std::move(notice);
}

DeviceLockStats DeviceLock::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

fs::path DeviceLock::path() const {
  std::lock_guard<std::mutex> lock(mu_);
  return path_;
}

DeviceLock::Guard& DeviceLock::Guard::operator=(Guard&& o) noexcept {
  if (this != &o) {
    if (lock_) lock_->release();
    lock_ = o.lock_;
    o.lock_ = nullptr;
  }
  return *this;
}

DeviceLock::Guard::~Guard() {
  if (lock_) lock_->release();
}

Result<DeviceLock::Guard> DeviceLock::acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  if (depth_ > 0 && owner_ == std::this_thread::get_id()) {
    ++depth_;
    return Guard(this);
  }
  if (depth_ > 0) {  // another thread of this process holds it
    auto t0 = Clock::now();
    ++stats_.queued;
    released_.wait(lock, [&] { return depth_ == 0; });
    stats_.queued_s += seconds_since(t0);
  }
  if (path_.empty()) {
    auto dir = device_lock_dir();
    if (!dir) return Error{dir.error()};
    path_ = *dir / (key_ + ".lock");
  }
  int fd = open_lock_file(path_);
  if (fd < 0)
    return make_error(
        fmt::format("cannot open the device lock {}: {}; set PEAK_LOCK_DIR to a "
                    "writable folder",
                    path_.string(), std::strerror(errno)));
  auto t0 = Clock::now();
  bool waited = false;
  double next_notice = 0;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      int err = errno;
      ::close(fd);
      return make_error(fmt::format("cannot lock {}: {}", path_.string(), std::strerror(err)));
    }
    double waited_s = seconds_since(t0);
    if (!waited || waited_s >= next_notice) {
      std::string holder = read_holder(fd);
      if (!waited) {
        ++stats_.waits;
        if (stats_.waited_for.size() < 16)
          stats_.waited_for.push_back(holder.empty() ? "another process" : holder);
      }
      waited = true;
      next_notice = waited_s + 5;
      if (notice_)
        notice_(fmt::format(
            "waiting for {}: in use by {}{}", label_, holder.empty() ? "another process" : holder,
            waited_s >= 1 ? fmt::format(" ({} so far)", format_seconds(waited_s)) : std::string()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (waited) stats_.waited_s += seconds_since(t0);
  ++stats_.acquisitions;
  // Say who holds it, for the next waiter (a file of another user's stays as it is).
  std::string me = process_description() + "\n";
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, me.data(), me.size(), 0);
  fd_ = fd;
  depth_ = 1;
  owner_ = std::this_thread::get_id();
  return Guard(this);
}

void DeviceLock::release() {
  std::lock_guard<std::mutex> lock(mu_);
  if (depth_ == 0 || --depth_ > 0) return;
  if (fd_ >= 0) {
    (void)!::ftruncate(fd_, 0);
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
    fd_ = -1;
  }
  owner_ = {};
  released_.notify_all();
}

}  // namespace peak
