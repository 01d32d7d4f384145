#include "engine/workspace.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace peak
