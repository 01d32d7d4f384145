#pragma once
// Family "softmax": Y[r, c] = exp(X[r, c] - max_c X[r, :]) / sum_c exp(X[r, c] - max) over R rows
// of N elements, row-major; scalars R and N. The worked example of docs/families.md.
#include "family/rows/rows.h"

namespace peak::softmax {

class SoftmaxFamily final : public rows::RowFamily {
 public:
  std::string_view name() const override { return "softmax"; }
  std::vector<std::string_view> column_inputs() const override { return {}; }
  std::string_view formula() const override {
    return "Y[r, c] = exp(X[r, c] - max(X[r, :])) / sum over c of exp(X[r, c] - max(X[r, :]))";
  }
  // The rule of every row family plus 32 fp32 ulps for exp: after the maximum is subtracted its
  // argument reaches -16 on uniform(-8, 8) rows, where a fast exp (__expf, exp2 of a prescaled
  // argument) errs by that much and the sqrt(N) term of a short row would not cover it.
  double default_tolerance(const KernelContext& ctx, const Shape& shape,
                           const ArraySpec& output) const override;
  // The row's maximum and sum of exponentials once, then each requested column; the magnitude
  // is |Y| (exp and the division err relative to the value, the sum by sqrt(N) ulps of it).
  void compute_row(std::span<const double> x, const std::vector<std::vector<double>>& columns,
                   const rows::RowRequest& request, ReferenceValues& out) const override;
};

// The member the registry holds.
const Family& family();

}  // namespace peak::softmax
