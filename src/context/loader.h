#pragma once
// The reader of kernel.toml, shared by the source files that parse its sections (parse.cpp: the
// top level, scalars, arrays and tuning; shapes.cpp: [shapes]; suites.cpp: [suite]). Not part of
// the context module's interface: callers use parse_context and load_context (context.h).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "context/context.h"
#include "util/toml_names.h"

namespace peak::kernel_toml {

// What a value is, as kernel.toml's errors name it: as util/toml_names.h does, but a floating
// point value is "a float".
inline std::string type_name(const toml::node& n) {
  return n.is_floating_point() ? "a float" : toml_type_name(n);
}

struct ParseError {
  std::string message;
};

// Reads one kernel.toml; every error is thrown as ParseError (caught in parse_context) and
// names FILE:LINE:COL of the node at fault. The readers of single values are defined here; the
// sections are read by the source file of their concept.
class Loader {
 public:
  explicit Loader(std::string_view filename) : file_(filename) {}

  std::string where(const toml::source_region& src) const {
    if (src.begin.line == 0) return fmt::format("{}: ", file_);
    return fmt::format("{}:{}:{}: ", file_, src.begin.line, src.begin.column);
  }
  [[noreturn]] void fail(const toml::source_region& src, const std::string& message) const {
    throw ParseError{where(src) + message};
  }
  [[noreturn]] void fail(const toml::node& n, const std::string& message) const {
    fail(n.source(), message);
  }

  // Rejects keys not in `allowed` (typos otherwise pass silently).
  void check_keys(const toml::table& t, std::initializer_list<std::string_view> allowed,
                  std::string_view where_text) const {
    for (auto&& [k, v] : t) {
      if (std::find(allowed.begin(), allowed.end(), k.str()) != allowed.end()) continue;
      std::string list;
      for (auto a : allowed) {
        if (!list.empty()) list += ", ";
        list += a;
      }
      fail(k.source(),
           fmt::format("unknown key '{}' {} (known keys: {})", k.str(), where_text, list));
    }
  }

  std::optional<std::string> opt_string(const toml::table& t, std::string_view key) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (!n->is_string()) fail(*n, fmt::format("'{}' must be a string, not {}", key, type_name(*n)));
    return n->as_string()->get();
  }
  std::string req_string(const toml::table& t, std::string_view key, std::string_view what) const {
    auto s = opt_string(t, key);
    if (!s) fail(t, fmt::format("missing required key '{}' {}", key, what));
    if (s->empty()) fail(*t.get(key), fmt::format("'{}' must not be empty", key));
    return *s;
  }
  std::optional<int64_t> opt_int(const toml::table& t, std::string_view key) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    return as_int(*n, key);
  }
  int64_t as_int(const toml::node& n, std::string_view what) const {
    if (!n.is_integer()) fail(n, fmt::format("{} must be an integer, not {}", what, type_name(n)));
    return n.as_integer()->get();
  }
  int64_t as_i32(const toml::node& n, std::string_view what) const {
    int64_t v = as_int(n, what);
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
      fail(n, fmt::format("{} = {} does not fit in a 32-bit integer (i32)", what, v));
    }
    return v;
  }
  std::optional<double> opt_number(const toml::table& t, std::string_view key) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (!n->is_number()) fail(*n, fmt::format("'{}' must be a number, not {}", key, type_name(*n)));
    double v = n->value<double>().value_or(0.0);
    if (!std::isfinite(v) || v < 0) fail(*n, fmt::format("'{}' must be a finite number >= 0", key));
    return v;
  }
  const toml::array& req_array_of_tables(const toml::node& n, std::string_view key) const {
    const toml::array* arr = n.as_array();
    if (!arr) {
      fail(n, fmt::format("'{}' must be an array of tables ([[{}]] sections), not {}", key, key,
                          type_name(n)));
    }
    for (const auto& el : *arr) {
      if (!el.is_table()) {
        fail(el, fmt::format("every entry of '{}' must be a table, not {}", key, type_name(el)));
      }
    }
    return *arr;
  }

  // Parses an expression; names what failed and where.
  expr::Expression expression(const toml::node& n, std::string_view what) const {
    if (!n.is_string())
      fail(n, fmt::format("{} must be a string expression, not {}", what, type_name(n)));
    const std::string& text = n.as_string()->get();
    auto e = expr::Expression::parse(text);
    if (!e) fail(n, fmt::format("cannot parse {} = \"{}\": {}", what, text, e.error()));
    return *e;
  }
  // Expression whose identifiers must all be in `known`.
  void check_identifiers(const toml::node& n, const expr::Expression& e, std::string_view what,
                         const std::set<std::string>& known, std::string_view allowed_desc) const {
    for (const auto& id : e.identifiers()) {
      if (known.count(id)) continue;
      std::string list;
      for (const auto& k : known) {
        if (!list.empty()) list += ", ";
        list += k;
      }
      fail(n, fmt::format("{} = \"{}\" uses unknown name '{}' ({} may use {}: {})", what, e.text(),
                          id, what, allowed_desc, list.empty() ? "none declared" : list));
    }
  }

  // The names an expression over a shape may use: the scalars and <array>.size.
  static std::set<std::string> shape_names(const KernelContext& ctx) {
    std::set<std::string> names;
    for (const auto& s : ctx.scalars) names.insert(s.name);
    for (const auto& a : ctx.arrays) names.insert(a.name + ".size");
    return names;
  }

  KernelContext load(std::string_view text, const std::filesystem::path& dir);

 private:
  // parse.cpp: the steps of load, in order.
  toml::table parse_root(std::string_view text) const;
  void load_identity(const toml::table& root, KernelContext& ctx) const;
  void load_scalars(const toml::table& root, KernelContext& ctx);
  void load_arrays(const toml::table& root, KernelContext& ctx);
  void load_tuning(const toml::table& root, KernelContext& ctx);
  void check_names(const toml::table& root, const KernelContext& ctx);
  // flops, bytes, valid, supports, reduction, workspace; tuning_valid; rtol and atol.
  void load_expressions(const toml::table& root, KernelContext& ctx) const;
  void load_reference(const toml::table& root, KernelContext& ctx) const;
  void check_outputs(const toml::table& root, const KernelContext& ctx) const;
  // After the shapes: the CPU reference must accept them.
  void check_reference(const toml::table& root, const KernelContext& ctx) const;
  // shapes.cpp
  void load_shapes(const toml::table& root, KernelContext& ctx);
  // Reads the values of every scalar from table `t` (skipping the keys in `skip`) and checks
  // the shape: every scalar given, its sizes evaluate, `valid` holds. `what` names the list.
  Shape read_shape(const KernelContext& ctx, const toml::table& t, const toml::node& el,
                   std::string_view what, std::initializer_list<std::string_view> skip = {});
  // suites.cpp
  void load_suite(const toml::table& root, KernelContext& ctx);
  void load_class_rules(const toml::node& node, KernelContext& ctx, const std::string& classes);

  std::string file_;
};

}  // namespace peak::kernel_toml
