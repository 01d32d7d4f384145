// Reports and stats of test stores: golden JSON and CSV, partial reports for bad input, the
// committed stores under results/, and the HTML in headless Chromium.
#include "report/report.h"

#include <sqlite3.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "report/dispatch.h"
#include "report/stats.h"
#include "report/testing.h"
#include "util/process.h"

namespace peak {
namespace {

using json = nlohmann::json;

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = make_temp_dir("peak-report-test-");
    ASSERT_TRUE(d.is_ok()) << d.error();
    tmp_ = *d;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
  Report report_of(const fs::path& where) {
    auto store = open_store_for_reading(where);
    EXPECT_TRUE(store.is_ok()) << store.error();
    if (!store) return {};
    auto r = build_report(**store);
    EXPECT_TRUE(r.is_ok()) << r.error();
    return r.is_ok() ? *r : Report{};
  }
  // Runs web/test/check-page.js on a page; returns its JSON verdict.
  json check_page(const std::string& page, std::vector<std::string> extra) {
    ProcessOptions o;
    o.argv = {"node", std::string(PEAK_SOURCE_DIR) + "/web/test/check-page.js", page};
    for (auto& e : extra) o.argv.push_back(e);
    o.timeout_s = 300;
    auto r = run_process(o);
    EXPECT_TRUE(r.is_ok()) << (r.is_ok() ? "" : r.error());
    if (!r) return json::object();
    json j = json::parse(r->out, nullptr, false);
    EXPECT_TRUE(j.is_object()) << r->out << r->err;
    return j.is_object() ? j : json::object();
  }
  // Renders `r` as the page tmp_/`name` and runs check_page on it.
  json check_report_page(const Report& r, const std::string& name, std::vector<std::string> extra) {
    auto html = render_html(r);
    EXPECT_TRUE(html.is_ok()) << html.error();
    if (!html) return json::object();
    const fs::path page = tmp_ / name;
    EXPECT_TRUE(write_file(page, *html).is_ok());
    return check_page(page.string(), std::move(extra));
  }
  fs::path tmp_;
};

TEST_F(ReportTest, CampaignReportMatchesGolden) {
  testing::write_campaign(tmp_ / "ws");
  Report r = report_of(tmp_ / "ws");
  ASSERT_EQ(r.steps.size(), 3u);
  EXPECT_EQ(r.kernel, "matmul-hlsl-fp32");
  const StepRow& tb = r.steps[1];
  EXPECT_EQ(tb.transformation, "tb-tiling");
  EXPECT_EQ(tb.attempts, 2);
  EXPECT_EQ(tb.failed_attempts, 1);
  ASSERT_EQ(tb.configs.size(), 4u);
  EXPECT_EQ(tb.configs[2].disposition, "incorrect");
  EXPECT_EQ(tb.configs[2].message, "max relative error 0.5 at C[3]");
  EXPECT_EQ(tb.configs[3].disposition, "compile_failed");
  EXPECT_TRUE(tb.configs[0].best);
  EXPECT_DOUBLE_EQ(tb.costs.llm_s, 1.5 + 1.5 + 3.0);
  EXPECT_NE(tb.diff.find("+groupshared float tile[TILE];"), std::string::npos) << tb.diff;
  EXPECT_EQ(r.steps[2].attempts, 2);
  EXPECT_EQ(r.steps[2].attempt_rows[1].disposition, "compile_failed");
  EXPECT_TRUE(r.notes.empty()) << r.notes[0];
  testing::expect_golden("report.json", testing::normalized(render_json(r)).dump(1) + "\n");
  std::string text = render_text(r);
  EXPECT_NE(text.find("tb-tiling"), std::string::npos);
  EXPECT_NE(text.find("incorrect 1, passed 2, pruned by tuning_valid 3"), std::string::npos)
      << text;
  std::string md = render_markdown(r);
  EXPECT_NE(md.find("| 2 | tb-tiling | passed | `BLOCK_X=16 BLOCK_Y=16 TILE_K=16` |"),
            std::string::npos)
      << md;
}

TEST_F(ReportTest, StatsOverTwoStoresMatchGoldens) {
  testing::write_campaign(tmp_ / "a");
  testing::write_campaign(tmp_ / "b", /*running=*/true);
  auto found = find_stores(tmp_);
  ASSERT_TRUE(found.is_ok()) << found.error();
  ASSERT_EQ(found->size(), 2u);
  std::vector<std::pair<std::string, Report>> reports;
  for (const auto& p : *found) reports.emplace_back(p.string(), report_of(p));
  Stats s = build_stats(reports);
  ASSERT_EQ(s.by_transformation.size(), 2u);
  EXPECT_EQ(s.by_transformation[0].key, "tb-tiling");
  EXPECT_EQ(s.by_transformation[0].tries, 4);
  EXPECT_EQ(s.by_transformation[0].passed, 2);
  // thread-tiling: 2 finished tries in a, 1 in b (its second is still running).
  EXPECT_EQ(s.by_transformation[1].tries, 3);
  ASSERT_FALSE(s.errors.empty());
  EXPECT_EQ(s.errors[0].count, 2);
  testing::expect_golden("stats.json", testing::normalized(render_stats_json(s)).dump(1) + "\n");
  std::string csv = render_stats_csv(s);
  // Paths differ between runs: the golden has them replaced.
  for (const auto& p : *found) {
    for (size_t at; (at = csv.find(p.string())) != std::string::npos;)
      csv.replace(at, p.string().size(), "<path>");
  }
  testing::expect_golden("stats.csv", csv);
  EXPECT_NE(render_stats_text(s).find("error taxonomy"), std::string::npos);
}

TEST_F(ReportTest, RunningCampaignGivesAPartialReportThatSaysSo) {
  testing::write_campaign(tmp_ / "ws", /*running=*/true);
  Report r = report_of(tmp_ / "ws");
  ASSERT_EQ(r.steps.size(), 3u);
  EXPECT_EQ(r.steps[2].checkpoint, 0);
  EXPECT_EQ(r.steps[2].disposition, "running");
  EXPECT_TRUE(r.live.running);
  EXPECT_FALSE(r.live.process_gone);
  EXPECT_EQ(r.live.transformation, "thread-tiling");
  ASSERT_EQ(r.live.configs.size(), 1u);
  EXPECT_DOUBLE_EQ(r.live.configs[0].score_gflops, 64.0);
  EXPECT_EQ(r.live.status, "  time 1/3 configurations");
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("is still running: this report shows what it has recorded so far"),
            std::string::npos);
  // A run whose process has ended says it was interrupted.
  json st = {{"format", 1}, {"pid", 999999999}, {"line", ""}, {"status", ""}};
  ASSERT_TRUE(write_file(tmp_ / "ws" / ".peak" / "status.json", st.dump()).is_ok());
  r = report_of(tmp_ / "ws");
  EXPECT_TRUE(r.live.process_gone);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("its process has ended: it was interrupted"), std::string::npos);
  EXPECT_EQ(r.steps[2].disposition, "interrupted");
}

