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
// float64 from the typed input bytes. Returns one vector per output array name.
Result<std::map<std::string, std::vector<double>>> cpu_reference(
    const KernelContext& ctx, const Shape& shape,
    const std::map<std::string, std::vector<uint8_t>>& inputs,
    const std::map<std::string, std::vector<int64_t>>& indices);

}  // namespace peak
