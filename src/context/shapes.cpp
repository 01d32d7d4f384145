// Shapes: their text, the environment of their expressions, their validity, FLOPs and bytes,
// the sampled extra shapes, and the [shapes] lists of kernel.toml.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "context/context.h"
#include "context/loader.h"
#include "context/prng.h"
#include "context/shape_condition.h"

namespace peak {

std::string Shape::text() const {
  std::string s;
  for (const auto& [k, v] : values) {
    if (!s.empty()) s += ' ';
    s += fmt::format("{}={}", k, v);
  }
  return s;
}

Result<expr::Env> shape_env(const KernelContext& ctx, const Shape& shape) {
  expr::Env env;
  for (const auto& [k, v] : shape.values) env[k] = v;
  for (const auto& s : ctx.scalars) {
    if (!env.count(s.name)) {
      return make_error(
          fmt::format("shape '{}' gives no value to scalar '{}'", shape.text(), s.name));
    }
  }
  expr::Env scalars = env;
  for (const auto& a : ctx.arrays) {
    auto n = expr::evaluate(a.size, scalars);
    if (!n) {
      return make_error(fmt::format("size of array '{}' (\"{}\"): {}", a.name, a.size, n.error()));
    }
    if (*n < 0) {
      return make_error(
          fmt::format("size of array '{}' (\"{}\") is negative ({})", a.name, a.size, *n));
    }
    env[a.name + ".size"] = *n;
  }
  return env;
}

Result<std::map<std::string, int64_t>> array_sizes(const KernelContext& ctx, const Shape& shape) {
  auto env = shape_env(ctx, shape);
  if (!env) return Error{env.error()};
  std::map<std::string, int64_t> out;
  for (const auto& a : ctx.arrays) out[a.name] = env->at(a.name + ".size");
  return out;
}

namespace kernel_toml {
Result<bool> holds(const std::string& expr, std::string_view key, const expr::Env& env) {
  if (expr.empty()) return true;
  auto v = expr::evaluate(expr, env);
  if (!v) return make_error(fmt::format("{} = \"{}\": {}", key, expr, v.error()));
  return *v != 0;
}
}  // namespace kernel_toml

using kernel_toml::holds;

Result<bool> shape_in_problem(const KernelContext& ctx, const Shape& shape) {
  auto env = shape_env(ctx, shape);
  if (!env) return Error{env.error()};
  return holds(ctx.valid, "valid", *env);
}

Result<bool> shape_is_valid(const KernelContext& ctx, const Shape& shape) {
  auto env = shape_env(ctx, shape);
  if (!env) return Error{env.error()};
  auto in = holds(ctx.valid, "valid", *env);
  if (!in || !*in) return in;
  return holds(ctx.supports, "supports", *env);
}

namespace {

Result<double> shape_count(const KernelContext& ctx, const Shape& shape, const std::string& text,
                           std::string_view what) {
  if (text.empty()) return 0.0;
  auto env = shape_env(ctx, shape);
  if (!env) return Error{env.error()};
  auto v = expr::evaluate(text, *env);
  if (!v) return make_error(fmt::format("{} = \"{}\": {}", what, text, v.error()));
  return static_cast<double>(*v);
}

}  // namespace

Result<double> shape_flops(const KernelContext& ctx, const Shape& shape) {
  return shape_count(ctx, shape, ctx.flops, "flops");
}

Result<double> shape_bytes(const KernelContext& ctx, const Shape& shape) {
  return shape_count(ctx, shape, ctx.bytes, "bytes");
}

std::vector<Shape> sample_shapes(const KernelContext& ctx, int count, uint64_t seed) {
  std::vector<Shape> out;
  if (count <= 0 || ctx.scalars.empty()) return out;
  bool any_declared = std::any_of(ctx.scalars.begin(), ctx.scalars.end(), [](const ScalarSpec& s) {
    return !s.values.empty() || s.has_range();
  });
  if (!any_declared) return out;

  // Scalars with neither values nor range draw from the values the declared shapes give them.
  std::set<std::map<std::string, int64_t>> seen;
  std::map<std::string, std::vector<int64_t>> pools;
  for (const auto* list :
       {&ctx.bench_shapes, &ctx.validation_shapes, &ctx.hidden_shapes, &ctx.small_shapes}) {
    for (const auto& shape : *list) {
      seen.insert(shape.values);
      for (const auto& [k, v] : shape.values) pools[k].push_back(v);
    }
  }
  for (auto& [k, v] : pools) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  for (const auto& s : ctx.scalars) {
    if (s.values.empty() && !s.has_range() && pools[s.name].empty()) return out;
  }

  prng::SplitMix64 rng(prng::mix(seed ^ 0x5EED5A3B1E5ull));
  const int attempts = std::max(1000, 100 * count);
  for (int attempt = 0; attempt < attempts && static_cast<int>(out.size()) < count; ++attempt) {
    Shape shape;
    for (const auto& s : ctx.scalars) {
      int64_t v;
      if (!s.values.empty()) {
        v = s.values[rng.below(s.values.size())];
      } else if (s.has_range()) {
        uint64_t n = static_cast<uint64_t>((s.range_hi - s.range_lo) / s.range_step) + 1;
        v = s.range_lo + s.range_step * static_cast<int64_t>(rng.below(n));
      } else {
        const auto& pool = pools[s.name];
        v = pool[rng.below(pool.size())];
      }
      shape.values[s.name] = v;
    }
    if (seen.count(shape.values)) continue;
    auto ok = shape_is_valid(ctx, shape);
    if (!ok || !*ok) continue;
    seen.insert(shape.values);
    out.push_back(std::move(shape));
  }
  return out;
}

// ---- [shapes] of kernel.toml ----

namespace kernel_toml {

void Loader::load_shapes(const toml::table& root, KernelContext& ctx) {
  const toml::node* node = root.get("shapes");
  if (!node) return;
  const toml::table* shapes = node->as_table();
  if (!shapes)
    fail(*node, fmt::format("'shapes' must be a table ([shapes]), not {}", type_name(*node)));
  check_keys(*shapes, {"bench", "validation", "hidden", "small"}, "in [shapes]");
  struct List {
    std::string_view key;
    std::vector<Shape>* out;
  } lists[] = {{"bench", &ctx.bench_shapes},
               {"validation", &ctx.validation_shapes},
               {"hidden", &ctx.hidden_shapes},
               {"small", &ctx.small_shapes}};
  for (auto& list : lists) {
    const toml::node* n = shapes->get(list.key);
    if (!n) continue;
    const toml::array* arr = n->as_array();
    if (!arr) {
      fail(*n, fmt::format("shapes.{} must be an array of tables like [{{ M = 64, N = 64 }}]",
                           list.key));
    }
    for (const auto& el : *arr) {
      const toml::table* t = el.as_table();
      if (!t)
        fail(el, fmt::format("every entry of shapes.{} must be a table like {{ M = 64 }}, not {}",
                             list.key, type_name(el)));
      list.out->push_back(read_shape(ctx, *t, el, fmt::format("shapes.{}", list.key)));
    }
  }
}

Shape Loader::read_shape(const KernelContext& ctx, const toml::table& t, const toml::node& el,
                         std::string_view what, std::initializer_list<std::string_view> skip) {
  Shape shape;
  for (auto&& [k, v] : t) {
    std::string key(k.str());
    if (std::find(skip.begin(), skip.end(), key) != skip.end()) continue;
    bool known = std::any_of(ctx.scalars.begin(), ctx.scalars.end(),
                             [&](const ScalarSpec& s) { return s.name == key; });
    if (!known)
      fail(k.source(),
           fmt::format("shape in {} gives a value to '{}', which is not a declared scalar", what,
                       key));
    shape.values[key] = as_i32(v, fmt::format("scalar '{}'", key));
  }
  for (const auto& s : ctx.scalars) {
    if (!shape.values.count(s.name)) {
      fail(el, fmt::format("shape in {} gives no value to scalar '{}'; every shape must give a "
                           "value to every scalar",
                           what, s.name));
    }
  }
  auto sizes = array_sizes(ctx, shape);
  if (!sizes) fail(el, fmt::format("shape {}: {}", shape.text(), sizes.error()));
  auto ok = shape_in_problem(ctx, shape);
  if (!ok) fail(el, fmt::format("shape {}: {}", shape.text(), ok.error()));
  if (!*ok) {
    fail(el, fmt::format("shape {} does not satisfy valid = \"{}\"", shape.text(), ctx.valid));
  }
  return shape;
}

}  // namespace kernel_toml

}  // namespace peak
