// The HLSL export: the SPIR-V modules peak's build made (and its Vulkan runner ran), embedded in
// a library whose host code is a Vulkan dispatcher. It records the launch plan into the caller's
// command buffer on the caller's VkDevice exactly as peak-runner records it (docs/export.md):
// arrays at bindings 0.., the scalars' cbuffer next, scratch buffers after it, all in set 0;
// memsets as vkCmdFillBuffer, a full barrier between steps.
#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "backend/hlsl/spirv_reflect.h"
#include "export/render.h"
#include "util/fs.h"

namespace peak::exporter::detail {
namespace {

const char* const kVulkanRuntime =
#include "export/runtime_vulkan.inc"
    ;

// One SPIR-V module of the library: the module of one kernel of one configuration.
struct Module {
  std::string file;  // "config_0" (kernels/config_0.spv)
  const std::vector<uint8_t>* bytes = nullptr;
  std::string entry;  // the entry point
  std::array<uint32_t, 3> local_size{1, 1, 1};
  int64_t shared_bytes = 0;
};

// The modules of every configuration, [variant][kernel]; an error names a module that is missing
// or unreadable, or has no entry point of the kernel's name.
Result<std::vector<std::vector<Module>>> modules_of(const ExportSpec& spec) {
  std::vector<std::vector<Module>> out;
  for (size_t i = 0; i < spec.variants.size(); ++i) {
    const ExportVariant& v = spec.variants[i];
    std::vector<Module> ms;
    // One file per distinct module: config_<i>.spv when the configuration has one.
    std::vector<const std::vector<uint8_t>*> distinct;
    for (size_t k = 0; k < v.kernels.size(); ++k) {
      Module m;
      m.bytes = k < v.kernel_binaries.size() && !v.kernel_binaries[k].empty()
                    ? &v.kernel_binaries[k]
                    : &v.binary;
      if (m.bytes->empty())
        return make_error(fmt::format("configuration {} ({}): no SPIR-V module for `{}`", i,
                                      v.config_text, v.kernels[k].symbol));
      auto words = spirv::words_from_bytes(
          std::string_view(reinterpret_cast<const char*>(m.bytes->data()), m.bytes->size()));
      if (!words) return make_error(fmt::format("configuration {}: {}", i, words.error()));
      auto info = spirv::reflect(*words);
      if (!info) return make_error(fmt::format("configuration {}: {}", i, info.error()));
      const spirv::EntryPoint* ep = info->find(v.kernels[k].symbol);
      if (ep == nullptr)
        return make_error(
            fmt::format("configuration {} ({}): its SPIR-V module has no entry "
                        "point `{}`",
                        i, v.config_text, v.kernels[k].symbol));
      m.entry = ep->name;
      m.local_size = ep->local_size;
      m.shared_bytes = info->shared_bytes;
      size_t d = 0;
      while (d < distinct.size() && *distinct[d] != *m.bytes) ++d;
      if (d == distinct.size()) distinct.push_back(m.bytes);
      m.file = std::to_string(d);  // resolved below, once the count is known
      ms.push_back(m);
    }
    for (Module& m : ms)
      m.file = distinct.size() == 1 ? fmt::format("config_{}", i)
                                    : fmt::format("config_{}_{}", i, m.file);
    out.push_back(ms);
  }
  return out;
}

// The C array a module is embedded as: named after the library, so that several exports link
// into one program.
std::string image_symbol(const ExportSpec& spec, const Module& m) {
  return fn(spec, "_image_" + m.file);
}

// The scratch statements of the plan: the storage buffers bound after the scalars' cbuffer.
size_t scratch_bindings(const ParsedPlan& plan) {
  size_t n = 0;
  for (const auto& s : plan.statements) n += s.kind == PlanStatement::Kind::scratch ? 1 : 0;
  return n;
}

std::string vk_params(const ExportSpec& spec) {
  std::vector<std::string> p;
  p.push_back(fmt::format("const {}* vk", fn(spec, "_vulkan")));
  p.push_back("VkCommandBuffer cmd");
  for (const auto& a : spec.ctx->arrays) p.push_back("VkBuffer " + a.name);
  p.push_back(shape_params(*spec.ctx));
  p.push_back("VkBuffer workspace");
  p.push_back("VkDeviceSize workspace_offset");
  p.push_back("VkDeviceSize workspace_bytes");
  return join(p, ", ");
}

std::string vulkan_header(const ExportSpec& spec) {
  HeaderParts h;
  h.about =
      " * A Vulkan dispatcher: a call records the kernel's launch plan (its memsets and "
      "dispatches, "
      "with\n * barriers) into the caller's command buffer; the caller submits it.\n *\n";
  h.arrays_title =
      "Arrays (VkBuffers bound whole from offset 0, row-major, as peak validated them)";
  h.threads =
      " * Every entry point is safe to call from several host threads at once, each recording "
      "into\n"
      " * its own command buffer (docs/export.md).\n";
  h.api = "#include <vulkan/vulkan.h>";
  h.launch = "the GPU API refused a call (never from a Vulkan library)";
  h.argument = "a null handle: vk, its device, the command buffer, an array";
  h.entries = fmt::format(
      R"C(/* The Vulkan objects a call runs on. `device` must have been created from `physical_device`
 * (Vulkan 1.1 or newer) with the device extension VK_KHR_push_descriptor enabled. */
typedef struct {f}_vulkan {{
  VkInstance instance;               /* the instance `physical_device` belongs to */
  VkPhysicalDevice physical_device;
  VkDevice device;
  /* NULL: the Vulkan loader's vkGetInstanceProcAddr (the library links the loader) */
  PFN_vkGetInstanceProcAddr get_instance_proc_addr;
}} {f}_vulkan;

/* Records the kernel into `cmd` (in the recording state, on a queue with compute): a full
 * barrier, the scalars written into the workspace (vkCmdUpdateBuffer), then each memset
 * (vkCmdFillBuffer) and dispatch of the plan with a full barrier before each and after the last.
 * Nothing runs until the caller submits `cmd`. The arrays and the workspace must stay alive until
 * it has finished. Returns PEAK_OK or an error code; on an error nothing was recorded.
 * The workspace: `workspace_bytes` bytes of `workspace` from `workspace_offset` (a multiple of
 * 256), at least _workspace_size(); a buffer created with VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
 * VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT. */
int {f}({params});

/* Bytes of workspace a call with this shape needs on vk's device (the scalars' cbuffer and the
 * plan's scratch buffers; 0: a shape the library refuses, or a device it cannot run on). */
VkDeviceSize {f}_workspace_size({shape}, const {f}_vulkan* vk);
)C",
      fmt::arg("f", fn(spec)), fmt::arg("params", vk_params(spec)),
      fmt::arg("shape", shape_params(*spec.ctx)));
  h.after = fmt::format(R"C(
/* Destroys the pipelines and layouts the library made on vk->device. Call it before
 * vkDestroyDevice, when no command buffer recorded by the library is pending and no other thread
 * calls the library for that device; a later call makes them again. */
void {f}_release(const {f}_vulkan* vk);
)C",
                        fmt::arg("f", fn(spec)));
  return header_text(spec, h);
}

