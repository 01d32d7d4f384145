#pragma once
// Family "matmul": C = A * B with A (M x K), B (K x N) and C (M x N) row-major, scalars M, N, K;
// B may be stored K-major instead (Bt, N x K), with per-tensor scales (fp8: reference.h).
// The first member of the family interface (docs/families.md).
#include "family/family.h"

namespace peak::matmul {

class MatmulFamily final : public Family {
 public:
  std::string_view name() const override { return "matmul"; }
  bool has_cpu_reference() const override { return true; }
  Status check_cpu_reference(const KernelContext& ctx) const override;
  Result<std::map<std::string, ReferenceValues>> cpu_reference(
      const KernelContext& ctx, const Shape& shape, const ReferenceInputs& inputs,
      const ReferenceIndices& indices) const override;
  // Row i of A and column j of B for each C[i][j] asked.
  std::optional<ReferenceIndices> reference_reads(const KernelContext& ctx, const Shape& shape,
                                                  const ReferenceIndices& indices) const override;
  // {M, N}: C is a matrix.
  std::vector<int64_t> output_dims(const KernelContext& ctx, const Shape& shape) const override;
  // cuBLAS (SGEMM, GemmEx) on the CUDA runner, which HIP contexts run on NVIDIA too.
  std::string baseline_name(std::string_view backend) const override;
  // cuBLAS, and on CUDA "cublaslt" too (cublasLt's fp8 GEMM).
  bool has_baseline(std::string_view name, std::string_view backend) const override;
  // Only when A and B share a floating dtype and C is floating: what cuBLAS computes; e4m3 A and
  // Bt with scales and a bf16 or f32 C: "cublaslt" (CUDA only).
  std::string baseline(const KernelContext& ctx, std::string_view backend) const override;
  Headline headline(const KernelContext&) const override { return Headline::flops; }
  // large-k, small-m, small-k, wide, square, irregular (over scalars M, N and K).
  std::vector<ClassRule> default_class_rules(const KernelContext& ctx) const override;
  std::optional<TileWork> tile_work(const KernelContext& ctx, const Shape& shape) const override;
};

// The member the registry holds.
const Family& family();

}  // namespace peak::matmul
