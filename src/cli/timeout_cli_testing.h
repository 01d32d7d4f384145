#pragma once
// A kernel that never finishes, committed with the peak binary (timeout_cli_test.cpp on lavapipe,
// timeout_cli_gpu_test.cpp on a CUDA GPU), then a correct one on the same device.
#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include "cli/sandbox_cli_testing.h"

namespace peak::testing {

class HangCli : public PeakCli {
 protected:
  struct Commit {
    int exit_code = -1;
    json out;  // `peak --json commit`
    std::string err;
  };
  struct Commits {
    Commit hung, next;
  };

  static Commit commit(const ProcessResult& r) {
    Commit c;
    c.exit_code = r.exit_code;
    c.out = json::parse(r.out, nullptr, false);
    c.err = r.err;
    return c;
  }

  // In a workspace of the context in folder `context`: `spin` (code that never ends) added after
  // the seed's last statement, committed with a budget of two configurations; then the seed with
  // a comment added, committed with one.
  Commits hang_then_pass(const fs::path& context, const std::string& source_file,
                         const std::string& spin) {
    Commits c;
    fs::path ws = workspace_of("ws", context);
    auto seed = read_file(ws / source_file);
    EXPECT_TRUE(seed) << seed.error();
    if (!seed) return c;
    const std::string last = "  C[row * N + col] = acc;\n}\n// peak:end device";
    EXPECT_NE(seed->find(last), std::string::npos) << *seed;
    std::string hanging =
        replace_all(*seed, last, "  C[row * N + col] = acc;\n" + spin + "}\n// peak:end device");
    EXPECT_TRUE(write_file(ws / source_file, hanging));
    c.hung = commit(peak({"--json", "commit", "-m", "hangs", "--budget", "2"}, ws));
    std::cout << "[ observed ] the hanging kernel: exit " << c.hung.exit_code << ", "
              << c.hung.out.value("message", std::string()) << "\n";
    std::string correct = replace_all(
        *seed, last,
        "  C[row * N + col] = acc;  // stored\n}\n" + std::string("// peak:end device"));
    EXPECT_TRUE(write_file(ws / source_file, correct));
    c.next = commit(peak({"--json", "commit", "-m", "correct", "--budget", "1"}, ws));
    return c;
  }

  // The hung candidate is charged `timeout` after one configuration and two runners that ran (its
  // first task in the job's runner, then alone in a fresh one), its validation within
  // `bound_s` when that is given (on a GPU host, where nothing else runs; a CPU device shares the
  // machine, so there the count of runners is the check and the time is printed); the next
  // candidate passes.
  static void expect_charged_then_passes(const Commits& c, double bound_s) {
    EXPECT_EQ(c.hung.exit_code, 1) << c.hung.out.dump() << c.hung.err;
    EXPECT_EQ(c.hung.out.value("disposition", ""), "timeout") << c.hung.out.dump();
    EXPECT_NE(c.hung.out.value("message", "").find("retried alone in a fresh runner"),
              std::string::npos)
        << c.hung.out.dump();
    const json s = c.hung.out.value("summary", json::object());
    const json configs = s.value("configs", json::object());
    EXPECT_EQ(configs.value("evaluated", 0), 1) << s.dump();
    EXPECT_EQ(configs.value("stop", ""), "timeout") << s.dump();
    EXPECT_EQ(configs.value("dispositions", json::object()), json({{"timeout", 1}})) << s.dump();
    // A search's other job may have started its runner ahead of the lock: let go unused once
    // the hang was judged, it is counted apart.
    EXPECT_EQ(s.value("runner_starts", -1) - s.value("runners_abandoned", 0), 2) << s.dump();
    const double validate_s = s.value("phases", json::object()).value("validate_s", -1.0);
    std::cout << "[ observed ] charged `timeout` after " << validate_s << " s of validation ("
              << s.value("runner_starts", -1) << " runners)\n";
    EXPECT_GE(validate_s, 0) << s.dump();
    if (bound_s > 0) {
      EXPECT_LT(validate_s, bound_s) << s.dump();
    }
    EXPECT_EQ(c.next.exit_code, 0) << c.next.out.dump() << c.next.err;
    EXPECT_EQ(c.next.out.value("disposition", ""), "passed") << c.next.out.dump();
  }
};

}  // namespace peak::testing
