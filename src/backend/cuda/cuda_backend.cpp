#include "backend/cuda/cuda_backend.h"

#include <cxxabi.h>
#include <elf.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "util/fs.h"
#include "util/process.h"
#include "util/sha256.h"

namespace peak {
namespace cuda {

namespace {

constexpr double kCompileTimeoutS = 120;
constexpr const char* kTrampolineName = "peak_entry.generated.cu";

std::string ctype_of(DType t) {
  switch (t) {
    case DType::f32:
      return "float";
    case DType::f16:
      return "__half";
    case DType::i32:
      return "int";
  }
  return "float";
}

// Unique names for temporary files written by concurrent builds in one process.
std::string unique_suffix() {
  static std::atomic<uint64_t> counter{0};
  return fmt::format("{}.{}", ::getpid(), counter.fetch_add(1));
}

Status write_unique_then_rename(const fs::path& path, std::string_view content) {
  fs::path tmp = path;
  tmp += ".tmp." + unique_suffix();
  if (Status st = write_file(tmp, content); !st) return st;
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return Status::error(fmt::format("cannot write {}: {}", path.string(), ec.message()));
  }
  return Status::ok();
}

// Number written just before `suffix` in `line` ("32 registers" -> 32), or -1.
int64_t number_before(std::string_view line, std::string_view suffix) {
  size_t pos = line.find(suffix);
  if (pos == std::string_view::npos) return -1;
  size_t end = pos;
  while (end > 0 && line[end - 1] == ' ') --end;
  size_t begin = end;
  while (begin > 0 && line[begin - 1] >= '0' && line[begin - 1] <= '9') --begin;
  if (begin == end) return -1;
  return std::strtoll(std::string(line.substr(begin, end - begin)).c_str(), nullptr, 10);
}

int64_t number_after(std::string_view line, std::string_view prefix) {
  size_t pos = line.find(prefix);
  if (pos == std::string_view::npos) return -1;
  size_t begin = pos + prefix.size();
  while (begin < line.size() && line[begin] == ' ') ++begin;
  size_t end = begin;
  while (end < line.size() && line[end] >= '0' && line[end] <= '9') ++end;
  if (begin == end) return -1;
  return std::strtoll(std::string(line.substr(begin, end - begin)).c_str(), nullptr, 10);
}

std::string demangle(const std::string& mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (status != 0 || d == nullptr) return mangled;
  std::string out = d;
  std::free(d);
  return out;
}

// "void gemm<128, 8>(float const*, int)" -> "gemm<128, 8>"; "mm(float*)" -> "mm".
std::string short_kernel_name(const std::string& demangled) {
  std::string s = demangled;
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (size_t i = s.size(); i-- > 0;) {
      if (s[i] == ')') ++depth;
      if (s[i] == '(' && --depth == 0) {
        s.resize(i);
        break;
      }
    }
  }
  int depth = 0;
  size_t cut = std::string::npos;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<' || s[i] == '(') ++depth;
    if (s[i] == '>' || s[i] == ')') --depth;
    if (s[i] == ' ' && depth == 0) cut = i;
  }
  if (cut != std::string::npos) s = s.substr(cut + 1);
  return s.empty() ? demangled : s;
}

std::string strip_version(std::string_view name) {
  size_t at = name.find('@');
  return std::string(at == std::string_view::npos ? name : name.substr(0, at));
}

struct Rule {
  std::string_view prefix;
  bool exact;
  std::string_view reason;
};

constexpr Rule kForbidden[] = {
    {"cublas", false, "cuBLAS: candidates may not call vendor libraries"},
    {"cudnn", false, "cuDNN: candidates may not call vendor libraries"},
    {"cusparse", false, "cuSPARSE: candidates may not call vendor libraries"},
    {"cusolver", false, "cuSOLVER: candidates may not call vendor libraries"},
    {"cufft", false, "cuFFT: candidates may not call vendor libraries"},
    {"cudaStreamCreate", false, "creates a stream: launch on the stream peak_host receives"},
    {"cuStreamCreate", false, "creates a stream: launch on the stream peak_host receives"},
    {"cudaStreamSetAttribute", false, "sets stream attributes (persisting-L2 access windows)"},
    {"cuStreamSetAttribute", false, "sets stream attributes (persisting-L2 access windows)"},
    {"cudaCtxResetPersistingL2Cache", false, "manipulates the persisting L2 cache"},
    {"cuCtxResetPersistingL2Cache", false, "manipulates the persisting L2 cache"},
    {"cudaDeviceSetLimit", false, "changes device limits (persisting L2 size, stack, heap)"},
    {"cuCtxSetLimit", false, "changes device limits (persisting L2 size, stack, heap)"},
    {"cudaDeviceSetCacheConfig", false, "changes the device-wide cache configuration"},
    {"cudaDeviceReset", false, "resets the device under the runner"},
    {"cudaGraph", false, "CUDA graphs: work must be launched directly on the given stream"},
    {"cuGraph", false, "CUDA graphs: work must be launched directly on the given stream"},
    {"cudaStreamBeginCapture", false, "stream capture (CUDA graphs)"},
    {"cuStreamBeginCapture", false, "stream capture (CUDA graphs)"},
    {"cudaGetDriverEntryPoint", false,
     "looks up driver functions at run time: call driver functions directly"},
    {"cuGetProcAddress", false, "looks up driver functions at run time: call them directly"},
    {"pthread_create", true, "creates a thread"},
    {"thrd_create", true, "creates a thread"},
    {"clone", true, "creates a thread or process"},
    {"clone3", true, "creates a thread or process"},
    {"fork", true, "creates a process"},
    {"vfork", true, "creates a process"},
    {"posix_spawn", false, "creates a process"},
    {"system", true, "runs a shell command"},
    {"popen", true, "runs a shell command"},
    {"execv", false, "runs a program"},
    {"execl", false, "runs a program"},
    {"syscall", true, "raw system calls"},
    {"dlopen", true, "loads libraries at run time"},
    {"dlmopen", true, "loads libraries at run time"},
    {"dlsym", true, "looks up symbols at run time"},
    {"dlvsym", true, "looks up symbols at run time"},
    {"__libc_dlopen_mode", true, "loads libraries at run time"},
    {"__libc_dlsym", true, "looks up symbols at run time"},
};

}  // namespace

