#include "store/archive.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "util/fs.h"
#include "util/process.h"
#include "util/sha256.h"

namespace peak {
namespace fs = std::filesystem;

namespace {

fs::path cache_root() {
  if (const char* d = std::getenv("PEAK_CACHE_DIR"); d && *d) return fs::path(d);
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return fs::path(d) / "peak";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "peak";
  return fs::temp_directory_path() / fmt::format("peak-cache-{}", ::getuid());
}

// Runs `argv`; its standard output, or an error naming `what` and the tool's own words.
Result<std::string> run_tool(const std::vector<std::string>& argv, const std::string& what) {
  ProcessOptions po;
  po.argv = argv;
  po.max_output = size_t{1} << 30;
  auto r = run_process(po);
  if (!r)
    return make_error(fmt::format("cannot {}: {} (is {} installed?)", what, r.error(), argv[0]));
  if (!r->ok())
    return make_error(fmt::format("cannot {}: {} {}: {}", what, argv[0], r->describe(), r->err));
  return std::move(r->out);
}

// The archive's store unpacked into `part`.
Status unpack_into(const fs::path& archive, const fs::path& part) {
  const std::string what = "unpack the store archive " + archive.string();
  if (archive.filename().string().ends_with(".db.xz")) {
    auto db = run_tool({"xz", "-dc", "--", archive.string()}, what);
    if (!db) return db.status();
    return write_file(part / "peak.db", *db);
  }
  auto r = run_tool({"tar", "-xJf", archive.string(), "-C", part.string(), "--no-same-owner",
                     "--no-same-permissions"},
                    what);
  if (!r) return r.status();
  std::error_code ec;
  if (!fs::exists(part / "peak.db", ec))
    return Status::error(fmt::format(
        "{} holds no peak.db at its top level: not a peak store archive", archive.string()));
  return Status::ok();
}

}  // namespace

bool is_store_archive(const fs::path& path) {
  const std::string name = path.filename().string();
  return name == "store.tar.xz" || name.ends_with("-store.tar.xz") || name.ends_with(".db.xz");
}

fs::path store_or_archive(const fs::path& path) {
  std::error_code ec;
  // A folder is taken as it is when it holds a store (or is no store folder at all: a workspace,
  // a folder of results); a store's folder left empty beside its archive is not.
  const bool store_folder = fs::is_directory(path, ec) && path.filename() == "store";
  if (fs::exists(path, ec) &&
      !(store_folder && !fs::exists(path / "peak.db", ec) && !fs::exists(path / "peak.db.xz", ec)))
    return path;
  for (const char* suffix : {".tar.xz", ".xz"}) {
    fs::path a = path;
    a += suffix;
    if (is_store_archive(a) && fs::is_regular_file(a, ec)) return a;
  }
  if (path.filename() == "peak.db" && path.has_parent_path()) {  // DIR/store/peak.db
    fs::path a = path.parent_path();
    a += ".tar.xz";
    if (is_store_archive(a) && fs::is_regular_file(a, ec)) return a;
  }
  return path;
}

Result<fs::path> unpack_store_archive(const fs::path& archive) {
  auto bytes = read_file(archive);
  if (!bytes)
    return Error{
        fmt::format("cannot read the store archive {}: {}", archive.string(), bytes.error())};
  const fs::path dir = cache_root() / "stores" / sha256_hex(*bytes).substr(0, 32);
  std::error_code ec;
  if (fs::exists(dir / "peak.db", ec)) return dir;
  fs::create_directories(dir.parent_path(), ec);
  if (ec)
    return make_error(
        fmt::format("cannot create {} to unpack {}: {}; set PEAK_CACHE_DIR to a "
                    "writable folder",
                    dir.parent_path().string(), archive.string(), ec.message()));
  const fs::path part = fs::path(dir.string() + fmt::format(".part-{}", ::getpid()));
  fs::remove_all(part, ec);
  fs::create_directories(part, ec);
  if (Status st = unpack_into(archive, part); !st) {
    fs::remove_all(part, ec);
    return Error{st.message()};
  }
  fs::rename(part, dir, ec);  // another process may have unpacked it first: theirs stands
  if (ec) fs::remove_all(part, ec);
  if (!fs::exists(dir / "peak.db", ec))
    return make_error(
        fmt::format("cannot move the unpacked {} into {}", archive.string(), dir.string()));
  return dir;
}

Status copy_store(const fs::path& store, const fs::path& peak_dir) {
  fs::path from = store_or_archive(store);
  std::error_code ec;
  if (is_store_archive(from) && fs::is_regular_file(from, ec)) {
    auto dir = unpack_store_archive(from);
    if (!dir) return dir.status();
    from = *dir;
  }
  if (!fs::is_directory(from, ec))
    return Status::error(
        fmt::format("no peak store at {} (nor an archive of one beside it)", store.string()));
  fs::create_directories(peak_dir, ec);
  for (const char* name : {"FORMAT", "blobs", "peak.db"}) {
    if (!fs::exists(from / name, ec)) continue;
    fs::copy(from / name, peak_dir / name,
             fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
    if (ec)
      return Status::error(fmt::format("cannot copy {} into {}: {}", (from / name).string(),
                                       peak_dir.string(), ec.message()));
  }
  if (!fs::exists(peak_dir / "peak.db", ec) && fs::exists(from / "peak.db.xz", ec)) {
    auto db = run_tool({"xz", "-dc", "--", (from / "peak.db.xz").string()},
                       "decompress " + (from / "peak.db.xz").string());
    if (!db) return db.status();
    if (Status st = write_file(peak_dir / "peak.db", *db); !st) return st;
  }
  if (!fs::exists(peak_dir / "peak.db", ec))
    return Status::error(fmt::format("{} holds no peak.db (nor peak.db.xz)", from.string()));
  return Status::ok();
}

}  // namespace peak
