// The shape suite (`peak bench`): the class rules and their application to a shape, and the
// [suite] table of kernel.toml. (The names of the classes are with the model's other names, in
// model.cpp.)
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "context/context.h"
#include "context/loader.h"
#include "context/shape_condition.h"

namespace peak {

const std::vector<SuiteShape>& suite_for(const KernelContext& ctx, bool small) {
  return small && !ctx.suite_small.empty() ? ctx.suite_small : ctx.suite;
}

Result<std::optional<SuiteClass>> classify_shape(const std::vector<ClassRule>& rules,
                                                 const KernelContext& ctx, const Shape& shape) {
  if (rules.empty()) return std::optional<SuiteClass>{};
  auto env = shape_env(ctx, shape);
  if (!env) return Error{env.error()};
  for (const auto& r : rules) {
    auto h =
        kernel_toml::holds(r.when, fmt::format("the rule of class {}", to_string(r.cls)), *env);
    if (!h) return Error{h.error()};
    if (*h) return std::optional<SuiteClass>{r.cls};
  }
  return std::optional<SuiteClass>{};
}

// ---- [suite] of kernel.toml ----

namespace kernel_toml {

void Loader::load_suite(const toml::table& root, KernelContext& ctx) {
  const toml::node* node = root.get("suite");
  if (!node) return;
  // A format-2 peak would call [suite] an unknown key; the format says what the file needs.
  if (ctx.format < kContextFormatSuite)
    fail(*node, fmt::format("[suite] needs kernel context format {}; write 'format = {}' at the "
                            "top of kernel.toml",
                            kContextFormatSuite, kContextFormatSuite));
  const toml::table* suite = node->as_table();
  if (!suite)
    fail(*node, fmt::format("'suite' must be a table ([suite]), not {}", type_name(*node)));
  check_keys(*suite, {"shapes", "small", "classes"}, "in [suite]");
  for (const auto& s : ctx.scalars)
    if (s.name == "name" || s.name == "class")
      fail(*node, fmt::format("a suite entry uses the key '{}' for itself, so a context with a "
                              "scalar named '{}' cannot have a suite; rename the scalar",
                              s.name, s.name));
  std::string classes;
  for (SuiteClass c : kAllSuiteClasses)
    classes += (classes.empty() ? "" : ", ") + std::string(to_string(c));
  if (const toml::node* n = suite->get("classes")) load_class_rules(*n, ctx, classes);
  struct List {
    std::string_view key;
    std::vector<SuiteShape>* out;
  } lists[] = {{"shapes", &ctx.suite}, {"small", &ctx.suite_small}};
  for (auto& list : lists) {
    const toml::node* n = suite->get(list.key);
    if (!n) continue;
    const toml::array* arr = n->as_array();
    if (!arr)
      fail(*n, fmt::format("suite.{} must be an array of tables like [{{ name = \"square-2048\", "
                           "class = \"square\", M = 2048, N = 2048, K = 2048 }}]",
                           list.key));
    std::map<std::string, const toml::node*> seen;
    for (const auto& el : *arr) {
      const toml::table* t = el.as_table();
      if (!t)
        fail(el, fmt::format("every entry of suite.{} must be a table like {{ name = \"square\", "
                             "class = \"square\", M = 64 }}, not {}",
                             list.key, type_name(el)));
      SuiteShape ss;
      const std::string what = fmt::format("suite.{}", list.key);
      ss.name = req_string(*t, "name", fmt::format("in an entry of {} (the shape's name)", what));
      auto cls =
          req_string(*t, "class", fmt::format("in entry '{}' of {} ({})", ss.name, what, classes));
      auto c = suite_class_from_string(cls);
      if (!c)
        fail(*t->get("class"), fmt::format("unknown class '{}' of suite shape '{}' (the classes "
                                           "are {})",
                                           cls, ss.name, classes));
      ss.cls = *c;
      auto [it, fresh] = seen.emplace(ss.name, t->get("name"));
      if (!fresh)
        fail(*t->get("name"),
             fmt::format("duplicate name '{}' in {} (first at line {}); every suite shape needs a "
                         "name of its own",
                         ss.name, what, it->second->source().begin.line));
      ss.shape =
          read_shape(ctx, *t, el, fmt::format("{} ('{}')", what, ss.name), {"name", "class"});
      list.out->push_back(std::move(ss));
    }
  }
}

void Loader::load_class_rules(const toml::node& node, KernelContext& ctx,
                              const std::string& classes) {
  if (ctx.format < kContextFormatClasses)
    fail(node, fmt::format("suite.classes needs format = {} (this file is format {})",
                           kContextFormatClasses, ctx.format));
  const toml::array* arr = node.as_array();
  if (!arr)
    fail(node,
         "suite.classes must be an array of tables like [{ class = \"small-m\", when = "
         "\"M <= 32\" }, { class = \"irregular\" }]");
  const std::set<std::string> names = shape_names(ctx);
  for (const auto& el : *arr) {
    const toml::table* t = el.as_table();
    if (!t)
      fail(el, fmt::format("every entry of suite.classes must be a table like {{ class = "
                           "\"small-m\", when = \"M <= 32\" }}, not {}",
                           type_name(el)));
    check_keys(*t, {"class", "when"}, "in an entry of suite.classes");
    auto cls = req_string(*t, "class", fmt::format("in an entry of suite.classes ({})", classes));
    auto c = suite_class_from_string(cls);
    if (!c)
      fail(*t->get("class"),
           fmt::format("unknown class '{}' in suite.classes (the classes are {})", cls, classes));
    ClassRule r;
    r.cls = *c;
    if (const toml::node* w = t->get("when")) {
      const std::string key = fmt::format("suite.classes ({})", cls);
      auto e = expression(*w, key);
      check_identifiers(*w, e, key, names, "the scalars and <array>.size");
      r.when = e.text();
    }
    ctx.classes.push_back(std::move(r));
  }
  if (ctx.classes.empty())
    fail(node, "suite.classes is empty: leave it out to use the family's default rules");
}

}  // namespace kernel_toml

}  // namespace peak
