#include "backend/hip/hip_backend.h"

#include <elf.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <regex>

#include <fmt/format.h>

#include "family/family.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/scoped_dir.h"
#include "util/sha256.h"

namespace peak {
namespace hip {

namespace {

constexpr double kCompileTimeoutS = 120;
constexpr uint16_t kEmAmdgpu = 224;  // EM_AMDGPU

std::string blank_host(const SourceRegions& source) {
  SourceRegions r = source;
  std::string blank;
  for (char c : r.host)
    if (c == '\n') blank.push_back('\n');
  r.host = blank;
  return join_regions(r);
}

// The AMDGPU machine numbers of e_flags (EF_AMDGPU_MACH) for the targets peak names.
std::string amdgpu_target_name(uint32_t flags) {
  switch (flags & 0xffu) {
    case 0x30:
      return "gfx908";
    case 0x36:
      return "gfx1030";
    case 0x3f:
      return "gfx90a";
    case 0x4c:
      return "gfx942";
    default:
      return fmt::format("amdgcn machine 0x{:x}", flags & 0xffu);
  }
}

}  // namespace

NvccDialect nvcc_dialect() {
  NvccDialect d;
  d.name = "hip";
  d.extension = ".hip";
  d.prelude = "#include \"peak_hip_to_cuda.h\"\n";
  std::string shim =
      "#pragma once\n// peak: on NVIDIA, HIP's headers are peak_hip_to_cuda.h\n#include "
      "\"../peak_hip_to_cuda.h\"\n";
  d.include_files = {{"peak_hip_to_cuda.h", std::string(mapping_header())},
                     {"hip/hip_runtime.h", shim},
                     {"hip/hip_runtime_api.h", shim},
                     {"hip/hip_fp16.h", shim}};
  return d;
}

std::vector<std::string> amd_targets() { return {"gfx90a", "gfx1030"}; }

std::string compile_unit(const SourceRegions& source, std::string_view source_name) {
  std::string out;
  out += "// peak: device code only; the host region is a launch plan (docs/launch-plan.md)\n";
  out += "#include <hip/hip_runtime.h>\n#include <hip/hip_fp16.h>\n";
  out += fmt::format("#line 1 \"{}\"\n", source_name);
  out += blank_host(source);
  if (!out.empty() && out.back() != '\n') out += '\n';
  return out;
}

std::vector<std::string> hipcc_flags(std::string_view target) {
  return {"-x",
          "hip",
          "--cuda-device-only",
          "--no-gpu-bundle-output",
          fmt::format("--offload-arch={}", target),
          "-O3",
          "-std=c++17",
          "-fno-gpu-rdc",
          "-ffp-contract=fast",
          "-Rpass-analysis=kernel-resource-usage",
          "-c"};
}

fs::path find_hipcc() {
  return find_tool({"hipcc", "PEAK_HIPCC", {"ROCM_PATH"}, {"/opt/rocm/bin/hipcc"}});
}

std::string hipcc_version_number(std::string_view text) {
  std::string t(text);
  std::smatch m;
  std::string hip = "unknown", clang;
  static const std::regex hre(R"(HIP version: *([0-9][0-9A-Za-z.\-]*))");
  static const std::regex cre(R"(clang version ([0-9]+\.[0-9]+\.[0-9]+))");
  if (std::regex_search(t, m, hre)) hip = m[1].str();
  if (std::regex_search(t, m, cre)) clang = m[1].str();
  return clang.empty() ? "hipcc " + hip : fmt::format("hipcc {} (clang {})", hip, clang);
}

nlohmann::json parse_amd_resources(std::string_view log) {
  // Remark keys as clang prints them -> the names peak records.
  static const std::vector<std::pair<std::string, std::string>> keys = {
      {"SGPRs Spill", "sgpr_spills"},
      {"VGPRs Spill", "vgpr_spills"},
      {"SGPRs", "sgprs"},
      {"VGPRs", "vgprs"},
      {"AGPRs", "agprs"},
      {"ScratchSize [bytes/lane]", "scratch_bytes"},
      {"Occupancy [waves/SIMD]", "occupancy"},
      {"LDS Size [bytes/block]", "lds_bytes"}};
  struct Kernel {
    std::string mangled;
    std::map<std::string, int64_t> values;
  };
  std::vector<Kernel> kernels;
  for (const std::string& raw : split_lines(log)) {
    size_t p = raw.find("remark: ");
    if (p == std::string::npos) continue;
    std::string_view body = std::string_view(raw).substr(p + 8);
    if (size_t tag = body.find(" [-Rpass-analysis="); tag != std::string_view::npos)
      body = body.substr(0, tag);
    std::string text = trim(body);
    if (starts_with(text, "Function Name: ")) {
      kernels.push_back({trim(text.substr(15)), {}});
      continue;
    }
    if (kernels.empty()) continue;
    size_t colon = text.rfind(": ");
    if (colon == std::string::npos) continue;
    std::string key = trim(text.substr(0, colon));
    std::string value = trim(text.substr(colon + 2));
    if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos) continue;
    for (const auto& [k, name] : keys)
      if (key == k) kernels.back().values[name] = std::strtoll(value.c_str(), nullptr, 10);
  }
  nlohmann::json ks = nlohmann::json::object();
  int64_t max_v = 0, max_s = 0, max_a = 0, max_lds = 0, max_scratch = 0, min_occ = -1;
  bool spills = false, any_agprs = false;
  for (const Kernel& k : kernels) {
    std::string name = cuda::short_kernel_name(cuda::demangle(k.mangled));
    if (ks.contains(name)) name = cuda::demangle(k.mangled);
    if (ks.contains(name)) name = k.mangled;
    nlohmann::json j = {{"mangled", k.mangled}};
    for (const auto& [key, v] : k.values) j[key] = v;
    ks[name] = j;
    auto get = [&](const char* f) {
      auto it = k.values.find(f);
      return it == k.values.end() ? int64_t{0} : it->second;
    };
    max_v = std::max(max_v, get("vgprs"));
    max_s = std::max(max_s, get("sgprs"));
    max_a = std::max(max_a, get("agprs"));
    any_agprs = any_agprs || k.values.count("agprs");
    max_lds = std::max(max_lds, get("lds_bytes"));
    max_scratch = std::max(max_scratch, get("scratch_bytes"));
    if (k.values.count("occupancy"))
      min_occ = min_occ < 0 ? get("occupancy") : std::min(min_occ, get("occupancy"));
    spills = spills || get("sgpr_spills") > 0 || get("vgpr_spills") > 0;
  }
  nlohmann::json out = {{"kernels", ks},
                        {"max_vgprs", max_v},
                        {"max_sgprs", max_s},
                        {"max_lds_bytes", max_lds},
                        {"max_scratch_bytes", max_scratch},
                        {"spills", spills}};
  if (any_agprs) out["max_agprs"] = max_a;
  if (min_occ >= 0) out["min_occupancy"] = min_occ;
  out["summary"] = describe_amd_resources(out);
  return out;
}

std::string describe_amd_resources(const nlohmann::json& r) {
  if (!r.is_object() || !r.contains("max_vgprs")) return "";
  std::vector<std::string> parts;
  parts.push_back(fmt::format("{} VGPRs", r.value("max_vgprs", int64_t{0})));
  if (r.contains("max_agprs")) parts.push_back(fmt::format("{} AGPRs", r.value("max_agprs", 0)));
  parts.push_back(fmt::format("{} SGPRs", r.value("max_sgprs", int64_t{0})));
  parts.push_back(fmt::format("{:.1f} KiB LDS",
                              static_cast<double>(r.value("max_lds_bytes", int64_t{0})) / 1024.0));
  int64_t scratch = r.value("max_scratch_bytes", int64_t{0});
  parts.push_back(scratch > 0 ? fmt::format("{} B/lane scratch", scratch) : "no scratch");
  parts.push_back(r.value("spills", false) ? "SPILLS" : "no spills");
  if (r.contains("min_occupancy"))
    parts.push_back(fmt::format("{} waves/SIMD", r.value("min_occupancy", int64_t{0})));
  return join(parts, ", ");
}

Result<CodeObjectInfo> inspect_code_object(const fs::path& path) {
  auto data = read_file(path);
  if (!data) return make_error(data.error());
  const std::string& d = *data;
  auto bad = [&](std::string_view why) {
    return make_error(fmt::format("{}: not a readable AMD code object ({})", path.string(), why));
  };
  if (d.size() < sizeof(Elf64_Ehdr) || std::memcmp(d.data(), ELFMAG, SELFMAG) != 0)
    return bad("no ELF header");
  Elf64_Ehdr eh;
  std::memcpy(&eh, d.data(), sizeof eh);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return bad("not ELF64 little-endian");
  CodeObjectInfo info;
  info.amdgpu = eh.e_machine == kEmAmdgpu;
  info.target = amdgpu_target_name(eh.e_flags);
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff == 0 ||
      eh.e_shoff + uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr) > d.size())
    return bad("section headers out of range");
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  std::memcpy(sh.data(), d.data() + eh.e_shoff, eh.e_shnum * sizeof(Elf64_Shdr));
  for (const Elf64_Shdr& s : sh) {
    if (s.sh_type != SHT_SYMTAB) continue;
    if (s.sh_link >= sh.size()) return bad("symbol string table missing");
    const Elf64_Shdr& str = sh[s.sh_link];
    if (s.sh_offset + s.sh_size > d.size() || str.sh_offset + str.sh_size > d.size())
      return bad("symbol table out of range");
    size_t count = s.sh_size / sizeof(Elf64_Sym);
    for (size_t i = 1; i < count; ++i) {
      Elf64_Sym sym;
      std::memcpy(&sym, d.data() + s.sh_offset + i * sizeof(Elf64_Sym), sizeof sym);
      if (sym.st_name >= str.sh_size) continue;
      const char* p = d.data() + str.sh_offset + sym.st_name;
      std::string name(p, strnlen(p, str.sh_size - sym.st_name));
      if (name.empty()) continue;
      if (sym.st_shndx == SHN_UNDEF) {
        info.undefined.push_back(name);
      } else if (name.size() > 3 && name.compare(name.size() - 3, 3, ".kd") == 0) {
        info.kernels.push_back(name.substr(0, name.size() - 3));  // the kernel descriptor
      }
    }
  }
  auto uniq = [](std::vector<std::string>& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  };
  uniq(info.kernels);
  uniq(info.undefined);
  return info;
}

}  // namespace hip