TEST_F(ReportTest, BadInputGetsAClearMessage) {
  // A store of an older format (a database without peak's schema version).
  fs::create_directories(tmp_ / "old" / ".peak");
  ASSERT_TRUE(write_file(tmp_ / "old" / ".peak" / "FORMAT", "peak-store 1\n").is_ok());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((tmp_ / "old" / ".peak" / "peak.db").c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "CREATE TABLE checkpoints(id INTEGER PRIMARY KEY)", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  auto old = open_store_for_reading(tmp_ / "old");
  ASSERT_FALSE(old.is_ok());
  EXPECT_NE(old.error().find("no peak schema version"), std::string::npos) << old.error();
  // An empty workspace: a .peak folder without a database, and a folder with no store at all.
  fs::create_directories(tmp_ / "empty" / ".peak");
  auto empty = open_store_for_reading(tmp_ / "empty");
  ASSERT_FALSE(empty.is_ok());
  EXPECT_NE(empty.error().find("is an empty workspace"), std::string::npos) << empty.error();
  fs::create_directories(tmp_ / "nothing");
  auto nothing = find_stores(tmp_ / "nothing");
  ASSERT_FALSE(nothing.is_ok());
  EXPECT_NE(nothing.error().find("holds no peak store"), std::string::npos) << nothing.error();
  // A store with no checkpoint yet, and one whose seed was never evaluated.
  { ASSERT_TRUE(Store::open(tmp_ / "new" / ".peak", true).is_ok()); }
  auto fresh = open_store_for_reading(tmp_ / "new");
  ASSERT_TRUE(fresh.is_ok()) << fresh.error();
  auto none = build_report(**fresh);
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.error().find("holds no checkpoint yet"), std::string::npos) << none.error();
  {
    auto st = Store::open(tmp_ / "seed" / ".peak", true);
    ASSERT_TRUE(st.is_ok());
    CheckpointRecord c;
    c.message = "seed";
    ASSERT_TRUE((*st)->add_checkpoint(c).is_ok());
  }
  Report seed_only = report_of(tmp_ / "seed");
  ASSERT_EQ(seed_only.notes.size(), 1u);
  EXPECT_NE(seed_only.notes[0].find("no checkpoint has been evaluated yet"), std::string::npos);
  // Its HTML says so and draws no empty chart.
  json page =
      check_report_page(seed_only, "seed.html",
                        {"--charts", "0", "--expect-text", "no checkpoint has been evaluated yet"});
  EXPECT_EQ(page["ok"], true) << page.dump(1);
  EXPECT_EQ(page["canvases"], 0);
}

TEST_F(ReportTest, CommittedStoresReport) {
  auto found = find_stores(std::string(PEAK_SOURCE_DIR) + "/results");
  ASSERT_TRUE(found.is_ok()) << found.error();
  ASSERT_FALSE(found->empty());
  std::vector<std::pair<std::string, Report>> reports;
  for (const auto& p : *found) {
    Report r = report_of(p);
    ASSERT_FALSE(r.steps.empty()) << p;
    EXPECT_FALSE(r.steps.front().bench.empty()) << p << ": the seed has no numbers";
    EXPECT_FALSE(r.provenance.device.empty()) << p;
    auto store = open_store_for_reading(p);
    ASSERT_TRUE(store.is_ok());
    if (!(*store)->has_blobs()) {
      ASSERT_FALSE(r.notes.empty());
      EXPECT_NE(r.notes[0].find("no blobs folder"), std::string::npos) << r.notes[0];
    }
    reports.emplace_back(p.string(), std::move(r));
  }
  Stats s = build_stats(reports);
  EXPECT_EQ(s.campaigns.size(), found->size());
  EXPECT_FALSE(s.evolution.empty());
  EXPECT_GT(s.total.total(), 0);
}

