#include "transform/reply.h"
#include "transform/transformation.h"

#include <gtest/gtest.h>

#include "transform/testing.h"
#include "util/fs.h"

namespace peak {
namespace {

using testing::matmul_source;

const char* kNewDevice =
    "__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {\n"
    "  int row = C_ROW;\n"
    "  int col = C_COL;\n"
    "  if (row < M && col < N) {\n"
    "    float acc = 0.0f;\n"
    "    for (int k = 0; k < K; ++k) acc += A_AT(row, k) * B_AT(k, col);\n"
    "    C_AT(row, col) = acc;\n"
    "  }\n"
    "}\n";

TEST(Reply, OneBlockReplacesTheRegion) {
  SourceRegions cur = matmul_source();
  std::string reply = std::string("Here is the device region:\n\n```cuda\n") + kNewDevice +
                      "```\n\nIt uses the accessor macros.\n";
  SpliceOutcome o = splice_reply(reply, cur, Region::device);
  ASSERT_EQ(o.disposition, Disposition::passed) << o.message;
  EXPECT_EQ(o.source.device, kNewDevice);
  // Everything else is untouched.
  EXPECT_EQ(o.source.before, cur.before);
  EXPECT_EQ(o.source.macros, cur.macros);
  EXPECT_EQ(o.source.between_macros_device, cur.between_macros_device);
  EXPECT_EQ(o.source.between_device_host, cur.between_device_host);
  EXPECT_EQ(o.source.host, cur.host);
  EXPECT_EQ(o.source.after, cur.after);
  // The result still splits into the same regions.
  auto again = split_regions(join_regions(o.source), "x.cu");
  ASSERT_TRUE(again.is_ok()) << again.error();
  EXPECT_EQ(again->device, kNewDevice);
}

TEST(Reply, ExactlyOneFinalNewline) {
  SourceRegions cur = matmul_source();
  auto o = splice_reply("```\n\n#define A_AT(r, c) A[(r) * K + (c)]\n\n\n```", cur, Region::macros);
  ASSERT_EQ(o.disposition, Disposition::passed) << o.message;
  EXPECT_EQ(o.source.macros, "#define A_AT(r, c) A[(r) * K + (c)]\n");
  auto empty = splice_reply("```\n```\n", cur, Region::macros);
  ASSERT_EQ(empty.disposition, Disposition::passed) << empty.message;
  EXPECT_EQ(empty.source.macros, "");
}

TEST(Reply, NoBlockIsNoCode) {
  auto o = splice_reply("I would tile the loop over K.\n`inline code` is not a block.\n",
                        matmul_source(), Region::device);
  EXPECT_EQ(o.disposition, Disposition::no_code);
  EXPECT_NE(o.message.find("no fenced code block"), std::string::npos) << o.message;
}

TEST(Reply, TwoBlocksAreNoCode) {
  std::string reply = "```cuda\n#define X 1\n```\nand\n~~~\n#define Y 2\n~~~\n";
  auto o = splice_reply(reply, matmul_source(), Region::macros);
  EXPECT_EQ(o.disposition, Disposition::no_code);
  EXPECT_NE(o.message.find("2 fenced code blocks (opened on lines 1, 5)"), std::string::npos)
      << o.message;
}

TEST(Reply, UnclosedBlockIsNoCode) {
  auto o = splice_reply("```cuda\n#define X 1\n", matmul_source(), Region::macros);
  EXPECT_EQ(o.disposition, Disposition::no_code);
  EXPECT_NE(o.message.find("never closed"), std::string::npos) << o.message;
}

TEST(Reply, TildeFencesAndNestedFences) {
  SourceRegions cur = matmul_source();
  // A ``` line inside a ~~~ block does not end it; a shorter ~~~ fence neither.
  std::string reply =
      "~~~~ hlsl\n"
      "// usage:\n"
      "// ```\n"
      "~~~\n"
      "#define ONE 1\n"
      "~~~~~\n"
      "done\n";
  auto o = splice_reply(reply, cur, Region::device);
  ASSERT_EQ(o.disposition, Disposition::passed) << o.message;
  EXPECT_EQ(o.source.device, "// usage:\n// ```\n~~~\n#define ONE 1\n");
}

TEST(Reply, BacktickFenceNeedsAMatchingCloser) {
  SourceRegions cur = matmul_source();
  // "```cuda" inside a ```` block has an info string: content, not a closer.
  std::string reply = "````\n#define A 1\n```cuda\n```\n#define B 2\n````\n";
  auto o = splice_reply(reply, cur, Region::device);
  ASSERT_EQ(o.disposition, Disposition::passed) << o.message;
  EXPECT_EQ(o.source.device, "#define A 1\n```cuda\n```\n#define B 2\n");
}

TEST(Reply, MarkersInsideAreAViolation) {
  SourceRegions cur = matmul_source();
  std::string reply =
      "```cuda\n// peak:begin device\n" + std::string(kNewDevice) + "// peak:end device\n```\n";
  auto o = splice_reply(reply, cur, Region::device);
  EXPECT_EQ(o.disposition, Disposition::region_violation);
  EXPECT_NE(o.message.find("region marker on its line 1"), std::string::npos) << o.message;
  // The whole file pasted back is a violation too.
  o = splice_reply("```cuda\n" + std::string(testing::kMatmulSource) + "```\n", cur,
                   Region::device);
  EXPECT_EQ(o.disposition, Disposition::region_violation);
}

TEST(Reply, CopyingAnotherRegionIsAViolation) {
  SourceRegions cur = matmul_source();
  // The device pass repeats the host function.
  std::string reply = "```cuda\n" + std::string(kNewDevice) + "\n" + cur.host + "```\n";
  auto o = splice_reply(reply, cur, Region::device);
  EXPECT_EQ(o.disposition, Disposition::region_violation);
  EXPECT_NE(o.message.find("repeats 4 consecutive lines of the host region"), std::string::npos)
      << o.message;
  EXPECT_NE(o.message.find("edit only the device region"), std::string::npos) << o.message;
}

TEST(Reply, ShortOrExistingLinesAreNotCopies) {
  SourceRegions cur = matmul_source();
  cur.macros = "#define C_ROW (blockIdx.y * blockDim.y + threadIdx.y)\n";
  // Two long lines of the host region, then a short one: below the threshold.
  std::string reply =
      "```cuda\n"
      "  dim3 block(BLOCK_X, BLOCK_Y);\n"
      "  dim3 grid((N + BLOCK_X - 1) / BLOCK_X, (M + BLOCK_Y - 1) / BLOCK_Y);\n"
      "}\n"
      "  dim3 block(BLOCK_X, BLOCK_Y);\n"
      "```\n";
  auto o = splice_reply(reply, cur, Region::device);
  EXPECT_EQ(o.disposition, Disposition::passed) << o.message;
  // Lines that the target region already holds do not count (they were shared before).
  cur.device =
      "  int row = blockIdx.y * blockDim.y + threadIdx.y;\n"
      "  int col = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (row < M && col < N) {\n";
  cur.host = cur.device + "  // host copy\n";
  o = splice_reply("```\n" + cur.device + "```\n", cur, Region::device);
  EXPECT_EQ(o.disposition, Disposition::passed) << o.message;
  // The macros region is compared too (here for a host pass).
  cur.macros =
      "#define C_ROW (blockIdx.y * blockDim.y + threadIdx.y)\n"
      "#define C_COL (blockIdx.x * blockDim.x + threadIdx.x)\n"
      "#define A_AT(row, col) A[(row) * K + (col)]\n";
  o = splice_reply("```\n" + cur.macros + "```\n", cur, Region::host);
  EXPECT_EQ(o.disposition, Disposition::region_violation);
  EXPECT_NE(o.message.find("repeats 3 consecutive lines of the macros region"), std::string::npos)
      << o.message;
}

TEST(Reply, MacrosRegionHoldsOnlyPreprocessorLines) {
  SourceRegions cur = matmul_source();
  std::string ok =
      "```c\n"
      "// Index macros.\n"
      "#define C_ROW (blockIdx.y * blockDim.y + threadIdx.y) /* the row\n"
      "   of C */\n"
      "#define A_AT(row, col) \\\n"
      "  A[(row) * K + (col)]\n"
      "\n"
      "/* a block\n"
      "   comment */ #define B_AT(row, col) B[(row) * N + (col)]\n"
      "#if 0\n"
      "#endif\n"
      "```\n";
  auto o = splice_reply(ok, cur, Region::macros);
  EXPECT_EQ(o.disposition, Disposition::passed) << o.message;

  std::string function =
      "```c\n"
      "#define C_ROW (blockIdx.y * blockDim.y + threadIdx.y)\n"
      "__device__ float at(const float* p, int i) {\n"
      "  return p[i];\n"
      "}\n"
      "```\n";
  o = splice_reply(function, cur, Region::macros);
  EXPECT_EQ(o.disposition, Disposition::region_violation);
  EXPECT_NE(o.message.find("line 2 of the code block is neither a preprocessor line nor a comment"),
            std::string::npos)
      << o.message;
  // The same text is fine in the device region.
  o = splice_reply(function, cur, Region::device);
  EXPECT_EQ(o.disposition, Disposition::passed) << o.message;
}

TEST(Reply, CrlfRepliesAreNormalized) {
  SourceRegions cur = matmul_source();
  std::string reply =
      replace_all("Sure.\n```cuda\n" + std::string(kNewDevice) + "```\n", "\n", "\r\n");
  auto o = splice_reply(reply, cur, Region::device);
  ASSERT_EQ(o.disposition, Disposition::passed) << o.message;
  EXPECT_EQ(o.source.device, kNewDevice);
}

TEST(Reply, CrlfSourcesKeepTheirLineEndings) {
  auto cur = split_regions(replace_all(testing::kMatmulSource, "\n", "\r\n"), "x.cu");
  ASSERT_TRUE(cur.is_ok()) << cur.error();
  auto o = splice_reply("```cuda\n" + std::string(kNewDevice) + "```\n", *cur, Region::device);
  ASSERT_EQ(o.disposition, Disposition::passed) << o.message;
  EXPECT_EQ(o.source.device, replace_all(kNewDevice, "\n", "\r\n"));
}

TEST(Reply, IndentedFenceInAListItem) {
  SourceRegions cur = matmul_source();
  std::string reply = "1. The macros:\n   ```c\n   #define X 1\n     #define Y 2\n   ```\n";
  auto o = splice_reply(reply, cur, Region::macros);
  ASSERT_EQ(o.disposition, Disposition::passed) << o.message;
  EXPECT_EQ(o.source.macros, "#define X 1\n  #define Y 2\n");
}

}  // namespace
}  // namespace peak