namespace {

using namespace hip;

// One AMD target's build of a candidate.
struct AmdBuild {
  Disposition disposition = Disposition::compile_failed;
  std::string target, log, command;
  nlohmann::json resources = nlohmann::json::object();
  fs::path artifact;
  bool cached = false;
};

nlohmann::json amd_to_json(const AmdBuild& b) {
  return {{"format", 1},  {"target", b.target},   {"disposition", to_string(b.disposition)},
          {"log", b.log}, {"command", b.command}, {"resources", b.resources}};
}

class HipBackend final : public Backend {
 public:
  HipBackend() : nvidia_(make_cuda_backend(nvcc_dialect())) {}

  std::string name() const override { return "hip"; }
  std::string source_extension() const override { return ".hip"; }

  std::map<std::string, std::string> translation_table() const override {
    return {
        {"thread index within the block", "threadIdx (or hipThreadIdx_x, ...)"},
        {"thread index in the block", "threadIdx (or hipThreadIdx_x, ...)"},
        {"block index", "blockIdx"},
        {"workgroup index", "blockIdx"},
        {"block size", "blockDim"},
        {"threads per block", "blockDim"},
        {"grid size", "gridDim"},
        {"global thread index", "blockIdx * blockDim + threadIdx"},
        {"shared memory", "__shared__ (LDS on AMD: 64 KiB per block)"},
        {"dynamic shared memory",
         "extern __shared__ (or HIP_DYNAMIC_SHARED; size given by `shared` in the plan)"},
        {"barrier", "__syncthreads()"},
        {"warp",
         "wavefront: warpSize lanes (64 on gfx90a, 32 on gfx1030 and NVIDIA); never "
         "hard-code it"},
        {"subgroup", "wavefront (warpSize lanes)"},
        {"lane index", "threadIdx.x % warpSize"},
        {"warp shuffle", "__shfl / __shfl_xor / __shfl_down (no mask argument)"},
        {"kernel", "__global__ function"},
        {"device function", "__device__ function"},
        {"launch", "a `launch KERNEL` statement of the host region's launch plan"},
        {"launch grid", "`grid = (x, y, z)` of the launch statement in the host region"},
        {"block dimensions", "`block = (x, y, z)` of the launch statement in the host region"},
        {"unroll", "#pragma unroll"},
        {"restrict", "__restrict__"},
        {"vector load", "float4 / reinterpret_cast<const float4*>"},
        {"read-only cache load", "__ldg"},
        {"fused multiply-add", "fmaf"},
        {"half precision", "__half (hip/hip_fp16.h)"},
        {"tensor cores",
         "matrix cores: MFMA (__builtin_amdgcn_mfma_*) under `#if defined(__HIP_PLATFORM_AMD__)`, "
         "with a portable path (or wmma / mma.sync under `#if defined(__HIP_PLATFORM_NVIDIA__)`) "
         "for NVIDIA; fp16 inputs only, never TF32 in an fp32 kernel"},
        {"asynchronous copy", "not portable in HIP: plain loads into __shared__"},
        {"invalid configuration", "a `require EXPR` line in the host region's launch plan"},
        {"tensor memory accelerator", "not available in HIP"},
    };
  }