// The table of configurations: per kernel, its module, entry point, workgroup size and
// groupshared bytes (checked against the device's limits before its pipeline is made).
std::string vulkan_config_table(const ExportSpec& spec, const std::vector<std::vector<Module>>& ms,
                                size_t max_kernels) {
  std::string out = fmt::format("#define PK_NCONFIGS {}\n#define PK_MAX_KERNELS {}\n",
                                spec.variants.size(), max_kernels);
  std::vector<std::string> declared;
  for (const auto& v : ms)
    for (const Module& m : v)
      if (std::find(declared.begin(), declared.end(), m.file) == declared.end()) {
        declared.push_back(m.file);
        out += fmt::format("extern \"C\" const unsigned char {}[];\n", image_symbol(spec, m));
      }
  out += R"C(
struct pk_module {
  const unsigned char* image; /* SPIR-V, 64-byte aligned */
  size_t bytes;
  const char* entry;
  uint32_t local_size[3];
  int64_t shared_bytes;
};
struct pk_config {
  pk_module kernels[PK_MAX_KERNELS];
  int nkernels;
  int (*plan)(const pk_shape*, const pk_dev*, pk_plan*);
  const char* text;
};
static const pk_config pk_configs[PK_NCONFIGS] = {
)C";
  for (size_t i = 0; i < ms.size(); ++i) {
    std::vector<std::string> ks;
    for (const Module& m : ms[i])
      ks.push_back(fmt::format("{{{}, {}, {}, {{{}, {}, {}}}, {}}}", image_symbol(spec, m),
                               m.bytes->size(), c_string(m.entry), m.local_size[0], m.local_size[1],
                               m.local_size[2], m.shared_bytes));
    if (ks.empty()) ks.push_back("{nullptr, 0, nullptr, {1, 1, 1}, 0}");
    out += fmt::format("  {{{{{}}}, {}, pk_plan_{}, {}}},\n", join(ks, ", "), ms[i].size(), i,
                       c_string(spec.variants[i].config_text));
  }
  return out + "};\n";
}

