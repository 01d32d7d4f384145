#include "backend/hlsl/hlsl_backend.h"

#include <algorithm>
#include <cctype>
#include <chrono>
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

// 1-based line number of the first line of the host region in the joined file.
int host_first_line(const SourceRegions& source) {
  SourceRegions r = source;
  r.host = "\x01";
  r.after.clear();
  std::string joined = join_regions(r);
  size_t p = joined.find('\x01');
  if (p == std::string::npos) return 1;
  return 1 +
         static_cast<int>(std::count(joined.begin(), joined.begin() + static_cast<long>(p), '\n'));
}

// Integer literals in C/HLSL spelling (hex, u/l suffixes) to the expression language's decimals.
std::string normalize_literals(const std::string& text) {
  static const std::regex kHex(R"(\b0[xX]([0-9a-fA-F]+)[uUlL]*\b)");
  static const std::regex kSuffix(R"(\b([0-9]+)[uUlL]+\b)");
  std::string out;
  auto begin = std::sregex_iterator(text.begin(), text.end(), kHex);
  size_t last = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    out += text.substr(last, static_cast<size_t>(it->position()) - last);
    unsigned long long v = 0;
    try {
      v = std::stoull((*it)[1].str(), nullptr, 16);
    } catch (const std::exception&) {
      return text;  // too large: leave as is (it will not evaluate)
    }
    out += std::to_string(v);
    last = static_cast<size_t>(it->position() + it->length());
  }
  out += text.substr(last);
  return std::regex_replace(out, kSuffix, "$1");
}

struct MacroDef {
  std::string name;
  std::string value;
};

// Object-like `#define NAME VALUE` lines (with backslash continuations and comments removed).
std::vector<MacroDef> parse_defines(const std::string& text) {
  static const std::regex kDefine(R"(^\s*#\s*define\s+([A-Za-z_][A-Za-z0-9_]*)(\(?)(.*)$)");
  std::vector<MacroDef> defs;
  std::vector<std::string> lines = split_lines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string line = lines[i];
    while (!line.empty() && line.back() == '\\' && i + 1 < lines.size()) {
      line.pop_back();
      line += " " + lines[++i];
    }
    std::smatch m;
    if (!std::regex_match(line, m, kDefine)) continue;
    if (!m[2].str().empty()) continue;  // function-like macro
    std::string value = m[3].str();
    // Comments: /* ... */ on the line, then // to the end.
    for (size_t p; (p = value.find("/*")) != std::string::npos;) {
      size_t e = value.find("*/", p + 2);
      value.erase(p, e == std::string::npos ? std::string::npos : e + 2 - p);
    }
    if (size_t p = value.find("//"); p != std::string::npos) value.erase(p);
    value = trim(value);
    if (value.empty()) continue;
    defs.push_back({m[1].str(), normalize_literals(value)});
  }
  return defs;
}

struct HostLine {
  int line = 0;
  std::string name;
  std::string expr;
};

Result<std::vector<HostLine>> parse_host(const std::string& host, int first_line,
                                         const std::string& file) {
  static const std::regex kAssign(R"(^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$)");
  std::vector<HostLine> out;
  std::vector<std::string> lines = split_lines(host);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string line = lines[i];
    size_t cut = std::min(line.find("//"), line.find('#'));
    if (cut != std::string::npos) line.erase(cut);
    line = trim(line);
    if (!line.empty() && line.back() == ';') line = trim(line.substr(0, line.size() - 1));
    if (line.empty()) continue;
    int lineno = first_line + static_cast<int>(i);
    std::smatch m;
    if (!std::regex_match(line, m, kAssign) || starts_with(m[2].str(), "=")) {
      return make_error(fmt::format(
          "{}:{}: the host region holds lines `name = expression` (dispatch_x, dispatch_y, "
          "dispatch_z, require, or a helper name); got `{}`",
          file, lineno, trim(lines[i])));
    }
    std::string e = trim(m[2].str());
    if (e.empty())
      return make_error(fmt::format("{}:{}: `{} =` has no expression", file, lineno, m[1].str()));
    out.push_back({lineno, m[1].str(), e});
  }
  return out;
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