// An HLSL report on the H100 shows cuBLAS SGEMM of the same GPU, measured by the HIP campaign
// committed beside it (hipBLAS mapped to cuBLAS), as a cross-reference; stores of another GPU
// model or precision, or without a vendor baseline, are refused with what is wrong.
TEST_F(ReportTest, ACrossReferenceComesFromAStoreOfTheSameGpuAndPrecision) {
  const fs::path results = fs::path(PEAK_SOURCE_DIR) / "results" / "h100";
  Report hlsl = report_of(results / "hlsl-fp32-large-tiles" / "store" / "peak.db");
  Report hip = report_of(results / "hip-fp32-whole" / "store" / "peak.db");
  ASSERT_FALSE(hlsl.steps.empty());
  ASSERT_FALSE(hip.steps.empty());
  EXPECT_EQ(hlsl.precision, "fp32");
  Report r = hlsl;
  ASSERT_TRUE(add_cross_reference(r, hip).is_ok());
  ASSERT_EQ(r.cross_reference.size(), 2u);  // the two bench shapes
  for (const auto& c : r.cross_reference) {
    EXPECT_EQ(c.baseline, "cublas");
    EXPECT_GT(c.gflops, 0);
    EXPECT_EQ(c.checkpoint, hip.tip) << "the newest checkpoint's measurement";
  }
  EXPECT_NE(render_markdown(r).find("- Cross-reference: cublas on the same GPU"),
            std::string::npos);
  EXPECT_NE(render_text(r).find("(the tip: "), std::string::npos);
  json j = render_json(r);
  ASSERT_TRUE(j.contains("cross_reference"));
  EXPECT_EQ(j["cross_reference"].size(), 2u);
  EXPECT_FALSE(render_json(hlsl).contains("cross_reference"));

  Report other_gpu = hip;
  other_gpu.provenance.device = "Another GPU";
  Report a = hlsl;
  Status st = add_cross_reference(a, other_gpu);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("same GPU model"), std::string::npos) << st.message();
  Report other_precision = hip;
  other_precision.precision = "fp16";
  st = add_cross_reference(a, other_precision);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("same precision"), std::string::npos) << st.message();
  st = add_cross_reference(a, hlsl);  // HLSL has no vendor library
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("no vendor-library measurement"), std::string::npos) << st.message();
  EXPECT_TRUE(a.cross_reference.empty());
}

TEST_F(ReportTest, HtmlIsOnePageWithNothingToFetch) {
  testing::write_campaign(tmp_ / "ws");
  auto html = render_html(report_of(tmp_ / "ws"));
  ASSERT_TRUE(html.is_ok()) << html.error();
  EXPECT_EQ(html->find("<script src"), std::string::npos);
  EXPECT_EQ(html->find("<link"), std::string::npos);
  EXPECT_NE(html->find("id=\"peak-data\""), std::string::npos);
  // The embedded JSON cannot close its element: "</" only appears in the page's own tags.
  size_t data = html->find("id=\"peak-data\">");
  size_t end = html->find("</script>", data);
  EXPECT_EQ(html->substr(data, end - data).find('<'), std::string::npos);
}

TEST_F(ReportTest, BrowserDrawsEveryChartAndDiffAt1280x800) {
  testing::write_campaign(tmp_ / "ws");
  json j = check_report_page(
      report_of(tmp_ / "ws"), "report.html",
      {"--charts", "5", "--diffs", "2", "--expect-text", "max relative error 0.5 at C[3]"});
  EXPECT_EQ(j["ok"], true) << j.dump(1);
  EXPECT_EQ(j["diffPanes"], 2);
  EXPECT_EQ(j["kind"], "peak-report");
}

TEST_F(ReportTest, BrowserDrawsTheStatsPage) {
  testing::write_campaign(tmp_ / "a");
  testing::write_campaign(tmp_ / "b");
  std::vector<std::pair<std::string, Report>> reports;
  reports.emplace_back("a", report_of(tmp_ / "a"));
  reports.emplace_back("b", report_of(tmp_ / "b"));
  auto html = render_stats_html(build_stats(reports));
  ASSERT_TRUE(html.is_ok()) << html.error();
  fs::path page = tmp_ / "stats.html";
  ASSERT_TRUE(write_file(page, *html).is_ok());
  json j = check_page(page.string(), {"--charts", "6", "--expect-text", "undeclared identifier"});
  EXPECT_EQ(j["ok"], true) << j.dump(1);
  EXPECT_EQ(j["kind"], "peak-stats");
}

TEST_F(ReportTest, InfrastructureFailuresAreListedApart) {
  testing::write_campaign(tmp_ / "ws");
  {
    auto st = Store::open(tmp_ / "ws" / ".peak", false);
    ASSERT_TRUE(st.is_ok()) << st.error();
    auto all = (*st)->attempts();
    ASSERT_TRUE(all.is_ok());
    // The endpoint was down twice before tb-tiling's second try: not the model's attempts.
    AttemptRecord down = all->front();
    down.id = 0;
    down.pass_index = 1;
    down.attempt = 2;
    down.disposition = "llm_error";
    down.error = "openai: cannot reach http://127.0.0.1:9/v1: Connection refused";
    down.infrastructure = true;
    ASSERT_TRUE((*st)->add_attempt(down).is_ok());
    ASSERT_TRUE((*st)->add_attempt(down).is_ok());
  }
  Report r = report_of(tmp_ / "ws");
  ASSERT_GE(r.steps.size(), 2u);
  EXPECT_EQ(r.steps[1].attempts, 2);  // the model's two tries; the endpoint's are not counted
  EXPECT_EQ(r.steps[1].failed_attempts, 1);
  std::string text = render_text(r);
  auto infra = text.find("infrastructure failures (2; not charged to the transformations):");
  ASSERT_NE(text.find("failed attempts ("), std::string::npos) << text;
  ASSERT_NE(infra, std::string::npos) << text;
  EXPECT_LT(text.find("the reply held no code block"), infra);
  EXPECT_GT(text.find("Connection refused"), infra);
  EXPECT_NE(render_markdown(r).find("## Infrastructure failures"), std::string::npos);
  json j = render_json(r);
  EXPECT_EQ(j["infrastructure_failures"].size(), 2u);
  for (const auto& f : j["failures"]) EXPECT_NE(f["disposition"], "llm_error");
}

