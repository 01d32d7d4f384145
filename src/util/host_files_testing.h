#pragma once
// Host files a candidate must never see (the users and groups of /etc), and a search for any of
// their lines in what peak wrote: compile logs, stores, prompts.
#include <filesystem>
#include <string>
#include <vector>

#include "util/fs.h"

namespace peak::testing {

// The non-empty lines of /etc/passwd and /etc/group ("root:x:0:0:root:/root:/bin/bash", ...).
inline std::vector<std::string> host_file_lines() {
  std::vector<std::string> lines;
  for (const char* f : {"/etc/passwd", "/etc/group"})
    if (auto text = read_file(f))
      for (const std::string& line : split_lines(*text))
        if (line.find(':') != std::string::npos) lines.push_back(line);
  return lines;
}

// The first line of /etc/passwd or /etc/group that `text` holds, or "".
inline std::string host_line_in(const std::string& text) {
  for (const std::string& line : host_file_lines())
    if (text.find(line) != std::string::npos) return line;
  return "";
}

// "<file>: <line>" for the first regular file under `root` holding a line of /etc/passwd or
// /etc/group, or "".
inline std::string host_line_under(const std::filesystem::path& root) {
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(root, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    if (auto text = read_file(it->path()))
      if (std::string line = host_line_in(*text); !line.empty())
        return it->path().string() + ": " + line;
  }
  return "";
}

// Includes of host files a hostile candidate tries: /etc/passwd by its path, /etc/group as a
// system header, and /etc/passwd again by a relative path that climbs out of any folder.
inline std::vector<std::string> hostile_includes() {
  std::string up;
  for (int i = 0; i < 32; ++i) up += "../";
  return {"#include \"/etc/passwd\"", "#include </etc/group>", "#include \"" + up + "etc/passwd\""};
}

}  // namespace peak::testing