// The scalars' cbuffer, as the runner fills it: each scalar as a 32-bit integer in kernel.toml's
// order, zero-padded to 16 bytes.
std::string uniform_code(const ExportSpec& spec) {
  const size_t n = spec.ctx->scalars.size();
  const size_t bytes = std::max<size_t>(16, (4 * n + 15) / 16 * 16);
  std::string out = fmt::format(
      "#define PK_NARRAY_BINDINGS {}\n#define PK_UNIFORM_BYTES {}\n"
      "static void pk_uniform(const pk_shape* s, uint32_t* u) {{\n"
      "  memset(u, 0, PK_UNIFORM_BYTES);\n  (void)s;\n",
      spec.ctx->arrays.size(), bytes);
  for (size_t i = 0; i < n; ++i)
    out += fmt::format(
        "  {{\n    const int32_t v = (int32_t)s->{};\n    memcpy(u + {}, &v, 4);\n  }}\n",
        spec.ctx->scalars[i].name, i);
  return out + "}\n";
}

std::string vulkan_entry_points(const ExportSpec& spec) {
  std::string set_shape, arrays;
  std::vector<std::string> bufs;
  for (const auto& s : spec.ctx->scalars) set_shape += fmt::format("  s.{0} = {0};\n", s.name);
  for (const auto& a : spec.ctx->arrays) {
    bufs.push_back(a.name);
    arrays += fmt::format("  if ({} == VK_NULL_HANDLE && s.{}_size > 0) return PK_ST_ARGUMENT;\n",
                          a.name, a.name);
  }
  if (bufs.empty()) bufs.push_back("VK_NULL_HANDLE");
  const std::string f = fn(spec);
  return fmt::format(
      R"C(
extern "C" int {f}({params}) {{
  pk_shape s = {{}};
{set}  if (int st0 = pk_shape_check(&s)) return st0;
  if (vk == nullptr || vk->instance == VK_NULL_HANDLE || vk->physical_device == VK_NULL_HANDLE ||
      vk->device == VK_NULL_HANDLE || cmd == VK_NULL_HANDLE)
    return PK_ST_ARGUMENT;
{arrays}  const VkBuffer arrays[] = {{{bufs}}};
  pk_device* dev = nullptr;
  int c = 0;
  pk_plan p;
  if (int st = pk_prepare(&s, vk->instance, vk->physical_device, vk->device,
                          vk->get_instance_proc_addr, &dev, &c, &p))
    return st;
  const int64_t need = pk_workspace_bytes(&p);
  if (workspace == VK_NULL_HANDLE || workspace_offset % 256 != 0 ||
      workspace_bytes < (VkDeviceSize)need)
    return PK_ST_WORKSPACE;
  if (int st = pk_check_grid(dev, &p)) return st;
  if (int st = pk_load(dev, c, &p)) return st;
  pk_record(dev, c, &p, &s, arrays, workspace, workspace_offset, cmd);
  return PK_ST_OK;
}}

extern "C" VkDeviceSize {f}_workspace_size({shape}, const {f}_vulkan* vk) {{
  pk_shape s = {{}};
{set}  if (pk_shape_check(&s) != PK_ST_OK) return 0;
  if (vk == nullptr || vk->instance == VK_NULL_HANDLE || vk->physical_device == VK_NULL_HANDLE ||
      vk->device == VK_NULL_HANDLE)
    return 0;
  pk_device* dev = nullptr;
  int c = 0;
  pk_plan p;
  if (pk_prepare(&s, vk->instance, vk->physical_device, vk->device, vk->get_instance_proc_addr,
                 &dev, &c, &p) != PK_ST_OK)
    return 0;
  return (VkDeviceSize)pk_workspace_bytes(&p);
}}

{queries}
extern "C" void {f}_release(const {f}_vulkan* vk) {{
  if (vk != nullptr) pk_release(vk->device);
}}
)C",
      fmt::arg("f", f), fmt::arg("params", vk_params(spec)), fmt::arg("set", set_shape),
      fmt::arg("arrays", arrays), fmt::arg("bufs", join(bufs, ", ")),
      fmt::arg("queries",
               query_functions(spec,
                               "the workspace is missing, too small (see _workspace_size) or "
                               "at an offset that is no multiple of 256",
                               "the device cannot run the library (Vulkan 1.1 and "
                               "VK_KHR_push_descriptor enabled are needed) or a pipeline "
                               "could not be created",
                               "a null Vulkan handle (vk, its device, the command buffer or "
                               "an array)")),
      fmt::arg("shape", shape_params(*spec.ctx)));
}

