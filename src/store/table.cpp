#include "store/table.h"

#include <fmt/format.h>

namespace peak::store_detail {
namespace {

// The triggers that make a table append-only: UPDATE and DELETE fail, also from the sqlite3
// shell.
std::string append_only_triggers(const std::string& t) {
  return fmt::format(
      "CREATE TRIGGER {0}_no_update BEFORE UPDATE ON {0} BEGIN SELECT RAISE(ABORT, 'peak "
      "store: {0} are append-only'); END; "
      "CREATE TRIGGER {0}_no_delete BEFORE DELETE ON {0} BEGIN SELECT RAISE(ABORT, 'peak "
      "store: {0} are append-only'); END;\n",
      t);
}

}  // namespace

std::string TableSql::create_sql() const {
  std::string lines;
  for (const auto& c : columns)
    if (c.since <= since) lines += (lines.empty() ? "  " : ",\n  ") + c.name + " " + c.decl;
  for (const auto& c : constraints) lines += ",\n  " + c;
  std::string sql = "CREATE TABLE " + name + "(\n" + lines + "\n);\n";
  for (const auto& [index, cols] : indexes)
    sql += fmt::format("CREATE INDEX {} ON {}({});\n", index, name, cols);
  return sql;
}

std::string TableSql::add_columns_sql(int version) const {
  std::string sql;
  if (version <= since) return sql;
  for (const auto& c : columns)
    if (c.since == version)
      sql += fmt::format("ALTER TABLE {} ADD COLUMN {} {};\n", name, c.name, c.decl);
  return sql;
}

std::string schema_changes(const std::vector<const TableSql*>& tables, int version) {
  std::string sql;
  for (const TableSql* t : tables) sql += t->add_columns_sql(version);
  for (const TableSql* t : tables)
    if (t->since == version) sql += t->create_sql();
  for (const TableSql* t : tables)
    if (t->since == version) sql += t->triggers;
  for (const TableSql* t : tables)
    if (t->since == version && t->append_only) sql += append_only_triggers(t->name);
  return sql;
}

}  // namespace peak::store_detail
