// The store's connection and what holds it together: opening (FORMAT, read-only and
// immutable opens), the schema versions and their migrations, the integrity checks, and the
// blobs. Each table's rows are read and written in its own file (checkpoints.cpp, ...).
#include "store/store.h"

#include <sqlite3.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <limits>
#include <mutex>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "store/store_impl.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace peak {

namespace fs = std::filesystem;

namespace store_detail {

// Writes a blob file (content-addressed, atomic); returns its hash.
Result<std::string> write_blob(const fs::path& blob_dir, std::string_view data) {
  std::string hash = sha256_hex(data);
  fs::path path = blob_dir / hash.substr(0, 2) / hash.substr(2);
  std::error_code ec;
  // Present and the right size: keep it (content addressing makes rewriting pointless).
  // A file of the wrong size is damaged; writing it again repairs it.
  auto size = fs::file_size(path, ec);
  if (!ec && size == data.size()) return hash;
  if (auto s = write_file_atomic(path, data); !s)
    return make_error(fmt::format("cannot store blob {}: {}", hash, s.message()));
  return hash;
}

bool is_blob_hash(std::string_view h) {
  if (h.size() != 64) return false;
  for (char c : h)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// Branch and tag names: non-empty, printable, no whitespace, not "#<...>" (the detached-HEAD
// spelling).
Status check_name(std::string_view kind, const std::string& name) {
  if (name.empty()) return Status::error(fmt::format("a {} name cannot be empty", kind));
  if (name[0] == '#')
    return Status::error(
        fmt::format("{} name '{}' cannot start with '#' ('#<id>' names a checkpoint)", kind, name));
  for (unsigned char c : name)
    if (c <= ' ' || c == 0x7f)
      return Status::error(fmt::format(
          "{} name '{}' contains a space or control character; use letters, digits, '-', '_', "
          "'.' or '/'",
          kind, name));
  return Status::ok();
}

std::optional<int64_t> parse_detached(const std::string& head) {
  if (head.size() < 2 || head[0] != '#') return std::nullopt;
  int64_t v = 0;
  for (size_t i = 1; i < head.size(); ++i) {
    if (head[i] < '0' || head[i] > '9') return std::nullopt;
    if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) return std::nullopt;
    v = v * 10 + (head[i] - '0');
  }
  return v;
}

}  // namespace store_detail

using namespace store_detail;

namespace {

// The layout of the .peak folder (file names, blob addressing); written to .peak/FORMAT.
constexpr int kStoreLayoutVersion = 1;
constexpr const char* kFormatPrefix = "peak-store ";

// How long a writer waits for another process holding the database lock.
constexpr int kBusyTimeoutMs = 5000;

// The tables in the order the schema creates them; each version's changes are made from their
// column lists (table.h).
const std::vector<const TableSql*>& schema_tables() {
  static const std::vector<const TableSql*> tables = {
      &workflows_table().sql(),
      &checkpoints_table().sql(),
      &attempts_table().sql(),
      &attempt_checkpoints_table(),
      &builds_table().sql(),
      &validations_table().sql(),
      &measurements_table().sql(),
      &refs_table(),
      &tags_table(),
      &meta_table(),
      &evaluations_table().sql(),
      &stashes_table().sql(),
      &tuning_runs_table().sql(),
      &tuning_configs_table().sql(),
  };
  return tables;
}

std::string newer_message(std::string_view what, int found) {
  return fmt::format(
      "this workspace was written by a newer peak ({} {}; this peak reads up to {}); upgrade peak",
      what, found, what == "schema" ? kStoreSchemaVersion : kStoreLayoutVersion);
}

// How to look at a damaged store: the database's own check, and the FORMAT line peak writes.
std::string damaged_store_hint(const fs::path& peak_dir) {
  return fmt::format(
      "Check the database with: sqlite3 {} 'PRAGMA integrity_check' (and keep a copy of {} "
      "before changing anything); a sound database needs the line \"{}{}\" in {}",
      (peak_dir / "peak.db").string(), peak_dir.string(), kFormatPrefix, kStoreLayoutVersion,
      (peak_dir / "FORMAT").string());
}

// Reads .peak/FORMAT ("peak-store N") and refuses a layout this peak does not read.
Status check_layout(const fs::path& format_path) {
  auto text = read_file(format_path);
  if (!text) return Status::error(text.error(), ErrorKind::environment);
  std::string line = trim(*text);
  int version = 0;
  bool parsed =
      starts_with(line, kFormatPrefix) && line.size() > std::string_view(kFormatPrefix).size();
  if (parsed) {
    for (size_t i = std::string_view(kFormatPrefix).size(); i < line.size(); ++i) {
      if (line[i] < '0' || line[i] > '9' || version > 100000) {
        parsed = false;
        break;
      }
      version = version * 10 + (line[i] - '0');
    }
  }
  if (!parsed)
    return Status::error(
        fmt::format("{} does not name a peak store format (expected \"peak-store {}\", found "
                    "\"{}\"): the store is damaged or this folder was not written by peak. {}",
                    format_path.string(), kStoreLayoutVersion, line.substr(0, 60),
                    damaged_store_hint(format_path.parent_path())),
        ErrorKind::environment);
  if (version > kStoreLayoutVersion)
    return Status::error(newer_message("store layout", version), ErrorKind::environment);
  if (version < 1)
    return Status::error(
        fmt::format("{} names an unknown store layout {}. {}", format_path.string(), version,
                    damaged_store_hint(format_path.parent_path())),
        ErrorKind::environment);
  return Status::ok();
}

}  // namespace

