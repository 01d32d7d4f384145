// `peak export` end to end, without a GPU: its options and usage errors, the folders it refuses,
// and the libraries it writes for checkpoints of the campaigns committed under results/ (CUDA:
// the FP32 kernel with its two-configuration dispatch table, the FP16 TMA kernel alone; HLSL: the
// large-tiles FP32 kernel). Where nvcc, CMake and Ninja are found, each CUDA export is built as
// its README says, and a small C program linked against it checks what needs no device (the
// dispatch, the configurations' texts, the status codes of calls that never reach the GPU). The
// HLSL exports are built and run on the CPU Vulkan device (lavapipe), their outputs checked
// against a float64 reference.
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/export_cli_testing.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/sandbox.h"

namespace peak {
namespace {

using json = nlohmann::json;
using namespace peak::testing;

// Every file under `dir` with its content, relative path first.
std::map<std::string, std::string> tree(const fs::path& dir) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); it != fs::end(it); ++it)
    if (it->is_regular_file()) {
      auto text = read_file(it->path());
      out[fs::relative(it->path(), dir).string()] = text ? *text : "<unreadable>";
    }
  return out;
}

class ExportCli : public StoreCli {
 protected:
  // `cmake -S out -B out/build -G Ninja && cmake --build out/build`, as the export's README says.
  void build_as_the_readme_says(const fs::path& out, const std::string& entry) {
    ProcessOptions o;
    o.cwd = out;
    o.timeout_s = 600;
    const std::string root = "-DCUDAToolkit_ROOT=" + nvcc().parent_path().parent_path().string();
    o.argv = {"cmake", "-S", out.string(), "-B", (out / "build").string(), "-G", "Ninja", root};
    auto conf = run_process(o);
    ASSERT_TRUE(conf) << conf.error();
    ASSERT_TRUE(conf->ok()) << conf->out << conf->err;
    o.argv = {"cmake", "--build", (out / "build").string()};
    auto build = run_process(o);
    ASSERT_TRUE(build) << build.error();
    ASSERT_TRUE(build->ok()) << build->out << build->err;
    EXPECT_TRUE(fs::exists(out / "build" / ("lib" + entry + ".a")));
    EXPECT_TRUE(fs::exists(out / "build" / "config_0.cubin"));
  }

  // A C program linked against the export (the header is C), which prints what needs no device:
  // the configuration of each shape, the configurations' texts, status strings, and the status
  // of calls that must return before any GPU work (a null array, a shape outside `valid`).
  // Returns its output, or nothing when it cannot run here (no CUDA driver library at all).
  std::optional<std::string> run_consumer(const fs::path& out, const std::string& entry,
                                          size_t configurations) {
    const fs::path dir = tmp_ / ("consumer-" + entry);
    EXPECT_TRUE(write_file(dir / "CMakeLists.txt",
                           fmt::format("cmake_minimum_required(VERSION 3.18)\n"
                                       "project(consumer LANGUAGES C CXX)\n"
                                       "add_subdirectory({} export)\n"
                                       "add_executable(consumer main.c)\n"
                                       "target_link_libraries(consumer PRIVATE {})\n",
                                       out.string(), entry)));
    EXPECT_TRUE(write_file(dir / "main.c",
                           fmt::format(R"C(#include <stdio.h>
#include "{e}.h"
int main(void) {{
  static const int shapes[][3] = {{{{64, 64, 4096}}, {{64, 64, 64}}, {{8, 4096, 64}},
                                   {{0, 64, 64}}, {{64, -1, 64}}}};
  for (int i = 0; i < 5; ++i)
    printf("configuration %d %d\n", i, {e}_configuration(shapes[i][0], shapes[i][1], shapes[i][2]));
  for (int i = -1; i <= {n}; ++i) {{
    const char* t = {e}_configuration_text(i);
    printf("text %d %s\n", i, t ? t : "(null)");
  }}
  printf("status %d %s\n", PEAK_OK, {e}_status_string(PEAK_OK));
  printf("status %d %s\n", PEAK_ERROR_INVALID_SHAPE, {e}_status_string(PEAK_ERROR_INVALID_SHAPE));
  printf("status %d %s\n", PEAK_ERROR_ARGUMENT, {e}_status_string(PEAK_ERROR_ARGUMENT));
  printf("status %d %s\n", 99, {e}_status_string(99));
  void* p = (void*)256;
  printf("invalid-shape %d\n", {e}(p, p, p, 0, 64, 64, NULL, 0, 0));
  printf("null-array %d\n", {e}(NULL, p, p, 64, 64, 64, NULL, 0, 0));
  return 0;
}}
)C",
                                       fmt::arg("e", entry), fmt::arg("n", configurations))));
    ProcessOptions o;
    o.cwd = dir;
    o.timeout_s = 600;
    const std::string root = "-DCUDAToolkit_ROOT=" + nvcc().parent_path().parent_path().string();
    o.argv = {"cmake", "-S", dir.string(), "-B", (dir / "build").string(), "-G", "Ninja", root};
    auto conf = run_process(o);
    EXPECT_TRUE(conf && conf->ok()) << (conf ? conf->out + conf->err : conf.error());
    if (!conf || !conf->ok()) return std::nullopt;
    o.argv = {"cmake", "--build", (dir / "build").string()};
    auto build = run_process(o);
    EXPECT_TRUE(build && build->ok()) << (build ? build->out + build->err : build.error());
    if (!build || !build->ok()) return std::nullopt;
    ProcessOptions run;
    run.argv = {(dir / "build" / "consumer").string()};
    run.timeout_s = 120;
    auto r = run_process(run);
    if (r && !r->ok() && r->err.find("libcuda.so.1") != std::string::npos) {
      // No CUDA driver here: the toolkit's stub library stands in for it (every driver call
      // fails, as on a machine without a GPU).
      fs::path stub;
      for (const char* rel : {"lib64/stubs/libcuda.so", "targets/x86_64-linux/lib/stubs/libcuda.so",
                              "lib/stubs/libcuda.so"})
        if (fs::exists(nvcc().parent_path().parent_path() / rel))
          stub = nvcc().parent_path().parent_path() / rel;
      if (stub.empty()) return std::nullopt;
      std::error_code ec;
      fs::create_directories(tmp_ / "stub", ec);
      fs::create_symlink(stub, tmp_ / "stub" / "libcuda.so.1", ec);
      run.env["LD_LIBRARY_PATH"] = (tmp_ / "stub").string();
      r = run_process(run);
    }
    EXPECT_TRUE(r && r->ok()) << (r ? r->describe() + "\n" + r->err : r.error());
    if (!r || !r->ok()) return std::nullopt;
    return r->out;
  }

  // CMake, Ninja and the Vulkan headers: what building an HLSL export and its consumer needs.
  bool have_vulkan_build_tools() {
    if (find_program("cmake").empty() || find_program("ninja").empty()) return false;
    bool headers = false;
    for (const char* dir : {"/usr/include", "/usr/local/include"})
      headers = headers || fs::exists(fs::path(dir) / "vulkan" / "vulkan.h");
    if (const char* sdk = std::getenv("VULKAN_SDK"))
      headers = headers || fs::exists(fs::path(sdk) / "include" / "vulkan" / "vulkan.h");
    return headers;
  }

  // Builds `source` as a program linked against the exports in `libs` (folder, target) through
  // add_subdirectory, runs it and returns its output (nothing, with the test failed, when a step
  // fails).
  std::optional<std::string> run_vulkan_consumer(
      const std::string& name, const std::vector<std::pair<fs::path, std::string>>& libs,
      const std::string& source) {
    const fs::path dir = tmp_ / name;
    std::string cmake =
        "cmake_minimum_required(VERSION 3.18)\nproject(consumer LANGUAGES C CXX)\n"
        "find_package(Vulkan REQUIRED)\n";
    std::string targets;
    for (size_t i = 0; i < libs.size(); ++i) {
      cmake += fmt::format("add_subdirectory({} lib{})\n", libs[i].first.string(), i);
      targets += " " + libs[i].second;
    }
    cmake += fmt::format(
        "add_executable(consumer main.cpp)\n"
        "set_target_properties(consumer PROPERTIES CXX_STANDARD 17)\n"
        "target_link_libraries(consumer PRIVATE{} Vulkan::Vulkan)\n",
        targets);
    EXPECT_TRUE(write_file(dir / "CMakeLists.txt", cmake));
    EXPECT_TRUE(write_file(dir / "main.cpp", source));
    ProcessOptions b;
    b.cwd = dir;
    b.timeout_s = 600;
    b.argv = {"cmake", "-S", dir.string(), "-B", (dir / "build").string(), "-G", "Ninja"};
    auto conf = run_process(b);
    EXPECT_TRUE(conf && conf->ok()) << (conf ? conf->out + conf->err : conf.error());
    if (!conf || !conf->ok()) return std::nullopt;
    b.argv = {"cmake", "--build", (dir / "build").string()};
    auto built = run_process(b);
    EXPECT_TRUE(built && built->ok()) << (built ? built->out + built->err : built.error());
    if (!built || !built->ok()) return std::nullopt;
    ProcessOptions run;
    run.argv = {(dir / "build" / "consumer").string()};
    run.timeout_s = 300;
    auto ran = run_process(run);
    EXPECT_TRUE(ran && ran->ok()) << (ran ? ran->describe() + "\n" + ran->out + ran->err
                                          : ran.error());
    if (!ran || !ran->ok()) return std::nullopt;
    EXPECT_NE(ran->out.find("\ndone\n"), std::string::npos) << ran->out;
    EXPECT_EQ(ran->out.find("submit-failed"), std::string::npos) << ran->out;
    return ran->out;
  }

  // Skips the test unless nvcc, CMake and Ninja are here.
  bool have_build_tools() {
    return !nvcc().empty() && !find_program("cmake").empty() && !find_program("ninja").empty();
  }
};

