#pragma once
// The workspace lock: one mutating peak command at a time per workspace (docs/store.md).
//
// flock(2) on .peak/lock, held for the life of the command. The kernel releases it when the
// process ends, however it ends, so a lock is never stale. The holder writes who it is (pid,
// host, process start time, command) into the file, so that a second command can say whom it
// waits for. The same identity marks the owner of a workflow in the store.
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "util/result.h"

namespace peak {

// A process, identified across pid reuse by its start time.
struct ProcessIdentity {
  int pid = 0;
  std::string host;
  std::string start;  // when the process started, UTC ISO 8601 ("" when unknown)
};

// This process.
ProcessIdentity this_process();

enum class Liveness { alive, dead, unknown };  // unknown: a process on another host
// Whether `p` still runs: same host, the pid exists and started at the recorded time.
Liveness liveness(const ProcessIdentity& p);

struct LockHolder {
  ProcessIdentity process;
  std::string command;           // e.g. "peak apply tb-tiling"
  std::string since;             // when it took the lock (UTC ISO 8601)
  std::string describe() const;  // "peak apply tb-tiling (pid 1234 on host, since ...)"
};

class WorkspaceLock {
 public:
  ~WorkspaceLock();
  WorkspaceLock(const WorkspaceLock&) = delete;
  WorkspaceLock& operator=(const WorkspaceLock&) = delete;

  // Takes the lock on `path` (the file is created when missing). When another process holds
  // it: fails at once with a message naming the holder (ErrorKind::environment), or, with
  // `wait`, calls `on_wait` with that message once and blocks until the lock is free.
  static Result<std::unique_ptr<WorkspaceLock>> acquire(
      const std::filesystem::path& path, const std::string& command, bool wait,
      const std::function<void(const std::string&)>& on_wait = {});

  // The holder of the lock on `path`, or nullopt when nobody holds it (or the file is missing).
  // Takes nothing and writes nothing: works in a read-only workspace.
  static std::optional<LockHolder> holder(const std::filesystem::path& path);

 private:
  WorkspaceLock() = default;
  int fd_ = -1;
};

}  // namespace peak
