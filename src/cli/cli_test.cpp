// End-to-end tests of the peak binary on the CPU Vulkan device (lavapipe): a recorded campaign
// replayed through `peak run`, and bad input of every kind giving a clear message, a recorded
// disposition and an intact store.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/testing.h"
#include "tune/cache.h"
#include "tune/testing.h"
#include "util/fs.h"
#include "util/process.h"

namespace peak {
namespace {

using json = nlohmann::json;

using namespace peak::testing;

// Whether child `pid` has ended (it stays a zombie for Subprocess::wait to reap).
bool exited(int pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == pid;
}

TEST_F(Cli, HelpListsEverySubcommand) {
  Out o = peak({"--help"});
  EXPECT_EQ(o.code, 0);
  for (const char* c : {"init",     "transformations",
                        "apply",    "run",
                        "respond",  "validate",
                        "tune",     "log",
                        "show",     "diff",
                        "checkout", "branch",
                        "report",   "doctor",
                        "demo",     "commit",
                        "status",   "stash",
                        "tag",      "export-space",
                        "bench"})
    EXPECT_NE(o.out.find(c), std::string::npos) << c;
  EXPECT_NE(o.out.find("Exit codes"), std::string::npos);
}

TEST_F(Cli, TransformationsListAndUnknownName) {
  Out o = peak({"transformations", "list"});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("tb-tiling"), std::string::npos);
  fs::path ws = workspace_with_device("ws", "");
  Out bad = peak({"apply", "tb-tilling", "--llm", "manual"}, ws);
  EXPECT_EQ(bad.code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("did you mean 'tb-tiling'"), std::string::npos) << bad.err;
}

TEST_F(Cli, MalformedKernelTomlNamesLineAndColumn) {
  fs::path ctx = tmp_ / "ctx";
  ASSERT_TRUE(write_file(ctx / "kernel.toml", "format = 1\nname = \"x\"\nbackend = = \"hlsl\"\n"));
  Out o = peak({"init", ctx.string(), (tmp_ / "w").string()});
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("kernel.toml:3:"), std::string::npos) << o.err;
}

TEST_F(Cli, MissingRegionMarkersAreRefused) {
  fs::path ctx = tmp_ / "ctx";
  fs::copy(fs::path(PEAK_SOURCE_DIR) / "examples/matmul-hlsl-fp32", ctx,
           fs::copy_options::recursive);
  auto src = read_file(ctx / "kernel.hlsl");
  ASSERT_TRUE(src);
  ASSERT_TRUE(write_file(ctx / "kernel.hlsl", replace_all(*src, "// peak:end host", "")));
  Out o = peak({"init", ctx.string(), (tmp_ / "w").string()});
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("peak:end host"), std::string::npos) << o.err;
}