std::string utc_now_iso8601() {
  using namespace std::chrono;
  auto now = system_clock::now();
  auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count();
  time_t secs = static_cast<time_t>(ms / 1000);
  int millis = static_cast<int>(ms % 1000);
  if (millis < 0) {
    millis += 1000;
    --secs;
  }
  struct tm t {};
  gmtime_r(&secs, &t);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", t.tm_year + 1900, t.tm_mon + 1,
                     t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, millis);
}

Store::Impl::~Impl() {
  for (auto& [sql, s] : cache) sqlite3_finalize(s);
  if (db) sqlite3_close_v2(db);
  std::error_code ec;
  if (!upgraded_copy.empty()) fs::remove_all(upgraded_copy, ec);
}

// An error for a failed SQLite call, worded for the user. Caller holds `mu`.
Error Store::Impl::fail(std::string_view what, int rc) const {
  const char* msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  std::string why;
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      why = fmt::format(
          "the database is locked by another peak process (waited {} s); try again when it "
          "finishes",
          kBusyTimeoutMs / 1000);
      break;
    case SQLITE_FULL:
      why = "the disk is full";
      break;
    case SQLITE_READONLY:
    case SQLITE_PERM:
      why = read_only ? fmt::format(
                            "the workspace is read-only (peak could not open {} for writing); "
                            "commands that change it need write access to that folder",
                            db_path.parent_path().string())
                      : fmt::format(
                            "the database is read-only ({}); check the permissions "
                            "of {}",
                            msg, db_path.parent_path().string());
      break;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      why = fmt::format(
          "the database file is damaged ({}); inspect it with: sqlite3 {} "
          "'PRAGMA integrity_check'",
          msg, db_path.string());
      break;
    case SQLITE_CONSTRAINT:
      if (rc == SQLITE_CONSTRAINT_FOREIGNKEY)
        why = "it refers to a workflow, attempt or checkpoint id that is not in the store";
      else
        why = msg;
      break;
    default:
      why = msg;
  }
  // A constraint names a mistake of the caller; everything else is the machine's.
  return make_error(fmt::format("{}: cannot {}: {}", db_path.string(), what, why),
                    (rc & 0xff) == SQLITE_CONSTRAINT ? ErrorKind::failed : ErrorKind::environment);
}

