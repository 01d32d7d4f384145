#include "engine/workspace.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "util/fs.h"

namespace peak {
namespace {

const char* kToml = R"TOML(format = 2
name = "scale"
backend = "hlsl"
precision = "fp32"
source = "kernel.hlsl"
reference = "seed"
flops = "N"
bytes = "8 * N"
valid = "N > 0"

[[arrays]]
name = "X"
dtype = "f32"
size = "N"
init = "uniform(-1, 1)"

[[arrays]]
name = "Y"
dtype = "f32"
size = "N"
init = "zeros"
output = true

[[scalars]]
name = "N"
dtype = "i32"

[shapes]
bench = [{ N = 4096 }]
validation = [{ N = 100 }]

[[tuning]]
name = "BLOCK"
values = [32, 64]
default = 64
)TOML";

const char* kSource = R"SRC([[vk::binding(0, 0)]] RWStructuredBuffer<float> X;
[[vk::binding(1, 0)]] RWStructuredBuffer<float> Y;
[[vk::binding(2, 0)]] cbuffer Scalars { int N; };
// peak:begin macros
// peak:end macros
// peak:begin device
[numthreads(BLOCK, 1, 1)]
void main(uint3 id : SV_DispatchThreadID) { if ((int)id.x < N) Y[id.x] = 2.0f * X[id.x]; }
// peak:end device
// peak:begin host
launch main
  grid = (ceil_div(N, BLOCK))
// peak:end host
)SRC";

class WorkspaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = make_temp_dir("peak-ws-test-");
    ASSERT_TRUE(d);
    tmp_ = *d;
    ASSERT_TRUE(write_file(tmp_ / "ctx" / "kernel.toml", kToml));
    ASSERT_TRUE(write_file(tmp_ / "ctx" / "kernel.hlsl", kSource));
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
  fs::path tmp_;
};

TEST_F(WorkspaceTest, InitOpenHistoryBranchDiffCheckout) {
  auto ws = Workspace::init(tmp_ / "ctx", tmp_ / "ws");
  ASSERT_TRUE(ws) << ws.error();
  auto head = (*ws)->head();
  ASSERT_TRUE(head);
  EXPECT_EQ(head->message, "seed");
  EXPECT_TRUE(fs::exists(tmp_ / "ws" / "kernel.toml"));
  // A second init into the same folder is refused.
  auto again = Workspace::init(tmp_ / "ctx", tmp_ / "ws");
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().find("already holds"), std::string::npos);
  // Opening from a subfolder finds the workspace.
  fs::create_directories(tmp_ / "ws" / "sub");
  auto opened = Workspace::open(tmp_ / "ws" / "sub");
  ASSERT_TRUE(opened) << opened.error();
  EXPECT_EQ((*opened)->root(), fs::absolute(tmp_ / "ws"));
  // Refs resolve.
  EXPECT_EQ(*(*opened)->resolve("HEAD"), head->id);
  EXPECT_EQ(*(*opened)->resolve("seed"), head->id);
  EXPECT_EQ(*(*opened)->resolve("main"), head->id);
  EXPECT_FALSE((*opened)->resolve("nope"));
  EXPECT_FALSE((*opened)->resolve("HEAD~1"));
  // Branch and diff (identical checkpoints: empty diff).
  ASSERT_TRUE((*opened)->branch("try", ""));
  EXPECT_EQ(*(*opened)->store().head(), "try");
  auto d = (*opened)->diff("main", "try");
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->empty());
  EXPECT_FALSE((*opened)->branch("try", ""));
  EXPECT_FALSE((*opened)->branch("bad name", ""));
  // Checkout rewrites the working files.
  ASSERT_TRUE(write_file(tmp_ / "ws" / "kernel.hlsl", "garbage"));
  ASSERT_TRUE((*opened)->checkout("seed"));
  EXPECT_EQ(*read_file(tmp_ / "ws" / "kernel.hlsl"), kSource);
}

TEST_F(WorkspaceTest, OpenOutsideAWorkspaceSaysWhatToDo) {
  auto ws = Workspace::open(tmp_);
  ASSERT_FALSE(ws);
  EXPECT_NE(ws.error().find("peak init"), std::string::npos);
}

TEST_F(WorkspaceTest, InitRejectsMissingRegions) {
  ASSERT_TRUE(write_file(tmp_ / "ctx" / "kernel.hlsl", "void main() {}\n"));
  auto ws = Workspace::init(tmp_ / "ctx", tmp_ / "ws2");
  ASSERT_FALSE(ws);
  EXPECT_NE(ws.error().find("peak:begin"), std::string::npos) << ws.error();
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
  ASSERT_TRUE(write_file(tmp_ / "answer.sh",
                         "case \"$PEAK_STEP\" in note-a*) cat " + (tmp_ / "reply-note-a.md").string() +
                             ";; *) cat " + (tmp_ / "reply-note-b.md").string() + ";; esac\n"));
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
  ro.apply.eval = default_eval_options(true);
  ro.apply.eval.seeds = 1;
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
  ro.apply.eval = default_eval_options(true);
  ro.apply.eval.seeds = 1;
  RunResult rr = (*ws)->run(*seq, ro);
  ::unsetenv("PEAK_LIBRARY");
  ASSERT_EQ(rr.disposition, Disposition::passed) << rr.message;
  auto c = (*ws)->store().checkpoint(*rr.steps[0].checkpoint);
  ASSERT_TRUE(c);
  auto summary = json::parse(c->summary_json);
  EXPECT_EQ(summary["configs"]["evaluated"], 1);
  EXPECT_EQ(summary["best"]["config"]["BLOCK"], 32);
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
