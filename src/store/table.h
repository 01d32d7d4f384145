#pragma once
// The table mapping of the store: each table is described once, as its list of columns, and its
// SQL (CREATE TABLE, the ALTER TABLE of the columns a later schema added, INSERT, SELECT) and the
// code that binds a record to an INSERT and reads one from a row are made from that list.
//
// The generated CREATE TABLE and ALTER TABLE text is exactly the text the schema always had:
// SQLite keeps it in sqlite_master, so stores created by any peak have the same schema text
// (test FreshSchemaIsTheRecordedOne).
#include <sqlite3.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace peak::store_detail {

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

// One column as the schema declares it.
struct ColumnSql {
  ColumnSql(std::string name, std::string decl, int since = 1)
      : name(std::move(name)), decl(std::move(decl)), since(since) {}
  std::string name;
  std::string decl;  // type and constraints, byte for byte as in the schema text
  int since = 1;     // the schema version that added it (later than the table's: ALTER TABLE)
};

// A table of the schema: its columns, table constraints, indexes and own triggers.
struct TableSql {
  explicit TableSql(std::string name, int since = 1) : name(std::move(name)), since(since) {}
  TableSql& column(std::string column, std::string decl) {
    columns.emplace_back(std::move(column), std::move(decl));
    return *this;
  }
  TableSql& constraint(std::string c) {
    constraints.push_back(std::move(c));
    return *this;
  }
  TableSql& index(std::string index_name, std::string cols) {
    indexes.emplace_back(std::move(index_name), std::move(cols));
    return *this;
  }
  TableSql& with_triggers(std::string sql) {
    triggers = std::move(sql);
    return *this;
  }
  // UPDATE and DELETE of its rows fail (triggers made with the table).
  TableSql& rows_never_change() {
    append_only = true;
    return *this;
  }

  std::string name;
  int since = 1;  // the schema version that created it
  std::vector<ColumnSql> columns;
  std::vector<std::string> constraints;                      // e.g. "PRIMARY KEY(a, b)"
  std::vector<std::pair<std::string, std::string>> indexes;  // index name -> its columns
  std::string triggers;  // SQL run after the tables of its version are created
  bool append_only = false;

  // CREATE TABLE with the columns of its first version, then its indexes.
  std::string create_sql() const;
  // ALTER TABLE ... ADD COLUMN for the columns schema `version` added to an older table.
  std::string add_columns_sql(int version) const;
};

// The SQL that takes the schema from version - 1 to `version` (`version` 1: creates it): the
// columns added to older tables, the new tables, their triggers, and their append-only triggers.
std::string schema_changes(const std::vector<const TableSql*>& tables, int version);

// A column of a record table: how its value is bound from a record and read into one. `now` is
// the time the row is written, bound by the `created_at` columns.
template <typename R>
struct Field {
  ColumnSql sql;
  std::function<void(Stmt&, const R&, std::string_view now)> bind;  // empty: not inserted (id)
  std::function<void(const Stmt&, int, R&)> read;
};

// The row id: read, never inserted (SQLite assigns it).
template <typename R>
Field<R> id_field(int64_t R::*m) {
  return {
      {"id", "INTEGER PRIMARY KEY"}, {}, [m](const Stmt& s, int c, R& r) { r.*m = s.col_int(c); }};
}

template <typename R>
Field<R> text_field(const char* name, std::string R::*m, const char* decl = "TEXT NOT NULL") {
  return {{name, decl},
          [m](Stmt& s, const R& r, std::string_view) { s.text(r.*m); },
          [m](const Stmt& s, int c, R& r) { r.*m = s.col_text(c); }};
}

// An INTEGER column held in an int or int64_t member.
template <typename R, typename T>
Field<R> int_field(const char* name, T R::*m, const char* decl = "INTEGER NOT NULL") {
  return {{name, decl},
          [m](Stmt& s, const R& r, std::string_view) { s.integer(r.*m); },
          [m](const Stmt& s, int c, R& r) { r.*m = static_cast<T>(s.col_int(c)); }};
}

// A 0/1 column; `decl` carries its CHECK.
template <typename R>
Field<R> bool_field(const char* name, bool R::*m, const char* decl) {
  return {{name, decl},
          [m](Stmt& s, const R& r, std::string_view) { s.boolean(r.*m); },
          [m](const Stmt& s, int c, R& r) { r.*m = s.col_int(c) != 0; }};
}

// A nullable REAL column: NaN is stored as NULL.
template <typename R>
Field<R> real_field(const char* name, double R::*m) {
  return {{name, "REAL"},
          [m](Stmt& s, const R& r, std::string_view) { s.real(r.*m); },
          [m](const Stmt& s, int c, R& r) { r.*m = s.col_real(c); }};
}

// A nullable reference to another row; `decl` carries its REFERENCES.
template <typename R>
Field<R> ref_field(const char* name, std::optional<int64_t> R::*m, const char* decl) {
  return {{name, decl},
          [m](Stmt& s, const R& r, std::string_view) { s.opt_id(r.*m); },
          [m](const Stmt& s, int c, R& r) { r.*m = s.col_opt_id(c); }};
}

// The time the row was written: bound from `now`, read into the record.
template <typename R>
Field<R> created_field(std::string R::*m) {
  return {{"created_at", "TEXT NOT NULL"},
          [](Stmt& s, const R&, std::string_view now) { s.text(now); },
          [m](const Stmt& s, int c, R& r) { r.*m = s.col_text(c); }};
}

// A column that a later schema version added.
template <typename R>
Field<R> since(int version, Field<R> f) {
  f.sql.since = version;
  return f;
}

// A table whose rows are records of type R: its schema and its statements come from its fields,
// listed in the table's column order.
template <typename R>
class RecordTable {
 public:
  RecordTable(TableSql table, std::vector<Field<R>> fields)
      : table_(std::move(table)), fields_(std::move(fields)) {
    std::string names, inserted, marks;
    for (const auto& f : fields_) {
      table_.columns.push_back(f.sql);
      names += (names.empty() ? "" : ", ") + f.sql.name;
      if (!f.bind) continue;
      inserted += (inserted.empty() ? "" : ", ") + f.sql.name;
      marks += marks.empty() ? "?" : ",?";
    }
    insert_ = "INSERT INTO " + table_.name + "(" + inserted + ") VALUES(" + marks + ")";
    select_ = "SELECT " + names + " FROM " + table_.name;
  }

  const TableSql& sql() const { return table_; }
  // INSERT of every column but the id, in column order.
  const std::string& insert_sql() const { return insert_; }
  // SELECT of every column, without WHERE.
  const std::string& select_sql() const { return select_; }

  void bind(Stmt& s, const R& r, std::string_view now) const {
    for (const auto& f : fields_)
      if (f.bind) f.bind(s, r, now);
  }
  R read(const Stmt& s) const {
    R r;
    int c = 0;
    for (const auto& f : fields_) f.read(s, c++, r);
    return r;
  }

 private:
  TableSql table_;
  std::vector<Field<R>> fields_;
  std::string insert_, select_;
};

}  // namespace peak::store_detail
