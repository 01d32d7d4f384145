// The Vulkan device of the peak-runner executable (runner/device.h): buffers, SPIR-V pipelines
// bound by the HLSL backend's convention (arrays at bindings 0..n-1, the scalars' uniform buffer
// at binding n, all in set 0), timestamped dispatches with a fence deadline, fresh inputs made on
// the device, cache flushing and an FP32 FMA-throughput microbenchmark. Compiled only into
// peak-runner.
#include <vulkan/vulkan.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <shaderc/shaderc.hpp>

#include "backend/hlsl/spirv_reflect.h"
#include "runner/device.h"
#include "runner/execute.h"
#include "util/fs.h"

#if __has_include("runner/nvml.h")
#include "runner/nvml.h"
#define PEAK_HAVE_NVML 1
#endif

namespace peak {
namespace {

constexpr uint32_t kVendorNvidia = 0x10DE;

template <typename T>
T vk_struct(VkStructureType type) {
  T s{};
  s.sType = type;
  return s;
}

const char* vk_result_name(VkResult r) {
  switch (r) {
#define PEAK_VK_CASE(x) \
  case x:               \
    return #x;
    PEAK_VK_CASE(VK_SUCCESS)
    PEAK_VK_CASE(VK_NOT_READY)
    PEAK_VK_CASE(VK_TIMEOUT)
    PEAK_VK_CASE(VK_EVENT_SET)
    PEAK_VK_CASE(VK_EVENT_RESET)
    PEAK_VK_CASE(VK_INCOMPLETE)
    PEAK_VK_CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    PEAK_VK_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    PEAK_VK_CASE(VK_ERROR_INITIALIZATION_FAILED)
    PEAK_VK_CASE(VK_ERROR_DEVICE_LOST)
    PEAK_VK_CASE(VK_ERROR_MEMORY_MAP_FAILED)
    PEAK_VK_CASE(VK_ERROR_LAYER_NOT_PRESENT)
    PEAK_VK_CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    PEAK_VK_CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    PEAK_VK_CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    PEAK_VK_CASE(VK_ERROR_TOO_MANY_OBJECTS)
    PEAK_VK_CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
    PEAK_VK_CASE(VK_ERROR_FRAGMENTED_POOL)
    PEAK_VK_CASE(VK_ERROR_UNKNOWN)
    PEAK_VK_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    PEAK_VK_CASE(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    PEAK_VK_CASE(VK_ERROR_FRAGMENTATION)
    PEAK_VK_CASE(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    PEAK_VK_CASE(VK_PIPELINE_COMPILE_REQUIRED)
    PEAK_VK_CASE(VK_ERROR_INVALID_SHADER_NV)
#undef PEAK_VK_CASE
    default:
      return "VK_ERROR_(unknown)";
  }
}

std::string version_text(uint32_t v) {
  return fmt::format("{}.{}.{}", VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v),
                     VK_API_VERSION_PATCH(v));
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "CPU";
    default:
      return "other";
  }
}

int type_rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return 3;
    default:
      return 4;
  }
}

std::string vendor_text(uint32_t id) {
  const char* name = nullptr;
  switch (id) {
    case 0x10DE:
      name = "NVIDIA";
      break;
    case 0x1002:
      name = "AMD";
      break;
    case 0x8086:
      name = "Intel";
      break;
    case 0x13B5:
      name = "ARM";
      break;
    case 0x5143:
      name = "Qualcomm";
      break;
    case 0x106B:
      name = "Apple";
      break;
    case 0x10005:
      name = "Mesa";
      break;
    default:
      break;
  }
  return name ? fmt::format("0x{:04x} ({})", id, name) : fmt::format("0x{:04x}", id);
}

double env_double(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  double d = std::strtod(v, &end);
  return (end != v && d > 0) ? d : fallback;
}

constexpr int kFmaGroupSize = 256;  // threads per group of the FMA kernel (its numthreads)

struct Buf {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;  // persistently mapped when host-visible
  VkDeviceSize size = 0;
};

class VulkanDevice;

class VulkanKernel final : public LoadedKernel {
 public:
  explicit VulkanKernel(VulkanDevice* owner) : owner_(owner) {}
  ~VulkanKernel() override;

  VulkanDevice* owner_;
  VkShaderModule module = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  VkDescriptorSet set = VK_NULL_HANDLE;
  Buf uniform;
  size_t arrays = 0;
  size_t scratch = 0;  // storage buffers bound after the scalars' cbuffer
  std::string entry;
  json driver_statistics = json::object();  // of the pipeline; empty when the driver says none
};

// Every entry point a launch plan uses, by (module, entry).
class VulkanProgram final : public LoadedKernel {
 public:
  std::map<std::pair<std::string, std::string>, std::unique_ptr<VulkanKernel>> kernels;
  json statistics() const override {
    json out = json::object();
    for (const auto& [key, k] : kernels)
      if (!k->driver_statistics.empty() && out.size() < kMaxKernelStatistics)
        out[k->entry] = k->driver_statistics;
    return out;
  }
};

class VulkanDevice final : public Device {
 public:
  ~VulkanDevice() override;
  Status init(const std::string& selector);

  DeviceFacts facts() override;
  double measure_fp32_tflops() override;
  Result<DeviceBuffer> alloc(size_t bytes) override;
  void free(DeviceBuffer& b) override;
  Status upload(DeviceBuffer& b, const void* data, size_t bytes) override;
  Status download(const DeviceBuffer& b, void* data, size_t bytes) override;
  Status fill_u32(DeviceBuffer& b, uint32_t word) override;
  // Fresh inputs made by a GLSL compute shader (kGenerateShader), where the device has 64-bit
  // integers and doubles and the shader builds.
  bool generates() override { return !lost_ && generator() != nullptr; }
  // Not a size in whole words, a buffer larger than one storage binding may be, or a draw whose a
  // or d is not finite (its NaNs would be the driver's, not the host's).
  bool can_generate(const InputGenerator& g, size_t bytes) override {
    return g.dtype != DType::e4m3 && bytes % 4 == 0 &&
           bytes <= props_.limits.maxStorageBufferRange && std::isfinite(g.a) && std::isfinite(g.d);
  }
  Status generate(DeviceBuffer& b, const InputGenerator& g, int64_t count,
                  const std::vector<uint8_t>& tail) override;
  Result<std::unique_ptr<LoadedKernel>> load(const RunnerTask& task, const RunnerJob& job,
                                             const LaunchPlan& plan) override;
  LaunchOutcome launch(LoadedKernel& k, const RunnerTask& task, const RunnerJob& job,
                       const LaunchPlan& plan, TaskBuffers& buffers, bool timed) override;
  LaunchOutcome baseline(const std::string& name, const RunnerTask&, const RunnerJob&,
                         std::vector<DeviceBuffer>&, bool) override {
    LaunchOutcome o;
    o.disposition = Disposition::not_run;
    o.message = fmt::format("the Vulkan runner has no vendor library baseline (`{}`)", name);
    return o;
  }
  // The same-traffic copy between two device buffers, timed like a launch: vkCmdCopyBuffer, and a
  // compute shader that copies 16-byte vectors in a grid-stride loop (the runner keeps the faster).
  std::vector<std::string> copy_methods() override { return {"vulkan-copy", "vector-shader"}; }
  LaunchOutcome copy(const std::string& method, const DeviceBuffer& src, DeviceBuffer& dst,
                     size_t bytes, bool timed) override;
  void flush_caches() override;
  double clock_mhz() override;
  bool lost() override { return lost_; }

  void destroy_kernel(VulkanKernel& k);

 private:
  Error vk_error(const char* what, VkResult r) {
    if (r == VK_ERROR_DEVICE_LOST) lost_ = true;
    return make_error(fmt::format("{} failed: {}", what, vk_result_name(r)));
  }
  // The steps of init(), in order.
  Status create_instance();
  Status choose_device(const std::string& selector);
  void read_optional_properties(const std::vector<VkExtensionProperties>& exts);
  Status choose_queue();
  Status create_device(const std::vector<VkExtensionProperties>& exts);
  Status create_command_objects();
  void choose_memory_path();
  int memory_type(uint32_t bits, VkMemoryPropertyFlags want) const;
  Result<Buf> create_buffer(VkDeviceSize size, VkBufferUsageFlags usage, bool host_visible);
  void destroy_buffer(Buf& b);
  // Records with `record`, submits, waits (fence deadline). VK_TIMEOUT / DEVICE_LOST mark the
  // device lost. host_ms: the host clock around submit + wait.
  VkResult run(const std::function<void(VkCommandBuffer)>& record, double* host_ms = nullptr);
  Status run_status(const char* what, const std::function<void(VkCommandBuffer)>& record);
  // run() of `body` between barriers and, with `stamps`, between the timestamps timestamp_ms()
  // reads.
  VkResult run_stamped(const std::function<void(VkCommandBuffer)>& body, bool stamps,
                       double* host_ms);
  // Records `body` between barriers (and, when timed, between timestamps: device_ms; the clock
  // brought back first, ramp_clock), submits and waits; the outcome names `what` when it times
  // out and `action` when it fails.
  LaunchOutcome submit_timed(const std::function<void(VkCommandBuffer)>& body, bool timed,
                             const char* what, const char* action);
  Result<std::unique_ptr<VulkanKernel>> make_kernel(const std::vector<uint32_t>& words,
                                                    const std::string& entry, size_t arrays,
                                                    size_t scratch, size_t uniform_bytes);
  Result<std::unique_ptr<VulkanKernel>> load_entry(const std::string& module,
                                                   const std::string& entry, const RunnerJob& job,
                                                   size_t scratch);
  double timestamp_ms();
  // What the driver says of a pipeline's code (VK_KHR_pipeline_executable_properties), by the
  // driver's statistic names; empty when the extension is off.
  json pipeline_statistics(VkPipeline pipeline);

