#pragma once
// The status line for long work: overprinted in place on a terminal, plain lines otherwise
// (rate-limited so logs stay readable). Writes to stderr; --quiet silences it. Thread-safe: the
// devices of a tuning search spread over several GPUs report from their own threads.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>

namespace peak {

class Progress {
 public:
  explicit Progress(FILE* out = stderr);
  ~Progress();
  void set_quiet(bool q) { quiet_ = q; }
  // Receives every status and permanent line, quiet or not and without rate limiting (the MCP
  // server turns them into progress notifications).
  using Listener = std::function<void(const std::string& line)>;
  void set_listener(Listener l) { listener_ = std::move(l); }
  // Replaces the status line (on a terminal) or prints it (elsewhere, at most every 2 s unless
  // `force`).
  void status(const std::string& line, bool force = false);
  // A permanent line: clears the status line first.
  void print(const std::string& line);
  void clear();
  bool is_tty() const { return tty_; }
  // Also keeps the latest permanent line and status line in `path` (a small JSON file,
  // docs/store.md), rewritten atomically on every change, quiet or not: `peak serve` shows a run
  // in progress from it. An empty path turns it off.
  void mirror_to(std::filesystem::path path) { mirror_ = std::move(path); }

 private:
  FILE* out_;
  bool tty_ = false;
  bool quiet_ = false;
  Listener listener_;
  size_t last_len_ = 0;
  std::string last_plain_;
  std::chrono::steady_clock::time_point last_plain_time_{};
  void write_mirror();
  void clear_locked();
  std::recursive_mutex mu_;  // a listener may print
  std::filesystem::path mirror_;
  std::string mirror_line_, mirror_status_;
};

}  // namespace peak
