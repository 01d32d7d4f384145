#include "results/result.h"

#include <cmath>

namespace peak {

bool kind_may_be_result(std::string_view kind) {
  return kind != kSuiteKind && kind != kDispatchKind;
}

std::optional<size_t> result_index(const std::vector<ResultCandidate>& ev) {
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
  for (size_t i = ev.size(); i-- > 0;)
    if (kind_may_be_result(ev[i].kind)) return i;
  return std::nullopt;
}

}  // namespace peak
