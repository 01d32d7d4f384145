#pragma once
// CPU references in float64 for kernel families peak knows. The reference is ours, never the
// candidate's: it runs in the parent process.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "context/context.h"

namespace peak {

// True when `family` has a CPU reference (today: "matmul").
bool has_cpu_reference(const std::string& family);

// Family "matmul": arrays A (M*K, row-major), B (K*N, row-major), output C (M*N, row-major);
// scalars M, N, K. Computes output elements at `indices` (flat indices into the output array) in
// float64 from the typed input bytes. Returns one vector per output array named in `indices`,
// element r for indices[r] (the caller may pass every index for small shapes). Each element is
// summed over k in ascending order, so results do not depend on which indices are requested.
// Fails with a message when the context does not follow the convention, an input is missing or
// has the wrong byte count, or an index is out of range.
Result<std::map<std::string, std::vector<double>>> cpu_reference(
    const KernelContext& ctx, const Shape& shape,
    const std::map<std::string, std::vector<uint8_t>>& inputs,
    const std::map<std::string, std::vector<int64_t>>& indices);

// Same arguments; per requested element the "absolute reference" sum_k |a_ik * b_kj|, the scale
// of the rounding error a float accumulation can make (used to scale the tolerance).
Result<std::map<std::string, std::vector<double>>> cpu_reference_abs(
    const KernelContext& ctx, const Shape& shape,
    const std::map<std::string, std::vector<uint8_t>>& inputs,
    const std::map<std::string, std::vector<int64_t>>& indices);

// Both of the above from one pass over the inputs (each vector aligned with the requested
// indices of its output).
struct ReferenceValues {
  std::vector<double> value;  // sum_k a_ik * b_kj
  std::vector<double> abs;    // sum_k |a_ik * b_kj|
};
Result<std::map<std::string, ReferenceValues>> cpu_reference_values(
    const KernelContext& ctx, const Shape& shape,
    const std::map<std::string, std::vector<uint8_t>>& inputs,
    const std::map<std::string, std::vector<int64_t>>& indices);

// Checks that `ctx` follows the convention of its family's CPU reference (for "matmul": arrays
// A, B and output C, scalars M, N, K, sizes M * K, K * N and M * N). An error says what differs.
Status check_cpu_reference(const KernelContext& ctx);

}  // namespace peak