TEST_F(Cli, BadKernelsGetTheirDispositionAndTheStoreIsIntact) {
  struct Case {
    const char* name;
    const char* device;
    const char* disposition;
    const char* host = "";
  };
  const Case cases[] = {
      {"compile",
       "[numthreads(BLOCK_X, BLOCK_Y, 1)]\nvoid main(uint3 t : SV_DispatchThreadID) { C[0] = "
       "undefined_name; }\n",
       "compile_failed"},
      {"hang",
       "[numthreads(BLOCK_X, BLOCK_Y, 1)]\nvoid main(uint3 t : SV_DispatchThreadID) {\n"
       "  int i = 0; [loop] while (A[0] < 1e30f) { i++; if (i == -5) break; }\n"
       "  if ((int)t.y < M && (int)t.x < N) C[t.y * N + t.x] = (float)i; }\n",
       "timeout",
       // A CPU Vulkan device ends loops after 65535 iterations: many groups keep it busy for
       // minutes.
       "launch main\n  grid = (65535, 64)\n"},
      {"oob",
       "[numthreads(BLOCK_X, BLOCK_Y, 1)]\nvoid main(uint3 t : SV_DispatchThreadID) {\n"
       "  int row = (int)t.y, col = (int)t.x; if (row >= M || col >= N) return;\n"
       "  float acc = 0.0f; for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];\n"
       "  C[row * N + col] = acc; if (row == 0 && col == 0) C[M * N + 5] = 1.0f; }\n",
       "out_of_bounds"},
      {"unwritten",
       "[numthreads(BLOCK_X, BLOCK_Y, 1)]\nvoid main(uint3 t : SV_DispatchThreadID) {\n"
       "  int row = (int)t.y, col = (int)t.x; if (row >= M || col >= N || row >= M / 2) return;\n"
       "  float acc = 0.0f; for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];\n"
       "  C[row * N + col] = acc; }\n",
       "unwritten_output"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    fs::path ws = workspace_with_device(c.name, c.device, c.host);
    size_t before = checkpoints(ws);
    // A hung kernel is caught after 3 s instead of the runner's 30; the others keep the 30 s
    // (their hidden shapes are drawn anew each time, and a large one may take seconds here).
    std::map<std::string, std::string> env;
    if (c.disposition == std::string("timeout")) env["PEAK_RUNNER_FENCE_TIMEOUT_S"] = "3";
    json j = commit_json(ws, env);
    EXPECT_EQ(j.value("disposition", ""), c.disposition) << j.dump(2);
    EXPECT_FALSE(j.value("message", "").empty());
    EXPECT_EQ(checkpoints(ws), before);
  }
}

TEST_F(Cli, KernelModifyingItsInputsIsCaught) {
  // The inputs are declared read-write here so that the shader can write them.
  fs::path ws = workspace_with_device(
      "inputs",
      "[numthreads(BLOCK_X, BLOCK_Y, 1)]\nvoid main(uint3 t : SV_DispatchThreadID) {\n"
      "  int row = (int)t.y, col = (int)t.x; if (row >= M || col >= N) return;\n"
      "  float acc = 0.0f; for (int k = 0; k < K; ++k) acc += A2[row * K + k] * B[k * N + col];\n"
      "  C[row * N + col] = acc; if (row == 0 && col == 0) A2[0] = 42.0f; }\n");
  auto src = read_file(ws / "kernel.hlsl");
  ASSERT_TRUE(src);
  ASSERT_TRUE(write_file(
      ws / "kernel.hlsl",
      replace_all(*src, "// peak:begin device\n",
                  "// peak:begin device\n[[vk::binding(0, 0)]] RWStructuredBuffer<float> A2;\n")));
  json j = commit_json(ws);
  EXPECT_EQ(j.value("disposition", ""), "inputs_modified") << j.dump(2);
}

TEST_F(Cli, RunReplaysTheRecordedCampaignEndToEnd) {
  fs::path ws = workspace_with_device("campaign", "");
  std::string rec = std::string("replay:") + PEAK_SOURCE_DIR + "/recordings/hlsl-fp32";
  // A harness-side timeout is injected into the first candidate's evaluation: it is evaluated
  // again, not charged, and the prompts stay those of the recording.
  std::string seq = "hlsl-fp32-short";  // the steps the recording covers
  Out o = peak({"-q", "--json", "run", seq, "--llm", rec, "--budget", "3", "--small"}, ws,
               {{"PEAK_FAULT", "eval.task-timeout#1"}});
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  json j = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << o.out;
  EXPECT_EQ(j["steps_done"], 3);
  EXPECT_EQ(checkpoints(ws), 4u);
  Out rep = peak({"report", "--format", "json"}, ws);
  ASSERT_EQ(rep.code, 0) << rep.err;
  json r = json::parse(rep.out, nullptr, false);
  ASSERT_EQ(r["steps"].size(), 4u);
  for (const auto& s : r["steps"]) {
    EXPECT_EQ(s["disposition"], "passed") << s.dump();
    ASSERT_FALSE(s["bench"].empty());
    EXPECT_GT(s["bench"][0]["gflops"].get<double>(), 0);
  }
  EXPECT_EQ(r["steps"][3]["transformation"], "thread-tiling");
  EXPECT_TRUE(r["failures"].empty()) << r["failures"].dump();
  // The injected timeout; a busy machine may add real ones, evaluated again and not charged
  // either.
  ASSERT_GE(r["infrastructure_failures"].size(), 1u) << r.dump();
  EXPECT_EQ(r["infrastructure_failures"][0]["disposition"], "timeout");
  EXPECT_NE(r["infrastructure_failures"][0]["error"].get<std::string>().find("injected"),
            std::string::npos)
      << r.dump();
  Out d = peak({"diff", "2", "3"}, ws);
  EXPECT_EQ(d.code, 0);
  EXPECT_NE(d.out.find("groupshared"), std::string::npos);
  // History: branch, checkout, and the working files follow.
  EXPECT_EQ(peak({"branch", "experiment", "seed"}, ws).code, 0);
  auto src = read_file(ws / "kernel.hlsl");
  ASSERT_TRUE(src);
  EXPECT_EQ(src->find("groupshared"), std::string::npos);
  EXPECT_EQ(peak({"checkout", "main"}, ws).code, 0);
  src = read_file(ws / "kernel.hlsl");
  EXPECT_NE(src->find("TRD_X_DIM"), std::string::npos);
  // A replay of a prompt that was never recorded says which step and attempt, shows the nearest
  // recording and how to record; nothing is charged to the transformation (exit code 4).
  Out miss = peak({"apply", "thread-tiling", "--llm", rec, "--budget", "1"}, ws);
  EXPECT_EQ(miss.code, 4) << miss.err;
  EXPECT_NE(miss.err.find("no recorded reply for thread-tiling pass 1/"), std::string::npos)
      << miss.err;
  EXPECT_NE(miss.err.find("attempt 1"), std::string::npos) << miss.err;
  EXPECT_NE(miss.err.find("The nearest recording is"), std::string::npos) << miss.err;
  EXPECT_NE(miss.err.find("--record DIR"), std::string::npos) << miss.err;
  EXPECT_NE(miss.err.find("Nothing was charged"), std::string::npos) << miss.err;
}

// `peak demo` on a CPU device replays the whole sequence where its recording exists, with two
// tuning configurations per step, and the first three steps where it does not. Checked on a data
// folder whose recordings hold no reply, so that the demo stops before the first step.
TEST_F(Cli, DemoOnACpuDeviceChoosesTheWholeSequence) {
  fs::path data = tmp_ / "data";
  fs::create_directories(data);
  for (const char* d : {"examples", "sequences", "transformations"})
    fs::create_directory_symlink(fs::path(PEAK_SOURCE_DIR) / d, data / d);
  for (const char* r : {"hlsl-fp32", "hlsl-fp32-full"}) {
    fs::create_directories(data / "recordings" / r);
    fs::copy_file(fs::path(PEAK_SOURCE_DIR) / "recordings" / r / "device.json",
                  data / "recordings" / r / "device.json");
  }
  auto demo = [&](const std::string& name, std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"demo", "--backend", "hlsl", "--device", "llvmpipe", "--dir"};
    args.push_back((tmp_ / name).string());
    args.insert(args.end(), more.begin(), more.end());
    return peak(args, {}, {{"PEAK_DATA_DIR", data.string()}});
  };
  Out whole = demo("whole");
  EXPECT_EQ(whole.code, 4) << whole.out << whole.err;  // no recorded reply
  EXPECT_NE(whole.out.find("peak demo: hlsl-fp32 (14 steps) on llvmpipe"), std::string::npos)
      << whole.out;
  EXPECT_NE(whole.out.find("recordings/hlsl-fp32-full"), std::string::npos) << whole.out;
  EXPECT_NE(whole.out.find("at most 2 tuning configurations per step (a CPU device"),
            std::string::npos)
      << whole.out;
  // --full: the bench shapes, and no budget of its own.
  Out full = demo("full", {"--full"});
  EXPECT_EQ(full.code, 4) << full.out << full.err;
  EXPECT_NE(full.out.find("peak demo: hlsl-fp32 (14 steps) on llvmpipe"), std::string::npos)
      << full.out;
  EXPECT_EQ(full.out.find("tuning configurations per step"), std::string::npos) << full.out;
  fs::remove_all(data / "recordings" / "hlsl-fp32-full");
  Out three = demo("three");
  EXPECT_EQ(three.code, 4) << three.out << three.err;
  EXPECT_NE(three.out.find("peak demo: hlsl-fp32-short (3 steps) on llvmpipe"), std::string::npos)
      << three.out;
  EXPECT_EQ(three.out.find("tuning configurations per step"), std::string::npos) << three.out;
}

