#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/hip/hip_backend.h"
#include "backend/hlsl/hlsl_backend.h"

#include <fmt/format.h>

namespace peak {

std::vector<std::string> backend_names() { return {"cuda", "hip", "hlsl"}; }

Result<std::unique_ptr<Backend>> make_backend(const std::string& name) {
  if (name == "hlsl") return make_hlsl_backend();
  if (name == "cuda") return make_cuda_backend();
  if (name == "hip") return make_hip_backend();
  return make_error(fmt::format("unknown backend '{}' (known backends: cuda, hip, hlsl)", name));
}

}  // namespace peak
