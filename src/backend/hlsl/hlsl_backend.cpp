#include "backend/hlsl/hlsl_backend.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <memory>
#include <regex>

#include <fmt/format.h>
#include <glslang/build_info.h>
#include <spirv-tools/libspirv.h>
#include <shaderc/shaderc.hpp>

#include "backend/hlsl/spirv_reflect.h"
#include "util/fs.h"
#include "util/sha256.h"

#ifndef PEAK_SHADERC_VERSION
#define PEAK_SHADERC_VERSION "unknown"
#endif

namespace peak {
namespace hlsl {
namespace {

constexpr int64_t kMaxDispatch = 65535;  // Vulkan's guaranteed maxComputeWorkGroupCount

std::string file_name(const KernelContext* ctx) {
  if (ctx == nullptr || ctx->source_file.empty()) return "kernel.hlsl";
  return fs::path(ctx->source_file).filename().string();
}

// "a b c" or "a,b,c" -> three integers (device limits stored in DeviceFacts::extra).
std::optional<std::array<int64_t, 3>> parse_triple(const DeviceFacts& device, const char* key) {
  auto it = device.extra.find(key);
  if (it == device.extra.end()) return std::nullopt;
  std::string s = replace_all(it->second, ",", " ");
  std::array<int64_t, 3> v{};
  if (std::sscanf(s.c_str(), "%ld %ld %ld", &v[0], &v[1], &v[2]) != 3) return std::nullopt;
  return v;
}

// Rewrites glslang's diagnostics to `file:line[:column]: severity: message`.
std::string rewrite_diagnostics(const std::string& log, const std::string& file) {
  static const std::regex kParse(R"(^(.*): (.*)\((\d+)\): error at column (\d+), (.*)$)");
  std::string out;
  for (const std::string& line : split_lines(log)) {
    if (trim(line).empty()) continue;
    std::smatch m;
    if (std::regex_match(line, m, kParse)) {
      out += fmt::format("{}:{}:{}: error: {}\n", file, m[3].str(), m[4].str(), m[5].str());
    } else {
      out += line + "\n";
    }
  }
  return out;
}

// A candidate is one file: every #include, by any path, is refused without opening anything, so
// no file of the host, the workspace or the cache reaches the compile log.
class RefusingIncluder final : public shaderc::CompileOptions::IncluderInterface {
 public:
  shaderc_include_result* GetInclude(const char* requested, shaderc_include_type, const char*,
                                     size_t) override {
    auto* held = new Held;
    held->message = fmt::format(
        "\"{}\" is not included: a candidate is one file, so #include is not supported (write "
        "what you need into the device region)",
        requested);
    held->result.source_name = "";  // empty: the include failed, `content` says why
    held->result.source_name_length = 0;
    held->result.content = held->message.c_str();
    held->result.content_length = held->message.size();
    held->result.user_data = held;
    return &held->result;
  }
  void ReleaseInclude(shaderc_include_result* result) override {
    delete static_cast<Held*>(result->user_data);
  }

 private:
  struct Held {
    std::string message;
    shaderc_include_result result{};
  };
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::string compile_unit(const SourceRegions& source) {
  SourceRegions r = source;
  std::string blank;
  for (char c : r.host)
    if (c == '\n') blank.push_back('\n');
  r.host = blank;
  return join_regions(r);
}

std::string compiler_version() {
  return fmt::format("shaderc {} / glslang {}.{}.{} / SPIRV-Tools {}", PEAK_SHADERC_VERSION,
                     GLSLANG_VERSION_MAJOR, GLSLANG_VERSION_MINOR, GLSLANG_VERSION_PATCH,
                     spvSoftwareVersionString());
}

}  // namespace hlsl

namespace {

class HlslBackend final : public Backend {
 public:
  std::string name() const override { return "hlsl"; }
  std::string source_extension() const override { return ".hlsl"; }

  std::map<std::string, std::string> translation_table() const override {
    return {
        {"thread index within the block", "SV_GroupThreadID"},
        {"flat thread index within the block", "SV_GroupIndex"},
        {"block index", "SV_GroupID"},
        {"global thread index", "SV_DispatchThreadID"},
        {"block size declaration", "[numthreads(X, Y, Z)]"},
        {"block", "thread group"},
        {"grid", "`grid = (x, y, z)` of the launch statement in the host region (thread groups "
                 "dispatched)"},
        {"launch", "a `launch ENTRY` statement of the host region's launch plan"},
        {"shared memory", "groupshared"},
        {"barrier", "GroupMemoryBarrierWithGroupSync()"},
        {"memory fence", "DeviceMemoryBarrier()"},
        {"warp", "wave (subgroup)"},
        {"warp shuffle", "WaveReadLaneAt(value, lane)"},
        {"lane index", "WaveGetLaneIndex()"},
        {"unroll", "[unroll]"},
        {"fused multiply-add", "mad(a, b, c)"},
        {"vector load",
         "a float4 view of the same binding: [[vk::binding(0, 0)]] StructuredBuffer<float4> A4;"},
        {"register", "local variable"},
        {"global memory", "RWStructuredBuffer / StructuredBuffer"},
    };
  }

