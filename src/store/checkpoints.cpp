// The checkpoints table: the tree of kernel versions.
#include <fmt/format.h>

#include "store/store_impl.h"

namespace peak {
namespace store_detail {

const RecordTable<CheckpointRecord>& checkpoints_table() {
  using C = CheckpointRecord;
  static const RecordTable<C> table{
      TableSql("checkpoints").index("checkpoints_parent", "parent").rows_never_change(),
      {
          id_field(&C::id),
          checkpoint_ref("parent", &C::parent),
          text_field("branch", &C::branch),
          text_field("transformation", &C::transformation),
          text_field("message", &C::message),
          text_field("context_blob", &C::context_blob),
          text_field("source_blob", &C::source_blob),
          text_field("summary_json", &C::summary_json),
          text_field("top_configs_json", &C::top_configs_json),
          created_field(&C::created_at),
      },
  };
  return table;
}

}  // namespace store_detail

using namespace store_detail;

Result<bool> Store::Impl::checkpoint_exists(int64_t id) {
  bool found = false;
  auto st = query(
      "SELECT 1 FROM checkpoints WHERE id = ?", "look up a checkpoint",
      [&](Stmt& s) { s.integer(id); }, [&](Stmt&) { found = true; });
  if (!st) return st;
  return found;
}

Result<int64_t> Store::add_checkpoint(const CheckpointRecord& c) {
  // An empty branch means the checkpoint was made on a detached HEAD.
  if (!c.branch.empty()) {
    if (auto s = check_name("branch", c.branch); !s)
      return make_error("cannot record checkpoint: " + s.message());
  }
  return impl_->insert(checkpoints_table(), c, "record checkpoint", /*durable=*/true);
}

Result<CheckpointRecord> Store::checkpoint(int64_t id) const {
  std::lock_guard lock(impl_->mu);
  auto c = impl_->find(checkpoints_table(), id, "read checkpoint");
  if (!c) return c.status();
  if (!*c) return make_error(fmt::format("there is no checkpoint {} (see `peak log`)", id));
  return std::move(**c);
}

Result<std::vector<CheckpointRecord>> Store::checkpoints() const {
  std::lock_guard lock(impl_->mu);
  return impl_->list(checkpoints_table(), "", std::nullopt, "list checkpoints");
}

}  // namespace peak