// Runs fixed SQL text (no values). Caller holds `mu`.
Status Store::Impl::exec(const char* sql, std::string_view what) {
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
  sqlite3_free(err);
  if (rc != SQLITE_OK) return fail(what, code(rc));
  return Status::ok();
}

// A cached prepared statement. Caller holds `mu`.
Result<sqlite3_stmt*> Store::Impl::prepare(const char* sql) {
  auto it = cache.find(sql);
  if (it != cache.end()) return it->second;
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr);
  if (rc != SQLITE_OK) return fail(fmt::format("prepare statement [{}]", sql), rc);
  cache.emplace(sql, s);
  return s;
}

// The extended result code of the last failure when it matches `rc`.
int Store::Impl::code(int rc) const {
  int e = sqlite3_extended_errcode(db);
  return (e & 0xff) == (rc & 0xff) ? e : rc;
}

Result<int> Store::Impl::user_version() {
  int v = 0;
  auto st = query(
      "PRAGMA user_version", "read the schema version", [](Stmt&) {},
      [&](Stmt& s) { v = static_cast<int>(s.col_int(0)); });
  if (!st) return st;
  return v;
}

Result<int64_t> Store::Impl::object_count() {
  int64_t n = 0;
  auto st = query(
      "SELECT count(*) FROM sqlite_master", "read the schema", [](Stmt&) {},
      [&](Stmt& s) { n = s.col_int(0); });
  if (!st) return st;
  return n;
}

// Creates what schema `version` added to the one before: its columns, tables and triggers.
// Caller holds `mu` inside a write transaction.
Status Store::Impl::apply_schema(int version, std::string_view what) {
  return exec(schema_changes(schema_tables(), version).c_str(), what);
}

// Schema 1 -> 2: workflow owners, infrastructure failures kept apart, every evaluation of a
// checkpoint kept (instead of the last one in meta "eval.<id>"), stashes. Caller holds `mu`
// inside a write transaction.
Status Store::Impl::migrate_1_to_2() {
  if (auto s = apply_schema(2, "upgrade the schema to version 2"); !s) return s;
  if (auto s = exec("UPDATE workflows SET status = 'passed' WHERE status = 'done'",
                    "upgrade the schema to version 2");
      !s)
    return s;
  // Each checkpoint's own evaluation (recorded with it) becomes its first evaluations row.
  struct Cp {
    int64_t id;
    std::string summary, created;
  };
  std::vector<Cp> cps;
  auto st = query(
      "SELECT id, summary_json, created_at FROM checkpoints ORDER BY id", "read checkpoints",
      [](Stmt&) {},
      [&](Stmt& s) {
        cps.push_back({s.col_int(0), s.col_text(1), s.col_text(2)});
      });
  if (!st) return st;
  std::vector<EvaluationRecord> rows;
  for (const auto& c : cps) {
    EvalSummary summary = parse_summary(c.summary);
    if (!summary.bench) continue;
    EvaluationRecord e;
    e.checkpoint_id = c.id;
    e.kind = "checkpoint";
    e.options_json = "{}";
    e.standard = true;
    peak::fill_from_summary(summary, e);
    auto blob = write_blob(blob_dir, c.summary);
    if (!blob) return blob.status();
    e.summary_blob = *blob;
    e.created_at = c.created;
    rows.push_back(e);
  }
  // Schema 1 kept only the last re-evaluation of a checkpoint, as setting eval.<id>.
  std::vector<std::pair<std::string, std::string>> evals;
  st = query(
      "SELECT key, value FROM meta WHERE key LIKE 'eval.%' ORDER BY key", "read settings",
      [](Stmt&) {}, [&](Stmt& s) { evals.emplace_back(s.col_text(0), s.col_text(1)); });
  if (!st) return st;
  for (const auto& [key, hash] : evals) {
    auto id = parse_detached("#" + key.substr(5));
    if (!id || !is_blob_hash(hash)) continue;
    auto exists = checkpoint_exists(*id);
    if (!exists) return exists.status();
    if (!*exists) continue;
    auto text = read_file(blob_dir / hash.substr(0, 2) / hash.substr(2));
    if (!text) continue;  // a missing blob: nothing to import
    EvaluationRecord e;
    e.checkpoint_id = *id;
    e.kind = "imported";
    e.options_json = R"({"note":"evaluated before schema 2; options not recorded"})";
    e.standard = true;
    fill_from_summary(*text, e);
    e.summary_blob = hash;
    e.created_at = utc_now_iso8601();
    rows.push_back(e);
  }
  const auto& table = evaluations_table();
  for (const auto& e : rows) {
    auto n = change(table.insert_sql().c_str(), "import an evaluation",
                    [&](Stmt& s) { table.bind(s, e, e.created_at); });
    if (!n) return n.status();
  }
  return exec("DELETE FROM meta WHERE key LIKE 'eval.%'", "remove the old evaluation settings");
}

