// The validations table: one row per correctness check of a configuration at a shape.
#include "store/store_impl.h"

namespace peak {
namespace store_detail {

const RecordTable<ValidationRecord>& validations_table() {
  using V = ValidationRecord;
  static const RecordTable<V> table{
      TableSql("validations")
          .index("validations_attempt", "attempt_id")
          .index("validations_checkpoint", "checkpoint_id")
          .rows_never_change(),
      {
          id_field(&V::id),
          attempt_ref(&V::attempt_id),
          checkpoint_ref("checkpoint_id", &V::checkpoint_id),
          text_field("config_json", &V::config_json),
          text_field("shape", &V::shape),
          bool_field("hidden", &V::hidden, "INTEGER NOT NULL CHECK(hidden IN (0, 1))"),
          int_field("seed", &V::seed),
          real_field("max_abs_err", &V::max_abs_err),
          real_field("max_rel_err", &V::max_rel_err),
          text_field("disposition", &V::disposition),
          text_field("message", &V::message),
          real_field("seconds", &V::seconds),
          created_field(&V::created_at),
      },
  };
  return table;
}

}  // namespace store_detail

Result<int64_t> Store::add_validation(const ValidationRecord& v) {
  return impl_->insert(store_detail::validations_table(), v, "record validation");
}

Result<std::vector<ValidationRecord>> Store::validations(std::optional<int64_t> attempt_id) const {
  std::lock_guard lock(impl_->mu);
  return impl_->list(store_detail::validations_table(), "attempt_id", attempt_id,
                     "list validations");
}

}  // namespace peak