// A family with no context for the backend, or with no recorded campaign, is refused before
// anything runs, saying where peak looked; a family's campaign uses its own recording (checked
// without replies, as above).
TEST_F(Cli, DemoOfAnotherFamilyUsesItsOwnCampaign) {
  Out none = peak({"demo", "--family", "nosuch", "--backend", "hlsl"});
  EXPECT_EQ(none.code, 2) << none.out << none.err;
  EXPECT_NE(none.err.find("no nosuch context for the hlsl backend"), std::string::npos) << none.err;
  EXPECT_NE(none.err.find("(--family: attention, matmul, softmax)"), std::string::npos) << none.err;
  Out nodata =
      peak({"demo", "--backend", "hlsl"}, {}, {{"PEAK_DATA_DIR", (tmp_ / "none").string()}});
  EXPECT_EQ(nodata.code, 4) << nodata.out << nodata.err;
  EXPECT_NE(nodata.err.find("examples is missing (set PEAK_DATA_DIR"), std::string::npos)
      << nodata.err;
  fs::path data = tmp_ / "data";
  fs::create_directories(data / "recordings" / "softmax-hlsl");
  for (const char* d : {"examples", "sequences", "transformations"})
    fs::create_directory_symlink(fs::path(PEAK_SOURCE_DIR) / d, data / d);
  fs::copy_file(fs::path(PEAK_SOURCE_DIR) / "recordings/softmax-hlsl/device.json",
                data / "recordings/softmax-hlsl/device.json");
  Out o = peak({"demo", "--family", "softmax", "--backend", "hlsl", "--device", "llvmpipe", "--dir",
                (tmp_ / "ws").string()},
               {}, {{"PEAK_DATA_DIR", data.string()}});
  EXPECT_EQ(o.code, 4) << o.out << o.err;  // no recorded reply
  EXPECT_NE(o.out.find("peak demo: softmax-hlsl (9 steps) on llvmpipe"), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("recordings/softmax-hlsl"), std::string::npos) << o.out;
  // A family with a context but no recorded campaign (here: every family but softmax) says which
  // families have one.
  Out unrecorded = peak({"demo", "--family", "attention", "--backend", "hlsl"}, {},
                        {{"PEAK_DATA_DIR", data.string()}});
  EXPECT_EQ(unrecorded.code, 2) << unrecorded.out << unrecorded.err;
  EXPECT_NE(unrecorded.err.find("family attention has a hlsl context but no recorded campaign"),
            std::string::npos)
      << unrecorded.err;
  EXPECT_NE(unrecorded.err.find("--family with one: softmax"), std::string::npos) << unrecorded.err;
}