namespace peak {
namespace {

TEST(InsertHelpers, AddsMatchingSnippetsOnceAfterAMarker) {
  Transformation t;
  t.helpers.push_back(
      {"copy_tile", Region::device, "cuda", "__device__ void copy_tile() {}\n", ""});
  t.helpers.push_back({"hlsl_only", Region::device, "hlsl", "void hlsl_only() {}\n", ""});
  t.helpers.push_back({"any_backend", Region::macros, "", "#define PEAK_HELPER 1", ""});
  t.helpers.push_back({"wait", Region::device, "", "__device__ void wait() {}", ""});
  SourceRegions src;
  src.device = "__global__ void k() {}\n";
  src.macros = "#define A 1";
  SourceRegions out = insert_helpers(t, "cuda", src);
  // Device helpers come first, in file order, so that the kernels can call them.
  EXPECT_EQ(out.device,
            "// peak helper: copy_tile\n__device__ void copy_tile() {}\n"
            "// peak helper: wait\n__device__ void wait() {}\n__global__ void k() {}\n");
  EXPECT_EQ(out.macros, "#define A 1\n// peak helper: any_backend\n#define PEAK_HELPER 1\n");
  EXPECT_EQ(out.device.find("hlsl_only"), std::string::npos);
  // A second insertion (a retry, a resumed run) changes nothing.
  SourceRegions again = insert_helpers(t, "cuda", out);
  EXPECT_EQ(again.device, out.device);
  EXPECT_EQ(again.macros, out.macros);
}

}  // namespace
}  // namespace peak