  fs::path runner() const override { return nvidia_->runner(); }

  std::vector<std::pair<std::string, std::string>> toolchain() const override {
    std::vector<std::pair<std::string, std::string>> out;
    fs::path hipcc = find_hipcc();
    if (hipcc.empty()) {
      out.emplace_back("hipcc", "not found (AMD builds need it: scripts/setup-debian.sh)");
    } else {
      auto v = tool_version_output(hipcc, "HIP version");
      out.emplace_back("hipcc", v ? hipcc_version_number(*v).substr(6) : "unknown: " + v.error());
      out.emplace_back("hipcc_path", hipcc.string());
    }
    out.emplace_back("amd_targets", join(amd_targets(), ", "));
    out.emplace_back("run_platform",
                     "NVIDIA (nvcc through peak_hip_to_cuda.h, run by peak-runner-cuda); "
                     "no AMD device is run");
    for (auto& kv : nvidia_->toolchain()) out.push_back(kv);
    return out;
  }

  Result<DeviceFacts> probe(const std::string& selector, bool microbench) override {
    auto facts = nvidia_->probe(selector, microbench);
    if (!facts) return facts;
    facts->backend = "hip";
    facts->extra["platform"] = "NVIDIA via peak_hip_to_cuda.h";
    facts->extra["amd_targets"] = join(amd_targets(), ", ");
    return facts;
  }

