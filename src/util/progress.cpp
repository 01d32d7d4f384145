#include "util/progress.h"

#include <unistd.h>

namespace peak {

Progress::Progress(FILE* out) : out_(out) { tty_ = ::isatty(::fileno(out)) != 0; }

Progress::~Progress() { clear(); }

void Progress::status(const std::string& line, bool force) {
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
  if (tty_ && last_len_ > 0) {
    std::fprintf(out_, "\r%*s\r", static_cast<int>(last_len_), "");
    std::fflush(out_);
    last_len_ = 0;
  }
}

void Progress::print(const std::string& line) {
  if (listener_) listener_(line);
  if (quiet_) return;
  clear();
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

}  // namespace peak
