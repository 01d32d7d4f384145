#pragma once
// A folder removed with everything in it when the scope ends (a compiler's scratch folder).
#include <filesystem>
#include <system_error>

namespace peak {

struct RemoveOnExit {
  std::filesystem::path path;
  ~RemoveOnExit() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace peak
