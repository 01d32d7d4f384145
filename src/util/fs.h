#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "util/result.h"

namespace peak {
namespace fs = std::filesystem;

Result<std::string> read_file(const fs::path& path);
// Writes through a temporary file and rename, so readers never see a half-written file (several
// threads and processes may write the same path at once; the last rename wins).
Status write_file_atomic(const fs::path& path, std::string_view content);
// `path` + ".tmp.<pid>.<n>": a temporary name no other thread or process of this host uses.
fs::path unique_temp_name(const fs::path& path);
Status write_file(const fs::path& path, std::string_view content);
// A new empty directory under the system temp dir (or `base` when given).
// The running program's own executable (/proc/self/exe); empty when it cannot be read.
fs::path self_executable();
Result<fs::path> make_temp_dir(std::string_view prefix, const fs::path& base = {});

// Small string helpers used everywhere.
std::vector<std::string> split_lines(std::string_view text);
std::string trim(std::string_view s);
bool starts_with(std::string_view s, std::string_view prefix);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
std::string replace_all(std::string s, std::string_view from, std::string_view to);
std::string shell_quote(std::string_view s);
// Human-friendly byte count and duration.
std::string format_bytes(double bytes);
std::string format_seconds(double seconds);

}  // namespace peak
