#include "plan/launch_plan.h"

#include <fmt/format.h>

namespace peak {
namespace {

using json = nlohmann::json;

json ref_json(const PlanBufferRef& r) {
  return {{"kind", r.kind == PlanBufferRef::Kind::array ? "array" : "scratch"}, {"index", r.index}};
}

std::string_view kind_name(PlanArg::Kind k) {
  switch (k) {
    case PlanArg::Kind::array:
      return "array";
    case PlanArg::Kind::scratch:
      return "scratch";
    case PlanArg::Kind::tensor_map:
      return "tensor_map";
    case PlanArg::Kind::value:
      return "value";
  }
  return "value";
}

// Reads JSON fields with errors that name the field.
class Reader {
 public:
  explicit Reader(std::string where) : where_(std::move(where)) {}
  const std::string& error() const { return error_; }
  bool ok() const { return error_.empty(); }

  const json* field(const json& j, const char* key, bool required = true) {
    if (!j.is_object()) {
      fail(fmt::format("{} is not an object", where_));
      return nullptr;
    }
    auto it = j.find(key);
    if (it == j.end()) {
      if (required) fail(fmt::format("{} lacks \"{}\"", where_, key));
      return nullptr;
    }
    return &*it;
  }
  int64_t integer(const json& j, const char* key, int64_t fallback, bool required = true) {
    const json* f = field(j, key, required);
    if (f == nullptr) return fallback;
    if (!f->is_number_integer()) {
      fail(fmt::format("{}: \"{}\" is not an integer", where_, key));
      return fallback;
    }
    return f->get<int64_t>();
  }
  std::string text(const json& j, const char* key, bool required = true) {
    const json* f = field(j, key, required);
    if (f == nullptr) return "";
    if (!f->is_string()) {
      fail(fmt::format("{}: \"{}\" is not a string", where_, key));
      return "";
    }
    return f->get<std::string>();
  }
  std::vector<int64_t> integers(const json& j, const char* key, bool required = true) {
    std::vector<int64_t> out;
    const json* f = field(j, key, required);
    if (f == nullptr) return out;
    if (!f->is_array()) {
      fail(fmt::format("{}: \"{}\" is not a list", where_, key));
      return out;
    }
    for (const auto& v : *f) {
      if (!v.is_number_integer()) {
        fail(fmt::format("{}: \"{}\" holds a non-integer", where_, key));
        return {};
      }
      out.push_back(v.get<int64_t>());
    }
    return out;
  }
  void fail(std::string m) {
    if (error_.empty()) error_ = std::move(m);
  }

