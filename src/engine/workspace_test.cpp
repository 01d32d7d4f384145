#include "engine/workspace.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <functional>

#include <fmt/format.h>

#include <cstdlib>

#include "backend/cuda/cuda_backend.h"
#include "engine/testing.h"
#include "util/fs.h"

namespace peak {
namespace {

// The shared scale context (engine/testing.h).
const char* const kToml = testing::kScaleToml;
const char* const kSource = testing::kScaleSource;
using testing::kAddedDevice;
using testing::kAddTwice;
using testing::replace_region;

class WorkspaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = make_temp_dir("peak-ws-test-");
    ASSERT_TRUE(d);
    tmp_ = *d;
    ASSERT_TRUE(write_file(tmp_ / "ctx" / "kernel.toml", kToml));
    ASSERT_TRUE(write_file(tmp_ / "ctx" / "kernel.hlsl", kSource));
    ASSERT_TRUE(write_file(tmp_ / "lib" / "add-twice.md", kAddTwice));
    ::setenv("PEAK_LIBRARY", (tmp_ / "lib").c_str(), 1);
    ::setenv("PEAK_DATA_DIR", PEAK_SOURCE_DIR, 1);
  }
  void TearDown() override {
    ::unsetenv("PEAK_LIBRARY");
    ::unsetenv("PEAK_FAULT");
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
  std::unique_ptr<Workspace> init() {
    auto ws = Workspace::init(tmp_ / "ctx", tmp_ / "ws");
    EXPECT_TRUE(ws) << ws.error();
    if (!ws) return nullptr;
    (*ws)->progress().set_quiet(true);
    return std::move(*ws);
  }
  std::unique_ptr<Workspace> open() {
    auto ws = Workspace::open(tmp_ / "ws");
    EXPECT_TRUE(ws) << ws.error();
    if (!ws) return nullptr;
    (*ws)->progress().set_quiet(true);
    return std::move(*ws);
  }
  std::string working_source() { return *read_file(tmp_ / "ws" / "kernel.hlsl"); }
  void set_working_source(const std::string& s) {
    ASSERT_TRUE(write_file(tmp_ / "ws" / "kernel.hlsl", s));
  }
  // A `command:` LLM: prints `reply_file`, or fails when it is missing; counts its calls.
  ApplyOptions llm_options(const std::string& reply) {
    EXPECT_TRUE(write_file(tmp_ / "reply.md", reply));
    ApplyOptions o;
    o.llm = fmt::format("command:'echo x >> {}; cat {}'", (tmp_ / "calls").string(),
                        (tmp_ / "reply.md").string());
    o.eval.budget = 1;
    o.attempts = 2;
    return o;
  }
  size_t llm_calls() {
    auto t = read_file(tmp_ / "calls");
    return t ? split_lines(*t).size() : 0;
  }
  // A second checkpoint (an evaluated manual edit) on main; returns its id.
  int64_t commit_edit(Workspace& ws) {
    set_working_source(replace_region(kSource, "device", kAddedDevice));
    EvalChoices c;
    c.budget = 1;
    ApplyResult r = ws.commit("add by hand", c);
    EXPECT_EQ(r.disposition, Disposition::passed) << r.message;
    return r.checkpoint.value_or(0);
  }
  fs::path tmp_;
};

TEST_F(WorkspaceTest, InitOpenHistoryBranchDiffCheckout) {
  int64_t seed = 0;
  {
    auto ws = init();
    ASSERT_TRUE(ws);
    auto head = ws->head();
    ASSERT_TRUE(head);
    EXPECT_EQ(head->message, "seed");
    seed = head->id;
    EXPECT_TRUE(fs::exists(tmp_ / "ws" / "kernel.toml"));
    // A second init into the same folder is refused.
    auto again = Workspace::init(tmp_ / "ctx", tmp_ / "ws");
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error_kind(), ErrorKind::input);
    EXPECT_NE(again.error().find("already holds"), std::string::npos);
  }
  // Opening from a subfolder finds the workspace.
  fs::create_directories(tmp_ / "ws" / "sub");
  auto opened = Workspace::open(tmp_ / "ws" / "sub");
  ASSERT_TRUE(opened) << opened.error();
  Workspace& ws = **opened;
  EXPECT_EQ(ws.root(), fs::absolute(tmp_ / "ws"));
  // Refs resolve.
  EXPECT_EQ(*ws.resolve("HEAD"), seed);
  EXPECT_EQ(*ws.resolve("seed"), seed);
  EXPECT_EQ(*ws.resolve("main"), seed);
  EXPECT_FALSE(ws.resolve("nope"));
  EXPECT_FALSE(ws.resolve("HEAD~1"));
  EXPECT_FALSE(ws.resolve(""));
  EXPECT_FALSE(ws.resolve("HEAD~x"));
  // Branch and diff (identical checkpoints: empty diff).
  auto b = ws.branch("try", "");
  ASSERT_TRUE(b) << b.error();
  EXPECT_EQ(*ws.store().head(), "try");
  auto d = ws.diff("main", "try");
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->empty());
  EXPECT_FALSE(ws.branch("try", ""));
  EXPECT_FALSE(ws.branch("bad name", ""));
  // Names that would shadow a tag or a checkpoint, or HEAD, are refused.
  for (const char* bad : {"", "seed", "HEAD", "HEAD~1", "12", "#3", "-x", "a~b"}) {
    auto r = ws.branch(bad, "");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error_kind(), ErrorKind::input) << bad;
  }
  ASSERT_TRUE(ws.tag("v1", "HEAD"));
  EXPECT_FALSE(ws.tag("try", "HEAD"));  // a branch of that name exists
  EXPECT_EQ(*ws.resolve("v1"), seed);
  // Checkout of a branch: HEAD names the branch; of a checkpoint or tag: only with detach.
  auto c = ws.checkout("seed");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error_kind(), ErrorKind::input);
  EXPECT_NE(c.error().find("--detach"), std::string::npos) << c.error();
  EXPECT_EQ(*ws.store().head(), "try");
  SwitchOptions detach;
  detach.detach = true;
  auto dc = ws.checkout("seed", detach);
  ASSERT_TRUE(dc) << dc.error();
  EXPECT_EQ(*ws.store().head(), "#" + std::to_string(seed));
  EXPECT_NE(dc->message.find("detached"), std::string::npos) << dc->message;
  ASSERT_TRUE(ws.checkout("main"));
  EXPECT_EQ(*ws.store().head(), "main");
  // HEAD stays attached when HEAD itself is checked out.
  ASSERT_TRUE(ws.checkout("HEAD"));
  EXPECT_EQ(*ws.store().head(), "main");
}

TEST_F(WorkspaceTest, OpenOutsideAWorkspaceSaysWhatToDo) {
  auto ws = Workspace::open(tmp_);
  ASSERT_FALSE(ws);
  EXPECT_EQ(ws.error_kind(), ErrorKind::input);
  EXPECT_NE(ws.error().find("peak init"), std::string::npos);
}

TEST_F(WorkspaceTest, AnUnreadableStoreIsAnEnvironmentErrorNotAMissingWorkspace) {
  ASSERT_TRUE(init());
  fs::remove_all(tmp_ / "ws" / ".peak");
  fs::create_directory_symlink(".peak", tmp_ / "ws" / ".peak");  // a loop: no stat succeeds
  auto ws = Workspace::open(tmp_ / "ws");
  ASSERT_FALSE(ws);
  EXPECT_EQ(ws.error_kind(), ErrorKind::environment);
  EXPECT_NE(ws.error().find("cannot read the peak store"), std::string::npos) << ws.error();
}

TEST_F(WorkspaceTest, AStoreWithoutItsDatabaseIsFoundAndCalledDamaged) {
  ASSERT_TRUE(init());
  fs::remove(tmp_ / "ws" / ".peak" / "peak.db");
  auto ws = Workspace::open(tmp_ / "ws");
  ASSERT_FALSE(ws);
  EXPECT_EQ(ws.error_kind(), ErrorKind::environment);
  EXPECT_NE(ws.error().find("damaged"), std::string::npos) << ws.error();
}

