#include "results/summary.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "results/dispatch.h"
#include "results/suite.h"

namespace peak {
namespace {

using json = nlohmann::json;

// A summary as the engine writes it (report/testing.h's, with the keys of a full evaluation).
json full_summary() {
  json bench = {{"shape", "K=256 M=256 N=256"},
                {"config", {{"BLOCK_X", 16}}},
                {"disposition", "passed"},
                {"median_ms", 2.0},
                {"p25_ms", 1.98},
                {"p75_ms", 2.04},
                {"min_ms", 1.9},
                {"n", 3},
                {"spread", 0.03},
                {"gflops", 16.0},
                {"pct_of_peak", 69.2},
                {"samples_ms", {1.98, 2.0, 2.04}},
                {"host_ms", {2.1, 2.2}},
                {"baseline", "vendor"},
                {"baseline_gflops", 40.0},
                {"baseline_median_ms", 0.8},
                {"baseline_spread", 0.01},
                {"pct_of_baseline", 40.0},
                {"baseline_samples_ms", {0.79, 0.8, 0.81}},
                {"speedup_vs_seed", 1.0},
                {"speedup_vs_parent", 1.0},
                {"clock_mhz_before", 1980.0},
                {"clock_mhz_after", 1980.0},
                {"throttled", false},
                {"timed_launches_checked", 2}};
  return {
      {"format", 1},
      {"disposition", "passed"},
      {"message", "best BLOCK_X=16: 16.0 GFLOP/s at K=256 M=256 N=256"},
      {"peak_version", "test"},
      {"device",
       {{"name", "Test GPU"},
        {"backend", "hlsl"},
        {"driver", "1.2.3"},
        {"api", "1.3"},
        {"arch", "test"},
        {"is_cpu", false},
        {"measured_fp32_tflops", 0.0231}}},
      {"peak", {{"tflops", 0.0231}, {"source", "measured FP32 FMA throughput"}}},
      {"toolchain", {{"shaderc", "2023.2"}}},
      {"sandbox", {{"seccomp", true}}},
      {"best",
       {{"config", {{"BLOCK_X", 16}}},
        {"config_text", "BLOCK_X=16"},
        {"resources", {{"max_registers", 24}, {"spills", false}}},
        {"validation", ""}}},
      {"top", {{{"config", {{"BLOCK_X", 16}}}, {"score_ms", 2.0}}}},
      {"configs",
       {{"space", 27},
        {"rejected_by_constraint", 3},
        {"evaluated", 3},
        {"sampled", false},
        {"pruned", 3},
        {"strategy", "exhaustive"},
        {"budget", "all"},
        {"stop", "space exhausted"},
        {"reused", 0},
        {"tuning_run", 4},
        {"dispositions", {{"passed", 2}, {"incorrect", 1}}}}},
      {"phases", {{"compile_s", 0.5}, {"validate_s", 1.25}, {"tune_s", 2.0}, {"bench_s", 0.75}}},
      {"validation_seed", 1234567890123ull},
      {"task_seconds", {{"validate", 0.1}, {"screen", 0.2}, {"bench", 0.3}}},
      {"task_timeouts", {{"bench", {{"timeout_s", 60}}}}},
      {"sanitizer", {{"config", "BLOCK_X=16"}, {"report", "clean"}}},
      {"runner_starts", 2},
      {"bench", {bench}}};
}

TEST(Summary, RoundTripKeepsEverything) {
  json j = full_summary();
  auto s = summary_from_json(j);
  ASSERT_TRUE(s.is_ok()) << s.error();
  EXPECT_EQ(to_json(*s), j);
  EXPECT_EQ(to_json(*s).dump(), j.dump());
  // Through text, as the store keeps it.
  EXPECT_EQ(to_json(parse_summary(j.dump())).dump(), j.dump());
}

TEST(Summary, FieldsAreTyped) {
  EvalSummary s = summary_or_empty(full_summary());
  EXPECT_EQ(s.format, 1);
  EXPECT_EQ(s.disposition_or_default(), "passed");
  ASSERT_TRUE(s.device);
  EXPECT_EQ(s.device->name, "Test GPU");
  EXPECT_EQ(s.device->is_cpu, false);
  ASSERT_TRUE(s.peak);
  EXPECT_DOUBLE_EQ(*s.peak->tflops, 0.0231);
  ASSERT_TRUE(s.toolchain);
  EXPECT_EQ(s.toolchain->at("shaderc"), "2023.2");
  ASSERT_TRUE(s.best);
  EXPECT_EQ(s.best->config_text, "BLOCK_X=16");
  EXPECT_EQ((*s.best->resources)["max_registers"], 24);
  ASSERT_TRUE(s.top);
  ASSERT_EQ(s.top->size(), 1u);
  EXPECT_DOUBLE_EQ(*s.top->front().score_ms, 2.0);
  EXPECT_EQ((*s.top->front().config)["BLOCK_X"], 16);
  ASSERT_TRUE(s.configs);
  EXPECT_EQ(s.configs->space, 27);
  EXPECT_EQ(s.configs->tuning_run, 4);
  EXPECT_EQ(s.configs->dispositions->at("incorrect"), 1);
  EXPECT_DOUBLE_EQ(*s.phases->bench_s, 0.75);
  EXPECT_EQ(s.validation_seed, 1234567890123ull);
  EXPECT_DOUBLE_EQ(*s.task_seconds->screen, 0.2);
  EXPECT_EQ(s.sanitizer->report, "clean");
  const SummaryBench* b = s.first_bench();
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(b->passed());
  EXPECT_EQ(b->shape, "K=256 M=256 N=256");
  EXPECT_DOUBLE_EQ(*b->gflops, 16.0);
  EXPECT_EQ(b->baseline, "vendor");
  EXPECT_EQ(b->baseline_samples_ms->size(), 3u);
  // Keys not modeled stay, in the summary and in its parts.
  EXPECT_TRUE(s.extra.contains("task_timeouts"));
  EXPECT_TRUE(s.extra.contains("sandbox"));
  EXPECT_EQ(s.configs->reused, 0);
  EXPECT_DOUBLE_EQ(*b->p25_ms, 1.98);
  EXPECT_TRUE(b->extra.contains("n"));
}

TEST(Summary, WhatMadeACheckpointAndItsAttemptsAreTyped) {
  json j = full_summary();
  j["transformation"] = {{"name", "tb-tiling"}, {"version", 2}};
  j["attempts"] = 3;
  EvalSummary s = summary_or_empty(j);
  ASSERT_TRUE(s.transformation);
  EXPECT_EQ((*s.transformation)["name"], "tb-tiling");
  EXPECT_EQ(s.attempts, 3);
  EXPECT_FALSE(s.extra.contains("transformation"));
  EXPECT_EQ(to_json(s), j);
  // A bench row written as a measurement's JSON form reads into its typed fields.
  SummaryBench b = bench_from_json({{"shape", "M=1"}, {"median_ms", 0.5}, {"n", 20}});
  EXPECT_DOUBLE_EQ(*b.median_ms, 0.5);
  EXPECT_EQ(b.extra["n"], 20);
  EXPECT_EQ(to_json(*s.device)["name"], "Test GPU");
}

TEST(Summary, UnknownKeysAreWrittenBack) {
  json j = full_summary();
  j["a_future_key"] = {{"nested", {1, 2, 3}}};
  j["bench"][0]["a_future_measure"] = 7.5;
  j["device"]["pci_bus_id"] = "0000:01:00.0";
  j["top"].push_back({{"score_ms", 3.0}});  // no configuration: none is written back
  // A known key of another type than the model's is kept as it was.
  j["phases"]["tune_s"] = "unknown";
  auto s = summary_from_json(j);
  ASSERT_TRUE(s.is_ok());
  EXPECT_FALSE(s->phases->tune_s);
  EXPECT_EQ(to_json(*s), j);
}

TEST(Summary, AbsentFieldsStayAbsent) {
  json j = {{"disposition", "compile_failed"}, {"message", "error: x"}};
  auto s = summary_from_json(j);
  ASSERT_TRUE(s.is_ok());
  EXPECT_FALSE(s->bench);
  EXPECT_FALSE(s->timed());
  EXPECT_EQ(s->first_bench(), nullptr);
  EXPECT_EQ(to_json(*s), j);
  EXPECT_TRUE(summary_or_empty(json::object()).empty());
  EXPECT_EQ(to_json(EvalSummary{}), json::object());
}

// A memory-bound row: the headline, GB/s and the shares of the bandwidth and of the same-run copy
// are typed and round-trip; a row without them (older stores, GFLOP/s families) has none.
TEST(Summary, MemoryBoundMeasuresAreTypedAndOptional) {
  json row = {{"shape", "N=262144"},
              {"disposition", "passed"},
              {"median_ms", 0.002},
              {"headline", "bytes"},
              {"bytes", 4e6},
              {"gbs", 2000.0},
              {"pct_of_bandwidth", 50.0},
              {"copy_method", "memcpy"},
              {"copy_median_ms", 0.0016},
              {"copy_gbs", 2500.0},
              {"pct_of_copy", 80.0},
              {"copy_samples_ms", {0.0016}}};
  json j = {{"format", 1}, {"bench", {row}}, {"peak", {{"documented_memory_gbs", 4800.0}}}};
  auto s = summary_from_json(j);
  ASSERT_TRUE(s.is_ok()) << s.error();
  const SummaryBench& b = *s->first_bench();
  EXPECT_TRUE(b.bytes_headline());
  EXPECT_EQ(b.gbs, 2000.0);
  EXPECT_EQ(b.pct_of_copy, 80.0);
  EXPECT_EQ(b.copy_method, "memcpy");
  EXPECT_EQ(s->peak->documented_memory_gbs, 4800.0);
  EXPECT_TRUE(b.extra.empty()) << b.extra.dump();
  EXPECT_EQ(to_json(*s), j);
  EXPECT_EQ(headline_rate(b), "2000.0 GB/s (80% of copy, 50% of bandwidth)");
  // No copy timed: no share of it, never a zero.
  SummaryBench no_copy = b;
  no_copy.pct_of_copy.reset();
  EXPECT_EQ(headline_rate(no_copy, 8), "  2000.0 GB/s (50% of bandwidth)");
  // An older row (no headline) keeps the GFLOP/s headline, as before.
  SummaryBench old = bench_from_json({{"gflops", 16.0}, {"gbs", 3.0}});
  EXPECT_FALSE(old.bytes_headline());
  EXPECT_EQ(headline_rate(old, 10), "      16.0 GFLOP/s");
  EXPECT_FALSE(summary_or_empty(full_summary()).first_bench()->gbs);
}

// The summary a store of schema 1 recorded with a checkpoint (store/testdata/schema1.sql): no
// format, no options, a bench row with few fields.
json schema1_summary() {
  std::ifstream in(std::string(PEAK_SOURCE_DIR) + "/src/store/testdata/schema1.sql");
  std::stringstream text;
  text << in.rdbuf();
  const std::string sql = text.str();
  size_t at = sql.find("'{\"disposition\"");
  if (at == std::string::npos) return json();
  size_t end = sql.find('\'', at + 1);
  return json::parse(sql.substr(at + 1, end - at - 1), nullptr, false);
}

TEST(Summary, ASummaryOfAnOlderStoreReads) {
  json j = schema1_summary();
  ASSERT_TRUE(j.is_object()) << "no summary in store/testdata/schema1.sql";
  auto s = summary_from_json(j);
  ASSERT_TRUE(s.is_ok()) << s.error();
  EXPECT_FALSE(s->format);
  EXPECT_EQ(s->device->name, "llvmpipe");
  EXPECT_DOUBLE_EQ(*s->first_bench()->gflops, 2.5);
  EXPECT_FALSE(s->first_bench()->median_ms);
  EXPECT_EQ(to_json(*s), j);
  // Older still: a timed summary without a disposition reads as passed; untimed as not run.
  EXPECT_EQ(summary_or_empty(json{{"bench", {{{"shape", "M=1"}}}}}).disposition_or_default(),
            "passed");
  EXPECT_EQ(summary_or_empty(json::object()).disposition_or_default(), "not_run");
}

TEST(Summary, ANewerFormatOrNoObjectIsRefused) {
  auto s = summary_from_json(json{{"format", kEvalSummaryFormatVersion + 1}});
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.error().find("format"), std::string::npos);
  EXPECT_FALSE(summary_from_json(json::array()).is_ok());
  EXPECT_TRUE(summary_or_empty(json("text")).empty());
  EXPECT_TRUE(parse_summary("not json").empty());
}

// A suite benchmark's and a dispatch table's summaries: their parts are typed by suite_from_json
// and dispatch_from_json; the summary round-trips whole.
TEST(Summary, SuiteAndDispatchSummariesRoundTrip) {
  SuiteResult r;
  r.checkpoint = 3;
  r.config = "BLOCK_X=16";
  SuiteRow row;
  row.name = "square-256";
  row.disposition = "passed";
  row.gflops = 10;
  row.baseline_gflops = 20;
  r.rows.push_back(row);
  r.baseline = "cublas";
  finish_suite(r);
  json suite = {{"format", 1},
                {"kind", "suite"},
                {"dispatch", 7},
                {"measurements", {{{"shape", "M=1"}, {"suite", "square"}}}},
                {"suite", suite_json(r)}};
  auto s = summary_from_json(suite);
  ASSERT_TRUE(s.is_ok());
  ASSERT_TRUE(s->suite);
  EXPECT_DOUBLE_EQ(suite_from_json(*s->suite).geomean, 0.5);
  EXPECT_FALSE(s->dispatch_table);  // a suite's "dispatch" is the table's evaluation
  EXPECT_EQ(to_json(*s), suite);

  DispatchTable t;
  t.checkpoint = 3;
  DispatchVariant v;
  v.cls = "square";
  v.config = {{"BLOCK_X", 16}};
  v.evaluated = 4;
  t.variants.push_back(v);
  json dispatch = {{"format", 1},
                   {"kind", "dispatch"},
                   {"dispatch", dispatch_json(t)},
                   {"classes", json::array()}};
  auto d = summary_from_json(dispatch);
  ASSERT_TRUE(d.is_ok());
  ASSERT_TRUE(d->dispatch_table);
  EXPECT_EQ(dispatch_evaluations(dispatch_from_json(*d->dispatch_table)), 4u);
  EXPECT_EQ(to_json(*d), dispatch);
}

}  // namespace
}  // namespace peak