// A program that runs two HLSL exports on the CPU Vulkan device (lavapipe) at three shapes, and
// checks C against a float64 reference with peak's rule for FP32 matmul (validate/validate.cpp,
// family/family.cpp): |C - ref| <= tol * (rms(ref) + |ref|), tol = 1e-6 * sqrt(K) + 2 * 1.2e-7.
// C starts as NaN, so an element never written fails. Then the refusals that come before
// anything is recorded, and a device without VK_KHR_push_descriptor.
const char* const kVulkanConsumer = R"MAIN(#include <vulkan/vulkan.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

@INCLUDES@

namespace {

VkInstance instance;
VkPhysicalDevice phys;
VkDevice device, bare;  // bare: without VK_KHR_push_descriptor
VkQueue queue;
VkCommandPool pool;
VkPhysicalDeviceMemoryProperties mem;

struct Buffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* data = nullptr;
};

// Host-visible, with the usage the README asks of a workspace (arrays need
// STORAGE_BUFFER).
Buffer make_buffer(VkDeviceSize bytes) {
  Buffer b;
  VkBufferCreateInfo bci = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = bytes < 16 ? 16 : bytes;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT |
              VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  if (vkCreateBuffer(device, &bci, nullptr, &b.buffer) != VK_SUCCESS) return b;
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device, b.buffer, &req);
  const VkMemoryPropertyFlags want =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  uint32_t type = 0;
  while (type < mem.memoryTypeCount &&
         !((req.memoryTypeBits & (1u << type)) &&
           (mem.memoryTypes[type].propertyFlags & want) == want))
    ++type;
  VkMemoryAllocateInfo mai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = type;
  vkAllocateMemory(device, &mai, nullptr, &b.memory);
  vkBindBufferMemory(device, b.buffer, b.memory, 0);
  vkMapMemory(device, b.memory, 0, VK_WHOLE_SIZE, 0, &b.data);
  return b;
}

void free_buffer(Buffer& b) {
  vkDestroyBuffer(device, b.buffer, nullptr);
  vkFreeMemory(device, b.memory, nullptr);
  b = Buffer{};
}

