#pragma once
// One writer per workspace: a command that changes a workspace (apply, run, respond, validate,
// tune, commit, checkout, branch) holds an flock(2) on <workspace>/.peak/lock while it runs, so
// that two such commands cannot interleave their checkpoints, evaluations and working files. The
// second one says who holds it and stops, or waits for it with --wait. Reading commands (log,
// show, diff, report) take no lock. The kernel drops the lock when its holder dies.
#include <filesystem>
#include <functional>
#include <string>

#include "util/result.h"

namespace peak {

class WorkspaceLock {
 public:
  using WaitNotice = std::function<void(const std::string& message)>;

  // Takes the lock of the workspace whose state folder is `peak_dir`. Held by another process:
  // with `wait`, waits (calling `notice` when the wait begins and every few seconds); without,
  // fails with a message that names the holder and the way out.
  static Result<WorkspaceLock> acquire(const std::filesystem::path& peak_dir, bool wait,
                                       const WaitNotice& notice = {});

  WorkspaceLock() = default;
  WorkspaceLock(WorkspaceLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  WorkspaceLock& operator=(WorkspaceLock&& o) noexcept;
  WorkspaceLock(const WorkspaceLock&) = delete;
  WorkspaceLock& operator=(const WorkspaceLock&) = delete;
  ~WorkspaceLock();
  bool held() const { return fd_ >= 0; }

 private:
  explicit WorkspaceLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace peak
