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

}  // namespace
}  // namespace peak
