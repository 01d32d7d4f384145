#include "family/rmsnorm/rmsnorm.h"

#include <cmath>

namespace peak::rmsnorm {

void RmsnormFamily::compute_row(std::span<const double> x,
                                const std::vector<std::vector<double>>& columns,
                                const rows::RowRequest& request, ReferenceValues& out) const {
  double squares = 0;
  for (double v : x) squares += v * v;
  const double n = static_cast<double>(x.size());
  const double scale = 1.0 / std::sqrt(squares / n + kEpsilon);
  const std::vector<double>& w = columns.at(0);
  for (const auto& [c, pos] : request.cols) {
    out.value[pos] = x[c] * scale * w[c];
    out.abs[pos] = std::fabs(out.value[pos]);
  }
}

const Family& family() {
  static const RmsnormFamily f;
  return f;
}

}  // namespace peak::rmsnorm