  // The FP32 FMA kernel (measure_fp32_tflops, and the load that brings a GPU's clock back before
  // a timed launch), built on first use; nullptr when it cannot be.
  struct Fma {
    std::unique_ptr<VulkanKernel> kernel;
    Buf out;
    uint32_t groups = 0;
    uint64_t threads() const { return uint64_t{groups} * kFmaGroupSize; }
  };
  Fma* fma();
  // One of the runner's own compute shaders (entry point `main`, `storage` storage buffers at
  // bindings 0.. and a uniform buffer of `uniform_bytes` after them), HLSL or GLSL, compiled and
  // made a kernel.
  Result<std::unique_ptr<VulkanKernel>> builtin_kernel(
      const char* source, const char* name, size_t storage,
      shaderc_source_language language = shaderc_source_language_hlsl, size_t uniform_bytes = 16);
  // Points a built-in kernel's storage bindings at `storage` (in binding order) and the binding
  // after them at its uniform buffer.
  void bind_builtin(VulkanKernel& k, std::initializer_list<VkBuffer> storage);
  // The 16-byte vector copy shader of the same-traffic copy, built on first use; nullptr when it
  // cannot be.
  VulkanKernel* copy_shader();
  LaunchOutcome shader_copy(const Buf& from, const Buf& to, size_t bytes, bool timed);
  // The input generator (generate()), built on first use; nullptr when the device lacks
  // shaderInt64 or shaderFloat64, or the shader cannot be built.
  struct Generator {
    std::unique_ptr<VulkanKernel> kernel;
    Buf tail;      // host-visible: the words from the one the elements end in on (stage_tail)
    Buf flag;      // device-local: one word, set by the shader when an element is nonzero
    Buf readback;  // host-visible: the flag copied back (bytes 0..3), the zero fix's element
                   // staged (bytes 4..7)
  };
  Generator* generator();
  Status stage_tail(Generator& gen, size_t bytes, const std::vector<uint8_t>& tail);
  Status zero_fix(Generator& gen, Buf& out, const InputGenerator& g, int64_t count);
  // Records one dispatch of the FMA kernel; its loop count is set in its uniform before submit.
  void record_fma(VkCommandBuffer cmd, const Fma& f);
  void set_fma_iters(const Fma& f, int32_t iters);
  // A GPU left idle while the host prepares the next inputs drops to a low clock that a short
  // launch does not lift. Before a timed launch whose SM clock (NVML) is under the highest clock
  // seen under load, keeps the GPU busy until it is back there and steady; bounded in time. A
  // launch that finds the clock still up (the launches before kept it there) pays one reading.
  void ramp_clock();

  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice phys_ = VK_NULL_HANDLE;
  VkDevice dev_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  uint32_t timestamp_bits_ = 0;
  VkCommandPool cmd_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkQueryPool queries_ = VK_NULL_HANDLE;
  VkPipelineCache pipeline_cache_ = VK_NULL_HANDLE;  // compiled kernels, for the process
  VkPhysicalDeviceProperties props_{};
  VkPhysicalDeviceMemoryProperties mem_props_{};
  uint32_t subgroup_size_ = 0;
  std::string driver_;
  std::string pci_bus_id_;  // "" when VK_EXT_pci_bus_info is absent
  int compute_units_ = 0;
  int device_index_ = 0;
  bool unified_ = false;  // device-local memory is host-visible and coherent: map directly
  // VK_KHR_pipeline_executable_properties, enabled where the driver offers it: pipelines are
  // created with their statistics captured.
  PFN_vkGetPipelineExecutablePropertiesKHR get_executables_ = nullptr;
  PFN_vkGetPipelineExecutableStatisticsKHR get_statistics_ = nullptr;
  bool lost_ = false;
  double fence_timeout_s_ = 30;
  std::set<Buf*> buffers_;
  Buf scratch_;
  uint32_t flush_word_ = 0;
  std::unique_ptr<Fma> fma_;
  std::unique_ptr<VulkanKernel> copy_shader_;
  bool copy_shader_failed_ = false;
  std::unique_ptr<Generator> generator_;
  bool generator_failed_ = false;
  bool int64_float64_ = false;  // shaderInt64 and shaderFloat64 enabled (create_device)
  bool fma_failed_ = false;
  double fma_iters_per_ms_ = 0;  // at the loaded clock, from the first timed FMA dispatch
  double loaded_clock_mhz_ = 0;  // the highest SM clock seen right after a busy slice
};

VulkanKernel::~VulkanKernel() { owner_->destroy_kernel(*this); }

VulkanDevice::~VulkanDevice() {
  // After a timeout or a lost device the queue may never drain; the process is about to exit,
  // so leave everything to the operating system rather than block in vkDeviceWaitIdle.
  if (lost_ || dev_ == VK_NULL_HANDLE) return;
  vkDeviceWaitIdle(dev_);
  for (Buf* b : buffers_) {
    destroy_buffer(*b);
    delete b;
  }
  buffers_.clear();
  destroy_buffer(scratch_);
  if (fma_) {
    destroy_buffer(fma_->out);
    fma_.reset();
  }
  copy_shader_.reset();
  if (generator_) {
    destroy_buffer(generator_->tail);
    destroy_buffer(generator_->flag);
    destroy_buffer(generator_->readback);
    generator_.reset();
  }
  if (queries_) vkDestroyQueryPool(dev_, queries_, nullptr);
  if (pipeline_cache_) vkDestroyPipelineCache(dev_, pipeline_cache_, nullptr);
  if (fence_) vkDestroyFence(dev_, fence_, nullptr);
  if (cmd_pool_) vkDestroyCommandPool(dev_, cmd_pool_, nullptr);
  vkDestroyDevice(dev_, nullptr);
  if (instance_) vkDestroyInstance(instance_, nullptr);
}

namespace {

// The device `selector` names (an index, or part of a name; empty: the best type of Vulkan 1.1+
// device); -1 when none does.
int select_device(const std::vector<VkPhysicalDeviceProperties>& all, const std::string& sel) {
  int chosen = -1;
  if (sel.empty()) {
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i].apiVersion < VK_API_VERSION_1_1) continue;
      if (chosen < 0 || type_rank(all[i].deviceType) < type_rank(all[chosen].deviceType))
        chosen = static_cast<int>(i);
    }
  } else if (std::all_of(sel.begin(), sel.end(),
                         [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    size_t idx = std::stoul(sel);
    if (idx < all.size()) chosen = static_cast<int>(idx);
  } else {
    for (size_t i = 0; i < all.size(); ++i) {
      if (lower(all[i].deviceName).find(lower(sel)) != std::string::npos) {
        chosen = static_cast<int>(i);
        break;
      }
    }
  }
  return chosen;
}

std::vector<VkExtensionProperties> device_extensions(VkPhysicalDevice phys) {
  uint32_t ext_count = 0;
  vkEnumerateDeviceExtensionProperties(phys, nullptr, &ext_count, nullptr);
  std::vector<VkExtensionProperties> exts(ext_count);
  if (ext_count) vkEnumerateDeviceExtensionProperties(phys, nullptr, &ext_count, exts.data());
  return exts;
}

bool has_extension(const std::vector<VkExtensionProperties>& exts, const char* n) {
  for (const auto& e : exts)
    if (std::strcmp(e.extensionName, n) == 0) return true;
  return false;
}

}  // namespace

Status VulkanDevice::init(const std::string& selector) {
  fence_timeout_s_ = env_double("PEAK_RUNNER_FENCE_TIMEOUT_S", 30.0);
  if (Status st = create_instance(); !st) return st;
  if (Status st = choose_device(selector); !st) return st;
  vkGetPhysicalDeviceMemoryProperties(phys_, &mem_props_);
  const std::vector<VkExtensionProperties> exts = device_extensions(phys_);
  read_optional_properties(exts);
  if (Status st = choose_queue(); !st) return st;
  if (Status st = create_device(exts); !st) return st;
  if (Status st = create_command_objects(); !st) return st;
  choose_memory_path();
  return Status::ok();
}

Status VulkanDevice::create_instance() {
  uint32_t loader_version = VK_API_VERSION_1_0;
  if (vkEnumerateInstanceVersion(&loader_version) != VK_SUCCESS)
    loader_version = VK_API_VERSION_1_0;
  if (loader_version < VK_API_VERSION_1_1)
    return Status::error(fmt::format(
        "the Vulkan loader supports only Vulkan {}; peak needs Vulkan 1.1 or newer (install a "
        "newer libvulkan1)",
        version_text(loader_version)));
  auto app = vk_struct<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
  app.pApplicationName = "peak-runner";
  app.apiVersion = std::min<uint32_t>(loader_version, VK_API_VERSION_1_3);
  auto ici = vk_struct<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
  ici.pApplicationInfo = &app;
  if (VkResult r = vkCreateInstance(&ici, nullptr, &instance_); r != VK_SUCCESS)
    return Status::error(fmt::format(
        "cannot create a Vulkan instance ({}): no usable Vulkan driver; install the GPU's "
        "Vulkan driver, or mesa-vulkan-drivers for a CPU device (lavapipe)",
        vk_result_name(r)));
  return Status::ok();
}

Status VulkanDevice::choose_device(const std::string& selector) {
  uint32_t count = 0;
  vkEnumeratePhysicalDevices(instance_, &count, nullptr);
  std::vector<VkPhysicalDevice> devices(count);
  if (count > 0) vkEnumeratePhysicalDevices(instance_, &count, devices.data());
  if (devices.empty())
    return Status::error(
        "no Vulkan device found; install the GPU's Vulkan driver, or mesa-vulkan-drivers for a "
        "CPU device (lavapipe)");
  std::vector<VkPhysicalDeviceProperties> all(devices.size());
  std::string listing;
  for (size_t i = 0; i < devices.size(); ++i) {
    vkGetPhysicalDeviceProperties(devices[i], &all[i]);
    listing += fmt::format("\n  {}: {} ({}, Vulkan {})", i, all[i].deviceName,
                           type_name(all[i].deviceType), version_text(all[i].apiVersion));
  }
  std::string sel = trim(selector);
  int chosen = select_device(all, sel);
  if (chosen < 0)
    return Status::error(fmt::format("no Vulkan device matches `{}`; the devices are:{}",
                                     sel.empty() ? "(any, Vulkan 1.1+)" : sel, listing));
  phys_ = devices[chosen];
  device_index_ = chosen;
  props_ = all[chosen];
  if (props_.apiVersion < VK_API_VERSION_1_1)
    return Status::error(fmt::format("{} supports only Vulkan {}; peak needs Vulkan 1.1",
                                     props_.deviceName, version_text(props_.apiVersion)));
  return Status::ok();
}