// Schema 2 -> 3: the tuning tables. Caller holds `mu` inside a write transaction.
Status Store::Impl::add_tuning_tables() { return apply_schema(3, "add the tuning tables"); }

// Brings a database at schema `from` (older than this peak's) up to kStoreSchemaVersion, one
// step at a time. Caller holds `mu` inside a write transaction.
Status Store::Impl::migrate(int from) {
  if (from == 0)
    return Status::error(fmt::format(
        "{} has tables but no peak schema version (user_version 0): it was not written by "
        "peak. Move it away and run `peak init` again",
        db_path.string()));
  if (from < 1 || from >= kStoreSchemaVersion)
    return Status::error(fmt::format(
        "{} uses store schema {}, which this peak cannot migrate to schema {}; use the peak "
        "version that wrote it",
        db_path.string(), from, kStoreSchemaVersion));
  // The migrations, in order: entry i takes schema i + 1 to schema i + 2. A new schema version
  // appends its step here and raises kStoreSchemaVersion to match.
  using Step = Status (Impl::*)();
  static constexpr std::array<Step, 2> kMigrations = {
      &Impl::migrate_1_to_2,     // 1 -> 2: workflow owners, evaluations, stashes
      &Impl::add_tuning_tables,  // 2 -> 3: tuning_runs, tuning_configs
  };
  static_assert(kMigrations.size() == kStoreSchemaVersion - 1,
                "one migration per schema version after 1");
  for (int v = from; v < kStoreSchemaVersion; ++v)
    if (auto s = (this->*kMigrations[static_cast<size_t>(v - 1)])(); !s) return s;
  return Status::ok();
}

// Refuses a database without tables or schema version (e.g. an emptied file): a store whose
// FORMAT and blobs are there lost its history, and creating a fresh schema would hide that.
Status Store::Impl::check_not_empty() {
  std::lock_guard lock(mu);
  auto v = user_version();
  if (!v) return v.status();
  auto n = object_count();
  if (!n) return n.status();
  if (*v != 0 || *n != 0) return Status::ok();
  return Status::error(
      fmt::format("{}: the database file is damaged (it holds no tables: it was emptied or "
                  "replaced); the checkpoints it recorded cannot be read. Inspect it with: "
                  "sqlite3 {} 'PRAGMA integrity_check', and restore {} from a copy",
                  db_path.string(), db_path.string(), db_path.parent_path().string()),
      ErrorKind::environment);
}

