#include "backend/hlsl/spirv_reflect.h"

#include <cstring>
#include <map>
#include <optional>

namespace peak::spirv {
namespace {

constexpr uint32_t kMagic = 0x07230203;

// Opcodes (SPIR-V specification, section 3.49).
enum : uint32_t {
  kOpName = 5,
  kOpEntryPoint = 15,
  kOpExecutionMode = 16,
  kOpTypeBool = 20,
  kOpTypeInt = 21,
  kOpTypeFloat = 22,
  kOpTypeVector = 23,
  kOpTypeMatrix = 24,
  kOpTypeArray = 28,
  kOpTypeRuntimeArray = 29,
  kOpTypeStruct = 30,
  kOpTypePointer = 32,
  kOpConstant = 43,
  kOpConstantComposite = 44,
  kOpSpecConstant = 50,
  kOpSpecConstantComposite = 51,
  kOpVariable = 59,
  kOpDecorate = 71,
  kOpExecutionModeId = 331,
};
// Execution modes, decorations, storage classes, built-ins.
enum : uint32_t {
  kModeLocalSize = 17,
  kModeLocalSizeId = 38,
  kDecorationBlock = 2,
  kDecorationBufferBlock = 3,
  kDecorationBuiltIn = 11,
  kDecorationBinding = 33,
  kDecorationDescriptorSet = 34,
  kBuiltInWorkgroupSize = 25,
  kStorageUniformConstant = 0,
  kStorageUniform = 2,
  kStorageWorkgroup = 4,
  kStorageStorageBuffer = 12,
};

struct Type {
  uint32_t op = 0;
  std::vector<uint32_t> operands;  // after the result id
};

std::string literal_string(const uint32_t* w, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    for (int b = 0; b < 4; ++b) {
      char c = static_cast<char>((w[i] >> (8 * b)) & 0xff);
      if (c == '\0') return s;
      s.push_back(c);
    }
  }
  return s;
}

class Reader {
 public:
  std::map<uint32_t, Type> types;
  std::map<uint32_t, uint64_t> constants;  // scalar integer constants (and spec defaults)
  std::map<uint32_t, std::vector<uint32_t>> composites;
  std::map<uint32_t, std::string> names;
  std::map<uint32_t, std::map<uint32_t, std::vector<uint32_t>>> decorations;  // id -> dec -> args

  // Size in bytes of a type with natural packing; nullopt when unknown.
  std::optional<int64_t> size_of(uint32_t id, int depth = 0) const {
    if (depth > 64) return std::nullopt;
    auto it = types.find(id);
    if (it == types.end()) return std::nullopt;
    const Type& t = it->second;
    constexpr int64_t kLimit = int64_t{1} << 40;
    switch (t.op) {
      case kOpTypeBool:
        return 4;
      case kOpTypeInt:
      case kOpTypeFloat:
        if (t.operands.empty()) return std::nullopt;
        return static_cast<int64_t>(t.operands[0] / 8);
      case kOpTypeVector:
      case kOpTypeMatrix: {
        if (t.operands.size() < 2) return std::nullopt;
        auto e = size_of(t.operands[0], depth + 1);
        if (!e) return std::nullopt;
        return *e * static_cast<int64_t>(t.operands[1]);
      }
      case kOpTypeArray: {
        if (t.operands.size() < 2) return std::nullopt;
        auto e = size_of(t.operands[0], depth + 1);
        auto c = constants.find(t.operands[1]);
        if (!e || c == constants.end()) return std::nullopt;
        if (c->second > static_cast<uint64_t>(kLimit)) return std::nullopt;
        int64_t n = static_cast<int64_t>(c->second);
        if (*e != 0 && n > kLimit / *e) return std::nullopt;
        return *e * n;
      }
      case kOpTypeStruct: {
        int64_t total = 0;
        for (uint32_t m : t.operands) {
          auto e = size_of(m, depth + 1);
          if (!e) return std::nullopt;
          total += *e;
          if (total > kLimit) return std::nullopt;
        }
        return total;
      }
      default:
        return std::nullopt;
    }
  }

