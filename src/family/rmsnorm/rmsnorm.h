#pragma once
// Family "rmsnorm": Y[r, c] = X[r, c] * rsqrt(mean_c(X[r, :]^2) + 1e-6) * W[c] over R rows of N
// elements, row-major, with the weight W of N elements; scalars R and N.
#include "family/rows/rows.h"

namespace peak::rmsnorm {

inline constexpr double kEpsilon = 1e-6;

class RmsnormFamily final : public rows::RowFamily {
 public:
  std::string_view name() const override { return "rmsnorm"; }
  std::vector<std::string_view> column_inputs() const override { return {"W"}; }
  std::string_view formula() const override {
    return "Y[r, c] = X[r, c] * rsqrt(mean over c of X[r, c]^2 + 1e-6) * W[c]";
  }
  // The row's mean square once, then each requested column; the magnitude is |Y| (every factor
  // errs relative to its value).
  void compute_row(std::span<const double> x, const std::vector<std::vector<double>>& columns,
                   const rows::RowRequest& request, ReferenceValues& out) const override;
};

// The member the registry holds.
const Family& family();

}  // namespace peak::rmsnorm
