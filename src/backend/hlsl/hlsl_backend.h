#pragma once
// The HLSL backend: HLSL compute shaders compiled in process to SPIR-V (shaderc/glslang) and run
// on a Vulkan device by the peak-runner executable. Conventions: docs/backend-hlsl.md.
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "expr/expr.h"

namespace peak {

std::unique_ptr<Backend> make_hlsl_backend();

namespace hlsl {

// The text shaderc compiles: `source` with every line of the host region replaced by an empty
// line (the host region is a launch plan, not HLSL), so compiler line numbers are the file's line numbers.
std::string compile_unit(const SourceRegions& source);

// The versions of the in-process compiler ("shaderc 2023.2.1 / glslang 12.0.0 / SPIRV-Tools ...").
std::string compiler_version();

}  // namespace hlsl
}  // namespace peak