  bool decorated(uint32_t id, uint32_t dec) const {
    auto it = decorations.find(id);
    return it != decorations.end() && it->second.count(dec) > 0;
  }
  std::optional<uint32_t> decoration_arg(uint32_t id, uint32_t dec) const {
    auto it = decorations.find(id);
    if (it == decorations.end()) return std::nullopt;
    auto d = it->second.find(dec);
    if (d == it->second.end() || d->second.empty()) return std::nullopt;
    return d->second[0];
  }
};

}  // namespace

const EntryPoint* ModuleInfo::find(std::string_view name) const {
  for (const auto& e : entry_points)
    if (e.name == name) return &e;
  return nullptr;
}

Result<std::vector<uint32_t>> words_from_bytes(std::string_view bytes) {
  if (bytes.size() < 20 || bytes.size() % 4 != 0)
    return make_error("not a SPIR-V module: " + std::to_string(bytes.size()) +
                      " bytes (expected a multiple of 4, at least 20)");
  std::vector<uint32_t> words(bytes.size() / 4);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  if (words[0] != kMagic)
    return make_error(
        "not a SPIR-V module: the magic number is missing (is the file a SPIR-V "
        "binary for this machine's byte order?)");
  return words;
}

Result<ModuleInfo> reflect(const std::vector<uint32_t>& words) {
  if (words.size() < 5 || words[0] != kMagic)
    return make_error("not a SPIR-V module: the header or magic number is missing");
  ModuleInfo info;
  info.version = words[1];
  Reader r;
  std::map<uint32_t, size_t> entry_by_id;  // function id -> index in entry_points
  struct LocalSizeIds {
    uint32_t entry;
    uint32_t ids[3];
  };
  std::vector<LocalSizeIds> size_ids;
  struct Var {
    uint32_t id, pointer_type, storage;
  };
  std::vector<Var> vars;

  size_t pos = 5;
  while (pos < words.size()) {
    uint32_t op = words[pos] & 0xffffu;
    uint32_t count = words[pos] >> 16;
    if (count == 0 || pos + count > words.size())
      return make_error("malformed SPIR-V: instruction at word " + std::to_string(pos) +
                        " is truncated");
    const uint32_t* w = &words[pos + 1];  // operands
    size_t n = count - 1;
    switch (op) {
      case kOpName:
        if (n >= 2) r.names[w[0]] = literal_string(w + 1, n - 1);
        break;
      case kOpEntryPoint:
        if (n >= 3) {
          EntryPoint e;
          e.execution_model = w[0];
          e.name = literal_string(w + 2, n - 2);
          entry_by_id[w[1]] = info.entry_points.size();
          info.entry_points.push_back(std::move(e));
        }
        break;
      case kOpExecutionMode:
      case kOpExecutionModeId:
        if (n >= 5 && (w[1] == kModeLocalSize || w[1] == kModeLocalSizeId)) {
          auto it = entry_by_id.find(w[0]);
          if (it == entry_by_id.end()) break;
          if (w[1] == kModeLocalSize && op == kOpExecutionMode) {
            info.entry_points[it->second].local_size = {w[2], w[3], w[4]};
          } else {
            size_ids.push_back({w[0], {w[2], w[3], w[4]}});
          }
        }
        break;
      case kOpDecorate:
        if (n >= 2) r.decorations[w[0]][w[1]] = std::vector<uint32_t>(w + 2, w + n);
        break;
      case kOpTypeBool:
      case kOpTypeInt:
      case kOpTypeFloat:
      case kOpTypeVector:
      case kOpTypeMatrix:
      case kOpTypeArray:
      case kOpTypeRuntimeArray:
      case kOpTypeStruct:
      case kOpTypePointer:
        if (n >= 1) r.types[w[0]] = Type{op, std::vector<uint32_t>(w + 1, w + n)};
        break;
      case kOpConstant:
      case kOpSpecConstant:
        if (n >= 3) {
          uint64_t v = w[2];
          if (n >= 4) v |= static_cast<uint64_t>(w[3]) << 32;
          r.constants[w[1]] = v;
        }
        break;
      case kOpConstantComposite:
      case kOpSpecConstantComposite:
        if (n >= 2) r.composites[w[1]] = std::vector<uint32_t>(w + 2, w + n);
        break;
      case kOpVariable:
        if (n >= 3) vars.push_back({w[1], w[0], w[2]});
        break;
      default:
        break;
    }
    pos += count;
  }

  for (const auto& s : size_ids) {
    auto& e = info.entry_points[entry_by_id[s.entry]];
    for (int i = 0; i < 3; ++i) {
      auto c = r.constants.find(s.ids[i]);
      if (c != r.constants.end()) e.local_size[i] = static_cast<uint32_t>(c->second);
    }
  }
  // A constant decorated BuiltIn WorkgroupSize overrides the execution mode (SPIR-V rule).
  for (const auto& [id, comps] : r.composites) {
    auto b = r.decoration_arg(id, kDecorationBuiltIn);
    if (!b || *b != kBuiltInWorkgroupSize || comps.size() != 3) continue;
    std::array<uint32_t, 3> ls{};
    bool ok = true;
    for (int i = 0; i < 3; ++i) {
      auto c = r.constants.find(comps[i]);
      if (c == r.constants.end()) {
        ok = false;
        break;
      }
      ls[i] = static_cast<uint32_t>(c->second);
    }
    if (ok)
      for (auto& e : info.entry_points) e.local_size = ls;
  }

  for (const auto& v : vars) {
    auto pt = r.types.find(v.pointer_type);
    if (pt == r.types.end() || pt->second.op != kOpTypePointer || pt->second.operands.size() < 2)
      continue;
    uint32_t pointee = pt->second.operands[1];
    if (v.storage == kStorageWorkgroup) {
      auto size = r.size_of(pointee);
      if (!size) {
        std::string name = r.names.count(v.id) ? r.names[v.id] : "%" + std::to_string(v.id);
        return make_error("cannot determine the size of the groupshared variable `" + name +
                          "` (unsupported type)");
      }
      info.shared_bytes += *size;
      continue;
    }
    if (v.storage != kStorageUniform && v.storage != kStorageStorageBuffer &&
        v.storage != kStorageUniformConstant)
      continue;
    auto binding = r.decoration_arg(v.id, kDecorationBinding);
    if (!binding) continue;
    Binding b;
    b.binding = *binding;
    b.set = r.decoration_arg(v.id, kDecorationDescriptorSet).value_or(0);
    if (r.names.count(v.id)) b.name = r.names[v.id];
    // Unwrap arrays of blocks to the block type.
    uint32_t t = pointee;
    for (int depth = 0; depth < 8; ++depth) {
      auto ti = r.types.find(t);
      if (ti == r.types.end()) break;
      if ((ti->second.op == kOpTypeArray || ti->second.op == kOpTypeRuntimeArray) &&
          !ti->second.operands.empty()) {
        t = ti->second.operands[0];
        continue;
      }
      break;
    }
    if (b.name.empty() && r.names.count(t)) b.name = r.names[t];
    if (v.storage == kStorageStorageBuffer) {
      b.kind = DescriptorKind::storage_buffer;
    } else if (v.storage == kStorageUniform) {
      if (r.decorated(t, kDecorationBufferBlock))
        b.kind = DescriptorKind::storage_buffer;
      else if (r.decorated(t, kDecorationBlock))
        b.kind = DescriptorKind::uniform_buffer;
    }
    info.bindings.push_back(std::move(b));
  }
  return info;
}

}  // namespace peak::spirv