TEST_F(WorkspaceTest, InitRefusesAFolderWithFilesAndForceKeepsThemAsAStash) {
  ASSERT_TRUE(write_file(tmp_ / "mine" / "kernel.hlsl", "// my own kernel\n"));
  ASSERT_TRUE(write_file(tmp_ / "mine" / "kernel.toml", "# mine\n"));
  auto ws = Workspace::init(tmp_ / "ctx", tmp_ / "mine");
  ASSERT_FALSE(ws);
  EXPECT_EQ(ws.error_kind(), ErrorKind::input);
  EXPECT_NE(ws.error().find("not empty"), std::string::npos) << ws.error();
  EXPECT_NE(ws.error().find("--force"), std::string::npos) << ws.error();
  EXPECT_EQ(*read_file(tmp_ / "mine" / "kernel.hlsl"), "// my own kernel\n");
  EXPECT_EQ(*read_file(tmp_ / "mine" / "kernel.toml"), "# mine\n");
  EXPECT_FALSE(fs::exists(tmp_ / "mine" / ".peak"));
  // Any other file is in the way too.
  ASSERT_TRUE(write_file(tmp_ / "other" / "notes.txt", "x\n"));
  EXPECT_FALSE(Workspace::init(tmp_ / "ctx", tmp_ / "other"));
  // An empty folder is fine.
  fs::create_directories(tmp_ / "empty");
  EXPECT_TRUE(Workspace::init(tmp_ / "ctx", tmp_ / "empty"));

  ws = Workspace::init(tmp_ / "ctx", tmp_ / "mine", true);
  ASSERT_TRUE(ws) << ws.error();
  EXPECT_EQ(*read_file(tmp_ / "mine" / "kernel.hlsl"), kSource);
  ASSERT_TRUE((*ws)->init_stash());
  auto st = (*ws)->status();
  ASSERT_EQ(st.stashes.size(), 1u);
  EXPECT_EQ(st.stashes[0].id, *(*ws)->init_stash());
  auto popped = (*ws)->stash_pop(0, false);
  ASSERT_TRUE(popped) << popped.error();
  EXPECT_EQ(*read_file(tmp_ / "mine" / "kernel.hlsl"), "// my own kernel\n");
  EXPECT_EQ(*read_file(tmp_ / "mine" / "kernel.toml"), "# mine\n");
}

TEST_F(WorkspaceTest, InitRejectsMissingRegions) {
  ASSERT_TRUE(write_file(tmp_ / "ctx" / "kernel.hlsl", "void main() {}\n"));
  auto ws = Workspace::init(tmp_ / "ctx", tmp_ / "ws2");
  ASSERT_FALSE(ws);
  EXPECT_EQ(ws.error_kind(), ErrorKind::input);
  EXPECT_NE(ws.error().find("peak:begin"), std::string::npos) << ws.error();
}

TEST_F(WorkspaceTest, InitRejectsUnknownNamesInTuningValid) {
  std::string toml = kToml;
  toml.insert(toml.find("[[arrays]]"), "tuning_valid = \"BLOCK <= max_threads && BLCK > 0\"\n\n");
  ASSERT_TRUE(write_file(tmp_ / "ctx" / "kernel.toml", toml));
  auto ws = Workspace::init(tmp_ / "ctx", tmp_ / "ws2");
  ASSERT_FALSE(ws);
  EXPECT_EQ(ws.error_kind(), ErrorKind::input);
  EXPECT_NE(ws.error().find("unknown name 'BLCK'"), std::string::npos) << ws.error();
  EXPECT_EQ(ws.error().find("'max_threads'"), std::string::npos) << ws.error();  // a device fact
  EXPECT_FALSE(fs::exists(tmp_ / "ws2" / ".peak"));
}

// Every command that replaces the working files refuses while they hold an edit, and the edit
// survives; with force the edit is stashed and comes back with stash_pop.
TEST_F(WorkspaceTest, EveryCommandThatWritesWorkingFilesKeepsALocalEdit) {
  auto ws = init();
  ASSERT_TRUE(ws);
  int64_t second = commit_edit(*ws);
  ASSERT_GT(second, 0);
  EXPECT_TRUE(ws->working_state()->clean);  // committed: HEAD holds the files
  ASSERT_TRUE(ws->branch("side", "seed"));  // the seed's files
  ASSERT_TRUE(ws->checkout("main"));
  // A stash to pop later (made from another edit).
  set_working_source(working_source() + "// stashed edit\n");
  auto stashed = ws->stash_push("for the test");
  ASSERT_TRUE(stashed) << stashed.error();
  EXPECT_TRUE(ws->working_state()->clean);

  const std::string edited =
      replace_region(working_source(), "device", std::string(kAddedDevice) + "// my edit\n");
  set_working_source(edited);
  auto w = ws->working_state();
  ASSERT_TRUE(w);
  EXPECT_FALSE(w->clean);
  ASSERT_EQ(w->changes.size(), 1u);
  EXPECT_EQ(w->changes[0], "the device region of kernel.hlsl");
  EXPECT_NE(w->diff.find("+// my edit"), std::string::npos) << w->diff;

  SwitchOptions detach;
  detach.detach = true;
  std::vector<std::pair<std::string, std::function<std::optional<std::string>()>>> commands = {
      {"checkout side",
       [&]() -> std::optional<std::string> {
         auto r = ws->checkout("side");
         if (r) return std::nullopt;
         return r.error();
       }},
      {"checkout --detach seed",
       [&]() -> std::optional<std::string> {
         auto r = ws->checkout("seed", detach);
         if (r) return std::nullopt;
         return r.error();
       }},
      {"checkout HEAD",
       [&]() -> std::optional<std::string> {
         auto r = ws->checkout("HEAD");
         if (r) return std::nullopt;
         return r.error();
       }},
      {"branch b2 seed",
       [&]() -> std::optional<std::string> {
         auto r = ws->branch("b2", "seed");
         if (r) return std::nullopt;
         return r.error();
       }},
      {"stash pop",
       [&]() -> std::optional<std::string> {
         auto r = ws->stash_pop(0, false);
         if (r) return std::nullopt;
         return r.error();
       }},
      {"apply add-twice",
       [&]() -> std::optional<std::string> {
         ApplyResult r = ws->apply("add-twice", llm_options("unused"));
         if (!r.input_error) return std::nullopt;
         return r.message;
       }},
      {"run",
       [&]() -> std::optional<std::string> {
         auto seq = parse_sequence(
             "format = 1\nname = \"s\"\n[[step]]\ntransformation = \"add-twice\"\n", "s.toml");
         EXPECT_TRUE(seq) << seq.error();
         RunOptions ro;
         ro.apply = llm_options("unused");
         RunResult r = ws->run(*seq, ro);
         if (!r.input_error) return std::nullopt;
         return r.message;
       }},
  };
  for (const auto& [name, command] : commands) {
    SCOPED_TRACE(name);
    auto refused = command();
    ASSERT_TRUE(refused) << "the command replaced the files";
    EXPECT_NE(refused->find("the device region of kernel.hlsl"), std::string::npos) << *refused;
    EXPECT_NE(refused->find("--force"), std::string::npos) << *refused;
    EXPECT_EQ(working_source(), edited);
    EXPECT_EQ(*ws->store().head(), "main");
  }
  EXPECT_FALSE(*ws->store().ref("b2"));
  EXPECT_EQ(llm_calls(), 0u);  // refused before the model was asked
  EXPECT_EQ(ws->stash_list()->size(), 1u);

  // With force the edit is stashed first, and comes back.
  SwitchOptions force;
  force.force = true;
  auto co = ws->checkout("side", force);
  ASSERT_TRUE(co) << co.error();
  ASSERT_TRUE(co->stash);
  EXPECT_EQ(working_source(), kSource);  // side: the seed's files
  EXPECT_EQ(ws->stash_list()->size(), 2u);
  ASSERT_TRUE(ws->checkout("main"));
  auto popped = ws->stash_pop(*co->stash, false);
  ASSERT_TRUE(popped) << popped.error();
  EXPECT_EQ(working_source(), edited);
  EXPECT_EQ(ws->stash_list()->size(), 1u);
}

// A stash made on an older checkpoint brings back its changes, not that checkpoint's files:
// HEAD's work stays, and changes that clash get conflict markers while the stash is kept.
TEST_F(WorkspaceTest, StashPopMergesItsChangesIntoHeadsFiles) {
  auto ws = init();
  ASSERT_TRUE(ws);
  const std::string macro = "#define SCALE 2\n";
  set_working_source(replace_region(kSource, "macros", macro));
  auto stashed = ws->stash_push("a macro");
  ASSERT_TRUE(stashed) << stashed.error();
  const std::string clash = "// mine\n";
  set_working_source(replace_region(kSource, "device", clash));
  auto clashing = ws->stash_push("another device");
  ASSERT_TRUE(clashing) << clashing.error();
  ASSERT_GT(commit_edit(*ws), 0);  // HEAD: the device region changed
  const std::string head_source = replace_region(kSource, "device", kAddedDevice);
  ASSERT_EQ(working_source(), head_source);

  auto popped = ws->stash_pop(*stashed, false);
  ASSERT_TRUE(popped) << popped.error();
  EXPECT_EQ(working_source(), replace_region(head_source, "macros", macro));
  EXPECT_NE(popped->message.find("merged"), std::string::npos) << popped->message;
  EXPECT_EQ(ws->stash_list()->size(), 1u);

  ASSERT_TRUE(ws->checkout("HEAD", SwitchOptions{.force = true}));
  auto conflict = ws->stash_pop(*clashing, false);
  ASSERT_FALSE(conflict);
  EXPECT_EQ(conflict.error_kind(), ErrorKind::input);
  EXPECT_NE(conflict.error().find("kernel.hlsl"), std::string::npos) << conflict.error();
  EXPECT_NE(conflict.error().find("peak diff"), std::string::npos) << conflict.error();
  EXPECT_NE(conflict.error().find("stash is kept"), std::string::npos) << conflict.error();
  std::string marked = working_source();
  EXPECT_NE(marked.find("<<<<<<< HEAD"), std::string::npos) << marked;
  EXPECT_NE(marked.find(kAddedDevice), std::string::npos) << marked;
  EXPECT_NE(marked.find("=======\n" + clash + ">>>>>>> stash"), std::string::npos) << marked;
  auto left = ws->stash_list();
  ASSERT_TRUE(left);
  EXPECT_TRUE(std::any_of(left->begin(), left->end(),
                          [&](const StashRecord& r) { return r.id == *clashing; }));
}