  fs::path runner() const override { return find_runner("peak-runner"); }

  std::vector<std::pair<std::string, std::string>> toolchain() const override {
    return {
        {"compiler", fmt::format("shaderc {} (in process)", PEAK_SHADERC_VERSION)},
        {"glslang", fmt::format("{}.{}.{}", GLSLANG_VERSION_MAJOR, GLSLANG_VERSION_MINOR,
                                GLSLANG_VERSION_PATCH)},
        {"SPIRV-Tools", spvSoftwareVersionString()},
        {"target", "Vulkan 1.1 (SPIR-V 1.3)"},
        {"runner", runner().string()},
    };
  }

  Result<DeviceFacts> probe(const std::string& selector, bool microbench) override {
    RunnerJob job;
    job.mode = "probe";
    job.device = selector;
    job.microbench = microbench;
    RunnerOptions opts;
    opts.executable = runner();
    std::error_code ec;
    if (!fs::exists(opts.executable, ec)) return make_error(runner_missing_message("peak-runner"));
    auto facts = probe_device(job, opts);
    if (!facts) return facts;
    if (facts->backend.empty()) facts->backend = "hlsl";
    return facts;
  }

  BuildResult build(const BuildRequest& req) override {
    auto t0 = std::chrono::steady_clock::now();
    BuildResult br;
    br.toolchain = hlsl::compiler_version();
    try {
      build_into(req, br);
    } catch (const std::exception& e) {
      br.disposition = Disposition::compile_failed;
      br.log += fmt::format("internal error while compiling: {}\n", e.what());
    }
    br.seconds = hlsl::seconds_since(t0);
    return br;
  }

  PlanDialect plan_dialect() const override {
    PlanDialect d;
    d.backend = "hlsl";
    d.block = false;
    d.args = false;
    d.shared = false;
    d.kernel_word = "entry point";
    return d;
  }

  PlanResult check_resources(const BuildResult& build, const DeviceFacts& device) override {
    PlanResult pr;
    const nlohmann::json& r = build.resources;
    if (!r.is_object() || !r.contains("kernels") || !r["kernels"].is_object()) return pr;
    try {
      for (const auto& [entry, k] : r["kernels"].items()) {
        auto ls = k.at("local_size").get<std::vector<int64_t>>();
        int64_t threads = k.value("threads", int64_t{0});
        int64_t shared = k.value("shared_bytes", int64_t{0});
        std::string dev = device.name.empty() ? "the device" : device.name;
        if (device.max_threads_per_group > 0 && threads > device.max_threads_per_group) {
          pr.disposition = Disposition::invalid_config;
          pr.message = fmt::format(
              "`{}` has {} threads per group ([numthreads({}, {}, {})]); {} allows at most {} "
              "(maxComputeWorkGroupInvocations)",
              entry, threads, ls.at(0), ls.at(1), ls.at(2), dev, device.max_threads_per_group);
          return pr;
        }
        if (auto max_size = hlsl::parse_triple(device, "max_workgroup_size")) {
          for (size_t i = 0; i < 3 && i < ls.size(); ++i) {
            if ((*max_size)[i] > 0 && ls[i] > (*max_size)[i]) {
              pr.disposition = Disposition::invalid_config;
              pr.message = fmt::format(
                  "`{}`: numthreads {} = {} exceeds {}'s limit of {} (maxComputeWorkGroupSize[{}])",
                  entry, "xyz"[i], ls[i], dev, (*max_size)[i], i);
              return pr;
            }
          }
        }
        if (device.shared_memory_per_group > 0 && shared > device.shared_memory_per_group) {
          pr.disposition = Disposition::invalid_config;
          pr.message = fmt::format(
              "`{}` uses {} bytes of groupshared memory; {} allows at most {} bytes per thread "
              "group (maxComputeSharedMemorySize)",
              entry, shared, dev, device.shared_memory_per_group);
          return pr;
        }
      }
    } catch (const std::exception& e) {
      pr.disposition = Disposition::compile_failed;
      pr.message = fmt::format("unreadable build resources: {}", e.what());
    }
    return pr;
  }

