#include "util/diff.h"

#include <sstream>
#include <vector>

#include <dtl/dtl.hpp>

#include "util/fs.h"

namespace peak {

std::string unified_diff(const std::string& a, const std::string& b, const std::string& label_a,
                         const std::string& label_b) {
  auto la = split_lines(a), lb = split_lines(b);
  dtl::Diff<std::string, std::vector<std::string>> d(la, lb);
  d.onHuge();
  d.compose();
  d.composeUnifiedHunks();
  std::ostringstream out;
  if (d.getUniHunks().empty()) return "";
  out << "--- " << label_a << "\n+++ " << label_b << "\n";
  d.printUnifiedFormat(out);
  return out.str();
}

}  // namespace peak