Result<std::string> vulkan_host(const ExportSpec& spec,
                                const std::vector<std::vector<Module>>& modules) {
  size_t max_kernels = 1;
  auto code = plan_code(spec, max_kernels);
  if (!code) return code;
  std::string out = fmt::format(
      "// {}: generated by peak export (checkpoint {} of {}). Do not edit: export again.\n"
      "#include \"{}.h\"\n\n#include <stdint.h>\n#include <string.h>\n\n#include <memory>\n"
      "#include <mutex>\n#include <vector>\n\n",
      fn(spec) + ".cpp", spec.provenance.value("checkpoint", int64_t{0}), spec.ctx->name, fn(spec));
  out += *code;
  out += "\n" + vulkan_config_table(spec, modules, max_kernels);
  out += fmt::format("#define PK_NSCRATCH_BINDINGS {}\n", scratch_bindings(*spec.plan));
  out += uniform_code(spec);
  out += kVulkanRuntime;
  out += vulkan_entry_points(spec);
  return out;
}

std::string vulkan_cmake(const ExportSpec& spec, const std::vector<std::vector<Module>>& ms) {
  const std::string lib = fn(spec);
  std::vector<std::string> files;
  for (const auto& v : ms)
    for (const Module& m : v)
      if (std::find(files.begin(), files.end(), m.file) == files.end()) files.push_back(m.file);
  return fmt::format(
      R"CM(# {lib}: generated by peak export. Builds a library that needs nothing of peak:
#   cmake -S . -B build -G Ninja && cmake --build build
# The SPIR-V module of each configuration (kernels/*.spv: what peak's build made and its Vulkan
# runner ran) is embedded in the library; kernels/*.hlsl are their sources, for reference.
cmake_minimum_required(VERSION 3.18)
project({lib} LANGUAGES C CXX)
find_package(Vulkan REQUIRED)
find_package(Threads REQUIRED)
set(images)
foreach(module {files})
  set(image ${{CMAKE_CURRENT_BINARY_DIR}}/${{module}}_image.c)
  add_custom_command(OUTPUT ${{image}}
    COMMAND ${{CMAKE_COMMAND}} -DINPUT=${{CMAKE_CURRENT_SOURCE_DIR}}/kernels/${{module}}.spv
            -DOUTPUT=${{image}} -DSYMBOL={lib}_image_${{module}}
            -P ${{CMAKE_CURRENT_SOURCE_DIR}}/embed.cmake
    DEPENDS ${{CMAKE_CURRENT_SOURCE_DIR}}/kernels/${{module}}.spv
            ${{CMAKE_CURRENT_SOURCE_DIR}}/embed.cmake
    COMMENT "embedding kernels/${{module}}.spv" VERBATIM)
  list(APPEND images ${{image}})
endforeach()
add_library({lib} {lib}.cpp ${{images}})
{properties}target_link_libraries({lib} PUBLIC Vulkan::Vulkan PRIVATE Threads::Threads)
)CM",
      fmt::arg("lib", lib), fmt::arg("properties", library_properties(lib)),
      fmt::arg("files", join(files, " ")));
}

}  // namespace

Result<std::vector<ExportFile>> render_hlsl(const ExportSpec& spec) {
  auto modules = modules_of(spec);
  if (!modules) return Error{modules.error()};
  auto host = vulkan_host(spec, *modules);
  if (!host) return Error{host.error()};
  const std::string f = fn(spec);
  std::vector<ExportFile> files;
  files.push_back({f + ".h", vulkan_header(spec)});
  files.push_back({f + ".cpp", *host});
  for (size_t i = 0; i < spec.variants.size(); ++i)
    files.push_back({fmt::format("kernels/config_{}.hlsl", i), unit_file(spec, i)});
  std::vector<std::string> written;
  for (const auto& v : *modules)
    for (const Module& m : v) {
      if (std::find(written.begin(), written.end(), m.file) != written.end()) continue;
      written.push_back(m.file);
      files.push_back(
          {"kernels/" + m.file + ".spv", std::string(m.bytes->begin(), m.bytes->end()), true});
    }
  files.push_back({"CMakeLists.txt", vulkan_cmake(spec, *modules)});
  files.push_back({"embed.cmake", embed_cmake()});
  files.push_back({"README.md", readme(spec)});
  files.push_back({"export.json", manifest(spec).dump(2) + "\n"});
  return files;
}

}  // namespace peak::exporter::detail