TEST_F(Cli, ManualModeWaitsRespondsAndResumes) {
  fs::path ws = workspace_with_device("manual", "");
  std::string dev = std::string(PEAK_SOURCE_DIR) + "/recordings/hlsl-fp32/device.json";
  std::vector<std::string> run = {"-q", "run",     "hlsl-fp32",       "--llm", "manual", "--budget",
                                  "1",  "--small", "--prompt-device", dev,     "--by",   "test"};
  std::vector<std::string> run_json = run;
  run_json.insert(run_json.begin(), "--json");
  Out first = peak(run_json, ws);
  ASSERT_EQ(first.code, 3) << first.out << first.err;  // waiting for a reply
  json waiting = json::parse(first.out, nullptr, false);
  ASSERT_TRUE(waiting.is_object()) << first.out;
  EXPECT_EQ(waiting["prompt"]["id"], "0001");
  EXPECT_NE(waiting["prompt"]["path"].get<std::string>().find("0001.prompt.md"), std::string::npos);
  EXPECT_NE(waiting["message"].get<std::string>().find("peak respond 0001"), std::string::npos);
  EXPECT_TRUE(fs::exists(ws / ".peak/manual/0001.prompt.md"));
  // Answer with the reply recorded for this very prompt (the first recorded exchange).
  fs::path rec;
  for (const auto& e : fs::directory_iterator(fs::path(PEAK_SOURCE_DIR) / "recordings/hlsl-fp32"))
    if (e.path().filename().string().rfind("0001-", 0) == 0) rec = e.path();
  ASSERT_FALSE(rec.empty());
  json r = json::parse(*read_file(rec));
  ASSERT_TRUE(write_file(tmp_ / "reply.md", r["reply"].get<std::string>()));
  Out resp = peak({"respond", "0001", (tmp_ / "reply.md").string(), "--by", "test"}, ws);
  ASSERT_EQ(resp.code, 0) << resp.err;
  run.push_back("--resume");
  Out second = peak(run, ws);
  EXPECT_EQ(second.code, 3) << second.out << second.err;  // the next pass waits now
  EXPECT_TRUE(fs::exists(ws / ".peak/manual/0002.prompt.md"));
  Out list = peak({"--json", "respond", "--list"}, ws);
  json l = json::parse(list.out, nullptr, false);
  ASSERT_TRUE(l.is_array()) << list.out;
  EXPECT_EQ(l.size(), 2u);
}

