#pragma once
// Which of a checkpoint's evaluations is its result (docs/store.md, "Results"): the one rule
// that `peak log`, `peak show`, `peak report` and the engine's comparisons with the parent and
// the seed all go through.
#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace peak {

// The kind of a shape-suite benchmark's evaluation (`peak bench`): it times the suite, not the
// bench shapes, so it is never a checkpoint's result.
inline constexpr const char* kSuiteKind = "suite";
// The kind of a per-class tuning's evaluation (`peak tune --classes`): it tunes and times the
// suite's classes and holds the dispatch table, so it is never a checkpoint's result either.
inline constexpr const char* kDispatchKind = "dispatch";

// Whether an evaluation of `kind` times the checkpoint's bench shapes and may be its result.
bool kind_may_be_result(std::string_view kind);

// What the rule looks at of one evaluation.
struct ResultCandidate {
  std::string_view kind;
  bool standard = false;  // made under the default options
  std::string_view disposition;
  // The headline measure: GFLOP/s at the first bench shape (NaN: not timed). At one shape it
  // orders evaluations as the fastest median time does.
  double gflops = 0;
};

// Which of a checkpoint's evaluations (oldest first) is its result:
//   1. among those that passed under the default options, the highest GFLOP/s at the first
//      bench shape (the earliest of equals);
//   2. if none passed under the default options, the same among those that passed under any;
//   3. if none passed, the latest.
// Suite benchmarks and dispatch tables are never the result; nothing when there is no other
// evaluation. Where a checkpoint has no result, its result summary is the re-evaluation a store
// of schema 1 kept (setting eval.<id>), else the summary recorded with the checkpoint
// (store/store.h, checkpoint_result_summary).
std::optional<size_t> result_index(const std::vector<ResultCandidate>& evaluations);

}  // namespace peak