  std::string baseline(const KernelContext&, const DeviceFacts&) const override { return ""; }

 protected:
  PlanResult resolve_plan(LaunchPlan& plan, const BuildResult& build,
                          const DeviceFacts& device) override {
    PlanResult pr;
    const nlohmann::json kernels = build.resources.is_object()
                                       ? build.resources.value("kernels", nlohmann::json::object())
                                       : nlohmann::json::object();
    auto max_count = hlsl::parse_triple(device, "max_workgroup_count");
    for (PlanStep& st : plan.steps) {
      if (st.op != PlanStep::Op::launch) continue;
      auto k = kernels.find(st.kernel);
      if (k == kernels.end()) {
        pr.disposition = Disposition::compile_failed;
        pr.message = fmt::format("line {}: entry point `{}` was not built", st.line, st.kernel);
        return pr;
      }
      st.symbol = st.kernel;
      st.module = k->value("module", "");
      for (int i = 0; i < 3; ++i) {
        int64_t limit = max_dispatch_for(max_count, i);
        if (st.grid[static_cast<size_t>(i)] > limit) {
          pr.disposition = Disposition::invalid_config;
          pr.message = fmt::format("launch `{}`: grid.{} = {} is outside 1..{}", st.kernel,
                                   "xyz"[i], st.grid[static_cast<size_t>(i)], limit);
          return pr;
        }
      }
    }
    return pr;
  }

 private:
  static int64_t max_dispatch_for(const std::optional<std::array<int64_t, 3>>& max_count, int i) {
    int64_t limit = hlsl::kMaxDispatch;
    if (max_count && (*max_count)[i] > 0) limit = std::min(limit, (*max_count)[i]);
    return limit;
  }

  // Reflects a module into br.resources; false (with br.log) when it is unusable.
  static bool reflect_into(const std::string& bytes, const std::string& entry,
                           const std::string& file, BuildResult& br, nlohmann::json& out) {
    auto words = spirv::words_from_bytes(bytes);
    if (!words) {
      br.log += words.error() + "\n";
      return false;
    }
    auto info = spirv::reflect(*words);
    if (!info) {
      br.log += fmt::format("{}: {}\n", file, info.error());
      return false;
    }
    const spirv::EntryPoint* ep = info->find(entry);
    if (ep == nullptr) {
      br.log += fmt::format(
          "{}: error: entry point `{}` not found (the launch plan launches it)\n", file, entry);
      return false;
    }
    if (ep->execution_model != 5) {
      br.log += fmt::format("{}: error: `{}` is not a compute shader entry point\n", file, entry);
      return false;
    }
    const auto& ls = ep->local_size;
    if (ls[0] == 0 || ls[1] == 0 || ls[2] == 0) {
      br.log +=
          fmt::format("{}: error: `{}` has no [numthreads(X, Y, Z)] attribute\n", file, entry);
      return false;
    }
    int64_t threads = int64_t{ls[0]} * ls[1] * ls[2];
    out = {{"local_size", {ls[0], ls[1], ls[2]}},
           {"threads", threads},
           {"shared_bytes", info->shared_bytes}};
    return true;
  }

  void build_into(const BuildRequest& req, BuildResult& br) {
    const std::string file = hlsl::file_name(req.context);
    auto regions = split_regions(req.source, file);
    if (!regions) {
      br.disposition = Disposition::compile_failed;
      br.log = regions.error() + "\n";
      return;
    }
    auto plan = parse_plan(*regions, file);
    if (!plan) {
      br.disposition = Disposition::compile_failed;
      br.log = plan.error() + "\n";
      return;
    }
    std::vector<std::string> entries = plan->kernels();
    if (entries.empty()) {
      br.disposition = Disposition::compile_failed;
      br.log = fmt::format("{}: the launch plan launches no entry point (add `launch main` with "
                           "its grid)\n",
                           file);
      return;
    }
    const std::string unit = hlsl::compile_unit(*regions);
    std::string defines;
    for (const auto& [k, v] : req.defines) defines += fmt::format(" -D{}={}", k, v);
    fs::path cache_dir = req.cache_dir;
    if (cache_dir.empty()) cache_dir = fs::temp_directory_path() / "peak-hlsl-cache";
    std::error_code ec;
    fs::create_directories(cache_dir, ec);
    if (ec) {
      br.disposition = Disposition::compile_failed;
      br.log = fmt::format("cannot create the build cache folder {}: {}\n", cache_dir.string(),
                           ec.message());
      return;
    }
    nlohmann::json kernels = nlohmann::json::object();
    std::vector<std::string> commands;
    bool all_cached = true;
    int64_t max_threads = 0, max_shared = 0;
    for (const std::string& entry : entries) {
      nlohmann::json k;
      bool cached = false;
      std::string command = fmt::format(
          "shaderc in process, as: glslc -x hlsl -fshader-stage=compute -fentry-point={} "
          "--target-env=vulkan1.1 -O{} {} (host region lines blanked)",
          entry, defines, file);
      commands.push_back(command);
      fs::path artifact;
      if (!compile_entry(req, unit, entry, file, command, cache_dir, br, k, artifact, cached))
        return;
      all_cached = all_cached && cached;
      k["module"] = artifact.string();
      max_threads = std::max(max_threads, k.value("threads", int64_t{0}));
      max_shared = std::max(max_shared, k.value("shared_bytes", int64_t{0}));
      kernels[entry] = k;
      if (br.artifact.empty()) br.artifact = artifact;
    }
    br.command = join(commands, "\n");
    br.cached = all_cached;
    br.resources = {{"kernels", kernels},
                    {"max_threads", max_threads},
                    {"max_shared_bytes", max_shared},
                    {"shared_bytes", max_shared}};
    br.disposition = Disposition::passed;
  }

