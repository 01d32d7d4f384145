#include "engine/paths.h"

#include <unistd.h>

#include <cstdlib>

#include "peak/version.h"
#include "util/fs.h"

namespace peak {

namespace fs = std::filesystem;

namespace {
bool looks_like_data(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p / "transformations", ec) && fs::is_directory(p / "examples", ec);
}
}  // namespace

fs::path data_dir() {
  if (const char* env = std::getenv("PEAK_DATA_DIR"); env && *env) return fs::path(env);
  fs::path exe = self_executable();
  if (!exe.empty()) {
    fs::path d = exe.parent_path();
    for (const fs::path& c :
         {d.parent_path(), d.parent_path().parent_path(), d.parent_path() / "share" / "peak"})
      if (looks_like_data(c)) return c;
  }
  return fs::path(PEAK_SOURCE_DIR_AT_BUILD);
}

fs::path data_path(const std::string& sub) { return data_dir() / sub; }

}  // namespace peak
