#pragma once
// A kernel context at one shape: what every later stage (input generation, the runner's tasks,
// validation, timing) needs of that shape, evaluated once from kernel.toml's expressions instead
// of each stage evaluating them again.
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "context/context.h"
#include "expr/expr.h"
#include "util/result.h"

namespace peak {

struct BoundShape {
  Shape shape;
  expr::Env env;                               // the scalars and "<array>.size" (shape_env)
  std::map<std::string, int64_t> sizes;        // elements per array (array_sizes)
  std::map<std::string, int64_t> array_bytes;  // bytes per array (elements * dtype size)
  // Whether the kernel runs this shape: `valid` and `supports` both hold (shape_is_valid; a
  // condition that does not evaluate counts as not holding).
  bool runs = false;
  int64_t reduction = 1;  // `reduction` at this shape (1 when not given or not evaluable)
  // `flops` and `bytes` at this shape (0 when not given; nullopt when they do not evaluate).
  std::optional<double> flops, bytes;

  int64_t elements(const std::string& array) const { return sizes.at(array); }
  int64_t bytes_of(const std::string& array) const { return array_bytes.at(array); }
};

// Evaluates the shape's environment and everything above; fails as shape_env fails (a scalar
// without a value, an array size that does not evaluate or is negative).
Result<BoundShape> bind_shape(const KernelContext& ctx, const Shape& shape);

}  // namespace peak