// Records with `record` into a new command buffer, then submits it and waits when
// `record` returned PEAK_OK; that status.
template <typename F>
int submit(F record) {
  VkCommandBufferAllocateInfo cai = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cai.commandPool = pool;
  cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cai.commandBufferCount = 1;
  VkCommandBuffer cmd;
  vkAllocateCommandBuffers(device, &cai, &cmd);
  VkCommandBufferBeginInfo begin = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  vkBeginCommandBuffer(cmd, &begin);
  const int status = record(cmd);
  vkEndCommandBuffer(cmd);
  if (status == PEAK_OK) {
    VkFenceCreateInfo fci = {VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    vkCreateFence(device, &fci, nullptr, &fence);
    VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd;
    if (vkQueueSubmit(queue, 1, &si, fence) != VK_SUCCESS ||
        vkWaitForFences(device, 1, &fence, VK_TRUE, 120ull * 1000000000ull) != VK_SUCCESS)
      std::printf("submit-failed\n");
    vkDestroyFence(device, fence, nullptr);
  }
  vkFreeCommandBuffers(device, pool, 1, &cmd);
  return status;
}

template <typename V, typename Run, typename Size, typename Release>
void exercise(const char* lib, Run run, Size size, Release release) {
  const V vk = {instance, phys, device, nullptr};
  const int shapes[][3] = {{64, 64, 64}, {257, 185, 93}, {128, 344, 128}};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (const auto& shape : shapes) {
    const int M = shape[0], N = shape[1], K = shape[2];
    Buffer A = make_buffer(4ull * M * K), B = make_buffer(4ull * K * N);
    Buffer C = make_buffer(4ull * M * N);
    std::vector<float> a(size_t(M) * K), b(size_t(K) * N);
    for (float& x : a) x = uniform(rng);
    for (float& x : b) x = uniform(rng);
    std::memcpy(A.data, a.data(), a.size() * 4);
    std::memcpy(B.data, b.data(), b.size() * 4);
    std::memset(C.data, 0xff, 4ull * M * N);
    // The workspace at an offset of 256 bytes into its buffer.
    const VkDeviceSize bytes = size(M, N, K, &vk);
    Buffer W = make_buffer(bytes + 256);
    const int status = submit([&](VkCommandBuffer cmd) {
      return run(&vk, cmd, A.buffer, B.buffer, C.buffer, M, N, K, W.buffer, 256, bytes);
    });
    long bad = 0;
    double worst = 0;
    if (status == PEAK_OK) {
      const float* c = static_cast<const float*>(C.data);
      std::vector<double> ref(size_t(M) * N, 0.0);
      double sum2 = 0;
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
          double r = 0;
          for (int p = 0; p < K; ++p)
            r += double(a[size_t(i) * K + p]) * double(b[size_t(p) * N + j]);
          ref[size_t(i) * N + j] = r;
          sum2 += r * r;
        }
      const double rms = std::sqrt(sum2 / double(ref.size()));
      const double tol = 1e-6 * std::sqrt(double(K)) + 2 * 1.2e-7;
      for (size_t i = 0; i < ref.size(); ++i) {
        const double err = std::fabs(double(c[i]) - ref[i]);
        if (!(err <= tol * rms + tol * std::fabs(ref[i]))) ++bad;
        if (!(err <= worst)) worst = std::isnan(err) ? INFINITY : err;
      }
    }
    std::printf("run %s %dx%dx%d %d workspace %llu bad %ld max_err %.3g\n", lib, M, N, K,
                status, (unsigned long long)bytes, bad, worst);
    free_buffer(A);
    free_buffer(B);
    free_buffer(C);
    free_buffer(W);
  }
  const int M = 64, N = 64, K = 64;
  Buffer X = make_buffer(4ull * M * N);
  const VkDeviceSize bytes = size(M, N, K, &vk);
  Buffer W = make_buffer(bytes + 256);
  auto call = [&](const V* v, VkBuffer a, int m, VkBuffer w, VkDeviceSize offset,
                  VkDeviceSize n) {
    return submit([&](VkCommandBuffer cmd) {
      return run(v, cmd, a, X.buffer, X.buffer, m, N, K, w, offset, n);
    });
  };
  const V without = {instance, phys, bare, nullptr};
  std::printf("check %s small-workspace %d\n", lib, call(&vk, X.buffer, M, W.buffer, 0, bytes - 4));
  std::printf("check %s unaligned-workspace %d\n", lib,
              call(&vk, X.buffer, M, W.buffer, 128, bytes));
  std::printf("check %s null-workspace %d\n", lib,
              call(&vk, X.buffer, M, VK_NULL_HANDLE, 0, bytes));
  std::printf("check %s null-array %d\n", lib, call(&vk, VK_NULL_HANDLE, M, W.buffer, 0, bytes));
  std::printf("check %s null-vk %d\n", lib, call(nullptr, X.buffer, M, W.buffer, 0, bytes));
  std::printf("check %s invalid-shape %d\n", lib, call(&vk, X.buffer, 0, W.buffer, 0, bytes));
  std::printf("check %s invalid-shape-size %llu\n", lib, (unsigned long long)size(0, N, K, &vk));
  std::printf("check %s no-push-descriptor-size %llu\n", lib,
              (unsigned long long)size(M, N, K, &without));
  std::printf("check %s no-push-descriptor %d\n", lib,
              call(&without, X.buffer, M, W.buffer, 0, bytes));
  release(&vk);
  release(&without);
  free_buffer(X);
  free_buffer(W);
}

}  // namespace

int main() {
  VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo ici = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  if (vkCreateInstance(&ici, nullptr, &instance) != VK_SUCCESS) {
    std::printf("no Vulkan instance\n");
    return 3;
  }
  uint32_t n = 0;
  vkEnumeratePhysicalDevices(instance, &n, nullptr);
  std::vector<VkPhysicalDevice> all(n);
  vkEnumeratePhysicalDevices(instance, &n, all.data());
  VkPhysicalDeviceProperties props = {};
  for (VkPhysicalDevice p : all) {
    vkGetPhysicalDeviceProperties(p, &props);
    if (props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) {
      phys = p;
      break;
    }
  }
  if (phys == VK_NULL_HANDLE) {
    std::printf("no CPU Vulkan device (lavapipe: mesa-vulkan-drivers)\n");
    return 3;
  }
  std::printf("device %s\n", props.deviceName);
  std::printf("shared-memory %u\n", props.limits.maxComputeSharedMemorySize);
  vkGetPhysicalDeviceMemoryProperties(phys, &mem);
  uint32_t families = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(phys, &families, nullptr);
  std::vector<VkQueueFamilyProperties> qf(families);
  vkGetPhysicalDeviceQueueFamilyProperties(phys, &families, qf.data());
  uint32_t family = 0;
  while (family < families && !(qf[family].queueFlags & VK_QUEUE_COMPUTE_BIT)) ++family;
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qci = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = family;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;
  const char* ext = "VK_KHR_push_descriptor";
  VkDeviceCreateInfo dci = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  if (vkCreateDevice(phys, &dci, nullptr, &bare) != VK_SUCCESS) return 4;
  dci.enabledExtensionCount = 1;
  dci.ppEnabledExtensionNames = &ext;
  if (vkCreateDevice(phys, &dci, nullptr, &device) != VK_SUCCESS) return 4;
  vkGetDeviceQueue(device, family, 0, &queue);
  VkCommandPoolCreateInfo pci = {VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.queueFamilyIndex = family;
  vkCreateCommandPool(device, &pci, nullptr, &pool);

@CALLS@
  vkDestroyCommandPool(device, pool, nullptr);
  vkDestroyDevice(device, nullptr);
  vkDestroyDevice(bare, nullptr);
  vkDestroyInstance(instance, nullptr);
  std::printf("done\n");
  return 0;
}
)MAIN";