TEST_F(WorkspaceTest, ABranchAtHeadCarriesTheEdit) {
  auto ws = init();
  ASSERT_TRUE(ws);
  std::string edited = working_source() + "// carried\n";
  set_working_source(edited);
  auto r = ws->branch("x", "");
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(*ws->store().head(), "x");
  EXPECT_EQ(working_source(), edited);
  EXPECT_FALSE(r->stash);
}

TEST_F(WorkspaceTest, CommitRefusesNothingAndBadFilesAreInputErrors) {
  auto ws = init();
  ASSERT_TRUE(ws);
  EvalChoices c;
  c.budget = 1;
  ApplyResult nothing = ws->commit("no change", c);
  EXPECT_TRUE(nothing.input_error);
  EXPECT_NE(nothing.message.find("nothing to commit"), std::string::npos) << nothing.message;
  EXPECT_EQ(nothing.message.find("not_run"), std::string::npos) << nothing.message;
  // A broken marker.
  set_working_source(replace_all(kSource, "// peak:end host", ""));
  ApplyResult marker = ws->commit("broken", c);
  EXPECT_TRUE(marker.input_error);
  EXPECT_NE(marker.message.find("peak:end host"), std::string::npos) << marker.message;
  // A malformed kernel.toml.
  set_working_source(kSource);
  ASSERT_TRUE(write_file(tmp_ / "ws" / "kernel.toml", "format = 1\nname = = \"x\"\n"));
  ApplyResult toml = ws->commit("broken", c);
  EXPECT_TRUE(toml.input_error);
  EXPECT_NE(toml.message.find("kernel.toml:2:"), std::string::npos) << toml.message;
  EXPECT_EQ(ws->store().checkpoints()->size(), 1u);
}

// --devices over two devices of one model: this machine's device (lavapipe where there is no
// GPU) under selectors 0 and 1, its probed facts given for both (as for a device probed
// elsewhere); the runners reach it through the index its probe reported. Every screening
// measurement names the device it ran on; the final timing is on device 0 alone.
TEST_F(WorkspaceTest, SeveralDevicesShareTheSearchAndTheFirstMakesTheFinalTiming) {
  auto ws = init();
  ASSERT_TRUE(ws);
  auto probed = ws->device("");
  ASSERT_TRUE(probed) << probed.error();
  ws->set_device("0", *probed);
  ws->set_device("1", *probed);
  EvalChoices c;
  c.devices = "0,1";
  c.budget = 2;
  auto eo = ws->eval_options(c);
  ASSERT_TRUE(eo) << eo.error();
  EXPECT_EQ(eo->device, "0");
  EXPECT_EQ(eo->devices, (std::vector<std::string>{"0", "1"}));
  EXPECT_TRUE(eo->standard);
  EXPECT_EQ(eval_options_json(*eo)["devices"], json::array({"0", "1"}));
  auto ev = ws->evaluate_checkpoint(1, *eo, true, "tune");
  ASSERT_TRUE(ev) << ev.error();
  ASSERT_EQ(ev->disposition, Disposition::passed) << ev->message;
  ASSERT_EQ(ev->summary["devices"].size(), 2u) << ev->summary.dump(2);
  EXPECT_EQ(ev->summary["devices"][1]["selector"], "1");
  EXPECT_EQ(ev->summary["device_locks"].size(), 2u);
  EXPECT_EQ(ev->summary["configs"]["evaluated"], 2);
  auto ms = ws->store().measurements(1);
  ASSERT_TRUE(ms) << ms.error();
  size_t screening = 0, final_timing = 0;
  for (const auto& m : *ms) {
    json d = json::parse(m.device_json);
    ASSERT_TRUE(d.contains("selector")) << m.device_json;
    if (m.what == "screening") {
      ++screening;
      EXPECT_TRUE(d["selector"] == "0" || d["selector"] == "1") << m.device_json;
    } else {
      ++final_timing;
      EXPECT_EQ(d["selector"], "0") << m.what;
    }
    EXPECT_EQ(d["name"], probed->name);
  }
  EXPECT_EQ(screening, 2u);
  EXPECT_GE(final_timing, 1u);
}

TEST_F(WorkspaceTest, DevicesOfDifferentModelsAndBothDeviceOptionsAreRefused) {
  auto ws = init();
  ASSERT_TRUE(ws);
  DeviceFacts a, b;
  a.name = "Fake GPU A";
  b.name = "Fake GPU B";
  ws->set_device("0", a);
  ws->set_device("1", b);
  ws->set_device("2", a);
  EvalChoices mixed;
  mixed.devices = "0,1";
  auto r = ws->eval_options(mixed);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_kind(), ErrorKind::input);
  EXPECT_NE(r.error().find("different models (Fake GPU A on device 0; Fake GPU B on device 1)"),
            std::string::npos)
      << r.error();
  EvalChoices both;
  both.device = "0";
  both.devices = "0,2";
  auto e = ws->eval_options(both);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error_kind(), ErrorKind::input);
  EXPECT_NE(e.error().find("--device and --devices exclude each other"), std::string::npos);
  // One device named by --devices is the one-device path.
  EvalChoices one;
  one.devices = "2";
  auto o = ws->eval_options(one);
  ASSERT_TRUE(o) << o.error();
  EXPECT_EQ(o->device, "2");
  EXPECT_TRUE(o->devices.empty());
  EXPECT_FALSE(eval_options_json(*o).contains("devices"));
}

// A checkpoint keeps every evaluation; its result is the best one under the default options,
// and log (summary), show (evaluations) and report agree on it.
TEST_F(WorkspaceTest, EvaluationsAccumulateAndTheResultFollowsOneRule) {
  auto ws = init();
  ASSERT_TRUE(ws);
  EvalChoices standard;
  standard.budget = 1;
  EvalChoices other = standard;
  other.tuning = {{"BLOCK", {32}}};
  auto eo = ws->eval_options(standard);
  ASSERT_TRUE(eo) << eo.error();
  EXPECT_TRUE(eo->standard);
  auto eo2 = ws->eval_options(other);
  ASSERT_TRUE(eo2);
  EXPECT_FALSE(eo2->standard);
  ASSERT_TRUE(ws->evaluate_checkpoint(1, *eo, true, "validate"));
  ASSERT_TRUE(ws->evaluate_checkpoint(1, *eo2, true, "tune"));
  ASSERT_TRUE(ws->evaluate_checkpoint(1, *eo, true, "validate"));
  auto all = ws->evaluations(1);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[1].record.kind, "tune");
  EXPECT_FALSE(all[1].record.standard);
  EXPECT_FALSE(all[1].is_result);  // never the result: other options
  size_t expected =
      std::isfinite(all[2].record.gflops) && all[2].record.gflops > all[0].record.gflops ? 2 : 0;
  EXPECT_TRUE(all[expected].is_result);
  EXPECT_EQ(std::count_if(all.begin(), all.end(), [](const auto& e) { return e.is_result; }), 1);
  auto cp = ws->store().checkpoint(1);
  double result = all[expected].record.gflops;
  EXPECT_DOUBLE_EQ(ws->summary(*cp)["bench"][0]["gflops"].get<double>(), result);
  EXPECT_DOUBLE_EQ(ws->report(1, "t")->steps[0].bench[0].gflops, result);
  // Every evaluation is kept with its options and device.
  json opts = json::parse(all[1].record.options_json);
  EXPECT_EQ(opts["tuning"]["BLOCK"], json::array({32}));
  EXPECT_FALSE(all[1].record.device.empty());
  // Not re-evaluated when a result exists and nothing is forced.
  ASSERT_TRUE(ws->evaluate_checkpoint(1, *eo, false));
  EXPECT_EQ(ws->evaluations(1).size(), 3u);
}

