#pragma once
// `peak export`: a checkpoint as a standalone library (docs/export.md). The files are rendered
// here from what the engine gathers (the context, its device and host regions, the configurations
// of the dispatch table and the symbols their builds define); the engine writes them. The host
// code is the launch plan written as C (export/plan_code.h) plus a small runtime per GPU API, so
// the library runs exactly the launches that peak's runner ran, with no model involved.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "context/context.h"
#include "export/plan_code.h"
#include "plan/plan_language.h"
#include "util/result.h"

namespace peak::exporter {

// The format of an export's export.json (what an export holds, for tools and for `peak export`
// checks); raised when its fields change meaning.
inline constexpr int kExportFormatVersion = 1;

// One configuration built into the library.
struct ExportVariant {
  std::map<std::string, int64_t> config;
  std::string config_text;            // "BLOCK_X=16 BLOCK_Y=8 ..."
  std::vector<std::string> classes;   // the classes that run it ("fallback" for the others)
  std::vector<KernelSymbol> kernels;  // ParsedPlan::kernels() order
  std::string unit;                   // the device compile unit (defines excluded)
  std::string nvcc_unit;              // HIP: the unit nvcc compiles through peak_hip_to_cuda.h
  std::string artifact;               // what peak's build made of it (a cubin, a SPIR-V module)
  std::vector<uint8_t> binary;        // HLSL: the SPIR-V module (`artifact`)
  // HLSL: the module of each kernel (ParsedPlan::kernels() order), where the build made one per
  // entry point (`kernel_artifacts`, read by the engine; empty: `binary` serves every kernel).
  std::vector<std::string> kernel_artifacts;
  std::vector<std::vector<uint8_t>> kernel_binaries;
  nlohmann::json measured = nlohmann::json::object();  // what it was chosen on
};

struct ExportSpec {
  std::string backend;  // "cuda", "hip", "hlsl"
  std::string name;     // C identifier of the entry points: peak_<name>
  const KernelContext* ctx = nullptr;
  const SourceRegions* regions = nullptr;
  const ParsedPlan* plan = nullptr;
  PlanDialect dialect;
  std::vector<ClassRule> rules;
  std::vector<int> rule_variant;  // per rule: the variant that runs its shapes
  int fallback_variant = 0;       // shapes no rule takes
  std::vector<ExportVariant> variants;
  // Compilers: CUDA's nvcc flags and architecture; HIP's AMD targets and hipcc flags.
  std::string arch;                                  // "sm_90a"
  std::vector<std::string> nvcc_flags;               // without -o and the input
  std::vector<std::string> amd_targets;              // "gfx90a", "gfx1030"
  std::vector<std::string> hipcc_flags;              // for one target, @TARGET@ standing for it
  std::map<std::string, std::string> include_files;  // relative path -> text (HIP on NVIDIA)
  std::string nvcc_prelude;  // HIP on NVIDIA: the unit's includes as nvcc's build spells them
  nlohmann::json provenance = nlohmann::json::object();
};

struct ExportFile {
  std::string path;  // relative to the export folder
  std::string text;
  bool binary = false;
};

// The backends peak writes libraries for ("cuda"), and whether `backend` is one.
std::vector<std::string> export_backends();
bool exports_backend(const std::string& backend);

// Every file of the export; an error names what cannot be written as C (a name the plan reads
// that no shape, configuration, macro or device fact gives, a parameter of unknown size).
Result<std::vector<ExportFile>> render_export(const ExportSpec& spec);

}  // namespace peak::exporter
