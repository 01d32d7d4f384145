#pragma once
// What the members' CPU references share: the checks of a shape's scalars and of the typed input
// bytes, and the spreading of independent output rows over threads.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "family/family.h"

namespace peak {

// f32, f16 or bf16: the dtypes the members' references read and write.
bool is_floating(DType t);
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