// A checkpoint tuned where its parent was never timed (a campaign replayed compile-only): only
// the checkpoint is evaluated, compared with nothing; its parent is not tuned for a speedup.
// Once the parent has a timed result, the next evaluation is compared with it.
TEST_F(WorkspaceTest, TuningACheckpointDoesNotEvaluateAnUntimedParent) {
  auto ws = init();
  ASSERT_TRUE(ws);
  set_working_source(replace_region(kSource, "device", kAddedDevice));
  EvalChoices compile;
  compile.budget = 1;
  compile.compile_only = true;
  ApplyResult r = ws->commit("add by hand", compile);
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  const int64_t id = r.checkpoint.value_or(0);
  const size_t parent_evaluations = ws->evaluations(1).size();
  EvalChoices timed;
  timed.budget = 1;
  auto eo = ws->eval_options(timed);
  ASSERT_TRUE(eo) << eo.error();
  auto ev = ws->evaluate_checkpoint(id, *eo, true, "tune");
  ASSERT_TRUE(ev) << ev.error();
  ASSERT_EQ(ev->disposition, Disposition::passed) << ev->message;
  EXPECT_EQ(ws->evaluations(1).size(), parent_evaluations);
  ASSERT_FALSE(ev->summary["bench"].empty()) << ev->summary.dump(2);
  EXPECT_FALSE(ev->summary["bench"][0].contains("speedup_vs_parent")) << ev->summary.dump(2);
  ASSERT_TRUE(ws->evaluate_checkpoint(1, *eo, true, "validate"));
  auto again = ws->evaluate_checkpoint(id, *eo, true, "tune");
  ASSERT_TRUE(again) << again.error();
  EXPECT_TRUE(again->summary["bench"][0].contains("speedup_vs_parent")) << again->summary.dump(2);
}

// A store copied into an empty folder (a committed result, say) has no working files: checking
// out HEAD or another checkpoint writes them, with or without --force, and stashes nothing.
TEST_F(WorkspaceTest, CheckoutWritesTheFilesOfAStoreCopiedWithoutThem) {
  auto ws = init();
  ASSERT_TRUE(ws);
  const int64_t second = commit_edit(*ws);
  ASSERT_GT(second, 1);
  std::error_code ec;
  fs::remove(tmp_ / "ws" / "kernel.hlsl", ec);
  fs::remove(tmp_ / "ws" / "kernel.toml", ec);
  SwitchOptions force;
  force.force = true;
  force.detach = true;
  auto r = ws->checkout("1", force);
  ASSERT_TRUE(r) << r.error();
  EXPECT_FALSE(r->stash);
  EXPECT_TRUE(fs::exists(tmp_ / "ws" / "kernel.hlsl"));
  EXPECT_TRUE(fs::exists(tmp_ / "ws" / "kernel.toml"));
  fs::remove(tmp_ / "ws" / "kernel.hlsl", ec);
  fs::remove(tmp_ / "ws" / "kernel.toml", ec);
  auto h = ws->checkout("HEAD", SwitchOptions{});
  ASSERT_TRUE(h) << h.error();
  auto restored = read_file(tmp_ / "ws" / "kernel.hlsl");
  ASSERT_TRUE(restored) << restored.error();
  EXPECT_EQ(*restored, kSource);
  auto stashes = ws->stash_list();
  ASSERT_TRUE(stashes) << stashes.error();
  EXPECT_TRUE(stashes->empty());
}

// --force asks for the target's files even when they are HEAD's own: a checkout of HEAD's
// checkpoint writes missing files back, and an edit is stashed, then replaced (as git's
// `checkout -f`); without --force the edit is carried along.
TEST_F(WorkspaceTest, AForcedCheckoutOfHeadsCheckpointWritesItsFiles) {
  auto ws = init();
  ASSERT_TRUE(ws);
  const int64_t second = commit_edit(*ws);
  ASSERT_GT(second, 1);
  const std::string committed = working_source();
  SwitchOptions detach;
  detach.detach = true;
  SwitchOptions force = detach;
  force.force = true;
  const std::string here = std::to_string(second);

  std::error_code ec;
  fs::remove(tmp_ / "ws" / "kernel.hlsl", ec);
  fs::remove(tmp_ / "ws" / "kernel.toml", ec);
  auto r = ws->checkout(here, force);
  ASSERT_TRUE(r) << r.error();
  EXPECT_FALSE(r->stash);
  ASSERT_TRUE(fs::exists(tmp_ / "ws" / "kernel.hlsl"));
  EXPECT_TRUE(fs::exists(tmp_ / "ws" / "kernel.toml"));
  EXPECT_EQ(working_source(), committed);

  const std::string edited = committed + "// local\n";
  set_working_source(edited);
  auto carried = ws->checkout(here, detach);
  ASSERT_TRUE(carried) << carried.error();
  EXPECT_EQ(working_source(), edited);
  EXPECT_FALSE(carried->stash);

  auto replaced = ws->checkout(here, force);
  ASSERT_TRUE(replaced) << replaced.error();
  EXPECT_EQ(working_source(), committed);
  ASSERT_TRUE(replaced->stash);
  auto popped = ws->stash_pop(*replaced->stash, false);
  ASSERT_TRUE(popped) << popped.error();
  EXPECT_EQ(working_source(), edited);
}

TEST_F(WorkspaceTest, ASecondWriterIsRefusedWithTheFirstsName) {
  auto first = init();
  ASSERT_TRUE(first);  // holds the lock (init changed the workspace)
  auto second = open();
  ASSERT_TRUE(second);
  EXPECT_TRUE(second->working_state());  // reading needs no lock
  auto r = second->branch("x", "");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_kind(), ErrorKind::environment);
  EXPECT_NE(r.error().find("pid " + std::to_string(::getpid())), std::string::npos) << r.error();
  first.reset();
  EXPECT_TRUE(second->branch("x", ""));
}

// kill -9 at every step of a checkout: the next open completes it or leaves it undone, and the
// files always match HEAD.
TEST_F(WorkspaceTest, CheckoutKilledAtEachStepLeavesFilesAndHeadConsistent) {
  {
    auto ws = init();
    ASSERT_TRUE(ws);
    ASSERT_GT(commit_edit(*ws), 0);
    ASSERT_TRUE(ws->branch("side", "seed"));
  }
  const std::string side = kSource;
  const std::string main = replace_region(kSource, "device", kAddedDevice);
  struct Case {
    const char* point;
    bool completed;  // whether the checkout is done after recovery
  };
  std::string head_expected = "side";
  for (const Case& c : {Case{"switch.temps-written", false}, Case{"switch.journaled", true},
                        Case{"switch.renamed-one", true}, Case{"switch.files-written", true}}) {
    SCOPED_TRACE(c.point);
    std::string target = head_expected == "side" ? "main" : "side";
    pid_t child = ::fork();
    if (child == 0) {
      ::setenv("PEAK_FAULT", (std::string("kill@") + c.point).c_str(), 1);
      auto ws = Workspace::open(tmp_ / "ws");
      if (!ws) _exit(3);
      (*ws)->progress().set_quiet(true);
      (void)(*ws)->checkout(target);
      _exit(4);  // not reached: the fault point kills the process
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), SIGKILL);
    auto ws = open();  // completes a journaled checkout
    ASSERT_TRUE(ws);
    if (c.completed) head_expected = target;
    EXPECT_EQ(*ws->store().head(), head_expected);
    auto w = ws->working_state();
    ASSERT_TRUE(w);
    EXPECT_TRUE(w->clean) << join(w->changes, ", ");
    EXPECT_EQ(working_source(), head_expected == "side" ? side : main);
    EXPECT_FALSE(*ws->store().meta("switch.pending"));
    for (const auto& de : fs::directory_iterator(tmp_ / "ws"))
      EXPECT_FALSE(starts_with(de.path().filename().string(), ".peak-new.")) << de.path();
  }
}

TEST_F(WorkspaceTest, ACheckoutThatCannotWriteChangesNothing) {
  auto ws = init();
  ASSERT_TRUE(ws);
  ASSERT_GT(commit_edit(*ws), 0);
  ASSERT_TRUE(ws->branch("side", "seed"));
  // The temporary's name is taken by a folder: writing fails (also when running as root).
  fs::create_directories(tmp_ / "ws" / ".peak-new.kernel.hlsl" / "x");
  auto r = ws->checkout("main");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error_kind(), ErrorKind::environment);
  EXPECT_NE(r.error().find("cannot write"), std::string::npos) << r.error();
  EXPECT_EQ(*ws->store().head(), "side");
  EXPECT_EQ(working_source(), kSource);
  EXPECT_TRUE(ws->working_state()->clean);
  EXPECT_FALSE(*ws->store().meta("switch.pending"));
  fs::remove_all(tmp_ / "ws" / ".peak-new.kernel.hlsl");
  EXPECT_TRUE(ws->checkout("main"));
}

