#include "engine/library.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "engine/paths.h"
#include "engine/reports.h"
#include "util/fs.h"

namespace peak {
namespace {

const char* kTransformation = R"(+++
format = 1
name = "my-unroll"
version = 1
title = "Unroll the K loop"
backends = ["hlsl"]
+++
Unroll the inner loop.

## Pass 1: device
Unroll the loop over K by four.
)";

TEST(Api, WritesAValidatedTransformationIntoTheWorkspaceLibrary) {
  auto d = make_temp_dir("peak-api-test");
  ASSERT_TRUE(d);
  auto bad = write_transformation(*d, "no front matter here");
  EXPECT_FALSE(bad);
  auto t = write_transformation(*d, kTransformation);
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->name, "my-unroll");
  EXPECT_TRUE(std::filesystem::exists(workspace_library_dir(*d) / "my-unroll.md"));
  auto lib = load_library_for(*d);
  ASSERT_TRUE(lib) << lib.error();
  EXPECT_TRUE(find_transformation(*lib, "my-unroll"));
  EXPECT_TRUE(find_transformation(*lib, "refactor")) << "the shared library stays";
  std::string clash = kTransformation;
  clash.replace(clash.find("my-unroll"), 9, "refactor");
  auto refused = write_transformation(*d, clash);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("already has"), std::string::npos);
  std::filesystem::remove_all(*d);
}

// A written transformation may borrow a shared helper by name; one it cannot find is refused.
TEST(Api, AWrittenTransformationBorrowsASharedHelper) {
  auto d = make_temp_dir("peak-api-test");
  ASSERT_TRUE(d);
  const std::string head = "+++\nformat = 2\nname = \"my-tma\"\ntitle = \"T\"\n[[helpers]]\n";
  const std::string body = "+++\n## Pass 1: device\nDo.\n";
  auto t = write_transformation(*d, head + "name = \"tma\"\nfrom = \"tma-loads\"\n" + body);
  ASSERT_TRUE(t) << t.error();
  ASSERT_EQ(t->helpers.size(), 1u);
  EXPECT_NE(t->helpers[0].code.find("tma_load_2d"), std::string::npos);
  auto missing = write_transformation(*d, head + "name = \"tma\"\nfrom = \"no-such\"\n" + body);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("'no-such', which is not in the library"), std::string::npos)
      << missing.error();
  std::filesystem::remove_all(*d);
}

TEST(Api, ListsTheTransformationsOfAFamily) {
  auto lib = load_library_for("");
  ASSERT_TRUE(lib) << lib.error();
  auto has = [](const LibraryListing& l, const std::string& name) {
    return std::any_of(l.shown.begin(), l.shown.end(),
                       [&](const Transformation& t) { return t.name == name; });
  };
  LibraryListing softmax = filter_library(*lib, std::string("softmax"), false);
  EXPECT_TRUE(has(softmax, "online-softmax"));
  EXPECT_TRUE(has(softmax, "warp-reduce"));
  EXPECT_FALSE(has(softmax, "tb-tiling"));
  EXPECT_EQ(softmax.shown.size() + softmax.others, lib->size());
  EXPECT_NE(others_line(softmax).find("written for other families than softmax; --all lists them"),
            std::string::npos)
      << others_line(softmax);
  LibraryListing rmsnorm = filter_library(*lib, std::string("rmsnorm"), false);
  EXPECT_FALSE(has(rmsnorm, "online-softmax")) << "softmax's alone";
  EXPECT_TRUE(has(rmsnorm, "row-per-block"));
  LibraryListing generic = filter_library(*lib, std::string(""), false);
  EXPECT_TRUE(generic.shown.empty()) << "every shipped transformation names its families";
  EXPECT_NE(others_line(generic).find("than the generic family"), std::string::npos);
  LibraryListing all = filter_library(*lib, std::string("softmax"), true);
  EXPECT_EQ(all.shown.size(), lib->size());
  EXPECT_EQ(all.others, 0u);
  EXPECT_FALSE(all.family);
  EXPECT_EQ(others_line(all), "");
}

TEST(Api, FindsContextsAndSequencesByName) {
  EXPECT_TRUE(find_context("matmul-hlsl-fp32"));
  EXPECT_FALSE(find_context("no-such-context"));
  EXPECT_TRUE(find_sequence("hlsl-fp32"));
  EXPECT_FALSE(find_sequence("no-such-sequence"));
  EXPECT_EQ(report_formats().front(), "text");
}

}  // namespace
}  // namespace peak
