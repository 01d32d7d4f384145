#pragma once
// The HIP backend (docs/backend-hip.md). A candidate is HIP device code plus a launch plan, the
// same plan language as CUDA's. Every build compiles the device code twice over:
//  - for AMD with hipcc, once per target of amd_targets() (gfx90a, the MI200 family, and
//    gfx1030), device code only, recording the compiler's resource report (VGPRs, SGPRs, AGPRs,
//    LDS, scratch, spills, occupancy) per kernel and target: nothing runs there, no AMD GPU is
//    needed;
//  - for NVIDIA with nvcc, through the CUDA backend (build cache, cubin checks, peak-runner-cuda)
//    with peak_hip_to_cuda.h mapping HIP's names to CUDA's: this cubin is what runs, so HIP
//    numbers are NVIDIA numbers and are labelled with the platform they were measured on.
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"

namespace peak {

std::unique_ptr<Backend> make_hip_backend();

namespace hip {

// The text of peak_hip_to_cuda.h (built into peak).
std::string_view mapping_header();
// How nvcc compiles a HIP source: the mapping header first, and <hip/hip_runtime.h>,
// <hip/hip_fp16.h>, <hip/hip_runtime_api.h> answered by it.
NvccDialect nvcc_dialect();

// The AMD targets every build compiles for, in order: gfx90a, gfx1030.
std::vector<std::string> amd_targets();
// The text handed to hipcc: <hip/hip_runtime.h> and <hip/hip_fp16.h>, then the source with the
// host region blanked, under `#line 1 "<source_name>"`.
std::string compile_unit(const SourceRegions& source, std::string_view source_name);
// The pinned hipcc flags for one target (device code only, one code object, resource remarks).
std::vector<std::string> hipcc_flags(std::string_view target);
// hipcc: $PEAK_HIPCC, else $ROCM_PATH/bin/hipcc, else /opt/rocm/bin/hipcc, else PATH. Empty when
// none is found.
std::filesystem::path find_hipcc();
// "HIP version: 5.2.21153-0\nDebian clang version 15.0.6" -> "hipcc 5.2.21153-0 (clang 15.0.6)".
std::string hipcc_version_number(std::string_view version_text);

// The resource report of one hipcc run with -Rpass-analysis=kernel-resource-usage (one target):
// {"kernels": {name: {"mangled", "sgprs", "vgprs", "agprs", "scratch_bytes", "occupancy",
// "sgpr_spills", "vgpr_spills", "lds_bytes"}}, "max_vgprs", "max_sgprs", "max_agprs",
// "max_lds_bytes", "max_scratch_bytes", "min_occupancy", "spills", "summary"}. Scratch is bytes
// per lane; occupancy is waves per SIMD. A field the compiler did not print is absent.
nlohmann::json parse_amd_resources(std::string_view log);
// "gfx90a: 40 VGPRs, 0 AGPRs, 18 SGPRs, 8.0 KiB LDS, no scratch, no spills, 8 waves/SIMD".
std::string describe_amd_resources(const nlohmann::json& target_resources);

// What an AMD code object holds, from its ELF header and symbol table.
struct CodeObjectInfo {
  bool amdgpu = false;               // ELF machine EM_AMDGPU
  std::string target;                // "gfx90a", from e_flags
  std::vector<std::string> kernels;  // mangled names of the kernels (symbols with a .kd descriptor)
  std::vector<std::string> undefined;
};
Result<CodeObjectInfo> inspect_code_object(const std::filesystem::path& path);

}  // namespace hip
}  // namespace peak
