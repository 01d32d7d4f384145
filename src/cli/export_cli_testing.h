#pragma once
// The committed stores of results/ as workspaces, for the `peak export` tests (CPU: building the
// exports; GPU: running them beside peak's runner).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/testing.h"
#include "engine/reports.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/sandbox.h"

namespace peak::testing {

inline const fs::path kResults = fs::path(PEAK_SOURCE_DIR) / "results" / "h100";
inline const fs::path kFp32Store = kResults / "cuda-fp32-small-m-loads" / "suite" / "store";
inline const fs::path kFp16Store = kResults / "cuda-fp16-whole" / "store";
inline const fs::path kHlslStore = kResults / "hlsl-fp32-large-tiles" / "store";
inline const fs::path kHipStore = kResults / "hip-fp32-small-m-loads" / "store";

inline fs::path nvcc() {
  return find_tool({"nvcc", "PEAK_NVCC", {"CUDA_HOME"}, {"/usr/local/cuda/bin/nvcc"}});
}

// Runs `argv` in `cwd`; its output on failure.
inline ::testing::AssertionResult runs(const std::vector<std::string>& argv, const fs::path& cwd,
                                       double timeout_s = 600) {
  ProcessOptions o;
  o.cwd = cwd;
  o.timeout_s = timeout_s;
  o.argv = argv;
  auto r = run_process(o);
  if (!r) return ::testing::AssertionFailure() << r.error();
  if (!r->ok())
    return ::testing::AssertionFailure() << join(argv, " ") << ":\n" << r->out << r->err;
  return ::testing::AssertionSuccess();
}

class StoreCli : public Cli {
 protected:
  // A workspace of a store committed under results/ at checkpoint `ref`, made as
  // scripts/gpu/env.sh's workspace_from_store makes it: the store copied (unpacked from its
  // archive), HEAD moved to the checkpoint, its files checked out. Empty (with the test
  // skipped or failed) when that cannot be done here.
  fs::path from_store(const fs::path& store, const std::string& ref, const std::string& name) {
    const fs::path ws = tmp_ / name;
    if (Status st = copy_store_into(store, ws / ".peak"); !st) {
      ADD_FAILURE() << "the committed store " << store << ": " << st.message();
      return {};
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
};

}  // namespace peak::testing
