#include "family/layernorm/layernorm.h"

#include <cmath>

namespace peak::layernorm {

void LayernormFamily::compute_row(std::span<const double> x,
                                  const std::vector<std::vector<double>>& columns,
                                  const rows::RowRequest& request, ReferenceValues& out) const {
  const double n = static_cast<double>(x.size());
  double sum = 0;
  for (double v : x) sum += v;
  const double mean = sum / n;
  double squares = 0;
  for (double v : x) squares += (v - mean) * (v - mean);
  const double rstd = 1.0 / std::sqrt(squares / n + kEpsilon);
  const std::vector<double>& w = columns.at(0);
  const std::vector<double>& b = columns.at(1);
  for (const auto& [c, pos] : request.cols) {
    out.value[pos] = (x[c] - mean) * rstd * w[c] + b[c];
    out.abs[pos] = (std::fabs(x[c]) + std::fabs(mean)) * rstd * std::fabs(w[c]) + std::fabs(b[c]);
  }
}

const Family& family() {
  static const LayernormFamily f;
  return f;
}

}  // namespace peak::layernorm