// Extensions that carry optional facts (queried, never enabled): subgroup size, driver, SM count,
// PCI bus id, AMD compute units.
void VulkanDevice::read_optional_properties(const std::vector<VkExtensionProperties>& exts) {
  auto has_ext = [&](const char* n) { return has_extension(exts, n); };
  auto p2 = vk_struct<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
  auto subgroup = vk_struct<VkPhysicalDeviceSubgroupProperties>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES);
  auto driver = vk_struct<VkPhysicalDeviceDriverProperties>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES);
  auto sm = vk_struct<VkPhysicalDeviceShaderSMBuiltinsPropertiesNV>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV);
  auto amd = vk_struct<VkPhysicalDeviceShaderCorePropertiesAMD>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD);
  p2.pNext = &subgroup;
  void** tail = &subgroup.pNext;
  bool have_driver = props_.apiVersion >= VK_API_VERSION_1_2 || has_ext("VK_KHR_driver_properties");
  if (have_driver) {
    *tail = &driver;
    tail = &driver.pNext;
  }
  bool have_sm = has_ext("VK_NV_shader_sm_builtins");
  if (have_sm) {
    *tail = &sm;
    tail = &sm.pNext;
  }
  auto pci_info = vk_struct<VkPhysicalDevicePCIBusInfoPropertiesEXT>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT);
  bool have_pci = has_ext("VK_EXT_pci_bus_info");
  if (have_pci) {
    *tail = &pci_info;
    tail = &pci_info.pNext;
  }
  bool have_amd = has_ext("VK_AMD_shader_core_properties");
  if (have_amd) {
    *tail = &amd;
    tail = &amd.pNext;
  }
  vkGetPhysicalDeviceProperties2(phys_, &p2);
  subgroup_size_ = subgroup.subgroupSize;
  if (have_driver) driver_ = trim(fmt::format("{} {}", driver.driverName, driver.driverInfo));
  if (driver_.empty()) {
    uint32_t v = props_.driverVersion;
    driver_ = props_.vendorID == kVendorNvidia
                  ? fmt::format("{}.{}.{}.{}", v >> 22, (v >> 14) & 0xff, (v >> 6) & 0xff, v & 0x3f)
                  : version_text(v);
  }
  if (have_sm) compute_units_ = static_cast<int>(sm.shaderSMCount);
  if (have_pci)  // as NVML and cudaDeviceGetPCIBusId spell it
    pci_bus_id_ = fmt::format("{:04X}:{:02X}:{:02X}.{:X}", pci_info.pciDomain, pci_info.pciBus,
                              pci_info.pciDevice, pci_info.pciFunction);
  if (have_amd)
    compute_units_ = static_cast<int>(amd.shaderEngineCount * amd.shaderArraysPerEngineCount *
                                      amd.computeUnitsPerShaderArray);
}

