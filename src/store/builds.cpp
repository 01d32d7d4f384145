// The builds table: one row per compilation (per tuning configuration).
#include "store/store_impl.h"

namespace peak {
namespace store_detail {

const RecordTable<BuildRecord>& builds_table() {
  using B = BuildRecord;
  static const RecordTable<B> table{
      TableSql("builds")
          .index("builds_attempt", "attempt_id")
          .index("builds_source", "source_hash")
          .rows_never_change(),
      {
          id_field(&B::id),
          attempt_ref(&B::attempt_id),
          text_field("source_hash", &B::source_hash),
          text_field("config_json", &B::config_json),
          text_field("command", &B::command),
          int_field("exit_code", &B::exit_code),
          text_field("log_blob", &B::log_blob),
          real_field("seconds", &B::seconds),
          text_field("disposition", &B::disposition),
          text_field("resources_json", &B::resources_json),
          text_field("toolchain", &B::toolchain),
          bool_field("cached", &B::cached, "INTEGER NOT NULL CHECK(cached IN (0, 1))"),
          created_field(&B::created_at),
      },
  };
  return table;
}

}  // namespace store_detail

Result<int64_t> Store::add_build(const BuildRecord& b) {
  return impl_->insert(store_detail::builds_table(), b, "record build");
}

Result<std::vector<BuildRecord>> Store::builds(std::optional<int64_t> attempt_id) const {
  std::lock_guard lock(impl_->mu);
  return impl_->list(store_detail::builds_table(), "attempt_id", attempt_id, "list builds");
}

}  // namespace peak