// kill -9 after an attempt's row is recorded and before the step's state is saved: the rerun
// uses the recorded reply (the model is not asked twice, no row is recorded twice), whether the
// reply passed its pass or failed it.
TEST_F(WorkspaceTest, AStepKilledAfterRecordingAReplyUsesItOnTheRerun) {
  ASSERT_TRUE(init());
  const std::string good = "```hlsl\n" + std::string(kAddedDevice) + "```\n";
  auto killed_apply = [&](const ApplyOptions& o) {
    pid_t child = ::fork();
    if (child == 0) {
      ::setenv("PEAK_FAULT", "kill@apply.attempt-recorded", 1);
      auto ws = Workspace::open(tmp_ / "ws");
      if (!ws) _exit(3);
      (*ws)->progress().set_quiet(true);
      (void)(*ws)->apply("add-twice", o);
      _exit(4);  // not reached: the fault point kills the process
    }
    int status = 0;
    EXPECT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  };
  // A reply that passes its pass, killed before the pass was saved as done.
  ApplyOptions o = llm_options(good);
  killed_apply(o);
  EXPECT_EQ(llm_calls(), 1u);
  ApplyResult r = open()->apply("add-twice", o);
  EXPECT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_EQ(llm_calls(), 1u);
  auto ws = open();
  auto rows = ws->store().attempts(r.workflow_id);
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), 2u);  // pass 1 once, then the candidate's evaluation
  EXPECT_EQ((*rows)[0].pass_index, 1);
  EXPECT_EQ((*rows)[0].disposition, "passed");
  EXPECT_EQ((*rows)[1].pass_index, 0);
  EXPECT_EQ(ws->head()->transformation, "add-twice");

  // A reply without code, killed before it was charged: the rerun charges it once and asks
  // the model for attempt 2 only.
  ASSERT_TRUE(ws->branch("again", "seed"));
  ws.reset();
  o = llm_options("no code here");
  killed_apply(o);
  EXPECT_EQ(llm_calls(), 2u);
  ASSERT_TRUE(write_file(tmp_ / "reply.md", good));
  r = open()->apply("add-twice", o);
  EXPECT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_EQ(llm_calls(), 3u);
  rows = open()->store().attempts(r.workflow_id);
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[0].attempt, 1);
  EXPECT_EQ((*rows)[0].disposition, "no_code");
  EXPECT_EQ((*rows)[1].attempt, 2);
  EXPECT_EQ((*rows)[1].disposition, "passed");
}

// Manual mode: every rerun continues the same workflow; each attempt is recorded once; after
// the attempts are used up a rerun says how to go on and records nothing.
TEST_F(WorkspaceTest, RerunsContinueTheWorkflowAndRecordEachAttemptOnce) {
  auto ws = init();
  ASSERT_TRUE(ws);
  ApplyOptions o;
  o.llm = "manual";
  o.driver.workspace = ws->root();
  o.eval.budget = 1;
  o.attempts = 2;
  auto rerun = [&] {
    auto w = open();
    return w->apply("add-twice", o);
  };
  ws.reset();
  ApplyResult first = rerun();
  ASSERT_TRUE(first.pending) << first.message;
  EXPECT_EQ(first.prompt_id, "0001");
  int64_t wid = first.workflow_id;
  ASSERT_GT(wid, 0);
  ASSERT_TRUE(respond_manual(tmp_ / "ws", "0001", "no code here", "test"));
  ApplyResult second = rerun();  // attempt 1 fails (no_code); attempt 2 waits
  ASSERT_TRUE(second.pending) << second.message;
  EXPECT_EQ(second.workflow_id, wid);
  EXPECT_EQ(second.prompt_id, "0002");
  ApplyResult again = rerun();  // nothing answered: the same prompt, nothing recorded
  ASSERT_TRUE(again.pending);
  EXPECT_EQ(again.prompt_id, "0002");
  ASSERT_TRUE(respond_manual(tmp_ / "ws", "0002", "still no code", "test"));
  ApplyResult failed = rerun();
  EXPECT_FALSE(failed.pending);
  EXPECT_EQ(failed.disposition, Disposition::no_code);
  EXPECT_NE(failed.message.find("--attempts 5"), std::string::npos) << failed.message;
  EXPECT_NE(failed.message.find("peak commit"), std::string::npos) << failed.message;
  auto w = open();
  auto attempts = w->store().attempts(wid);
  ASSERT_TRUE(attempts);
  EXPECT_EQ(attempts->size(), 2u);  // one row per attempt, whatever the reruns
  EXPECT_EQ((*attempts)[0].attempt, 1);
  EXPECT_EQ((*attempts)[1].attempt, 2);
  EXPECT_EQ(w->store().workflow(wid)->status, "failed");
  w.reset();
  ApplyResult exhausted = rerun();  // nothing new: the way on is told
  EXPECT_EQ(exhausted.disposition, Disposition::no_code);
  EXPECT_NE(exhausted.message.find("already failed 2 attempt(s)"), std::string::npos)
      << exhausted.message;
  o.attempts = 3;
  ApplyResult more = rerun();  // one more attempt, in the same workflow
  ASSERT_TRUE(more.pending) << more.message;
  EXPECT_EQ(more.workflow_id, wid);
  EXPECT_EQ(more.prompt_id, "0003");
  w = open();
  EXPECT_EQ(w->store().attempts(wid)->size(), 2u);
  EXPECT_EQ(w->store().workflow(wid)->status, "waiting");
  EXPECT_EQ(w->store().workflows()->size(), 1u);
}

// An endpoint that fails is not the model's failure: not charged, no attempt used, and the
// workflow continues from where it stood once the endpoint is back.
TEST_F(WorkspaceTest, InfrastructureFailuresAreNotChargedAndTheWorkflowContinues) {
  auto ws = init();
  ASSERT_TRUE(ws);
  ApplyOptions o = llm_options("");
  fs::remove(tmp_ / "reply.md");  // cat fails: the endpoint is down
  ApplyResult down = ws->apply("add-twice", o);
  EXPECT_TRUE(down.environment_error) << down.message;
  EXPECT_NE(down.message.find("Nothing was charged"), std::string::npos) << down.message;
  int64_t wid = down.workflow_id;
  EXPECT_EQ(ws->store().workflow(wid)->status, "interrupted");
  ASSERT_TRUE(write_file(tmp_ / "reply.md", std::string("```hlsl\n") + kAddedDevice + "```\n"));
  ApplyResult up = ws->apply("add-twice", o);
  ASSERT_EQ(up.disposition, Disposition::passed) << up.message;
  EXPECT_EQ(up.workflow_id, wid);
  EXPECT_EQ(up.attempts, 1);  // the failed call did not use an attempt
  auto attempts = ws->store().attempts(wid);
  ASSERT_TRUE(attempts);
  ASSERT_GE(attempts->size(), 2u);
  EXPECT_TRUE((*attempts)[0].infrastructure);
  EXPECT_EQ((*attempts)[0].attempt, 1);
  for (size_t i = 1; i < attempts->size(); ++i) {
    EXPECT_FALSE((*attempts)[i].infrastructure);
    EXPECT_EQ((*attempts)[i].attempt, 1);
  }
  EXPECT_EQ(ws->store().workflow(wid)->status, "passed");
  auto rep_or = ws->report(*up.checkpoint, "t");
  ASSERT_TRUE(rep_or.is_ok()) << rep_or.error();
  Report rep = *rep_or;
  ASSERT_EQ(rep.steps.size(), 2u);
  EXPECT_EQ(rep.steps[1].failed_attempts, 0);
  ASSERT_EQ(rep.failures.size(), 1u);
  EXPECT_TRUE(rep.failures[0].infrastructure);
  EXPECT_EQ(working_source(), replace_region(kSource, "device", kAddedDevice));
}

// A harness-side timeout (injected) is evaluated again, recorded as the infrastructure's and
// does not change the next prompt: the model is asked once.
TEST_F(WorkspaceTest, AHarnessTimeoutIsEvaluatedAgainAndNotCharged) {
  auto ws = init();
  ASSERT_TRUE(ws);
  ApplyOptions o = llm_options(std::string("```hlsl\n") + kAddedDevice + "```\n");
  EvalChoices c;
  c.budget = 1;
  ASSERT_TRUE(ws->evaluate_checkpoint(1, *ws->eval_options(c), false));  // the parent first
  ::setenv("PEAK_FAULT", "eval.task-timeout", 1);  // every candidate's first evaluation
  ApplyResult r = ws->apply("add-twice", o);
  ::unsetenv("PEAK_FAULT");
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(llm_calls(), 1u);
  auto attempts = ws->store().attempts(r.workflow_id);
  ASSERT_TRUE(attempts);
  int infra = 0;
  for (const auto& a : *attempts)
    if (a.infrastructure) {
      ++infra;
      EXPECT_EQ(a.disposition, "timeout");
    }
  EXPECT_EQ(infra, 1);
}

