#pragma once
// The pieces every backend's export is made of (export/export.cpp), shared by the renderers of
// each GPU API: CUDA (export.cpp), HIP (export_hip.cpp), HLSL on Vulkan (export_hlsl.cpp).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "export/export.h"

namespace peak::exporter::detail {

std::string upper(std::string s);
// The C type of an array parameter ("const float*", "void*" for 16-bit floats).
std::string array_type(const ArraySpec& a);
// "int M, int N, int K"
std::string shape_params(const KernelContext& ctx);
// The entry point's parameters: the arrays, the scalars, the workspace and the stream.
std::string entry_params(const ExportSpec& spec);
// "peak_<name><suffix>"
std::string fn(const ExportSpec& spec, const std::string& suffix = "");
// The public C header: the provenance line, the arrays, the PEAK_* status codes, the backend's
// types and entry points (`entries`, `after`), _configuration, _configuration_text and
// _status_string.
struct HeaderParts {
  std::string about;         // lines (" * ...") before the arrays, ending in " *\n"; may be empty
  std::string arrays_title;  // how the arrays are passed
  std::string threads;       // the thread-safety lines (" * ...\n")
  std::string api;           // the GPU API's #include lines
  std::string launch, argument;  // what PEAK_ERROR_LAUNCH and PEAK_ERROR_ARGUMENT mean here
  std::string entries;           // the backend's types and entry points
  std::string after;             // declarations after _status_string
};
std::string header_text(const ExportSpec& spec, const HeaderParts& parts);
// CUDA's and HIP's header (the API include is the backend's).
std::string header(const ExportSpec& spec);
std::string c_string(const std::string& s);
// The plan types, the shape check, the class rules, one plan function per configuration and
// pk_config_for (export/plan_code.h); `max_kernels`: the most kernels a plan launches.
Result<std::string> plan_code(const ExportSpec& spec, size_t& max_kernels);
// The first lines of a host .cpp (its header, the C and C++ includes every runtime uses).
std::string host_preamble(const ExportSpec& spec);
// CUDA's: the API includes, the architecture the cubins are for (PK_ARCH_*), the table of
// configurations (pk_configs: one image each) and the runtime (runtime_cuda.inc).
std::string cuda_includes();
std::string cuda_arch_defines(const std::string& arch);
// The table of configurations (pk_configs): each configuration's image per target (AMD's
// gfx names, with pk_targets), or one image when `targets` is empty (CUDA).
std::string config_table(const ExportSpec& spec, size_t max_kernels,
                         const std::vector<std::string>& targets);
std::string cuda_runtime_text();
// _configuration, _configuration_text and _status_string, with the backend's words for the
// workspace, device and argument errors.
std::string query_functions(const ExportSpec& spec, const std::string& workspace,
                            const std::string& device, const std::string& argument);
// The C entry points over a runtime that defines pk_stream_t, pk_device_t, pk_prepare, pk_leave,
// pk_load, pk_run and pk_workspace_bytes.
std::string entry_points(const ExportSpec& spec);
// kernels/config_<i>.<ext>: the configuration's values as #defines, then variant.unit.
std::string unit_file(const ExportSpec& spec, size_t i);
// A CMake list of arguments (quoted where they hold spaces).
std::string cmake_list(const std::vector<std::string>& items);
// embed.cmake: a binary file as a C array at build time.
std::string embed_cmake();
// The properties every backend's library target `lib` has: position-independent C++17, and the
// export's folder as its public include directory.
std::string library_properties(const std::string& lib);
std::string readme(const ExportSpec& spec);
nlohmann::json manifest(const ExportSpec& spec);

// The HIP export: AMD code objects built by hipcc, or cubins by nvcc through peak_hip_to_cuda.h
// (CMake option PEAK_PLATFORM), one host .cpp for both (export_hip.cpp).
Result<std::vector<ExportFile>> render_hip(const ExportSpec& spec);

// The HLSL export: the SPIR-V modules peak's build made, embedded, and a Vulkan dispatcher that
// records the plan into the caller's command buffer (export_hlsl.cpp, runtime_vulkan.inc).
Result<std::vector<ExportFile>> render_hlsl(const ExportSpec& spec);

}  // namespace peak::exporter::detail
