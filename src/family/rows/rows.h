#pragma once
// What the row families (softmax, rmsnorm, layernorm) share: R rows of N elements, row-major,
// each output row computed from its input row and from per-column vectors (the weight W, the
// bias B). A member derives from RowFamily, names its per-column inputs and computes one row; the
// rest (the convention check, the reading of typed inputs, the threads, the tolerance, the
// cuDNN baseline, the bytes headline, the suite classes) is here, the same for all three.
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "family/family.h"
#include "family/reference_support.h"

namespace peak::rows {

// One output row: the requested columns and where their results go.
using peak::RowRequest;

class RowFamily : public Family {
 public:
  bool has_cpu_reference() const override { return true; }
  // Scalars R and N; input X (R * N), the per-column inputs (N each), output Y (R * N) and no
  // other output; X and Y floating (f32, f16, bf16).
  Status check_cpu_reference(const KernelContext& ctx) const override;
  Result<std::map<std::string, ReferenceValues>> cpu_reference(
      const KernelContext& ctx, const Shape& shape, const ReferenceInputs& inputs,
      const ReferenceIndices& indices) const override;
  // The rows of X holding the requested elements of Y, every column of each: the timed checks
  // generate those alone (the per-column inputs, N elements each, are read whole).
  std::optional<ReferenceIndices> reference_reads(const KernelContext& ctx, const Shape& shape,
                                                  const ReferenceIndices& indices) const override;
  // {R, N}: Y is a matrix, so validation samples its first and last rows and columns.
  std::vector<int64_t> output_dims(const KernelContext& ctx, const Shape& shape) const override;
  // The dtype rule over a reduction of N, with X's dtype as the input's: a bf16 output is
  // dominated by its 2 ulp (1.6e-2), an fp32 one by sqrt(N) * 1e-6.
  double default_tolerance(const KernelContext& ctx, const Shape& shape,
                           const ArraySpec& output) const override;
  // cuDNN on the CUDA runner; HIP and HLSL have no vendor baseline for these.
  std::string baseline_name(std::string_view backend) const override;
  // Only when X and Y share a floating dtype and W, B are of that dtype or f32: what cuDNN's
  // softmax and normalization take.
  std::string baseline(const KernelContext& ctx, std::string_view backend) const override;
  // A row kernel moves every element once in and once out and does a few operations on it:
  // bytes per second is what says how close it is to the device.
  Headline headline(const KernelContext&) const override { return Headline::bytes; }
  // decode, short-rows, long-rows, regular over scalars R and N (rows.cpp says why).
  std::vector<ClassRule> default_class_rules(const KernelContext& ctx) const override;

  // The per-column inputs of the family, in kernel order ({}, {"W"}, {"W", "B"}).
  virtual std::vector<std::string_view> column_inputs() const = 0;
  // The formula in words, for the convention's error messages.
  virtual std::string_view formula() const = 0;
  // One row: `x` holds its N inputs, `columns` the per-column inputs (column_inputs() order),
  // all as float64 from the stored values. Writes value and magnitude (the scale of the
  // rounding error a float kernel can make there) of each requested column; a row's statistics
  // are computed once, however many of its columns are requested.
  virtual void compute_row(std::span<const double> x,
                           const std::vector<std::vector<double>>& columns,
                           const RowRequest& request, ReferenceValues& out) const = 0;
};

}  // namespace peak::rows