// The consumer for the exports `libs` (each a label and its entry point, all matmul-shaped),
// exercised in turn, then `extra` statements.
std::string vulkan_consumer(const std::vector<std::pair<std::string, std::string>>& libs,
                            const std::string& extra = "") {
  std::string includes, calls;
  for (const auto& [label, e] : libs) {
    includes += fmt::format("#include \"{}.h\"\n", e);
    calls += fmt::format("  exercise<{0}_vulkan>(\"{1}\", {0}, {0}_workspace_size, {0}_release);\n",
                         e, label);
  }
  std::string out = kVulkanConsumer;
  out.replace(out.find("@INCLUDES@"), 10, includes);
  out.replace(out.find("@CALLS@"), 7, calls + extra);
  return out;
}

// What the consumer printed: "run LABEL SHAPE" and "check LABEL WHAT" lines keyed by their first
// three words, the others by their first word.
std::map<std::string, std::string> vulkan_lines(const std::string& out) {
  std::map<std::string, std::string> l;
  for (const std::string& line : split_lines(out)) {
    std::istringstream in(line);
    std::vector<std::string> words;
    for (std::string w; in >> w;) words.push_back(w);
    if (words.size() >= 3 && (words[0] == "run" || words[0] == "check"))
      l[words[0] + " " + words[1] + " " + words[2]] =
          join(std::vector<std::string>(words.begin() + 3, words.end()), " ");
    else if (!words.empty())
      l[words[0]] = words.size() > 1 ? line.substr(line.find(' ') + 1) : "";
  }
  return l;
}

// The refusals every export gives before recording anything (the consumer's "check" lines).
void expect_vulkan_refusals(const std::map<std::string, std::string>& lines,
                            const std::string& label, const std::string& out) {
  auto at = [&](const std::string& what) {
    auto it = lines.find("check " + label + " " + what);
    return it == lines.end() ? std::string("(missing)") : it->second;
  };
  EXPECT_EQ(at("small-workspace"), "2") << out;      // PEAK_ERROR_WORKSPACE
  EXPECT_EQ(at("unaligned-workspace"), "2") << out;  // an offset that is no multiple of 256
  EXPECT_EQ(at("null-workspace"), "2") << out;
  EXPECT_EQ(at("null-array"), "6") << out;  // PEAK_ERROR_ARGUMENT
  EXPECT_EQ(at("null-vk"), "6") << out;
  EXPECT_EQ(at("invalid-shape"), "1") << out;  // PEAK_ERROR_INVALID_SHAPE
  EXPECT_EQ(at("invalid-shape-size"), "0") << out;
  EXPECT_EQ(at("no-push-descriptor-size"), "0") << out;
  EXPECT_EQ(at("no-push-descriptor"), "3") << out;  // PEAK_ERROR_UNSUPPORTED_DEVICE
}

// The text of a configuration as export.json gives it: "NAME=VALUE ..." in name order.
std::string config_text(const json& config) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : config.items()) parts.push_back(fmt::format("{}={}", k, v.dump()));
  return join(parts, " ");
}

// What a run of the consumer printed, line by line.
std::map<std::string, std::string> consumer_lines(const std::string& out) {
  std::map<std::string, std::string> m;
  for (const std::string& line : split_lines(out)) {
    const size_t a = line.find(' ');
    const size_t b = line.find(' ', a + 1);
    if (a == std::string::npos) continue;
    if (starts_with(line, "configuration ") || starts_with(line, "text ") ||
        starts_with(line, "status "))
      m[line.substr(0, b)] = b == std::string::npos ? "" : line.substr(b + 1);
    else
      m[line.substr(0, a)] = line.substr(a + 1);
  }
  return m;
}

TEST_F(ExportCli, HelpIsTrueToTheOptions) {
  Out all = peak({"--help"});
  EXPECT_EQ(all.code, 0);
  EXPECT_NE(all.out.find("export "), std::string::npos) << all.out;
  Out help = peak({"export", "--help"});
  ASSERT_EQ(help.code, 0) << help.err;
  EXPECT_NE(help.out.find("CHECKPOINT"), std::string::npos) << help.out;
  std::set<std::string> options;
  for (const std::string& line : split_lines(help.out)) {
    const std::string t = trim(line);
    if (!starts_with(t, "-")) continue;
    const std::string first = t.substr(0, t.find(' '));
    const std::string name =
        first.substr(first.rfind(',') == std::string::npos ? 0 : first.rfind(',') + 1);
    options.insert(name);
  }
  EXPECT_EQ(options, (std::set<std::string>{"--help", "--output", "--single", "--force", "--name",
                                            "--arch"}))
      << help.out;
  EXPECT_NE(help.out.find("-o,--output"), std::string::npos) << help.out;
  // docs/cli.md documents every option.
  auto doc = read_file(fs::path(PEAK_SOURCE_DIR) / "docs" / "cli.md");
  ASSERT_TRUE(doc);
  const size_t at = doc->find("peak export [");
  ASSERT_NE(at, std::string::npos);
  for (const char* o : {"-o DIR", "--single", "--force", "--name", "--arch"})
    EXPECT_NE(doc->find(o, at), std::string::npos) << o;
}

TEST_F(ExportCli, UsageErrorsExitWithTwo) {
  fs::path ws = workspace_with_device("usage", "");
  struct Case {
    std::vector<std::string> args;
    std::string says;
  } cases[] = {
      {{"export"}, "usage: peak export [CHECKPOINT] -o DIR"},
      {{"export", "1"}, "usage: peak export [CHECKPOINT] -o DIR"},
      {{"export", "1", "2", "-o", "out"}, "usage: peak export [CHECKPOINT] -o DIR"},
      {{"export", "-o", "out", "--bogus"}, "--bogus"},
      {{"export", "-o", "out", "--name"}, "--name"},
      {{"export", "-o", "out", "--name", "9lives"}, "--name 9lives: not a C identifier"},
      {{"export", "-o", "out", "--name", "has-dash"}, "not a C identifier"},
      {{"export", "no-such-branch", "-o", "out"}, "no-such-branch"},
  };
  for (const auto& c : cases) {
    Out o = peak(c.args, ws);
    EXPECT_EQ(o.code, 2) << join(c.args, " ") << ": " << o.out << o.err;
    EXPECT_NE(o.err.find(c.says), std::string::npos) << join(c.args, " ") << ": " << o.err;
    EXPECT_FALSE(fs::exists(ws / "out")) << join(c.args, " ");
  }
  // The JSON form of an error, and a folder that is no workspace.
  Out j = peak({"--json", "export"}, ws);
  EXPECT_EQ(j.code, 2);
  json e = json::parse(j.out, nullptr, false);
  ASSERT_TRUE(e.is_object()) << j.out;
  EXPECT_EQ(e["error"]["exit_code"], 2) << j.out;
  EXPECT_NE(e["error"]["message"].get<std::string>().find("usage: peak export"), std::string::npos);
  ASSERT_TRUE(write_file(tmp_ / "plain" / "x.txt", "x"));
  Out outside = peak({"export", "-o", "out"}, tmp_ / "plain");
  EXPECT_EQ(outside.code, 2) << outside.err;
  EXPECT_NE(outside.err.find("not inside a peak workspace"), std::string::npos) << outside.err;
}

