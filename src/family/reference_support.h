#pragma once
// What the members' CPU references share: the checks of a shape's scalars and of the typed input
// bytes, the requested output elements grouped by row, the rounding unit of a dtype, and the
// spreading of independent output rows over threads.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "family/family.h"

namespace peak {

// One output row: the requested columns and where their results go.
struct RowRequest {
  int64_t row = 0;
  std::vector<std::pair<int64_t, size_t>> cols;  // (column, position in the result vectors)
};

// f32, f16 or bf16: the dtypes the members' references read and write.
bool is_floating(DType t);
// The rounding unit of `t` (machine epsilon: f32 1.2e-7, f16 9.8e-4, bf16 7.9e-3; 0 for i32).
double dtype_epsilon(DType t);
// The flat indices of an output of `rows` rows of `row_length` elements, grouped by row in
// ascending order, each row with its columns; an index outside is an error naming it and `what`
// ("output Y of 15 elements (R=3 x N=5)").
Result<std::vector<RowRequest>> group_by_row(const std::vector<int64_t>& indices, int64_t rows,
                                             int64_t row_length, std::string_view what);
// The value of scalar `name` in `shape`: an error when it is missing or negative.
Result<int64_t> reference_scalar(const Shape& shape, std::string_view name);
// Each input named in `counts` is in `inputs` with that many elements of its dtype in `ctx`.
Status check_reference_inputs(const KernelContext& ctx, const ReferenceInputs& inputs,
                              const std::vector<std::pair<std::string, int64_t>>& counts);
// Calls work(first, last) over the rows 0 .. rows - 1, on several threads only when it pays: one
// more per 4e6 elements of `elements` (the work of all rows), at most 32 and the cores. Each row
// must write results of its own.
void for_rows(size_t rows, double elements, const std::function<void(size_t, size_t)>& work);

}  // namespace peak
