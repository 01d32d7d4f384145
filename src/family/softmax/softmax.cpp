#include "family/softmax/softmax.h"

#include <algorithm>
#include <cmath>

namespace peak::softmax {

void SoftmaxFamily::compute_row(std::span<const double> x, const std::vector<std::vector<double>>&,
                                const rows::RowRequest& request, ReferenceValues& out) const {
  double max = -INFINITY;
  for (double v : x) max = std::max(max, v);
  double sum = 0;
  for (double v : x) sum += std::exp(v - max);
  for (const auto& [c, pos] : request.cols) {
    out.value[pos] = std::exp(x[c] - max) / sum;
    out.abs[pos] = out.value[pos];
  }
}

double SoftmaxFamily::default_tolerance(const KernelContext& ctx, const Shape& shape,
                                        const ArraySpec& output) const {
  return RowFamily::default_tolerance(ctx, shape, output) + 32 * 1.2e-7;
}

const Family& family() {
  static const SoftmaxFamily f;
  return f;
}

}  // namespace peak::softmax