// The HLSL example's seed (never tuned): no CUDA toolkit involved, the SPIR-V module peak built
// is shipped as it is with the unit it was compiled from, and a Vulkan dispatcher's header.
TEST_F(ExportCli, AnHlslExportShipsTheSpirvPeakBuilt) {
  fs::path ws = workspace_with_device("hlsl", "");
  Out o = peak({"-q", "--json", "export", "-o", "lib"}, ws,
               {{"PEAK_NVCC", "/nonexistent/nvcc"}, {"CUDA_HOME", "/nonexistent"}});
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  json r = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(r.is_object()) << o.out;
  EXPECT_EQ(r["entry"], "peak_matmul_hlsl_fp32");
  EXPECT_EQ(r["configurations"], 1);
  const std::set<std::string> files = {"peak_matmul_hlsl_fp32.h",
                                       "peak_matmul_hlsl_fp32.cpp",
                                       "kernels/config_0.hlsl",
                                       "kernels/config_0.spv",
                                       "CMakeLists.txt",
                                       "embed.cmake",
                                       "README.md",
                                       "export.json"};
  EXPECT_EQ(r["files"].get<std::set<std::string>>(), files);
  auto spv = read_file(ws / "lib" / "kernels" / "config_0.spv");
  auto unit = read_file(ws / "lib" / "kernels" / "config_0.hlsl");
  auto header = read_file(ws / "lib" / "peak_matmul_hlsl_fp32.h");
  auto host = read_file(ws / "lib" / "peak_matmul_hlsl_fp32.cpp");
  auto cmake = read_file(ws / "lib" / "CMakeLists.txt");
  auto readme = read_file(ws / "lib" / "README.md");
  auto manifest_text = read_file(ws / "lib" / "export.json");
  ASSERT_TRUE(spv && unit && header && host && cmake && readme && manifest_text);
  ASSERT_GE(spv->size(), 20u);
  EXPECT_EQ(spv->substr(0, 4), std::string("\x03\x02\x23\x07", 4)) << "SPIR-V's magic";
  EXPECT_NE(unit->find("#define BLOCK_X 16\n#define BLOCK_Y 16\n"), std::string::npos) << *unit;
  EXPECT_NE(unit->find("[numthreads("), std::string::npos);
  EXPECT_NE(header->find("#include <vulkan/vulkan.h>"), std::string::npos);
  EXPECT_NE(header->find("int peak_matmul_hlsl_fp32(const peak_matmul_hlsl_fp32_vulkan* vk, "
                         "VkCommandBuffer cmd, VkBuffer A, VkBuffer B, VkBuffer C, int M, int N, "
                         "int K, VkBuffer workspace, VkDeviceSize workspace_offset, VkDeviceSize "
                         "workspace_bytes);"),
            std::string::npos)
      << *header;
  EXPECT_NE(header->find("VkDeviceSize peak_matmul_hlsl_fp32_workspace_size(int M, int N, int K, "
                         "const peak_matmul_hlsl_fp32_vulkan* vk);"),
            std::string::npos);
  EXPECT_EQ(host->find("#include <cuda"), std::string::npos) << "no CUDA in a Vulkan library";
  EXPECT_NE(host->find("vkCmdPushDescriptorSetKHR"), std::string::npos);
  EXPECT_NE(cmake->find("find_package(Vulkan REQUIRED)"), std::string::npos) << *cmake;
  EXPECT_NE(readme->find("| built for | SPIR-V 1.3 (Vulkan 1.1)"), std::string::npos) << *readme;
  EXPECT_NE(readme->find("peak_matmul_hlsl_fp32(&vk, cmd, A, B, C, M, N, K, workspace, 0, bytes)"),
            std::string::npos)
      << *readme;
  EXPECT_EQ(readme->find("cudaMalloc"), std::string::npos) << *readme;
  json m = json::parse(*manifest_text, nullptr, false);
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m["backend"], "hlsl");
  ASSERT_EQ(m["configurations"].size(), 1u);
  EXPECT_EQ(m["configurations"][0]["kernels"], json::array({"main"}));
}

// A folder with files that no export wrote is never written into, --force or not; a file is no
// folder.
TEST_F(ExportCli, AFolderThatHoldsNoExportIsRefusedAndLeftAsItIs) {
  fs::path ws = workspace_with_device("dest", "");
  ASSERT_TRUE(write_file(ws / "mine" / "notes.txt", "keep me\n"));
  ASSERT_TRUE(write_file(ws / "mine" / "sub" / "CMakeLists.txt", "# mine\n"));
  const auto before = tree(ws / "mine");
  for (std::vector<std::string> args :
       {std::vector<std::string>{"export", "-o", "mine"},
        std::vector<std::string>{"export", "-o", "mine", "--force"}}) {
    Out o = peak(args, ws);
    EXPECT_EQ(o.code, 2) << o.out << o.err;
    EXPECT_NE(o.err.find("holds no export (no export.json)"), std::string::npos) << o.err;
    EXPECT_EQ(tree(ws / "mine"), before);
  }
  ASSERT_TRUE(write_file(ws / "afile", "x"));
  Out f = peak({"export", "-o", "afile"}, ws);
  EXPECT_EQ(f.code, 2) << f.err;
  EXPECT_NE(f.err.find("is not a folder"), std::string::npos) << f.err;
  auto text = read_file(ws / "afile");
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, "x");
}

