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

namespace {

using Lines = std::vector<std::string>;

// The lines of `text`, each with its '\n' (the last one may have none): joined, they are `text`.
Lines lines_of(const std::string& text) {
  Lines out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    size_t end = nl == std::string::npos ? text.size() : nl + 1;
    out.push_back(text.substr(start, end - start));
    start = end;
  }
  return out;
}

// For each line of `base`, the index of the line of `other` it is kept as (-1: changed or
// removed), from dtl's shortest edit script.
std::vector<long long> kept_lines(const Lines& base, const Lines& other) {
  std::vector<long long> match(base.size(), -1);
  dtl::Diff<std::string, Lines> d(base, other);
  d.onHuge();
  d.compose();
  for (const auto& [line, info] : d.getSes().getSequence())
    if (info.type == dtl::SES_COMMON)
      match[static_cast<size_t>(info.beforeIdx - 1)] = info.afterIdx - 1;
  return match;
}

void append(std::string& out, const Lines& lines, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i) out += lines[i];
}

}  // namespace

MergeResult merge3(const std::string& base_text, const std::string& ours_text,
                   const std::string& theirs_text, const std::string& label_ours,
                   const std::string& label_theirs) {
  Lines base = lines_of(base_text), ours = lines_of(ours_text), theirs = lines_of(theirs_text);
  auto in_ours = kept_lines(base, ours), in_theirs = kept_lines(base, theirs);
  MergeResult r;
  size_t b = 0, o = 0, t = 0;  // the next line of base, ours and theirs
  while (b < base.size() || o < ours.size() || t < theirs.size()) {
    // The next base line that both sides kept ends the region that changed (if any).
    size_t next = b;
    while (next < base.size() && (in_ours[next] < 0 || in_theirs[next] < 0)) ++next;
    size_t o_end = next < base.size() ? static_cast<size_t>(in_ours[next]) : ours.size();
    size_t t_end = next < base.size() ? static_cast<size_t>(in_theirs[next]) : theirs.size();
    if (next == b && o_end == o && t_end == t) {  // a line nobody changed
      r.text += base[b];
      ++b, ++o, ++t;
      continue;
    }
    Lines base_part(base.begin() + b, base.begin() + next);
    Lines ours_part(ours.begin() + o, ours.begin() + o_end);
    Lines theirs_part(theirs.begin() + t, theirs.begin() + t_end);
    if (ours_part == base_part || ours_part == theirs_part) {
      append(r.text, theirs, t, t_end);
    } else if (theirs_part == base_part) {
      append(r.text, ours, o, o_end);
    } else {
      ++r.conflicts;
      auto newline = [&] {
        if (!r.text.empty() && r.text.back() != '\n') r.text += '\n';
      };
      newline();
      r.text += "<<<<<<< " + label_ours + "\n";
      append(r.text, ours, o, o_end);
      newline();
      r.text += "=======\n";
      append(r.text, theirs, t, t_end);
      newline();
      r.text += ">>>>>>> " + label_theirs + "\n";
    }
    b = next, o = o_end, t = t_end;
  }
  return r;
}

}  // namespace peak
