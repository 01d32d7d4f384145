#include "util/workspace_lock.h"

#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "util/device_lock.h"
#include "util/fs.h"

namespace peak {

Result<WorkspaceLock> WorkspaceLock::acquire(const fs::path& peak_dir, bool wait,
                                             const WaitNotice& notice) {
  const fs::path path = peak_dir / "lock";
  int fd = open_lock_file(path);
  if (fd < 0)
    return make_error(
        fmt::format("cannot open the workspace lock {}: {}", path.string(), std::strerror(errno)));
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  double next_notice = 0;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) {
      int err = errno;
      ::close(fd);
      return make_error(fmt::format("cannot lock {}: {}", path.string(), std::strerror(err)));
    }
    std::string holder = read_holder(fd);
    if (holder.empty()) holder = "another process";
    const fs::path root = peak_dir.parent_path();
    if (!wait) {
      ::close(fd);
      return make_error(fmt::format(
          "the workspace {} is being changed by {}; wait for it to finish, or run this command "
          "again with --wait to queue behind it",
          root.string(), holder));
    }
    double waited = std::chrono::duration<double>(Clock::now() - t0).count();
    if (notice && waited >= next_notice) {
      notice(fmt::format(
          "waiting for the workspace {}: being changed by {}{}", root.string(), holder,
          waited >= 1 ? fmt::format(" ({} so far)", format_seconds(waited)) : std::string()));
      next_notice = waited + 5;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::string me = this_process() + "\n";
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, me.data(), me.size(), 0);
  return WorkspaceLock(fd);
}

WorkspaceLock& WorkspaceLock::operator=(WorkspaceLock&& o) noexcept {
  if (this != &o) {
    this->~WorkspaceLock();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

WorkspaceLock::~WorkspaceLock() {
  if (fd_ < 0) return;
  (void)!::ftruncate(fd_, 0);
  ::flock(fd_, LOCK_UN);
  ::close(fd_);
  fd_ = -1;
}

}  // namespace peak