// A compute queue, preferably one with timestamps.
Status VulkanDevice::choose_queue() {
  uint32_t qcount = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(phys_, &qcount, nullptr);
  std::vector<VkQueueFamilyProperties> qprops(qcount);
  vkGetPhysicalDeviceQueueFamilyProperties(phys_, &qcount, qprops.data());
  int family = -1;
  for (uint32_t i = 0; i < qcount; ++i) {
    if (!(qprops[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (family < 0 || (qprops[family].timestampValidBits == 0 && qprops[i].timestampValidBits > 0))
      family = static_cast<int>(i);
  }
  if (family < 0) return Status::error(fmt::format("{} has no compute queue", props_.deviceName));
  queue_family_ = static_cast<uint32_t>(family);
  timestamp_bits_ = qprops[family].timestampValidBits;
  return Status::ok();
}

Status VulkanDevice::create_device(const std::vector<VkExtensionProperties>& exts) {
  float priority = 1.0f;
  auto qci = vk_struct<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
  qci.queueFamilyIndex = queue_family_;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;
  auto dci = vk_struct<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  // Of the core features only shaderInt64 and shaderFloat64, where the device has them (the input
  // generator's arithmetic, generate()): robustBufferAccess stays off, so a write past the end of
  // an array lands in the runner's guard zone and is detected instead of being silently dropped.
  // The one extension asked for, where the driver offers it, only reports on the code the driver
  // makes.
  VkPhysicalDeviceFeatures offered{}, features{};
  vkGetPhysicalDeviceFeatures(phys_, &offered);
  features.shaderInt64 = offered.shaderInt64;
  features.shaderFloat64 = offered.shaderFloat64;
  dci.pEnabledFeatures = &features;
  int64_float64_ = offered.shaderInt64 == VK_TRUE && offered.shaderFloat64 == VK_TRUE;
  auto exec_features = vk_struct<VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR);
  const char* exec_ext = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
  if (has_extension(exts, exec_ext)) {
    auto f2 = vk_struct<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
    f2.pNext = &exec_features;
    vkGetPhysicalDeviceFeatures2(phys_, &f2);
    exec_features.pNext = nullptr;
  }
  const bool exec_stats = exec_features.pipelineExecutableInfo == VK_TRUE;
  if (exec_stats) {
    dci.pNext = &exec_features;
    dci.enabledExtensionCount = 1;
    dci.ppEnabledExtensionNames = &exec_ext;
  }
  if (VkResult r = vkCreateDevice(phys_, &dci, nullptr, &dev_); r != VK_SUCCESS)
    return Status::error(fmt::format("cannot open {}: vkCreateDevice failed: {}", props_.deviceName,
                                     vk_result_name(r)));
  vkGetDeviceQueue(dev_, queue_family_, 0, &queue_);
  if (exec_stats) {
    get_executables_ = reinterpret_cast<PFN_vkGetPipelineExecutablePropertiesKHR>(
        vkGetDeviceProcAddr(dev_, "vkGetPipelineExecutablePropertiesKHR"));
    get_statistics_ = reinterpret_cast<PFN_vkGetPipelineExecutableStatisticsKHR>(
        vkGetDeviceProcAddr(dev_, "vkGetPipelineExecutableStatisticsKHR"));
    if (!get_executables_ || !get_statistics_) {
      get_executables_ = nullptr;
      get_statistics_ = nullptr;
    }
  }
  return Status::ok();
}

// The command pool and buffer, the fence, and the timestamp queries where the queue has them.
Status VulkanDevice::create_command_objects() {
  auto pci = vk_struct<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = queue_family_;
  if (VkResult r = vkCreateCommandPool(dev_, &pci, nullptr, &cmd_pool_); r != VK_SUCCESS)
    return vk_error("vkCreateCommandPool", r);
  auto cai = vk_struct<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
  cai.commandPool = cmd_pool_;
  cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cai.commandBufferCount = 1;
  if (VkResult r = vkAllocateCommandBuffers(dev_, &cai, &cmd_); r != VK_SUCCESS)
    return vk_error("vkAllocateCommandBuffers", r);
  auto fci = vk_struct<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
  if (VkResult r = vkCreateFence(dev_, &fci, nullptr, &fence_); r != VK_SUCCESS)
    return vk_error("vkCreateFence", r);
  // One pipeline cache for the runner's life: every task of a job loads its kernels again (fresh
  // objects, nothing carried from one task to the next), and the driver translates a SPIR-V module
  // it has seen in this process once. Without it NVIDIA's driver compiles the same module for
  // every task. Only compiled code is shared; a driver without a cache works as before.
  auto cci = vk_struct<VkPipelineCacheCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO);
  if (vkCreatePipelineCache(dev_, &cci, nullptr, &pipeline_cache_) != VK_SUCCESS)
    pipeline_cache_ = VK_NULL_HANDLE;
  if (timestamp_bits_ > 0) {
    auto qpi = vk_struct<VkQueryPoolCreateInfo>(VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO);
    qpi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qpi.queryCount = 2;
    if (vkCreateQueryPool(dev_, &qpi, nullptr, &queries_) != VK_SUCCESS) {
      queries_ = VK_NULL_HANDLE;
      timestamp_bits_ = 0;
    }
  }
  return Status::ok();
}

// Unified memory (CPU devices, integrated GPUs): device-local memory that the host can map.
void VulkanDevice::choose_memory_path() {
  bool uma = props_.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ||
             props_.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
  // PEAK_RUNNER_VK_STAGING=1 takes the staging path anyway (how the tests cover it on lavapipe).
  const char* staging = std::getenv("PEAK_RUNNER_VK_STAGING");
  unified_ =
      uma && !(staging && std::string(staging) == "1") &&
      memory_type(~0u, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                           VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) >= 0;
}

DeviceFacts VulkanDevice::facts() {
  DeviceFacts f;
  f.backend = "hlsl";
  f.name = props_.deviceName;
  f.vendor = vendor_text(props_.vendorID);
  f.driver = driver_;
  f.api_version = version_text(props_.apiVersion);
  f.is_cpu = props_.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  f.compute_units = compute_units_;
  f.subgroup_size = static_cast<int>(subgroup_size_);
  f.shared_memory_per_group = props_.limits.maxComputeSharedMemorySize;
  f.shared_memory_per_group_optin = props_.limits.maxComputeSharedMemorySize;
  f.max_threads_per_group = props_.limits.maxComputeWorkGroupInvocations;
  f.l2_bytes = 0;
  for (uint32_t i = 0; i < mem_props_.memoryHeapCount; ++i)
    if (mem_props_.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      f.memory_bytes =
          std::max<int64_t>(f.memory_bytes, static_cast<int64_t>(mem_props_.memoryHeaps[i].size));
  f.clock_mhz = clock_mhz();
  const auto& l = props_.limits;
  f.extra["api"] = "Vulkan";
  f.extra["l2"] = "unknown";
  f.extra["device_index"] = std::to_string(device_index_);
  f.extra["device_type"] = type_name(props_.deviceType);
  f.extra["device_id"] = fmt::format("0x{:04x}", props_.deviceID);
  f.extra["vendor_id"] = fmt::format("0x{:04x}", props_.vendorID);
  f.extra["timestamp_period_ns"] = fmt::format("{}", l.timestampPeriod);
  f.extra["timestamp_valid_bits"] = std::to_string(timestamp_bits_);
  f.extra["max_workgroup_size"] =
      fmt::format("{} {} {}", l.maxComputeWorkGroupSize[0], l.maxComputeWorkGroupSize[1],
                  l.maxComputeWorkGroupSize[2]);
  f.extra["max_workgroup_count"] =
      fmt::format("{} {} {}", l.maxComputeWorkGroupCount[0], l.maxComputeWorkGroupCount[1],
                  l.maxComputeWorkGroupCount[2]);
  f.extra["max_storage_buffer_range"] = std::to_string(l.maxStorageBufferRange);
  f.extra["queue_family"] = std::to_string(queue_family_);
  if (!pci_bus_id_.empty()) f.extra["pci_bus_id"] = pci_bus_id_;
  f.extra["memory_mapping"] = unified_ ? "unified (mapped directly)" : "staged";
  f.extra["input_generator"] = generates() ? "device" : "host";
  return f;
}

int VulkanDevice::memory_type(uint32_t bits, VkMemoryPropertyFlags want) const {
  for (uint32_t i = 0; i < mem_props_.memoryTypeCount; ++i)
    if ((bits & (1u << i)) && (mem_props_.memoryTypes[i].propertyFlags & want) == want)
      return static_cast<int>(i);
  return -1;
}

Result<Buf> VulkanDevice::create_buffer(VkDeviceSize size, VkBufferUsageFlags usage,
                                        bool host_visible) {
  Buf b;
  b.size = std::max<VkDeviceSize>(4, (size + 3) / 4 * 4);
  auto bci = vk_struct<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
  bci.size = b.size;
  bci.usage = usage;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  if (VkResult r = vkCreateBuffer(dev_, &bci, nullptr, &b.buffer); r != VK_SUCCESS)
    return vk_error("vkCreateBuffer", r);
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(dev_, b.buffer, &req);
  const VkMemoryPropertyFlags coherent =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int type = -1;
  if (host_visible) {
    if (unified_)
      type = memory_type(req.memoryTypeBits, coherent | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    if (type < 0)
      type = memory_type(req.memoryTypeBits, coherent | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    if (type < 0) type = memory_type(req.memoryTypeBits, coherent);
  } else {
    type = memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    if (type < 0) type = memory_type(req.memoryTypeBits, 0);
  }
  if (type < 0) {
    vkDestroyBuffer(dev_, b.buffer, nullptr);
    return make_error("no suitable Vulkan memory type for a buffer");
  }
  auto mai = vk_struct<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = static_cast<uint32_t>(type);
  if (VkResult r = vkAllocateMemory(dev_, &mai, nullptr, &b.memory); r != VK_SUCCESS) {
    vkDestroyBuffer(dev_, b.buffer, nullptr);
    return make_error(fmt::format("cannot allocate {} of device memory: {}",
                                  format_bytes(static_cast<double>(b.size)), vk_result_name(r)));
  }
  vkBindBufferMemory(dev_, b.buffer, b.memory, 0);
  if (host_visible) {
    if (vkMapMemory(dev_, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped) != VK_SUCCESS)
      b.mapped = nullptr;
  }
  return b;
}

void VulkanDevice::destroy_buffer(Buf& b) {
  if (dev_ == VK_NULL_HANDLE) return;
  if (b.buffer) vkDestroyBuffer(dev_, b.buffer, nullptr);
  if (b.memory) vkFreeMemory(dev_, b.memory, nullptr);
  b = Buf{};
}

VkResult VulkanDevice::run(const std::function<void(VkCommandBuffer)>& record, double* host_ms) {
  if (lost_) return VK_ERROR_DEVICE_LOST;
  vkResetCommandBuffer(cmd_, 0);
  auto begin = vk_struct<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  if (VkResult r = vkBeginCommandBuffer(cmd_, &begin); r != VK_SUCCESS) return r;
  record(cmd_);
  if (VkResult r = vkEndCommandBuffer(cmd_); r != VK_SUCCESS) return r;
  vkResetFences(dev_, 1, &fence_);
  auto si = vk_struct<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd_;
  auto t0 = std::chrono::steady_clock::now();
  VkResult r = vkQueueSubmit(queue_, 1, &si, fence_);
  if (r == VK_SUCCESS) {
    auto timeout_ns = static_cast<uint64_t>(fence_timeout_s_ * 1e9);
    r = vkWaitForFences(dev_, 1, &fence_, VK_TRUE, timeout_ns);
  }
  if (host_ms)
    *host_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (r == VK_TIMEOUT || r == VK_ERROR_DEVICE_LOST) lost_ = true;
  return r;
}

Status VulkanDevice::run_status(const char* what,
                                const std::function<void(VkCommandBuffer)>& record) {
  VkResult r = run(record);
  if (r == VK_SUCCESS) return Status::ok();
  if (r == VK_TIMEOUT)
    return Status::error(fmt::format(
        "{} did not finish within {} s (the device is considered lost)", what, fence_timeout_s_));
  return Status::error(fmt::format("{} failed: {}", what, vk_result_name(r)));
}

void full_barrier(VkCommandBuffer cmd) {
  auto mb = vk_struct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
  mb.srcAccessMask =
      VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                     VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                     VK_ACCESS_HOST_READ_BIT | VK_ACCESS_UNIFORM_READ_BIT;
  VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT |
                                VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT;
  vkCmdPipelineBarrier(cmd, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

Result<DeviceBuffer> VulkanDevice::alloc(size_t bytes) {
  if (lost_) return make_error("the Vulkan device was lost");
  auto b = create_buffer(bytes,
                         VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                             VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                         unified_);
  if (!b) return Error{b.error()};
  Buf* p = new Buf(*b);
  buffers_.insert(p);
  DeviceBuffer db;
  db.handle = p;
  db.bytes = bytes;
  return db;
}

void VulkanDevice::free(DeviceBuffer& b) {
  Buf* p = static_cast<Buf*>(b.handle);
  if (p == nullptr) return;
  if (buffers_.erase(p)) {
    if (!lost_) destroy_buffer(*p);
    delete p;
  }
  b.handle = nullptr;
  b.bytes = 0;
}

Status VulkanDevice::upload(DeviceBuffer& b, const void* data, size_t bytes) {
  Buf* p = static_cast<Buf*>(b.handle);
  if (p == nullptr || bytes > p->size) return Status::error("upload larger than the buffer");
  if (lost_) return Status::error("the Vulkan device was lost");
  if (p->mapped) {
    std::memcpy(p->mapped, data, bytes);
    return Status::ok();
  }
  auto staging = create_buffer(bytes, VK_BUFFER_USAGE_TRANSFER_SRC_BIT, true);
  if (!staging) return staging.status();
  Buf s = *staging;
  if (!s.mapped) {
    destroy_buffer(s);
    return Status::error("cannot map the staging buffer");
  }
  std::memcpy(s.mapped, data, bytes);
  Status st = run_status("the upload", [&](VkCommandBuffer cmd) {
    VkBufferCopy region{0, 0, static_cast<VkDeviceSize>(bytes)};
    if (bytes > 0) vkCmdCopyBuffer(cmd, s.buffer, p->buffer, 1, &region);
    full_barrier(cmd);
  });
  if (!lost_) destroy_buffer(s);
  return st;
}

Status VulkanDevice::download(const DeviceBuffer& b, void* data, size_t bytes) {
  Buf* p = static_cast<Buf*>(b.handle);
  if (p == nullptr || bytes > p->size) return Status::error("download larger than the buffer");
  if (lost_) return Status::error("the Vulkan device was lost");
  if (p->mapped) {
    std::memcpy(data, p->mapped, bytes);
    return Status::ok();
  }
  auto staging = create_buffer(bytes, VK_BUFFER_USAGE_TRANSFER_DST_BIT, true);
  if (!staging) return staging.status();
  Buf s = *staging;
  if (!s.mapped) {
    destroy_buffer(s);
    return Status::error("cannot map the staging buffer");
  }
  Status st = run_status("the download", [&](VkCommandBuffer cmd) {
    full_barrier(cmd);
    VkBufferCopy region{0, 0, static_cast<VkDeviceSize>(bytes)};
    if (bytes > 0) vkCmdCopyBuffer(cmd, p->buffer, s.buffer, 1, &region);
    full_barrier(cmd);
  });
  if (st) std::memcpy(data, s.mapped, bytes);
  if (!lost_) destroy_buffer(s);
  return st;
}

Status VulkanDevice::fill_u32(DeviceBuffer& b, uint32_t word) {
  Buf* p = static_cast<Buf*>(b.handle);
  if (p == nullptr) return Status::error("fill of an unallocated buffer");
  return run_status("the buffer fill", [&](VkCommandBuffer cmd) {
    full_barrier(cmd);
    vkCmdFillBuffer(cmd, p->buffer, 0, VK_WHOLE_SIZE, word);
    full_barrier(cmd);
  });
}

Result<std::unique_ptr<VulkanKernel>> VulkanDevice::make_kernel(const std::vector<uint32_t>& words,
                                                                const std::string& entry,
                                                                size_t arrays, size_t scratch,
                                                                size_t uniform_bytes) {
  auto k = std::make_unique<VulkanKernel>(this);
  k->arrays = arrays;
  k->scratch = scratch;
  k->entry = entry;
  auto smi = vk_struct<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
  smi.codeSize = words.size() * sizeof(uint32_t);
  smi.pCode = words.data();
  if (VkResult r = vkCreateShaderModule(dev_, &smi, nullptr, &k->module); r != VK_SUCCESS)
    return vk_error("vkCreateShaderModule", r);

  std::vector<VkDescriptorSetLayoutBinding> bindings;
  for (size_t i = 0; i <= arrays + scratch; ++i) {
    VkDescriptorSetLayoutBinding b{};
    b.binding = static_cast<uint32_t>(i);
    b.descriptorType =
        i != arrays ? VK_DESCRIPTOR_TYPE_STORAGE_BUFFER : VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER;
    b.descriptorCount = 1;
    b.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    bindings.push_back(b);
  }
  auto dli = vk_struct<VkDescriptorSetLayoutCreateInfo>(
      VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
  dli.bindingCount = static_cast<uint32_t>(bindings.size());
  dli.pBindings = bindings.data();
  if (VkResult r = vkCreateDescriptorSetLayout(dev_, &dli, nullptr, &k->set_layout);
      r != VK_SUCCESS)
    return vk_error("vkCreateDescriptorSetLayout", r);
  auto pli = vk_struct<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &k->set_layout;
  if (VkResult r = vkCreatePipelineLayout(dev_, &pli, nullptr, &k->layout); r != VK_SUCCESS)
    return vk_error("vkCreatePipelineLayout", r);

  auto cpi = vk_struct<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
  cpi.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  cpi.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cpi.stage.module = k->module;
  cpi.stage.pName = k->entry.c_str();
  cpi.layout = k->layout;
  if (get_statistics_) cpi.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  if (VkResult r = vkCreateComputePipelines(dev_, pipeline_cache_, 1, &cpi, nullptr, &k->pipeline);
      r != VK_SUCCESS) {
    k->pipeline = VK_NULL_HANDLE;
    return make_error(fmt::format("creating the compute pipeline failed: {}", vk_result_name(r)));
  }
  k->driver_statistics = pipeline_statistics(k->pipeline);

  std::array<VkDescriptorPoolSize, 2> sizes{};
  uint32_t n_sizes = 0;
  if (arrays + scratch > 0)
    sizes[n_sizes++] = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, static_cast<uint32_t>(arrays + scratch)};
  sizes[n_sizes++] = {VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, 1};
  auto dpi = vk_struct<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
  dpi.maxSets = 1;
  dpi.poolSizeCount = n_sizes;
  dpi.pPoolSizes = sizes.data();
  if (VkResult r = vkCreateDescriptorPool(dev_, &dpi, nullptr, &k->pool); r != VK_SUCCESS)
    return vk_error("vkCreateDescriptorPool", r);
  auto dai = vk_struct<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
  dai.descriptorPool = k->pool;
  dai.descriptorSetCount = 1;
  dai.pSetLayouts = &k->set_layout;
  if (VkResult r = vkAllocateDescriptorSets(dev_, &dai, &k->set); r != VK_SUCCESS)
    return vk_error("vkAllocateDescriptorSets", r);

  auto u = create_buffer(std::max<size_t>(16, (uniform_bytes + 15) / 16 * 16),
                         VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT, true);
  if (!u) return Error{u.error()};
  k->uniform = *u;
  if (!k->uniform.mapped) return make_error("cannot map the scalars' uniform buffer");
  std::memset(k->uniform.mapped, 0, k->uniform.size);
  return k;
}

void VulkanDevice::destroy_kernel(VulkanKernel& k) {
  if (lost_ || dev_ == VK_NULL_HANDLE) return;
  vkQueueWaitIdle(queue_);
  if (k.pipeline) vkDestroyPipeline(dev_, k.pipeline, nullptr);
  if (k.layout) vkDestroyPipelineLayout(dev_, k.layout, nullptr);
  if (k.pool) vkDestroyDescriptorPool(dev_, k.pool, nullptr);
  if (k.set_layout) vkDestroyDescriptorSetLayout(dev_, k.set_layout, nullptr);
  if (k.module) vkDestroyShaderModule(dev_, k.module, nullptr);
  destroy_buffer(k.uniform);
}

Result<std::unique_ptr<VulkanKernel>> VulkanDevice::load_entry(const std::string& module,
                                                               const std::string& entry_name,
                                                               const RunnerJob& job,
                                                               size_t scratch) {
  auto bytes = read_file(module);
  if (!bytes) return make_error(fmt::format("cannot read the SPIR-V module: {}", bytes.error()));
  auto words = spirv::words_from_bytes(*bytes);
  if (!words) return make_error(fmt::format("{}: {}", module, words.error()));
  auto info = spirv::reflect(*words);
  if (!info) return make_error(fmt::format("{}: {}", module, info.error()));
  const spirv::EntryPoint* ep = info->find(entry_name);
  if (ep == nullptr)
    return make_error(fmt::format("the SPIR-V module has no entry point `{}`", entry_name));
  std::string entry = ep->name;

  // The shader's resources must follow the binding convention, or the pipeline is invalid:
  // arrays at 0..n-1, the scalars' cbuffer at n, the plan's scratch buffers at n+1...
  const size_t n = job.arrays.size();
  for (const auto& b : info->bindings) {
    std::string what = b.name.empty() ? "a resource" : "`" + b.name + "`";
    if (b.set != 0)
      return make_error(
          fmt::format("{} is bound to descriptor set {}; peak binds everything in set 0 "
                      "([[vk::binding(i, 0)]])",
                      what, b.set));
    if (b.binding < n) {
      if (b.kind != spirv::DescriptorKind::storage_buffer)
        return make_error(fmt::format(
            "binding {} ({}) must be a StructuredBuffer/RWStructuredBuffer for array `{}`",
            b.binding, what, job.arrays[b.binding].name));
    } else if (b.binding == n) {
      if (b.kind != spirv::DescriptorKind::uniform_buffer)
        return make_error(
            fmt::format("binding {} ({}) must be the scalars' cbuffer (the kernel has {} arrays)",
                        b.binding, what, n));
    } else if (b.binding <= n + scratch) {
      if (b.kind != spirv::DescriptorKind::storage_buffer)
        return make_error(fmt::format(
            "binding {} ({}) must be a RWStructuredBuffer for scratch buffer {} of the plan",
            b.binding, what, b.binding - n - 1));
    } else {
      return make_error(fmt::format(
          "{} uses binding {}, but the kernel has {} arrays (bindings 0..{}), the scalars at "
          "binding {} and {} scratch buffer(s) after them",
          what, b.binding, n, n == 0 ? 0 : n - 1, n, scratch));
    }
  }
  const auto& ls = ep->local_size;
  const auto& lim = props_.limits;
  uint64_t threads = uint64_t{ls[0]} * ls[1] * ls[2];
  if (threads == 0 || threads > lim.maxComputeWorkGroupInvocations)
    return load_error(Disposition::invalid_config,
                      fmt::format("[numthreads({}, {}, {})] is {} threads; {} allows at most {} "
                                  "(maxComputeWorkGroupInvocations)",
                                  ls[0], ls[1], ls[2], threads, props_.deviceName,
                                  lim.maxComputeWorkGroupInvocations));
  for (int i = 0; i < 3; ++i)
    if (ls[i] > lim.maxComputeWorkGroupSize[i])
      return load_error(Disposition::invalid_config,
                        fmt::format("numthreads {} = {} exceeds {}'s limit of {}", "xyz"[i], ls[i],
                                    props_.deviceName, lim.maxComputeWorkGroupSize[i]));
  if (info->shared_bytes > static_cast<int64_t>(lim.maxComputeSharedMemorySize))
    return load_error(
        Disposition::invalid_config,
        fmt::format("the kernel uses {} bytes of groupshared memory; {} allows at "
                    "most {} (maxComputeSharedMemorySize)",
                    info->shared_bytes, props_.deviceName, lim.maxComputeSharedMemorySize));
  return make_kernel(*words, entry, n, scratch, 4 * job.scalars.size());
}

Result<std::unique_ptr<LoadedKernel>> VulkanDevice::load(const RunnerTask& task,
                                                         const RunnerJob& job,
                                                         const LaunchPlan& plan) {
  if (lost_) return make_error("the Vulkan device was lost");
  auto program = std::make_unique<VulkanProgram>();
  for (const PlanStep& st : plan.steps) {
    if (st.op != PlanStep::Op::launch) continue;
    std::string module = st.module.empty() ? task.artifact : st.module;
    std::string entry = st.symbol.empty() ? st.kernel : st.symbol;
    auto key = std::make_pair(module, entry);
    if (program->kernels.count(key)) continue;
    auto k = load_entry(module, entry, job, plan.scratch.size());
    if (!k) return Error{k.error()};
    program->kernels[key] = std::move(*k);
  }
  if (program->kernels.empty()) return make_error("the launch plan launches nothing");
  return std::unique_ptr<LoadedKernel>(std::move(program));
}

json VulkanDevice::pipeline_statistics(VkPipeline pipeline) {
  json out = json::object();
  if (!get_executables_ || !get_statistics_) return out;
  auto info = vk_struct<VkPipelineInfoKHR>(VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR);
  info.pipeline = pipeline;
  uint32_t n = 0;
  if (get_executables_(dev_, &info, &n, nullptr) != VK_SUCCESS) return out;
  // A compute pipeline has one executable; should a driver make several, the first value of a
  // name is kept.
  for (uint32_t e = 0; e < n; ++e) {
    auto ei =
        vk_struct<VkPipelineExecutableInfoKHR>(VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR);
    ei.pipeline = pipeline;
    ei.executableIndex = e;
    uint32_t count = 0;
    if (get_statistics_(dev_, &ei, &count, nullptr) != VK_SUCCESS || count == 0) continue;
    std::vector<VkPipelineExecutableStatisticKHR> stats(
        count, vk_struct<VkPipelineExecutableStatisticKHR>(
                   VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR));
    VkResult r = get_statistics_(dev_, &ei, &count, stats.data());
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) continue;
    for (uint32_t i = 0; i < count && out.size() < kMaxKernelStatistics; ++i) {
      const auto& st = stats[i];
      std::string name(st.name, strnlen(st.name, VK_MAX_DESCRIPTION_SIZE));
      if (name.empty() || out.contains(name)) continue;
      switch (st.format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
          out[name] = st.value.b32 == VK_TRUE;
          break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
          out[name] = st.value.i64;
          break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
          out[name] = st.value.u64;
          break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR:
          if (std::isfinite(st.value.f64)) out[name] = st.value.f64;
          break;
        default:
          break;
      }
    }
  }
  return out;
}

double VulkanDevice::timestamp_ms() {
  uint64_t ts[2] = {0, 0};
  if (vkGetQueryPoolResults(dev_, queries_, 0, 2, sizeof(ts), ts, sizeof(uint64_t),
                            VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) != VK_SUCCESS)
    return -1;
  uint64_t mask = timestamp_bits_ >= 64 ? ~uint64_t{0} : ((uint64_t{1} << timestamp_bits_) - 1);
  uint64_t ticks = ((ts[1] & mask) - (ts[0] & mask)) & mask;
  return static_cast<double>(ticks) * props_.limits.timestampPeriod / 1e6;
}

LaunchOutcome VulkanDevice::launch(LoadedKernel& kernel, const RunnerTask& task,
                                   const RunnerJob& job, const LaunchPlan& plan,
                                   TaskBuffers& buffers, bool timed) {
  LaunchOutcome out;
  auto& program = static_cast<VulkanProgram&>(kernel);
  auto fail = [&](Disposition d, std::string m) {
    out.disposition = d;
    out.message = std::move(m);
    return out;
  };
  if (lost_) return fail(Disposition::crashed, "the Vulkan device was lost by an earlier launch");
  if (buffers.arrays.size() != job.arrays.size() || buffers.scratch.size() != plan.scratch.size())
    return fail(Disposition::launch_failed,
                fmt::format("{} buffers for {} arrays", buffers.arrays.size(), job.arrays.size()));
  // Scalars: 4 bytes each, in kernel.toml order (int32).
  std::vector<uint8_t> scalars(4 * job.scalars.size());
  for (size_t i = 0; i < job.scalars.size(); ++i) {
    auto it = task.shape.values.find(job.scalars[i].name);
    if (it == task.shape.values.end())
      return fail(Disposition::launch_failed,
                  fmt::format("the shape gives no value for the scalar `{}`", job.scalars[i].name));
    auto v = static_cast<int32_t>(it->second);
    std::memcpy(scalars.data() + 4 * i, &v, 4);
  }
  // Every kernel's descriptor set: arrays, the scalars, scratch buffers.
  for (auto& [key, kp] : program.kernels) {
    VulkanKernel& k = *kp;
    std::memcpy(k.uniform.mapped, scalars.data(), scalars.size());
    const size_t total = k.arrays + 1 + k.scratch;
    std::vector<VkDescriptorBufferInfo> infos(total);
    std::vector<VkWriteDescriptorSet> writes(total);
    for (size_t i = 0; i < total; ++i) {
      Buf* b = i < k.arrays    ? static_cast<Buf*>(buffers.arrays[i].handle)
               : i == k.arrays ? &k.uniform
                               : static_cast<Buf*>(buffers.scratch[i - k.arrays - 1].handle);
      if (b == nullptr) return fail(Disposition::launch_failed, "a buffer of the task is missing");
      infos[i] = {b->buffer, 0, VK_WHOLE_SIZE};  // the whole buffer, guard zone included
      writes[i] = vk_struct<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
      writes[i].dstSet = k.set;
      writes[i].dstBinding = static_cast<uint32_t>(i);
      writes[i].descriptorCount = 1;
      writes[i].descriptorType =
          i == k.arrays ? VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &infos[i];
    }
    vkUpdateDescriptorSets(dev_, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
  }
  // The steps, checked before anything is recorded.
  struct Step {
    VulkanKernel* kernel = nullptr;
    std::array<uint32_t, 3> groups{1, 1, 1};
    Buf* fill = nullptr;
    VkDeviceSize fill_bytes = 0;
    uint32_t fill_word = 0;
  };
  std::vector<Step> steps;
  for (const PlanStep& st : plan.steps) {
    Step s;
    if (st.op == PlanStep::Op::memset) {
      const bool is_array = st.target.kind == PlanBufferRef::Kind::array;
      const auto idx = static_cast<size_t>(st.target.index);
      s.fill =
          static_cast<Buf*>(is_array ? buffers.arrays[idx].handle : buffers.scratch[idx].handle);
      size_t bytes = 0;
      if (is_array) {
        auto it = task.sizes.find(job.arrays[idx].name);
        bytes = it == task.sizes.end()
                    ? 0
                    : static_cast<size_t>(it->second) * dtype_size(job.arrays[idx].dtype);
      } else {
        bytes = static_cast<size_t>(plan.scratch[idx].bytes);
      }
      s.fill_bytes = (bytes + 3) / 4 * 4;  // vkCmdFillBuffer writes whole words
      s.fill_word = 0x01010101u * static_cast<uint32_t>(st.value);
      steps.push_back(s);
      continue;
    }
    std::string module = st.module.empty() ? task.artifact : st.module;
    std::string entry = st.symbol.empty() ? st.kernel : st.symbol;
    auto it = program.kernels.find({module, entry});
    if (it == program.kernels.end())
      return fail(Disposition::launch_failed,
                  fmt::format("internal: entry point `{}` was not loaded", entry));
    s.kernel = it->second.get();
    for (int i = 0; i < 3; ++i) {
      int64_t v = st.grid[static_cast<size_t>(i)];
      if (v < 1 || v > static_cast<int64_t>(props_.limits.maxComputeWorkGroupCount[i]))
        return fail(
            Disposition::invalid_config,
            fmt::format("launch `{}`: grid.{} = {} is outside 1..{} on {}", st.kernel, "xyz"[i], v,
                        props_.limits.maxComputeWorkGroupCount[i], props_.deviceName));
      s.groups[static_cast<size_t>(i)] = static_cast<uint32_t>(v);
    }
    steps.push_back(s);
  }

  return submit_timed(
      [&](VkCommandBuffer cmd) {
        for (size_t i = 0; i < steps.size(); ++i) {
          const Step& s = steps[i];
          if (i > 0) full_barrier(cmd);  // each step sees what the previous ones wrote
          if (s.fill != nullptr) {
            if (s.fill_bytes > 0)
              vkCmdFillBuffer(cmd, s.fill->buffer, 0, s.fill_bytes, s.fill_word);
            continue;
          }
          vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, s.kernel->pipeline);
          vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, s.kernel->layout, 0, 1,
                                  &s.kernel->set, 0, nullptr);
          vkCmdDispatch(cmd, s.groups[0], s.groups[1], s.groups[2]);
        }
      },
      timed, "the kernel", "the launch");
}

VkResult VulkanDevice::run_stamped(const std::function<void(VkCommandBuffer)>& body, bool stamps,
                                   double* host_ms) {
  return run(
      [&](VkCommandBuffer cmd) {
        full_barrier(cmd);
        if (stamps) {
          vkCmdResetQueryPool(cmd, queries_, 0, 2);
          vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries_, 0);
        }
        body(cmd);
        if (stamps) vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, 1);
        full_barrier(cmd);
      },
      host_ms);
}

LaunchOutcome VulkanDevice::submit_timed(const std::function<void(VkCommandBuffer)>& body,
                                         bool timed, const char* what, const char* action) {
  LaunchOutcome out;
  auto fail = [&](Disposition d, std::string m) {
    out.disposition = d;
    out.message = std::move(m);
    return out;
  };
  const bool stamps = timed && queries_ != VK_NULL_HANDLE;
  if (timed) ramp_clock();
  double host_ms = 0;
  VkResult r = run_stamped(body, stamps, &host_ms);
  out.host_ms = host_ms;
  if (r == VK_TIMEOUT)
    return fail(Disposition::timeout, fmt::format("{} did not finish within {} s (fence timeout)",
                                                  what, fence_timeout_s_));
  if (r == VK_ERROR_DEVICE_LOST)
    return fail(Disposition::crashed,
                fmt::format("the Vulkan device was lost during {} (VK_ERROR_DEVICE_LOST)", action));
  if (r != VK_SUCCESS)
    return fail(Disposition::launch_failed,
                fmt::format("{} failed: {}", action, vk_result_name(r)));
  if (timed) out.device_ms = stamps ? timestamp_ms() : host_ms;
  if (timed && out.device_ms < 0) out.device_ms = host_ms;
  return out;
}

LaunchOutcome VulkanDevice::copy(const std::string& method, const DeviceBuffer& src,
                                 DeviceBuffer& dst, size_t bytes, bool timed) {
  if (method != "vulkan-copy" && method != "vector-shader")
    return Device::copy(method, src, dst, bytes, timed);
  auto* from = static_cast<Buf*>(src.handle);
  auto* to = static_cast<Buf*>(dst.handle);
  if (lost_) {
    LaunchOutcome o;
    o.disposition = Disposition::crashed;
    o.message = "the Vulkan device was lost by an earlier launch";
    return o;
  }
  if (from == nullptr || to == nullptr || bytes > from->size || bytes > to->size) {
    LaunchOutcome o;
    o.disposition = Disposition::launch_failed;
    o.message = fmt::format("internal: a copy of {} bytes between buffers it does not fit", bytes);
    return o;
  }
  if (method == "vector-shader") return shader_copy(*from, *to, bytes, timed);
  return submit_timed(
      [&](VkCommandBuffer cmd) {
        VkBufferCopy region{0, 0, static_cast<VkDeviceSize>(bytes)};
        if (bytes > 0) vkCmdCopyBuffer(cmd, from->buffer, to->buffer, 1, &region);
      },
      timed, "the copy", "the copy");
}

// ---- The 16-byte vector copy shader ----

constexpr uint32_t kCopyGroupSize = 256;
constexpr uint32_t kCopyMaxGroups = 65535;

const char* kCopyShader = R"(
[[vk::binding(0, 0)]] StructuredBuffer<uint4> Src;
[[vk::binding(1, 0)]] RWStructuredBuffer<uint4> Dst;
[[vk::binding(2, 0)]] cbuffer Params { uint vectors; uint stride; uint pad0; uint pad1; };
[numthreads(256, 1, 1)]
void main(uint3 id : SV_DispatchThreadID) {
  for (uint i = id.x; i < vectors; i += stride) Dst[i] = Src[i];
}
)";

Result<std::unique_ptr<VulkanKernel>> VulkanDevice::builtin_kernel(const char* source,
                                                                   const char* name, size_t storage,
                                                                   shaderc_source_language language,
                                                                   size_t uniform_bytes) {
  shaderc::Compiler compiler;
  shaderc::CompileOptions options;
  options.SetSourceLanguage(language);
  options.SetTargetEnvironment(shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_1);
  options.SetOptimizationLevel(shaderc_optimization_level_performance);
  auto result = compiler.CompileGlslToSpv(source, shaderc_compute_shader, name, "main", options);
  if (result.GetCompilationStatus() != shaderc_compilation_status_success)
    return make_error(fmt::format("{} does not compile: {}", name, result.GetErrorMessage()));
  return make_kernel(std::vector<uint32_t>(result.cbegin(), result.cend()), "main", storage, 0,
                     uniform_bytes);
}

void VulkanDevice::bind_builtin(VulkanKernel& k, std::initializer_list<VkBuffer> storage) {
  std::vector<VkDescriptorBufferInfo> infos;
  for (VkBuffer b : storage) infos.push_back({b, 0, VK_WHOLE_SIZE});
  infos.push_back({k.uniform.buffer, 0, VK_WHOLE_SIZE});
  std::vector<VkWriteDescriptorSet> writes(infos.size());
  for (size_t i = 0; i < infos.size(); ++i) {
    writes[i] = vk_struct<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
    writes[i].dstSet = k.set;
    writes[i].dstBinding = static_cast<uint32_t>(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType =
        i < storage.size() ? VK_DESCRIPTOR_TYPE_STORAGE_BUFFER : VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  vkUpdateDescriptorSets(dev_, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
}

VulkanKernel* VulkanDevice::copy_shader() {
  if (copy_shader_ || copy_shader_failed_ || lost_) return copy_shader_.get();
  copy_shader_failed_ = true;  // until it is built
  auto k = builtin_kernel(kCopyShader, "copy.hlsl", 2);
  if (!k) return nullptr;
  copy_shader_ = std::move(*k);
  copy_shader_failed_ = false;
  return copy_shader_.get();
}

// `bytes` is a multiple of 16 (the runner rounds the copy up); the buffers are bound anew each
// time, as the previous copy has finished (submit_timed waits for it).
LaunchOutcome VulkanDevice::shader_copy(const Buf& from, const Buf& to, size_t bytes, bool timed) {
  VulkanKernel* k = copy_shader();
  if (k == nullptr) {
    LaunchOutcome o;
    o.disposition = Disposition::launch_failed;
    o.message = "the copy shader could not be built";
    return o;
  }
  const auto vectors = static_cast<uint32_t>(bytes / 16);
  const uint32_t groups =
      std::clamp((vectors + kCopyGroupSize - 1) / kCopyGroupSize, 1u, kCopyMaxGroups);
  const uint32_t params[4] = {vectors, groups * kCopyGroupSize, 0, 0};
  std::memcpy(k->uniform.mapped, params, sizeof(params));
  bind_builtin(*k, {from.buffer, to.buffer});
  return submit_timed(
      [&](VkCommandBuffer cmd) {
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->pipeline);
        vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->layout, 0, 1, &k->set, 0,
                                nullptr);
        if (vectors > 0) vkCmdDispatch(cmd, groups, 1, 1);
      },
      timed, "the copy shader", "the copy shader");
}

// ---- The input generator (Device::generate) ----

constexpr uint32_t kGenerateGroupSize = 256;  // the shader's local_size_x

// generate_array's bytes as run_generator makes them (context/inputs.h: InputGenerator), one
// 32-bit word of the buffer per step of a grid-stride loop: the elements' bytes, then the tail's.
// GLSL for its 64-bit integers and doubles. `precise` keeps every add and multiply rounded on its
// own, and the conversions to float, half and bfloat16 are the host's integer code (inputs.cpp),
// so neither the driver's rounding mode nor its flushing of subnormals can change a bit. An
// invocation that made a nonzero element (sign aside) sets `nonzero`, a device-local word read back
// afterwards: the host's zero fix needs to know.
const char* kGenerateShader = R"(#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer Out { uint words_out[]; };
layout(std430, binding = 1) readonly buffer Tail { uint tail[]; };
layout(std430, binding = 2) buffer Flag { uint nonzero; };
layout(std140, binding = 3) uniform Params {
  uint64_t count, stream, period;
  double a, d;
  uint kind, dtype, words, tail_first, stride;
};

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9UL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBUL;
  return z ^ (z >> 31);
}

double draw(uint64_t i) {
  if (kind == 2u) return a;
  if (kind == 3u) return double(i % period);
  uint64_t x = mix64(stream + (i + 1UL) * 0x9E3779B97F4A7C15UL);
  precise double u = double(x >> 11) * packDouble2x32(uvec2(0u, 0x3CA00000u));  // 2^-53
  if (kind == 1u) {
    precise double v = a + floor(u * d);
    return v;
  }
  precise double v = a + d * u;
  return v;
}

// static_cast<float>: nearest even, subnormals kept, NaN quieted with its top payload bits.
uint float_bits(double v) {
  uvec2 w = unpackDouble2x32(v);
  uint sign = w.y & 0x80000000u;
  int e = int((w.y >> 20) & 0x7FFu);
  uint64_t mant = ((uint64_t(w.y) << 32) | uint64_t(w.x)) & 0xFFFFFFFFFFFFFUL;
  if (e == 0x7FF) return sign | 0x7F800000u | (mant != 0UL ? 0x400000u | uint(mant >> 29) : 0u);
  e -= 1023;
  if (e > 127) return sign | 0x7F800000u;
  if (e < -150) return sign;
  uint64_t full = mant | (1UL << 52);
  int shift = max(29, -97 - e);  // 52 - 23 bits dropped, more for a subnormal float
  uint r = (e >= -126 ? uint(e + 126) << 23 : 0u) + uint(full >> shift);
  uint64_t rest = full & ((1UL << shift) - 1UL), halfway = 1UL << (shift - 1);
  if (rest > halfway || (rest == halfway && (r & 1u) != 0u)) ++r;
  return sign | r;
}

// float_to_half.
uint half_bits(uint u) {
  uint sign = (u >> 16) & 0x8000u, mant = u & 0x7FFFFFu;
  int e = int((u >> 23) & 0xFFu) - 127;
  if (e == 128) {
    uint m = mant >> 13;
    return mant == 0u ? sign | 0x7C00u : sign | 0x7C00u | (m == 0u ? 0x200u : m);
  }
  if (e > 15) return sign | 0x7C00u;
  if (e >= -14) {
    uint h = (uint(e + 15) << 10) | (mant >> 13), rest = mant & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0u)) ++h;
    return sign | h;
  }
  if (e < -25) return sign;
  uint full = mant | 0x800000u;
  int shift = -e - 1;
  uint h = full >> shift, rest = full & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (h & 1u) != 0u)) ++h;
  return sign | h;
}

