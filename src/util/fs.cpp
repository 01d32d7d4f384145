#include "util/fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "util/output.h"

namespace peak {

Result<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error(fmt::format("cannot read {}: no such file or not readable", path.string()));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

// Writes all of `content` to `fd`, retrying short writes and interrupted calls.
bool write_all(int fd, std::string_view content) {
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string io_error(std::string_view what, const fs::path& path, int err) {
  return fmt::format(
      "{} {}: {}{}", what, path.string(), std::strerror(err),
      err == ENOSPC || err == EDQUOT ? " (free some space, or name another file)" : "");
}

// Writes, flushes to the disk (regular files) and closes `fd`; every step is checked, so a full
// disk or a device that refuses the data is an error, not a silent loss.
Status finish_write(int fd, const fs::path& path, std::string_view content) {
  if (!write_all(fd, content)) {
    int err = errno;
    ::close(fd);
    return Status::error(io_error("cannot write", path, err));
  }
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    return Status::error(io_error("cannot write", path, err));
  }
  if (::close(fd) != 0) return Status::error(io_error("cannot write", path, errno));
  return Status::ok();
}

// Opens `path` itself for writing (following a symbolic link, creating a missing file) and
// writes `content` to it.
Status write_through(const fs::path& path, std::string_view content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644);
  if (fd < 0) return Status::error(io_error("cannot write", path, errno));
  return finish_write(fd, path, content);
}

}  // namespace

Status write_file(const fs::path& path, std::string_view content) {
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  return write_through(path, content);
}

fs::path unique_temp_name(const fs::path& path) {
  static std::atomic<uint64_t> counter{0};
  fs::path tmp = path;
  tmp += fmt::format(".tmp.{}.{}", ::getpid(), counter.fetch_add(1));
  return tmp;
}

Status write_file_atomic(const fs::path& path, std::string_view content) {
  std::error_code ec;
  auto kind = fs::symlink_status(path, ec).type();
  if (kind != fs::file_type::not_found && kind != fs::file_type::regular &&
      kind != fs::file_type::none)
    return Status::error(fmt::format(
        "{} is not a regular file (a symbolic link, folder, device or pipe); peak does not "
        "replace it: remove it, or use another path",
        path.string()));
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  const fs::path tmp = unique_temp_name(path);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::error(io_error("cannot write", tmp, errno));
  if (auto s = finish_write(fd, tmp, content); !s) {
    fs::remove(tmp, ec);
    return s;
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return Status::error(
        fmt::format("cannot rename {} to {}: {}", tmp.string(), path.string(), ec.message()));
  }
  return Status::ok();
}

Status write_output_file(const fs::path& path, std::string_view content) {
  std::error_code ec;
  auto link = fs::symlink_status(path, ec);
  auto target = fs::status(path, ec);  // through links
  if (fs::is_directory(target))
    return Status::error(fmt::format("{} is a folder; name a file to write (e.g. {})",
                                     path.string(), (path / "out.json").string()));
  if (fs::is_regular_file(target)) {
    // A link to a regular file: replace the file it names, and keep the link.
    fs::path real = fs::is_symlink(link) ? fs::canonical(path, ec) : path;
    if (ec) return Status::error(io_error("cannot resolve", path, ec.value()));
    return write_file_atomic(real, content);
  }
  if (!fs::exists(link)) return write_file_atomic(path, content);
  // A device, a pipe, or a link to nothing yet: write to what the path names.
  return write_through(path, content);
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
