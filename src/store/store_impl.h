#pragma once
// The inside of Store, shared by store.cpp (connection, transactions, schema versions,
// migrations, integrity checks, blobs) and the files of each table (checkpoints.cpp,
// workflows.cpp, ...). Not for use outside src/store.
#include <sqlite3.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "store/store.h"
#include "store/table.h"
#include "util/result.h"

namespace peak {
namespace store_detail {

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

bool is_blob_hash(std::string_view h);
// Branch and tag names: non-empty, printable, no whitespace, not "#<...>" (the detached-HEAD
// spelling).
Status check_name(std::string_view kind, const std::string& name);
// "#<id>" -> id.
std::optional<int64_t> parse_detached(const std::string& head);
// Writes a blob file (content-addressed, atomic); returns its hash.
Result<std::string> write_blob(const std::filesystem::path& blob_dir, std::string_view data);
// The columns of an evaluations row that come from its summary JSON.
void fill_from_summary(const std::string& summary_json, EvaluationRecord& e);

// The columns that name an attempt or a checkpoint (NULL when none).
template <typename R>
Field<R> attempt_ref(std::optional<int64_t> R::*m) {
  return ref_field("attempt_id", m, "INTEGER REFERENCES attempts(id)");
}
template <typename R>
Field<R> checkpoint_ref(const char* name, std::optional<int64_t> R::*m) {
  return ref_field(name, m, "INTEGER REFERENCES checkpoints(id)");
}

// The tables, each defined in its own file.
const RecordTable<WorkflowRecord>& workflows_table();
const RecordTable<CheckpointRecord>& checkpoints_table();
const RecordTable<AttemptRecord>& attempts_table();
const TableSql& attempt_checkpoints_table();
const RecordTable<BuildRecord>& builds_table();
const RecordTable<ValidationRecord>& validations_table();
const RecordTable<MeasurementRecord>& measurements_table();
const TableSql& refs_table();
const TableSql& tags_table();
const TableSql& meta_table();
const RecordTable<EvaluationRecord>& evaluations_table();
const RecordTable<StashRecord>& stashes_table();
const RecordTable<TuningRunRecord>& tuning_runs_table();
const RecordTable<TuningConfigRecord>& tuning_configs_table();

}  // namespace store_detail

struct Store::Impl {
  using Stmt = store_detail::Stmt;

  sqlite3* db = nullptr;
  std::filesystem::path db_path;
  std::filesystem::path blob_dir;
  std::mutex mu;           // serializes every use of `db` (one connection shared by all threads)
  std::mutex blob_mu;      // serializes blob writes (their temporary names are per process)
  bool read_only = false;  // opened without write access
  std::unordered_map<std::string, sqlite3_stmt*> cache;
  std::filesystem::path upgraded_copy;  // a read-only store of an older schema is read from an
                                        // upgraded copy

  Impl(std::filesystem::path db, std::filesystem::path blobs)
      : db_path(std::move(db)), blob_dir(std::move(blobs)) {}
  ~Impl();

  // An error for a failed SQLite call, worded for the user. Caller holds `mu`.
  Error fail(std::string_view what, int rc) const;
  // Runs fixed SQL text (no values). Caller holds `mu`.
  Status exec(const char* sql, std::string_view what);
  // A cached prepared statement. Caller holds `mu`.
  Result<sqlite3_stmt*> prepare(const char* sql);
  // The extended result code of the last failure when it matches `rc`.
  int code(int rc) const;

  // One INSERT in its own (autocommit) transaction; returns the new row id.
  // `durable`: commit with synchronous=FULL (see DurableScope).
  template <typename Bind>
  Result<int64_t> insert(const char* sql, std::string_view what, Bind&& bind,
                         bool durable = false) {
    std::lock_guard lock(mu);
    std::optional<store_detail::DurableScope> scope;
    if (durable) scope.emplace(db);
    if (auto n = change(sql, what, bind); !n) return n.status();
    return static_cast<int64_t>(sqlite3_last_insert_rowid(db));
  }

  // One record inserted into its table in its own transaction, written now.
  template <typename R>
  Result<int64_t> insert(const store_detail::RecordTable<R>& table, const R& r,
                         std::string_view what, bool durable = false) {
    const std::string now = utc_now_iso8601();
    return insert(
        table.insert_sql().c_str(), what, [&](Stmt& s) { table.bind(s, r, now); }, durable);
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

  // The records of `table` matching `where` (SQL after WHERE; empty: all), in id order.
  // Caller holds `mu`.
  template <typename R, typename Bind>
  Result<std::vector<R>> select(const store_detail::RecordTable<R>& table, std::string_view where,
                                std::string_view what, Bind&& bind) {
    const std::string sql =
        where.empty() ? table.select_sql() + " ORDER BY id"
                      : table.select_sql() + " WHERE " + std::string(where) + " ORDER BY id";
    std::vector<R> out;
    auto st = query(sql.c_str(), what, bind, [&](Stmt& s) { out.push_back(table.read(s)); });
    if (!st) return st;
    return out;
  }

  // The records of `table` in id order, all of them or those whose `column` is `id`. Caller
  // holds `mu`.
  template <typename R>
  Result<std::vector<R>> list(const store_detail::RecordTable<R>& table, std::string_view column,
                              std::optional<int64_t> id, std::string_view what) {
    return select(table, id ? std::string(column) + " = ?" : std::string(), what, [&](Stmt& s) {
      if (id) s.integer(*id);
    });
  }

  // The record of `table` with row id `id`, if any. Caller holds `mu`.
  template <typename R>
  Result<std::optional<R>> find(const store_detail::RecordTable<R>& table, int64_t id,
                                std::string_view what) {
    auto rows = list(table, "id", id, what);
    if (!rows) return rows.status();
    if (rows->empty()) return std::optional<R>();
    return std::optional<R>(std::move(rows->front()));
  }

  // Defined with the tables they read (checkpoints.cpp, refs.cpp). Caller holds `mu`.
  Result<bool> checkpoint_exists(int64_t id);
  Result<std::optional<std::string>> meta(const std::string& key);
  Result<std::optional<int64_t>> ref(const std::string& name);
  Result<std::optional<int64_t>> tag(const std::string& name);
  // A name -> checkpoint table (refs, tags) read by `sql`, in name order.
  Result<std::map<std::string, int64_t>> names(const char* sql, std::string_view what);
  // Inserts or moves a branch; sets a setting (refs.cpp). Caller holds `mu`.
  Result<int> upsert_ref(const std::string& name, int64_t checkpoint_id);
  Result<int> upsert_meta(const std::string& key, const std::string& value, std::string_view what);

  Result<int> user_version();
  Result<int64_t> object_count();
  Status apply_schema(int version, std::string_view what);
  Status migrate_1_to_2();
  Status add_tuning_tables();
  Status migrate(int from);
  Status check_not_empty();
  Status init_schema();
};

}  // namespace peak