// Creates the schema in an empty database, or checks the version of an existing one and
// upgrades an older one (in one transaction: all or nothing).
Status Store::Impl::init_schema() {
  std::lock_guard lock(mu);
  auto v = user_version();
  if (!v) return v.status();
  if (*v > kStoreSchemaVersion) return Status::error(newer_message("schema", *v));
  if (*v == kStoreSchemaVersion) return Status::ok();
  if (read_only)
    return Status::error(
        fmt::format("{} uses store schema {}; this peak upgrades it to schema {} the first "
                    "time it opens it with write access. Open it once where it can be "
                    "written",
                    db_path.string(), *v, kStoreSchemaVersion),
        ErrorKind::environment);
  if (auto s = exec("BEGIN IMMEDIATE", "start creating the schema"); !s) return s;
  auto abort = [&](Status s) {
    exec("ROLLBACK", "roll back");
    return s;
  };
  // Another process may have created it while this one waited for the lock.
  v = user_version();
  if (!v) return abort(v.status());
  if (*v > kStoreSchemaVersion) return abort(Status::error(newer_message("schema", *v)));
  if (*v == kStoreSchemaVersion) return abort(Status::ok());
  auto n = object_count();
  if (!n) return abort(n.status());
  if (*n > 0 || *v != 0) {
    if (auto s = migrate(*v); !s) return abort(s);
  } else {
    // A new store is made as every store was: schema 1, then each upgrade in turn, so that
    // its schema text is the same as that of an upgraded one.
    if (auto s = apply_schema(1, "create the schema"); !s) return abort(s);
    if (auto s = migrate(1); !s) return abort(s);
  }
  // PRAGMA takes no parameters; the value is this program's constant.
  std::string set_version = fmt::format("PRAGMA user_version = {}", kStoreSchemaVersion);
  if (auto s = exec(set_version.c_str(), "set the schema version"); !s) return abort(s);
  return exec("COMMIT", "commit the schema");
}

Store::~Store() = default;

Result<std::unique_ptr<Store>> Store::open(const fs::path& peak_dir, bool create) {
  std::error_code ec;
  if (!fs::is_directory(peak_dir, ec)) {
    if (!create)
      return make_error(fmt::format(
          "no peak workspace at {} (the folder does not exist); run `peak init` to create one",
          peak_dir.string()));
    fs::create_directories(peak_dir, ec);
    if (ec)
      return make_error(fmt::format("cannot create the workspace folder {}: {}", peak_dir.string(),
                                    ec.message()));
  }

  // FORMAT: the folder layout version.
  fs::path format_path = peak_dir / "FORMAT";
  bool have_format = fs::exists(format_path, ec);
  if (have_format) {
    if (auto s = check_layout(format_path); !s) return s;
  } else if (!create) {
    return make_error(
        fmt::format("the peak store {} is damaged: {} is missing. {}", peak_dir.string(),
                    format_path.string(), damaged_store_hint(peak_dir)),
        ErrorKind::environment);
  }

  fs::path db_path = peak_dir / "peak.db";
  if (!create && !fs::exists(db_path, ec))
    return make_error(fmt::format("the peak store {} is damaged: it has no database ({} is "
                                  "missing) and cannot be read; restore {} from a copy",
                                  peak_dir.string(), db_path.string(), peak_dir.string()),
                      ErrorKind::environment);

  std::unique_ptr<Store> store(new Store());
  store->dir_ = peak_dir;
  store->impl_ = std::make_unique<Impl>(db_path, peak_dir / "blobs");
  Impl& im = *store->impl_;

  // Without write access to the folder or the database the store is opened read-only. A
  // read-only WAL database needs its -wal and -shm files; when they are absent (the last
  // writer closed it cleanly) nobody has uncommitted pages, and the file is read as immutable.
  bool writable =
      create || (::access(peak_dir.c_str(), W_OK) == 0 && ::access(db_path.c_str(), W_OK) == 0);
  im.read_only = !writable;
  int rc;
  if (writable) {
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
    rc = sqlite3_open_v2(db_path.c_str(), &im.db, flags, nullptr);
  } else {
    fs::path wal = db_path, shm = db_path;
    wal += "-wal";
    shm += "-shm";
    bool side_files = fs::exists(wal, ec) && fs::exists(shm, ec);
    std::string uri = "file:" + db_path.string() + (side_files ? "?mode=ro" : "?immutable=1");
    rc = sqlite3_open_v2(uri.c_str(), &im.db,
                         SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI, nullptr);
  }
  if (rc != SQLITE_OK) {
    std::string why = im.db ? sqlite3_errmsg(im.db) : sqlite3_errstr(rc);
    return make_error(fmt::format("cannot open {}: {}", db_path.string(), why),
                      ErrorKind::environment);
  }
  sqlite3_extended_result_codes(im.db, 1);
  sqlite3_busy_timeout(im.db, kBusyTimeoutMs);
  // Only `peak init` creates the schema: an existing store whose database has no tables lost
  // them, and is left as it is (a reader writes nothing into it).
  if (!create)
    if (auto s = im.check_not_empty(); !s) return s;
  if (writable) {
    std::lock_guard lock(im.mu);
    if (auto s = im.exec("PRAGMA foreign_keys=ON", "enable foreign keys"); !s) return s;
    std::string mode;
    auto st = im.query(
        "PRAGMA journal_mode=WAL", "enable the write-ahead log", [](Stmt&) {},
        [&](Stmt& s) { mode = s.col_text(0); });
    if (!st) return st;
    if (mode != "wal")
      return make_error(fmt::format("{}: cannot use the write-ahead log (journal mode stays "
                                    "\"{}\"); keep the workspace on "
                                    "a local file system",
                                    db_path.string(), mode),
                        ErrorKind::environment);
    if (auto s = im.exec("PRAGMA synchronous=NORMAL", "set the sync mode"); !s) return s;
    // Migrations may write blobs.
    fs::create_directories(im.blob_dir, ec);
    if (ec)
      return make_error(
          fmt::format("cannot create the blob folder {}: {}", im.blob_dir.string(), ec.message()),
          ErrorKind::environment);
  }
  if (auto s = im.init_schema(); !s) return s;

  if (!have_format) {
    if (auto s = write_file_atomic(format_path,
                                   fmt::format("{}{}\n", kFormatPrefix, kStoreLayoutVersion));
        !s)
      return s;
  }
  return store;
}