std::string array_param_type(const ArraySpec& a) {
  return (a.output ? "" : "const ") + ctype_of(a.dtype) + "*";
}

std::string scalar_param_type(const ScalarSpec& s) {
  return s.dtype == DType::i32 ? "int" : "float";
}

std::string host_signature(const KernelContext& ctx) {
  std::vector<std::string> params;
  for (const auto& a : ctx.arrays) params.push_back(array_param_type(a) + " " + a.name);
  for (const auto& s : ctx.scalars) params.push_back(scalar_param_type(s) + " " + s.name);
  params.push_back("cudaStream_t stream");
  return fmt::format("int {}({})", ctx.entry, join(params, ", "));
}

std::string trampoline(const KernelContext& ctx) {
  std::vector<std::string> args;
  for (size_t i = 0; i < ctx.arrays.size(); ++i)
    args.push_back(
        fmt::format("static_cast<{}>(peak_arrays[{}])", array_param_type(ctx.arrays[i]), i));
  for (size_t i = 0; i < ctx.scalars.size(); ++i)
    args.push_back(
        fmt::format("static_cast<{}>(peak_scalars[{}])", scalar_param_type(ctx.scalars[i]), i));
  args.push_back("peak_stream");
  std::string out;
  out += fmt::format("#line 1 \"{}\"\n", kTrampolineName);
  out += "#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n";
  out += fmt::format("// Expected host function: {};\n", host_signature(ctx));
  out += fmt::format(
      "extern \"C\" __attribute__((visibility(\"default\"))) int {}(void* const* peak_arrays, "
      "const long long* peak_scalars, cudaStream_t peak_stream) {{\n",
      kEntrySymbol);
  out += fmt::format("  (void)peak_arrays;\n  (void)peak_scalars;\n  return {}(", ctx.entry);
  for (size_t i = 0; i < args.size(); ++i) {
    out += (i ? ",\n      " : "") + args[i];
  }
  out += ");\n}\n";
  return out;
}

std::string compile_unit(const KernelContext& ctx, std::string_view source,
                         std::string_view source_name) {
  std::string out;
  out += "#define PEAK_INVALID_CONFIG (-1)\n";
  out += "#define PEAK_OK 0\n";
  out += fmt::format("#line 1 \"{}\"\n", source_name);
  out += source;
  if (!source.empty() && source.back() != '\n') out += '\n';
  out += trampoline(ctx);
  return out;
}

