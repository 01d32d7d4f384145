#pragma once
// One timer per device: a system-wide lock per GPU (and one for every CPU device, which share the
// CPU) that peak holds while a runner validates or times on it, so that concurrent peak processes
// queue instead of disturbing each other's numbers. The lock is an flock(2) on a file named after
// the device's identity (its PCI bus id where the API gives it), in $PEAK_LOCK_DIR, /run/lock/peak,
// $XDG_RUNTIME_DIR/peak-locks or <tmp>/peak-locks, the first that can be used. The kernel drops it
// when its holder dies, however it dies. The holder writes who it is into the file, so a waiter
// can say whom it waits for.
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "util/result.h"

namespace peak {

// "pci-0000-1b-00.0" for a GPU with a PCI bus id (CUDA's and Vulkan's spellings agree), "cpu" for
// a CPU device, else "gpu-" and the device's name.
std::string device_lock_key(std::string_view pci_bus_id, bool is_cpu, std::string_view name);

// "pid 4242 on host: peak tune --budget 4 (in /home/u/ws) since 2025-11-23 10:31:02": what a lock
// holder writes into its lock file for the processes that wait for it.
std::string process_description();
// The holder's words from an open lock file ("" when none were written).
std::string read_holder(int fd);
// Opens (creating when needed, O_CLOEXEC) a lock file that other users' processes can lock too;
// -1 with errno set on failure.
int open_lock_file(const std::filesystem::path& path);

// The folder that holds the lock files (created when missing).
Result<std::filesystem::path> device_lock_dir();

struct DeviceLockStats {
  int acquisitions = 0;
  int waits = 0;        // acquisitions that found the device held by another process
  double waited_s = 0;  // time spent waiting for other processes
  // Acquisitions that waited for another thread of this process (a search's other job on the
  // same device): its own work queueing, not contention from outside.
  int queued = 0;
  double queued_s = 0;
  std::vector<std::string> waited_for;  // the holders seen while waiting (their own words)
  // What happened after `before` (a copy taken earlier from the same lock).
  DeviceLockStats since(const DeviceLockStats& before) const;
};

class DeviceLock {
 public:
  using WaitNotice = std::function<void(const std::string& message)>;

  // The lock of one device in this process (one object per key, shared by every user).
  static std::shared_ptr<DeviceLock> for_device(const std::string& key, const std::string& label);
  DeviceLock(std::string key, std::string label);
  ~DeviceLock();
  DeviceLock(const DeviceLock&) = delete;
  DeviceLock& operator=(const DeviceLock&) = delete;

  // Called when a wait begins and every few seconds while it lasts ("waiting for ...").
  void set_wait_notice(WaitNotice notice);

  // Holds the device until the guard goes. Holds of one thread nest (they share one lock); another
  // thread of this process waits for the holder's release, as another process does.
  class Guard {
   public:
    Guard() = default;
    explicit Guard(DeviceLock* lock) : lock_(lock) {}
    Guard(Guard&& o) noexcept : lock_(o.lock_) { o.lock_ = nullptr; }
    Guard& operator=(Guard&& o) noexcept;
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    ~Guard();

   private:
    DeviceLock* lock_ = nullptr;
  };
  // Blocks while another process holds the device. Fails only when no lock file can be opened.
  Result<Guard> acquire();

  DeviceLockStats stats() const;
  const std::string& key() const { return key_; }
  const std::string& label() const { return label_; }
  std::filesystem::path path() const;

 private:
  void release();
  std::string key_, label_;
  mutable std::mutex mu_;
  std::condition_variable released_;  // depth_ went back to 0
  int fd_ = -1;
  int depth_ = 0;
  std::thread::id owner_;  // the thread holding it (depth_ > 0)
  std::filesystem::path path_;
  WaitNotice notice_;
  DeviceLockStats stats_;
};

}  // namespace peak
