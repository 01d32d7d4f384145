#pragma once
// Unified diffs of texts (dtl), for `peak diff`, stashes and replay misses, and three-way merges
// of texts (for `peak stash pop`).
#include <string>

namespace peak {

// Unified diff of two texts with file labels (3 lines of context); "" when they are equal.
std::string unified_diff(const std::string& a, const std::string& b, const std::string& label_a,
                         const std::string& label_b);

// A three-way merge of texts by lines.
struct MergeResult {
  std::string text;
  int conflicts = 0;  // regions both sides changed differently (written with markers)
};

// Applies the changes from `base` to `ours` and from `base` to `theirs` together, as git
// merges: a region changed on one side only takes that side's lines, one changed alike on both
// takes them once, and one changed differently on both (or changes that touch) is written as
//   <<<<<<< label_ours / ours' lines / ======= / theirs' lines / >>>>>>> label_theirs
// and counted in `conflicts`.
MergeResult merge3(const std::string& base, const std::string& ours, const std::string& theirs,
                   const std::string& label_ours, const std::string& label_theirs);

}  // namespace peak
