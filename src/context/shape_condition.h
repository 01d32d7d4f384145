#pragma once
// Whether a condition of kernel.toml holds for a shape: shared by the validity checks of shapes
// (shapes.cpp, bound.cpp) and the class rules of the suite (suites.cpp). Not part of the module's
// interface.
#include <string>
#include <string_view>

#include "expr/expr.h"
#include "util/result.h"

namespace peak::kernel_toml {

// `expr` (kernel.toml's `key`) holds for the shape's environment; an empty expression holds.
Result<bool> holds(const std::string& expr, std::string_view key, const expr::Env& env);

}  // namespace peak::kernel_toml