// float_to_bf16.
uint bf16_bits(uint u) {
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu) != 0u)
    return (u & 0x7F0000u) != 0u ? u >> 16 : (u >> 16) | 0x40u;
  return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

// Element i's bits (2-byte types in the low half).
uint element(uint64_t i) {
  double v = draw(i);
  if (dtype == 3u) return uint(int(clamp(roundEven(v), -2147483648.0LF, 2147483647.0LF)));
  uint f = float_bits(v);
  return dtype == 0u ? f : dtype == 1u ? half_bits(f) : bf16_bits(f);
}

void main() {
  bool seen = false;
  uint per_word = dtype == 1u || dtype == 2u ? 2u : 1u, bits = 32u / per_word;
  uint zero_mask = dtype == 3u ? 0xFFFFFFFFu : dtype == 0u ? 0x7FFFFFFFu : 0x7FFFu;
  for (uint w = gl_GlobalInvocationID.x; w < words; w += stride) {
    uint word = 0u;
    for (uint k = 0u; k < per_word; ++k) {
      uint64_t i = uint64_t(w) * per_word + k;
      if (i >= count) break;
      uint e = element(i);
      seen = seen || (e & zero_mask) != 0u;
      word |= e << (bits * k);
    }
    if (w >= tail_first) word |= tail[w - tail_first];
    words_out[w] = word;
  }
  if (seen && nonzero == 0u) nonzero = 1u;  // most invocations only read the flag
}
)";