// Checkpoint 19 of the FP32 small-M campaign: its dispatch table runs two configurations. The
// export holds both, the JSON form lists what was written, a second export into the folder needs
// --force, and the library builds.
TEST_F(ExportCli, TheFp32DispatchTableExportsAndBuilds) {
  fs::path ws = from_store(kFp32Store, "19", "fp32");
  if (ws.empty()) {
    if (!HasFailure()) GTEST_SKIP() << "neither xz nor python3 to decompress the store";
    return;
  }
  if (nvcc().empty()) {
    // The export builds every configuration first: without nvcc it stops and writes nothing.
    Out o = peak({"-q", "export", "-o", "lib"}, ws);
    EXPECT_NE(o.code, 0);
    EXPECT_NE(o.err.find("nvcc was not found"), std::string::npos) << o.err;
    EXPECT_FALSE(fs::exists(ws / "lib"));
    GTEST_SKIP() << "nvcc not found";
  }
  Out o = peak({"-q", "--json", "export", "19", "-o", "lib"}, ws);
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  json r = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(r.is_object()) << o.out;
  EXPECT_EQ(r["entry"], "peak_matmul_cuda_fp32");
  EXPECT_EQ(r["configurations"], 2);
  EXPECT_EQ(r["checkpoint"], 19);
  EXPECT_TRUE(r["dispatch_evaluation"].is_number_integer()) << o.out;
  EXPECT_EQ(fs::path(r["dir"].get<std::string>()).filename(), "lib");
  const std::set<std::string> files = {"peak_matmul_cuda_fp32.h",
                                       "peak_matmul_cuda_fp32.cpp",
                                       "kernels/config_0.cu",
                                       "kernels/config_1.cu",
                                       "CMakeLists.txt",
                                       "embed.cmake",
                                       "README.md",
                                       "export.json"};
  EXPECT_EQ(r["files"].get<std::set<std::string>>(), files);
  std::set<std::string> on_disk;
  for (const auto& [path, text] : tree(ws / "lib")) on_disk.insert(path);
  EXPECT_EQ(on_disk, files);

  auto manifest_text = read_file(ws / "lib" / "export.json");
  ASSERT_TRUE(manifest_text);
  json m = json::parse(*manifest_text, nullptr, false);
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m["kind"], "peak-export");
  EXPECT_EQ(m["format"], 1);
  EXPECT_EQ(m["backend"], "cuda");
  EXPECT_EQ(m["entry"], "peak_matmul_cuda_fp32");
  EXPECT_EQ(m["context"], "matmul-cuda-fp32");
  EXPECT_EQ(m["provenance"]["checkpoint"], 19);
  EXPECT_EQ(m["provenance"]["dispatch_evaluation"], r["dispatch_evaluation"]);
  ASSERT_EQ(m["configurations"].size(), 2u);
  ASSERT_FALSE(m["rules"].empty());
  EXPECT_EQ(m["rules"][0]["class"], "large-k");
  EXPECT_EQ(m["rules"][0]["configuration"], 0);
  for (size_t i = 1; i < m["rules"].size(); ++i) EXPECT_EQ(m["rules"][i]["configuration"], 1);
  EXPECT_EQ(m["fallback"], 1);
  for (const auto& c : m["configurations"]) {
    EXPECT_EQ(c["kernels"].size(), 3u) << c.dump();  // the tiled, small-M and reduce kernels
    for (const auto& k : c["kernels"]) EXPECT_TRUE(starts_with(k.get<std::string>(), "_Z"));
  }
  // Every configuration's unit carries its values; the README its provenance.
  for (int i = 0; i < 2; ++i) {
    auto unit = read_file(ws / "lib" / fmt::format("kernels/config_{}.cu", i));
    ASSERT_TRUE(unit);
    for (const auto& [k, v] : m["configurations"][i]["config"].items())
      EXPECT_NE(unit->find(fmt::format("#define {} {}\n", k, v.dump())), std::string::npos) << k;
  }
  auto readme = read_file(ws / "lib" / "README.md");
  ASSERT_TRUE(readme);
  for (const char* s : {"checkpoint 19", "| built for | sm_90a |", "large-k",
                        "peak_matmul_cuda_fp32_workspace_size(M, N, K)"})
    EXPECT_NE(readme->find(s), std::string::npos) << s;
  // The README's call example is C as written.
  EXPECT_NE(readme->find("peak_matmul_cuda_fp32(A, B, C, M, N, K, workspace, bytes, stream)"),
            std::string::npos)
      << *readme;

  // Again into the same folder: refused without --force (files untouched), replaced with it; a
  // file of the user's in the folder stays.
  ASSERT_TRUE(write_file(ws / "lib" / "mine.txt", "mine\n"));
  const auto before = tree(ws / "lib");
  Out again = peak({"-q", "export", "19", "-o", "lib"}, ws);
  EXPECT_EQ(again.code, 2) << again.err;
  EXPECT_NE(again.err.find("pass --force"), std::string::npos) << again.err;
  EXPECT_EQ(tree(ws / "lib"), before);
  Out forced = peak({"-q", "export", "19", "-o", "lib", "--force"}, ws);
  EXPECT_EQ(forced.code, 0) << forced.err;
  EXPECT_NE(forced.out.find("exported checkpoint 19"), std::string::npos) << forced.out;
  EXPECT_EQ(tree(ws / "lib"), before) << "the same checkpoint writes the same files";

  // Another architecture: its nvcc flags and the runtime's device check follow it.
  Out sm80 = peak({"-q", "export", "19", "-o", "lib80", "--arch", "sm_80"}, ws);
  ASSERT_EQ(sm80.code, 0) << sm80.err;
  auto cm = read_file(ws / "lib80" / "CMakeLists.txt");
  auto host = read_file(ws / "lib80" / "peak_matmul_cuda_fp32.cpp");
  ASSERT_TRUE(cm && host);
  EXPECT_NE(cm->find("-gencode=arch=compute_80,code=sm_80"), std::string::npos) << *cm;
  EXPECT_NE(host->find("#define PK_ARCH_MAJOR 8\n#define PK_ARCH_MINOR 0\n#define PK_ARCH_EXACT 0"),
            std::string::npos);

  if (!have_build_tools()) GTEST_SKIP() << "cmake or ninja not found: the build is not checked";
  build_as_the_readme_says(ws / "lib", "peak_matmul_cuda_fp32");
  if (HasFatalFailure()) return;
  auto ran = run_consumer(ws / "lib", "peak_matmul_cuda_fp32", 2);
  if (!ran) return;
  auto l = consumer_lines(*ran);
  EXPECT_EQ(l["configuration 0"], "0") << *ran;   // large-k
  EXPECT_EQ(l["configuration 1"], "1") << *ran;   // square
  EXPECT_EQ(l["configuration 2"], "1") << *ran;   // small-m
  EXPECT_EQ(l["configuration 3"], "-1") << *ran;  // outside valid
  EXPECT_EQ(l["configuration 4"], "-1") << *ran;
  EXPECT_EQ(l["text -1"], "(null)");
  EXPECT_EQ(l["text 0"], config_text(m["configurations"][0]["config"]));
  EXPECT_EQ(l["text 1"], config_text(m["configurations"][1]["config"]));
  EXPECT_EQ(l["text 2"], "(null)");
  EXPECT_EQ(l["status 0"], "ok");
  EXPECT_EQ(l["status 99"], "unknown status");
  EXPECT_FALSE(l["status 1"].empty());
  EXPECT_EQ(l["invalid-shape"], "1") << "PEAK_ERROR_INVALID_SHAPE, before any device work";
  EXPECT_EQ(l["null-array"], "6") << "PEAK_ERROR_ARGUMENT, before any device work";
}