TEST_F(WorkspaceTest, WorkflowsOfDeadProcessesReadInterruptedAndAreReaped) {
  auto ws = init();
  ASSERT_TRUE(ws);
  pid_t child = ::fork();
  if (child == 0) _exit(0);
  ::waitpid(child, nullptr, 0);
  WorkflowRecord w;
  w.kind = "run";
  w.status = "running";
  w.owner_pid = child;
  w.owner_host = this_process().host;
  w.owner_start = "2001-01-01T00:00:00.00Z";
  auto id = ws->store().add_workflow(w);
  ASSERT_TRUE(id);
  ws.reset();
  auto reader = open();
  auto all = reader->workflows();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].status, "interrupted");                      // as read
  EXPECT_EQ(reader->store().workflow(*id)->status, "running");  // reading writes nothing
  ASSERT_TRUE(reader->lock());                                  // the first change reaps it
  EXPECT_EQ(reader->store().workflow(*id)->status, "interrupted");
}

// A transformation whose one device pass the `command` driver answers with reply-<name>.md.
std::string comment_transformation(const std::string& name, const std::string& tuning_valid) {
  return "+++\nformat = 1\nname = \"" + name + "\"\ntitle = \"Add a comment\"\n" +
         (tuning_valid.empty() ? "" : "tuning_valid = \"" + tuning_valid + "\"\n") +
         "+++\nAdd a comment.\n\n## Pass 1: device\nAdd the comment `// " + name + "`.\n";
}

std::string device_reply(const std::string& name) {
  return "```hlsl\n// " + name +
         "\n[numthreads(BLOCK, 1, 1)]\nvoid main(uint3 id : SV_DispatchThreadID) { if ((int)id.x "
         "< N) Y[id.x] = 2.0f * X[id.x]; }\n```\n";
}

TEST_F(WorkspaceTest, RunKeepsAStepAsideAndCapsTheBudget) {
  for (const std::string n : {"note-a", "note-b"}) {
    ASSERT_TRUE(write_file(tmp_ / "lib" / (n + ".md"),
                           comment_transformation(n, n == "note-b" ? "BLOCK == 64" : "")));
    ASSERT_TRUE(write_file(tmp_ / ("reply-" + n + ".md"), device_reply(n)));
  }
  ASSERT_TRUE(
      write_file(tmp_ / "answer.sh", "case \"$PEAK_STEP\" in note-a*) cat " +
                                         (tmp_ / "reply-note-a.md").string() + ";; *) cat " +
                                         (tmp_ / "reply-note-b.md").string() + ";; esac\n"));
  ::setenv("PEAK_LIBRARY", (tmp_ / "lib").c_str(), 1);
  auto ws = Workspace::init(tmp_ / "ctx", tmp_ / "ws");
  ASSERT_TRUE(ws) << ws.error();
  auto seq = parse_sequence(
      "format = 2\nname = \"notes\"\nbudget = 1\n[[step]]\ntransformation = \"note-a\"\n"
      "keep = false\n[[step]]\ntransformation = \"note-b\"\nbudget = 2\n",
      "notes.toml");
  ASSERT_TRUE(seq) << seq.error();
  RunOptions ro;
  ro.apply.llm = "command:'sh " + (tmp_ / "answer.sh").string() + "'";
  ro.apply.eval.small = true;
  RunResult rr = (*ws)->run(*seq, ro);
  ::unsetenv("PEAK_LIBRARY");
  ASSERT_EQ(rr.disposition, Disposition::passed) << rr.message;
  ASSERT_EQ(rr.steps.size(), 2u);
  ASSERT_TRUE(rr.steps[0].checkpoint && rr.steps[1].checkpoint);
  // note-a was applied and checkpointed, but note-b builds on the seed.
  auto a = (*ws)->store().checkpoint(*rr.steps[0].checkpoint);
  auto b = (*ws)->store().checkpoint(*rr.steps[1].checkpoint);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->parent, b->parent);
  EXPECT_EQ(*(*ws)->resolve("HEAD"), b->id);
  auto src = read_file(tmp_ / "ws" / "kernel.hlsl");
  ASSERT_TRUE(src);
  EXPECT_NE(src->find("// note-b"), std::string::npos);
  EXPECT_EQ(src->find("// note-a"), std::string::npos);
  // Budgets: one configuration for note-a (the sequence's), and note-b's constraint leaves one
  // of the two its own budget allows; it joins the context's tuning_valid.
  auto sa = json::parse(a->summary_json);
  auto sb = json::parse(b->summary_json);
  EXPECT_EQ(sa["configs"]["evaluated"], 1);
  EXPECT_EQ(sb["configs"]["evaluated"], 1);
  EXPECT_EQ(sb["configs"]["rejected_by_constraint"], 1);
  auto files = (*ws)->checkpoint_files(b->id);
  ASSERT_TRUE(files);
  EXPECT_EQ(files->first.tuning_valid, "BLOCK == 64");
}

TEST_F(WorkspaceTest, SequenceTuningAppliesWhereTheParameterExists) {
  ASSERT_TRUE(write_file(tmp_ / "lib" / "note-a.md", comment_transformation("note-a", "")));
  ASSERT_TRUE(write_file(tmp_ / "reply.md", device_reply("note-a")));
  ::setenv("PEAK_LIBRARY", (tmp_ / "lib").c_str(), 1);
  auto ws = Workspace::init(tmp_ / "ctx", tmp_ / "ws");
  ASSERT_TRUE(ws) << ws.error();
  // BLOCK = [32] applies (the context has BLOCK); TILE = [8] names no parameter of this step
  // and is left out rather than refused.
  auto seq = parse_sequence(
      "format = 2\nname = \"one\"\n[tuning]\nBLOCK = [32]\nTILE = [8]\n[[step]]\n"
      "transformation = \"note-a\"\n",
      "one.toml");
  ASSERT_TRUE(seq) << seq.error();
  RunOptions ro;
  ro.apply.llm = "command:'cat " + (tmp_ / "reply.md").string() + "'";
  ro.apply.eval.small = true;
  RunResult rr = (*ws)->run(*seq, ro);
  ::unsetenv("PEAK_LIBRARY");
  ASSERT_EQ(rr.disposition, Disposition::passed) << rr.message;
  auto c = (*ws)->store().checkpoint(*rr.steps[0].checkpoint);
  ASSERT_TRUE(c);
  auto summary = json::parse(c->summary_json);
  EXPECT_EQ(summary["configs"]["evaluated"], 1);
  EXPECT_EQ(summary["best"]["config"]["BLOCK"], 32);
}

