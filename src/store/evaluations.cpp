// The evaluations table (schema 2): every evaluation of a checkpoint, kept forever; and the rule
// that picks a checkpoint's result among them.
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "store/store_impl.h"

namespace peak {
namespace store_detail {

const RecordTable<EvaluationRecord>& evaluations_table() {
  using E = EvaluationRecord;
  static const RecordTable<E> table{
      TableSql("evaluations", 2)
          .index("evaluations_checkpoint", "checkpoint_id")
          .rows_never_change(),
      {
          id_field(&E::id),
          int_field("checkpoint_id", &E::checkpoint_id,
                    "INTEGER NOT NULL REFERENCES checkpoints(id)"),
          ref_field("workflow_id", &E::workflow_id, "INTEGER REFERENCES workflows(id)"),
          text_field("kind", &E::kind),
          text_field("options_json", &E::options_json),
          bool_field("standard", &E::standard, "INTEGER NOT NULL CHECK(standard IN (0, 1))"),
          text_field("disposition", &E::disposition),
          text_field("shape", &E::shape),
          real_field("gflops", &E::gflops),
          text_field("device", &E::device),
          text_field("summary_blob", &E::summary_blob),
          created_field(&E::created_at),
      },
  };
  return table;
}

void fill_from_summary(const std::string& summary_json, EvaluationRecord& e) {
  auto j = nlohmann::json::parse(summary_json, nullptr, false);
  if (!j.is_object()) j = nlohmann::json::object();
  bool timed = j.contains("bench") && j["bench"].is_array() && !j["bench"].empty();
  e.disposition = j.value("disposition", timed ? "passed" : "not_run");
  if (timed && j["bench"][0].is_object()) {
    e.shape = j["bench"][0].value("shape", "");
    e.gflops = j["bench"][0].value("gflops", std::numeric_limits<double>::quiet_NaN());
  } else {
    e.gflops = std::numeric_limits<double>::quiet_NaN();
  }
  if (j.contains("device") && j["device"].is_object()) e.device = j["device"].value("name", "");
}

}  // namespace store_detail

Result<int64_t> Store::add_evaluation(const EvaluationRecord& e) {
  if (e.kind.empty()) return make_error("cannot record an evaluation: its kind is empty");
  return impl_->insert(store_detail::evaluations_table(), e, "record evaluation",
                       /*durable=*/true);
}

Result<std::vector<EvaluationRecord>> Store::evaluations(
    std::optional<int64_t> checkpoint_id) const {
  std::lock_guard lock(impl_->mu);
  return impl_->list(store_detail::evaluations_table(), "checkpoint_id", checkpoint_id,
                     "list evaluations");
}

bool kind_may_be_result(const std::string& kind) {
  return kind != kSuiteKind && kind != kDispatchKind;
}

std::optional<size_t> result_evaluation(const std::vector<EvaluationRecord>& ev) {
  if (ev.empty()) return std::nullopt;
  for (bool standard_only : {true, false}) {
    std::optional<size_t> best;
    for (size_t i = 0; i < ev.size(); ++i) {
      const auto& e = ev[i];
      if (!kind_may_be_result(e.kind)) continue;
      if (e.disposition != "passed" || (standard_only && !e.standard)) continue;
      double g = std::isfinite(e.gflops) ? e.gflops : -1;
      double b = best && std::isfinite(ev[*best].gflops) ? ev[*best].gflops : -1;
      if (!best || g > b) best = i;
    }
    if (best) return best;
  }
  // The latest; a shape-suite benchmark or a dispatch table times other shapes and is never the
  // result.
  for (size_t i = ev.size(); i-- > 0;)
    if (kind_may_be_result(ev[i].kind)) return i;
  return std::nullopt;
}

}  // namespace peak
