#pragma once
// What parsing kernel.toml asks of the family a context names: whether the family has a CPU
// reference (reference then defaults to "cpu", and reference = "cpu" is allowed) and whether
// the context follows that reference's convention. The families live above this module
// (family/family.h); their registry installs these rules when it is linked into a program, so
// context/ names no family itself. Until then no family has a CPU reference.
#include <string>

#include "context/context.h"

namespace peak {

struct ReferenceRules {
  bool (*has_cpu_reference)(const std::string& family) = nullptr;
  Status (*check_cpu_reference)(const KernelContext& ctx) = nullptr;
};
void install_reference_rules(const ReferenceRules& rules);
const ReferenceRules& reference_rules();

}  // namespace peak
