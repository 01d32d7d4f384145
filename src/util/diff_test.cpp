#include "util/diff.h"

#include <gtest/gtest.h>

namespace peak {
namespace {

TEST(UnifiedDiff, ShowsChangedLines) {
  std::string d = unified_diff("a\nb\nc\n", "a\nB\nc\n", "x", "y");
  EXPECT_NE(d.find("--- x"), std::string::npos);
  EXPECT_NE(d.find("-b"), std::string::npos);
  EXPECT_NE(d.find("+B"), std::string::npos);
  EXPECT_TRUE(unified_diff("same\n", "same\n", "x", "y").empty());
}

TEST(Merge3, TakesEachSidesChangesToDifferentRegions) {
  std::string base = "a\nb\nc\nd\ne\n";
  std::string ours = "A\nb\nc\nd\ne\n";       // changed the first line
  std::string theirs = "a\nb\nc\nd\nE\nf\n";  // changed the last and added one
  auto m = merge3(base, ours, theirs, "HEAD", "stash");
  EXPECT_EQ(m.conflicts, 0);
  EXPECT_EQ(m.text, "A\nb\nc\nd\nE\nf\n");
  // One side unchanged: the other side's text, whatever it is.
  EXPECT_EQ(merge3(base, base, theirs, "o", "t").text, theirs);
  EXPECT_EQ(merge3(base, ours, base, "o", "t").text, ours);
  // The same change on both sides is taken once.
  m = merge3(base, ours, ours, "o", "t");
  EXPECT_EQ(m.conflicts, 0);
  EXPECT_EQ(m.text, ours);
  // A removed line and an insertion elsewhere.
  m = merge3(base, "a\nc\nd\ne\n", "a\nb\nc\nd\nx\ne\n", "o", "t");
  EXPECT_EQ(m.conflicts, 0);
  EXPECT_EQ(m.text, "a\nc\nd\nx\ne\n");
}

TEST(Merge3, ClashingChangesGetConflictMarkers) {
  std::string base = "a\nb\nc\n";
  auto m = merge3(base, "a\nB1\nc\n", "a\nB2\nc\n", "HEAD", "stash 1");
  EXPECT_EQ(m.conflicts, 1);
  EXPECT_EQ(m.text, "a\n<<<<<<< HEAD\nB1\n=======\nB2\n>>>>>>> stash 1\nc\n");
  // Without a final newline the markers still start lines of their own.
  m = merge3("x", "y", "z", "o", "t");
  EXPECT_EQ(m.conflicts, 1);
  EXPECT_EQ(m.text, "<<<<<<< o\ny\n=======\nz\n>>>>>>> t\n");
  // Two separate clashes are two conflicts; the lines between are kept.
  m = merge3("1\n2\n3\n4\n5\n", "1o\n2\n3\n4\n5o\n", "1t\n2\n3\n4\n5t\n", "o", "t");
  EXPECT_EQ(m.conflicts, 2);
  EXPECT_NE(m.text.find(">>>>>>> t\n2\n3\n4\n<<<<<<< o\n"), std::string::npos) << m.text;
}

}  // namespace
}  // namespace peak