// The shader's uniform block (std140: the same offsets).
struct GenerateParams {
  uint64_t count, stream, period;
  double a, d;
  uint32_t kind, dtype, words, tail_first, stride, pad;
};
static_assert(sizeof(GenerateParams) == 64);

VulkanDevice::Generator* VulkanDevice::generator() {
  if (generator_ || generator_failed_ || lost_) return generator_.get();
  generator_failed_ = true;  // until it is built
  if (!int64_float64_) return nullptr;
  auto k = builtin_kernel(kGenerateShader, "generate.comp", 3, shaderc_source_language_glsl,
                          sizeof(GenerateParams));
  if (!k) return nullptr;
  auto g = std::make_unique<Generator>();
  g->kernel = std::move(*k);
  constexpr VkBufferUsageFlags kCopied =
      VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  auto flag = create_buffer(4, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | kCopied, false);
  if (!flag) return nullptr;
  g->flag = *flag;
  auto readback = create_buffer(8, kCopied, true);
  if (!readback || !readback->mapped) {
    if (readback) destroy_buffer(*readback);
    destroy_buffer(g->flag);
    return nullptr;
  }
  g->readback = *readback;
  generator_ = std::move(g);
  generator_failed_ = false;
  return generator_.get();
}

// The tail as the shader reads it: whole words from the one the elements end in (word bytes / 4)
// to the end, the element bytes of that first word left zero for the shader to fill.
Status VulkanDevice::stage_tail(Generator& gen, size_t bytes, const std::vector<uint8_t>& tail) {
  const size_t lead = bytes % 4, size = lead + tail.size();
  if (gen.tail.size < size) {
    destroy_buffer(gen.tail);
    auto t = create_buffer(size, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, true);
    if (!t) return t.status();
    gen.tail = *t;
    if (!gen.tail.mapped) return Status::error("cannot map the input generator's tail buffer");
  }
  auto* at = static_cast<uint8_t*>(gen.tail.mapped);
  std::memset(at, 0, lead);
  if (!tail.empty()) std::memcpy(at + lead, tail.data(), tail.size());
  return Status::ok();
}

