#include "family/reference_support.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

namespace peak {

// e4m3 is left out: the row and attention families have no fp8 contexts.
bool is_floating(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

double dtype_epsilon(DType t) {
  return t == DType::f16    ? 9.8e-4
         : t == DType::bf16 ? 7.9e-3
         : t == DType::e4m3 ? 0.125
         : t == DType::i32  ? 0
                            : 1.2e-7;
}

Result<std::vector<RowRequest>> group_by_row(const std::vector<int64_t>& indices, int64_t rows,
                                             int64_t row_length, std::string_view what) {
  std::vector<std::pair<int64_t, size_t>> order;  // (flat index, position)
  order.reserve(indices.size());
  for (size_t p = 0; p < indices.size(); ++p) {
    if (indices[p] < 0 || indices[p] >= rows * row_length)
      return make_error(fmt::format("reference: index {} is outside {}", indices[p], what));
    order.emplace_back(indices[p], p);
  }
  std::sort(order.begin(), order.end());
  std::vector<RowRequest> out;
  for (const auto& [idx, pos] : order) {
    if (out.empty() || out.back().row != idx / row_length)
      out.push_back(RowRequest{idx / row_length, {}});
    out.back().cols.emplace_back(idx % row_length, pos);
  }
  return out;
}

Result<int64_t> reference_scalar(const Shape& shape, std::string_view name) {
  auto it = shape.values.find(std::string(name));
  if (it == shape.values.end())
    return make_error(
        fmt::format("reference: shape '{}' gives no value to {}", shape.text(), name));
  if (it->second < 0)
    return make_error(fmt::format("reference: {} = {} is negative", name, it->second));
  return it->second;
}

Status check_reference_inputs(const KernelContext& ctx, const ReferenceInputs& inputs,
                              const std::vector<std::pair<std::string, int64_t>>& counts) {
  for (const auto& [name, count] : counts) {
    auto it = inputs.find(name);
    if (it == inputs.end())
      return Status::error(fmt::format("reference: input {} is missing", name));
    const DType t = find_array(ctx, name)->dtype;
    const size_t want = static_cast<size_t>(count) * dtype_size(t);
    if (it->second.size() != want)
      return Status::error(
          fmt::format("reference: input {} has {} bytes; {} elements of {} need {}", name,
                      it->second.size(), count, to_string(t), want));
  }
  return Status::ok();
}

void for_rows(size_t rows, double elements, const std::function<void(size_t, size_t)>& work) {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const size_t nthreads = std::min<size_t>({hw, 32, rows, static_cast<size_t>(elements / 4e6) + 1});
  std::vector<std::thread> threads;
  for (size_t t = 1; t < nthreads; ++t)
    threads.emplace_back(work, rows * t / nthreads, rows * (t + 1) / nthreads);
  work(0, rows / std::max<size_t>(nthreads, 1));
  for (auto& th : threads) th.join();
}

}  // namespace peak
