// The workflows table: one row per command that does work; its status, state and owner change.
#include <fmt/format.h>

#include "store/store_impl.h"

namespace peak {
namespace store_detail {
namespace {

using W = WorkflowRecord;

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

}  // namespace

const RecordTable<WorkflowRecord>& workflows_table() {
  static const RecordTable<W> table{
      TableSql("workflows")
          .with_triggers(R"sql(CREATE TRIGGER workflows_no_delete BEFORE DELETE ON workflows
  BEGIN SELECT RAISE(ABORT, 'peak store: workflows are append-only'); END;
CREATE TRIGGER workflows_fixed_columns BEFORE UPDATE OF id, kind, args_json, started_at ON workflows
  BEGIN SELECT RAISE(ABORT, 'peak store: only the status and state of a workflow change'); END;
)sql"),
      {
          id_field(&W::id),
          text_field("kind", &W::kind),
          text_field("args_json", &W::args_json),
          text_field("status", &W::status),
          text_field("started_at", &W::started_at),
          text_field("finished_at", &W::finished_at),
          text_field("state_json", &W::state_json),
          // Schema 2: the process that runs it.
          since(2, int_field("owner_pid", &W::owner_pid, "INTEGER NOT NULL DEFAULT 0")),
          since(2, text_field("owner_host", &W::owner_host, "TEXT NOT NULL DEFAULT ''")),
          since(2, text_field("owner_start", &W::owner_start, "TEXT NOT NULL DEFAULT ''")),
      },
  };
  return table;
}

}  // namespace store_detail

using namespace store_detail;

Result<int64_t> Store::add_workflow(const WorkflowRecord& w) {
  if (w.kind.empty()) return make_error("cannot record workflow: its kind is empty");
  WorkflowRecord row = w;
  if (row.status.empty()) row.status = "running";
  if (!valid_workflow_status(row.status))
    return make_error(fmt::format(
        "cannot record workflow: '{}' is not a workflow status (a lowercase word such as "
        "running, passed, failed, interrupted)",
        row.status));
  if (row.started_at.empty()) row.started_at = utc_now_iso8601();
  return impl_->insert(workflows_table(), row, "record workflow", /*durable=*/true);
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
  auto w = impl_->find(workflows_table(), id, "read workflow");
  if (!w) return w.status();
  if (!*w) return make_error(fmt::format("there is no workflow {}", id));
  return std::move(**w);
}

Result<std::vector<WorkflowRecord>> Store::workflows() const {
  std::lock_guard lock(impl_->mu);
  return impl_->list(workflows_table(), "", std::nullopt, "list workflows");
}

}  // namespace peak
