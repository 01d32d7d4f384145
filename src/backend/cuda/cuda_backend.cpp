#include "backend/cuda/cuda_backend.h"

#include <cxxabi.h>
#include <elf.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <regex>
#include <thread>

#include <fmt/format.h>

#include "family/family.h"
#include "util/cuda_arch.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/scoped_dir.h"
#include "util/sha256.h"

namespace peak {
namespace cuda {

namespace {

constexpr double kCompileTimeoutS = 120;
// cuobjdump reads one cubin: seconds even for the largest kernels.
constexpr double kDisassembleTimeoutS = 60;
// Version of the "sass" object of a build's resources.
constexpr int kSassMixFormat = 1;
// Static __device__ data a module may hold (constant tables, printf format strings).
constexpr int64_t kStaticGlobalLimit = 64 * 1024;

// Unique names for temporary files written by concurrent builds in one process.

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

}  // namespace

std::string demangle(const std::string& mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (status != 0 || d == nullptr) return mangled;
  std::string out = d;
  std::free(d);
  return out;
}

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

std::string_view default_prelude() {
  return "#include <cuda.h>\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n";
}

std::string compile_unit(const SourceRegions& source, std::string_view source_name,
                         std::string_view prelude) {
  SourceRegions r = source;
  std::string blank;
  for (char c : r.host)
    if (c == '\n') blank.push_back('\n');
  r.host = blank;
  std::string out;
  out += "// peak: device code only; the host region is a launch plan (docs/launch-plan.md)\n";
  out += prelude.empty() ? default_prelude() : prelude;
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += fmt::format("#line 1 \"{}\"\n", source_name);
  out += join_regions(r);
  if (!out.empty() && out.back() != '\n') out += '\n';
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
  return {"-O3", "-std=c++17",       "-cubin",     "-lineinfo",      "-Xptxas",
          "-v",  gencode_flag(arch), "-ftz=false", "-prec-div=true", "-prec-sqrt=true"};
}

fs::path find_nvcc() {
  return find_tool({"nvcc", "PEAK_NVCC", {"CUDA_HOME"}, {"/usr/local/cuda/bin/nvcc"}});
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

nlohmann::json parse_sass_mix(std::string_view sass) {
  nlohmann::json out = nlohmann::json::object();
  nlohmann::json* fn = nullptr;
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  for (const std::string& raw : split_lines(sass)) {
    std::string_view line = raw;
    if (size_t p = line.find("Function : "); p != std::string_view::npos) {
      std::string name = trim(line.substr(p + std::strlen("Function : ")));
      fn = &out[name];
      *fn = {{"instructions", 0}, {"opcodes", nlohmann::json::object()}};
      continue;
    }
    // An instruction: "/*0090*/   @!P0 BRA 0x120 ;   /* 0x... */" (its address, then the text).
    size_t i = 0;
    while (i < line.size() && is_space(line[i])) ++i;
    if (fn == nullptr || line.substr(i, 2) != "/*") continue;
    size_t close = line.find("*/", i + 2);
    if (close == std::string_view::npos || close == i + 2) continue;
    std::string_view address = line.substr(i + 2, close - i - 2);
    if (!std::all_of(address.begin(), address.end(),
                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }))
      continue;  // "/* 0x000fe4... */": the encoding, not an instruction
    std::string_view text = line.substr(close + 2);
    if (size_t c = text.find("/*"); c != std::string_view::npos) text = text.substr(0, c);
    std::vector<std::string_view> words;
    for (size_t b = 0; b < text.size();) {
      while (b < text.size() && (is_space(text[b]) || text[b] == '{')) ++b;
      size_t e = b;
      while (e < text.size() && !is_space(text[e])) ++e;
      if (e > b) words.push_back(text.substr(b, e - b));
      b = e;
    }
    size_t w = 0;
    if (w < words.size() && words[w].front() == '@') ++w;  // the predicate: @P0, @!PT
    if (w >= words.size()) continue;
    std::string_view word = words[w];
    size_t end = 0;
    while (end < word.size() &&
           (std::isalnum(static_cast<unsigned char>(word[end])) || word[end] == '_'))
      ++end;
    std::string opcode(word.substr(0, end));  // "HGMMA.64x128x16.F32" -> HGMMA, "NOP;" -> NOP
    if (opcode.empty() || !std::isupper(static_cast<unsigned char>(opcode[0]))) continue;
    (*fn)["instructions"] = (*fn)["instructions"].get<int64_t>() + 1;
    nlohmann::json& count = (*fn)["opcodes"][opcode];
    count = count.is_number() ? count.get<int64_t>() + 1 : int64_t{1};
  }
  return out;
}

fs::path find_cuobjdump() {
  if (const char* e = std::getenv("PEAK_CUOBJDUMP"); e && *e)
    return ::access(e, X_OK) == 0 ? fs::path(e) : fs::path();
  fs::path nvcc = find_nvcc();
  if (nvcc.empty()) return {};
  fs::path p = nvcc.parent_path() / "cuobjdump";
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0 ? p : fs::path();
}

std::optional<nlohmann::json> cubin_sass_mix(const fs::path& cubin,
                                             const nlohmann::json& resources) {
  fs::path tool = find_cuobjdump();
  if (tool.empty()) return std::nullopt;
  // A scratch folder of its own; of the cache it reads the cubin only.
  auto work = make_temp_dir(cubin.stem().string().substr(0, 16) + ".sass-", cubin.parent_path());
  if (!work) return std::nullopt;
  ProcessOptions po;
  po.argv = {tool.string(), "-sass", cubin.string()};
  po.timeout_s = kDisassembleTimeoutS;
  po.cwd = *work;
  po.sandbox = SandboxPolicy::compiler({*work}, {tool}, {cubin});
  auto proc = run_process(po);
  std::error_code ec;
  fs::remove_all(*work, ec);
  if (!proc || !proc->ok()) return std::nullopt;
  nlohmann::json functions = parse_sass_mix(proc->out);
  // The names of the resources' kernels (ptxas's report), by mangled name.
  std::map<std::string, std::string> names;
  if (resources.contains("kernels") && resources["kernels"].is_object())
    for (const auto& [name, k] : resources["kernels"].items())
      if (k.is_object()) names[k.value("mangled", "")] = name;
  nlohmann::json kernels = nlohmann::json::object();
  int64_t total = 0;
  for (const auto& [mangled, f] : functions.items()) {
    std::string name = names.count(mangled) ? names[mangled] : short_kernel_name(demangle(mangled));
    if (kernels.contains(name)) name = mangled;
    kernels[name] = {
        {"mangled", mangled}, {"instructions", f["instructions"]}, {"opcodes", f["opcodes"]}};
    total += f["instructions"].get<int64_t>();
  }
  if (total == 0) return std::nullopt;
  return nlohmann::json{{"format", kSassMixFormat}, {"kernels", kernels}};
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

namespace {

uint64_t saturating_add(uint64_t a, uint64_t b) {
  uint64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
}

// Sections whose contents live in device memory as long as the module: global data (initialized
// or not, managed variables included) and the bank of __constant__ variables. Shared and local
// memory are per block and per thread; the other constant banks are the kernels' parameters and
// the compiler's own constants.
bool holds_static_data(std::string_view name, uint64_t flags) {
  if (starts_with(name, ".nv.global") || name == ".nv.constant3") return true;
  if (starts_with(name, ".nv.shared") || starts_with(name, ".nv.local")) return false;
  return (flags & SHF_WRITE) && (flags & SHF_ALLOC);
}

// The static data of a cubin (CubinInfo::static_data_bytes), or an error when its section names
// or symbols are out of range.
Result<int64_t> static_data_bytes(const std::string& d, const Elf64_Ehdr& eh,
                                  const std::vector<Elf64_Shdr>& sh) {
  if (eh.e_shstrndx >= sh.size()) return make_error("section names missing");
  const Elf64_Shdr& names = sh[eh.e_shstrndx];
  if (names.sh_offset + names.sh_size > d.size()) return make_error("section names out of range");
  std::vector<uint64_t> size(sh.size(), 0), sum(sh.size(), 0), end(sh.size(), 0);
  std::vector<bool> counted(sh.size(), false);
  for (size_t i = 0; i < sh.size(); ++i) {
    if (sh[i].sh_name >= names.sh_size) continue;
    const char* p = d.data() + names.sh_offset + sh[i].sh_name;
    std::string_view name(p, strnlen(p, names.sh_size - sh[i].sh_name));
    counted[i] = holds_static_data(name, sh[i].sh_flags);
    size[i] = sh[i].sh_size;
  }
  uint64_t common = 0;
  for (const Elf64_Shdr& s : sh) {
    if (s.sh_type != SHT_SYMTAB) continue;
    if (s.sh_offset + s.sh_size > d.size()) return make_error("symbol table out of range");
    for (size_t i = 1; i < s.sh_size / sizeof(Elf64_Sym); ++i) {
      Elf64_Sym sym;
      std::memcpy(&sym, d.data() + s.sh_offset + i * sizeof(Elf64_Sym), sizeof sym);
      if (sym.st_shndx == SHN_COMMON) common = saturating_add(common, sym.st_size);
      if (ELF64_ST_TYPE(sym.st_info) != STT_OBJECT || sym.st_shndx >= sh.size()) continue;
      sum[sym.st_shndx] = saturating_add(sum[sym.st_shndx], sym.st_size);
      end[sym.st_shndx] = std::max(end[sym.st_shndx], saturating_add(sym.st_value, sym.st_size));
    }
  }
  uint64_t total = common;
  for (size_t i = 0; i < sh.size(); ++i)
    if (counted[i]) total = saturating_add(total, std::max({size[i], sum[i], end[i]}));
  return static_cast<int64_t>(std::min<uint64_t>(total, INT64_MAX));
}

}  // namespace

Result<CubinInfo> inspect_cubin(const fs::path& path) {
  auto data = read_file(path);
  if (!data) return make_error(data.error());
  const std::string& d = *data;
  auto bad = [&](std::string_view why) {
    return make_error(fmt::format("{}: not a readable cubin ({})", path.string(), why));
  };
  if (d.size() < sizeof(Elf64_Ehdr) || std::memcmp(d.data(), ELFMAG, SELFMAG) != 0)
    return bad("no ELF header");
  Elf64_Ehdr eh;
  std::memcpy(&eh, d.data(), sizeof eh);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return bad("not ELF64 little-endian");
  CubinInfo info;
  constexpr uint16_t kEmCuda = 190;  // EM_CUDA
  info.cuda = eh.e_machine == kEmCuda;
  info.sm = static_cast<int>((eh.e_flags >> 8) & 0xff);
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff == 0 ||
      eh.e_shoff + uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr) > d.size())
    return bad("section headers out of range");
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  std::memcpy(sh.data(), d.data() + eh.e_shoff, eh.e_shnum * sizeof(Elf64_Shdr));
  constexpr unsigned char kStoCudaEntry = 0x10;  // st_other of kernel entry functions
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
      } else if (ELF64_ST_TYPE(sym.st_info) == STT_FUNC &&
                 ELF64_ST_BIND(sym.st_info) == STB_GLOBAL && (sym.st_other & kStoCudaEntry)) {
        info.kernels.push_back(name);
      }
    }
  }
  auto data_bytes = static_data_bytes(d, eh, sh);
  if (!data_bytes) return bad(data_bytes.error());
  info.static_data_bytes = *data_bytes;
  std::sort(info.undefined.begin(), info.undefined.end());
  info.undefined.erase(std::unique(info.undefined.begin(), info.undefined.end()),
                       info.undefined.end());
  return info;
}