// run_generator's rule for an all-zero random array: element zero_fix_index becomes zero_fix,
// copied from the readback buffer where it is staged.
Status VulkanDevice::zero_fix(Generator& gen, Buf& out, const InputGenerator& g, int64_t count) {
  const size_t es = dtype_size(g.dtype);
  if (g.zero_fix.size() != es || g.zero_fix_index < 0 || g.zero_fix_index >= count)
    return Status::error("internal: the generator's zero fix is not one element");
  std::memcpy(static_cast<uint8_t*>(gen.readback.mapped) + 4, g.zero_fix.data(), es);
  return run_status("the input generator's zero fix", [&](VkCommandBuffer cmd) {
    full_barrier(cmd);
    VkBufferCopy region{4, static_cast<VkDeviceSize>(g.zero_fix_index) * es, es};
    vkCmdCopyBuffer(cmd, gen.readback.buffer, out.buffer, 1, &region);
    full_barrier(cmd);
  });
}

Status VulkanDevice::generate(DeviceBuffer& b, const InputGenerator& g, int64_t count,
                              const std::vector<uint8_t>& tail) {
  Buf* out = static_cast<Buf*>(b.handle);
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(count, 0)) * dtype_size(g.dtype);
  const size_t total = bytes + tail.size();
  if (out == nullptr || count < 0 || total > b.bytes)
    return Status::error(fmt::format("{} generated bytes and a guard of {} into a buffer of {}",
                                     bytes, tail.size(), b.bytes));
  if (lost_) return Status::error("the Vulkan device was lost");
  Generator* gen = generator();
  if (gen == nullptr || !can_generate(g, total))
    return Status::error("internal: the input generator was asked for what it cannot make");
  if (Status st = stage_tail(*gen, bytes, tail); !st) return st;
  const auto words = static_cast<uint32_t>(total / 4);
  const uint32_t groups = std::clamp((words + kGenerateGroupSize - 1) / kGenerateGroupSize, 1u,
                                     std::min(props_.limits.maxComputeWorkGroupCount[0], 65535u));
  const uint32_t dtype = g.dtype == DType::f32    ? 0
                         : g.dtype == DType::f16  ? 1
                         : g.dtype == DType::bf16 ? 2
                                                  : 3;
  const GenerateParams params{static_cast<uint64_t>(count),
                              g.stream,
                              static_cast<uint64_t>(std::max<int64_t>(g.period, 1)),
                              g.a,
                              g.d,
                              static_cast<uint32_t>(g.kind),
                              dtype,
                              words,
                              static_cast<uint32_t>(bytes / 4),
                              groups * kGenerateGroupSize,
                              0};
  std::memcpy(gen->kernel->uniform.mapped, &params, sizeof params);
  bind_builtin(*gen->kernel, {out->buffer, gen->tail.buffer, gen->flag.buffer});
  Status st = run_status("the input generator", [&](VkCommandBuffer cmd) {
    vkCmdFillBuffer(cmd, gen->flag.buffer, 0, 4, 0);
    full_barrier(cmd);
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, gen->kernel->pipeline);
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, gen->kernel->layout, 0, 1,
                            &gen->kernel->set, 0, nullptr);
    vkCmdDispatch(cmd, groups, 1, 1);
    full_barrier(cmd);
    VkBufferCopy region{0, 0, 4};
    vkCmdCopyBuffer(cmd, gen->flag.buffer, gen->readback.buffer, 1, &region);
    full_barrier(cmd);
  });
  if (!st) return st;
  uint32_t nonzero = 0;
  std::memcpy(&nonzero, gen->readback.mapped, 4);
  if (!g.random || count == 0 || nonzero != 0) return Status::ok();
  return zero_fix(*gen, *out, g, count);
}

