#pragma once
// Where peak's data lives: transformations/, sequences/, examples/, recordings/.
// Resolution order: $PEAK_DATA_DIR, the folder above the peak executable (a build folder inside
// the source tree), two folders above it, <prefix>/share/peak, then the source folder at build
// time.
#include <filesystem>
#include <string>

namespace peak {

std::filesystem::path data_dir();
std::filesystem::path data_path(const std::string& sub);  // data_dir() / sub

}  // namespace peak
