#pragma once
// Unified diffs of texts (dtl), for `peak diff`, stashes and replay misses.
#include <string>

namespace peak {

// Unified diff of two texts with file labels (3 lines of context); "" when they are equal.
std::string unified_diff(const std::string& a, const std::string& b, const std::string& label_a,
                         const std::string& label_b);

}  // namespace peak
