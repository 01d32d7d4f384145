// Branches (refs), tags, HEAD and the settings (meta); several of their changes in one
// transaction.
#include <fmt/format.h>

#include "store/store_impl.h"

namespace peak {
namespace store_detail {

namespace {
// Branches and tags: a name -> a checkpoint, and when it was set.
TableSql checkpoint_names(const char* table, const char* set_at) {
  return TableSql(table)
      .column("name", "TEXT PRIMARY KEY")
      .column("checkpoint_id", "INTEGER NOT NULL REFERENCES checkpoints(id)")
      .column(set_at, "TEXT NOT NULL");
}
}  // namespace

const TableSql& refs_table() {
  static const TableSql table = checkpoint_names("refs", "updated_at");
  return table;
}

const TableSql& tags_table() {
  static const TableSql table = checkpoint_names("tags", "created_at").rows_never_change();
  return table;
}

const TableSql& meta_table() {
  static const TableSql table =
      TableSql("meta").column("key", "TEXT PRIMARY KEY").column("value", "TEXT NOT NULL");
  return table;
}

}  // namespace store_detail

using namespace store_detail;

// ---- the rows, for the Store calls below (caller holds `mu`) ----

Result<std::optional<std::string>> Store::Impl::meta(const std::string& key) {
  std::optional<std::string> v;
  auto st = query(
      "SELECT value FROM meta WHERE key = ?", "read a setting", [&](Stmt& s) { s.text(key); },
      [&](Stmt& s) { v = s.col_text(0); });
  if (!st) return st;
  return v;
}

Result<std::optional<int64_t>> Store::Impl::ref(const std::string& name) {
  std::optional<int64_t> v;
  auto st = query(
      "SELECT checkpoint_id FROM refs WHERE name = ?", "read a branch",
      [&](Stmt& s) { s.text(name); }, [&](Stmt& s) { v = s.col_int(0); });
  if (!st) return st;
  return v;
}

Result<int> Store::Impl::upsert_ref(const std::string& name, int64_t checkpoint_id) {
  return change(
      "INSERT INTO refs(name, checkpoint_id, updated_at) VALUES(?,?,?) ON CONFLICT(name) DO "
      "UPDATE SET checkpoint_id = excluded.checkpoint_id, updated_at = excluded.updated_at",
      "move branch", [&](Stmt& s) { s.text(name).integer(checkpoint_id).text(utc_now_iso8601()); });
}

Result<int> Store::Impl::upsert_meta(const std::string& key, const std::string& value,
                                     std::string_view what) {
  return change(
      "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = "
      "excluded.value",
      what, [&](Stmt& s) { s.text(key).text(value); });
}

Result<std::map<std::string, int64_t>> Store::Impl::names(const char* sql, std::string_view what) {
  std::map<std::string, int64_t> out;
  auto st = query(
      sql, what, [](Stmt&) {}, [&](Stmt& s) { out.emplace(s.col_text(0), s.col_int(1)); });
  if (!st) return st;
  return out;
}

Result<std::optional<int64_t>> Store::Impl::tag(const std::string& name) {
  std::optional<int64_t> v;
  auto st = query(
      "SELECT checkpoint_id FROM tags WHERE name = ?", "read a tag", [&](Stmt& s) { s.text(name); },
      [&](Stmt& s) { v = s.col_int(0); });
  if (!st) return st;
  return v;
}

// ---- branches ----

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
  return impl_->upsert_ref(branch, checkpoint_id).status();
}

Result<std::optional<int64_t>> Store::ref(const std::string& branch) const {
  std::lock_guard lock(impl_->mu);
  return impl_->ref(branch);
}

Result<std::map<std::string, int64_t>> Store::refs() const {
  std::lock_guard lock(impl_->mu);
  return impl_->names("SELECT name, checkpoint_id FROM refs ORDER BY name", "list branches");
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

// ---- HEAD ----

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
  return impl_->upsert_meta("HEAD", head, "set HEAD").status();
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

// ---- tags ----

Status Store::tag(const std::string& name, int64_t checkpoint_id) {
  if (auto s = check_name("tag", name); !s) return s;
  std::lock_guard lock(impl_->mu);
  auto existing = impl_->tag(name);
  if (!existing) return existing.status();
  if (*existing) {
    if (**existing == checkpoint_id) return Status::ok();
    return Status::error(
        fmt::format("tag '{}' already names checkpoint {}; tags never move, so choose another name",
                    name, **existing));
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
  return impl_->tag(name);
}

Result<std::map<std::string, int64_t>> Store::tags() const {
  std::lock_guard lock(impl_->mu);
  return impl_->names("SELECT name, checkpoint_id FROM tags ORDER BY name", "list tags");
}

// ---- refs in one transaction ----

// The checks of an update_refs before it starts its transaction.
static Status check_ref_update(const RefUpdate& u) {
  for (const auto& [name, id] : u.branches)
    if (auto s = check_name("branch", name); !s) return s;
  if (u.head && !u.head->empty() && (*u.head)[0] != '#')
    if (auto s = check_name("branch", *u.head); !s) return s;
  for (const auto& [key, value] : u.meta)
    if (key.empty()) return Status::error("a setting name cannot be empty");
  return Status::ok();
}

Status Store::update_refs(const RefUpdate& u) {
  if (auto s = check_ref_update(u); !s) return s;
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
    if (auto n = impl_->upsert_ref(name, id); !n) return abort(n.status());
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
    auto n = value ? impl_->upsert_meta(key, *value, fmt::format("save setting '{}'", key))
                   : impl_->change("DELETE FROM meta WHERE key = ?",
                                   fmt::format("remove setting '{}'", key),
                                   [&](Stmt& s) { s.text(key); });
    if (!n) return abort(n.status());
  }
  return impl_->exec("COMMIT", "commit");
}

// ---- settings ----

Status Store::set_meta(const std::string& key, const std::string& value) {
  if (key.empty()) return Status::error("a setting name cannot be empty");
  std::lock_guard lock(impl_->mu);
  return impl_->upsert_meta(key, value, fmt::format("save setting '{}'", key)).status();
}

Result<std::optional<std::string>> Store::meta(const std::string& key) const {
  std::lock_guard lock(impl_->mu);
  return impl_->meta(key);
}

}  // namespace peak