// Checkpoint 10 of the FP16 campaign (TMA tensor maps, wgmma) exported alone (--single) under
// another name.
TEST_F(ExportCli, TheFp16TmaKernelExportsAloneAndBuilds) {
  fs::path ws = from_store(kFp16Store, "10", "fp16");
  if (ws.empty()) {
    if (!HasFailure()) GTEST_SKIP() << "neither xz nor python3 to decompress the store";
    return;
  }
  if (nvcc().empty()) GTEST_SKIP() << "nvcc not found";
  Out o = peak({"-q", "--json", "export", "10", "--single", "--name", "gemm16", "-o", "gemm"}, ws);
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  json r = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(r.is_object()) << o.out;
  EXPECT_EQ(r["entry"], "peak_gemm16");
  EXPECT_EQ(r["configurations"], 1);
  EXPECT_TRUE(r["dispatch_evaluation"].is_null());
  const std::set<std::string> files = {"peak_gemm16.h",  "peak_gemm16.cpp", "kernels/config_0.cu",
                                       "CMakeLists.txt", "embed.cmake",     "README.md",
                                       "export.json"};
  EXPECT_EQ(r["files"].get<std::set<std::string>>(), files);
  auto header = read_file(ws / "gemm" / "peak_gemm16.h");
  auto host = read_file(ws / "gemm" / "peak_gemm16.cpp");
  auto manifest_text = read_file(ws / "gemm" / "export.json");
  ASSERT_TRUE(header && host && manifest_text);
  // 16-bit arrays pass through void*; the host code encodes tensor maps.
  EXPECT_NE(header->find("int peak_gemm16(const void* A, const void* B, float* C, int M, int N, "
                         "int K, void* workspace, size_t workspace_bytes, cudaStream_t stream);"),
            std::string::npos)
      << *header;
  EXPECT_NE(host->find("cuTensorMapEncodeTiled"), std::string::npos);
  EXPECT_NE(host->find("#define PK_ARCH_EXACT 1"), std::string::npos);
  json m = json::parse(*manifest_text, nullptr, false);
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m["provenance"]["checkpoint"], 10);
  EXPECT_EQ(m["fallback"], 0);
  for (const auto& rule : m["rules"]) EXPECT_EQ(rule["configuration"], 0);
  ASSERT_EQ(m["configurations"].size(), 1u);
  EXPECT_EQ(m["configurations"][0]["classes"], json::array({"every shape"}));

  if (!have_build_tools()) GTEST_SKIP() << "cmake or ninja not found: the build is not checked";
  build_as_the_readme_says(ws / "gemm", "peak_gemm16");
  if (HasFatalFailure()) return;
  auto ran = run_consumer(ws / "gemm", "peak_gemm16", 1);
  if (!ran) return;
  auto l = consumer_lines(*ran);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(l[fmt::format("configuration {}", i)], "0") << *ran;
  EXPECT_EQ(l["configuration 3"], "-1") << *ran;
  EXPECT_EQ(l["text 0"], config_text(m["configurations"][0]["config"]));
  EXPECT_EQ(l["text 1"], "(null)");
  EXPECT_EQ(l["invalid-shape"], "1");
  EXPECT_EQ(l["null-array"], "6");
}

// The last checkpoint of the HLSL large-tiles campaign (H100), exported and built as its README
// says, then run on the CPU Vulkan device by a program linked against it (add_subdirectory). Its
// configuration holds 48 KiB of groupshared memory (two stages of 16x128 and 16x256 FP32 tiles),
// more than lavapipe's 32 KiB: there the library refuses it with PEAK_ERROR_DEVICE_LIMITS before
// recording anything, as peak's runner refuses it (invalid_config), and checkpoint 14 of the
// same campaign (17 KiB) is exported beside it and checked against the float64 reference. On a
// device with 48 KiB, both are.
TEST_F(ExportCli, TheHlslLargeTilesCheckpointRunsOnLavapipe) {
  if (!have_vulkan_build_tools()) GTEST_SKIP() << "cmake, ninja or the Vulkan headers not found";
  fs::path ws = from_store(kHlslStore, "15", "large-tiles");
  if (ws.empty()) {
    if (!HasFailure()) GTEST_SKIP() << "neither xz nor python3 to decompress the store";
    return;
  }
  Out o = peak({"-q", "--json", "export", "15", "-o", "lib"}, ws);
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  json r = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(r.is_object()) << o.out;
  EXPECT_EQ(r["entry"], "peak_matmul_hlsl_fp32");
  EXPECT_EQ(r["checkpoint"], 15);
  EXPECT_EQ(r["configurations"], 1);
  auto manifest_text = read_file(ws / "lib" / "export.json");
  ASSERT_TRUE(manifest_text);
  json m = json::parse(*manifest_text, nullptr, false);
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m["backend"], "hlsl");
  EXPECT_EQ(m["provenance"]["device"], "NVIDIA H100 80GB HBM3");
  Out o14 = peak({"-q", "export", "14", "-o", "lib14", "--name", "matmul_hlsl_14"}, ws);
  ASSERT_EQ(o14.code, 0) << o14.out << o14.err;

  // As the README says: a static library with the SPIR-V embedded.
  ProcessOptions b;
  b.cwd = ws;
  b.timeout_s = 600;
  b.argv = {"cmake", "-S", "lib", "-B", "lib/build", "-G", "Ninja"};
  auto conf = run_process(b);
  ASSERT_TRUE(conf && conf->ok()) << (conf ? conf->out + conf->err : conf.error());
  b.argv = {"cmake", "--build", "lib/build"};
  auto built = run_process(b);
  ASSERT_TRUE(built && built->ok()) << (built ? built->out + built->err : built.error());
  EXPECT_TRUE(fs::exists(ws / "lib" / "build" / "libpeak_matmul_hlsl_fp32.a"));

  auto ran = run_vulkan_consumer(
      "large-tiles-consumer",
      {{ws / "lib", "peak_matmul_hlsl_fp32"}, {ws / "lib14", "peak_matmul_hlsl_14"}},
      vulkan_consumer(
          {{"15", "peak_matmul_hlsl_fp32"}, {"14", "peak_matmul_hlsl_14"}},
          "  std::printf(\"configuration %d %s\\n\", "
          "peak_matmul_hlsl_fp32_configuration(257, 185, 93),\n"
          "              peak_matmul_hlsl_fp32_configuration_text(0));\n"
          "  std::printf(\"status-string %s\\n\",\n"
          "              peak_matmul_hlsl_fp32_status_string(PEAK_ERROR_DEVICE_LIMITS));\n"));
  if (!ran) return;
  const std::string& out = *ran;
  auto l = vulkan_lines(out);
  const bool fits = std::stoll(l["shared-memory"].empty() ? "0" : l["shared-memory"]) >= 49152;
  for (const char* shape : {"64x64x64", "257x185x93", "128x344x128"}) {
    const std::string r15 = l[fmt::format("run 15 {}", shape)];
    if (fits)
      EXPECT_TRUE(starts_with(r15, "0 workspace 256 bad 0 ")) << shape << ": " << out;
    else
      EXPECT_TRUE(starts_with(r15, "4 ")) << shape << ": PEAK_ERROR_DEVICE_LIMITS\n" << out;
    // The cbuffer of the scalars is all the workspace this kernel needs (no scratch buffers).
    EXPECT_TRUE(starts_with(l[fmt::format("run 14 {}", shape)], "0 workspace 256 bad 0 "))
        << shape << ": " << out;
  }
  expect_vulkan_refusals(l, "15", out);
  expect_vulkan_refusals(l, "14", out);
  EXPECT_EQ(l["configuration"], "0 " + config_text(m["configurations"][0]["config"])) << out;
  EXPECT_FALSE(l["status-string"].empty());
}