bool Store::read_only() const { return impl_->read_only; }

Result<std::unique_ptr<Store>> Store::open_read_only(const fs::path& path) {
  std::error_code ec;
  fs::path db_path, peak_dir;
  bool lone_file = false;
  if (fs::is_directory(path, ec)) {
    peak_dir = path;
    db_path = path / "peak.db";
    if (!fs::exists(db_path, ec))
      return make_error(
          fmt::format("{} holds no peak store ({} is missing)", path.string(), db_path.string()));
    if (fs::exists(path / "FORMAT", ec)) {
      if (auto s = check_layout(path / "FORMAT"); !s) return s;
    }
  } else if (fs::is_regular_file(path, ec)) {
    db_path = path;
    peak_dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
    lone_file = peak_dir.filename() != ".peak";
  } else {
    return make_error(fmt::format("no peak store at {} (no such file or folder)", path.string()));
  }
  std::unique_ptr<Store> store(new Store());
  store->dir_ = peak_dir;
  store->impl_ = std::make_unique<Impl>(db_path, peak_dir / "blobs");
  Impl& im = *store->impl_;
  im.read_only = true;
  // A lone database file that no peak has open (no -wal beside it) is read as immutable, so that
  // reading it leaves no -wal/-shm files behind (e.g. in a committed results folder).
  fs::path wal = db_path;
  wal += "-wal";
  // So is a database in a folder this process cannot write (SQLite could not create its -shm).
  bool immutable = !fs::exists(wal, ec) && (lone_file || ::access(peak_dir.c_str(), W_OK) != 0);
  std::string uri = "file:";
  for (char c : fs::absolute(db_path, ec).string()) {
    if (c == '%' || c == '?' || c == '#')
      uri += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    else
      uri += c;
  }
  uri += immutable ? "?mode=ro&immutable=1" : "?mode=ro";
  int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX;
  int rc = sqlite3_open_v2(uri.c_str(), &im.db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string why = im.db ? sqlite3_errmsg(im.db) : sqlite3_errstr(rc);
    return make_error(fmt::format("cannot open {}: {}", db_path.string(), why));
  }
  sqlite3_extended_result_codes(im.db, 1);
  sqlite3_busy_timeout(im.db, kBusyTimeoutMs);
  std::lock_guard lock(im.mu);
  auto v = im.user_version();
  if (!v) return v.status();
  if (*v > kStoreSchemaVersion) return make_error(newer_message("schema", *v));
  if (*v < kStoreSchemaVersion) {
    auto n = im.object_count();
    if (!n) return n.status();
    if (*v == 0 && *n > 0)
      return make_error(
          fmt::format("{} is not a peak store: it has tables but no peak schema "
                      "version (user_version 0)",
                      db_path.string()));
    if (*v == 0)
      return make_error(
          fmt::format("{}: the database file is damaged (it holds no tables: it was emptied or "
                      "replaced). Inspect it with: sqlite3 {} 'PRAGMA integrity_check'",
                      db_path.string(), db_path.string()),
          ErrorKind::environment);
    // An older schema is read from a copy that this peak upgrades: the store itself (a
    // committed results folder, another user's workspace) is left as it is.
    auto tmp = make_temp_dir("peak-store-upgrade-");
    if (!tmp) return make_error(tmp.error());
    std::error_code copy_ec, dir_ec;
    fs::copy_file(db_path, *tmp / "peak.db", copy_ec);
    if (!copy_ec) {
      if (auto w = write_file_atomic(*tmp / "FORMAT",
                                     fmt::format("{}{}\n", kFormatPrefix, kStoreLayoutVersion));
          !w)
        copy_ec = std::make_error_code(std::errc::io_error);
    }
    if (!copy_ec && !lone_file && fs::is_directory(peak_dir / "blobs", dir_ec))
      fs::copy(peak_dir / "blobs", *tmp / "blobs", fs::copy_options::recursive, copy_ec);
    if (copy_ec) {
      fs::remove_all(*tmp, ec);
      return make_error(
          fmt::format("{} uses store schema {}; reading it needs an upgraded copy, "
                      "which could not be made: {}",
                      db_path.string(), *v, copy_ec.message()));
    }
    auto copy = Store::open(*tmp, false);
    if (!copy) {
      fs::remove_all(*tmp, ec);
      return make_error(
          fmt::format("{} uses store schema {}; upgrading a copy to schema {} "
                      "failed: {}",
                      db_path.string(), *v, kStoreSchemaVersion, copy.error()));
    }
    (*copy)->impl_->read_only = true;
    (*copy)->impl_->upgraded_copy = *tmp;
    (*copy)->dir_ = peak_dir;
    return std::move(*copy);
  }
  return store;
}