  std::vector<std::pair<std::string, std::string>> prompt_facts(
      const DeviceFacts& device) const override {
    auto f = nvidia_->prompt_facts(device);
    f.push_back({"platforms",
                 fmt::format("runs and is timed on this NVIDIA GPU through a HIP-to-CUDA mapping "
                             "header; every build is also compiled for AMD {} and must compile "
                             "there",
                             join(amd_targets(), " and "))});
    return f;
  }

  PlanDialect plan_dialect() const override {
    PlanDialect d;
    d.backend = "hip";
    d.cluster = false;
    d.tensor_maps = false;
    return d;
  }

  BuildResult build(const BuildRequest& req) override {
    auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    BuildResult r;
    r.disposition = Disposition::compile_failed;
    if (req.context == nullptr) {
      r.log = "internal error: a HIP build needs the kernel context\n";
      return r;
    }
    const KernelContext& ctx = *req.context;
    std::string source_name = ctx.source_file.empty() ? "kernel.hip" : ctx.source_file;
    auto regions = split_regions(req.source, source_name);
    if (!regions) {
      r.log = regions.error() + "\n";
      return r;
    }
    auto plan = parse_plan(*regions, source_name);
    if (!plan) {
      r.log = plan.error() + "\n";
      return r;
    }
    fs::path hipcc = find_hipcc();
    fs::path nvcc = cuda::find_nvcc();
    if (hipcc.empty() && nvcc.empty()) {
      r.log =
          "neither hipcc nor nvcc was found: install hipcc (Debian 12: `apt-get install hipcc`, "
          "as scripts/setup-debian.sh does) for the AMD builds, and the CUDA toolkit to run HIP "
          "kernels on an NVIDIA GPU; PEAK_HIPCC and PEAK_NVCC name other paths\n";
      r.seconds = elapsed();
      return r;
    }

    std::vector<std::string> toolchains, commands;
    std::string log;
    bool all_cached = true;
    nlohmann::json targets = nlohmann::json::object();
    Disposition first_failure = Disposition::passed;
    std::vector<AmdBuild> amd;
    if (!hipcc.empty()) {
      auto version = tool_version_output(hipcc, "HIP version");
      if (!version) {
        r.log = version.error() + "\n";
        return r;
      }
      toolchains.push_back(hipcc_version_number(*version));
      std::string unit = compile_unit(*regions, source_name);
      for (const std::string& target : amd_targets()) {
        AmdBuild b = build_amd(hipcc, *version, unit, req, target, *plan, source_name);
        all_cached = all_cached && b.cached;
        commands.push_back(b.command);
        if (!b.log.empty()) log += fmt::format("== hipcc, AMD {} ==\n{}", target, b.log);
        targets[target] = b.resources;
        bool failed = b.disposition != Disposition::passed;
        if (failed && first_failure == Disposition::passed) first_failure = b.disposition;
        amd.push_back(std::move(b));
        if (failed) break;  // the source does not build for AMD; the other targets add nothing
      }
    } else {
      log += "hipcc was not found: no AMD build (install hipcc: scripts/setup-debian.sh)\n";
    }

    BuildResult nv;
    bool have_nv = !nvcc.empty() && first_failure == Disposition::passed;
    if (have_nv) {
      nv = nvidia_->build(req);
      all_cached = all_cached && nv.cached;
      toolchains.insert(toolchains.begin(), nv.toolchain);
      commands.insert(commands.begin(), nv.command);
      std::string nvlog = trim(nv.log);
      if (!nvlog.empty())
        log = fmt::format("== nvcc, NVIDIA through peak_hip_to_cuda.h ==\n{}\n", nvlog) + log;
      if (nv.disposition != Disposition::passed) first_failure = nv.disposition;
    } else if (nvcc.empty()) {
      log += "nvcc was not found: the HIP source was built for AMD only and cannot run here\n";
    }

    r.toolchain = join(toolchains, " + ");
    r.command = join(commands, "\n");
    r.log = log;
    r.cached = all_cached;
    r.disposition = first_failure;
    if (have_nv && nv.disposition == Disposition::passed) {
      r.artifact = nv.artifact;
      r.resources = nv.resources;
    } else if (!amd.empty() && amd.front().disposition == Disposition::passed) {
      // AMD only: the plan's kernels are resolved against the first target's code object.
      r.artifact = amd.front().artifact;
      r.resources = nlohmann::json::object();
      r.resources["kernels"] = amd.front().resources.value("kernels", nlohmann::json::object());
    }
    if (!r.resources.is_object()) r.resources = nlohmann::json::object();
    r.resources["platform"] = have_nv ? "nvidia" : "amd-only";
    if (!targets.empty()) r.resources["targets"] = targets;
    r.seconds = elapsed();
    return r;
  }