TEST_F(Cli, KilledRunResumesWhereItStopped) {
  fs::path ws = workspace_with_device("killed", "");
  std::string rec = std::string("replay:") + PEAK_SOURCE_DIR + "/recordings/hlsl-fp32";
  std::string seq = "hlsl-fp32-short";  // the steps the recording covers
  Subprocess p;
  ProcessOptions o;
  o.argv = {std::string(PEAK_BINARY_DIR) + "/peak",
            "-q",
            "run",
            seq,
            "--llm",
            rec,
            "--budget",
            "2",
            "--small"};
  o.cwd = ws;
  o.env["PEAK_DATA_DIR"] = PEAK_SOURCE_DIR;
  ASSERT_TRUE(p.start(o));
  // Wait until the first step has made its checkpoint, then kill -9 in the middle of the next.
  // No clock bounds the wait (the device lock may be held by another peak for as long as it
  // takes): it ends with the checkpoint, or with the run's process (ctest's timeout bounds it).
  while (checkpoints(ws) < 2 && !exited(p.pid())) ::usleep(200 * 1000);
  ASSERT_GE(checkpoints(ws), 2u) << "the run ended before its first checkpoint: " << p.err();
  ::usleep(300 * 1000);
  int owner = p.pid();
  p.kill_group();
  size_t kept = checkpoints(ws);
  EXPECT_GE(kept, 2u);
  // Its process is gone: log and status show the run interrupted, with how to continue.
  json st = status(ws);
  ASSERT_EQ(st["workflows"].size(), 1u) << st.dump();
  EXPECT_EQ(st["workflows"][0]["status"], "interrupted");
  EXPECT_EQ(st["workflows"][0]["owner"]["pid"], owner);
  Out log = peak({"log"}, ws);
  EXPECT_NE(log.out.find("interrupted"), std::string::npos) << log.out;
  EXPECT_NE(log.out.find("peak run hlsl-fp32-short --resume"), std::string::npos) << log.out;
  Out again =
      peak({"-q", "--json", "run", seq, "--llm", rec, "--budget", "2", "--small", "--resume"}, ws);
  ASSERT_EQ(again.code, 0) << again.out << again.err;
  EXPECT_EQ(checkpoints(ws), 4u);
  json done = status(ws);
  EXPECT_TRUE(done["workflows"].empty()) << done.dump();  // taken over, and passed
  Out rep = peak({"report", "--format", "json"}, ws);
  json r = json::parse(rep.out, nullptr, false);
  ASSERT_EQ(r["steps"].size(), 4u);
  EXPECT_EQ(r["steps"][1]["transformation"], "refactor");
  EXPECT_EQ(r["steps"][3]["transformation"], "thread-tiling");
}

// A run stopped after a step made its checkpoint but before the run's record said so resumes
// after that step: the step is not asked again on its own checkpoint (where the recorded replies
// would no longer match and the run could never finish).
TEST_F(Cli, ResumeAfterAStopBetweenACheckpointAndTheRunsRecordGoesOn) {
  fs::path ws = workspace_with_device("between", "");
  fs::path seq = tmp_ / "two.toml";
  ASSERT_TRUE(write_file(seq,
                         "format = 2\nname = \"two\"\ndescription = \"two steps\"\n"
                         "[[step]]\ntransformation = \"refactor\"\n"
                         "[[step]]\ntransformation = \"tb-tiling\"\n"));
  const std::string rec = std::string("replay:") + PEAK_SOURCE_DIR + "/recordings/hlsl-fp32";
  std::vector<std::string> run = {"run", seq.string(), "--llm", rec, "--budget", "1", "--small"};
  Out first = peak(run, ws);
  ASSERT_EQ(first.code, 0) << first.out << first.err;
  ASSERT_EQ(checkpoints(ws), 3u);
  {
    // The record as a stop between tb-tiling's checkpoint (3, made on 2) and the run's update
    // leaves it: step 2 under way on checkpoint 2 (written into the store's workflows table as
    // the run would have).
    json state = {{"sequence", "two"},
                  {"next_step", 1},
                  {"step", {{"transformation", "tb-tiling"}, {"parent", 2}}}};
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((ws / ".peak" / "peak.db").c_str(), &db), SQLITE_OK);
    const std::string sql = "UPDATE workflows SET status = 'interrupted', state_json = '" +
                            state.dump() + "' WHERE kind = 'run'";
    char* err = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
    EXPECT_EQ(sqlite3_changes(db), 1);
    sqlite3_free(err);
    sqlite3_close(db);
  }
  run.push_back("--resume");
  Out again = peak(run, ws);
  ASSERT_EQ(again.code, 0) << again.out << again.err;
  EXPECT_NE((again.out + again.err)
                .find("step 2 (tb-tiling) had made checkpoint 3 when the run "
                      "stopped"),
            std::string::npos)
      << again.out << again.err;
  EXPECT_EQ(checkpoints(ws), 3u);
  EXPECT_TRUE(status(ws)["workflows"].empty());  // passed
}