std::optional<std::string> forbidden_device_symbol(std::string_view name) {
  if (name == "vprintf" || name == "__assertfail") return std::nullopt;
  if (name == "malloc" || name == "free" || name == "__nv_malloc")
    return std::string(
        "device-side allocation: memory a kernel may use is the arrays and the plan's scratch "
        "buffers");
  if (starts_with(name, ".nv.") || starts_with(name, "__nv_")) return std::nullopt;
  if (starts_with(name, "cudaLaunchDevice") || starts_with(name, "cudaGetParameterBuffer") ||
      starts_with(name, "cudaCGGet") || starts_with(name, "cudaDevice"))
    return std::string(
        "device-side runtime calls (dynamic parallelism): launches belong in the plan");
  return fmt::format("`{}` is not provided to candidate modules", name);
}

// Static shared memory and registers per thread are known after the build; the block size
// and dynamic shared memory come from the plan (resolve_plan checks them per launch).
PlanResult check_build_resources(const BuildResult& build, const DeviceFacts& device) {
  PlanResult pr;
  const nlohmann::json& r = build.resources;
  if (!r.is_object()) return pr;
  // Device memory that lives as long as the module (static __device__ data) is memory no plan
  // declared: a candidate could keep results there between launches.
  if (int64_t g = r.value("global_bytes", int64_t{0}); g > kStaticGlobalLimit) {
    pr.disposition = Disposition::workspace_exceeded;
    pr.message = fmt::format(
        "the device code declares {} bytes of static device data (__device__, __managed__ and "
        "__constant__ variables and printf strings, as the cubin holds them; at most {} are "
        "allowed for constant tables and printf strings); memory a kernel needs belongs in the "
        "launch plan as a scratch buffer within the context's workspace",
        g, kStaticGlobalLimit);
    return pr;
  }
  if (!r.contains("kernels") || !r["kernels"].is_object()) return pr;
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

PlanResult resolve_plan_for_build(LaunchPlan& plan, const BuildResult& build,
                                  const DeviceFacts& device) {
  PlanResult pr;
  auto fail = [&](Disposition d, std::string m) {
    pr.disposition = d;
    pr.message = std::move(m);
    return pr;
  };
  const nlohmann::json kernels = build.resources.is_object()
                                     ? build.resources.value("kernels", nlohmann::json::object())
                                     : nlohmann::json::object();
  std::string dev = device.name.empty() ? "the device" : device.name;
  int64_t optin = std::max(device.shared_memory_per_group_optin, device.shared_memory_per_group);
  int64_t regs_per_block = 65536;
  if (auto it = device.extra.find("registers_per_block"); it != device.extra.end())
    regs_per_block = std::max<int64_t>(1, std::atoll(it->second.c_str()));
  bool hopper = cuda_arch_number(device.arch) >= 90;
  if (!plan.tensor_maps.empty() && !hopper && !device.arch.empty())
    return fail(Disposition::invalid_config,
                fmt::format("tensor maps (TMA) need sm_90 or newer; {} is {}", dev, device.arch));
  for (PlanStep& st : plan.steps) {
    if (st.op != PlanStep::Op::launch) continue;
    auto k = kernels.find(st.kernel);
    if (k == kernels.end()) {
      std::vector<std::string> names;
      for (const auto& [n, v] : kernels.items()) names.push_back(n);
      return fail(Disposition::compile_failed,
                  fmt::format("line {}: the plan launches `{}`, but the device region defines no "
                              "kernel of that name (kernels: {})",
                              st.line, st.kernel, names.empty() ? "none" : join(names, ", ")));
    }
    st.symbol = k->value("mangled", st.kernel);
    int64_t threads = st.block[0] * st.block[1] * st.block[2];
    int64_t smem = k->value("shared_bytes", int64_t{0}) + st.shared;
    if (optin > 0 && smem > optin)
      return fail(Disposition::invalid_config,
                  fmt::format("launch `{}` needs {} bytes of shared memory ({} static + {} "
                              "dynamic); {} allows at most {} per block",
                              st.kernel, smem, k->value("shared_bytes", int64_t{0}), st.shared, dev,
                              optin));
    int64_t regs = k->value("registers", int64_t{0});
    if (regs > 0 && regs * threads > regs_per_block)
      return fail(Disposition::invalid_config,
                  fmt::format("launch `{}` needs {} registers per block ({} threads x {}); {} "
                              "has {}",
                              st.kernel, regs * threads, threads, regs, dev, regs_per_block));
    if (st.grid[0] > 2147483647 || st.grid[1] > 65535 || st.grid[2] > 65535)
      return fail(Disposition::invalid_config,
                  fmt::format("launch `{}`: grid ({}, {}, {}) exceeds CUDA's limits "
                              "(2147483647, 65535, 65535)",
                              st.kernel, st.grid[0], st.grid[1], st.grid[2]));
    int64_t cluster = st.cluster[0] * st.cluster[1] * st.cluster[2];
    if (cluster > 1 && !hopper && !device.arch.empty())
      return fail(
          Disposition::invalid_config,
          fmt::format("thread-block clusters need sm_90 or newer; {} is {}", dev, device.arch));
    // Up to 8 blocks is the portable limit; sm_90 schedules 16 for a kernel that allows the
    // non-portable size, which the runner does for a launch that asks for more than 8 (whether a
    // cluster of that shape fits the device is its launch's answer: invalid_config if not).
    if (cluster > 16)
      return fail(Disposition::invalid_config,
                  fmt::format("launch `{}`: a cluster of {} blocks exceeds 16, the largest "
                              "(non-portable) cluster of sm_90",
                              st.kernel, cluster));
  }
  return pr;
}

}  // namespace cuda

