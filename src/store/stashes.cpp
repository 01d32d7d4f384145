// The stashes table (schema 2): working files set aside; only a stash's state and finished_at
// change.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "store/store_impl.h"

namespace peak {
namespace store_detail {

const RecordTable<StashRecord>& stashes_table() {
  using S = StashRecord;
  // The files, path -> blob, as one JSON object.
  static const Field<S> files{{"files_json", "TEXT NOT NULL"},
                              [](Stmt& s, const S& r, std::string_view) {
                                nlohmann::json j = nlohmann::json::object();
                                for (const auto& [path, blob] : r.files) j[path] = blob;
                                s.text(j.dump());
                              },
                              [](const Stmt& s, int c, S& r) {
                                auto j = nlohmann::json::parse(s.col_text(c), nullptr, false);
                                if (j.is_object())
                                  for (const auto& [path, blob] : j.items())
                                    if (blob.is_string()) r.files[path] = blob.get<std::string>();
                              }};
  static const RecordTable<S> table{
      TableSql("stashes", 2)
          .with_triggers(R"sql(CREATE TRIGGER stashes_no_delete BEFORE DELETE ON stashes
  BEGIN SELECT RAISE(ABORT, 'peak store: stashes are kept; pop or drop them'); END;
CREATE TRIGGER stashes_fixed_columns
  BEFORE UPDATE OF id, base_checkpoint, branch, message, files_json, created_at ON stashes
  BEGIN SELECT RAISE(ABORT, 'peak store: only the state of a stash changes'); END;
)sql"),
      {
          id_field(&S::id),
          checkpoint_ref("base_checkpoint", &S::base_checkpoint),
          text_field("branch", &S::branch),
          text_field("message", &S::message),
          files,
          text_field("state", &S::state,
                     "TEXT NOT NULL CHECK(state IN ('kept', 'popped', 'dropped'))"),
          created_field(&S::created_at),
          text_field("finished_at", &S::finished_at),
      },
  };
  return table;
}

}  // namespace store_detail

using namespace store_detail;

Result<int64_t> Store::add_stash(const StashRecord& r) {
  if (r.files.empty()) return make_error("cannot record a stash without files");
  for (const auto& [path, blob] : r.files)
    if (!is_blob_hash(blob))
      return make_error(fmt::format("cannot record a stash: '{}' is not a blob hash", blob));
  StashRecord row = r;
  row.state = "kept";
  row.finished_at = "";
  return impl_->insert(stashes_table(), row, "record stash", /*durable=*/true);
}

Result<std::vector<StashRecord>> Store::stashes(bool kept_only) const {
  std::lock_guard lock(impl_->mu);
  return impl_->select(stashes_table(), kept_only ? "state = 'kept'" : "", "list stashes",
                       [](Stmt&) {});
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

}  // namespace peak
