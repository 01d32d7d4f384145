// The attempts table (one row per LLM call) and attempt_checkpoints (the checkpoint an attempt
// produced).
#include <fmt/format.h>

#include "store/store_impl.h"

namespace peak {
namespace store_detail {

const RecordTable<AttemptRecord>& attempts_table() {
  using A = AttemptRecord;
  // Workflow id 0 means "not part of a workflow" and is stored as NULL.
  static const Field<A> workflow{
      {"workflow_id", "INTEGER REFERENCES workflows(id)"},
      [](Stmt& s, const A& a, std::string_view) {
        s.opt_id(a.workflow_id > 0 ? std::optional<int64_t>(a.workflow_id) : std::nullopt);
      },
      [](const Stmt& s, int c, A& a) { a.workflow_id = s.col_opt_id(c).value_or(0); }};
  static const RecordTable<A> table{
      TableSql("attempts").index("attempts_workflow", "workflow_id").rows_never_change(),
      {
          id_field(&A::id),
          workflow,
          checkpoint_ref("parent_checkpoint", &A::parent_checkpoint),
          text_field("transformation", &A::transformation),
          int_field("pass_index", &A::pass_index),
          int_field("attempt", &A::attempt),
          text_field("region", &A::region),
          text_field("driver", &A::driver),
          text_field("model", &A::model),
          text_field("producer", &A::producer),
          text_field("prompt_key", &A::prompt_key),
          text_field("prompt_blob", &A::prompt_blob),
          text_field("reply_blob", &A::reply_blob),
          int_field("prompt_tokens", &A::prompt_tokens),
          int_field("completion_tokens", &A::completion_tokens),
          real_field("latency_s", &A::latency_s),
          text_field("disposition", &A::disposition),
          text_field("error", &A::error),
          created_field(&A::created_at),
          since(2, bool_field("infrastructure", &A::infrastructure,
                              "INTEGER NOT NULL DEFAULT 0\n  CHECK(infrastructure IN (0, 1))")),
      },
  };
  return table;
}

const TableSql& attempt_checkpoints_table() {
  static const TableSql table =
      TableSql("attempt_checkpoints")
          .column("attempt_id", "INTEGER NOT NULL REFERENCES attempts(id)")
          .column("checkpoint_id", "INTEGER NOT NULL REFERENCES checkpoints(id)")
          .column("created_at", "TEXT NOT NULL")
          .constraint("PRIMARY KEY(attempt_id, checkpoint_id)")
          .index("attempt_checkpoints_checkpoint", "checkpoint_id")
          .rows_never_change();
  return table;
}

}  // namespace store_detail

using namespace store_detail;

Result<int64_t> Store::add_attempt(const AttemptRecord& a) {
  return impl_->insert(attempts_table(), a, "record attempt");
}

Result<std::vector<AttemptRecord>> Store::attempts(std::optional<int64_t> workflow_id) const {
  std::lock_guard lock(impl_->mu);
  return impl_->list(attempts_table(), "workflow_id", workflow_id, "list attempts");
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

}  // namespace peak
