#pragma once
// The CPU reference of family "matmul" in float64. The reference is ours, never the candidate's:
// it runs in the parent process.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "family/family.h"

namespace peak::matmul {

// Arrays A (M*K, row-major), B (K*N, row-major) or Bt (N*K, row-major: B stored K-major, as
// WGMMA's fp8 wants it), output C (M*N, row-major); scalars M, N, K; optionally the per-tensor
// scales A_scale and B_scale (one element each), which multiply every output: C = A_scale *
// B_scale * A B (an fp8 GEMM's dequantization). Computes output elements at `indices` (flat indices
// into C) in float64 from the typed input bytes, with per element the "absolute reference" sum_k
// |a_ik * b_kj|, the scale of the rounding error a float accumulation can make (used to scale the
// tolerance). Each element is summed over k in ascending order, so results do not depend on which
// indices are requested. Fails with a message when the context does not follow the convention, an
// input is missing or has the wrong byte count, or an index is out of range.
Result<std::map<std::string, ReferenceValues>> reference_values(const KernelContext& ctx,
                                                                const Shape& shape,
                                                                const ReferenceInputs& inputs,
                                                                const ReferenceIndices& indices);

// Checks that `ctx` follows the convention: arrays A, B and output C (the only output), scalars
// M, N, K, sizes M * K, K * N and M * N. An error says what differs.
Status check_convention(const KernelContext& ctx);

}  // namespace peak::matmul
