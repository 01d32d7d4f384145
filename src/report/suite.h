#pragma once
// The shape-suite benchmark (`peak bench`): one checkpoint's best configuration timed at every
// shape of its context's suite, the vendor library timed in the same run. The engine fills a
// SuiteResult from its measurements and stores its JSON form as an evaluation of kind "suite"
// (docs/store.md); `peak report` reads the latest one of each checkpoint back.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "results/suite.h"
#include "store/store.h"

namespace peak {

// The newest evaluation of `kind` of a checkpoint (one that passed, when `passed_only`) whose
// summary holds `part` (EvalSummary::suite, EvalSummary::dispatch_table): the evaluation's
// record and that part of its summary.
std::optional<std::pair<EvaluationRecord, nlohmann::json>> latest_summary_part(
    const Store& store, int64_t checkpoint, std::string_view kind,
    std::optional<nlohmann::json> EvalSummary::*part, bool passed_only = false);

// The newest suite benchmark recorded for a checkpoint (an evaluation of kind "suite"), if any.
std::optional<SuiteResult> latest_suite(const Store& store, int64_t checkpoint);

// The table (shape name, class, dims, GFLOP/s, vendor GFLOP/s, ratio, disposition) and the
// geometric mean, as text for a terminal and as Markdown.
std::string suite_text(const SuiteResult& s);
std::string suite_markdown(const SuiteResult& s);

}  // namespace peak