  // Compiles one entry point (or finds it in the cache); false (with br.disposition and br.log)
  // when it does not compile.
  bool compile_entry(const BuildRequest& req, const std::string& unit, const std::string& entry,
                     const std::string& file, const std::string& command,
                     const fs::path& cache_dir, BuildResult& br, nlohmann::json& resources,
                     fs::path& artifact, bool& cached) {
    std::string key_text = unit;
    key_text += '\0';
    key_text += command;
    key_text += '\0';
    key_text += br.toolchain;
    const std::string key = sha256_hex(key_text);
    artifact = cache_dir / (key + ".spv");
    const fs::path log_path = cache_dir / (key + ".log");
    std::error_code ec;
    if (fs::exists(artifact, ec)) {
      if (auto bytes = read_file(artifact)) {
        BuildResult scratch;
        if (reflect_into(*bytes, entry, file, scratch, resources)) {
          if (auto log = read_file(log_path)) br.log += *log;
          cached = true;
          return true;
        }
      }
      // A damaged cache entry: compile again and overwrite it.
    }
    auto failed = [&](std::string msg) {
      br.disposition = Disposition::compile_failed;
      br.log += msg;
      return false;
    };
    shaderc::Compiler compiler;
    if (!compiler.IsValid()) return failed("the shaderc compiler could not be initialized\n");
    shaderc::CompileOptions options;
    options.SetSourceLanguage(shaderc_source_language_hlsl);
    options.SetTargetEnvironment(shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_1);
    options.SetOptimizationLevel(shaderc_optimization_level_performance);
    options.SetHlsl16BitTypes(false);
    options.SetAutoBindUniforms(false);
    for (const auto& [k, v] : req.defines) options.AddMacroDefinition(k, std::to_string(v));
    options.SetIncluder(std::make_unique<hlsl::RefusingIncluder>());
    shaderc::SpvCompilationResult result = compiler.CompileGlslToSpv(
        unit, shaderc_compute_shader, file.c_str(), entry.c_str(), options);
    std::string log = hlsl::rewrite_diagnostics(result.GetErrorMessage(), file);
    const std::string missing = fmt::format(
        "{}: error: entry point `{}` not found (the launch plan launches it)\n", file, entry);
    // glslang only warns about a missing entry point (and emits an empty one).
    if (result.GetCompilationStatus() == shaderc_compilation_status_success &&
        log.find("Entry point not found") != std::string::npos)
      return failed(log + missing);
    if (result.GetCompilationStatus() != shaderc_compilation_status_success)
      return failed(log.empty() ? fmt::format("{}: compilation failed (no diagnostics)\n", file)
                                : log);
    std::string bytes(reinterpret_cast<const char*>(result.cbegin()),
                      static_cast<size_t>(result.cend() - result.cbegin()) * sizeof(uint32_t));
    if (bytes.empty()) return failed(log + missing);
    br.log += log;
    if (!reflect_into(bytes, entry, file, br, resources)) {
      br.disposition = Disposition::compile_failed;
      return false;
    }
    if (auto st = write_file_atomic(artifact, bytes); !st)
      return failed(fmt::format("cannot write {}: {}\n", artifact.string(), st.message()));
    if (!log.empty()) (void)write_file_atomic(log_path, log);
    return true;
  }
};

}  // namespace

std::unique_ptr<Backend> make_hlsl_backend() { return std::make_unique<HlslBackend>(); }

}  // namespace peak
