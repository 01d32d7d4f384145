#pragma once
// Family "attention": the scaled dot-product attention forward of LLMs. Q (B x H x SQ x D), K and
// V (B x H x SKV x D), output O (B x H x SQ x D), each [batch, heads, sequence, head_dim]
// row-major; scalars B, H, SQ, SKV, D and CAUSAL (0 or 1):
//   O[b, h, i, :] = sum over j of P[i, j] * V[b, h, j, :],
//   P[i, :] = softmax over j of (Q[b, h, i, :] . K[b, h, j, :]) / sqrt(D),
// where CAUSAL masks the keys j > i + SKV - SQ (the diagonal aligned with the last query and the
// last key, as decoding with a KV cache needs); a query row with every key masked is 0.
#include "family/family.h"

namespace peak::attention {

class AttentionFamily final : public Family {
 public:
  std::string_view name() const override { return "attention"; }
  bool has_cpu_reference() const override { return true; }
  // Scalars B, H, SQ, SKV, D, CAUSAL; inputs Q, K, V and output O of the sizes above, floating.
  Status check_cpu_reference(const KernelContext& ctx) const override;
  // Per requested query row: its scores against every unmasked key, their maximum and sum of
  // exponentials once, then each requested column of O; the magnitude of O[i, d] is
  // sum over j of P[i, j] * |V[j, d]|, the scale of a float kernel's rounding error there.
  Result<std::map<std::string, ReferenceValues>> cpu_reference(
      const KernelContext& ctx, const Shape& shape, const ReferenceInputs& inputs,
      const ReferenceIndices& indices) const override;
  // The query rows of Q holding the requested rows of O, and K and V of their (batch, head)
  // pairs: the timed checks generate those alone.
  std::optional<ReferenceIndices> reference_reads(const KernelContext& ctx, const Shape& shape,
                                                  const ReferenceIndices& indices) const override;
  // {B * H * SQ, D}: O as a matrix of query rows, so validation samples its first and last rows
  // and columns.
  std::vector<int64_t> output_dims(const KernelContext& ctx, const Shape& shape) const override;
  // The dtype rule over a reduction of SKV (Q's dtype as the input's), plus one ulp of Q's dtype:
  // fused kernels round the probabilities to the input type before their second matrix product.
  double default_tolerance(const KernelContext& ctx, const Shape& shape,
                           const ArraySpec& output) const override;
  // cuDNN's fused scaled dot-product attention on the CUDA runner; none elsewhere.
  std::string baseline_name(std::string_view backend) const override;
  // The baseline where Q, K, V and O are all fp16 or all bf16 (what cuDNN's fused attention
  // takes), else none.
  std::string baseline(const KernelContext& ctx, std::string_view backend) const override;
  // Two matrix products per query row: FLOP/s (the context's `flops`).
  Headline headline(const KernelContext&) const override { return Headline::flops; }
  // decode (SQ <= 16: one query row, or a few, against a long KV cache: bound by the bytes of K
  // and V) and regular.
  std::vector<ClassRule> default_class_rules(const KernelContext& ctx) const override;
};

// The member the registry holds.
const Family& family();

}  // namespace peak::attention