// A non-exhaustive strategy on lavapipe: the search is recorded and exported as a tuning cache.
TEST_F(Cli, TuneWithAStrategyRecordsAndExportsTheSearch) {
  fs::path ws = workspace_with_device("tune", "");
  fs::path cache = tmp_ / "space.json";
  Out o = peak({"-q", "--json", "tune", "--small", "--strategy", "basin", "--strategy-budget", "4",
                "--tune", "BLOCK_X=8,16,32", "--export-space", cache.string()},
               ws);
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  json s = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(s.is_object()) << o.out;
  EXPECT_EQ(s["configs"]["strategy"], "basin");
  EXPECT_EQ(s["configs"]["evaluated"], 4);
  EXPECT_EQ(s["configs"]["budget"], "4");
  EXPECT_EQ(s["configs"]["stop"], "evaluation budget");
  EXPECT_EQ(s["top"].size(), 4u);
  json c = json::parse(*read_file(cache), nullptr, false);
  ASSERT_TRUE(c.is_object());
  EXPECT_EQ(c["format"], "peak-tuning-cache");
  // The command that reproduces the search, value sets included.
  EXPECT_EQ(c["command"],
            "peak tune 1 --strategy basin --strategy-budget 4 --tune BLOCK_X=8,16,32");
  EXPECT_EQ(c["run"]["strategy"], "basin");
  EXPECT_EQ(c["kernel"], "matmul-hlsl-fp32");
  EXPECT_EQ(c["shape"], "K=256 M=256 N=256");
  ASSERT_EQ(c["configs"].size(), 4u);
  EXPECT_EQ(c["configs"][0]["config"], json({{"BLOCK_X", 16}, {"BLOCK_Y", 16}}));  // the defaults
  for (const auto& e : c["configs"]) {
    EXPECT_EQ(e["disposition"], "passed") << e.dump();
    EXPECT_GT(e["score_ms"].get<double>(), 0);
    EXPECT_EQ(e["resources"]["max_threads"],
              e["config"]["BLOCK_X"].get<int>() * e["config"]["BLOCK_Y"].get<int>());
  }
  // The same search exported again from the store.
  Out ex = peak({"export-space", "-o", (tmp_ / "again.json").string()}, ws);
  ASSERT_EQ(ex.code, 0) << ex.err;
  json again = json::parse(*read_file(tmp_ / "again.json"), nullptr, false);
  EXPECT_EQ(again["configs"], c["configs"]);
  // Four of nine configurations: not a space a benchmark can use.
  Out b = peak({"bench", "tuning", cache.string()}, ws);
  EXPECT_EQ(b.code, 2);
  EXPECT_NE(b.err.find("exhaustive sweep"), std::string::npos) << b.err;
  // Unknown strategies and malformed budgets are refused before anything runs.
  Out u = peak({"tune", "--strategy", "simplex"}, ws);
  EXPECT_EQ(u.code, 2);
  EXPECT_NE(u.err.find("unknown tuning strategy 'simplex'"), std::string::npos) << u.err;
  Out m = peak({"tune", "--strategy-budget", "10x"}, ws);
  EXPECT_EQ(m.code, 2);
  EXPECT_NE(m.err.find("budget '10x'"), std::string::npos) << m.err;
}