// `peak bench` on a CPU device: the small suite, from the working kernel.toml when the
// checkpoint's has none; a shape the kernel does not accept is a row with its disposition; the
// benchmark is stored as an evaluation of kind "suite" that is never the result, and the report
// shows it. No number depends on timing: only which rows have numbers.
TEST_F(WorkspaceTest, BenchTimesTheShapeSuiteAndStoresIt) {
  // The seed accepts multiples of 4 only, and its kernel.toml has no suite.
  std::string toml = kToml;
  toml.replace(toml.find("valid = \"N > 0\""), 15, "valid = \"N > 0 && N % 4 == 0\"");
  ASSERT_TRUE(write_file(tmp_ / "ctx" / "kernel.toml", toml));
  auto ws = init();
  ASSERT_TRUE(ws);
  EvalChoices c;
  auto none = ws->bench_suite(1, c);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error_kind(), ErrorKind::input);
  EXPECT_NE(none.error().find("has no shape suite: add a [suite] table"), std::string::npos)
      << none.error();

  // The working kernel.toml gets a suite (format 3); one of its shapes is not a multiple of 4.
  std::string with_suite = kToml;
  with_suite.replace(with_suite.find("format = 2"), 10, "format = 3");
  with_suite +=
      "\n[suite]\n"
      "shapes = [ { name = \"big\", class = \"square\", N = 1048576 } ]\n"
      "small = [ { name = \"even\", class = \"square\", N = 4096 },\n"
      "          { name = \"odd\", class = \"irregular\", N = 4099 },\n"
      "          { name = \"wide\", class = \"wide\", N = 65536 } ]\n";
  ASSERT_TRUE(write_file(tmp_ / "ws" / "kernel.toml", with_suite));
  // The result so far after every shape: one row more each time, partial until the last.
  std::vector<SuiteResult> so_far;
  auto r = ws->bench_suite(1, c, false, [&](const SuiteResult& s) { so_far.push_back(s); });
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(so_far.size(), 3u);
  for (size_t i = 0; i < so_far.size(); ++i) {
    EXPECT_EQ(so_far[i].rows.size(), i + 1);
    EXPECT_EQ(so_far[i].shapes, 3);
    EXPECT_EQ(so_far[i].partial(), i + 1 < 3);
    EXPECT_EQ(so_far[i].rows.back().name, r->rows[i].name);
    EXPECT_EQ(so_far[i].rows.back().samples_ms, r->rows[i].samples_ms);
  }
  EXPECT_EQ(so_far[0].rows[0].ratio, r->rows[0].ratio);  // finished as the whole result is
  EXPECT_FALSE(r->partial());
  EXPECT_EQ(r->shapes, 3);
  EXPECT_TRUE(r->small);  // a CPU device takes the small variant
  EXPECT_TRUE(r->default_config);
  EXPECT_EQ(r->config, "BLOCK=64");
  EXPECT_EQ(r->baseline, "");  // HLSL has no vendor library: ratios of the peak
  EXPECT_EQ(r->dims_names, "N");
  ASSERT_EQ(r->rows.size(), 3u);
  EXPECT_EQ(r->rows[0].name, "even");
  EXPECT_EQ(r->rows[0].dims, "4096");
  EXPECT_EQ(r->rows[0].disposition, "passed") << r->rows[0].message;
  EXPECT_GT(r->rows[0].gflops, 0);
  EXPECT_FALSE(r->rows[0].samples_ms.empty());
  EXPECT_EQ(r->rows[1].disposition, "not_run");
  EXPECT_NE(r->rows[1].message.find("does not accept this shape"), std::string::npos);
  EXPECT_EQ(r->rows[1].ratio, 0);
  EXPECT_EQ(r->rows[2].disposition, "passed") << r->rows[2].message;
  if (r->peak_tflops > 0) {
    EXPECT_EQ(r->rated, 2);
    EXPECT_NEAR(r->geomean, geometric_mean({r->rows[0].ratio, r->rows[2].ratio}), 1e-12);
    EXPECT_NEAR(r->rows[0].ratio, r->rows[0].gflops / (r->peak_tflops * 1e3), 1e-12);
  }
  EXPECT_GT(r->evaluation, 0);

  // Stored with the checkpoint, never its result; the report shows the newest one.
  auto all = ws->evaluations(1);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].record.kind, "suite");
  EXPECT_FALSE(all[0].is_result);
  EXPECT_EQ(all[0].summary["suite"]["rows"].size(), 3u);
  EXPECT_EQ(all[0].summary["measurements"][0]["samples_ms"].size(), r->rows[0].samples_ms.size());
  EXPECT_FALSE(ws->summary(*ws->store().checkpoint(1)).contains("suite"));
  auto report = ws->report(1, "t");
  ASSERT_TRUE(report) << report.error();
  ASSERT_TRUE(report->steps[0].suite);
  EXPECT_EQ(report->steps[0].suite->evaluation, r->evaluation);
  EXPECT_NE(render_text(*report).find("shape suite (peak bench)"), std::string::npos);
  // A later evaluation is still the result; the suite does not count.
  EvalChoices one;
  one.budget = 1;
  auto eo = ws->eval_options(one);
  ASSERT_TRUE(eo);
  ASSERT_TRUE(ws->evaluate_checkpoint(1, *eo, false));
  auto after = ws->evaluations(1);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_TRUE(after[1].is_result);
  EXPECT_FALSE(after[0].is_result);
}

// A transformation that `requires` an architecture: refused before any prompt on a device that
// lacks it (the facts of --prompt-device, as a compile-only recording run uses) and on a backend
// other than cuda; applied, with the requirement in its prompt, on a device that has it.
// testing::kScaleToml as a CUDA context (the one BLOCK value of its kernel).
std::string cuda_scale_toml() {
  std::string t = testing::kScaleToml;
  auto swap = [&](const std::string& from, const std::string& to) {
    t.replace(t.find(from), from.size(), to);
  };
  swap("name = \"scale\"\nbackend = \"hlsl\"", "name = \"scale-cuda\"\nbackend = \"cuda\"");
  swap("kernel.hlsl", "kernel.cu");
  swap("values = [32, 64]", "values = [64]");
  return t;
}

const char* const kCudaSource = R"SRC(// peak:begin macros
// peak:end macros
// peak:begin device
__global__ void scale(const float* X, float* Y, int N) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) Y[i] = 2.0f * X[i];
}
// peak:end device
// peak:begin host
launch scale
  grid = (ceil_div(N, BLOCK))
  block = (BLOCK)
  args = (X, Y, N)
// peak:end host
)SRC";

const char* const kNeedsHopper = R"MD(+++
format = 1
name = "needs-hopper"
title = "Something only Hopper has"
requires = "sm_90a"
+++
Use the warpgroup MMA.

## Pass 1: device
Rewrite the loop with wgmma.
)MD";

DeviceFacts cuda_device(const std::string& name, const std::string& arch) {
  DeviceFacts d;
  d.backend = "cuda";
  d.name = name;
  d.arch = arch;
  d.compute_units = 84;
  d.subgroup_size = 32;
  d.shared_memory_per_group = 48 * 1024;
  d.shared_memory_per_group_optin = 99 * 1024;
  d.max_threads_per_group = 1024;
  return d;
}

TEST_F(WorkspaceTest, RequiresRefusesADeviceWithoutTheArchitectureBeforeAnyPrompt) {
  ASSERT_TRUE(write_file(tmp_ / "lib" / "needs-hopper.md", kNeedsHopper));
  // On the HLSL backend: refused whatever the device.
  {
    auto ws = init();
    ASSERT_TRUE(ws);
    ApplyOptions o = llm_options("never asked");
    ApplyResult r = ws->apply("needs-hopper", o);
    EXPECT_TRUE(r.input_error) << r.message;
    EXPECT_NE(r.message.find("applies only to kernels of the cuda and hip backends; this kernel's "
                             "backend is hlsl"),
              std::string::npos)
        << r.message;
    EXPECT_EQ(llm_calls(), 0u);
  }
  ASSERT_TRUE(write_file(tmp_ / "cuda" / "kernel.toml", cuda_scale_toml()));
  ASSERT_TRUE(write_file(tmp_ / "cuda" / "kernel.cu", kCudaSource));
  auto w = Workspace::init(tmp_ / "cuda", tmp_ / "ws-cuda");
  ASSERT_TRUE(w) << w.error();
  auto& ws = *w;
  ws->progress().set_quiet(true);
  ApplyOptions o;
  o.llm = "manual";
  o.driver.workspace = ws->root();
  o.eval.budget = 1;
  o.eval.compile_only = true;
  o.prompt_device = cuda_device("NVIDIA RTX A6000", "sm_86");
  ApplyResult refused = ws->apply("needs-hopper", o);
  EXPECT_TRUE(refused.input_error) << refused.message;
  EXPECT_FALSE(refused.pending);
  EXPECT_NE(refused.message.find("transformation needs-hopper requires sm_90a (a Hopper GPU"),
            std::string::npos)
      << refused.message;
  EXPECT_NE(refused.message.find("the device is NVIDIA RTX A6000 (sm_86): choose another "
                                 "sequence or run on a device that has it"),
            std::string::npos)
      << refused.message;
  EXPECT_FALSE(fs::exists(ws->root() / ".peak" / "manual" / "0001.prompt.md"))
      << "no prompt was written";

  if (cuda::find_nvcc().empty()) GTEST_SKIP() << "no nvcc: the accepted case needs a build";
  o.prompt_device = cuda_device("NVIDIA H100 80GB HBM3", "sm_90a");
  ApplyResult accepted = ws->apply("needs-hopper", o);
  ASSERT_TRUE(accepted.pending) << accepted.message;
  auto prompt = read_file(accepted.prompt_path);
  ASSERT_TRUE(prompt) << prompt.error();
  EXPECT_NE(prompt->find("Requires: sm_90a (this device: sm_90a)\n"), std::string::npos) << *prompt;
}

// --compile-only where the device is absent (apply --compile-only --prompt-device FILE): the
// checks of the launch plan that need no device run against the device facts, for every shape a
// run would use, with the disposition a run would give; the summary names what was not checked.
Evaluation compile_only(Workspace& ws, const DeviceFacts& facts, const std::string& host,
                        const std::string& device = "", const std::string& workspace = "") {
  auto head = ws.head();
  EXPECT_TRUE(head) << head.error();
  auto files = ws.checkpoint_files(head->id);
  EXPECT_TRUE(files) << files.error();
  KernelContext ctx = files->first;
  ctx.workspace = workspace;
  std::string source = replace_region(files->second, "host", host);
  if (!device.empty()) source = replace_region(source, "device", device);
  ws.set_device("", facts);
  EvalOptions o = default_eval_options(false);
  o.compile_only = true;
  o.budget.evaluations = 1;
  return ws.evaluate(ctx, source, o);
}

