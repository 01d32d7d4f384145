#include "transform/reply.h"

#include "transform/transformation.h"

#include <set>
#include <vector>

#include <fmt/format.h>

#include "util/fs.h"

namespace peak {

namespace {

constexpr size_t kMinRepeatChars = 12;  // non-space characters of a line that counts as copied
constexpr int kMinRepeatRun = 3;        // consecutive copied lines that make a violation

struct Block {
  int open_line = 0;  // 1-based line of the opening fence in the reply
  std::vector<std::string> lines;
};

std::string to_lf(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r') {
      if (i + 1 < text.size() && text[i + 1] == '\n') continue;
      out += '\n';  // a lone CR ends a line too
      continue;
    }
    out += text[i];
  }
  return out;
}

size_t leading_ws(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return i;
}

// An opening fence: optional indentation, three or more ` or ~, then an optional info string
// (which may not hold a backtick for backtick fences). Returns the fence, or "".
std::string opening_fence(std::string_view line) {
  size_t i = leading_ws(line);
  if (i >= line.size() || (line[i] != '`' && line[i] != '~')) return "";
  const char c = line[i];
  size_t n = 0;
  while (i + n < line.size() && line[i + n] == c) ++n;
  if (n < 3) return "";
  if (c == '`' && line.substr(i + n).find('`') != std::string_view::npos) return "";
  return std::string(n, c);
}

// A closing fence for `open`: the same character, at least as long, nothing else but spaces.
bool closes(std::string_view line, const std::string& open) {
  std::string t = trim(line);
  if (t.size() < open.size()) return false;
  for (char c : t)
    if (c != open[0]) return false;
  return true;
}

struct Scan {
  std::vector<Block> blocks;
  int unclosed_line = 0;  // opening line of a block never closed (0 = none)
};

Scan scan_blocks(const std::vector<std::string>& lines) {
  Scan scan;
  std::string open;
  Block cur;
  size_t indent = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (open.empty()) {
      open = opening_fence(line);
      if (!open.empty()) {
        cur = Block{static_cast<int>(i) + 1, {}};
        indent = leading_ws(line);
      }
      continue;
    }
    if (closes(line, open)) {
      scan.blocks.push_back(std::move(cur));
      open.clear();
      continue;
    }
    // Content lines lose the indentation of their fence (an indented block in a list item).
    size_t strip = std::min(indent, leading_ws(line));
    cur.lines.push_back(line.substr(strip));
  }
  if (!open.empty()) scan.unclosed_line = cur.open_line;
  return scan;
}

size_t nonspace_count(std::string_view s) {
  size_t n = 0;
  for (char c : s)
    if (c != ' ' && c != '\t') ++n;
  return n;
}

std::string excerpt(std::string_view s) {
  std::string t = trim(s);
  if (t.size() > 80) t = t.substr(0, 77) + "...";
  return t;
}

// Marker comments (any region's) inside the block.
std::string find_marker(const std::vector<std::string>& lines) {
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l.find("peak:begin") != std::string::npos || l.find("peak:end") != std::string::npos)
      return fmt::format(
          "the code block holds a region marker on its line {} ('{}'); reply with the region's "
          "content only, without marker lines and without the rest of the file",
          i + 1, excerpt(l));
  }
  return "";
}

bool ends_with_backslash(std::string_view line) {
  std::string t = trim(line);
  return !t.empty() && t.back() == '\\';
}

// The macros region holds preprocessor lines (with their continuations), comments and blank
// lines only. Returns a message for the first other line, or "".
std::string check_macros(const std::vector<std::string>& lines) {
  bool in_comment = false;
  bool continuation = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (continuation) {
      continuation = ends_with_backslash(line);
      continue;
    }
    std::string s = trim(line);
    while (true) {
      if (in_comment) {
        size_t end = s.find("*/");
        if (end == std::string::npos) break;
        s = trim(std::string_view(s).substr(end + 2));
        in_comment = false;
      }
      if (s.empty() || starts_with(s, "//")) break;
      if (starts_with(s, "/*")) {
        in_comment = true;
        s = s.substr(2);
        continue;
      }
      if (s[0] == '#') {
        continuation = ends_with_backslash(s);
        size_t open = s.rfind("/*");
        size_t close = s.rfind("*/");
        if (open != std::string::npos && (close == std::string::npos || close < open))
          in_comment = true;
        break;
      }
      return fmt::format(
          "line {} of the code block is neither a preprocessor line nor a comment ('{}'); the "
          "macros region holds only #define and other preprocessor lines: put functions, "
          "declarations and statements in the device region instead",
          i + 1, excerpt(line));
    }
  }
  return "";
}