TEST(Report, ShowsTheResourceReportOfEveryCompileTarget) {
  // A HIP build: run on NVIDIA (ptxas's report), also compiled for AMD targets (their reports).
  json resources = {
      {"max_registers", 38},
      {"max_shared_bytes", 0},
      {"spills", false},
      {"platform", "nvidia"},
      {"targets",
       {{"gfx1030",
         {{"summary", "9 VGPRs, 15 SGPRs, 0.0 KiB LDS, no scratch, no spills, 16 waves/SIMD"}}},
        {"gfx90a",
         {{"summary",
           "11 VGPRs, 0 AGPRs, 18 SGPRs, 0.0 KiB LDS, no scratch, no spills, 8 waves/SIMD"}}}}}};
  EXPECT_EQ(resources_text(resources),
            "38 registers, 0.0 KiB shared, no spills; gfx1030 (compiled, not run): 9 VGPRs, 15 "
            "SGPRs, 0.0 KiB "
            "LDS, no scratch, no spills, 16 waves/SIMD; gfx90a (compiled, not run): 11 VGPRs, 0 "
            "AGPRs, 18 SGPRs, "
            "0.0 KiB LDS, no scratch, no spills, 8 waves/SIMD");
  // An AMD-only build: the targets alone.
  json amd = {{"platform", "amd-only"}, {"targets", {{"gfx90a", {{"summary", "11 VGPRs"}}}}}};
  EXPECT_EQ(resources_text(amd), "gfx90a (compiled, not run): 11 VGPRs");
  EXPECT_EQ(resources_text(json{{"targets", {{"gfx90a", {{"summary", 3}}}}}}), "");
  // An HLSL build on NVIDIA's Vulkan driver: the registers and local memory the driver reported.
  json hlsl = {{"max_registers", 128},
               {"max_local_bytes", 784},
               {"max_shared_bytes", 47104},
               {"max_threads", 512}};
  EXPECT_EQ(resources_text(hlsl), "128 registers, 46.0 KiB shared, 784 B local memory per thread");
  // A CUDA module of several kernels: each kernel's registers, not their maximum alone.
  json two = {{"max_registers", 204},
              {"max_shared_bytes", 101376},
              {"spills", false},
              {"kernels",
               {{"attention_tc_d128", {{"registers", 204}, {"shared_bytes", 49152}}},
                {"attention_wgmma", {{"registers", 168}, {"shared_bytes", 101376}}}}}};
  EXPECT_EQ(resources_text(two),
            "registers per kernel: attention_tc_d128 204, attention_wgmma 168, up to 99.0 KiB "
            "shared, no spills");
}

// The SASS instruction mix of the best configuration (CUDA builds with cuobjdump): in words in
// every format, whole in the JSON, absent where the build has none.
TEST_F(ReportTest, ShowsTheInstructionMixOfTheBestConfiguration) {
  json sass = {
      {"format", 1},
      {"kernels",
       {{"matmul",
         {{"mangled", "_Z6matmulPKfS0_Pfiii"},
          {"instructions", 2000},
          {"opcodes",
           {{"HGMMA", 48}, {"FFMA", 12}, {"LDG", 4}, {"STG", 2}, {"BAR", 3}, {"NOP", 40}}}}},
        {"reduce",
         {{"mangled", "_Z6reducePfi"},
          {"instructions", 113},
          {"opcodes", {{"FFMA", 1}, {"QGMMA", 2}, {"UTCHMMA", 1}}}}}}}};
  json resources = {
      {"max_registers", 90}, {"max_shared_bytes", 0}, {"spills", false}, {"sass", sass}};
  const std::string mix =
      "SASS: HGMMA 48, HMMA 0, QGMMA 2, UTCHMMA 1, FFMA 13, LDS 0, LDG 4, STS 0, STG 2, BAR 3 of "
      "2113 instructions in 2 kernels";
  EXPECT_EQ(instruction_mix_text(resources), mix);
  EXPECT_EQ(resources_text(resources), "90 registers, 0.0 KiB shared, no spills");
  EXPECT_EQ(instruction_mix_text(json{{"max_registers", 1}}), "");
  json one = json::parse(
      R"({"sass": {"format": 1, "kernels": {"k": {"instructions": 20, "opcodes": {"FFMA": 12}}}}})");
  EXPECT_EQ(instruction_mix_text(one),
            "SASS: HGMMA 0, HMMA 0, FFMA 12, LDS 0, LDG 0, STS 0, STG 0, BAR 0 of 20 instructions");

  // A seed whose best build has the mix, and a step whose build has none.
  json s1 = testing::detail::summary("BLOCK_X=16 BLOCK_Y=16", 90, 2.0, 16.0, 1.0, 1.0);
  s1["best"]["resources"] = resources;
  ASSERT_NO_FATAL_FAILURE(testing::write_seed_and_step(
      tmp_ / "ws", testing::detail::kernel_toml(), s1, "tb-tiling",
      testing::detail::summary("BLOCK_X=16 BLOCK_Y=16", 32, 1.0, 32.0, 2.0, 2.0)));
  Report r = report_of(tmp_ / "ws");
  ASSERT_EQ(r.steps.size(), 2u);
  EXPECT_EQ(r.steps[0].instruction_mix, mix);
  EXPECT_EQ(r.steps[1].instruction_mix, "");
  const std::string text = render_text(r);
  EXPECT_NE(text.find("\ninstruction mix of the best configuration:\n"), std::string::npos) << text;
  EXPECT_NE(text.find(mix + "\n"), std::string::npos) << text;
  const std::string md = render_markdown(r);
  EXPECT_NE(md.find("## Instruction mix of the best configuration\n"), std::string::npos) << md;
  EXPECT_NE(md.find("| " + mix + " |\n"), std::string::npos) << md;
  json j = render_json(r);
  EXPECT_EQ(j["steps"][0]["instruction_mix"], mix);
  EXPECT_EQ(j["steps"][0]["sass"], sass);  // the whole map
  EXPECT_FALSE(j["steps"][1].contains("instruction_mix"));
  EXPECT_FALSE(j["steps"][1].contains("sass"));
  // The page shows it under the step, with a table of each kernel's opcodes.
  json checked = check_report_page(
      r, "report.html",
      {"--charts", "1", "--expect-text", "Instruction mix of the best configuration: " + mix,
       "--expect-text", "HGMMA 48, NOP 40, FFMA 12, LDG 4, BAR 3, STG 2"});
  EXPECT_EQ(checked["ok"], true) << checked.dump(1);
  // Without any mix, no section at all.
  r.steps[0].instruction_mix.clear();
  EXPECT_EQ(render_text(r).find("instruction mix"), std::string::npos);
  EXPECT_EQ(render_markdown(r).find("Instruction mix"), std::string::npos);
}

