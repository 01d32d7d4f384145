// The measurements table: one row per timed run.
#include "store/store_impl.h"

namespace peak {
namespace store_detail {

const RecordTable<MeasurementRecord>& measurements_table() {
  using M = MeasurementRecord;
  static const RecordTable<M> table{
      TableSql("measurements")
          .index("measurements_attempt", "attempt_id")
          .index("measurements_checkpoint", "checkpoint_id")
          .rows_never_change(),
      {
          id_field(&M::id),
          attempt_ref(&M::attempt_id),
          checkpoint_ref("checkpoint_id", &M::checkpoint_id),
          text_field("config_json", &M::config_json),
          text_field("shape", &M::shape),
          text_field("what", &M::what),
          text_field("samples_json", &M::samples_json),
          real_field("median_ms", &M::median_ms),
          real_field("spread", &M::spread),
          real_field("gflops", &M::gflops),
          text_field("disposition", &M::disposition),
          text_field("device_json", &M::device_json),
          created_field(&M::created_at),
      },
  };
  return table;
}

}  // namespace store_detail

Result<int64_t> Store::add_measurement(const MeasurementRecord& m) {
  return impl_->insert(store_detail::measurements_table(), m, "record measurement");
}

Result<std::vector<MeasurementRecord>> Store::measurements(
    std::optional<int64_t> checkpoint_id) const {
  std::lock_guard lock(impl_->mu);
  return impl_->list(store_detail::measurements_table(), "checkpoint_id", checkpoint_id,
                     "list measurements");
}

}  // namespace peak