void VulkanDevice::flush_caches() {
  if (lost_) return;
  if (scratch_.buffer == VK_NULL_HANDLE) {
    VkDeviceSize size = props_.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU
                            ? (VkDeviceSize{64} << 20)
                            : (VkDeviceSize{256} << 20);
    auto b = create_buffer(size, VK_BUFFER_USAGE_TRANSFER_DST_BIT, false);
    if (!b) return;
    scratch_ = *b;
  }
  uint32_t word = ++flush_word_;
  (void)run([&](VkCommandBuffer cmd) {
    full_barrier(cmd);
    vkCmdFillBuffer(cmd, scratch_.buffer, 0, VK_WHOLE_SIZE, word);
    full_barrier(cmd);
  });
}

double VulkanDevice::clock_mhz() {
#ifdef PEAK_HAVE_NVML
  if (props_.vendorID == kVendorNvidia)
    return pci_bus_id_.empty() ? nvml_sm_clock_mhz(0) : nvml_sm_clock_mhz_pci(pci_bus_id_);
#endif
  return 0;
}

// ---- FP32 FMA throughput ----

constexpr int kFmaChains = 8;  // independent accumulators per thread
constexpr int kFmaUnroll = 8;  // unrolled steps per loop iteration

const char* kFmaShader = R"(
[[vk::binding(0, 0)]] RWStructuredBuffer<float> Out;
[[vk::binding(1, 0)]] cbuffer Params { int iters; float m; float c; float pad; };
[numthreads(256, 1, 1)]
void main(uint3 id : SV_DispatchThreadID) {
  float a0 = (float)id.x * 1e-9f, a1 = a0 + 0.1f, a2 = a0 + 0.2f, a3 = a0 + 0.3f;
  float a4 = a0 + 0.4f, a5 = a0 + 0.5f, a6 = a0 + 0.6f, a7 = a0 + 0.7f;
  [loop] for (int i = 0; i < iters; ++i) {
    [unroll] for (int j = 0; j < 8; ++j) {
      a0 = mad(a0, m, c); a1 = mad(a1, m, c); a2 = mad(a2, m, c); a3 = mad(a3, m, c);
      a4 = mad(a4, m, c); a5 = mad(a5, m, c); a6 = mad(a6, m, c); a7 = mad(a7, m, c);
    }
  }
  Out[id.x] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}
)";

VulkanDevice::Fma* VulkanDevice::fma() {
  if (fma_ || fma_failed_ || lost_) return fma_.get();
  fma_failed_ = true;  // until it is built
  auto k = builtin_kernel(kFmaShader, "fma.hlsl", 1);
  if (!k) return nullptr;
  auto f = std::make_unique<Fma>();
  f->kernel = std::move(*k);
  const bool cpu = props_.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  // CPU devices: a few groups per core; GPUs: enough groups to fill any current device.
  f->groups = cpu ? std::clamp(4 * std::thread::hardware_concurrency(), 16u, 1024u) : 8192;
  auto out = create_buffer(f->threads() * sizeof(float), VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, false);
  if (!out) return nullptr;
  f->out = *out;
  bind_builtin(*f->kernel, {f->out.buffer});
  fma_ = std::move(f);
  fma_failed_ = false;
  return fma_.get();
}

void VulkanDevice::set_fma_iters(const Fma& f, int32_t iters) {
  struct {
    int32_t iters;
    float m, c, pad;
  } params{iters, 0.9999f, 1e-6f, 0};
  std::memcpy(f.kernel->uniform.mapped, &params, sizeof(params));
}

void VulkanDevice::record_fma(VkCommandBuffer cmd, const Fma& f) {
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, f.kernel->pipeline);
  vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, f.kernel->layout, 0, 1,
                          &f.kernel->set, 0, nullptr);
  vkCmdDispatch(cmd, f.groups, 1, 1);
}

void VulkanDevice::ramp_clock() {
  if (lost_ || props_.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) return;
  const double now = clock_mhz();
  if (!(now > 0)) return;
  if (loaded_clock_mhz_ > 0 && now >= 0.97 * loaded_clock_mhz_) return;
  Fma* f = fma();
  if (f == nullptr) return;
  constexpr double kSliceMs = 5, kMaxRampS = 1.5;
  auto t0 = std::chrono::steady_clock::now();
  double previous = 0;
  for (int slice = 0;; ++slice) {
    const auto iters = static_cast<int32_t>(
        fma_iters_per_ms_ > 0 ? std::clamp(fma_iters_per_ms_ * kSliceMs, 1.0, 1e7) : 256);
    set_fma_iters(*f, iters);
    double host_ms = 0;
    if (run([&](VkCommandBuffer cmd) { record_fma(cmd, *f); }, &host_ms) != VK_SUCCESS) return;
    const double clock = clock_mhz();
    // Calibrated at the highest clock seen so far: slices stay short once the clock is up.
    if (clock >= loaded_clock_mhz_ && host_ms > 0) fma_iters_per_ms_ = iters / host_ms;
    loaded_clock_mhz_ = std::max(loaded_clock_mhz_, clock);
    const bool steady = slice > 0 && clock <= previous * 1.01;
    if (steady && clock >= 0.97 * loaded_clock_mhz_) return;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > kMaxRampS)
      return;
    previous = clock;
  }
}

double VulkanDevice::measure_fp32_tflops() {
  Fma* f = fma();
  if (f == nullptr) return 0;
  const bool cpu = props_.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  const uint64_t threads = f->threads();
  const bool stamps = queries_ != VK_NULL_HANDLE;
  auto time_once = [&](int32_t iters) -> double {
    set_fma_iters(*f, iters);
    double host_ms = 0;
    VkResult r = run_stamped([&](VkCommandBuffer cmd) { record_fma(cmd, *f); }, stamps, &host_ms);
    if (r != VK_SUCCESS) return -1;
    double ms = stamps ? timestamp_ms() : host_ms;
    return ms > 0 ? ms : host_ms;
  };

  // Calibrate the loop count to a target duration, then keep the best of a few runs.
  const double target_ms = cpu ? 40.0 : 20.0;
  int32_t iters = cpu ? 8 : 256;
  double ms = time_once(iters);  // also the warm-up
  for (int step = 0; step < 12 && ms >= 0 && ms < target_ms / 4 && iters < (1 << 22); ++step) {
    iters *= 4;
    ms = time_once(iters);
  }
  double best = 0;
  if (ms > 0) {
    double scaled = static_cast<double>(iters) * target_ms / ms;
    iters = static_cast<int32_t>(std::clamp(scaled, 1.0, static_cast<double>(1 << 24)));
    best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      double t = time_once(iters);
      if (t <= 0) {
        best = 1e30;
        break;
      }
      best = std::min(best, t);
    }
  }
  double tflops = 0;
  if (best > 0 && best < 1e30) {
    double fmas = static_cast<double>(threads) * iters * kFmaChains * kFmaUnroll;
    tflops = 2.0 * fmas / (best * 1e-3) / 1e12;
  }
  return tflops;
}

}  // namespace

Result<std::unique_ptr<Device>> make_device(const RunnerJob& job) {
  auto d = std::make_unique<VulkanDevice>();
  if (Status st = d->init(job.device); !st) return Error{st.message()};
  return std::unique_ptr<Device>(std::move(d));
}

}  // namespace peak