  PlanResult check_resources(const BuildResult& build, const DeviceFacts& device) override {
    if (is_cubin_build(build)) return cuda::check_build_resources(build, device);
    return {};
  }

 protected:
  PlanResult resolve_plan(LaunchPlan& plan, const BuildResult& build,
                          const DeviceFacts& device) override {
    if (is_cubin_build(build)) return cuda::resolve_plan_for_build(plan, build, device);
    PlanResult pr;
    pr.disposition = Disposition::launch_failed;
    pr.message =
        "this HIP build holds AMD code objects only (nvcc was not found): it can be compiled "
        "and inspected here, not run; install the CUDA toolkit to run HIP kernels on NVIDIA";
    return pr;
  }

 public:
  // HIP runs on NVIDIA through the CUDA runner, which times the CUDA library of the family's
  // HIP baseline (hipBLAS maps to cuBLAS); a family with no HIP baseline (the row kernels: no
  // MIOpen path here) gets none, even where the CUDA runner could time cuDNN.
  std::string baseline(const KernelContext& ctx, const DeviceFacts& device) const override {
    if (family_of(ctx).baseline(ctx, "hip").empty()) return "";
    return nvidia_->baseline(ctx, device);
  }

 private:
  static bool is_cubin_build(const BuildResult& build) {
    return build.resources.is_object() && build.resources.value("platform", "") == "nvidia";
  }