std::string gencode_flag(std::string_view arch) {
  std::string a(arch);
  static const std::regex re("^sm_([0-9]{2,3}[a-z]?)$");
  std::smatch m;
  std::string num = "90a";
  if (std::regex_match(a, m, re)) num = m[1].str();
  return fmt::format("-gencode=arch=compute_{0},code=sm_{0}", num);
}

std::vector<std::string> pinned_flags(std::string_view arch) {
  return {"-O3",
          "-std=c++17",
          "-shared",
          "-Xcompiler",
          "-fPIC",
          "-cudart",
          "shared",
          "-lineinfo",
          "-Xptxas",
          "-v",
          gencode_flag(arch),
          "-ftz=false",
          "-prec-div=true",
          "-prec-sqrt=true"};
}

fs::path find_nvcc() {
  auto usable = [](const fs::path& p) {
    std::error_code ec;
    return !p.empty() && fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  if (const char* e = std::getenv("PEAK_NVCC"); e && *e)
    return usable(e) ? fs::path(e) : fs::path();
  if (const char* h = std::getenv("CUDA_HOME"); h && *h) {
    fs::path p = fs::path(h) / "bin" / "nvcc";
    if (usable(p)) return p;
  }
  if (usable("/usr/local/cuda/bin/nvcc")) return "/usr/local/cuda/bin/nvcc";
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    std::string dir;
    while (std::getline(ss, dir, ':')) {
      if (dir.empty()) continue;
      fs::path p = fs::path(dir) / "nvcc";
      if (usable(p)) return p;
    }
  }
  return {};
}

nlohmann::json parse_ptxas_resources(std::string_view log) {
  struct Props {
    int64_t stack = 0, spill_stores = 0, spill_loads = 0;
  };
  struct Kernel {
    std::string mangled, arch;
    int64_t registers = 0, shared = 0, barriers = 0, cumulative_stack = -1;
  };
  std::vector<Kernel> kernels;
  std::map<std::string, Props> props;
  std::string props_target;
  int current = -1;
  for (const std::string& raw : split_lines(log)) {
    std::string_view line = raw;
    if (size_t p = line.find("Compiling entry function '"); p != std::string_view::npos) {
      size_t b = p + std::strlen("Compiling entry function '");
      size_t e = line.find('\'', b);
      if (e == std::string_view::npos) continue;
      Kernel k;
      k.mangled = std::string(line.substr(b, e - b));
      if (size_t f = line.find("for '", e); f != std::string_view::npos) {
        size_t fe = line.find('\'', f + 5);
        if (fe != std::string_view::npos) k.arch = std::string(line.substr(f + 5, fe - f - 5));
      }
      kernels.push_back(k);
      current = static_cast<int>(kernels.size()) - 1;
      continue;
    }
    if (size_t p = line.find("Function properties for "); p != std::string_view::npos) {
      props_target = trim(line.substr(p + std::strlen("Function properties for ")));
      continue;
    }
    if (line.find("bytes stack frame") != std::string_view::npos && !props_target.empty()) {
      Props& pr = props[props_target];
      pr.stack = std::max<int64_t>(0, number_before(line, "bytes stack frame"));
      pr.spill_stores = std::max<int64_t>(0, number_before(line, "bytes spill stores"));
      pr.spill_loads = std::max<int64_t>(0, number_before(line, "bytes spill loads"));
      props_target.clear();
      continue;
    }
    if (line.find("ptxas info") != std::string_view::npos &&
        line.find("Used ") != std::string_view::npos && current >= 0) {
      Kernel& k = kernels[static_cast<size_t>(current)];
      k.registers = std::max<int64_t>(0, number_after(line, "Used "));
      k.shared = std::max<int64_t>(0, number_before(line, "bytes smem"));
      k.barriers = std::max<int64_t>(0, number_after(line, "used "));
      k.cumulative_stack = number_before(line, "bytes cumulative stack size");
    }
  }
  nlohmann::json out = nlohmann::json::object();
  nlohmann::json ks = nlohmann::json::object();
  int64_t max_regs = 0, max_smem = 0;
  bool spills = false;
  for (const Kernel& k : kernels) {
    std::string name = short_kernel_name(demangle(k.mangled));
    if (ks.contains(name)) name = demangle(k.mangled);
    if (ks.contains(name)) name = k.mangled;
    Props pr = props.count(k.mangled) ? props[k.mangled] : Props{};
    nlohmann::json j = {{"mangled", k.mangled},          {"registers", k.registers},
                        {"shared_bytes", k.shared},      {"spill_stores", pr.spill_stores},
                        {"spill_loads", pr.spill_loads}, {"stack_frame", pr.stack},
                        {"barriers", k.barriers}};
    if (!k.arch.empty()) j["arch"] = k.arch;
    ks[name] = j;
    max_regs = std::max(max_regs, k.registers);
    max_smem = std::max(max_smem, k.shared);
    spills = spills || pr.spill_stores > 0 || pr.spill_loads > 0;
  }
  out["kernels"] = ks;
  out["max_registers"] = max_regs;
  out["max_shared_bytes"] = max_smem;
  out["spills"] = spills;
  return out;
}

