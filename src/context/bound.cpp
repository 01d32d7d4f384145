#include "context/bound.h"

#include "context/shape_condition.h"

namespace peak {

Result<BoundShape> bind_shape(const KernelContext& ctx, const Shape& shape) {
  auto env = shape_env(ctx, shape);
  if (!env) return Error{env.error()};
  BoundShape b;
  b.shape = shape;
  b.env = std::move(*env);
  for (const auto& a : ctx.arrays) {
    const int64_t n = b.env.at(a.name + ".size");
    b.sizes[a.name] = n;
    b.array_bytes[a.name] = n * static_cast<int64_t>(dtype_size(a.dtype));
  }
  auto in = kernel_toml::holds(ctx.valid, "valid", b.env);
  auto supported = kernel_toml::holds(ctx.supports, "supports", b.env);
  b.runs = in && *in && supported && *supported;
  if (!ctx.reduction.empty())
    if (auto r = expr::evaluate(ctx.reduction, b.env)) b.reduction = *r;
  // As shape_flops and shape_bytes count them, from the environment already at hand.
  auto count = [&](const std::string& text) -> std::optional<double> {
    if (text.empty()) return 0.0;
    if (auto v = expr::evaluate(text, b.env)) return static_cast<double>(*v);
    return std::nullopt;
  };
  b.flops = count(ctx.flops);
  b.bytes = count(ctx.bytes);
  return b;
}

}  // namespace peak