  AmdBuild build_amd(const fs::path& hipcc, const std::string& version, const std::string& unit,
                     const BuildRequest& req, const std::string& target, const ParsedPlan& plan,
                     const std::string& source_name) {
    AmdBuild b;
    b.target = target;
    std::vector<std::string> flags = hipcc_flags(target);
    std::vector<std::string> defines;
    for (const auto& [k, v] : req.defines) defines.push_back(fmt::format("-D{}={}", k, v));
    std::string key = sha256_hex(unit + '\0' + join(defines, " ") + '\0' + join(flags, " ") + '\0' +
                                 version + '\0' + join(plan.kernels(), ","));
    fs::path dir =
        req.cache_dir.empty() ? fs::temp_directory_path() / "peak-hip-cache" : req.cache_dir;
    std::error_code ec;
    fs::create_directories(dir, ec);
    fs::path co = dir / (key + "." + target + ".co");
    fs::path meta = dir / (key + "." + target + ".json");
    fs::path src = dir / (key + ".hip");
    if (fs::exists(meta, ec)) {
      if (auto text = read_file(meta)) {
        try {
          auto j = nlohmann::json::parse(*text);
          auto d = disposition_from_string(j.at("disposition").get<std::string>());
          if (d && (*d != Disposition::passed || fs::exists(co, ec))) {
            b.disposition = *d;
            b.log = j.value("log", "");
            b.command = j.value("command", "");
            b.resources = j.value("resources", nlohmann::json::object());
            if (*d == Disposition::passed) b.artifact = co;
            b.cached = true;
            return b;
          }
        } catch (const nlohmann::json::exception&) {
        }
      }
    }
    if (auto st = write_file_atomic(src, unit); !st) {
      b.log = st.message() + "\n";
      return b;
    }
    // hipcc's scratch: a folder of its own; of the cache it reads the compile unit only.
    auto work = make_temp_dir(key.substr(0, 16) + ".hipcc-", dir);
    if (!work) {
      b.log = work.error() + "\n";
      return b;
    }
    RemoveOnExit cleanup{*work};
    fs::path tmp = *work / (key + "." + target + ".co");
    ProcessOptions po;
    po.argv.push_back(hipcc.string());
    po.argv.insert(po.argv.end(), flags.begin(), flags.end());
    po.argv.insert(po.argv.end(), defines.begin(), defines.end());
    po.argv.push_back("-o");
    po.argv.push_back(tmp.string());
    po.argv.push_back(src.string());
    po.timeout_s = kCompileTimeoutS;
    po.cwd = *work;
    // Pinned flags: hipcc's environment additions are not honoured.
    po.env = {{"HIPCC_COMPILE_FLAGS_APPEND", ""},
              {"HIPCC_LINK_FLAGS_APPEND", ""},
              {"HIPCC_VERBOSE", "0"}};
    po.sandbox = SandboxPolicy::compiler({*work}, {hipcc}, {src});
    std::vector<std::string> quoted;
    for (const auto& a : po.argv) quoted.push_back(shell_quote(a));
    b.command = join(quoted, " ");
    auto proc = run_process(po);
    if (!proc) {
      b.log = fmt::format("cannot run hipcc: {}\n", proc.error());
      return b;
    }
    std::string all = proc->out + proc->err;
    b.resources = parse_amd_resources(all);
    b.log = diagnostics_only(all);
    if (proc->timed_out) {
      b.log += fmt::format("hipcc did not finish within {:.0f} s; the build was stopped\n",
                           kCompileTimeoutS);
      return b;  // not cached
    }
    if (!proc->ok()) {
      b.log += fmt::format("hipcc failed for {} ({})\n", target, proc->describe());
      (void)write_file_atomic(meta, amd_to_json(b).dump(2));
      return b;
    }
    fs::rename(tmp, co, ec);
    if (ec) {
      b.log += fmt::format("cannot move the code object into the cache: {}\n", ec.message());
      return b;
    }
    check_code_object(co, plan, source_name, b);
    (void)write_file_atomic(meta, amd_to_json(b).dump(2));
    return b;
  }