std::string normalize_diagnostics(std::string_view log) {
  static const std::regex re(R"(^([^\s()][^()]*)\((\d+)\): )");
  std::string out;
  for (const std::string& line : split_lines(log)) {
    out += std::regex_replace(line, re, "$1:$2: ", std::regex_constants::format_first_only);
    out += '\n';
  }
  return out;
}

std::optional<std::string> forbidden_include(std::string_view source,
                                             std::string_view source_name) {
  static const std::regex re(
      R"(^\s*#\s*include\s*[<"]\s*([A-Za-z_/]*?(cublas|cudnn)[A-Za-z0-9_./]*)\s*[>"])");
  int lineno = 0;
  for (const std::string& line : split_lines(source)) {
    ++lineno;
    std::smatch m;
    if (std::regex_search(line, m, re)) {
      std::string lib = m[2].str() == "cudnn" ? "cuDNN" : "cuBLAS";
      return fmt::format(
          "{}:{}: includes {} ({}): candidates may not use vendor libraries; the baseline is "
          "timed separately",
          source_name, lineno, m[1].str(), lib);
    }
  }
  return std::nullopt;
}

Result<std::vector<ElfSymbol>> dynamic_symbols(const fs::path& so) {
  auto data = read_file(so);
  if (!data) return make_error(data.error());
  const std::string& d = *data;
  auto bad = [&](std::string_view why) {
    return make_error(
        fmt::format("{}: not a readable 64-bit ELF shared object ({})", so.string(), why));
  };
  if (d.size() < sizeof(Elf64_Ehdr) || std::memcmp(d.data(), ELFMAG, SELFMAG) != 0)
    return bad("no ELF header");
  Elf64_Ehdr eh;
  std::memcpy(&eh, d.data(), sizeof eh);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return bad("not ELF64 little-endian");
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff == 0 ||
      eh.e_shoff + uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr) > d.size())
    return bad("section headers out of range");
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  std::memcpy(sh.data(), d.data() + eh.e_shoff, eh.e_shnum * sizeof(Elf64_Shdr));
  std::vector<ElfSymbol> out;
  bool found = false;
  for (const Elf64_Shdr& s : sh) {
    if (s.sh_type != SHT_DYNSYM) continue;
    found = true;
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
      size_t maxlen = str.sh_size - sym.st_name;
      std::string name(p, strnlen(p, maxlen));
      if (name.empty()) continue;
      out.push_back({name, sym.st_shndx != SHN_UNDEF});
    }
  }
  if (!found) return bad("no dynamic symbol table");
  return out;
}

std::optional<std::string> forbidden_symbol_reason(std::string_view raw_name, bool defined) {
  std::string name = strip_version(raw_name);
  if (starts_with(name, "_Z")) {
    // C++ symbols: std::thread (and std::jthread / std::async, built on it).
    if (name.find("St6thread") != std::string::npos ||
        demangle(name).find("std::thread") != std::string::npos)
      return std::string("std::thread: creates a thread");
    return std::nullopt;
  }
  for (const Rule& r : kForbidden) {
    bool hit = r.exact ? name == r.prefix : starts_with(name, r.prefix);
    if (hit) return std::string(r.reason);
  }
  if (defined) {
    // Defining a CUDA/NVML API name would interpose the runner's own calls (timers, streams).
    auto cu_api = [&](std::string_view p) {
      return starts_with(name, p) && name.size() > p.size() && name[p.size()] >= 'A' &&
             name[p.size()] <= 'Z';
    };
    if (cu_api("cuda") || cu_api("cu") || cu_api("nvml") || starts_with(name, "pthread_"))
      return std::string("defines a CUDA/system API function (interposition)");
  }
  return std::nullopt;
}

