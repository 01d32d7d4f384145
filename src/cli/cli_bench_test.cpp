// `peak bench [CHECKPOINT]` end to end on the CPU Vulkan device (lavapipe): the small shape
// suite of the HLSL example, its table, JSON and report; and its usage errors, which `peak bench
// tuning` keeps apart.
#include <gtest/gtest.h>

#include <map>
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

// `peak bench -o FILE` rewrites the file after every shape: a benchmark killed (kill -9, through
// the fault point after the second shape) leaves the two shapes it timed, marked partial, and
// records nothing in the store.
TEST_F(Cli, ACutBenchKeepsTheShapesItTimed) {
  fs::path ws = workspace_with_device("cut", "");
  fs::path file = tmp_ / "suite.json";
  Out o = peak({"-q", "--json", "bench", "-o", file.string()}, ws,
               {{"PEAK_FAULT", "kill@bench.shape-timed#2"}});
  EXPECT_EQ(o.code, -1) << o.out << o.err;  // killed by a signal
  auto text = read_file(file);
  ASSERT_TRUE(text) << o.err;
  json s = json::parse(*text, nullptr, false);
  ASSERT_TRUE(s.is_object()) << *text;
  EXPECT_EQ(s["kind"], "peak-suite");
  EXPECT_EQ(s["shapes"], 8);
  EXPECT_EQ(s["partial"], true);
  ASSERT_EQ(s["rows"].size(), 2u);
  for (const auto& r : s["rows"]) {
    EXPECT_EQ(r["disposition"], "passed") << r.dump();
    EXPECT_FALSE(r["samples_ms"].empty());
  }
  Out show = peak({"show", "--all"}, ws);
  EXPECT_EQ(show.out.find(" suite "), std::string::npos) << show.out;

  // The table form says it too; a finished benchmark's file is whole.
  Out cut = peak({"-q", "bench", "-o", (tmp_ / "suite.txt").string()}, ws,
                 {{"PEAK_FAULT", "kill@bench.shape-timed#1"}});
  EXPECT_EQ(cut.code, -1);
  auto table = read_file(tmp_ / "suite.txt");
  ASSERT_TRUE(table);
  EXPECT_NE(table->find("(partial: 1 of the suite's 8 shapes timed so far)"), std::string::npos)
      << *table;
  Out whole = peak({"-q", "--json", "bench", "-o", file.string()}, ws);
  ASSERT_EQ(whole.code, 0) << whole.err;
  json w = json::parse(*read_file(file), nullptr, false);
  EXPECT_EQ(w["rows"].size(), 8u);
  EXPECT_EQ(w["shapes"], 8);
  EXPECT_FALSE(w.contains("partial"));
}

