#pragma once
// A small SPIR-V reader: the facts the HLSL backend needs from a compiled compute shader
// (entry points, workgroup size, workgroup (shared) memory, descriptor bindings). It reads the
// binary directly; no SPIRV-Reflect or SPIRV-Cross dependency.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace peak::spirv {

enum class DescriptorKind { storage_buffer, uniform_buffer, other };

struct Binding {
  uint32_t set = 0;
  uint32_t binding = 0;
  DescriptorKind kind = DescriptorKind::other;
  std::string name;  // from OpName when present (may be empty after optimization)
};

struct EntryPoint {
  std::string name;
  uint32_t execution_model = 0;  // 5 = GLCompute
  std::array<uint32_t, 3> local_size{0, 0, 0};
};

struct ModuleInfo {
  uint32_t version = 0;  // SPIR-V version word (0x00010300 = 1.3)
  std::vector<EntryPoint> entry_points;
  // Bytes of all Workgroup-storage variables (arrays, nested arrays, vectors, matrices,
  // structs of 8/16/32/64-bit scalars; natural packing).
  int64_t shared_bytes = 0;
  std::vector<Binding> bindings;
  // The entry point named `name`, or nullptr.
  const EntryPoint* find(std::string_view name) const;
};

// Parses a SPIR-V module. Fails with a message when the words are not a valid module (bad magic,
// truncated instruction) or a workgroup variable has a type whose size cannot be determined.
Result<ModuleInfo> reflect(const std::vector<uint32_t>& words);
// Bytes (little-endian words, as written by compilers) to words; fails when the size is not a
// multiple of 4 or the magic number is missing.
Result<std::vector<uint32_t>> words_from_bytes(std::string_view bytes);

}  // namespace peak::spirv