// A plan with two entry points (one SPIR-V module each), two scratch buffers (one zeroed) and a
// memset of the output, run on lavapipe: the scratch buffers are bound after the cbuffer at their
// offsets of the workspace, filled where the plan says (the workspace starts as garbage), and each
// step sees what the previous one wrote. The kernel sums two halves of K through the scratch
// buffer; its second pass writes only where the memset left a zero.
TEST_F(ExportCli, AnHlslPlanWithScratchBuffersAndTwoEntryPointsRunsOnLavapipe) {
  if (!have_vulkan_build_tools()) GTEST_SKIP() << "cmake, ninja or the Vulkan headers not found";
  const std::string device = R"([numthreads(BLOCK_X, BLOCK_Y, 1)]
void partial(uint3 tid : SV_DispatchThreadID, uint3 gid : SV_GroupID) {
  int col = (int)tid.x;
  int row = (int)tid.y;
  int half_ = (int)gid.z;
  if (row >= M || col >= N) return;
  int k0 = half_ * (K / 2), k1 = half_ == 0 ? K / 2 : K;
  float acc = 0.0f;
  for (int k = k0; k < k1; ++k) acc += A[row * K + k] * B[k * N + col];
  parts[half_ * M * N + row * N + col] = acc + asfloat(flags[1]);
}

[numthreads(64, 1, 1)]
void finish(uint3 tid : SV_DispatchThreadID) {
  int i = (int)tid.x;
  if (i >= M * N || C[i] != 0.0f) return;
  C[i] = parts[i] + parts[M * N + i];
}
)";
  const std::string host = R"(scratch parts
  dtype = f32
  count = 2 * M * N
scratch flags
  dtype = i32
  count = 3
  zero = 1
memset C
launch partial
  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y), 2)
launch finish
  grid = (ceil_div(M * N, 64))
)";
  // A context of its own (a workspace's checkpoint is what peak exports): the HLSL example with
  // this device and host region.
  const fs::path example = fs::path(PEAK_SOURCE_DIR) / "examples" / "matmul-hlsl-fp32";
  auto src = read_file(example / "kernel.hlsl");
  auto toml = read_file(example / "kernel.toml");
  ASSERT_TRUE(src && toml);
  // The scratch buffers' bindings, after the scalars' cbuffer.
  const std::string cbuffer = "cbuffer Scalars { int M; int N; int K; };\n";
  const size_t at = src->find(cbuffer);
  ASSERT_NE(at, std::string::npos) << *src;
  std::string s = *src;
  s.insert(at + cbuffer.size(),
           "[[vk::binding(4, 0)]] RWStructuredBuffer<float> parts;\n"
           "[[vk::binding(5, 0)]] RWStructuredBuffer<uint> flags;\n");
  s = replace_region(replace_region(s, "device", device), "host", host);
  ASSERT_TRUE(write_file(tmp_ / "two-pass-ctx" / "kernel.hlsl", s));
  ASSERT_TRUE(write_file(tmp_ / "two-pass-ctx" / "kernel.toml", *toml));
  const fs::path ws = tmp_ / "two-pass";
  Out init = peak({"-q", "init", (tmp_ / "two-pass-ctx").string(), ws.string()});
  ASSERT_EQ(init.code, 0) << init.err;
  Out o = peak({"-q", "--json", "export", "-o", "lib", "--name", "two_pass"}, ws);
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  json r = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(r.is_object()) << o.out;
  const std::set<std::string> files = {"peak_two_pass.h",
                                       "peak_two_pass.cpp",
                                       "kernels/config_0.hlsl",
                                       "kernels/config_0_0.spv",
                                       "kernels/config_0_1.spv",
                                       "CMakeLists.txt",
                                       "embed.cmake",
                                       "README.md",
                                       "export.json"};
  EXPECT_EQ(r["files"].get<std::set<std::string>>(), files);
  auto manifest_text = read_file(ws / "lib" / "export.json");
  ASSERT_TRUE(manifest_text);
  json m = json::parse(*manifest_text, nullptr, false);
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m["configurations"][0]["kernels"], json::array({"partial", "finish"}));

  std::string source = vulkan_consumer({{"two", "peak_two_pass"}});
  const std::string buffer = "    Buffer W = make_buffer(bytes + 256);\n";
  const size_t w = source.find(buffer);
  ASSERT_NE(w, std::string::npos);
  source.insert(w + buffer.size(), "    std::memset(W.data, 0x7f, bytes + 256);\n");
  auto ran = run_vulkan_consumer("two-pass-consumer", {{ws / "lib", "peak_two_pass"}}, source);
  if (!ran) return;
  auto l = vulkan_lines(*ran);
  // The cbuffer (256 bytes reserved), 2 * M * N floats and 3 flags, each at a 256-byte boundary.
  auto round = [](int64_t b) { return (b + 255) / 256 * 256; };
  for (auto [m_, n_, k_] : {std::tuple{64, 64, 64}, {257, 185, 93}, {128, 344, 128}}) {
    const std::string shape = fmt::format("{}x{}x{}", m_, n_, k_);
    const int64_t bytes = 256 + round(int64_t{8} * m_ * n_) + 256;
    EXPECT_TRUE(starts_with(l["run two " + shape], fmt::format("0 workspace {} bad 0 ", bytes)))
        << shape << ": " << *ran;
  }
  expect_vulkan_refusals(l, "two", *ran);
}

}  // namespace
}  // namespace peak