  // The compiler's output without the resource remarks (kept as data in `resources`).
  static std::string diagnostics_only(const std::string& out) {
    std::string kept;
    bool in_remark = false;
    for (const std::string& line : split_lines(out)) {
      if (line.find("-Rpass-analysis=kernel-resource-usage") != std::string::npos) {
        in_remark = true;
        continue;
      }
      // A remark's source line and caret follow it; anything that starts like a diagnostic ends it.
      if (in_remark && line.find(": ") == std::string::npos) continue;
      in_remark = false;
      if (trim(line).empty()) continue;
      kept += line + "\n";
    }
    return kept;
  }

  static void check_code_object(const fs::path& co, const ParsedPlan& plan,
                                const std::string& source_name, AmdBuild& b) {
    auto info = inspect_code_object(co);
    if (!info) {
      b.disposition = Disposition::compile_failed;
      b.log += info.error() + "\n";
      return;
    }
    if (!info->amdgpu) {
      b.disposition = Disposition::compile_failed;
      b.log += fmt::format("{}: hipcc did not produce an AMD GPU code object\n", co.string());
      return;
    }
    std::map<std::string, std::string> by_short;
    for (const auto& m : info->kernels) by_short[cuda::short_kernel_name(cuda::demangle(m))] = m;
    std::vector<std::string> names;
    for (const auto& [n, m] : by_short) names.push_back(n);
    for (const std::string& k : plan.kernels()) {
      if (!by_short.count(k)) {
        b.disposition = Disposition::compile_failed;
        b.log += fmt::format(
            "{}: the launch plan launches `{}`, but the {} code object holds no __global__ "
            "kernel of that name (kernels: {}); plans launch kernels by plain names, so give a "
            "template kernel a non-template __global__ wrapper\n",
            source_name, k, b.target, names.empty() ? "none" : join(names, ", "));
        return;
      }
    }
    b.artifact = co;
    b.disposition = Disposition::passed;
  }

  std::unique_ptr<Backend> nvidia_;
};

}  // namespace

std::unique_ptr<Backend> make_hip_backend() { return std::make_unique<HipBackend>(); }

}  // namespace peak
