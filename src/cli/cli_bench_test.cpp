// `peak bench [CHECKPOINT]` end to end on the CPU Vulkan device (lavapipe): the small shape
// suite of the HLSL example, its table, JSON and report; and its usage errors, which `peak bench
// tuning` keeps apart.
#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "cli/testing.h"
#include "util/fs.h"

namespace peak {
namespace {

using json = nlohmann::json;

using namespace peak::testing;

TEST_F(Cli, BenchUsageErrorsSayWhatToWrite) {
  fs::path ws = workspace_with_device("usage", "");
  Out help = peak({"bench", "--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("bench [CHECKPOINT]"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("bench tuning [CACHE...]"), std::string::npos) << help.out;
  struct Case {
    std::vector<std::string> args;
    std::string says;
  } cases[] = {
      {{"bench", "1", "2"}, "usage: peak bench [CHECKPOINT]"},
      {{"bench", "--strategies", "random"}, "--strategies belongs to `peak bench tuning`"},
      {{"bench", "--small", "--full"}, "--small and --full exclude each other"},
      {{"bench", "tuning", "--small"}, "belong to `peak bench [CHECKPOINT]`"},
      {{"bench", "tuning", "--device", "0"}, "belong to `peak bench [CHECKPOINT]`"},
      {{"bench", "no-such-branch"}, "no-such-branch"},
  };
  for (const auto& c : cases) {
    Out o = peak(c.args, ws);
    EXPECT_EQ(o.code, 2) << c.args[1] << ": " << o.err;
    EXPECT_NE(o.err.find(c.says), std::string::npos) << o.err;
  }
  // Nothing was recorded by a refused command.
  Out log = peak({"--json", "show", "--all"}, ws);
  ASSERT_EQ(log.code, 0) << log.err;
  json j = json::parse(log.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << log.out;
  for (const auto& e : j["evaluations"]) EXPECT_NE(e["kind"], "suite") << e.dump();
}

// The seed of the HLSL example over the small suite (lavapipe is a CPU device): one row per
// suite shape with its class, ratios of the peak (HLSL has no vendor library), the geometric
// mean; recorded with the checkpoint and shown by `peak report`.
TEST_F(Cli, BenchTimesTheSmallSuiteOnACpuDevice) {
  fs::path ws = workspace_with_device("bench", "");
  Out o = peak({"-q", "--json", "bench"}, ws);
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  json s = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(s.is_object()) << o.out;
  EXPECT_EQ(s["kind"], "peak-suite");
  EXPECT_EQ(s["checkpoint"], 1);
  EXPECT_EQ(s["small"], true);
  EXPECT_EQ(s["baseline"], "");
  EXPECT_EQ(s["ratio_of"], "peak");
  EXPECT_EQ(s["dims_names"], "MxNxK");
  ASSERT_EQ(s["rows"].size(), 8u);
  std::set<std::string> classes;
  for (const auto& r : s["rows"]) {
    EXPECT_EQ(r["disposition"], "passed") << r.dump();
    EXPECT_GT(r["gflops"].get<double>(), 0) << r.dump();
    EXPECT_FALSE(r["samples_ms"].empty());
    classes.insert(r["class"].get<std::string>());
  }
  EXPECT_EQ(classes.size(), 6u);
  EXPECT_EQ(s["rows"][3]["dims"], "257x185x93");
  if (s["peak_tflops"].get<double>() > 0) {
    EXPECT_EQ(s["rated"], 8);
  }

  Out rep = peak({"report"}, ws);
  ASSERT_EQ(rep.code, 0) << rep.err;
  EXPECT_NE(rep.out.find("shape suite (peak bench) of 1 seed"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("odd-257-185-93"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("geometric mean"), std::string::npos) << rep.out;
  Out show = peak({"show", "--all"}, ws);
  EXPECT_NE(show.out.find(" suite "), std::string::npos) << show.out;
}

}  // namespace
}  // namespace peak
