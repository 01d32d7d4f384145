// The source file's regions: the marker lines and splitting a source into its fixed text and
// its three regions (and joining them back).
#include <optional>
#include <string>

#include <fmt/format.h>

#include "context/context.h"

namespace peak {

std::string& SourceRegions::get(Region r) {
  switch (r) {
    case Region::macros:
      return macros;
    case Region::device:
      return device;
    case Region::host:
      return host;
  }
  return host;
}

const std::string& SourceRegions::get(Region r) const {
  return const_cast<SourceRegions*>(this)->get(r);
}

std::string begin_marker(Region r) { return fmt::format("// peak:begin {}", to_string(r)); }
std::string end_marker(Region r) { return fmt::format("// peak:end {}", to_string(r)); }

namespace {

constexpr std::string_view kRegionOrderHelp =
    "every source needs the three regions macros, device and host, in that order";

struct Marker {
  bool begin = false;
  std::string region;  // as written (may be unknown)
};

// A marker line: optional leading blanks, "// peak:begin NAME" or "// peak:end NAME", optional
// trailing blanks and '\r'.
std::optional<Marker> parse_marker(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
    line.remove_suffix(1);
  }
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  constexpr std::string_view kPrefix = "// peak:";
  if (line.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  line.remove_prefix(kPrefix.size());
  Marker m;
  if (line.substr(0, 6) == "begin ") {
    m.begin = true;
    line.remove_prefix(6);
  } else if (line.substr(0, 4) == "end ") {
    line.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  m.region = std::string(line);
  return m;
}

}  // namespace

Result<SourceRegions> split_regions(std::string_view source, std::string_view filename) {
  // Byte offsets of each marker line: start and one past its line terminator.
  struct Seen {
    size_t line_no = 0;
    size_t start = 0, end = 0;
  };
  std::optional<Seen> begins[3], ends[3];
  int open = -1;       // region currently open
  int next_begin = 0;  // index of the region whose begin marker must come next
  size_t pos = 0, line_no = 0;
  while (pos < source.size()) {
    ++line_no;
    size_t nl = source.find('\n', pos);
    size_t line_end = nl == std::string_view::npos ? source.size() : nl + 1;
    std::string_view line =
        source.substr(pos, (nl == std::string_view::npos ? source.size() : nl) - pos);
    auto m = parse_marker(line);
    if (m) {
      auto loc = [&] { return fmt::format("{}:{}: ", filename, line_no); };
      auto region = region_from_string(m->region);
      if (!region) {
        return make_error(loc() + fmt::format("unknown region '{}' in a peak marker (regions are "
                                              "macros, device and host)",
                                              m->region));
      }
      int r = static_cast<int>(*region);
      std::string name(to_string(*region));
      if (m->begin) {
        if (begins[r]) {
          return make_error(loc() + fmt::format("region '{}' is opened twice (first at line {})",
                                                name, begins[r]->line_no));
        }
        if (open >= 0) {
          std::string cur(to_string(static_cast<Region>(open)));
          return make_error(loc() + fmt::format("region '{}' is opened inside region '{}'; close "
                                                "'{}' with '{}' first",
                                                name, cur, cur,
                                                end_marker(static_cast<Region>(open))));
        }
        if (r != next_begin) {
          std::string expected(to_string(static_cast<Region>(next_begin)));
          return make_error(loc() + fmt::format("region '{}' comes before region '{}'; {}", name,
                                                expected, kRegionOrderHelp));
        }
        begins[r] = Seen{line_no, pos, line_end};
        open = r;
        ++next_begin;
      } else {
        if (ends[r]) {
          return make_error(loc() + fmt::format("region '{}' is closed twice (first at line {})",
                                                name, ends[r]->line_no));
        }
        if (open != r) {
          return make_error(loc() + fmt::format("'{}' without a matching '{}' before it",
                                                end_marker(*region), begin_marker(*region)));
        }
        ends[r] = Seen{line_no, pos, line_end};
        open = -1;
      }
    }
    pos = line_end;
  }
  if (open >= 0) {
    Region r = static_cast<Region>(open);
    return make_error(fmt::format("{}:{}: region '{}' opened here is never closed (no '{}' marker)",
                                  filename, begins[open]->line_no, to_string(r), end_marker(r)));
  }
  for (Region r : kAllRegions) {
    int i = static_cast<int>(r);
    if (!begins[i]) {
      return make_error(
          fmt::format("{}: no '{}' marker; {}", filename, begin_marker(r), kRegionOrderHelp));
    }
  }
  auto slice = [&](size_t a, size_t b) { return std::string(source.substr(a, b - a)); };
  SourceRegions out;
  out.before = slice(0, begins[0]->end);
  out.macros = slice(begins[0]->end, ends[0]->start);
  out.between_macros_device = slice(ends[0]->start, begins[1]->end);
  out.device = slice(begins[1]->end, ends[1]->start);
  out.between_device_host = slice(ends[1]->start, begins[2]->end);
  out.host = slice(begins[2]->end, ends[2]->start);
  out.after = slice(ends[2]->start, source.size());
  return out;
}

std::string join_regions(const SourceRegions& r) {
  // Region text is whole lines; a region whose last line lacks its newline gets one, so the end
  // marker that follows stays on a line of its own.
  auto region = [](const std::string& s) { return (s.empty() || s.back() == '\n') ? s : s + "\n"; };
  return r.before + region(r.macros) + r.between_macros_device + region(r.device) +
         r.between_device_host + region(r.host) + r.after;
}

}  // namespace peak