// A memory-bound kernel (bytes, no flops): the report headlines GB/s with its shares of the
// same-run copy and of the documented bandwidth, says how % of copy was measured, and the page
// places each step under the bandwidth ceilings; stats follow the same headline.
TEST_F(ReportTest, AMemoryBoundReportHeadlinesGbsAndItsShares) {
  testing::write_memory_bound_campaign(tmp_ / "ws", /*copy=*/true);
  Report r = report_of(tmp_ / "ws");
  ASSERT_EQ(r.steps.size(), 2u);
  EXPECT_TRUE(bytes_headlined(r));
  ASSERT_EQ(r.steps[1].bench.size(), 1u);
  const BenchRow& b = r.steps[1].bench[0];
  EXPECT_NEAR(b.gbs, 1048.576, 1e-6);  // 2 MiB in 2 us
  EXPECT_NEAR(b.pct_of_copy, 80, 1e-9);
  EXPECT_EQ(b.copy_method, "memcpy");
  EXPECT_EQ(r.provenance.memory_gbs, 3350);
  EXPECT_EQ(r.steps[0].bench[0].copy_method, "");  // the seed's run timed no copy
  const std::string text = render_text(r);
  EXPECT_NE(text.find("bandwidth: 3350 GB/s (documented memory bandwidth of NVIDIA H100 80GB "
                      "HBM3)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("GFLOP/s"), std::string::npos) << text;
  EXPECT_NE(text.find("  GB/s  %copy  %bandwidth  %vendor  x seed  x parent  spread\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("note: % of copy: the copy's median time over the kernel's"),
            std::string::npos)
      << text;
  const std::string md = render_markdown(r);
  EXPECT_NE(
      md.find("| shape | GB/s | % of copy | % of bandwidth | % of vendor | speedup vs seed | "
              "vs parent | spread |\n|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|"),
      std::string::npos)
      << md;
  EXPECT_NE(
      md.find("| 2 | vectorize | passed | `BLOCK=256` | N=262144 | 1048.6 | 80.0 | 31.3 | - | "
              "5.00 | 5.00 | 3.0% |"),
      std::string::npos)
      << md;
  EXPECT_NE(md.find("| 1 | seed | passed | `BLOCK=64` | N=262144 | 209.7 | - | 6.3 | - |"),
            std::string::npos)
      << md;
  json j = render_json(r);
  EXPECT_EQ(j["memory_gbs"], 3350.0);
  EXPECT_EQ(j["steps"][1]["bench"][0]["headline"], "bytes");
  EXPECT_NEAR(j["steps"][1]["bench"][0]["pct_of_copy"].get<double>(), 80, 1e-9);
  EXPECT_FALSE(j["steps"][0]["bench"][0].contains("pct_of_copy"));  // not measured: absent
  Stats st = build_stats({{"ws", r}});
  ASSERT_EQ(st.evolution.size(), 2u);
  EXPECT_TRUE(st.evolution[1].bytes_headline);
  EXPECT_NEAR(st.evolution[1].vs_seed, 5, 1e-9);  // of GB/s
  EXPECT_NE(render_stats_text(st).find("1048.6 GB/s     x5.00         -   80.0%   31.3%"),
            std::string::npos)
      << render_stats_text(st);

  json checked =
      check_report_page(r, "memory.html",
                        {"--charts", "5", "--expect-text", "Roofline", "--expect-text",
                         "under the bandwidth ceilings", "--expect-text", "% bandwidth"});
  EXPECT_EQ(checked["ok"], true) << checked.dump(1);
  bool roofline = false;
  for (const auto& c : checked["charts"]) roofline |= c["label"] == "roofline";
  EXPECT_TRUE(roofline) << checked.dump(1);
}

// Without a copy timed, no % of copy is shown and the report says it was not measured.
TEST_F(ReportTest, AMemoryBoundReportWithoutACopySaysSo) {
  testing::write_memory_bound_campaign(tmp_ / "ws", /*copy=*/false);
  Report r = report_of(tmp_ / "ws");
  ASSERT_EQ(r.steps.size(), 2u);
  EXPECT_EQ(r.steps[1].bench[0].pct_of_copy, 0);
  const std::string text = render_text(r);
  EXPECT_NE(text.find("note: % of copy: not measured (the runner timed no same-traffic copy"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("1048.6      -        31.3"), std::string::npos) << text;
}

// Steps whose context gives flops and bytes sit on the roofline at their arithmetic intensity
// under the compute and bandwidth ceilings (the measured copy's as a second line).
TEST_F(ReportTest, TheRooflinePlacesStepsAtTheirIntensity) {
  testing::write_memory_bound_campaign(tmp_ / "ws", /*copy=*/true);
  Report r = report_of(tmp_ / "ws");
  ASSERT_EQ(r.steps.size(), 2u);
  for (auto& s : r.steps)
    for (auto& b : s.bench) {
      b.gflops = b.gbs / 4;  // 0.25 FLOP per byte
      b.intensity = 0.25;
    }
  EXPECT_NE(render_text(r).find("  GB/s  %copy  %bandwidth  %vendor  GFLOP/s  x seed"),
            std::string::npos)
      << render_text(r);
  json checked = check_report_page(
      r, "roofline.html", {"--charts", "5", "--expect-text", "FLOPs per byte of its traffic"});
  EXPECT_EQ(checked["ok"], true) << checked.dump(1);
}

}  // namespace
}  // namespace peak

namespace peak {
namespace {

// A suite benchmark against a vendor library: ratios are GFLOP/s over the vendor's, the
// geometric mean covers the rows that have one, and a failed shape is a row, not an error.
SuiteResult vendor_suite() {
  SuiteResult s;
  s.checkpoint = 2;
  s.device = "Test GPU";
  s.config = "BLOCK_X=16 BLOCK_Y=16";
  s.baseline = "cublas";
  s.peak_tflops = 60;
  auto row = [](const char* name, const char* cls, const char* dims, const char* disposition,
                double gflops, double vendor) {
    SuiteRow r;
    r.name = name;
    r.cls = cls;
    r.dims = dims;
    r.disposition = disposition;
    r.gflops = gflops;
    r.baseline_gflops = vendor;
    r.samples_ms = {1.0, 1.1};
    return r;
  };
  s.rows = {row("square-2048", "square", "2048x2048x2048", "passed", 500, 1000),
            row("small-k-32", "small-k", "16384x16384x32", "passed", 800, 400),
            row("odd", "irregular", "8205x5921x2949", "passed", 300, 0),  // vendor not timed
            row("large-k", "large-k", "256x256x131072", "crashed", 0, 0)};
  s.rows[3].message = "out of memory\nsecond line";
  finish_suite(s);
  return s;
}

// A memory-bound suite without a vendor library: ratios of the same-run copy (% of copy / 100)
// where one was timed, else of the documented bandwidth.
TEST(Suite, AMemoryBoundSuiteIsRatedByCopyThenBandwidth) {
  SuiteResult s;
  s.bytes_headline = true;
  s.memory_gbs = 3350;
  SuiteRow a;
  a.name = "rows-4096";
  a.disposition = "passed";
  a.gbs = 1675;
  a.pct_of_bandwidth = 50;
  a.pct_of_copy = 80;
  s.rows = {a};
  finish_suite(s);
  EXPECT_EQ(suite_ratio_basis(s), "of copy");
  EXPECT_DOUBLE_EQ(s.rows[0].ratio, 0.8);
  const std::string text = suite_text(s);
  EXPECT_NE(text.find("GB/s  %copy  %bandwidth  vendor GB/s  ratio of copy"), std::string::npos)
      << text;
  EXPECT_NE(text.find("same-traffic copy of the same run"), std::string::npos) << text;
  SuiteResult back = suite_from_json(suite_json(s));
  EXPECT_TRUE(back.bytes_headline);
  EXPECT_DOUBLE_EQ(back.rows[0].ratio, 0.8);
  s.rows[0].pct_of_copy = 0;  // no copy timed
  finish_suite(s);
  EXPECT_EQ(suite_ratio_basis(s), "of bandwidth");
  EXPECT_DOUBLE_EQ(s.rows[0].ratio, 0.5);
  EXPECT_EQ(suite_json(s)["ratio_of"], "bandwidth");
}

// A benchmark cut after some shapes (what `peak bench -o` leaves): its JSON says so and how many
// shapes the suite has, the table's last line too; a finished one says neither.
TEST(Suite, APartialResultSaysHowManyShapesItTimed) {
  SuiteResult s = vendor_suite();
  s.shapes = 6;
  EXPECT_TRUE(s.partial());
  json j = suite_json(s);
  EXPECT_EQ(j["shapes"], 6);
  EXPECT_EQ(j["partial"], true);
  SuiteResult back = suite_from_json(j);
  EXPECT_EQ(back.shapes, 6);
  EXPECT_TRUE(back.partial());
  EXPECT_NE(suite_text(s).find("(partial: 4 of the suite's 6 shapes timed so far)"),
            std::string::npos)
      << suite_text(s);

  s.shapes = 4;
  EXPECT_FALSE(s.partial());
  j = suite_json(s);
  EXPECT_EQ(j["shapes"], 4);
  EXPECT_FALSE(j.contains("partial"));
  EXPECT_EQ(suite_text(s).find("partial"), std::string::npos) << suite_text(s);
  // An earlier store's suite has no "shapes": its rows are the suite.
  j.erase("shapes");
  back = suite_from_json(j);
  EXPECT_EQ(back.shapes, 4);
  EXPECT_FALSE(back.partial());
}

TEST(Suite, RatiosAndGeometricMean) {
  SuiteResult s = vendor_suite();
  EXPECT_DOUBLE_EQ(s.rows[0].ratio, 0.5);
  EXPECT_DOUBLE_EQ(s.rows[1].ratio, 2.0);
  EXPECT_EQ(s.rows[2].ratio, 0);
  EXPECT_EQ(s.rows[3].ratio, 0);
  EXPECT_EQ(s.rated, 2);
  EXPECT_NEAR(s.geomean, 1.0, 1e-12);  // sqrt(0.5 * 2)
  EXPECT_NEAR(geometric_mean({1, 4, 16}), 4.0, 1e-12);
  EXPECT_EQ(geometric_mean({}), 0);
  EXPECT_EQ(geometric_mean({2, 0}), 0);
  // Without a vendor library the ratios are of the peak.
  SuiteResult p = s;
  p.baseline = "";
  finish_suite(p);
  EXPECT_DOUBLE_EQ(p.rows[0].ratio, 500.0 / 60000.0);
  EXPECT_DOUBLE_EQ(p.rows[2].ratio, 300.0 / 60000.0);
  EXPECT_EQ(p.rated, 3);
  EXPECT_EQ(suite_ratio_basis(p), "of peak");
  // The JSON form reads back to the same numbers.
  SuiteResult back = suite_from_json(suite_json(s));
  EXPECT_EQ(back.rows.size(), 4u);
  EXPECT_DOUBLE_EQ(back.geomean, s.geomean);
  EXPECT_EQ(back.rows[3].message, s.rows[3].message);
  EXPECT_EQ(back.rows[1].samples_ms, s.rows[1].samples_ms);
  // The table: every shape with its class and dims, the failure as a disposition.
  std::string t = suite_text(s);
  EXPECT_NE(t.find("small-k-32"), std::string::npos) << t;
  EXPECT_NE(t.find("16384x16384x32"), std::string::npos) << t;
  EXPECT_NE(t.find("cublas GFLOP/s"), std::string::npos) << t;
  EXPECT_NE(t.find("crashed: out of memory"), std::string::npos) << t;
  EXPECT_EQ(t.find("second line"), std::string::npos) << t;
  EXPECT_NE(t.find("geometric mean of the ratios of cublas: 1.000 (100.0%) over 2 of 4 shapes"),
            std::string::npos)
      << t;
  EXPECT_NE(suite_markdown(s).find("| small-k-32 | small-k | 16384x16384x32 | 800.0 | 400.0 | "
                                   "2.000 | passed |"),
            std::string::npos)
      << suite_markdown(s);
}

// A suite benchmark stored as an evaluation of a checkpoint is shown by every report format
// and never becomes the checkpoint's result.
TEST_F(ReportTest, SuiteBenchIsShownAndIsNeverTheResult) {
  testing::write_campaign(tmp_ / "ws");
  Report before = report_of(tmp_ / "ws");
  ASSERT_GE(before.steps.size(), 2u);
  {
    auto st = Store::open(tmp_ / "ws" / ".peak", false);
    ASSERT_TRUE(st.is_ok()) << st.error();
    SuiteResult s = vendor_suite();
    json summary{
        {"format", 1}, {"kind", "suite"}, {"disposition", "passed"}, {"suite", suite_json(s)}};
    auto blob = (*st)->put_blob(summary.dump());
    ASSERT_TRUE(blob.is_ok());
    EvaluationRecord e;
    e.checkpoint_id = 2;
    e.kind = kSuiteKind;
    e.options_json = "{}";
    e.standard = false;
    e.disposition = "passed";
    e.gflops = 1e9;  // even a number above every other is not the result
    e.shape = "K=2048 M=2048 N=2048";
    e.summary_blob = *blob;
    ASSERT_TRUE((*st)->add_evaluation(e).is_ok());
    auto ev = (*st)->evaluations(2);
    ASSERT_TRUE(ev.is_ok());
    auto result = result_evaluation(*ev);
    EXPECT_TRUE(!result || (*ev)[*result].kind != kSuiteKind);
    // A checkpoint with nothing but a suite benchmark has no evaluation as its result.
    EXPECT_FALSE(result_evaluation({e}));
    // Nor is a dispatch table (`peak tune --classes`), which times the suite's classes.
    EvaluationRecord d = e;
    d.kind = kDispatchKind;
    EXPECT_FALSE(result_evaluation({d}));
    EXPECT_FALSE(result_evaluation({e, d}));
  }
  Report r = report_of(tmp_ / "ws");
  ASSERT_EQ(r.steps.size(), before.steps.size());
  const StepRow* step = nullptr;
  for (const auto& s : r.steps)
    if (s.checkpoint == 2) step = &s;
  ASSERT_TRUE(step);
  ASSERT_TRUE(step->suite);
  EXPECT_EQ(step->suite->rows.size(), 4u);
  EXPECT_NEAR(step->suite->geomean, 1.0, 1e-12);
  EXPECT_GT(step->suite->evaluation, 0);
  for (size_t i = 0; i < r.steps.size(); ++i) {
    if (r.steps[i].checkpoint != 2) {
      EXPECT_FALSE(r.steps[i].suite);
    }
    ASSERT_EQ(r.steps[i].bench.size(), before.steps[i].bench.size());
    for (size_t b = 0; b < r.steps[i].bench.size(); ++b)
      EXPECT_EQ(r.steps[i].bench[b].gflops, before.steps[i].bench[b].gflops);
  }
  std::string text = render_text(r);
  EXPECT_NE(text.find("shape suite (peak bench) of 2"), std::string::npos) << text;
  EXPECT_NE(text.find("geometric mean of the ratios of cublas: 1.000"), std::string::npos) << text;
  std::string md = render_markdown(r);
  EXPECT_NE(md.find("## Shape suite (`peak bench`)"), std::string::npos) << md;
  EXPECT_NE(md.find("| square-2048 | square | 2048x2048x2048 |"), std::string::npos) << md;
  json j = render_json(r);
  bool found = false;
  for (const auto& s : j["steps"])
    if (s.contains("suite")) {
      found = true;
      EXPECT_EQ(s["checkpoint"], 2);
      EXPECT_EQ(s["suite"]["rows"].size(), 4u);
      EXPECT_NEAR(s["suite"]["geomean"].get<double>(), 1.0, 1e-12);
    }
  EXPECT_TRUE(found);
  auto html = render_html(r);
  if (html) {
    EXPECT_NE(html->find("\"peak-suite\""), std::string::npos);
  }
}

// The dispatch table of `peak tune --classes`: its JSON form reads back, a class without a
// configuration runs the fallback, the evaluations add up, and a suite run with it shows each
// row's configuration and class.
TEST(Dispatch, TableRoundTripsAndFallsBack) {
  DispatchTable t;
  t.checkpoint = 7;
  t.device = "NVIDIA H100 80GB HBM3";
  t.fallback = {{"BLOCK", 16}};
  t.fallback_text = "BLOCK=16";
  DispatchVariant square;
  square.cls = "square";
  square.when = "M == N && N == K";
  square.shapes = {"square-2048", "square-4096"};
  square.config = {{"BLOCK", 32}};
  square.config_text = "BLOCK=32";
  square.disposition = "passed";
  square.evaluated = 12;
  square.space = 40;
  square.seconds = 31.5;
  square.gflops = 45000;
  square.baseline_gflops = 50000;
  DispatchVariant decode;
  decode.cls = "small-m";
  decode.when = "M <= 32";
  decode.shapes = {"decode-m16"};
  decode.disposition = "wrong_output";
  decode.message = "every configuration failed validation";
  decode.evaluated = 5;
  decode.space = 40;
  t.variants = {square, decode};
  EXPECT_EQ(dispatch_config(t, "square").at("BLOCK"), 32);
  EXPECT_EQ(dispatch_config(t, "small-m").at("BLOCK"), 16);  // none found: the fallback
  EXPECT_EQ(dispatch_config(t, "wide").at("BLOCK"), 16);     // not tuned: the fallback
  EXPECT_EQ(dispatch_config(t, "").at("BLOCK"), 16);         // no class: the fallback
  EXPECT_EQ(dispatch_evaluations(t), 17u);

  json j = dispatch_json(t);
  EXPECT_EQ(j["kind"], "peak-dispatch");
  EXPECT_EQ(j["format"], kDispatchFormatVersion);
  EXPECT_EQ(j["evaluations"], 17);
  DispatchTable back = dispatch_from_json(j);
  EXPECT_EQ(dispatch_json(back), j);
  EXPECT_EQ(back.variants[0].shapes, square.shapes);
  EXPECT_EQ(dispatch_from_json(json::array()).variants.size(), 0u);

  std::string text = dispatch_text(t);
  EXPECT_NE(text.find("square-2048, square-4096"), std::string::npos) << text;
  EXPECT_NE(text.find("12 of 40"), std::string::npos) << text;
  EXPECT_NE(text.find("(none found: wrong_output; runs the fallback)"), std::string::npos) << text;
  EXPECT_NE(text.find("evaluations over all classes: 17"), std::string::npos) << text;
  EXPECT_NE(text.find("vendor GFLOP/s"), std::string::npos) << text;
  EXPECT_FALSE(j["variants"][0].contains("headline"));

  // A family headlined in GB/s: the table shows GB/s, the share of the copy and the vendor's GB/s,
  // and its JSON keeps them.
  DispatchTable rows = t;
  rows.variants[0].bytes_headline = true;
  rows.variants[0].gbs = 2671.5;
  rows.variants[0].pct_of_copy = 72.3;
  rows.variants[0].baseline_gbs = 3069.4;
  const std::string rt = dispatch_text(rows);
  EXPECT_NE(rt.find("% of copy"), std::string::npos) << rt;
  EXPECT_NE(rt.find("vendor GB/s"), std::string::npos) << rt;
  EXPECT_EQ(rt.find("GFLOP/s"), std::string::npos) << rt;
  EXPECT_NE(rt.find("2671.5"), std::string::npos) << rt;
  EXPECT_NE(rt.find("72.3"), std::string::npos) << rt;
  EXPECT_NE(rt.find("3069.4"), std::string::npos) << rt;
  const DispatchTable rows_back = dispatch_from_json(dispatch_json(rows));
  EXPECT_TRUE(rows_back.variants[0].bytes_headline);
  EXPECT_EQ(rows_back.variants[0].gbs, 2671.5);
  EXPECT_EQ(dispatch_json(rows_back), dispatch_json(rows));

  SuiteResult s = vendor_suite();
  s.dispatch = 3;
  s.rows[0].config = "BLOCK=32";
  s.rows[0].dispatched_class = "square";
  std::string st = suite_text(s);
  EXPECT_NE(st.find("one configuration per shape class (dispatch table of evaluation 3"),
            std::string::npos)
      << st;
  EXPECT_NE(st.find("BLOCK=32 (square)"), std::string::npos) << st;
  SuiteResult sb = suite_from_json(suite_json(s));
  EXPECT_EQ(sb.dispatch, 3);
  EXPECT_EQ(sb.rows[0].config, "BLOCK=32");
  EXPECT_EQ(sb.rows[0].dispatched_class, "square");
  EXPECT_NE(suite_markdown(s).find("| BLOCK=32 (square) |"), std::string::npos)
      << suite_markdown(s);
}

}  // namespace
}  // namespace peak
