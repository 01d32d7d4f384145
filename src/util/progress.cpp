#include "util/progress.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "util/fs.h"

namespace peak {

// Version of the status file written by mirror_to (docs/store.md).
constexpr int kStatusFormatVersion = 1;

void Progress::write_mirror() {
  if (mirror_.empty()) return;
  double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  nlohmann::json j{{"format", kStatusFormatVersion},
                   {"pid", static_cast<int64_t>(::getpid())},
                   {"updated_unix", now},
                   {"line", mirror_line_},
                   {"status", mirror_status_}};
  (void)write_file_atomic(mirror_, j.dump() + "\n");  // best effort: never stops the work
}

Progress::Progress(FILE* out) : out_(out) { tty_ = ::isatty(::fileno(out)) != 0; }

Progress::~Progress() { clear(); }

void Progress::status(const std::string& line, bool force) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (!mirror_.empty() && line != mirror_status_) {
    mirror_status_ = line;
    write_mirror();
  }
  if (listener_) listener_(line);
  if (quiet_) return;
  if (tty_) {
    std::string shown = line.size() > 150 ? line.substr(0, 147) + "..." : line;
    std::fprintf(out_, "\r%s", shown.c_str());
    if (last_len_ > shown.size())
      std::fprintf(out_, "%*s", static_cast<int>(last_len_ - shown.size()), "");
    std::fprintf(out_, "\r%s", shown.c_str());
    std::fflush(out_);
    last_len_ = shown.size();
    return;
  }
  auto now = std::chrono::steady_clock::now();
  if (!force && line == last_plain_) return;
  if (!force && now - last_plain_time_ < std::chrono::seconds(2)) return;
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
  last_plain_ = line;
  last_plain_time_ = now;
}

void Progress::clear() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  clear_locked();
}

void Progress::clear_locked() {
  if (tty_ && last_len_ > 0) {
    std::fprintf(out_, "\r%*s\r", static_cast<int>(last_len_), "");
    std::fflush(out_);
    last_len_ = 0;
  }
}

void Progress::print(const std::string& line) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (!mirror_.empty()) {
    mirror_line_ = line;
    mirror_status_.clear();
    write_mirror();
  }
  if (listener_) listener_(line);
  if (quiet_) return;
  clear_locked();
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

}  // namespace peak