TEST_F(WorkspaceTest, CompileOnlyChecksTheLaunchPlanAgainstTheDeviceFacts) {
  auto ws = init();
  ASSERT_TRUE(ws);
  auto probed = ws->device("");
  ASSERT_TRUE(probed) << probed.error();
  DeviceFacts facts = *probed;
  facts.memory_bytes = int64_t{1} << 30;
  Evaluation ok = compile_only(*ws, facts, "launch main\n  grid = (ceil_div(N, BLOCK))\n");
  EXPECT_EQ(ok.disposition, Disposition::passed) << ok.message;
  EXPECT_TRUE(ok.summary.value("compile_only_unchecked", json::array()).size() > 0) << ok.summary;
  EXPECT_NE(ok.message.find("not checked without a device: correctness"), std::string::npos)
      << ok.message;
  // A grid of zero blocks at the validation shape N = 100 only.
  Evaluation zero = compile_only(*ws, facts, "launch main\n  grid = (N == 100 ? 0 : 1)\n");
  EXPECT_EQ(zero.disposition, Disposition::invalid_config) << zero.message;
  EXPECT_NE(zero.message.find("grid.x = 0"), std::string::npos) << zero.message;
  // Scratch the context grants no workspace for; scratch beyond the device's memory; terabytes.
  const std::string scratch =
      "scratch s\n  dtype = f32\n  count = COUNT\nlaunch main\n  grid = (1)\n";
  auto with_count = [&](const std::string& c) {
    std::string t = scratch;
    t.replace(t.find("COUNT"), 5, c);
    return t;
  };
  Evaluation none = compile_only(*ws, facts, with_count("N"));
  EXPECT_EQ(none.disposition, Disposition::workspace_exceeded) << none.message;
  Evaluation big = compile_only(*ws, facts, with_count("N * 1048576"), "", "1 << 50");
  EXPECT_EQ(big.disposition, Disposition::launch_failed) << big.message;
  EXPECT_NE(big.message.find("need more memory than"), std::string::npos) << big.message;
  Evaluation tera = compile_only(*ws, facts, with_count("1 << 42"), "", "1 << 50");
  EXPECT_EQ(tera.disposition, Disposition::launch_failed) << tera.message;
}

TEST_F(WorkspaceTest, CompileOnlyChecksACudaPlanWithoutAGpu) {
  if (cuda::find_nvcc().empty()) GTEST_SKIP() << "no nvcc";
  ASSERT_TRUE(write_file(tmp_ / "cuda" / "kernel.toml", cuda_scale_toml()));
  ASSERT_TRUE(write_file(tmp_ / "cuda" / "kernel.cu", kCudaSource));
  auto w = Workspace::init(tmp_ / "cuda", tmp_ / "ws-cuda");
  ASSERT_TRUE(w) << w.error();
  Workspace& ws = **w;
  ws.progress().set_quiet(true);
  const DeviceFacts h100 = cuda_device("NVIDIA H100 80GB HBM3", "sm_90a");
  const std::string good = "launch scale\n  grid = (ceil_div(N, BLOCK))\n  block = (BLOCK)\n";
  Evaluation ok = compile_only(ws, h100, good + "  args = (X, Y, N)\n");
  EXPECT_EQ(ok.disposition, Disposition::passed) << ok.message;
  Evaluation threads = compile_only(ws, h100,
                                    "launch scale\n  grid = (1)\n  block = (2048)\n"
                                    "  args = (X, Y, N)\n");
  EXPECT_EQ(threads.disposition, Disposition::invalid_config) << threads.message;
  Evaluation shared = compile_only(ws, h100, good + "  shared = 200 * 1024\n  args = (X, Y, N)\n");
  EXPECT_EQ(shared.disposition, Disposition::invalid_config) << shared.message;
  EXPECT_NE(shared.message.find("shared memory"), std::string::npos) << shared.message;
  Evaluation args = compile_only(ws, h100, good + "  args = (X, Y)\n");
  EXPECT_EQ(args.disposition, Disposition::launch_failed) << args.message;
  EXPECT_NE(args.message.find("kernel `scale` takes 3 parameters; the plan's args pass 2"),
            std::string::npos)
      << args.message;
  Evaluation kinds = compile_only(ws, h100, good + "  args = (X, N, Y)\n");
  EXPECT_EQ(kinds.disposition, Disposition::launch_failed) << kinds.message;
  const std::string big_data =
      "__device__ float kept[1 << 28];\n"
      "__global__ void scale(const float* X, float* Y, int N) {\n"
      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < N) { kept[i] = X[i]; Y[i] = 2.0f * X[i]; }\n"
      "}\n";
  Evaluation data = compile_only(ws, h100, good + "  args = (X, Y, N)\n", big_data);
  EXPECT_EQ(data.disposition, Disposition::workspace_exceeded) << data.message;
}

// A plan that dispatches with `when`: its small-N path is wrong on every N that is not a multiple
// of 8, which the listed shape of that path (N = 32) does not exercise. Each evaluation draws
// hidden shapes of its own for each path, with tails, from a seed it records.
TEST_F(WorkspaceTest, EveryWhenPathIsValidatedOnHiddenShapesWithTails) {
  std::string toml = kToml;
  auto swap = [&](const std::string& from, const std::string& to) {
    ASSERT_NE(toml.find(from), std::string::npos) << from;
    toml.replace(toml.find(from), from.size(), to);
  };
  swap("name = \"N\"\ndtype = \"i32\"\n", "name = \"N\"\ndtype = \"i32\"\nrange = [1, 4096, 1]\n");
  swap("validation = [{ N = 100 }]", "validation = [{ N = 100 }, { N = 32 }]");
  ASSERT_TRUE(write_file(tmp_ / "paths" / "kernel.toml", toml));
  ASSERT_TRUE(write_file(tmp_ / "paths" / "kernel.hlsl", kSource));
  auto w = Workspace::init(tmp_ / "paths", tmp_ / "ws-paths");
  ASSERT_TRUE(w) << w.error();
  Workspace& ws = **w;
  ws.progress().set_quiet(true);
  auto head = ws.head();
  ASSERT_TRUE(head) << head.error();
  auto files = ws.checkpoint_files(head->id);
  ASSERT_TRUE(files) << files.error();
  std::string source = replace_region(
      files->second, "device",
      "[numthreads(BLOCK, 1, 1)]\n"
      "void main(uint3 id : SV_DispatchThreadID) { if ((int)id.x < N) Y[id.x] = 2.0f * X[id.x]; "
      "}\n"
      "[numthreads(64, 1, 1)]\n"
      "void small(uint3 id : SV_DispatchThreadID) {\n"
      "  int i = (int)id.x;\n"
      "  if (i < N) Y[i] = i < (N / 8) * 8 ? 2.0f * X[i] : X[i];\n"
      "}\n");
  source = replace_region(source, "host",
                          "launch main\n  grid = (ceil_div(N, BLOCK))\n  when = N > 64\n"
                          "launch small\n  grid = (1)\n  when = N <= 64\n");
  EvalOptions o = default_eval_options(true);
  o.budget.evaluations = 1;
  Evaluation e = ws.evaluate(files->first, source, o);
  EXPECT_EQ(e.disposition, Disposition::incorrect) << e.message;
  EXPECT_NE(e.message.find("[hidden shape]"), std::string::npos) << e.message;
  ASSERT_TRUE(e.summary.contains("validation_seed")) << e.summary;
  // The recorded seed draws the same shapes again: the evaluation is reproduced.
  o.validation_seed = e.summary["validation_seed"].get<uint64_t>();
  Evaluation again = ws.evaluate(files->first, source, o);
  EXPECT_EQ(again.disposition, e.disposition);
  EXPECT_EQ(again.message, e.message);
  EXPECT_EQ(again.summary["validation_seed"], e.summary["validation_seed"]);
}

TEST(CarriedConfigs, NewParametersAroundTheParentsBest) {
  std::vector<Config> top = {{{"B", 64}}, {{"B", 32}}};
  std::vector<TuningParam> fresh = {{"S", {2, 3}, 2}};
  auto c = carried_configs(top, fresh, 10);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0], (Config{{"B", 64}, {"S", 2}}));
  EXPECT_EQ(c[1], (Config{{"B", 64}, {"S", 3}}));
  EXPECT_EQ(c[2], (Config{{"B", 32}, {"S", 2}}));
  EXPECT_EQ(carried_configs(top, fresh, 3).size(), 3u);
  EXPECT_EQ(carried_configs(top, {}, 10), top);
  EXPECT_TRUE(carried_configs({}, fresh, 10).empty());
}

}  // namespace
}  // namespace peak