expr::Env host_env(const KernelContext& ctx, const SourceRegions& source, const Shape& shape,
                   const Config& config, const DeviceFacts& device) {
  expr::Env env;
  if (auto se = shape_env(ctx, shape)) env = *se;
  for (const auto& [k, v] : shape.values) env.emplace(k, v);
  for (const auto& [k, v] : config) env[k] = v;
  env.emplace("max_threads", device.max_threads_per_group);
  env.emplace("shared_memory", device.shared_memory_per_group);
  env.emplace("subgroup_size", device.subgroup_size);
  std::vector<MacroDef> defs = parse_defines(source.macros);
  for (bool progress = true; progress;) {
    progress = false;
    for (const MacroDef& d : defs) {
      if (env.count(d.name)) continue;
      if (auto v = expr::evaluate(d.value, env)) {
        env[d.name] = *v;
        progress = true;
      }
    }
  }
  return env;
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
        {"grid", "dispatch (dispatch_x, dispatch_y, dispatch_z in the host region)"},
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

  PlanResult plan(const KernelContext& ctx, const SourceRegions& source, const Shape& shape,
                  const Config& config, const DeviceFacts& device) override {
    PlanResult pr;
    std::string file = hlsl::file_name(&ctx);
    auto lines = hlsl::parse_host(source.host, hlsl::host_first_line(source), file);
    if (!lines) {
      pr.disposition = Disposition::compile_failed;
      pr.message = lines.error();
      return pr;
    }
    expr::Env env = hlsl::host_env(ctx, source, shape, config, device);
    for (const hlsl::HostLine& l : *lines) {
      auto v = expr::evaluate(l.expr, env);
      if (!v) {
        pr.disposition = Disposition::compile_failed;
        pr.message =
            fmt::format("{}:{}: cannot evaluate `{}` for {}{}: {}", file, l.line, l.expr,
                        shape.text(), config.empty() ? "" : " " + config_text(config), v.error());
        return pr;
      }
      if (l.name == "require") {
        if (*v == 0) {
          pr.disposition = Disposition::invalid_config;
          pr.message =
              fmt::format("requirement `{}` does not hold ({}:{}) for {}{}", l.expr, file, l.line,
                          shape.text(), config.empty() ? "" : " " + config_text(config));
          return pr;
        }
        continue;
      }
      env[l.name] = *v;
    }
    auto max_count = hlsl::parse_triple(device, "max_workgroup_count");
    std::array<int64_t, 3> groups{};
    const char* names[3] = {"dispatch_x", "dispatch_y", "dispatch_z"};
    for (int i = 0; i < 3; ++i) {
      bool set = false;
      for (const auto& l : *lines) set = set || l.name == names[i];
      if (!set) {
        pr.disposition = Disposition::compile_failed;
        pr.message = fmt::format(
            "{}: the host region does not set {} (it must set dispatch_x, dispatch_y and "
            "dispatch_z)",
            file, names[i]);
        return pr;
      }
      groups[i] = env[names[i]];
      int64_t limit = max_dispatch_for(max_count, i);
      if (groups[i] < 1 || groups[i] > limit) {
        pr.disposition = Disposition::invalid_config;
        pr.message = fmt::format("{} = {} is outside 1..{} for {}{}", names[i], groups[i], limit,
                                 shape.text(), config.empty() ? "" : " " + config_text(config));
        return pr;
      }
    }
    pr.plan = {{"groups", {groups[0], groups[1], groups[2]}}};
    return pr;
  }

  PlanResult check_resources(const BuildResult& build, const DeviceFacts& device) override {
    PlanResult pr;
    const nlohmann::json& r = build.resources;
    if (!r.is_object() || !r.contains("local_size")) return pr;
    try {
      auto ls = r.at("local_size").get<std::vector<int64_t>>();
      int64_t threads = r.value("threads", int64_t{0});
      int64_t shared = r.value("shared_bytes", int64_t{0});
      std::string dev = device.name.empty() ? "the device" : device.name;
      if (device.max_threads_per_group > 0 && threads > device.max_threads_per_group) {
        pr.disposition = Disposition::invalid_config;
        pr.message = fmt::format(
            "the thread group has {} threads ([numthreads({}, {}, {})]); {} allows at most {} "
            "(maxComputeWorkGroupInvocations)",
            threads, ls.at(0), ls.at(1), ls.at(2), dev, device.max_threads_per_group);
        return pr;
      }
      if (auto max_size = hlsl::parse_triple(device, "max_workgroup_size")) {
        static const char* axis = "xyz";
        for (size_t i = 0; i < 3 && i < ls.size(); ++i) {
          if ((*max_size)[i] > 0 && ls[i] > (*max_size)[i]) {
            pr.disposition = Disposition::invalid_config;
            pr.message = fmt::format(
                "numthreads {} = {} exceeds {}'s limit of {} (maxComputeWorkGroupSize[{}])",
                axis[i], ls[i], dev, (*max_size)[i], i);
            return pr;
          }
        }
      }
      if (device.shared_memory_per_group > 0 && shared > device.shared_memory_per_group) {
        pr.disposition = Disposition::invalid_config;
        pr.message = fmt::format(
            "the kernel uses {} bytes of groupshared memory; {} allows at most {} bytes per "
            "thread group (maxComputeSharedMemorySize)",
            shared, dev, device.shared_memory_per_group);
        return pr;
      }
    } catch (const std::exception& e) {
      pr.disposition = Disposition::compile_failed;
      pr.message = fmt::format("unreadable build resources: {}", e.what());
    }
    return pr;
  }

  std::string baseline(const KernelContext&, const DeviceFacts&) const override { return ""; }

 private:
  static int64_t max_dispatch_for(const std::optional<std::array<int64_t, 3>>& max_count, int i) {
    int64_t limit = hlsl::kMaxDispatch;
    if (max_count && (*max_count)[i] > 0) limit = std::min(limit, (*max_count)[i]);
    return limit;
  }

  // Reflects a module into br.resources; false (with br.log) when it is unusable.
  static bool reflect_into(const std::string& bytes, const std::string& entry,
                           const std::string& file, BuildResult& br) {
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
          "{}: error: entry point `{}` not found (kernel.toml `entry` names the compute shader "
          "function)\n",
          file, entry);
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
    br.resources = {{"local_size", {ls[0], ls[1], ls[2]}},
                    {"threads", threads},
                    {"shared_bytes", info->shared_bytes}};
    return true;
  }

  void build_into(const BuildRequest& req, BuildResult& br) {
    const std::string file = hlsl::file_name(req.context);
    const std::string entry =
        req.context != nullptr && !req.context->entry.empty() ? req.context->entry : "main";
    auto regions = split_regions(req.source, file);
    if (!regions) {
      br.disposition = Disposition::compile_failed;
      br.log = regions.error() + "\n";
      return;
    }
    const std::string unit = hlsl::compile_unit(*regions);

    std::string defines;
    for (const auto& [k, v] : req.defines) defines += fmt::format(" -D{}={}", k, v);
    br.command = fmt::format(
        "shaderc in process, as: glslc -x hlsl -fshader-stage=compute -fentry-point={} "
        "--target-env=vulkan1.1 -O{} {} (host region lines blanked)",
        entry, defines, file);

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
    std::string key_text = unit;
    key_text += '\0';
    key_text += defines;
    key_text += '\0';
    key_text += br.command;
    key_text += '\0';
    key_text += br.toolchain;
    const std::string key = sha256_hex(key_text);
    const fs::path artifact = cache_dir / (key + ".spv");
    const fs::path log_path = cache_dir / (key + ".log");
    br.artifact = artifact;

    if (fs::exists(artifact, ec)) {
      if (auto bytes = read_file(artifact)) {
        BuildResult hit = br;
        if (reflect_into(*bytes, entry, file, hit)) {
          br = std::move(hit);
          if (auto log = read_file(log_path)) br.log = *log;
          br.cached = true;
          br.disposition = Disposition::passed;
          return;
        }
      }
      // A damaged cache entry: compile again and overwrite it.
    }

    shaderc::Compiler compiler;
    if (!compiler.IsValid()) {
      br.disposition = Disposition::compile_failed;
      br.log = "the shaderc compiler could not be initialized\n";
      return;
    }
    shaderc::CompileOptions options;
    options.SetSourceLanguage(shaderc_source_language_hlsl);
    options.SetTargetEnvironment(shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_1);
    options.SetOptimizationLevel(shaderc_optimization_level_performance);
    options.SetHlsl16BitTypes(false);
    options.SetAutoBindUniforms(false);
    for (const auto& [k, v] : req.defines) options.AddMacroDefinition(k, std::to_string(v));
    shaderc::SpvCompilationResult result = compiler.CompileGlslToSpv(
        unit, shaderc_compute_shader, file.c_str(), entry.c_str(), options);
    br.log = hlsl::rewrite_diagnostics(result.GetErrorMessage(), file);
    // glslang only warns about a missing entry point (and emits an empty one).
    if (result.GetCompilationStatus() == shaderc_compilation_status_success &&
        br.log.find("Entry point not found") != std::string::npos) {
      br.disposition = Disposition::compile_failed;
      br.log += fmt::format(
          "{}: error: entry point `{}` not found (kernel.toml `entry` names the compute shader "
          "function)\n",
          file, entry);
      return;
    }
    if (result.GetCompilationStatus() != shaderc_compilation_status_success) {
      br.disposition = Disposition::compile_failed;
      if (br.log.empty()) br.log = fmt::format("{}: compilation failed (no diagnostics)\n", file);
      return;
    }
    std::string bytes(reinterpret_cast<const char*>(result.cbegin()),
                      static_cast<size_t>(result.cend() - result.cbegin()) * sizeof(uint32_t));
    if (bytes.empty()) {  // glslang only warns when the entry point is missing
      br.disposition = Disposition::compile_failed;
      br.log += fmt::format(
          "{}: error: entry point `{}` not found (kernel.toml `entry` names the compute shader "
          "function)\n",
          file, entry);
      return;
    }
    if (!reflect_into(bytes, entry, file, br)) {
      br.disposition = Disposition::compile_failed;
      return;
    }
    if (auto st = write_file_atomic(artifact, bytes); !st) {
      br.disposition = Disposition::compile_failed;
      br.log += fmt::format("cannot write {}: {}\n", artifact.string(), st.message());
      return;
    }
    if (!br.log.empty()) (void)write_file_atomic(log_path, br.log);
    br.disposition = Disposition::passed;
  }
};

}  // namespace

std::unique_ptr<Backend> make_hlsl_backend() { return std::make_unique<HlslBackend>(); }

}  // namespace peak
