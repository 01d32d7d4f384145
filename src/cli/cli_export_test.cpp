// `peak export` end to end, without a GPU: its options and usage errors, the folders it refuses,
// and the libraries it writes for checkpoints of the CUDA campaigns committed under results/
// (the FP32 kernel with its two-configuration dispatch table, the FP16 TMA kernel alone). Where
// nvcc, CMake and Ninja are found, each export is built as its README says, and a small C
// program linked against it checks what needs no device (the dispatch, the configurations'
// texts, the status codes of calls that never reach the GPU).
#include <gtest/gtest.h>

#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/testing.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/sandbox.h"

namespace peak {
namespace {

using json = nlohmann::json;
using namespace peak::testing;

const fs::path kResults = fs::path(PEAK_SOURCE_DIR) / "results" / "h100";
const fs::path kFp32Store = kResults / "cuda-fp32-small-m-loads" / "suite" / "store";
const fs::path kFp16Store = kResults / "cuda-fp16-whole" / "store";

fs::path nvcc() {
  return find_tool({"nvcc", "PEAK_NVCC", {"CUDA_HOME"}, {"/usr/local/cuda/bin/nvcc"}});
}

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

class ExportCli : public Cli {
 protected:
  // A workspace of a store committed under results/ at checkpoint `ref`, made as
  // scripts/gpu/env.sh's workspace_from_store makes it: the store copied (its database
  // decompressed), HEAD moved to the checkpoint, its files checked out. Empty (with the test
  // skipped or failed) when that cannot be done here.
  fs::path from_store(const fs::path& store, const std::string& ref, const std::string& name) {
    if (!fs::exists(store / "FORMAT")) {
      ADD_FAILURE() << "no committed store at " << store;
      return {};
    }
    const fs::path ws = tmp_ / name;
    std::error_code ec;
    fs::create_directories(ws / ".peak", ec);
    fs::copy_file(store / "FORMAT", ws / ".peak" / "FORMAT", ec);
    fs::copy(store / "blobs", ws / ".peak" / "blobs", fs::copy_options::recursive, ec);
    EXPECT_FALSE(ec) << ec.message();
    const fs::path db = ws / ".peak" / "peak.db";
    if (fs::exists(store / "peak.db")) {
      fs::copy_file(store / "peak.db", db, ec);
    } else {
      const std::string xz = (store / "peak.db.xz").string();
      ProcessOptions o;
      o.timeout_s = 120;
      if (!find_program("xz").empty()) {
        o.argv = {"xz", "-dc", xz};
      } else if (!find_program("python3").empty()) {
        o.argv = {"python3", "-c",
                  "import lzma, shutil, sys\nwith lzma.open(sys.argv[1]) as i:\n"
                  "  shutil.copyfileobj(i, sys.stdout.buffer)",
                  xz};
      } else {
        return {};  // the caller skips
      }
      auto r = run_process(o);
      EXPECT_TRUE(r && r->ok()) << (r ? r->err : r.error());
      if (!r || !r->ok()) return {};
      EXPECT_TRUE(write_file(db, r->out));
    }
    for (std::vector<std::string> args :
         {std::vector<std::string>{"-q", "checkout", "--force", "--detach", ref},
          std::vector<std::string>{"-q", "checkout", "--force", "HEAD"}}) {
      Out o = peak(args, ws);
      EXPECT_EQ(o.code, 0) << o.out << o.err;
      if (o.code != 0) return {};
    }
    return ws;
  }

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

  // Skips the test unless nvcc, CMake and Ninja are here.
  bool have_build_tools() {
    return !nvcc().empty() && !find_program("cmake").empty() && !find_program("ninja").empty();
  }
};

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

// Only CUDA exports exist: an HLSL workspace is told so, and nothing is written.
TEST_F(ExportCli, HlslExportsAreNotWrittenYet) {
  fs::path ws = workspace_with_device("hlsl", "");
  Out o = peak({"-q", "export", "-o", "lib"}, ws);
  EXPECT_EQ(o.code, 2) << o.out << o.err;
  EXPECT_NE(o.err.find("peak export does not write hlsl libraries yet"), std::string::npos)
      << o.err;
  EXPECT_FALSE(fs::exists(ws / "lib"));
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

}  // namespace
}  // namespace peak
