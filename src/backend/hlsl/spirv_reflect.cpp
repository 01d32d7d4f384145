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

  // The phases of reflect(), in order.
  Status read(const std::vector<uint32_t>& words, ModuleInfo& info);
  void resolve_local_sizes(ModuleInfo& info);
  Status add_variables(ModuleInfo& info);

 private:
  void read_instruction(uint32_t op, const uint32_t* w, size_t n, ModuleInfo& info);
  // The block type of a descriptor variable's pointee: arrays of blocks unwrapped.
  uint32_t block_type(uint32_t pointee) const;
  std::string name_of(uint32_t id) const;

  std::map<uint32_t, size_t> entry_by_id_;  // function id -> index in entry_points
  struct LocalSizeIds {
    uint32_t entry;
    uint32_t ids[3];
  };
  std::vector<LocalSizeIds> size_ids_;
  struct Var {
    uint32_t id, pointer_type, storage;
  };
  std::vector<Var> vars_;
};

// The instructions, one at a time, into the tables.
Status Reader::read(const std::vector<uint32_t>& words, ModuleInfo& info) {
  size_t pos = 5;
  while (pos < words.size()) {
    uint32_t op = words[pos] & 0xffffu;
    uint32_t count = words[pos] >> 16;
    if (count == 0 || pos + count > words.size())
      return make_error("malformed SPIR-V: instruction at word " + std::to_string(pos) +
                        " is truncated");
    read_instruction(op, &words[pos + 1], count - 1, info);  // its operands
    pos += count;
  }
  return Status::ok();
}

void Reader::read_instruction(uint32_t op, const uint32_t* w, size_t n, ModuleInfo& info) {
  switch (op) {
    case kOpName:
      if (n >= 2) names[w[0]] = literal_string(w + 1, n - 1);
      break;
    case kOpEntryPoint:
      if (n >= 3) {
        EntryPoint e;
        e.execution_model = w[0];
        e.name = literal_string(w + 2, n - 2);
        entry_by_id_[w[1]] = info.entry_points.size();
        info.entry_points.push_back(std::move(e));
      }
      break;
    case kOpExecutionMode:
    case kOpExecutionModeId:
      if (n >= 5 && (w[1] == kModeLocalSize || w[1] == kModeLocalSizeId)) {
        auto it = entry_by_id_.find(w[0]);
        if (it == entry_by_id_.end()) break;
        if (w[1] == kModeLocalSize && op == kOpExecutionMode) {
          info.entry_points[it->second].local_size = {w[2], w[3], w[4]};
        } else {
          size_ids_.push_back({w[0], {w[2], w[3], w[4]}});
        }
      }
      break;
    case kOpDecorate:
      if (n >= 2) decorations[w[0]][w[1]] = std::vector<uint32_t>(w + 2, w + n);
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
      if (n >= 1) types[w[0]] = Type{op, std::vector<uint32_t>(w + 1, w + n)};
      break;
    case kOpConstant:
    case kOpSpecConstant:
      if (n >= 3) {
        uint64_t v = w[2];
        if (n >= 4) v |= static_cast<uint64_t>(w[3]) << 32;
        constants[w[1]] = v;
      }
      break;
    case kOpConstantComposite:
    case kOpSpecConstantComposite:
      if (n >= 2) composites[w[1]] = std::vector<uint32_t>(w + 2, w + n);
      break;
    case kOpVariable:
      if (n >= 3) vars_.push_back({w[1], w[0], w[2]});
      break;
    default:
      break;
  }
}

// Workgroup sizes given by constant ids, and the BuiltIn WorkgroupSize constant.
void Reader::resolve_local_sizes(ModuleInfo& info) {
  for (const auto& s : size_ids_) {
    auto& e = info.entry_points[entry_by_id_[s.entry]];
    for (int i = 0; i < 3; ++i) {
      auto c = constants.find(s.ids[i]);
      if (c != constants.end()) e.local_size[i] = static_cast<uint32_t>(c->second);
    }
  }
  // A constant decorated BuiltIn WorkgroupSize overrides the execution mode (SPIR-V rule).
  for (const auto& [id, comps] : composites) {
    auto b = decoration_arg(id, kDecorationBuiltIn);
    if (!b || *b != kBuiltInWorkgroupSize || comps.size() != 3) continue;
    std::array<uint32_t, 3> ls{};
    bool ok = true;
    for (int i = 0; i < 3; ++i) {
      auto c = constants.find(comps[i]);
      if (c == constants.end()) {
        ok = false;
        break;
      }
      ls[i] = static_cast<uint32_t>(c->second);
    }
    if (ok)
      for (auto& e : info.entry_points) e.local_size = ls;
  }
}

uint32_t Reader::block_type(uint32_t pointee) const {
  uint32_t t = pointee;
  for (int depth = 0; depth < 8; ++depth) {
    auto ti = types.find(t);
    if (ti == types.end()) break;
    if ((ti->second.op == kOpTypeArray || ti->second.op == kOpTypeRuntimeArray) &&
        !ti->second.operands.empty()) {
      t = ti->second.operands[0];
      continue;
    }
    break;
  }
  return t;
}

std::string Reader::name_of(uint32_t id) const {
  auto it = names.find(id);
  return it == names.end() ? std::string() : it->second;
}

// The variables: workgroup memory summed, descriptor bindings listed.
Status Reader::add_variables(ModuleInfo& info) {
  for (const auto& v : vars_) {
    auto pt = types.find(v.pointer_type);
    if (pt == types.end() || pt->second.op != kOpTypePointer || pt->second.operands.size() < 2)
      continue;
    uint32_t pointee = pt->second.operands[1];
    if (v.storage == kStorageWorkgroup) {
      auto size = size_of(pointee);
      if (!size) {
        std::string name = names.count(v.id) ? name_of(v.id) : "%" + std::to_string(v.id);
        return make_error("cannot determine the size of the groupshared variable `" + name +
                          "` (unsupported type)");
      }
      info.shared_bytes += *size;
      continue;
    }
    if (v.storage != kStorageUniform && v.storage != kStorageStorageBuffer &&
        v.storage != kStorageUniformConstant)
      continue;
    auto binding = decoration_arg(v.id, kDecorationBinding);
    if (!binding) continue;
    Binding b;
    b.binding = *binding;
    b.set = decoration_arg(v.id, kDecorationDescriptorSet).value_or(0);
    b.name = name_of(v.id);
    uint32_t t = block_type(pointee);
    if (b.name.empty()) b.name = name_of(t);
    if (v.storage == kStorageStorageBuffer) {
      b.kind = DescriptorKind::storage_buffer;
    } else if (v.storage == kStorageUniform) {
      if (decorated(t, kDecorationBufferBlock))
        b.kind = DescriptorKind::storage_buffer;
      else if (decorated(t, kDecorationBlock))
        b.kind = DescriptorKind::uniform_buffer;
    }
    info.bindings.push_back(std::move(b));
  }
  return Status::ok();
}

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
  if (Status st = r.read(words, info); !st) return st;
  r.resolve_local_sizes(info);
  if (Status st = r.add_variables(info); !st) return st;
  return info;
}

}  // namespace peak::spirv
