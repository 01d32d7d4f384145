#include "store/store.h"

#include <sqlite3.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/fs.h"
#include "util/sha256.h"

namespace peak {
namespace {

namespace fs = std::filesystem;

// The layout of the .peak folder (file names, blob addressing); written to .peak/FORMAT.
constexpr int kStoreLayoutVersion = 1;
constexpr const char* kFormatPrefix = "peak-store ";

// How long a writer waits for another process holding the database lock.
constexpr int kBusyTimeoutMs = 5000;

// Version 1 of the schema. Append-only tables refuse UPDATE and DELETE through triggers;
// the only rows that change are refs, meta, and a workflow's status/state.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE workflows(
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL,
  args_json TEXT NOT NULL,
  status TEXT NOT NULL,
  started_at TEXT NOT NULL,
  finished_at TEXT NOT NULL,
  state_json TEXT NOT NULL
);
CREATE TABLE checkpoints(
  id INTEGER PRIMARY KEY,
  parent INTEGER REFERENCES checkpoints(id),
  branch TEXT NOT NULL,
  transformation TEXT NOT NULL,
  message TEXT NOT NULL,
  context_blob TEXT NOT NULL,
  source_blob TEXT NOT NULL,
  summary_json TEXT NOT NULL,
  top_configs_json TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX checkpoints_parent ON checkpoints(parent);
CREATE TABLE attempts(
  id INTEGER PRIMARY KEY,
  workflow_id INTEGER REFERENCES workflows(id),
  parent_checkpoint INTEGER REFERENCES checkpoints(id),
  transformation TEXT NOT NULL,
  pass_index INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  region TEXT NOT NULL,
  driver TEXT NOT NULL,
  model TEXT NOT NULL,
  producer TEXT NOT NULL,
  prompt_key TEXT NOT NULL,
  prompt_blob TEXT NOT NULL,
  reply_blob TEXT NOT NULL,
  prompt_tokens INTEGER NOT NULL,
  completion_tokens INTEGER NOT NULL,
  latency_s REAL,
  disposition TEXT NOT NULL,
  error TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX attempts_workflow ON attempts(workflow_id);
CREATE TABLE attempt_checkpoints(
  attempt_id INTEGER NOT NULL REFERENCES attempts(id),
  checkpoint_id INTEGER NOT NULL REFERENCES checkpoints(id),
  created_at TEXT NOT NULL,
  PRIMARY KEY(attempt_id, checkpoint_id)
);
CREATE INDEX attempt_checkpoints_checkpoint ON attempt_checkpoints(checkpoint_id);
CREATE TABLE builds(
  id INTEGER PRIMARY KEY,
  attempt_id INTEGER REFERENCES attempts(id),
  source_hash TEXT NOT NULL,
  config_json TEXT NOT NULL,
  command TEXT NOT NULL,
  exit_code INTEGER NOT NULL,
  log_blob TEXT NOT NULL,
  seconds REAL,
  disposition TEXT NOT NULL,
  resources_json TEXT NOT NULL,
  toolchain TEXT NOT NULL,
  cached INTEGER NOT NULL CHECK(cached IN (0, 1)),
  created_at TEXT NOT NULL
);
CREATE INDEX builds_attempt ON builds(attempt_id);
CREATE INDEX builds_source ON builds(source_hash);
CREATE TABLE validations(
  id INTEGER PRIMARY KEY,
  attempt_id INTEGER REFERENCES attempts(id),
  checkpoint_id INTEGER REFERENCES checkpoints(id),
  config_json TEXT NOT NULL,
  shape TEXT NOT NULL,
  hidden INTEGER NOT NULL CHECK(hidden IN (0, 1)),
  seed INTEGER NOT NULL,
  max_abs_err REAL,
  max_rel_err REAL,
  disposition TEXT NOT NULL,
  message TEXT NOT NULL,
  seconds REAL,
  created_at TEXT NOT NULL
);
CREATE INDEX validations_attempt ON validations(attempt_id);
CREATE INDEX validations_checkpoint ON validations(checkpoint_id);
CREATE TABLE measurements(
  id INTEGER PRIMARY KEY,
  attempt_id INTEGER REFERENCES attempts(id),
  checkpoint_id INTEGER REFERENCES checkpoints(id),
  config_json TEXT NOT NULL,
  shape TEXT NOT NULL,
  what TEXT NOT NULL,
  samples_json TEXT NOT NULL,
  median_ms REAL,
  spread REAL,
  gflops REAL,
  disposition TEXT NOT NULL,
  device_json TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX measurements_attempt ON measurements(attempt_id);
CREATE INDEX measurements_checkpoint ON measurements(checkpoint_id);
CREATE TABLE refs(
  name TEXT PRIMARY KEY,
  checkpoint_id INTEGER NOT NULL REFERENCES checkpoints(id),
  updated_at TEXT NOT NULL
);
CREATE TABLE tags(
  name TEXT PRIMARY KEY,
  checkpoint_id INTEGER NOT NULL REFERENCES checkpoints(id),
  created_at TEXT NOT NULL
);
CREATE TABLE meta(
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TRIGGER workflows_no_delete BEFORE DELETE ON workflows
  BEGIN SELECT RAISE(ABORT, 'peak store: workflows are append-only'); END;
CREATE TRIGGER workflows_fixed_columns BEFORE UPDATE OF id, kind, args_json, started_at ON workflows
  BEGIN SELECT RAISE(ABORT, 'peak store: only the status and state of a workflow change'); END;
)sql";

// Schema 2 (from schema 1): workflow owners, infrastructure failures kept apart, every
// evaluation of a checkpoint kept (instead of the last one in meta "eval.<id>"), stashes.
constexpr const char* kSchemaV2Changes = R"sql(
ALTER TABLE workflows ADD COLUMN owner_pid INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workflows ADD COLUMN owner_host TEXT NOT NULL DEFAULT '';
ALTER TABLE workflows ADD COLUMN owner_start TEXT NOT NULL DEFAULT '';
UPDATE workflows SET status = 'passed' WHERE status = 'done';
ALTER TABLE attempts ADD COLUMN infrastructure INTEGER NOT NULL DEFAULT 0
  CHECK(infrastructure IN (0, 1));
CREATE TABLE evaluations(
  id INTEGER PRIMARY KEY,
  checkpoint_id INTEGER NOT NULL REFERENCES checkpoints(id),
  workflow_id INTEGER REFERENCES workflows(id),
  kind TEXT NOT NULL,
  options_json TEXT NOT NULL,
  standard INTEGER NOT NULL CHECK(standard IN (0, 1)),
  disposition TEXT NOT NULL,
  shape TEXT NOT NULL,
  gflops REAL,
  device TEXT NOT NULL,
  summary_blob TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX evaluations_checkpoint ON evaluations(checkpoint_id);
CREATE TABLE stashes(
  id INTEGER PRIMARY KEY,
  base_checkpoint INTEGER REFERENCES checkpoints(id),
  branch TEXT NOT NULL,
  message TEXT NOT NULL,
  files_json TEXT NOT NULL,
  state TEXT NOT NULL CHECK(state IN ('kept', 'popped', 'dropped')),
  created_at TEXT NOT NULL,
  finished_at TEXT NOT NULL
);
CREATE TRIGGER stashes_no_delete BEFORE DELETE ON stashes
  BEGIN SELECT RAISE(ABORT, 'peak store: stashes are kept; pop or drop them'); END;
CREATE TRIGGER stashes_fixed_columns
  BEFORE UPDATE OF id, base_checkpoint, branch, message, files_json, created_at ON stashes
  BEGIN SELECT RAISE(ABORT, 'peak store: only the state of a stash changes'); END;
)sql";

// Tables whose rows never change once written (schema 1, then schema 2; schema 3 below).
constexpr const char* kAppendOnlyTables[] = {"checkpoints", "attempts",    "attempt_checkpoints",
                                             "builds",      "validations", "measurements",
                                             "tags"};
constexpr const char* kAppendOnlyTablesV2[] = {"evaluations"};

std::string append_only_triggers(const char* t) {
  return fmt::format(
      "CREATE TRIGGER {0}_no_update BEFORE UPDATE ON {0} BEGIN SELECT RAISE(ABORT, 'peak "
      "store: {0} are append-only'); END; "
      "CREATE TRIGGER {0}_no_delete BEFORE DELETE ON {0} BEGIN SELECT RAISE(ABORT, 'peak "
      "store: {0} are append-only'); END;",
      t);
}

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

// The columns of an evaluations row that come from its summary JSON.
void fill_from_summary(const std::string& summary_json, EvaluationRecord& e) {
  auto j = nlohmann::json::parse(summary_json, nullptr, false);
  if (!j.is_object()) j = nlohmann::json::object();
  bool timed = j.contains("bench") && j["bench"].is_array() && !j["bench"].empty();
  e.disposition = j.value("disposition", timed ? "passed" : "not_run");
  if (timed && j["bench"][0].is_object()) {
    e.shape = j["bench"][0].value("shape", "");
    e.gflops = j["bench"][0].value("gflops", std::numeric_limits<double>::quiet_NaN());
  } else {
    e.gflops = std::numeric_limits<double>::quiet_NaN();
  }
  if (j.contains("device") && j["device"].is_object()) e.device = j["device"].value("name", "");
}

// Schema 3 (from schema 2) adds the tuning tables: one row per tuning search and one per
// configuration it considered (pruned ones included, with why). Append-only.
constexpr const char* kSchemaV3Tuning = R"sql(
CREATE TABLE tuning_runs(
  id INTEGER PRIMARY KEY,
  attempt_id INTEGER REFERENCES attempts(id),
  checkpoint_id INTEGER REFERENCES checkpoints(id),
  source_hash TEXT NOT NULL,
  strategy TEXT NOT NULL,
  options_json TEXT NOT NULL,
  space_json TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX tuning_runs_checkpoint ON tuning_runs(checkpoint_id);
CREATE TABLE tuning_configs(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES tuning_runs(id),
  position INTEGER NOT NULL,
  config_json TEXT NOT NULL,
  stage TEXT NOT NULL,
  disposition TEXT NOT NULL,
  reason TEXT NOT NULL,
  score_ms REAL,
  compile_s REAL,
  validate_s REAL,
  time_s REAL,
  resources_json TEXT NOT NULL,
  launch_json TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX tuning_configs_run ON tuning_configs(run_id);
)sql";
constexpr const char* kAppendOnlyTablesV3[] = {"tuning_runs", "tuning_configs"};

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

// Workflow statuses: "running", "waiting" (for an outside reply, e.g. the manual driver),
// "passed", "failed", "interrupted"; any other lowercase word is accepted for later kinds.
bool valid_workflow_status(std::string_view s) {
  if (s.empty() || s.size() > 32) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || c == '_' || c == '-')) return false;
  return true;
}

// The statuses that end a process's work on a workflow (finished_at is set).
bool finished_status(std::string_view s) {
  return s == "passed" || s == "done" || s == "failed" || s == "interrupted";
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

// A prepared statement borrowed from the connection's cache; reset on scope exit. Parameters
// are bound in order.
class Stmt {
 public:
  explicit Stmt(sqlite3_stmt* s) : s_(s) {}
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }

  Stmt& text(std::string_view v) {
    return note(sqlite3_bind_text(s_, ++index_, v.empty() ? "" : v.data(),
                                  static_cast<int>(v.size()), SQLITE_TRANSIENT));
  }
  Stmt& integer(int64_t v) { return note(sqlite3_bind_int64(s_, ++index_, v)); }
  Stmt& boolean(bool v) { return integer(v ? 1 : 0); }
  // SQLite stores NaN as NULL; REAL columns are nullable and NULL reads back as NaN.
  Stmt& real(double v) {
    if (std::isnan(v)) return note(sqlite3_bind_null(s_, ++index_));
    return note(sqlite3_bind_double(s_, ++index_, v));
  }
  Stmt& opt_id(std::optional<int64_t> v) {
    if (!v) return note(sqlite3_bind_null(s_, ++index_));
    return integer(*v);
  }

  int step() { return bind_rc_ != SQLITE_OK ? bind_rc_ : sqlite3_step(s_); }

  std::string col_text(int c) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, c));
    int n = sqlite3_column_bytes(s_, c);
    return p ? std::string(p, static_cast<size_t>(n)) : std::string();
  }
  int64_t col_int(int c) const { return sqlite3_column_int64(s_, c); }
  std::optional<int64_t> col_opt_id(int c) const {
    if (sqlite3_column_type(s_, c) == SQLITE_NULL) return std::nullopt;
    return sqlite3_column_int64(s_, c);
  }
  double col_real(int c) const {
    if (sqlite3_column_type(s_, c) == SQLITE_NULL) return std::numeric_limits<double>::quiet_NaN();
    return sqlite3_column_double(s_, c);
  }