// `peak tune --classes` on lavapipe: one search per class of the small suite (two
// configurations each), the dispatch table recorded (never the checkpoint's result), and `peak
// bench` running each shape with its class's configuration (`--single`: the best one alone).
// Which configuration wins a class is the machine's business; the test checks that the bench ran
// exactly what the table says.
TEST_F(Cli, TuneClassesRecordsADispatchTableThatBenchRuns) {
  fs::path ws = workspace_with_device("classes", "");
  Out bad = peak({"tune", "--classes", "--export-space", "x.json"}, ws);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--classes tunes and times every class"), std::string::npos) << bad.err;
  Out bad2 = peak({"bench", "tuning", "--single"}, ws);
  EXPECT_EQ(bad2.code, 2);
  EXPECT_NE(bad2.err.find("--single belong to `peak bench [CHECKPOINT]`"), std::string::npos)
      << bad2.err;

  Out o = peak({"-q", "--json", "tune", "--classes", "--budget", "2"}, ws);
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  json t = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(t.is_object()) << o.out;
  EXPECT_EQ(t["kind"], "peak-dispatch");
  EXPECT_EQ(t["small"], true);
  EXPECT_GT(t["evaluation"].get<int>(), 0);
  ASSERT_EQ(t["variants"].size(), 6u);  // the six classes of the small suite, in rule order
  const std::vector<std::string> order = {"large-k", "small-m", "small-k",
                                          "wide",    "square",  "irregular"};
  std::map<std::string, json> config_of;
  size_t evaluations = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const json& v = t["variants"][i];
    EXPECT_EQ(v["class"], order[i]) << v.dump();
    EXPECT_EQ(v["disposition"], "passed") << v.dump();
    EXPECT_GE(v["evaluated"].get<int>(), 1) << v.dump();
    EXPECT_LE(v["evaluated"].get<int>(), 2) << v.dump();
    EXPECT_FALSE(v["config"].empty()) << v.dump();
    EXPECT_GT(v["gflops"].get<double>(), 0) << v.dump();
    config_of[order[i]] = v["config"];
    evaluations += v["evaluated"].get<size_t>();
  }
  EXPECT_EQ(t["evaluations"], evaluations);
  EXPECT_EQ(t["variants"][4]["shapes"], json({"square-128", "square-256"}));
  // After each search but the last, the table so far is recorded too (an interrupted call keeps
  // the classes it searched): the first of them has the first class and the rest not yet.
  Out hist = peak({"--json", "show", "--all"}, ws);
  ASSERT_EQ(hist.code, 0) << hist.err;
  json hj = json::parse(hist.out, nullptr, false);
  std::vector<json> tables;
  for (const auto& e : hj["evaluations"])
    if (e["kind"] == "dispatch") tables.push_back(e);
  ASSERT_EQ(tables.size(), order.size()) << hist.out;
  std::sort(tables.begin(), tables.end(),
            [](const json& a, const json& b) { return a["id"].get<int>() < b["id"].get<int>(); });
  EXPECT_EQ(tables.back()["id"], t["evaluation"]);
  const json& first_table = tables.front()["summary"];
  EXPECT_EQ(first_table["message"].get<std::string>().rfind("after 1 of 6 searches: ", 0), 0u)
      << first_table.dump();
  const json& partial = first_table["dispatch"]["variants"];
  ASSERT_EQ(partial.size(), order.size()) << first_table.dump();
  EXPECT_EQ(partial[0]["disposition"], "passed") << partial.dump();
  EXPECT_EQ(partial[0]["config"], t["variants"][0]["config"]) << partial.dump();
  for (size_t i = 1; i < order.size(); ++i) {
    EXPECT_EQ(partial[i]["class"], order[i]) << partial.dump();
    EXPECT_EQ(partial[i]["message"], "not searched yet when this table was recorded")
        << partial.dump();
  }
  // Every class's search starts from the checkpoint's best configuration and validates on the
  // hidden shapes of one seed: the first class validates what it evaluates, the other five
  // validate nothing it validated (no validation seconds), but screen it on their own shapes.
  const std::string first = "(select min(run_id) from tuning_configs)";
  EXPECT_NE(sql_value(ws, "select min(validate_s) from tuning_configs where run_id = " + first),
            "0.0");
  EXPECT_GE(std::stoi(sql_value(ws, "select count(*) from tuning_configs where run_id > " + first +
                                        " and validate_s = 0 and time_s > 0")),
            5);

  Out b = peak({"-q", "--json", "bench"}, ws);
  ASSERT_EQ(b.code, 0) << b.out << b.err;
  json s = json::parse(b.out, nullptr, false);
  ASSERT_TRUE(s.is_object()) << b.out;
  EXPECT_EQ(s["dispatch"], t["evaluation"]);
  ASSERT_EQ(s["rows"].size(), 8u);
  for (const auto& r : s["rows"]) {
    EXPECT_EQ(r["disposition"], "passed") << r.dump();
    EXPECT_EQ(r["dispatched_class"], r["class"]) << r.dump();
    // The row's configuration is its class's, written as config_text writes it.
    std::string want;
    for (const auto& [k, v] : config_of[r["class"].get<std::string>()].items())
      want += (want.empty() ? "" : " ") + k + "=" + std::to_string(v.get<int64_t>());
    EXPECT_EQ(r["config"], want) << r.dump();
  }
  Out single = peak({"-q", "--json", "bench", "--single"}, ws);
  ASSERT_EQ(single.code, 0) << single.err;
  json sj = json::parse(single.out, nullptr, false);
  EXPECT_EQ(sj["dispatch"], 0);
  for (const auto& r : sj["rows"]) EXPECT_FALSE(r.contains("config")) << r.dump();

  // The table is in the history, not the result: the seed still has none.
  Out show = peak({"--json", "show", "--all"}, ws);
  ASSERT_EQ(show.code, 0) << show.err;
  json sh = json::parse(show.out, nullptr, false);
  bool found = false;
  for (const auto& e : sh["evaluations"])
    if (e["kind"] == "dispatch") {
      found = true;
      EXPECT_FALSE(e["result"].get<bool>());
    }
  EXPECT_TRUE(found) << show.out;
  // Nor do the classes' timings pass for the seed's own numbers in the report (their measurement
  // rows are tagged class:...): the seed was never timed at its bench shapes.
  Out rep = peak({"report", "--format", "json"}, ws);
  ASSERT_EQ(rep.code, 0) << rep.err;
  json rj = json::parse(rep.out, nullptr, false);
  ASSERT_TRUE(rj.is_object()) << rep.out;
  EXPECT_TRUE(rj["steps"][0]["bench"].empty()) << rj["steps"][0].dump();
  EXPECT_EQ(rj["steps"][0]["suite"]["dispatch"], 0);  // the newest suite: the --single one
  // A class's search is exported by its run id only: the seed has no search of its own.
  Out exp = peak({"export-space", "-o", (tmp_ / "space.json").string()}, ws);
  EXPECT_EQ(exp.code, 2) << exp.out << exp.err;
  EXPECT_NE(exp.err.find("has no recorded tuning search"), std::string::npos) << exp.err;
  Out exp1 = peak({"export-space", "--run", "1", "-o", (tmp_ / "space.json").string()}, ws);
  EXPECT_EQ(exp1.code, 0) << exp1.out << exp1.err;
  Out text = peak({"tune", "--classes", "--budget", "1"}, ws);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("one configuration per shape class"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("`peak bench` now runs each shape"), std::string::npos) << text.out;
  // Tuning again starts each class from the configuration the newest table found for it (where
  // that is not the best configuration, which every search starts from anyway).
  size_t refined = 0;
  for (const auto& v : t["variants"]) refined += v["config"] != t["fallback"] ? 1 : 0;
  const std::string from =
      "starting from dispatch table " + std::to_string(t["evaluation"].get<int>()) + "'s";
  size_t seen = 0;
  for (size_t at = text.err.find(from); at != std::string::npos; at = text.err.find(from, at + 1))
    ++seen;
  EXPECT_EQ(seen, refined) << text.err;

  // --class searches only the classes named; the others keep what the newest table found for
  // them, or run the checkpoint's best configuration.
  Out no_classes = peak({"tune", "--class", "small-m"}, ws);
  EXPECT_EQ(no_classes.code, 2);
  EXPECT_NE(no_classes.err.find("add --classes"), std::string::npos) << no_classes.err;
  Out unknown = peak({"tune", "--classes", "--class", "tall"}, ws);
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("--class tall: not a class"), std::string::npos) << unknown.err;
  Out one = peak({"-q", "--json", "tune", "--classes", "--class", "small-m", "--budget", "1"}, ws);
  ASSERT_EQ(one.code, 0) << one.out << one.err;
  json oj = json::parse(one.out, nullptr, false);
  ASSERT_TRUE(oj.is_object()) << one.out;
  ASSERT_EQ(oj["variants"].size(), 6u);
  for (const auto& v : oj["variants"]) {
    const bool searched = v["class"] == "small-m";
    if (searched) {
      EXPECT_EQ(v["disposition"], "passed") << v.dump();
    } else if (v["disposition"] == "kept") {
      EXPECT_NE(v["message"].get<std::string>().find("kept from dispatch table"), std::string::npos)
          << v.dump();
      EXPECT_NE(v["config"], oj["fallback"]) << v.dump();
    } else {
      EXPECT_EQ(v["disposition"], "not_searched") << v.dump();
    }
    EXPECT_EQ(v["config"].empty(), v["disposition"] == "not_searched") << v.dump();
    EXPECT_FALSE(v["shapes"].empty()) << v.dump();
  }
  EXPECT_EQ(oj["evaluations"], 1);
  Out b1 = peak({"-q", "--json", "bench"}, ws);
  ASSERT_EQ(b1.code, 0) << b1.err;
  json bj = json::parse(b1.out, nullptr, false);
  EXPECT_EQ(bj["dispatch"], oj["evaluation"]);
  for (const auto& r : bj["rows"]) EXPECT_EQ(r["disposition"], "passed") << r.dump();

  // Searching one class at a time builds up the table: a class's configuration (here one other
  // than the best, by its narrowed search) stays when the next call searches another class.
  Out narrowed = peak({"-q", "--json", "tune", "--classes", "--class", "small-m", "--budget", "1",
                       "--tune", "BLOCK_X=8", "--tune", "BLOCK_Y=4"},
                      ws);
  ASSERT_EQ(narrowed.code, 0) << narrowed.out << narrowed.err;
  json nj = json::parse(narrowed.out, nullptr, false);
  const json small_m_config = {{"BLOCK_X", 8}, {"BLOCK_Y", 4}};
  ASSERT_EQ(nj["variants"][1]["class"], "small-m");
  ASSERT_EQ(nj["variants"][1]["config"], small_m_config) << nj.dump();
  Out square = peak({"--json", "tune", "--classes", "--class", "square", "--budget", "1"}, ws);
  ASSERT_EQ(square.code, 0) << square.out << square.err;
  json qj = json::parse(square.out, nullptr, false);
  const json& kept = qj["variants"][1];
  EXPECT_EQ(kept["disposition"], "kept") << kept.dump();
  EXPECT_EQ(kept["config"], small_m_config) << kept.dump();
  EXPECT_EQ(kept["evaluated"], 0) << kept.dump();
  EXPECT_NE(kept["message"].get<std::string>().find("kept from dispatch table " +
                                                    std::to_string(nj["evaluation"].get<int>())),
            std::string::npos)
      << kept.dump();
  EXPECT_NE(square.err.find("class small-m: not searched, keeps dispatch table"), std::string::npos)
      << square.err;
  EXPECT_EQ(qj["variants"][4]["disposition"], "passed") << qj.dump();
  EXPECT_EQ(qj["evaluations"], 1);
  Out b2 = peak({"-q", "--json", "bench"}, ws);
  ASSERT_EQ(b2.code, 0) << b2.err;
  json b2j = json::parse(b2.out, nullptr, false);
  EXPECT_EQ(b2j["dispatch"], qj["evaluation"]);
  for (const auto& r : b2j["rows"]) {
    if (r["class"] == "small-m") {
      EXPECT_EQ(r["config"], "BLOCK_X=8 BLOCK_Y=4") << r.dump();
    }
  }
}

}  // namespace
}  // namespace peak