// Configurations evaluated in one runner job are judged each on its own outputs: a kernel wrong
// only at BLOCK_X=8 fails there and nowhere else, whatever job it shared.
TEST_F(Cli, ConfigurationsSharingARunnerJobAreJudgedEachOnItsOwn) {
  const fs::path context = tmp_ / "wrong-at-8";
  fs::copy(fs::path(PEAK_SOURCE_DIR) / "examples" / "matmul-hlsl-fp32", context);
  auto src = read_file(context / "kernel.hlsl");
  ASSERT_TRUE(src);
  const std::string right = "C[row * N + col] = acc;";
  ASSERT_NE(src->find(right), std::string::npos);
  std::string wrong = *src;
  wrong.replace(wrong.find(right), right.size(),
                "C[row * N + col] = BLOCK_X == 8 ? acc + 1 : acc;");
  ASSERT_TRUE(write_file(context / "kernel.hlsl", wrong));
  const fs::path ws = tmp_ / "shared-jobs";
  Out init = peak({"init", context.string(), ws.string()});
  ASSERT_EQ(init.code, 0) << init.err;
  fs::path cache = tmp_ / "shared.json";
  Out o = peak({"-q", "--json", "tune", "--small", "--strategy", "exhaustive", "--tune",
                "BLOCK_X=8,16", "--export-space", cache.string()},
               ws);
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  json s = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(s.is_object()) << o.out;
  EXPECT_EQ(s["configs"]["evaluated"], 6);
  json c = json::parse(*read_file(cache), nullptr, false);
  ASSERT_TRUE(c.is_object());
  ASSERT_EQ(c["configs"].size(), 6u);
  for (const auto& e : c["configs"]) {
    const bool wrong = e["config"]["BLOCK_X"] == 8;
    EXPECT_EQ(e["disposition"], wrong ? "incorrect" : "passed") << e.dump();
    if (!wrong) {
      EXPECT_GT(e["score_ms"].get<double>(), 0) << e.dump();
    }
  }
}

// A search resumed from the store in a workspace that lost its build cache (packed without
// .peak/cache and unpacked elsewhere) reuses every measurement and still times the best
// configuration: its build is made again instead of being looked for where it no longer is.
TEST_F(Cli, AResumedSearchTimesTheBestConfigurationWithoutItsOldBuild) {
  fs::path ws = workspace_with_device("reuse", "");
  const std::vector<std::string> search = {"-q",         "--json",     "tune",   "--small",
                                           "--strategy", "exhaustive", "--tune", "BLOCK_X=8,16"};
  Out first = peak(search, ws);
  ASSERT_EQ(first.code, 0) << first.out << first.err;
  std::error_code ec;
  fs::remove_all(ws / ".peak" / "cache", ec);
  ASSERT_FALSE(ec) << ec.message();
  std::vector<std::string> again = search;
  again.push_back("--reuse-measurements");
  Out o = peak(again, ws);
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  json s = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(s.is_object()) << o.out;
  EXPECT_EQ(s["configs"]["evaluated"], 6);  // BLOCK_X 8, 16 x the three values of BLOCK_Y
  EXPECT_EQ(s["configs"]["reused"], 6);
  ASSERT_TRUE(s["bench"].is_array()) << o.out;
  for (const auto& m : s["bench"]) EXPECT_EQ(m["disposition"], "passed") << m.dump();
}

// A sequence step names its strategy and budget.
TEST_F(Cli, ASequenceStepChoosesItsStrategy) {
  fs::path ws = workspace_with_device("seq", "");
  ASSERT_TRUE(write_file(tmp_ / "one.toml",
                         "format = 1\nname = \"hlsl-fp32\"\n[[step]]\ntransformation = "
                         "\"refactor\"\nstrategy = \"random\"\nstrategy_budget = \"3\"\n"));
  std::string rec = std::string("replay:") + PEAK_SOURCE_DIR + "/recordings/hlsl-fp32";
  Out o = peak(
      {"-q", "run", (tmp_ / "one.toml").string(), "--llm", rec, "--small", "--budget", "2"}, ws);
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  Out show = peak({"--json", "show", "2"}, ws);
  json j = json::parse(show.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << show.out;
  EXPECT_EQ(j["summary"]["configs"]["strategy"], "random");
  EXPECT_EQ(j["summary"]["configs"]["evaluated"], 3);
  // A --strategy-budget on the command line bounds the step whose own spec is larger.
  fs::path ws2 = workspace_with_device("seq2", "");
  Out again = peak({"-q", "run", (tmp_ / "one.toml").string(), "--llm", rec, "--small",
                    "--strategy-budget", "1"},
                   ws2);
  ASSERT_EQ(again.code, 0) << again.out << again.err;
  Out show3 = peak({"--json", "show", "2"}, ws2);
  json j3 = json::parse(show3.out, nullptr, false);
  ASSERT_TRUE(j3.is_object()) << show3.out;
  EXPECT_EQ(j3["summary"]["configs"]["strategy"], "random");
  EXPECT_EQ(j3["summary"]["configs"]["evaluated"], 1);
  ASSERT_TRUE(write_file(tmp_ / "bad.toml",
                         "format = 1\nname = \"x\"\n[[step]]\ntransformation = "
                         "\"refactor\"\nstrategy = \"simplex\"\n"));
  Out bad = peak({"run", (tmp_ / "bad.toml").string(), "--llm", rec}, ws);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("unknown tuning strategy 'simplex'"), std::string::npos) << bad.err;
}