bool Store::has_blobs() const {
  std::error_code ec;
  return fs::is_directory(impl_->blob_dir, ec);
}

// ---- blobs ----

Result<std::string> Store::put_blob(std::string_view data) {
  if (impl_->read_only)
    return make_error(fmt::format("cannot store a blob: the workspace is read-only ({} cannot be "
                                  "written)",
                                  impl_->blob_dir.string()),
                      ErrorKind::environment);
  std::lock_guard lock(impl_->blob_mu);
  return write_blob(impl_->blob_dir, data);
}

Result<std::string> Store::get_blob(const std::string& hash) const {
  if (!is_blob_hash(hash))
    return make_error(fmt::format("'{}' is not a blob hash (expected 64 lowercase hex digits)",
                                  hash.substr(0, 80)));
  fs::path path = impl_->blob_dir / hash.substr(0, 2) / hash.substr(2);
  std::error_code ec;
  if (!fs::exists(path, ec))
    return make_error(fmt::format(
        "blob {} is missing from the store (expected at {}); was .peak/blobs edited or only "
        "partly copied?",
        hash, path.string()));
  auto data = read_file(path);
  if (!data) return make_error(fmt::format("cannot read blob {}: {}", hash, data.error()));
  std::string actual = sha256_hex(*data);
  if (actual != hash)
    return make_error(fmt::format(
        "blob {} is corrupt: the file {} now hashes to {}. It was changed or damaged on disk; "
        "restore it from a backup of the workspace",
        hash, path.string(), actual));
  return data;
}

}  // namespace peak
