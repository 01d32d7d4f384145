#pragma once
// Test stores for the report tests: a small campaign written through the Store API, with
// every kind of row a report reads (a seed, two steps with their search, a step that failed,
// LLM attempts with failures, sources that differ), and deterministic numbers.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "context/testing.h"
#include "store/store.h"
#include "util/fs.h"

namespace peak::testing {

namespace detail {
inline std::string kernel_toml() {
  auto t = read_file(std::string(PEAK_SOURCE_DIR) + "/examples/matmul-hlsl-fp32/kernel.toml");
  EXPECT_TRUE(t.is_ok());
  return t.is_ok() ? *t : std::string();
}

inline nlohmann::json bench(double median_ms, double gflops, double base_gflops, double vs_seed,
                            double vs_parent) {
  using nlohmann::json;
  json b = {{"shape", "K=256 M=256 N=256"},
            {"disposition", "passed"},
            {"median_ms", median_ms},
            {"p25_ms", median_ms * 0.99},
            {"p75_ms", median_ms * 1.02},
            {"spread", 0.03},
            {"gflops", gflops},
            {"pct_of_peak", gflops / 23.1 * 100 / 1000},
            {"samples_ms", {median_ms * 0.99, median_ms, median_ms * 1.02}},
            {"speedup_vs_seed", vs_seed},
            {"speedup_vs_parent", vs_parent},
            {"clock_mhz_before", 1980.0},
            {"clock_mhz_after", 1980.0},
            {"throttled", false}};
  if (base_gflops > 0) {
    b["baseline"] = "vendor";
    b["baseline_gflops"] = base_gflops;
    b["baseline_median_ms"] = median_ms * gflops / base_gflops;
    b["baseline_spread"] = 0.01;
    b["pct_of_baseline"] = 100 * gflops / base_gflops;
    double m = median_ms * gflops / base_gflops;
    b["baseline_samples_ms"] = {m * 0.995, m, m * 1.01};
  }
  return b;
}

inline nlohmann::json summary(const std::string& best, int registers, double median_ms,
                              double gflops, double vs_seed, double vs_parent) {
  using nlohmann::json;
  return {
      {"format", 1},
      {"disposition", "passed"},
      {"peak_version", "test"},
      {"device",
       {{"name", "Test GPU"},
        {"backend", "hlsl"},
        {"driver", "1.2.3"},
        {"api", "1.3"},
        {"arch", "test"},
        {"measured_fp32_tflops", 0.0231}}},
      {"peak", {{"tflops", 0.0231}, {"source", "measured FP32 FMA throughput"}}},
      {"toolchain", {{"shaderc", "2023.2"}}},
      {"best",
       {{"config_text", best},
        {"resources",
         {{"max_registers", registers}, {"max_shared_bytes", 4096}, {"spills", false}}}}},
      {"configs",
       {{"space", 27},
        {"rejected_by_constraint", 3},
        {"evaluated", 3},
        {"sampled", false},
        {"dispositions", {{"passed", 2}, {"incorrect", 1}}}}},
      {"phases", {{"compile_s", 0.5}, {"validate_s", 1.25}, {"tune_s", 2.0}, {"bench_s", 0.75}}},
      {"bench", {bench(median_ms, gflops, gflops * 2.5, vs_seed, vs_parent)}}};
}
}  // namespace detail

inline void write_campaign(const std::filesystem::path& dir, bool running = false) {
  using nlohmann::json;
  auto opened = Store::open(dir / ".peak", true);
  ASSERT_TRUE(opened.is_ok()) << opened.error();
  Store& st = **opened;
  std::string toml = detail::kernel_toml();
  const char* seed_src =
      "// peak:begin macros\n// peak:end macros\n// peak:begin device\nfloat x;\n"
      "// peak:end device\n";
  const char* step2_src =
      "// peak:begin macros\n#define TILE 16\n// peak:end macros\n"
      "// peak:begin device\ngroupshared float tile[TILE];\nfloat x;\n"
      "// peak:end device\n";
  const char* step3_src =
      "// peak:begin macros\n#define TILE 16\n// peak:end macros\n"
      "// peak:begin device\ngroupshared float tile[TILE];\nfloat acc[4];\n"
      "// peak:end device\n";
  auto blob = [&](const std::string& text) {
    auto h = st.put_blob(text);
    EXPECT_TRUE(h.is_ok());
    return h.is_ok() ? *h : std::string();
  };
  WorkflowRecord w;
  w.kind = "run";
  w.args_json = json{{"sequence", "hlsl-fp32"}, {"llm", "replay:recordings/test"}}.dump();
  w.state_json = json{{"sequence", "hlsl-fp32"}, {"next_step", 0}}.dump();
  auto wid = st.add_workflow(w);
  ASSERT_TRUE(wid.is_ok()) << wid.error();

  CheckpointRecord seed;
  seed.branch = "main";
  seed.message = "seed";
  seed.context_blob = blob(toml);
  seed.source_blob = blob(seed_src);
  json s1 = detail::summary("BLOCK_X=16 BLOCK_Y=16", 24, 2.0, 16.0, 1.0, 1.0);
  seed.summary_json = s1.dump();
  auto c1 = st.add_checkpoint(seed);
  ASSERT_TRUE(c1.is_ok());
  ASSERT_TRUE(st.set_ref("main", *c1).is_ok());

  auto attempt = [&](const std::string& tr, int64_t parent, int pass, int n, const char* disp,
                     const std::string& error, const std::string& reply = "") {
    AttemptRecord a;
    a.workflow_id = *wid;
    a.parent_checkpoint = parent;
    a.transformation = tr;
    a.pass_index = pass;
    a.attempt = n;
    a.region = pass == 0 ? "" : (pass == 1 ? "macros" : "device");
    a.driver = pass == 0 ? "peak" : "openai";
    a.model = pass == 0 ? "" : "gpt-test";
    a.producer = pass == 0 ? "" : "openai:gpt-test";
    a.prompt_tokens = pass == 0 ? 0 : 1000 + 10 * pass;
    a.completion_tokens = pass == 0 ? 0 : 200 + pass;
    a.latency_s = pass == 0 ? 0 : 1.5 * pass;
    a.disposition = disp;
    a.error = error;
    a.reply_blob = reply;
    auto id = st.add_attempt(a);
    EXPECT_TRUE(id.is_ok()) << id.error();
    return id.is_ok() ? *id : 0;
  };
  auto build = [&](int64_t att, const json& cfg, const char* disp, double secs, int regs) {
    BuildRecord b;
    b.attempt_id = att;
    b.source_hash = "h";
    b.config_json = cfg.dump();
    b.command = "compile";
    b.exit_code = std::string(disp) == "passed" ? 0 : 1;
    b.seconds = secs;
    b.disposition = disp;
    b.resources_json =
        json{{"max_registers", regs}, {"max_shared_bytes", 2048}, {"spills", false}}.dump();
    b.toolchain = "shaderc 2023.2";
    ASSERT_TRUE(st.add_build(b).is_ok());
  };
  auto check = [&](int64_t att, const json& cfg, const char* disp, const std::string& msg) {
    ValidationRecord v;
    v.attempt_id = att;
    v.config_json = cfg.dump();
    v.shape = "K=61 M=67 N=71";
    v.disposition = disp;
    v.message = msg;
    ASSERT_TRUE(st.add_validation(v).is_ok());
  };
  auto timing = [&](std::optional<int64_t> att, std::optional<int64_t> cp, const json& cfg,
                    const char* what, double ms, double gflops) {
    MeasurementRecord m;
    m.attempt_id = att;
    m.checkpoint_id = cp;
    m.config_json = cfg.dump();
    m.shape = "K=256 M=256 N=256";
    m.what = what;
    m.samples_json = json{ms * 0.99, ms, ms * 1.01}.dump();
    m.median_ms = ms;
    m.spread = 0.02;
    m.gflops = gflops;
    m.disposition = "passed";
    m.device_json =
        json{{"name", "Test GPU"}, {"clock_mhz_before", 1980.0}, {"clock_mhz_after", 1980.0}}
            .dump();
    ASSERT_TRUE(st.add_measurement(m).is_ok());
  };
  // The seed's own evaluation rows.
  timing(std::nullopt, *c1, json{{"BLOCK_X", 16}, {"BLOCK_Y", 16}}, "candidate", 2.0, 16.0);

  // Step 2 (tb-tiling): attempt 1 fails in pass 1, attempt 2 passes.
  attempt("tb-tiling", *c1, 1, 1, "no_code", "the reply held no code block\nsecond line");
  attempt("tb-tiling", *c1, 1, 2, "passed", "");
  attempt("tb-tiling", *c1, 2, 2, "passed", "");
  std::string src2 = blob(step2_src);
  int64_t eval2 = attempt("tb-tiling", *c1, 0, 2, "not_run", "", src2);
  json a = {{"BLOCK_X", 16}, {"BLOCK_Y", 16}, {"TILE_K", 16}};
  json b = {{"BLOCK_X", 8}, {"BLOCK_Y", 8}, {"TILE_K", 16}};
  json c = {{"BLOCK_X", 32}, {"BLOCK_Y", 8}, {"TILE_K", 32}};
  json d = {{"BLOCK_X", 32}, {"BLOCK_Y", 32}, {"TILE_K", 32}};
  build(eval2, a, "passed", 0.25, 32);
  build(eval2, b, "passed", 0.5, 30);
  build(eval2, c, "passed", 0.25, 40);
  build(eval2, d, "compile_failed", 0.125, 0);
  check(eval2, a, "passed", "ok");
  check(eval2, b, "passed", "ok");
  check(eval2, c, "incorrect", "max relative error 0.5 at C[3]\ndetails");
  timing(eval2, std::nullopt, a, "screening", 1.0, 32.0);
  timing(eval2, std::nullopt, b, "screening", 1.6, 20.0);
  timing(eval2, std::nullopt, a, "candidate", 1.0, 32.0);
  timing(eval2, std::nullopt, a, "baseline:vendor", 0.4, 80.0);
  CheckpointRecord s2;
  s2.parent = *c1;
  s2.branch = "main";
  s2.transformation = "tb-tiling";
  s2.message = "apply tb-tiling";
  s2.context_blob = seed.context_blob;
  s2.source_blob = src2;
  json sum2 = detail::summary("BLOCK_X=16 BLOCK_Y=16 TILE_K=16", 32, 1.0, 32.0, 2.0, 2.0);
  sum2["top"] =
      json::array({{{"config", a}, {"score_ms", 1.0}}, {{"config", b}, {"score_ms", 1.6}}});
  sum2["best"]["config"] = a;
  s2.summary_json = sum2.dump();
  auto c2 = st.add_checkpoint(s2);
  ASSERT_TRUE(c2.is_ok());
  ASSERT_TRUE(st.attach_attempt_to_checkpoint(eval2, *c2).is_ok());
  ASSERT_TRUE(st.set_ref("main", *c2).is_ok());

  // Step 3 (thread-tiling): the first attempt fails to compile everywhere; the second is either
  // still being evaluated (running) or passes.
  attempt("thread-tiling", *c2, 1, 1, "passed", "");
  std::string src3 = blob(step3_src);
  int64_t eval3a = attempt("thread-tiling", *c2, 0, 1, "not_run", "", src3);
  build(eval3a, a, "compile_failed", 0.5, 0);
  attempt("thread-tiling", *c2, 0, 1, "compile_failed",
          "configuration BLOCK_X=16: error: undeclared identifier 'acc'\nmore", src3);
  attempt("thread-tiling", *c2, 1, 2, "passed", "");
  int64_t eval3b = attempt("thread-tiling", *c2, 0, 2, "not_run", "", src3);
  build(eval3b, a, "passed", 0.5, 64);
  check(eval3b, a, "passed", "ok");
  timing(eval3b, std::nullopt, a, "screening", 0.5, 64.0);
  if (running) {
    ASSERT_TRUE(st.update_workflow(*wid, "running",
                                   json{{"sequence", "hlsl-fp32"}, {"next_step", 1}}.dump())
                    .is_ok());
    ASSERT_TRUE(write_file(dir / ".peak" / "status.json",
                           json{{"format", 1},
                                {"pid", static_cast<int64_t>(::getpid())},
                                {"updated_unix", 1.0},
                                {"line", "thread-tiling: evaluating the candidate (attempt 2) ..."},
                                {"status", "  time 1/3 configurations"}}
                               .dump())
                    .is_ok());
    return;
  }
  timing(eval3b, std::nullopt, a, "candidate", 0.5, 64.0);
  timing(eval3b, std::nullopt, a, "baseline:vendor", 0.4, 80.0);
  CheckpointRecord s3 = s2;
  s3.parent = *c2;
  s3.transformation = "thread-tiling";
  s3.message = "apply thread-tiling";
  s3.source_blob = src3;
  json sum3 = detail::summary("BLOCK_X=16 BLOCK_Y=16 TILE_K=16", 64, 0.5, 64.0, 4.0, 2.0);
  sum3["best"]["config"] = a;
  sum3["configs"]["dispositions"] = {{"passed", 1}};
  s3.summary_json = sum3.dump();
  auto c3 = st.add_checkpoint(s3);
  ASSERT_TRUE(c3.is_ok());
  ASSERT_TRUE(st.attach_attempt_to_checkpoint(eval3b, *c3).is_ok());
  ASSERT_TRUE(st.set_ref("main", *c3).is_ok());
  ASSERT_TRUE(
      st.update_workflow(*wid, "done", json{{"sequence", "hlsl-fp32"}, {"next_step", 2}}.dump())
          .is_ok());
}

namespace detail {
// The summary of a memory-bound kernel (context/testing.h kCopyBytesToml: 8 * N bytes, no flops)
// timed at N = 262144 in `median_ms` on an H100 SXM (3350 GB/s documented): its bench row headlined
// with GB/s, with the same-run copy's time when `copy_ms` > 0.
inline nlohmann::json memory_bound_summary(const std::string& best, double median_ms,
                                           double copy_ms, double vs_seed, double vs_parent) {
  nlohmann::json s = summary(best, 32, median_ms, 0.0, vs_seed, vs_parent);
  s["device"]["name"] = "NVIDIA H100 80GB HBM3";
  s["peak"] = {{"tflops", 67.0},
               {"source", "documented FP32 peak of H100 SXM"},
               {"documented_memory_gbs", 3350.0}};
  nlohmann::json& b = s["bench"][0];
  const double bytes = 8.0 * 262144;
  b["shape"] = "N=262144";
  b.erase("gflops");
  b.erase("pct_of_peak");
  b["headline"] = "bytes";
  b["bytes"] = bytes;
  b["gbs"] = bytes / (median_ms * 1e-3) / 1e9;
  b["pct_of_bandwidth"] = 100 * b["gbs"].get<double>() / 3350;
  if (copy_ms > 0) {
    b["copy_method"] = "memcpy";
    b["copy_median_ms"] = copy_ms;
    b["copy_gbs"] = bytes / (copy_ms * 1e-3) / 1e9;
    b["pct_of_copy"] = 100 * copy_ms / median_ms;
    b["copy_samples_ms"] = {copy_ms};
  }
  return s;
}
}  // namespace detail

// A store of two checkpoints of the context `toml`: a seed with the summary `seed_summary` and one
// step of `transformation` with `step_summary`, the step at HEAD.
inline void write_seed_and_step(const std::filesystem::path& dir, const std::string& toml,
                                const nlohmann::json& seed_summary,
                                const std::string& transformation,
                                const nlohmann::json& step_summary) {
  auto opened = Store::open(dir / ".peak", true);
  ASSERT_TRUE(opened.is_ok()) << opened.error();
  Store& st = **opened;
  CheckpointRecord seed;
  seed.branch = "main";
  seed.message = "seed";
  seed.context_blob = *st.put_blob(toml);
  seed.source_blob = *st.put_blob("// peak:begin device\nfloat x;\n// peak:end device\n");
  seed.summary_json = seed_summary.dump();
  auto c1 = st.add_checkpoint(seed);
  ASSERT_TRUE(c1.is_ok()) << c1.error();
  CheckpointRecord next = seed;
  next.parent = *c1;
  next.transformation = transformation;
  next.message = "apply " + transformation;
  next.summary_json = step_summary.dump();
  auto c2 = st.add_checkpoint(next);
  ASSERT_TRUE(c2.is_ok()) << c2.error();
  ASSERT_TRUE(st.set_ref("main", *c2).is_ok());
}

// A memory-bound campaign: a seed and one step of kCopyBytesToml, the step's copy timed when
// `copy` (the seed's never).
inline void write_memory_bound_campaign(const std::filesystem::path& dir, bool copy) {
  write_seed_and_step(
      dir, std::string(kCopyBytesToml), detail::memory_bound_summary("BLOCK=64", 0.01, 0, 1.0, 1.0),
      "vectorize", detail::memory_bound_summary("BLOCK=256", 0.002, copy ? 0.0016 : 0, 5.0, 5.0));
}

inline nlohmann::json normalized(nlohmann::json j) {
  if (j.is_object()) {
    for (auto& [k, v] : j.items()) {
      if (k == "created_at" || k == "started_at" || k == "finished_at")
        v = v.get<std::string>().empty() ? "" : "<time>";
      else if (k == "source" || k == "label" || k == "campaign")
        v = v.is_string() && v.get<std::string>() != "all" ? "<path>" : v;
      else if (k == "report_version")
        v = "<version>";
      else if (k == "updated_unix")
        v = 0;
      else
        v = normalized(v);
    }
  } else if (j.is_array()) {
    for (auto& v : j) v = normalized(v);
  } else if (j.is_string()) {
    // Notes name the store's temporary folder.
    std::string s = j.get<std::string>();
    auto at = s.find("/peak-report-test-");
    if (at != std::string::npos) {
      auto end = s.find_first_of(" :", at);
      s = s.substr(0, at) + "<tmp>" + (end == std::string::npos ? "" : s.substr(end));
    }
    j = s;
  }
  return j;
}

inline void expect_golden(const std::string& name, const std::string& actual) {
  const std::string path = std::string(PEAK_SOURCE_DIR) + "/src/report/testdata/" + name;
  const char* update = std::getenv("PEAK_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    ASSERT_TRUE(write_file(path, actual).is_ok()) << path;
    return;
  }
  auto expected = read_file(path);
  ASSERT_TRUE(expected.is_ok()) << expected.error()
                                << " (run with PEAK_UPDATE_GOLDEN=1 to create it)";
  if (*expected == actual) return;
  auto a = split_lines(actual), e = split_lines(*expected);
  size_t i = 0;
  while (i < a.size() && i < e.size() && a[i] == e[i]) ++i;
  ADD_FAILURE() << "output differs from " << path << " at line " << i + 1
                << "\n  expected: " << (i < e.size() ? e[i] : "<end>")
                << "\n  actual:   " << (i < a.size() ? a[i] : "<end>")
                << "\n(run with PEAK_UPDATE_GOLDEN=1 to accept the new output)";
}

}  // namespace peak::testing