 private:
  std::string where_;
  std::string error_;
};

std::array<int64_t, 3> triple(Reader& r, const json& j, const char* key, int64_t fill) {
  std::array<int64_t, 3> out{fill, fill, fill};
  auto v = r.integers(j, key);
  if (v.size() != 3) {
    if (r.ok()) r.fail(fmt::format("\"{}\" must hold 3 integers", key));
    return out;
  }
  for (int i = 0; i < 3; ++i) out[static_cast<size_t>(i)] = v[static_cast<size_t>(i)];
  return out;
}

}  // namespace

std::string_view to_string(PlanArg::Kind k) { return kind_name(k); }

int64_t LaunchPlan::scratch_bytes() const {
  int64_t total = 0;
  for (const auto& s : scratch) total += s.bytes;
  return total;
}

int LaunchPlan::launches() const {
  int n = 0;
  for (const auto& s : steps) n += s.op == PlanStep::Op::launch ? 1 : 0;
  return n;
}

json LaunchPlan::to_json() const {
  json sj = json::array();
  for (const auto& s : scratch)
    sj.push_back({{"name", s.name},
                  {"dtype", std::string(peak::to_string(s.dtype))},
                  {"count", s.count},
                  {"bytes", s.bytes}});
  json tj = json::array();
  for (const auto& t : tensor_maps)
    tj.push_back({{"name", t.name},
                  {"buffer", ref_json(t.buffer)},
                  {"dtype", std::string(peak::to_string(t.dtype))},
                  {"dims", t.dims},
                  {"box", t.box},
                  {"element_strides", t.element_strides},
                  {"global_strides", t.global_strides},
                  {"swizzle", t.swizzle}});
  json st = json::array();
  for (const auto& s : steps) {
    json j{{"line", s.line}};
    if (s.op == PlanStep::Op::memset) {
      j["op"] = "memset";
      j["target"] = ref_json(s.target);
      j["value"] = s.value;
    } else {
      j["op"] = "launch";
      j["kernel"] = s.kernel;
      j["symbol"] = s.symbol;
      j["module"] = s.module;
      j["grid"] = s.grid;
      j["block"] = s.block;
      j["cluster"] = s.cluster;
      j["shared"] = s.shared;
      json args = json::array();
      for (const auto& a : s.args) {
        json aj{{"kind", kind_name(a.kind)}, {"text", a.text}};
        if (a.kind == PlanArg::Kind::value)
          aj["value"] = a.value;
        else
          aj["index"] = a.index;
        args.push_back(aj);
      }
      j["args"] = args;
    }
    st.push_back(j);
  }
  return {{"format", format}, {"scratch", sj}, {"tensor_maps", tj}, {"steps", st}};
}

Result<LaunchPlan> LaunchPlan::from_json(const json& j, size_t arrays) {
  LaunchPlan p;
  Reader r("the launch plan");
  p.format = static_cast<int>(r.integer(j, "format", 0));
  if (r.ok() && p.format != kLaunchPlanFormatVersion)
    return make_error(fmt::format("launch plan format {} is not supported (this runner reads {})",
                                  p.format, kLaunchPlanFormatVersion));
  auto buffer_ref = [&](const json& o, const char* key) {
    PlanBufferRef ref;
    const json* f = r.field(o, key);
    if (f == nullptr) return ref;
    std::string kind = r.text(*f, "kind");
    ref.index = static_cast<int>(r.integer(*f, "index", 0));
    if (kind == "array") {
      ref.kind = PlanBufferRef::Kind::array;
      if (ref.index < 0 || static_cast<size_t>(ref.index) >= arrays)
        r.fail(fmt::format("buffer index {} is not an array of the task", ref.index));
    } else if (kind == "scratch") {
      ref.kind = PlanBufferRef::Kind::scratch;
      if (ref.index < 0 || static_cast<size_t>(ref.index) >= p.scratch.size())
        r.fail(fmt::format("scratch index {} is not declared", ref.index));
    } else if (r.ok()) {
      r.fail(fmt::format("unknown buffer kind \"{}\"", kind));
    }
    return ref;
  };
  const json* scratch = r.field(j, "scratch");
  if (scratch && scratch->is_array()) {
    for (const auto& s : *scratch) {
      PlanScratch ps;
      ps.name = r.text(s, "name");
      auto dt = dtype_from_string(r.text(s, "dtype"));
      if (!dt && r.ok()) r.fail("a scratch buffer has an unknown dtype");
      ps.dtype = dt.value_or(DType::f32);
      ps.count = r.integer(s, "count", 0);
      ps.bytes = r.integer(s, "bytes", 0);
      if (r.ok() && (ps.count < 0 || ps.bytes != ps.count * static_cast<int64_t>(dtype_size(ps.dtype))))
        r.fail(fmt::format("scratch `{}`: bytes do not match count and dtype", ps.name));
      p.scratch.push_back(ps);
    }
  }
  const json* maps = r.field(j, "tensor_maps");
  if (maps && maps->is_array()) {
    for (const auto& t : *maps) {
      PlanTensorMap pt;
      pt.name = r.text(t, "name");
      pt.buffer = buffer_ref(t, "buffer");
      auto dt = dtype_from_string(r.text(t, "dtype"));
      if (!dt && r.ok()) r.fail("a tensor map has an unknown dtype");
      pt.dtype = dt.value_or(DType::f32);
      pt.dims = r.integers(t, "dims");
      pt.box = r.integers(t, "box");
      pt.element_strides = r.integers(t, "element_strides");
      pt.global_strides = r.integers(t, "global_strides");
      pt.swizzle = static_cast<int>(r.integer(t, "swizzle", 0));
      p.tensor_maps.push_back(pt);
    }
  }
  const json* steps = r.field(j, "steps");
  if (steps && steps->is_array()) {
    for (const auto& s : *steps) {
      PlanStep ps;
      ps.line = static_cast<int>(r.integer(s, "line", 0, false));
      std::string op = r.text(s, "op");
      if (op == "memset") {
        ps.op = PlanStep::Op::memset;
        ps.target = buffer_ref(s, "target");
        ps.value = static_cast<int>(r.integer(s, "value", 0));
      } else if (op == "launch") {
        ps.op = PlanStep::Op::launch;
        ps.kernel = r.text(s, "kernel");
        ps.symbol = r.text(s, "symbol", false);
        ps.module = r.text(s, "module", false);
        ps.grid = triple(r, s, "grid", 1);
        ps.block = triple(r, s, "block", 0);
        ps.cluster = triple(r, s, "cluster", 1);
        ps.shared = r.integer(s, "shared", 0);
        const json* args = r.field(s, "args");
        if (args && args->is_array()) {
          for (const auto& a : *args) {
            PlanArg pa;
            std::string kind = r.text(a, "kind");
            pa.text = r.text(a, "text", false);
            if (kind == "value") {
              pa.kind = PlanArg::Kind::value;
              pa.value = r.integer(a, "value", 0);
            } else {
              pa.index = static_cast<int>(r.integer(a, "index", 0));
              size_t limit = 0;
              if (kind == "array") {
                pa.kind = PlanArg::Kind::array;
                limit = arrays;
              } else if (kind == "scratch") {
                pa.kind = PlanArg::Kind::scratch;
                limit = p.scratch.size();
              } else if (kind == "tensor_map") {
                pa.kind = PlanArg::Kind::tensor_map;
                limit = p.tensor_maps.size();
              } else if (r.ok()) {
                r.fail(fmt::format("unknown argument kind \"{}\"", kind));
              }
              if (r.ok() && (pa.index < 0 || static_cast<size_t>(pa.index) >= limit))
                r.fail(fmt::format("argument `{}`: {} index {} is out of range", pa.text, kind,
                                   pa.index));
            }
            ps.args.push_back(pa);
          }
        }
      } else if (r.ok()) {
        r.fail(fmt::format("unknown step \"{}\"", op));
      }
      p.steps.push_back(ps);
    }
  }
  if (!r.ok()) return make_error(r.error());
  return p;
}

}  // namespace peak
