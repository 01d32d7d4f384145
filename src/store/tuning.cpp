// The tuning tables (schema 3): one row per tuning search and one per configuration it
// considered (pruned ones included, with why).
#include "store/store_impl.h"

namespace peak {
namespace store_detail {

const RecordTable<TuningRunRecord>& tuning_runs_table() {
  using T = TuningRunRecord;
  static const RecordTable<T> table{
      TableSql("tuning_runs", 3)
          .index("tuning_runs_checkpoint", "checkpoint_id")
          .rows_never_change(),
      {
          id_field(&T::id),
          attempt_ref(&T::attempt_id),
          checkpoint_ref("checkpoint_id", &T::checkpoint_id),
          text_field("source_hash", &T::source_hash),
          text_field("strategy", &T::strategy),
          text_field("options_json", &T::options_json),
          text_field("space_json", &T::space_json),
          created_field(&T::created_at),
      },
  };
  return table;
}

const RecordTable<TuningConfigRecord>& tuning_configs_table() {
  using T = TuningConfigRecord;
  static const RecordTable<T> table{
      TableSql("tuning_configs", 3).index("tuning_configs_run", "run_id").rows_never_change(),
      {
          id_field(&T::id),
          int_field("run_id", &T::run_id, "INTEGER NOT NULL REFERENCES tuning_runs(id)"),
          int_field("position", &T::position),
          text_field("config_json", &T::config_json),
          text_field("stage", &T::stage),
          text_field("disposition", &T::disposition),
          text_field("reason", &T::reason),
          real_field("score_ms", &T::score_ms),
          real_field("compile_s", &T::compile_s),
          real_field("validate_s", &T::validate_s),
          real_field("time_s", &T::time_s),
          text_field("resources_json", &T::resources_json),
          text_field("launch_json", &T::launch_json),
          created_field(&T::created_at),
      },
  };
  return table;
}

}  // namespace store_detail

using namespace store_detail;

Result<int64_t> Store::add_tuning_run(const TuningRunRecord& r) {
  return impl_->insert(tuning_runs_table(), r, "record a tuning run");
}

Result<std::vector<TuningRunRecord>> Store::tuning_runs() const {
  std::lock_guard lock(impl_->mu);
  return impl_->list(tuning_runs_table(), "", std::nullopt, "list tuning runs");
}

Status Store::add_tuning_configs(const std::vector<TuningConfigRecord>& rows) {
  std::lock_guard lock(impl_->mu);
  if (auto s = impl_->exec("BEGIN IMMEDIATE", "record tuning configurations"); !s) return s;
  const auto& table = tuning_configs_table();
  const std::string now = utc_now_iso8601();
  for (const auto& r : rows) {
    auto id = impl_->change(table.insert_sql().c_str(), "record a tuning configuration",
                            [&](Stmt& s) { table.bind(s, r, now); });
    if (!id) {
      impl_->exec("ROLLBACK", "roll back");
      return id.status();
    }
  }
  return impl_->exec("COMMIT", "record tuning configurations");
}

Result<std::vector<TuningConfigRecord>> Store::tuning_configs(int64_t run_id) const {
  std::lock_guard lock(impl_->mu);
  return impl_->list(tuning_configs_table(), "run_id", run_id, "list tuning configurations");
}

}  // namespace peak
