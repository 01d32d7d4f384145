#include "backend/kernel_params.h"

#include <cxxabi.h>

#include <cstdlib>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "util/fs.h"

namespace peak {
namespace {

// "float const*" -> 8, "unsigned int" -> 4, "CUtensorMap_st" -> 128; -1 when unknown.
int64_t param_size(std::string t) {
  for (const char* q :
       {" __restrict__", " __restrict", " restrict", "const ", " const", "volatile ", " volatile"})
    for (size_t p; (p = t.find(q)) != std::string::npos;) t.erase(p, std::string(q).size());
  t = trim(t);
  if (t.empty()) return -1;
  if (t.back() == '*' || t.back() == '&') return 8;
  static const std::map<std::string, int64_t> sizes = {
      {"bool", 1},          {"char", 1},          {"signed char", 1},
      {"unsigned char", 1}, {"short", 2},         {"unsigned short", 2},
      {"__half", 2},        {"__nv_bfloat16", 2}, {"int", 4},
      {"unsigned int", 4},  {"float", 4},         {"long", 8},
      {"unsigned long", 8}, {"long long", 8},     {"unsigned long long", 8},
      {"double", 8},        {"CUtensorMap", 128}, {"CUtensorMap_st", 128}};
  auto it = sizes.find(trim(t));
  return it == sizes.end() ? -1 : it->second;
}

}  // namespace

std::optional<std::vector<int64_t>> mangled_param_sizes(const std::string& mangled) {
  if (mangled.rfind("_Z", 0) != 0) return std::nullopt;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(
      abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), std::free);
  if (status != 0 || !d) return std::nullopt;
  const std::string s = d.get();
  if (s.empty() || s.back() != ')') return std::nullopt;
  // The parameter list: from the '(' that matches the final ')'.
  int depth = 0;
  size_t open = std::string::npos;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == ')') ++depth;
    if (s[i] == '(' && --depth == 0) {
      open = i;
      break;
    }
  }
  if (open == std::string::npos) return std::nullopt;
  std::vector<int64_t> out;
  std::string cur;
  depth = 0;
  for (size_t i = open + 1; i + 1 < s.size(); ++i) {
    const char c = s[i];
    if (c == '(' || c == '<' || c == '[') ++depth;
    if (c == ')' || c == '>' || c == ']') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(param_size(cur));
      cur.clear();
      continue;
    }
    cur += c;
  }
  if (!trim(cur).empty() && trim(cur) != "void") out.push_back(param_size(cur));
  return out;
}

PlanResult check_plan_args(const LaunchPlan& plan, const BuildResult& build,
                           std::vector<std::string>* unchecked) {
  PlanResult pr;
  if (!build.resources.is_object() || !build.resources.contains("kernels") ||
      !build.resources["kernels"].is_object())
    return pr;
  const nlohmann::json& kernels = build.resources["kernels"];
  for (const PlanStep& st : plan.steps) {
    if (st.op != PlanStep::Op::launch) continue;
    auto k = kernels.find(st.kernel);
    if (k == kernels.end() || !k->is_object()) continue;
    auto want = mangled_param_sizes(k->value("mangled", std::string()));
    if (!want) {
      if (unchecked) unchecked->push_back(st.kernel);
      continue;
    }
    pr.disposition = Disposition::launch_failed;
    if (want->size() != st.args.size()) {
      pr.message = fmt::format("line {}: kernel `{}` takes {} parameters; the plan's args pass {}",
                               st.line, st.kernel, want->size(), st.args.size());
      return pr;
    }
    for (size_t a = 0; a < st.args.size(); ++a) {
      const PlanArg& arg = st.args[a];
      const int64_t w = (*want)[a];
      if (w < 0) continue;
      if (arg.kind == PlanArg::Kind::value && w != 8 &&
          (arg.value < INT32_MIN || arg.value > INT32_MAX)) {
        pr.message = fmt::format(
            "line {}: argument {} of `{}` ({} = {}) does not fit in a 32-bit "
            "parameter",
            st.line, a + 1, st.kernel, arg.text, arg.value);
        return pr;
      }
      const int64_t bytes = arg.kind == PlanArg::Kind::tensor_map ? 128
                            : arg.kind == PlanArg::Kind::value    ? (w == 8 ? 8 : 4)
                                                                  : 8;
      if (w == bytes || (arg.kind == PlanArg::Kind::value && (w == 4 || w == 8))) continue;
      const char* what = arg.kind == PlanArg::Kind::tensor_map ? "a CUtensorMap (128 bytes)"
                         : arg.kind == PlanArg::Kind::value    ? "an integer"
                                                               : "a pointer (8 bytes)";
      pr.message = fmt::format(
          "line {}: argument {} of `{}` (`{}`) is {}, but the kernel's "
          "parameter {} takes {} bytes",
          st.line, a + 1, st.kernel, arg.text, what, a + 1, w);
      return pr;
    }
    pr.disposition = Disposition::passed;
  }
  return pr;
}

}  // namespace peak
