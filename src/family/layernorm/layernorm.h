#pragma once
// Family "layernorm": Y[r, c] = (X[r, c] - mean) * rsqrt(var + 1e-5) * W[c] + B[c] over R rows of
// N elements, row-major, mean and var (the population variance) of the row, weight W and bias B
// of N elements; scalars R and N.
#include "family/rows/rows.h"

namespace peak::layernorm {

inline constexpr double kEpsilon = 1e-5;

class LayernormFamily final : public rows::RowFamily {
 public:
  std::string_view name() const override { return "layernorm"; }
  std::vector<std::string_view> column_inputs() const override { return {"W", "B"}; }
  std::string_view formula() const override {
    return "Y[r, c] = (X[r, c] - mean) * rsqrt(var + 1e-5) * W[c] + B[c], mean and var (the "
           "population variance) of row r";
  }
  // The row's mean and variance once (two passes, as the float64 reference needs no shortcut),
  // then each requested column. The magnitude is (|X[r, c]| + |mean|) * rsqrt(var + eps) * |W[c]|
  // + |B[c]|: subtracting the mean cancels, so a float kernel errs relative to the terms, not to
  // their difference.
  void compute_row(std::span<const double> x, const std::vector<std::vector<double>>& columns,
                   const rows::RowRequest& request, ReferenceValues& out) const override;
};

// The member the registry holds.
const Family& family();

}  // namespace peak::layernorm