// The benchmark in simulation (nothing runs): on a measured space given by name, and by default
// on the spaces committed under results/*/spaces/.
TEST_F(Cli, BenchTuningComparesStrategiesInSimulation) {
  fs::path file = tmp_ / "valley.json";
  ASSERT_TRUE(write_cache(file, testing::valley_cache()));
  Out o = peak(
      {"--json", "bench", "tuning", file.string(), "--seeds", "2", "--strategies", "auto,random"});
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  json j = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << o.out;
  EXPECT_EQ(j["format"], "peak-tuning-bench");
  ASSERT_EQ(j["spaces"].size(), 1u);
  ASSERT_EQ(j["rows"].size(), 2u);
  for (const auto& r : j["rows"])
    for (const auto& t : r["targets"]) EXPECT_EQ(t["reached"], 2) << r.dump();
  fs::path table = tmp_ / "table.md";
  Out text = peak({"bench", "tuning", file.string(), "--seeds", "1", "--strategies", "exhaustive",
                   "-o", table.string()});
  ASSERT_EQ(text.code, 0) << text.err;
  auto written = read_file(table);
  ASSERT_TRUE(written);
  EXPECT_NE(written->find("evals@99"), std::string::npos) << *written;
  Out bad = peak({"bench", "tuning", file.string(), "--strategies", "simplex"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("unknown tuning strategy 'simplex'"), std::string::npos) << bad.err;
  Out other = peak({"bench", "speed"});
  EXPECT_EQ(other.code, 2);
  // Without files: the committed spaces, or a message saying there are none and what to do.
  bool committed = false;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(fs::path(PEAK_SOURCE_DIR) / "results", ec))
    committed = committed || fs::is_directory(d.path() / "spaces");
  Out def = peak({"--json", "bench", "tuning", "--seeds", "1", "--strategies", "exhaustive"});
  if (committed) {
    EXPECT_EQ(def.code, 0) << def.err;
  } else {
    EXPECT_EQ(def.code, 2);
    EXPECT_NE(def.err.find("no tuning caches under"), std::string::npos) << def.err;
  }
}

// --devices: malformed specs and --device beside it are usage errors saying what to write; on
// this machine's one device, `all` is the one-device path and says which device it uses.
TEST_F(Cli, DevicesOptionIsCheckedAndAllUsesThisMachinesDevice) {
  fs::path ws = scale_workspace("devices");
  struct Bad {
    std::vector<std::string> args;
    std::string says;
  };
  for (const Bad& b : std::vector<Bad>{
           {{"validate", "--devices", "0,,1"}, "is not a device index"},
           {{"tune", "--devices", "0,0"}, "device 0 is named twice"},
           {{"validate", "--devices", "0,1", "--device", "0"}, "exclude each other"},
           {{"tune", "--devices", "all", "--compile-only"}, "nothing runs with --compile-only"},
       }) {
    Out o = peak(b.args, ws);
    EXPECT_EQ(o.code, 2) << b.args[2] << o.out << o.err;
    EXPECT_NE(o.err.find(b.says), std::string::npos) << o.err;
  }
  Out o = peak({"--json", "tune", "--devices", "all", "--budget", "1"}, ws);
  ASSERT_EQ(o.code, 0) << o.out << o.err;
  EXPECT_NE(o.err.find("devices: 1 device: 0 ("), std::string::npos) << o.err;
  json s = json::parse(o.out, nullptr, false);
  ASSERT_TRUE(s.is_object()) << o.out;
  EXPECT_EQ(s["configs"]["evaluated"], 1);
  EXPECT_FALSE(s.contains("devices"));  // one device: the one-device summary
}

}  // namespace
}  // namespace peak