namespace {

using namespace cuda;

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
    if (*d == Disposition::passed) {  // static data is measured in the cubin, whenever it was built
      auto info = inspect_cubin(so);
      if (!info) return std::nullopt;
      r.resources["global_bytes"] = info->static_data_bytes;
    }
    return r;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(NvccDialect dialect) : dialect_(std::move(dialect)) {}
  std::string name() const override { return dialect_.name; }
  std::string source_extension() const override { return dialect_.extension; }

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
        {"launch", "a `launch KERNEL` statement of the host region's launch plan"},
        {"launch grid", "`grid = (x, y, z)` of the launch statement in the host region"},
        {"block dimensions", "`block = (x, y, z)` of the launch statement in the host region"},
        {"unroll", "#pragma unroll"},
        {"restrict", "__restrict__"},
        {"vector load", "float4 / reinterpret_cast<const float4*>"},
        {"read-only cache load", "__ldg"},
        {"fused multiply-add", "fmaf"},
        {"half precision", "__half (cuda_fp16.h)"},
        {"tensor cores", "wmma / mma.sync (fp16 inputs only; never TF32 in an fp32 kernel)"},
        {"asynchronous copy", "cp.async / cuda::memcpy_async"},
        {"invalid configuration", "a `require EXPR` line in the host region's launch plan"},
        {"tensor memory accelerator",
         "a `tensor_map` of the launch plan, passed as a `const "
         "__grid_constant__ CUtensorMap` kernel parameter"},
    };
  }

  fs::path runner() const override { return find_runner("peak-runner-cuda"); }

  std::vector<std::pair<std::string, std::string>> toolchain() const override {
    std::vector<std::pair<std::string, std::string>> out;
    fs::path nvcc = find_nvcc();
    if (nvcc.empty()) {
      out.emplace_back("nvcc", "not found");
    } else {
      auto v = tool_version_output(nvcc, {}, 30);
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
      // Kept with every evaluation: which cuDNN timed the row families' baseline, or why none.
      if (auto cudnn = facts_->extra.find("cudnn"); cudnn != facts_->extra.end())
        out.emplace_back("cudnn", cudnn->second);
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
    facts->backend = dialect_.name;
    std::lock_guard<std::mutex> lock(mu_);
    facts_ = *facts;
    return *facts;
  }

  std::vector<std::pair<std::string, std::string>> prompt_facts(
      const DeviceFacts& device) const override {
    auto f = Backend::prompt_facts(device);
    int sm = cuda_arch_number(device.arch);
    if (sm >= 90) {
      f.push_back({"thread-block clusters", "up to 8 blocks per cluster (`cluster` in plans)"});
      f.push_back(
          {"tensor cores", fmt::format("{} (wgmma warpgroup MMA from shared memory, mma.sync; TMA "
                                       "tensor maps with mbarriers)",
                                       device.arch == "sm_90a" ? "Hopper, sm_90a" : "Hopper")});
    } else if (sm >= 80) {
      f.push_back({"tensor cores", "Ampere (mma.sync, ldmatrix, cp.async)"});
    } else if (sm >= 70) {
      f.push_back({"tensor cores", "Volta/Turing (mma.sync / WMMA)"});
    }
    return f;
  }

  PlanDialect plan_dialect() const override {
    PlanDialect d;
    d.backend = dialect_.name;
    d.cluster = true;
    d.tensor_maps = true;
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
      r.log = "internal error: a CUDA build needs the kernel context\n";
      return r;
    }
    const KernelContext& ctx = *req.context;
    std::string source_name =
        ctx.source_file.empty() ? "kernel" + dialect_.extension : ctx.source_file;
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
    fs::path nvcc = find_nvcc();
    if (nvcc.empty()) {
      r.log =
          "nvcc was not found: set PEAK_NVCC to its path or CUDA_HOME to the toolkit folder, or "
          "install the CUDA toolkit in /usr/local/cuda\n";
      return r;
    }
    auto version = tool_version_output(nvcc, {}, 30);
    if (!version) {
      r.log = version.error() + "\n";
      return r;
    }
    r.toolchain = "nvcc " + nvcc_version_number(*version);

    std::string unit = compile_unit(*regions, source_name, dialect_.prelude);
    std::vector<std::string> flags = pinned_flags(req.device.arch);
    fs::path dir =
        req.cache_dir.empty() ? fs::temp_directory_path() / "peak-cuda-cache" : req.cache_dir;
    std::error_code ec;
    fs::create_directories(dir, ec);
    fs::path include_dir;
    if (!dialect_.include_files.empty()) {
      // The dialect's headers, in a folder named by their content (concurrent builds agree).
      std::string all;
      for (const auto& [rel, text] : dialect_.include_files) all += rel + '\0' + text + '\0';
      fs::path inc = dir / ("include-" + sha256_hex(all).substr(0, 16));
      include_dir = inc;
      for (const auto& [rel, text] : dialect_.include_files) {
        fs::path f = inc / rel;
        if (fs::exists(f, ec)) continue;
        fs::create_directories(f.parent_path(), ec);
        if (auto st = write_file_atomic(f, text); !st) {
          r.log = st.message() + "\n";
          return r;
        }
      }
      flags.push_back("-I" + inc.string());
    }
    std::vector<std::string> defines;
    for (const auto& [k, v] : req.defines) defines.push_back(fmt::format("-D{}={}", k, v));
    std::string key = sha256_hex(unit + '\0' + join(defines, " ") + '\0' + join(flags, " ") + '\0' +
                                 *version + '\0' + join(plan->kernels(), ","));

    fs::path cubin = dir / (key + ".cubin");
    fs::path meta = dir / (key + ".json");
    fs::path cu = dir / (key + ".cu");
    if (fs::exists(meta, ec)) {
      if (auto cached = from_meta(meta, cubin)) {
        cached->cached = true;
        // A build cached before peak recorded instruction mixes gets its mix now, once.
        if (cached->disposition == Disposition::passed && !cached->resources.contains("sass"))
          if (auto mix = cubin_sass_mix(cubin, cached->resources)) {
            cached->resources["sass"] = *mix;
            auto text = read_file(meta);
            auto j = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
            if (j.is_object()) {
              j["resources"] = cached->resources;
              (void)write_file_atomic(meta, j.dump(2));
            }
          }
        cached->seconds = elapsed();
        return *cached;
      }
    }

    if (auto st = write_file_atomic(cu, unit); !st) {
      r.log = st.message() + "\n";
      return r;
    }
    std::vector<fs::path> inputs = {cu};
    if (!include_dir.empty()) inputs.push_back(include_dir);
    bool built = run_nvcc(nvcc, flags, defines, inputs, cubin, meta, r);
    r.seconds = elapsed();
    if (!built) return r;
    r.artifact = cubin;
    r.resources = parse_ptxas_resources(r.log);
    check_artifact(cubin, *plan, source_name, r);
    // The instruction mix of a build that passed (absent when cuobjdump is not there or fails).
    if (r.disposition == Disposition::passed)
      if (auto mix = cubin_sass_mix(cubin, r.resources)) r.resources["sass"] = *mix;
    r.seconds = elapsed();
    (void)write_file_atomic(meta, to_meta(r).dump(2));
    return r;
  }

  PlanResult check_resources(const BuildResult& build, const DeviceFacts& device) override {
    return check_build_resources(build, device);
  }

 protected:
  PlanResult resolve_plan(LaunchPlan& plan, const BuildResult& build,
                          const DeviceFacts& device) override {
    return resolve_plan_for_build(plan, build, device);
  }

 public:
  // The family's baseline, unless the runner's facts say its library is absent: cuDNN is loaded
  // at run time and reported as "none: <why>" where it is missing, and then no baseline is timed
  // (the toolchain kept with the results says why). cuBLAS is linked and always named.
  std::string baseline(const KernelContext& ctx, const DeviceFacts& device) const override {
    std::string name = family_of(ctx).baseline(ctx, "cuda");
    auto library = device.extra.find(name);
    if (library != device.extra.end() && starts_with(library->second, "none")) return "";
    return name;
  }

 private:
  // Compiles `inputs.front()` (the compile unit) into `cubin`; false (with r.log) when no cubin
  // came. nvcc runs in the compiler sandbox with a scratch folder of its own: it reads its
  // toolkit and `inputs` (the unit, peak's headers), and nothing else of the cache or the host.
  static bool run_nvcc(const fs::path& nvcc, const std::vector<std::string>& flags,
                       const std::vector<std::string>& defines, const std::vector<fs::path>& inputs,
                       const fs::path& cubin, const fs::path& meta, BuildResult& r) {
    const fs::path dir = cubin.parent_path();
    auto work = make_temp_dir(cubin.stem().string().substr(0, 16) + ".nvcc-", dir);
    if (!work) {
      r.log = work.error() + "\n";
      return false;
    }
    std::error_code ec;
    RemoveOnExit cleanup{*work};
    fs::path tmp = *work / cubin.filename();
    ProcessOptions po;
    po.argv.push_back(nvcc.string());
    po.argv.insert(po.argv.end(), flags.begin(), flags.end());
    po.argv.insert(po.argv.end(), defines.begin(), defines.end());
    po.argv.push_back("-o");
    po.argv.push_back(tmp.string());
    po.argv.push_back(inputs.front().string());
    po.timeout_s = kCompileTimeoutS;
    po.cwd = *work;
    // Flags are pinned: environment additions to the nvcc command line are not honoured.
    po.env = {{"NVCC_PREPEND_FLAGS", ""}, {"NVCC_APPEND_FLAGS", ""}};
    po.sandbox = SandboxPolicy::compiler({*work}, {nvcc}, inputs);
    std::vector<std::string> quoted;
    for (const auto& a : po.argv) quoted.push_back(shell_quote(a));
    r.command = join(quoted, " ");
    auto proc = run_process(po);
    if (!proc) {
      r.log = fmt::format("cannot run nvcc: {}\n", proc.error());
      return false;
    }
    r.log = normalize_diagnostics(proc->out + proc->err);
    if (proc->timed_out) {
      r.log += fmt::format("nvcc did not finish within {:.0f} s; the build was stopped\n",
                           kCompileTimeoutS);
      return false;  // not cached: a slow machine is not a property of the source
    }
    if (!proc->ok()) {
      r.log += fmt::format("nvcc failed ({})\n", proc->describe());
      (void)write_file_atomic(meta, to_meta(r).dump(2));
      return false;
    }
    fs::rename(tmp, cubin, ec);
    if (ec) {
      r.log += fmt::format("cannot move the artifact into the cache: {}\n", ec.message());
      return false;
    }
    return true;
  }

  // An artifact passes when it is a cubin, holds every kernel the plan launches and needs
  // nothing from the driver that candidates may not use.
  static void check_artifact(const fs::path& cubin, const ParsedPlan& plan,
                             const std::string& source_name, BuildResult& r) {
    auto info = inspect_cubin(cubin);
    if (!info) {
      r.disposition = Disposition::compile_failed;
      r.log += info.error() + "\n";
      return;
    }
    r.resources["global_bytes"] = info->static_data_bytes;
    if (!info->cuda) {
      r.disposition = Disposition::forbidden_api;
      r.log += "the artifact is not a CUDA device-code object (cubin)\n";
      return;
    }
    std::vector<std::string> bad;
    for (const auto& u : info->undefined)
      if (auto why = forbidden_device_symbol(u)) bad.push_back(fmt::format("{} ({})", u, *why));
    if (!bad.empty()) {
      r.disposition = Disposition::forbidden_api;
      r.log +=
          fmt::format("the device code needs what candidates may not use: {}\n", join(bad, "; "));
      return;
    }
    const nlohmann::json& ks = r.resources["kernels"];
    std::vector<std::string> names;
    for (const auto& [n, v] : ks.items()) names.push_back(n);
    for (const std::string& k : plan.kernels()) {
      if (!ks.contains(k)) {
        r.disposition = Disposition::compile_failed;
        r.log += fmt::format(
            "{}: the launch plan launches `{}`, but the device region defines no __global__ "
            "kernel of that name (kernels: {}); plans launch kernels by plain names, so give a "
            "template kernel a non-template __global__ wrapper\n",
            source_name, k, names.empty() ? "none" : join(names, ", "));
        return;
      }
      std::string mangled = ks[k].value("mangled", "");
      if (std::find(info->kernels.begin(), info->kernels.end(), mangled) == info->kernels.end()) {
        r.disposition = Disposition::compile_failed;
        r.log += fmt::format("{}: kernel `{}` ({}) is missing from the cubin's symbols\n",
                             source_name, k, mangled);
        return;
      }
    }
    r.disposition = Disposition::passed;
  }

  NvccDialect dialect_;
  mutable std::mutex mu_;
  std::optional<DeviceFacts> facts_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() { return make_cuda_backend(NvccDialect{}); }

std::unique_ptr<Backend> make_cuda_backend(const NvccDialect& dialect) {
  return std::make_unique<CudaBackend>(dialect);
}

}  // namespace peak
