#include "util/fs.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>

namespace peak {

Result<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error(fmt::format("cannot read {}: no such file or not readable", path.string()));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status write_file(const fs::path& path, std::string_view content) {
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::error(fmt::format("cannot write {}", path.string()));
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  if (!out) return Status::error(fmt::format("write to {} failed (disk full?)", path.string()));
  return Status::ok();
}

fs::path unique_temp_name(const fs::path& path) {
  static std::atomic<uint64_t> counter{0};
  fs::path tmp = path;
  tmp += fmt::format(".tmp.{}.{}", ::getpid(), counter.fetch_add(1));
  return tmp;
}

Status write_file_atomic(const fs::path& path, std::string_view content) {
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  const fs::path tmp = unique_temp_name(path);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::error(fmt::format("cannot write {}", tmp.string()));
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n <= 0) {
      ::close(fd);
      fs::remove(tmp, ec);
      return Status::error(fmt::format("write to {} failed (disk full?)", tmp.string()));
    }
    off += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return Status::error(
        fmt::format("cannot rename {} to {}: {}", tmp.string(), path.string(), ec.message()));
  }
  return Status::ok();
}

fs::path self_executable() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe;
}

Result<fs::path> make_temp_dir(std::string_view prefix, const fs::path& base) {
  fs::path root = base.empty() ? fs::temp_directory_path() : base;
  std::error_code ec;
  fs::create_directories(root, ec);
  std::string templ = (root / (std::string(prefix) + "XXXXXX")).string();
  if (::mkdtemp(templ.data()) == nullptr)
    return make_error(fmt::format("cannot create a temporary directory in {}", root.string()));
  return fs::path(templ);
}

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) {
      if (start < text.size()) out.emplace_back(text.substr(start));
      break;
    }
    out.emplace_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\r' || s[b] == '\n')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r' || s[e - 1] == '\n'))
    --e;
  return std::string(s.substr(b, e - b));
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  if (from.empty()) return s;
  size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
  return s;
}

std::string shell_quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} {}", bytes, units[u])
                : fmt::format("{:.1f} {}", bytes, units[u]);
}

std::string format_seconds(double s) {
  if (s < 1e-3) return fmt::format("{:.1f} us", s * 1e6);
  if (s < 1) return fmt::format("{:.1f} ms", s * 1e3);
  if (s < 120) return fmt::format("{:.1f} s", s);
  return fmt::format("{}m{:02d}s", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
}

}  // namespace peak