Result<std::vector<std::string>> forbidden_symbols(const fs::path& so) {
  auto syms = dynamic_symbols(so);
  if (!syms) return make_error(syms.error());
  std::vector<std::string> out;
  for (const ElfSymbol& s : *syms) {
    if (auto why = forbidden_symbol_reason(s.name, s.defined))
      out.push_back(fmt::format("{}{} ({})", s.name, s.defined ? " [defined]" : "", *why));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace cuda

namespace {

using namespace cuda;

// `nvcc --version` text, once per nvcc path.
Result<std::string> nvcc_version_text(const fs::path& nvcc) {
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(nvcc.string()); it != cache.end()) return it->second;
  ProcessOptions po;
  po.argv = {nvcc.string(), "--version"};
  po.timeout_s = 30;
  auto r = run_process(po);
  if (!r) return make_error(fmt::format("cannot run {}: {}", nvcc.string(), r.error()));
  if (!r->ok())
    return make_error(
        fmt::format("{} --version failed ({}): {}", nvcc.string(), r->describe(), trim(r->err)));
  cache[nvcc.string()] = r->out;
  return r->out;
}

// "Cuda compilation tools, release 13.0, V13.0.88" -> "13.0.88".
std::string nvcc_version_number(const std::string& text) {
  static const std::regex re(R"(V(\d+\.\d+\.\d+))");
  std::smatch m;
  if (std::regex_search(text, m, re)) return m[1].str();
  static const std::regex rel(R"(release (\d+\.\d+))");
  if (std::regex_search(text, m, rel)) return m[1].str();
  return "unknown";
}

nlohmann::json to_meta(const BuildResult& r) {
  return {{"format", 1},
          {"disposition", std::string(to_string(r.disposition))},
          {"log", r.log},
          {"command", r.command},
          {"toolchain", r.toolchain},
          {"resources", r.resources},
          {"seconds", r.seconds}};
}

std::optional<BuildResult> from_meta(const fs::path& meta, const fs::path& so) {
  auto text = read_file(meta);
  if (!text) return std::nullopt;
  try {
    auto j = nlohmann::json::parse(*text);
    auto d = disposition_from_string(j.at("disposition").get<std::string>());
    if (!d) return std::nullopt;
    BuildResult r;
    r.disposition = *d;
    r.log = j.value("log", "");
    r.command = j.value("command", "");
    r.toolchain = j.value("toolchain", "");
    r.resources = j.value("resources", nlohmann::json::object());
    if (*d == Disposition::passed || *d == Disposition::forbidden_api) {
      std::error_code ec;
      if (!fs::exists(so, ec)) return std::nullopt;
      r.artifact = so;
    }
    return r;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

class CudaBackend final : public Backend {
 public:
  std::string name() const override { return "cuda"; }
  std::string source_extension() const override { return ".cu"; }

  std::map<std::string, std::string> translation_table() const override {
    return {
        {"thread index within the block", "threadIdx"},
        {"thread index in the block", "threadIdx"},
        {"block index", "blockIdx"},
        {"workgroup index", "blockIdx"},
        {"block size", "blockDim"},
        {"threads per block", "blockDim"},
        {"grid size", "gridDim"},
        {"global thread index", "blockIdx * blockDim + threadIdx"},
        {"shared memory", "__shared__"},
        {"dynamic shared memory", "extern __shared__ (size given at launch)"},
        {"barrier", "__syncthreads()"},
        {"warp", "warp (32 threads)"},
        {"subgroup", "warp (32 threads)"},
        {"lane index", "threadIdx.x % 32"},
        {"warp shuffle", "__shfl_sync"},
        {"kernel", "__global__ function"},
        {"device function", "__device__ function"},
        {"launch", "kernel<<<grid, block, shared_bytes, stream>>>(...)"},
        {"unroll", "#pragma unroll"},
        {"restrict", "__restrict__"},
        {"vector load", "float4 / reinterpret_cast<const float4*>"},
        {"read-only cache load", "__ldg"},
        {"fused multiply-add", "fmaf"},
        {"half precision", "__half (cuda_fp16.h)"},
        {"tensor cores", "wmma / mma.sync (fp16 inputs only; never TF32 in an fp32 kernel)"},
        {"asynchronous copy", "cp.async / cuda::memcpy_async"},
        {"invalid configuration", "return PEAK_INVALID_CONFIG from the host function"},
    };
  }

  fs::path runner() const override { return find_runner("peak-runner-cuda"); }

  std::vector<std::pair<std::string, std::string>> toolchain() const override {
    std::vector<std::pair<std::string, std::string>> out;
    fs::path nvcc = find_nvcc();
    if (nvcc.empty()) {
      out.emplace_back("nvcc", "not found");
    } else {
      auto v = nvcc_version_text(nvcc);
      out.emplace_back("nvcc", v ? nvcc_version_number(*v) : "unknown");
      out.emplace_back("nvcc_path", nvcc.string());
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (facts_) {
      out.emplace_back("cuda_runtime", facts_->api_version);
      auto cd = facts_->extra.find("cuda_driver");
      out.emplace_back("cuda_driver", cd != facts_->extra.end() ? cd->second : facts_->driver);
      out.emplace_back("driver", facts_->driver);
      out.emplace_back("device", facts_->name);
      out.emplace_back("arch", facts_->arch);
    }
    return out;
  }

  Result<DeviceFacts> probe(const std::string& selector, bool microbench) override {
    RunnerJob job;
    job.mode = "probe";
    job.device = selector;
    job.microbench = microbench;
    RunnerOptions opts;
    opts.executable = runner();
    std::error_code ec;
    if (opts.executable.empty() || !fs::exists(opts.executable, ec))
      return make_error(runner_missing_message("peak-runner-cuda"));
    auto facts = probe_device(job, opts);
    if (!facts) return make_error(facts.error());
    facts->backend = "cuda";
    std::lock_guard<std::mutex> lock(mu_);
    facts_ = *facts;
    return *facts;
  }

  BuildResult build(const BuildRequest& req) override {
    auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    BuildResult r;
    r.disposition = Disposition::compile_failed;
    if (req.context == nullptr) {
      r.log = "internal error: a CUDA build needs the kernel context (input spec)";
      return r;
    }
    const KernelContext& ctx = *req.context;
    std::string source_name = ctx.source_file.empty() ? "kernel.cu" : ctx.source_file;
    if (auto msg = forbidden_include(req.source, source_name)) {
      r.disposition = Disposition::forbidden_api;
      r.log = *msg + "\n";
      r.seconds = elapsed();
      return r;
    }
    fs::path nvcc = find_nvcc();
    if (nvcc.empty()) {
      r.log =
          "nvcc was not found: set PEAK_NVCC to its path or CUDA_HOME to the toolkit folder, or "
          "install the CUDA toolkit in /usr/local/cuda\n";
      return r;
    }
    auto version = nvcc_version_text(nvcc);
    if (!version) {
      r.log = version.error() + "\n";
      return r;
    }
    r.toolchain = "nvcc " + nvcc_version_number(*version);

    std::string unit = compile_unit(ctx, req.source, source_name);
    std::vector<std::string> flags = pinned_flags(req.device.arch);
    std::vector<std::string> defines;
    for (const auto& [k, v] : req.defines) defines.push_back(fmt::format("-D{}={}", k, v));
    std::string key =
        sha256_hex(unit + '\0' + join(defines, " ") + '\0' + join(flags, " ") + '\0' + *version);

    fs::path dir =
        req.cache_dir.empty() ? fs::temp_directory_path() / "peak-cuda-cache" : req.cache_dir;
    std::error_code ec;
    fs::create_directories(dir, ec);
    fs::path so = dir / (key + ".so");
    fs::path meta = dir / (key + ".json");
    fs::path cu = dir / (key + ".cu");
    if (fs::exists(meta, ec)) {
      if (auto cached = from_meta(meta, so)) {
        cached->cached = true;
        cached->seconds = elapsed();
        return *cached;
      }
    }

    if (auto st = write_unique_then_rename(cu, unit); !st) {
      r.log = st.message() + "\n";
      return r;
    }
    fs::path tmp_so = dir / (key + ".so.tmp." + unique_suffix());
    ProcessOptions po;
    po.argv.push_back(nvcc.string());
    po.argv.insert(po.argv.end(), flags.begin(), flags.end());
    po.argv.insert(po.argv.end(), defines.begin(), defines.end());
    po.argv.push_back("-o");
    po.argv.push_back(tmp_so.string());
    po.argv.push_back(cu.string());
    po.timeout_s = kCompileTimeoutS;
    po.cwd = dir;
    // Flags are pinned: environment additions to the nvcc command line are not honoured.
    po.env = {{"NVCC_PREPEND_FLAGS", ""}, {"NVCC_APPEND_FLAGS", ""}};
    po.sandbox = SandboxPolicy::compiler({dir}, {nvcc});
    std::vector<std::string> quoted;
    for (const auto& a : po.argv) quoted.push_back(shell_quote(a));
    r.command = join(quoted, " ");

    auto proc = run_process(po);
    if (!proc) {
      r.log = fmt::format("cannot run nvcc: {}\n", proc.error());
      r.seconds = elapsed();
      return r;
    }
    r.log = normalize_diagnostics(proc->out + proc->err);
    r.seconds = elapsed();
    if (proc->timed_out) {
      fs::remove(tmp_so, ec);
      r.log += fmt::format("nvcc did not finish within {:.0f} s; the build was stopped\n",
                           kCompileTimeoutS);
      return r;  // not cached: a slow machine is not a property of the source
    }
    if (!proc->ok()) {
      fs::remove(tmp_so, ec);
      if (r.log.find(kTrampolineName) != std::string::npos)
        r.log += fmt::format(
            "note: the host region must define `{}` (parameters from kernel.toml, in order); "
            "see docs/backend-cuda.md\n",
            host_signature(ctx));
      r.log += fmt::format("nvcc failed ({})\n", proc->describe());
      (void)write_unique_then_rename(meta, to_meta(r).dump(2));
      return r;
    }
    fs::rename(tmp_so, so, ec);
    if (ec) {
      r.log += fmt::format("cannot move the artifact into the cache: {}\n", ec.message());
      return r;
    }
    r.artifact = so;
    r.resources = parse_ptxas_resources(r.log);
    auto bad = forbidden_symbols(so);
    if (!bad) {
      r.log += bad.error() + "\n";
      return r;
    }
    if (!bad->empty()) {
      r.disposition = Disposition::forbidden_api;
      r.log += fmt::format("the artifact references APIs candidates may not use: {}\n",
                           join(*bad, ", "));
    } else {
      r.disposition = Disposition::passed;
    }
    r.seconds = elapsed();
    (void)write_unique_then_rename(meta, to_meta(r).dump(2));
    return r;
  }

  PlanResult plan(const KernelContext&, const SourceRegions&, const Shape&, const Config&,
                  const DeviceFacts&) override {
    return PlanResult{};  // the host code in the artifact decides the launch
  }

  // Static shared memory and registers per thread are known after the build; the block size
  // and dynamic shared memory are the host function's choice at run time (a launch that does
  // not fit is invalid_config there).
  PlanResult check_resources(const BuildResult& build, const DeviceFacts& device) override {
    PlanResult pr;
    const nlohmann::json& r = build.resources;
    if (!r.is_object() || !r.contains("kernels") || !r["kernels"].is_object()) return pr;
    int64_t limit = std::max(device.shared_memory_per_group_optin, device.shared_memory_per_group);
    std::string dev = device.name.empty() ? "the device" : device.name;
    for (const auto& [name, k] : r["kernels"].items()) {
      int64_t smem = k.value("shared_bytes", int64_t{0});
      if (limit > 0 && smem > limit) {
        pr.disposition = Disposition::invalid_config;
        pr.message = fmt::format(
            "kernel {} uses {} bytes of static shared memory; {} allows at most {} per block", name,
            smem, dev, limit);
        return pr;
      }
    }
    return pr;
  }

  std::string baseline(const KernelContext& ctx, const DeviceFacts&) const override {
    if (ctx.family != "matmul") return "";
    const ArraySpec* a = nullptr;
    const ArraySpec* b = nullptr;
    const ArraySpec* c = nullptr;
    for (const auto& arr : ctx.arrays) {
      if (arr.name == "A") a = &arr;
      if (arr.name == "B") b = &arr;
      if (arr.name == "C") c = &arr;
    }
    if (!a || !b || !c || !c->output || a->dtype != b->dtype) return "";
    if (a->dtype != DType::f32 && a->dtype != DType::f16) return "";
    if (c->dtype == DType::i32) return "";
    return "cublas";
  }

 private:
  mutable std::mutex mu_;
  std::optional<DeviceFacts> facts_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace peak
