// The evaluations table (schema 2): every evaluation of a checkpoint, kept forever; and a
// checkpoint's result among them (the rule is results/result.h's).
#include <limits>

#include <fmt/format.h>

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
  peak::fill_from_summary(parse_summary(summary_json), e);
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

void fill_from_summary(const EvalSummary& s, EvaluationRecord& e) {
  e.disposition = s.disposition_or_default();
  e.gflops = std::numeric_limits<double>::quiet_NaN();
  if (const SummaryBench* b = s.first_bench()) {
    e.shape = b->shape.value_or("");
    e.gflops = b->gflops.value_or(std::numeric_limits<double>::quiet_NaN());
  }
  if (s.device) e.device = s.device->name.value_or("");
}

std::optional<size_t> result_evaluation(const std::vector<EvaluationRecord>& ev) {
  std::vector<ResultCandidate> candidates;
  candidates.reserve(ev.size());
  for (const auto& e : ev) candidates.push_back({e.kind, e.standard, e.disposition, e.gflops});
  return result_index(candidates);
}

namespace {
// The evaluation summary in blob `hash` of checkpoint `checkpoint` (empty when it holds none);
// where the store does not hold the blob, says so in `note`.
EvalSummary summary_in_blob(const Store& store, const std::string& hash, int64_t checkpoint,
                            std::string* note) {
  if (auto blob = store.get_blob(hash)) return parse_summary(*blob);
  if (note)
    *note = fmt::format(
        "checkpoint {}: its evaluation is in a blob this store does not hold; its numbers are "
        "rebuilt from the measurement rows",
        checkpoint);
  return {};
}
}  // namespace

EvalSummary checkpoint_result_summary(const Store& store, const CheckpointRecord& c,
                                      std::string* note) {
  if (auto ev = store.evaluations(c.id); ev && !ev->empty()) {
    if (auto i = result_evaluation(*ev)) {
      EvalSummary e = summary_in_blob(store, (*ev)[*i].summary_blob, c.id, note);
      if (!e.empty()) return e;
    }
  }
  auto m = store.meta(fmt::format("eval.{}", c.id));
  if (m && *m) {
    EvalSummary e = summary_in_blob(store, **m, c.id, note);
    if (!e.empty()) return e;
  }
  return parse_summary(c.summary_json);
}

}  // namespace peak