// Three or more consecutive substantial lines copied from another region (and not already in
// the target region) mean the model rewrote code it was not asked to edit.
std::string check_copies(const std::vector<std::string>& lines, const SourceRegions& current,
                         Region target) {
  std::set<std::string> own;
  for (const auto& l : split_lines(current.get(target))) own.insert(trim(l));
  for (Region r : kAllRegions) {
    if (r == target || trim(current.get(r)).empty()) continue;
    std::set<std::string> other;
    for (const auto& l : split_lines(current.get(r))) other.insert(trim(l));
    int run = 0;
    size_t first = 0, last = 0;
    auto report = [&]() {
      return fmt::format(
          "the code block repeats {} consecutive lines of the {} region (its lines {}-{}, "
          "starting with '{}'); edit only the {} region and leave the {} region as it is",
          run, to_string(r), first + 1, last + 1, excerpt(lines[first]), to_string(target),
          to_string(r));
    };
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string t = trim(lines[i]);
      if (t.empty()) continue;  // blank lines neither count nor break a run
      if (nonspace_count(t) >= kMinRepeatChars && other.count(t) && !own.count(t)) {
        if (run == 0) first = i;
        last = i;
        ++run;
        continue;
      }
      if (run >= kMinRepeatRun) return report();
      run = 0;
    }
    if (run >= kMinRepeatRun) return report();
  }
  return "";
}

bool uses_crlf(const SourceRegions& s, Region target) {
  const std::string& own = s.get(target);
  if (!own.empty()) return own.find("\r\n") != std::string::npos;
  return s.before.find("\r\n") != std::string::npos;
}

}  // namespace

SpliceOutcome splice_reply(const std::string& reply, const SourceRegions& current, Region target) {
  SpliceOutcome out;
  out.source = current;
  const std::vector<std::string> lines = split_lines(to_lf(reply));
  Scan scan = scan_blocks(lines);
  if (scan.unclosed_line) {
    out.disposition = Disposition::no_code;
    out.message = fmt::format(
        "the code block opened on line {} of the reply is never closed; reply with exactly one "
        "complete fenced code block",
        scan.unclosed_line);
    return out;
  }
  if (scan.blocks.size() != 1) {
    out.disposition = Disposition::no_code;
    if (scan.blocks.empty()) {
      out.message = fmt::format(
          "the reply holds no fenced code block; reply with exactly one block (``` ... ```) "
          "holding the complete new {} region",
          to_string(target));
    } else {
      std::vector<std::string> at;
      for (const auto& b : scan.blocks) at.push_back(std::to_string(b.open_line));
      out.message = fmt::format(
          "the reply holds {} fenced code blocks (opened on lines {}); exactly one is expected, "
          "holding the complete new {} region",
          scan.blocks.size(), join(at, ", "), to_string(target));
    }
    return out;
  }

  std::vector<std::string> code = std::move(scan.blocks.front().lines);
  // Drop blank lines at both ends; the region then ends with exactly one newline.
  while (!code.empty() && trim(code.back()).empty()) code.pop_back();
  size_t skip = 0;
  while (skip < code.size() && trim(code[skip]).empty()) ++skip;
  code.erase(code.begin(), code.begin() + static_cast<std::ptrdiff_t>(skip));

  std::string why = find_marker(code);
  if (why.empty() && target == Region::macros) why = check_macros(code);
  if (why.empty()) why = check_copies(code, current, target);
  if (!why.empty()) {
    out.disposition = Disposition::region_violation;
    out.message = std::move(why);
    return out;
  }

  const std::string eol = uses_crlf(current, target) ? "\r\n" : "\n";
  std::string text;
  for (const auto& l : code) text += l + eol;
  out.source.get(target) = std::move(text);
  out.disposition = Disposition::passed;
  out.message.clear();
  return out;
}

SourceRegions insert_helpers(const Transformation& t, const std::string& backend,
                             SourceRegions source) {
  // Device helpers go before the code of the region (functions must be declared before the
  // kernels call them), in file order; macros and host helpers go at the end.
  std::string device_prefix;
  for (const auto& h : t.helpers) {
    if (!h.backend.empty() && h.backend != backend) continue;
    std::string& region = source.get(h.region);
    std::string marker = "// peak helper: " + h.name;
    if (region.find(marker) != std::string::npos) continue;
    std::string text = marker + "\n" + h.code;
    if (text.back() != '\n') text += '\n';
    if (h.region == Region::device) {
      device_prefix += text;
      continue;
    }
    if (!region.empty() && region.back() != '\n') region += '\n';
    region += text;
  }
  source.device = device_prefix + source.device;
  return source;
}

}  // namespace peak