 private:
  Stmt& note(int rc) {
    if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
    return *this;
  }
  sqlite3_stmt* s_;
  int index_ = 0;
  int bind_rc_ = SQLITE_OK;
};

// Makes the commits inside its scope durable against power loss (synchronous=FULL), then
// returns to synchronous=NORMAL. Used for the rare writes a user sees named: checkpoints,
// refs, tags, HEAD and workflow status.
class DurableScope {
 public:
  explicit DurableScope(sqlite3* db) : db_(db) {
    sqlite3_exec(db_, "PRAGMA synchronous=FULL", nullptr, nullptr, nullptr);
  }
  ~DurableScope() { sqlite3_exec(db_, "PRAGMA synchronous=NORMAL", nullptr, nullptr, nullptr); }
  DurableScope(const DurableScope&) = delete;
  DurableScope& operator=(const DurableScope&) = delete;

 private:
  sqlite3* db_;
};

constexpr const char* kEvaluationInsert =
    "INSERT INTO evaluations(checkpoint_id, workflow_id, kind, options_json, standard, "
    "disposition, shape, gflops, device, summary_blob, created_at) VALUES(?,?,?,?,?,?,?,?,?,?,?)";

void bind_evaluation(Stmt& s, const EvaluationRecord& e, const std::string& created_at) {
  s.integer(e.checkpoint_id)
      .opt_id(e.workflow_id)
      .text(e.kind)
      .text(e.options_json)
      .boolean(e.standard)
      .text(e.disposition)
      .text(e.shape)
      .real(e.gflops)
      .text(e.device)
      .text(e.summary_blob)
      .text(created_at);
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

struct Store::Impl {
  sqlite3* db = nullptr;
  fs::path db_path;
  fs::path blob_dir;
  std::mutex mu;           // serializes every use of `db` (one connection shared by all threads)
  std::mutex blob_mu;      // serializes blob writes (their temporary names are per process)
  bool read_only = false;  // opened without write access
  std::unordered_map<std::string, sqlite3_stmt*> cache;
  fs::path upgraded_copy;  // a read-only store of an older schema is read from an upgraded copy

  ~Impl() {
    for (auto& [sql, s] : cache) sqlite3_finalize(s);
    if (db) sqlite3_close_v2(db);
    std::error_code ec;
    if (!upgraded_copy.empty()) fs::remove_all(upgraded_copy, ec);
  }

  // An error for a failed SQLite call, worded for the user. Caller holds `mu`.
  Error fail(std::string_view what, int rc) const {
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
    return make_error(
        fmt::format("{}: cannot {}: {}", db_path.string(), what, why),
        (rc & 0xff) == SQLITE_CONSTRAINT ? ErrorKind::failed : ErrorKind::environment);
  }

  // Runs fixed SQL text (no values). Caller holds `mu`.
  Status exec(const char* sql, std::string_view what) {
    char* err = nullptr;
    int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
    sqlite3_free(err);
    if (rc != SQLITE_OK) return fail(what, code(rc));
    return Status::ok();
  }

  // A cached prepared statement. Caller holds `mu`.
  Result<sqlite3_stmt*> prepare(const char* sql) {
    auto it = cache.find(sql);
    if (it != cache.end()) return it->second;
    sqlite3_stmt* s = nullptr;
    int rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr);
    if (rc != SQLITE_OK) return fail(fmt::format("prepare statement [{}]", sql), rc);
    cache.emplace(sql, s);
    return s;
  }

  // One INSERT in its own (autocommit) transaction; returns the new row id.
  // `durable`: commit with synchronous=FULL (see DurableScope).
  template <typename Bind>
  Result<int64_t> insert(const char* sql, std::string_view what, Bind&& bind,
                         bool durable = false) {
    std::lock_guard lock(mu);
    std::optional<DurableScope> scope;
    if (durable) scope.emplace(db);
    auto s = prepare(sql);
    if (!s) return s.status();
    Stmt st(*s);
    bind(st);
    int rc = st.step();
    if (rc != SQLITE_DONE) return fail(what, code(rc));
    return static_cast<int64_t>(sqlite3_last_insert_rowid(db));
  }

  // The extended result code of the last failure when it matches `rc`.
  int code(int rc) const {
    int e = sqlite3_extended_errcode(db);
    return (e & 0xff) == (rc & 0xff) ? e : rc;
  }

  // A statement that returns no rows (UPDATE, DELETE, upsert); returns the changed row count.
  template <typename Bind>
  Result<int> change(const char* sql, std::string_view what, Bind&& bind) {
    auto s = prepare(sql);
    if (!s) return s.status();
    Stmt st(*s);
    bind(st);
    int rc = st.step();
    if (rc != SQLITE_DONE) return fail(what, code(rc));
    return sqlite3_changes(db);
  }

  // Runs a query and calls `row(stmt)` for every row. Caller holds `mu`.
  template <typename Bind, typename Row>
  Status query(const char* sql, std::string_view what, Bind&& bind, Row&& row) {
    auto s = prepare(sql);
    if (!s) return s.status();
    Stmt st(*s);
    bind(st);
    int rc;
    while ((rc = st.step()) == SQLITE_ROW) row(st);
    if (rc != SQLITE_DONE) return fail(what, code(rc));
    return Status::ok();
  }

  // The rows of `select` in id order, all of them or those whose `column` is `id`.
  template <typename Record>
  Result<std::vector<Record>> list(std::string_view select, std::string_view column,
                                   std::optional<int64_t> id, std::string_view what,
                                   Record (*read)(const Stmt&)) {
    const std::string sql = id ? fmt::format("{} WHERE {} = ? ORDER BY id", select, column)
                               : fmt::format("{} ORDER BY id", select);
    std::vector<Record> out;
    auto st = query(
        sql.c_str(), what,
        [&](Stmt& s) {
          if (id) s.integer(*id);
        },
        [&](Stmt& s) { out.push_back(read(s)); });
    if (!st) return st;
    return out;
  }

  Result<bool> checkpoint_exists(int64_t id) {
    bool found = false;
    auto st = query(
        "SELECT 1 FROM checkpoints WHERE id = ?", "look up a checkpoint",
        [&](Stmt& s) { s.integer(id); }, [&](Stmt&) { found = true; });
    if (!st) return st;
    return found;
  }

  Result<std::optional<std::string>> meta(const std::string& key) {
    std::optional<std::string> v;
    auto st = query(
        "SELECT value FROM meta WHERE key = ?", "read a setting", [&](Stmt& s) { s.text(key); },
        [&](Stmt& s) { v = s.col_text(0); });
    if (!st) return st;
    return v;
  }

  Result<std::optional<int64_t>> ref(const std::string& name) {
    std::optional<int64_t> v;
    auto st = query(
        "SELECT checkpoint_id FROM refs WHERE name = ?", "read a branch",
        [&](Stmt& s) { s.text(name); }, [&](Stmt& s) { v = s.col_int(0); });
    if (!st) return st;
    return v;
  }

  Result<int> user_version() {
    int v = 0;
    auto st = query(
        "PRAGMA user_version", "read the schema version", [](Stmt&) {},
        [&](Stmt& s) { v = static_cast<int>(s.col_int(0)); });
    if (!st) return st;
    return v;
  }

  Result<int64_t> object_count() {
    int64_t n = 0;
    auto st = query(
        "SELECT count(*) FROM sqlite_master", "read the schema", [](Stmt&) {},
        [&](Stmt& s) { n = s.col_int(0); });
    if (!st) return st;
    return n;
  }

  // Schema 1 -> 2. Caller holds `mu` inside a write transaction.
  Status migrate_1_to_2() {
    if (auto s = exec(kSchemaV2Changes, "upgrade the schema to version 2"); !s) return s;
    for (const char* t : kAppendOnlyTablesV2) {
      std::string sql = append_only_triggers(t);
      if (auto s = exec(sql.c_str(), "upgrade the schema to version 2"); !s) return s;
    }
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
      auto j = nlohmann::json::parse(c.summary.empty() ? "{}" : c.summary, nullptr, false);
      if (!j.is_object() || !j.contains("bench")) continue;
      EvaluationRecord e;
      e.checkpoint_id = c.id;
      e.kind = "checkpoint";
      e.options_json = "{}";
      e.standard = true;
      fill_from_summary(c.summary, e);
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
    for (const auto& e : rows) {
      auto n = change(kEvaluationInsert, "import an evaluation",
                      [&](Stmt& s) { bind_evaluation(s, e, e.created_at); });
      if (!n) return n.status();
    }
    return exec("DELETE FROM meta WHERE key LIKE 'eval.%'", "remove the old evaluation settings");
  }

  // Schema 2 -> 3: the tuning tables. Caller holds `mu` inside a write transaction.
  Status add_tuning_tables() {
    if (auto s = exec(kSchemaV3Tuning, "add the tuning tables"); !s) return s;
    for (const char* t : kAppendOnlyTablesV3) {
      std::string sql = append_only_triggers(t);
      if (auto s = exec(sql.c_str(), "add the tuning tables"); !s) return s;
    }
    return Status::ok();
  }

  // Brings a database at schema `from` (older than this peak's) up to kStoreSchemaVersion, one
  // step at a time. Caller holds `mu` inside a write transaction.
  Status migrate(int from) {
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
  Status check_not_empty() {
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
  Status init_schema() {
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
      if (auto s = exec(kSchemaV1, "create the schema"); !s) return abort(s);
      for (const char* t : kAppendOnlyTables)
        if (auto s = exec(append_only_triggers(t).c_str(), "create the schema"); !s)
          return abort(s);
      if (auto s = migrate(1); !s) return abort(s);
    }
    // PRAGMA takes no parameters; the value is this program's constant.
    std::string set_version = fmt::format("PRAGMA user_version = {}", kStoreSchemaVersion);
    if (auto s = exec(set_version.c_str(), "set the schema version"); !s) return abort(s);
    return exec("COMMIT", "commit the schema");
  }
};

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
  store->impl_ = std::make_unique<Impl>();
  Impl& im = *store->impl_;
  im.db_path = db_path;
  im.blob_dir = peak_dir / "blobs";

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
  store->impl_ = std::make_unique<Impl>();
  Impl& im = *store->impl_;
  im.db_path = db_path;
  im.blob_dir = peak_dir / "blobs";
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

// ---- checkpoints, refs, tags, HEAD ----

namespace {
constexpr const char* kCheckpointCols =
    "id, parent, branch, transformation, message, context_blob, source_blob, summary_json, "
    "top_configs_json, created_at";

CheckpointRecord read_checkpoint(const Stmt& s) {
  CheckpointRecord c;
  c.id = s.col_int(0);
  c.parent = s.col_opt_id(1);
  c.branch = s.col_text(2);
  c.transformation = s.col_text(3);
  c.message = s.col_text(4);
  c.context_blob = s.col_text(5);
  c.source_blob = s.col_text(6);
  c.summary_json = s.col_text(7);
  c.top_configs_json = s.col_text(8);
  c.created_at = s.col_text(9);
  return c;
}
}  // namespace

Result<int64_t> Store::add_checkpoint(const CheckpointRecord& c) {
  // An empty branch means the checkpoint was made on a detached HEAD.
  if (!c.branch.empty()) {
    if (auto s = check_name("branch", c.branch); !s)
      return make_error("cannot record checkpoint: " + s.message());
  }
  return impl_->insert(
      "INSERT INTO checkpoints(parent, branch, transformation, message, context_blob, "
      "source_blob, summary_json, top_configs_json, created_at) VALUES(?,?,?,?,?,?,?,?,?)",
      "record checkpoint",
      [&](Stmt& s) {
        s.opt_id(c.parent)
            .text(c.branch)
            .text(c.transformation)
            .text(c.message)
            .text(c.context_blob)
            .text(c.source_blob)
            .text(c.summary_json)
            .text(c.top_configs_json)
            .text(utc_now_iso8601());
      },
      /*durable=*/true);
}

Result<CheckpointRecord> Store::checkpoint(int64_t id) const {
  std::lock_guard lock(impl_->mu);
  std::optional<CheckpointRecord> out;
  static const std::string sql =
      fmt::format("SELECT {} FROM checkpoints WHERE id = ?", kCheckpointCols);
  auto st = impl_->query(
      sql.c_str(), "read checkpoint", [&](Stmt& s) { s.integer(id); },
      [&](Stmt& s) { out = read_checkpoint(s); });
  if (!st) return st;
  if (!out) return make_error(fmt::format("there is no checkpoint {} (see `peak log`)", id));
  return std::move(*out);
}

Result<std::vector<CheckpointRecord>> Store::checkpoints() const {
  std::lock_guard lock(impl_->mu);
  std::vector<CheckpointRecord> out;
  static const std::string sql =
      fmt::format("SELECT {} FROM checkpoints ORDER BY id", kCheckpointCols);
  auto st = impl_->query(
      sql.c_str(), "list checkpoints", [](Stmt&) {},
      [&](Stmt& s) { out.push_back(read_checkpoint(s)); });
  if (!st) return st;
  return out;
}

Status Store::set_ref(const std::string& branch, int64_t checkpoint_id) {
  if (auto s = check_name("branch", branch); !s) return s;
  std::lock_guard lock(impl_->mu);
  auto exists = impl_->checkpoint_exists(checkpoint_id);
  if (!exists) return exists.status();
  if (!*exists)
    return Status::error(
        fmt::format("cannot point branch '{}' at checkpoint {}: there is no "
                    "checkpoint {}",
                    branch, checkpoint_id, checkpoint_id));
  DurableScope durable(impl_->db);
  auto n = impl_->change(
      "INSERT INTO refs(name, checkpoint_id, updated_at) VALUES(?,?,?) ON CONFLICT(name) DO "
      "UPDATE SET checkpoint_id = excluded.checkpoint_id, updated_at = excluded.updated_at",
      "move branch",
      [&](Stmt& s) { s.text(branch).integer(checkpoint_id).text(utc_now_iso8601()); });
  return n.status();
}

Result<std::optional<int64_t>> Store::ref(const std::string& branch) const {
  std::lock_guard lock(impl_->mu);
  return impl_->ref(branch);
}

Result<std::map<std::string, int64_t>> Store::refs() const {
  std::lock_guard lock(impl_->mu);
  std::map<std::string, int64_t> out;
  auto st = impl_->query(
      "SELECT name, checkpoint_id FROM refs ORDER BY name", "list branches", [](Stmt&) {},
      [&](Stmt& s) { out.emplace(s.col_text(0), s.col_int(1)); });
  if (!st) return st;
  return out;
}

Status Store::delete_ref(const std::string& branch) {
  std::lock_guard lock(impl_->mu);
  DurableScope durable(impl_->db);
  auto n = impl_->change("DELETE FROM refs WHERE name = ?", "delete branch",
                         [&](Stmt& s) { s.text(branch); });
  if (!n) return n.status();
  if (*n == 0) return Status::error(fmt::format("there is no branch '{}'", branch));
  return Status::ok();
}

Status Store::set_head(const std::string& head) {
  bool detached = !head.empty() && head[0] == '#';
  std::lock_guard lock(impl_->mu);
  if (detached) {
    auto id = parse_detached(head);
    if (!id)
      return Status::error(fmt::format(
          "'{}' is not a checkpoint reference; write '#' followed by a checkpoint id, e.g. '#3'",
          head));
    auto exists = impl_->checkpoint_exists(*id);
    if (!exists) return exists.status();
    if (!*exists)
      return Status::error(
          fmt::format("cannot check out {}: there is no checkpoint {}", head, *id));
  } else if (auto s = check_name("branch", head); !s) {
    return s;
  }
  DurableScope durable(impl_->db);
  auto n = impl_->change(
      "INSERT INTO meta(key, value) VALUES('HEAD', ?) ON CONFLICT(key) DO UPDATE SET value = "
      "excluded.value",
      "set HEAD", [&](Stmt& s) { s.text(head); });
  return n.status();
}

Result<std::string> Store::head() const {
  std::lock_guard lock(impl_->mu);
  auto v = impl_->meta("HEAD");
  if (!v) return v.status();
  return v->value_or("main");
}

Result<std::optional<int64_t>> Store::head_checkpoint() const {
  auto h = head();
  if (!h) return h.status();
  if (!h->empty() && (*h)[0] == '#') {
    auto id = parse_detached(*h);
    if (!id) return make_error(fmt::format("HEAD holds '{}', which names no checkpoint", *h));
    return std::optional<int64_t>(*id);
  }
  return ref(*h);
}

Status Store::tag(const std::string& name, int64_t checkpoint_id) {
  if (auto s = check_name("tag", name); !s) return s;
  std::lock_guard lock(impl_->mu);
  std::optional<int64_t> existing;
  auto st = impl_->query(
      "SELECT checkpoint_id FROM tags WHERE name = ?", "read a tag", [&](Stmt& s) { s.text(name); },
      [&](Stmt& s) { existing = s.col_int(0); });
  if (!st) return st;
  if (existing) {
    if (*existing == checkpoint_id) return Status::ok();
    return Status::error(
        fmt::format("tag '{}' already names checkpoint {}; tags never move, so choose another name",
                    name, *existing));
  }
  auto exists = impl_->checkpoint_exists(checkpoint_id);
  if (!exists) return exists.status();
  if (!*exists)
    return Status::error(fmt::format("cannot tag checkpoint {} as '{}': there is no checkpoint {}",
                                     checkpoint_id, name, checkpoint_id));
  DurableScope durable(impl_->db);
  auto n =
      impl_->change("INSERT INTO tags(name, checkpoint_id, created_at) VALUES(?,?,?)", "record tag",
                    [&](Stmt& s) { s.text(name).integer(checkpoint_id).text(utc_now_iso8601()); });
  return n.status();
}

Result<std::optional<int64_t>> Store::find_tag(const std::string& name) const {
  std::lock_guard lock(impl_->mu);
  std::optional<int64_t> v;
  auto st = impl_->query(
      "SELECT checkpoint_id FROM tags WHERE name = ?", "read a tag", [&](Stmt& s) { s.text(name); },
      [&](Stmt& s) { v = s.col_int(0); });
  if (!st) return st;
  return v;
}

Result<std::map<std::string, int64_t>> Store::tags() const {
  std::lock_guard lock(impl_->mu);
  std::map<std::string, int64_t> out;
  auto st = impl_->query(
      "SELECT name, checkpoint_id FROM tags ORDER BY name", "list tags", [](Stmt&) {},
      [&](Stmt& s) { out.emplace(s.col_text(0), s.col_int(1)); });
  if (!st) return st;
  return out;
}

// ---- workflows ----

namespace {
WorkflowRecord read_workflow(const Stmt& s) {
  WorkflowRecord w;
  w.id = s.col_int(0);
  w.kind = s.col_text(1);
  w.args_json = s.col_text(2);
  w.status = s.col_text(3);
  w.started_at = s.col_text(4);
  w.finished_at = s.col_text(5);
  w.state_json = s.col_text(6);
  w.owner_pid = static_cast<int>(s.col_int(7));
  w.owner_host = s.col_text(8);
  w.owner_start = s.col_text(9);
  return w;
}
constexpr const char* kWorkflowSelect =
    "SELECT id, kind, args_json, status, started_at, finished_at, state_json, owner_pid, "
    "owner_host, owner_start FROM workflows";
}  // namespace

Result<int64_t> Store::add_workflow(const WorkflowRecord& w) {
  if (w.kind.empty()) return make_error("cannot record workflow: its kind is empty");
  std::string status = w.status.empty() ? "running" : w.status;
  if (!valid_workflow_status(status))
    return make_error(fmt::format(
        "cannot record workflow: '{}' is not a workflow status (a lowercase word such as "
        "running, passed, failed, interrupted)",
        status));
  std::string started = w.started_at.empty() ? utc_now_iso8601() : w.started_at;
  return impl_->insert(
      "INSERT INTO workflows(kind, args_json, status, started_at, finished_at, state_json, "
      "owner_pid, owner_host, owner_start) VALUES(?,?,?,?,?,?,?,?,?)",
      "record workflow",
      [&](Stmt& s) {
        s.text(w.kind)
            .text(w.args_json)
            .text(status)
            .text(started)
            .text(w.finished_at)
            .text(w.state_json)
            .integer(w.owner_pid)
            .text(w.owner_host)
            .text(w.owner_start);
      },
      /*durable=*/true);
}

Status Store::update_workflow(int64_t id, const std::string& status,
                              const std::string& state_json) {
  if (!valid_workflow_status(status))
    return Status::error(fmt::format(
        "cannot update workflow {}: '{}' is not a workflow status (a lowercase word such as "
        "running, passed, failed, interrupted)",
        id, status));
  std::string finished = finished_status(status) ? utc_now_iso8601() : "";
  std::lock_guard lock(impl_->mu);
  DurableScope durable(impl_->db);
  auto n =
      impl_->change("UPDATE workflows SET status = ?, state_json = ?, finished_at = ? WHERE id = ?",
                    "update workflow",
                    [&](Stmt& s) { s.text(status).text(state_json).text(finished).integer(id); });
  if (!n) return n.status();
  if (*n == 0)
    return Status::error(fmt::format("cannot update workflow {}: there is no such workflow", id));
  return Status::ok();
}

Status Store::set_workflow_owner(int64_t id, int pid, const std::string& host,
                                 const std::string& start) {
  std::lock_guard lock(impl_->mu);
  DurableScope durable(impl_->db);
  auto n = impl_->change(
      "UPDATE workflows SET owner_pid = ?, owner_host = ?, owner_start = ? WHERE id = ?",
      "take over workflow", [&](Stmt& s) { s.integer(pid).text(host).text(start).integer(id); });
  if (!n) return n.status();
  if (*n == 0)
    return Status::error(
        fmt::format("cannot take over workflow {}: there is no such workflow", id));
  return Status::ok();
}

Result<WorkflowRecord> Store::workflow(int64_t id) const {
  std::lock_guard lock(impl_->mu);
  std::optional<WorkflowRecord> out;
  static const std::string sql = std::string(kWorkflowSelect) + " WHERE id = ?";
  auto st = impl_->query(
      sql.c_str(), "read workflow", [&](Stmt& s) { s.integer(id); },
      [&](Stmt& s) { out = read_workflow(s); });
  if (!st) return st;
  if (!out) return make_error(fmt::format("there is no workflow {}", id));
  return std::move(*out);
}

Result<std::vector<WorkflowRecord>> Store::workflows() const {
  std::lock_guard lock(impl_->mu);
  std::vector<WorkflowRecord> out;
  static const std::string sql = std::string(kWorkflowSelect) + " ORDER BY id";
  auto st = impl_->query(
      sql.c_str(), "list workflows", [](Stmt&) {},
      [&](Stmt& s) { out.push_back(read_workflow(s)); });
  if (!st) return st;
  return out;
}

// ---- attempts ----

namespace {
constexpr const char* kAttemptSelect =
    "SELECT id, workflow_id, parent_checkpoint, transformation, pass_index, attempt, region, "
    "driver, model, producer, prompt_key, prompt_blob, reply_blob, prompt_tokens, "
    "completion_tokens, latency_s, disposition, error, created_at, infrastructure FROM attempts";

AttemptRecord read_attempt(const Stmt& s) {
  AttemptRecord a;
  a.id = s.col_int(0);
  a.workflow_id = s.col_opt_id(1).value_or(0);
  a.parent_checkpoint = s.col_opt_id(2);
  a.transformation = s.col_text(3);
  a.pass_index = static_cast<int>(s.col_int(4));
  a.attempt = static_cast<int>(s.col_int(5));
  a.region = s.col_text(6);
  a.driver = s.col_text(7);
  a.model = s.col_text(8);
  a.producer = s.col_text(9);
  a.prompt_key = s.col_text(10);
  a.prompt_blob = s.col_text(11);
  a.reply_blob = s.col_text(12);
  a.prompt_tokens = static_cast<int>(s.col_int(13));
  a.completion_tokens = static_cast<int>(s.col_int(14));
  a.latency_s = s.col_real(15);
  a.disposition = s.col_text(16);
  a.error = s.col_text(17);
  a.created_at = s.col_text(18);
  a.infrastructure = s.col_int(19) != 0;
  return a;
}
}  // namespace

Result<int64_t> Store::add_attempt(const AttemptRecord& a) {
  return impl_->insert(
      "INSERT INTO attempts(workflow_id, parent_checkpoint, transformation, pass_index, attempt, "
      "region, driver, model, producer, prompt_key, prompt_blob, reply_blob, prompt_tokens, "
      "completion_tokens, latency_s, disposition, error, created_at, infrastructure) "
      "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
      "record attempt", [&](Stmt& s) {
        // Workflow id 0 means "not part of a workflow" and is stored as NULL.
        s.opt_id(a.workflow_id > 0 ? std::optional<int64_t>(a.workflow_id) : std::nullopt)
            .opt_id(a.parent_checkpoint)
            .text(a.transformation)
            .integer(a.pass_index)
            .integer(a.attempt)
            .text(a.region)
            .text(a.driver)
            .text(a.model)
            .text(a.producer)
            .text(a.prompt_key)
            .text(a.prompt_blob)
            .text(a.reply_blob)
            .integer(a.prompt_tokens)
            .integer(a.completion_tokens)
            .real(a.latency_s)
            .text(a.disposition)
            .text(a.error)
            .text(utc_now_iso8601())
            .boolean(a.infrastructure);
      });
}

Result<std::vector<AttemptRecord>> Store::attempts(std::optional<int64_t> workflow_id) const {
  std::lock_guard lock(impl_->mu);
  return impl_->list<AttemptRecord>(kAttemptSelect, "workflow_id", workflow_id, "list attempts",
                                    read_attempt);
}

Status Store::attach_attempt_to_checkpoint(int64_t attempt_id, int64_t checkpoint_id) {
  std::lock_guard lock(impl_->mu);
  auto n = impl_->change(
      "INSERT OR IGNORE INTO attempt_checkpoints(attempt_id, checkpoint_id, created_at) "
      "VALUES(?,?,?)",
      fmt::format("link attempt {} to checkpoint {}", attempt_id, checkpoint_id),
      [&](Stmt& s) { s.integer(attempt_id).integer(checkpoint_id).text(utc_now_iso8601()); });
  return n.status();
}

Result<std::vector<int64_t>> Store::checkpoint_attempts(int64_t checkpoint_id) const {
  std::lock_guard lock(impl_->mu);
  std::vector<int64_t> out;
  auto st = impl_->query(
      "SELECT attempt_id FROM attempt_checkpoints WHERE checkpoint_id = ? ORDER BY attempt_id",
      "list the attempts of a checkpoint", [&](Stmt& s) { s.integer(checkpoint_id); },
      [&](Stmt& s) { out.push_back(s.col_int(0)); });
  if (!st) return st;
  return out;
}

// ---- builds ----

namespace {
constexpr const char* kBuildSelect =
    "SELECT id, attempt_id, source_hash, config_json, command, exit_code, log_blob, seconds, "
    "disposition, resources_json, toolchain, cached, created_at FROM builds";

BuildRecord read_build(const Stmt& s) {
  BuildRecord b;
  b.id = s.col_int(0);
  b.attempt_id = s.col_opt_id(1);
  b.source_hash = s.col_text(2);
  b.config_json = s.col_text(3);
  b.command = s.col_text(4);
  b.exit_code = static_cast<int>(s.col_int(5));
  b.log_blob = s.col_text(6);
  b.seconds = s.col_real(7);
  b.disposition = s.col_text(8);
  b.resources_json = s.col_text(9);
  b.toolchain = s.col_text(10);
  b.cached = s.col_int(11) != 0;
  b.created_at = s.col_text(12);
  return b;
}
}  // namespace

Result<int64_t> Store::add_build(const BuildRecord& b) {
  return impl_->insert(
      "INSERT INTO builds(attempt_id, source_hash, config_json, command, exit_code, log_blob, "
      "seconds, disposition, resources_json, toolchain, cached, created_at) "
      "VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
      "record build", [&](Stmt& s) {
        s.opt_id(b.attempt_id)
            .text(b.source_hash)
            .text(b.config_json)
            .text(b.command)
            .integer(b.exit_code)
            .text(b.log_blob)
            .real(b.seconds)
            .text(b.disposition)
            .text(b.resources_json)
            .text(b.toolchain)
            .boolean(b.cached)
            .text(utc_now_iso8601());
      });
}

Result<std::vector<BuildRecord>> Store::builds(std::optional<int64_t> attempt_id) const {
  std::lock_guard lock(impl_->mu);
  return impl_->list<BuildRecord>(kBuildSelect, "attempt_id", attempt_id, "list builds",
                                  read_build);
}

// ---- validations ----

namespace {
constexpr const char* kValidationSelect =
    "SELECT id, attempt_id, checkpoint_id, config_json, shape, hidden, seed, max_abs_err, "
    "max_rel_err, disposition, message, seconds, created_at FROM validations";

ValidationRecord read_validation(const Stmt& s) {
  ValidationRecord v;
  v.id = s.col_int(0);
  v.attempt_id = s.col_opt_id(1);
  v.checkpoint_id = s.col_opt_id(2);
  v.config_json = s.col_text(3);
  v.shape = s.col_text(4);
  v.hidden = s.col_int(5) != 0;
  v.seed = s.col_int(6);
  v.max_abs_err = s.col_real(7);
  v.max_rel_err = s.col_real(8);
  v.disposition = s.col_text(9);
  v.message = s.col_text(10);
  v.seconds = s.col_real(11);
  v.created_at = s.col_text(12);
  return v;
}
}  // namespace

Result<int64_t> Store::add_validation(const ValidationRecord& v) {
  return impl_->insert(
      "INSERT INTO validations(attempt_id, checkpoint_id, config_json, shape, hidden, seed, "
      "max_abs_err, max_rel_err, disposition, message, seconds, created_at) "
      "VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
      "record validation", [&](Stmt& s) {
        s.opt_id(v.attempt_id)
            .opt_id(v.checkpoint_id)
            .text(v.config_json)
            .text(v.shape)
            .boolean(v.hidden)
            .integer(v.seed)
            .real(v.max_abs_err)
            .real(v.max_rel_err)
            .text(v.disposition)
            .text(v.message)
            .real(v.seconds)
            .text(utc_now_iso8601());
      });
}

Result<std::vector<ValidationRecord>> Store::validations(std::optional<int64_t> attempt_id) const {
  std::lock_guard lock(impl_->mu);
  return impl_->list<ValidationRecord>(kValidationSelect, "attempt_id", attempt_id,
                                       "list validations", read_validation);
}

// ---- measurements ----

namespace {
constexpr const char* kMeasurementSelect =
    "SELECT id, attempt_id, checkpoint_id, config_json, shape, what, samples_json, median_ms, "
    "spread, gflops, disposition, device_json, created_at FROM measurements";

MeasurementRecord read_measurement(const Stmt& s) {
  MeasurementRecord m;
  m.id = s.col_int(0);
  m.attempt_id = s.col_opt_id(1);
  m.checkpoint_id = s.col_opt_id(2);
  m.config_json = s.col_text(3);
  m.shape = s.col_text(4);
  m.what = s.col_text(5);
  m.samples_json = s.col_text(6);
  m.median_ms = s.col_real(7);
  m.spread = s.col_real(8);
  m.gflops = s.col_real(9);
  m.disposition = s.col_text(10);
  m.device_json = s.col_text(11);
  m.created_at = s.col_text(12);
  return m;
}
}  // namespace

Result<int64_t> Store::add_measurement(const MeasurementRecord& m) {
  return impl_->insert(
      "INSERT INTO measurements(attempt_id, checkpoint_id, config_json, shape, what, "
      "samples_json, median_ms, spread, gflops, disposition, device_json, created_at) "
      "VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
      "record measurement", [&](Stmt& s) {
        s.opt_id(m.attempt_id)
            .opt_id(m.checkpoint_id)
            .text(m.config_json)
            .text(m.shape)
            .text(m.what)
            .text(m.samples_json)
            .real(m.median_ms)
            .real(m.spread)
            .real(m.gflops)
            .text(m.disposition)
            .text(m.device_json)
            .text(utc_now_iso8601());
      });
}

Result<std::vector<MeasurementRecord>> Store::measurements(
    std::optional<int64_t> checkpoint_id) const {
  std::lock_guard lock(impl_->mu);
  return impl_->list<MeasurementRecord>(kMeasurementSelect, "checkpoint_id", checkpoint_id,
                                        "list measurements", read_measurement);
}

// ---- evaluations ----

namespace {
constexpr const char* kEvaluationSelect =
    "SELECT id, checkpoint_id, workflow_id, kind, options_json, standard, disposition, shape, "
    "gflops, device, summary_blob, created_at FROM evaluations";

EvaluationRecord read_evaluation(const Stmt& s) {
  EvaluationRecord e;
  e.id = s.col_int(0);
  e.checkpoint_id = s.col_int(1);
  e.workflow_id = s.col_opt_id(2);
  e.kind = s.col_text(3);
  e.options_json = s.col_text(4);
  e.standard = s.col_int(5) != 0;
  e.disposition = s.col_text(6);
  e.shape = s.col_text(7);
  e.gflops = s.col_real(8);
  e.device = s.col_text(9);
  e.summary_blob = s.col_text(10);
  e.created_at = s.col_text(11);
  return e;
}
}  // namespace

Result<int64_t> Store::add_evaluation(const EvaluationRecord& e) {
  if (e.kind.empty()) return make_error("cannot record an evaluation: its kind is empty");
  std::string now = utc_now_iso8601();
  return impl_->insert(
      kEvaluationInsert, "record evaluation", [&](Stmt& s) { bind_evaluation(s, e, now); },
      /*durable=*/true);
}

Result<std::vector<EvaluationRecord>> Store::evaluations(
    std::optional<int64_t> checkpoint_id) const {
  std::lock_guard lock(impl_->mu);
  return impl_->list<EvaluationRecord>(kEvaluationSelect, "checkpoint_id", checkpoint_id,
                                       "list evaluations", read_evaluation);
}

// ---- stashes ----

Result<int64_t> Store::add_stash(const StashRecord& r) {
  if (r.files.empty()) return make_error("cannot record a stash without files");
  nlohmann::json files = nlohmann::json::object();
  for (const auto& [path, blob] : r.files) {
    if (!is_blob_hash(blob))
      return make_error(fmt::format("cannot record a stash: '{}' is not a blob hash", blob));
    files[path] = blob;
  }
  return impl_->insert(
      "INSERT INTO stashes(base_checkpoint, branch, message, files_json, state, created_at, "
      "finished_at) VALUES(?,?,?,?,'kept',?,'')",
      "record stash",
      [&](Stmt& s) {
        s.opt_id(r.base_checkpoint)
            .text(r.branch)
            .text(r.message)
            .text(files.dump())
            .text(utc_now_iso8601());
      },
      /*durable=*/true);
}

Result<std::vector<StashRecord>> Store::stashes(bool kept_only) const {
  std::lock_guard lock(impl_->mu);
  std::vector<StashRecord> out;
  const char* sql =
      kept_only ? "SELECT id, base_checkpoint, branch, message, files_json, state, created_at, "
                  "finished_at FROM stashes WHERE state = 'kept' ORDER BY id"
                : "SELECT id, base_checkpoint, branch, message, files_json, state, created_at, "
                  "finished_at FROM stashes ORDER BY id";
  auto st = impl_->query(
      sql, "list stashes", [](Stmt&) {},
      [&](Stmt& s) {
        StashRecord r;
        r.id = s.col_int(0);
        r.base_checkpoint = s.col_opt_id(1);
        r.branch = s.col_text(2);
        r.message = s.col_text(3);
        auto files = nlohmann::json::parse(s.col_text(4), nullptr, false);
        if (files.is_object())
          for (const auto& [path, blob] : files.items())
            if (blob.is_string()) r.files[path] = blob.get<std::string>();
        r.state = s.col_text(5);
        r.created_at = s.col_text(6);
        r.finished_at = s.col_text(7);
        out.push_back(std::move(r));
      });
  if (!st) return st;
  return out;
}

Status Store::finish_stash(int64_t id, const std::string& state) {
  if (state != "popped" && state != "dropped")
    return Status::error(fmt::format("'{}' is not a final stash state (popped, dropped)", state));
  std::lock_guard lock(impl_->mu);
  DurableScope durable(impl_->db);
  auto n = impl_->change(
      "UPDATE stashes SET state = ?, finished_at = ? WHERE id = ? AND state = 'kept'",
      "update stash", [&](Stmt& s) { s.text(state).text(utc_now_iso8601()).integer(id); });
  if (!n) return n.status();
  if (*n == 0)
    return Status::error(fmt::format("there is no stash {} (`peak stash list` shows them)", id),
                         ErrorKind::input);
  return Status::ok();
}

// ---- refs in one transaction ----

Status Store::update_refs(const RefUpdate& u) {
  for (const auto& [name, id] : u.branches)
    if (auto s = check_name("branch", name); !s) return s;
  if (u.head && !u.head->empty() && (*u.head)[0] != '#')
    if (auto s = check_name("branch", *u.head); !s) return s;
  for (const auto& [key, value] : u.meta)
    if (key.empty()) return Status::error("a setting name cannot be empty");
  std::lock_guard lock(impl_->mu);
  DurableScope durable(impl_->db);
  if (auto s = impl_->exec("BEGIN IMMEDIATE", "start a transaction"); !s) return s;
  auto abort = [&](Status s) {
    impl_->exec("ROLLBACK", "roll back");
    return s;
  };
  for (const auto& [name, id] : u.branches) {
    auto exists = impl_->checkpoint_exists(id);
    if (!exists) return abort(exists.status());
    if (!*exists)
      return abort(Status::error(fmt::format(
          "cannot point branch '{}' at checkpoint {}: there is no checkpoint {}", name, id, id)));
    auto n = impl_->change(
        "INSERT INTO refs(name, checkpoint_id, updated_at) VALUES(?,?,?) ON CONFLICT(name) DO "
        "UPDATE SET checkpoint_id = excluded.checkpoint_id, updated_at = excluded.updated_at",
        "move branch", [&](Stmt& s) { s.text(name).integer(id).text(utc_now_iso8601()); });
    if (!n) return abort(n.status());
  }
  std::map<std::string, std::optional<std::string>> meta = u.meta;
  if (u.head) {
    if (auto id = parse_detached(*u.head)) {
      auto exists = impl_->checkpoint_exists(*id);
      if (!exists) return abort(exists.status());
      if (!*exists)
        return abort(Status::error(
            fmt::format("cannot check out {}: there is no checkpoint {}", *u.head, *id)));
    }
    meta["HEAD"] = *u.head;
  }
  for (const auto& [key, value] : meta) {
    auto n =
        value
            ? impl_->change(
                  "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) "
                  "DO UPDATE SET value = excluded.value",
                  fmt::format("save setting '{}'", key), [&](Stmt& s) { s.text(key).text(*value); })
            : impl_->change("DELETE FROM meta WHERE key = ?",
                            fmt::format("remove setting '{}'", key), [&](Stmt& s) { s.text(key); });
    if (!n) return abort(n.status());
  }
  return impl_->exec("COMMIT", "commit");
}

// ---- meta ----

Status Store::set_meta(const std::string& key, const std::string& value) {
  if (key.empty()) return Status::error("a setting name cannot be empty");
  std::lock_guard lock(impl_->mu);
  auto n = impl_->change(
      "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = "
      "excluded.value",
      fmt::format("save setting '{}'", key), [&](Stmt& s) { s.text(key).text(value); });
  return n.status();
}

Result<std::optional<std::string>> Store::meta(const std::string& key) const {
  std::lock_guard lock(impl_->mu);
  return impl_->meta(key);
}

bool kind_may_be_result(const std::string& kind) {
  return kind != kSuiteKind && kind != kDispatchKind;
}

std::optional<size_t> result_evaluation(const std::vector<EvaluationRecord>& ev) {
  if (ev.empty()) return std::nullopt;
  for (bool standard_only : {true, false}) {
    std::optional<size_t> best;
    for (size_t i = 0; i < ev.size(); ++i) {
      const auto& e = ev[i];
      if (!kind_may_be_result(e.kind)) continue;
      if (e.disposition != "passed" || (standard_only && !e.standard)) continue;
      double g = std::isfinite(e.gflops) ? e.gflops : -1;
      double b = best && std::isfinite(ev[*best].gflops) ? ev[*best].gflops : -1;
      if (!best || g > b) best = i;
    }
    if (best) return best;
  }
  // The latest; a shape-suite benchmark or a dispatch table times other shapes and is never the
  // result.
  for (size_t i = ev.size(); i-- > 0;)
    if (kind_may_be_result(ev[i].kind)) return i;
  return std::nullopt;
}

// ---- tuning runs and their configurations ----

Result<int64_t> Store::add_tuning_run(const TuningRunRecord& r) {
  return impl_->insert(
      "INSERT INTO tuning_runs(attempt_id, checkpoint_id, source_hash, strategy, options_json, "
      "space_json, created_at) VALUES(?,?,?,?,?,?,?)",
      "record a tuning run", [&](Stmt& s) {
        s.opt_id(r.attempt_id)
            .opt_id(r.checkpoint_id)
            .text(r.source_hash)
            .text(r.strategy)
            .text(r.options_json)
            .text(r.space_json)
            .text(utc_now_iso8601());
      });
}

Result<std::vector<TuningRunRecord>> Store::tuning_runs() const {
  std::lock_guard lock(impl_->mu);
  std::vector<TuningRunRecord> out;
  auto st = impl_->query(
      "SELECT id, attempt_id, checkpoint_id, source_hash, strategy, options_json, space_json, "
      "created_at FROM tuning_runs ORDER BY id",
      "list tuning runs", [](Stmt&) {},
      [&](Stmt& s) {
        TuningRunRecord r;
        r.id = s.col_int(0);
        r.attempt_id = s.col_opt_id(1);
        r.checkpoint_id = s.col_opt_id(2);
        r.source_hash = s.col_text(3);
        r.strategy = s.col_text(4);
        r.options_json = s.col_text(5);
        r.space_json = s.col_text(6);
        r.created_at = s.col_text(7);
        out.push_back(std::move(r));
      });
  if (!st) return st;
  return out;
}

Status Store::add_tuning_configs(const std::vector<TuningConfigRecord>& rows) {
  std::lock_guard lock(impl_->mu);
  if (auto s = impl_->exec("BEGIN IMMEDIATE", "record tuning configurations"); !s) return s;
  const std::string now = utc_now_iso8601();
  for (const auto& r : rows) {
    auto id = impl_->change(
        "INSERT INTO tuning_configs(run_id, position, config_json, stage, disposition, reason, "
        "score_ms, compile_s, validate_s, time_s, resources_json, launch_json, created_at) "
        "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)",
        "record a tuning configuration", [&](Stmt& s) {
          s.integer(r.run_id)
              .integer(r.position)
              .text(r.config_json)
              .text(r.stage)
              .text(r.disposition)
              .text(r.reason)
              .real(r.score_ms)
              .real(r.compile_s)
              .real(r.validate_s)
              .real(r.time_s)
              .text(r.resources_json)
              .text(r.launch_json)
              .text(now);
        });
    if (!id) {
      impl_->exec("ROLLBACK", "roll back");
      return id.status();
    }
  }
  return impl_->exec("COMMIT", "record tuning configurations");
}

Result<std::vector<TuningConfigRecord>> Store::tuning_configs(int64_t run_id) const {
  std::lock_guard lock(impl_->mu);
  std::vector<TuningConfigRecord> out;
  auto st = impl_->query(
      "SELECT id, run_id, position, config_json, stage, disposition, reason, score_ms, "
      "compile_s, validate_s, time_s, resources_json, launch_json, created_at FROM "
      "tuning_configs WHERE run_id = ? ORDER BY id",
      "list tuning configurations", [&](Stmt& s) { s.integer(run_id); },
      [&](Stmt& s) {
        TuningConfigRecord r;
        r.id = s.col_int(0);
        r.run_id = s.col_int(1);
        r.position = s.col_int(2);
        r.config_json = s.col_text(3);
        r.stage = s.col_text(4);
        r.disposition = s.col_text(5);
        r.reason = s.col_text(6);
        r.score_ms = s.col_real(7);
        r.compile_s = s.col_real(8);
        r.validate_s = s.col_real(9);
        r.time_s = s.col_real(10);
        r.resources_json = s.col_text(11);
        r.launch_json = s.col_text(12);
        r.created_at = s.col_text(13);
        out.push_back(std::move(r));
      });
  if (!st) return st;
  return out;
}

}  // namespace peak
