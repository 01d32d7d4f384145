#include "util/fault.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

namespace peak {

namespace {

// Whether PEAK_FAULT holds `entry` (exactly `name`, or `name#N` with N == hit).
bool listed(std::string_view name, int hit) {
  const char* env = std::getenv("PEAK_FAULT");
  if (!env || !*env) return false;
  std::string_view all(env);
  while (!all.empty()) {
    size_t comma = all.find(',');
    std::string_view e = all.substr(0, comma);
    all = comma == std::string_view::npos ? std::string_view() : all.substr(comma + 1);
    size_t hash = e.find('#');
    if (e.substr(0, hash) != name) continue;
    if (hash == std::string_view::npos) return true;
    if (std::atoi(std::string(e.substr(hash + 1)).c_str()) == hit) return true;
  }
  return false;
}

int next_hit(std::string_view point) {
  static std::mutex mu;
  static std::map<std::string, int, std::less<>> hits;
  std::lock_guard lock(mu);
  return ++hits[std::string(point)];
}

}  // namespace

void fault_point(std::string_view point) {
  std::string name = "kill@" + std::string(point);
  if (listed(name, next_hit(name))) ::kill(::getpid(), SIGKILL);
}

bool fault_active(std::string_view point) { return listed(point, next_hit(point)); }

}  // namespace peak
