#pragma once
// Files the user names (`-o FILE`, `--html FILE`, `--export-space FILE`).
#include <filesystem>
#include <string_view>

#include "util/result.h"

namespace peak {

// A new or regular file is replaced through a temporary and a rename (write_file_atomic: readers
// never see half of it); a symbolic link to a regular file has that file replaced and stays a
// link; a device node, pipe or link to nothing is written to directly (a device that refuses the
// data, such as /dev/full, is an error). A folder is refused. Nothing is ever renamed over a link
// or a device node, and every write, the flush to disk and the close are checked.
Status write_output_file(const std::filesystem::path& path, std::string_view content);

}  // namespace peak
