#pragma once
// Fixtures shared by backend_cuda_tests and backend_cuda_gpu_tests: the CUDA integrity corpus
// (tests/integrity/cuda/*.cu, kernels the gate must reject or show harmless) and the kernels that
// must pass it (tests/integrity/cuda/passing/*.cu: every feature of the launch plan, so that the
// gate does not reject honest work). docs/backend-cuda.md lists the cases.
//
// Each file is a whole kernel.cu for corpus_context(), with a header of comment lines:
//   // expect: <disposition>[|<disposition>...]   line 1: what the gate answers (validation)
//   // <one line>                                 line 2: the attack, or what the kernel shows
//   // timed: <disposition>                       optional: timing the first bench shape gives
//   // needs: sm_90                               optional: the architecture it needs
//   // gap: <text>                                optional: why an attack still passes
//   // harmless: <text>                           optional: why an attack that passes gains nothing
// Further comment lines are free text; the header ends at the first line that is not a comment.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "context/context.h"
#include "util/disposition.h"
#include "util/fs.h"

namespace peak::testing {

inline const fs::path kCudaCorpusDir = fs::path(PEAK_SOURCE_DIR) / "tests" / "integrity" / "cuda";
inline const fs::path kCudaPassingDir = kCudaCorpusDir / "passing";

struct CorpusCase {
  std::string file;  // name within its folder
  fs::path path;
  std::set<std::string> expect;
  std::string description;
  std::string timed;  // "" = not timed by the corpus test
  int needs_sm = 0;   // 0 = any architecture
  std::string gap;
  std::string harmless;
  std::vector<std::string> problems;  // header lines that do not follow the format
};

inline void PrintTo(const CorpusCase& c, std::ostream* os) { *os << c.file; }

inline CorpusCase parse_corpus_header(const fs::path& path, const std::string& text) {
  CorpusCase c;
  c.path = path;
  c.file = path.filename().string();
  auto lines = split_lines(text);
  const std::string expect_tag = "// expect: ";
  if (lines.empty() || !starts_with(lines[0], expect_tag)) {
    c.problems.push_back("line 1 must be `// expect: <disposition>[|<disposition>...]`");
    return c;
  }
  std::string list = lines[0].substr(expect_tag.size());
  for (size_t start = 0;;) {
    size_t bar = list.find('|', start);
    std::string d = trim(list.substr(start, bar == std::string::npos ? bar : bar - start));
    if (!disposition_from_string(d)) c.problems.push_back("unknown disposition `" + d + "`");
    c.expect.insert(d);
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  if (lines.size() < 2 || !starts_with(lines[1], "// ") || trim(lines[1].substr(2)).empty()) {
    c.problems.push_back("line 2 must describe the case in one comment line");
    return c;
  }
  c.description = trim(lines[1].substr(3));
  for (size_t i = 2; i < lines.size() && starts_with(lines[i], "//"); ++i) {
    std::string l = lines[i];
    if (starts_with(l, "// timed: ")) {
      c.timed = trim(l.substr(10));
      if (!disposition_from_string(c.timed))
        c.problems.push_back("unknown disposition `" + c.timed + "` after `timed:`");
    } else if (starts_with(l, "// needs: sm_")) {
      c.needs_sm = std::atoi(l.c_str() + 13);
      if (c.needs_sm <= 0) c.problems.push_back("`needs:` takes an architecture, sm_90");
    } else if (starts_with(l, "// gap: ")) {
      c.gap = trim(l.substr(8));
    } else if (starts_with(l, "// harmless: ")) {
      c.harmless = trim(l.substr(13));
    }
  }
  return c;
}

// The .cu files of `dir` (not its subfolders), by name.
inline std::vector<CorpusCase> corpus_cases(const fs::path& dir = kCudaCorpusDir) {
  std::vector<CorpusCase> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file() || e.path().extension() != ".cu") continue;
    auto text = read_file(e.path());
    CorpusCase c = parse_corpus_header(e.path(), text ? *text : "");
    if (!text) c.problems.push_back(text.error());
    out.push_back(c);
  }
  std::sort(out.begin(), out.end(),
            [](const CorpusCase& a, const CorpusCase& b) { return a.file < b.file; });
  return out;
}

inline std::string corpus_test_name(const CorpusCase& c) {
  std::string n = c.file.substr(0, c.file.size() - 3);
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
}

// The workspace the corpus context grants: room for 4 split-K partial products of C, plus a
// copy of A with its rows padded to a multiple of 32 (the TMA kernel's scratch).
inline constexpr const char* kCorpusWorkspace = "4 * (4 * M * N + M * round_up(K, 32))";

// examples/matmul-cuda-fp32 with a workspace: the context every corpus file is written for.
inline Result<KernelContext> corpus_context() {
  auto c = load_context(fs::path(PEAK_SOURCE_DIR) / "examples" / "matmul-cuda-fp32");
  if (!c) return c;
  c->workspace = kCorpusWorkspace;
  return c;
}

inline std::map<std::string, int64_t> default_tuning(const KernelContext& ctx) {
  std::map<std::string, int64_t> c;
  for (const auto& t : ctx.tuning) c[t.name] = t.default_value;
  return c;
}

}  // namespace peak::testing
