#include "transform/transformation.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <system_error>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "expr/expr.h"
#include "util/cuda_arch.h"
#include "util/fs.h"
#include "util/toml_names.h"

namespace peak {

namespace {

// Returns a failed Status from the current function (which returns Status or Result<T>).
#define RETURN_IF_ERROR(expr)                                        \
  do {                                                               \
    ::peak::Status peak_status_ = (expr);                            \
    if (!peak_status_) return ::peak::Error{peak_status_.message()}; \
  } while (0)

constexpr std::string_view kKnownBackends[] = {"cuda", "hip", "hlsl"};

// Where TOML text starts inside the file (1-based line of its first line) and the file name.
struct TomlSource {
  std::string_view file;
  int first_line = 1;
  int line_of(const toml::node& n) const {
    const auto& src = n.source();
    return src.begin.line > 0 ? static_cast<int>(src.begin.line) + first_line - 1 : first_line;
  }
  std::string at(const toml::node& n) const { return fmt::format("{}:{}", file, line_of(n)); }
  std::string at_line(int line) const { return fmt::format("{}:{}", file, line); }
};

std::string normalize_newlines(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;
    out += text[i];
  }
  if (starts_with(out, "\xEF\xBB\xBF")) out.erase(0, 3);
  return out;
}

std::string known_backends_text() {
  std::vector<std::string> names(std::begin(kKnownBackends), std::end(kKnownBackends));
  return join(names, ", ");
}

bool is_known_backend(std::string_view b) {
  return std::find(std::begin(kKnownBackends), std::end(kKnownBackends), b) !=
         std::end(kKnownBackends);
}

bool is_identifier(std::string_view s) {
  if (s.empty()) return false;
  auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  if (!alpha(s[0])) return false;
  for (char c : s)
    if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
  return true;
}

bool is_kebab(std::string_view s) {
  if (s.empty() || s.front() == '-' || s.back() == '-') return false;
  char prev = 0;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok || (c == '-' && prev == '-')) return false;
    prev = c;
  }
  return true;
}

// Rejects keys outside `allowed` (typos would otherwise be silently ignored).
Status check_keys(const toml::table& t, std::initializer_list<std::string_view> allowed,
                  const TomlSource& src, std::string_view what) {
  for (auto&& [k, v] : t) {
    if (std::find(allowed.begin(), allowed.end(), k.str()) != allowed.end()) continue;
    std::vector<std::string> names;
    for (auto a : allowed) names.emplace_back(a);
    return Status::error(fmt::format("{}: unknown key '{}' in {}; expected one of: {}", src.at(v),
                                     k.str(), what, join(names, ", ")));
  }
  return Status::ok();
}

Result<std::string> get_string(const toml::table& t, std::string_view key, const TomlSource& src,
                               int missing_line, bool required, std::string_view what) {
  const toml::node* n = t.get(key);
  if (!n) {
    if (required)
      return make_error(
          fmt::format("{}: missing key '{}' in {}", src.at_line(missing_line), key, what));
    return std::string();
  }
  if (!n->is_string())
    return make_error(
        fmt::format("{}: '{}' must be a string, found {}", src.at(*n), key, toml_type_name(*n)));
  return std::string(n->as_string()->get());
}

Result<int64_t> get_int(const toml::table& t, std::string_view key, const TomlSource& src,
                        int missing_line, std::optional<int64_t> fallback, std::string_view what) {
  const toml::node* n = t.get(key);
  if (!n) {
    if (!fallback)
      return make_error(
          fmt::format("{}: missing key '{}' in {}", src.at_line(missing_line), key, what));
    return *fallback;
  }
  if (!n->is_integer())
    return make_error(
        fmt::format("{}: '{}' must be an integer, found {}", src.at(*n), key, toml_type_name(*n)));
  return n->as_integer()->get();
}

Result<std::vector<int64_t>> get_int_list(const toml::node& n, std::string_view key,
                                          const TomlSource& src) {
  const toml::array* arr = n.as_array();
  if (!arr)
    return make_error(fmt::format("{}: '{}' must be an array of integers, found {}", src.at(n), key,
                                  toml_type_name(n)));
  if (arr->empty())
    return make_error(fmt::format("{}: '{}' is empty; give at least one value", src.at(n), key));
  std::vector<int64_t> out;
  for (const toml::node& e : *arr) {
    if (!e.is_integer())
      return make_error(fmt::format("{}: '{}' must hold integers only, found {}", src.at(e), key,
                                    toml_type_name(e)));
    int64_t v = e.as_integer()->get();
    if (std::find(out.begin(), out.end(), v) != out.end())
      return make_error(fmt::format("{}: value {} appears twice in '{}'", src.at(e), v, key));
    out.push_back(v);
  }
  return out;
}

Result<toml::table> parse_toml(std::string_view text, const TomlSource& src) {
  try {
    return toml::parse(text, std::string(src.file));
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    int line = static_cast<int>(b.line) + src.first_line - 1;
    return make_error(
        fmt::format("{}:{}:{}: invalid TOML: {}", src.file, line, b.column, e.description()));
  }
}

Status check_format(const toml::table& t, const TomlSource& src, int supported,
                    std::string_view kind, int* out) {
  auto f = get_int(t, "format", src, src.first_line, std::nullopt, kind);
  if (!f) return Status::error(f.error() + fmt::format(" (add 'format = {}')", supported));
  const toml::node& n = *t.get("format");
  if (*f > supported)
    return Status::error(fmt::format(
        "{}: {} format {} is newer than this peak supports (format {}); upgrade peak or "
        "rewrite the file in format {}",
        src.at(n), kind, *f, supported, supported));
  if (*f < 1)
    return Status::error(fmt::format(
        "{}: format must be a positive integer (this peak reads format {})", src.at(n), supported));
  *out = static_cast<int>(*f);
  return Status::ok();
}

// ---- transformation front matter ----

// Reads string `key` of table `t` into `out` (see get_string; unchanged on failure).
Status read_string(const toml::table& t, std::string_view key, const TomlSource& src,
                   int missing_line, bool required, std::string_view what, std::string* out) {
  auto s = get_string(t, key, src, missing_line, required, what);
  if (!s) return s.status();
  *out = *s;
  return Status::ok();
}

// Calls `parse` on each table of the array of tables `key` ([[key]]), when the key is there;
// `form` says in the error what the tables hold.
template <typename Parse>
Status for_each_table(const toml::table& t, std::string_view key, const TomlSource& src,
                      std::string_view form, Parse parse) {
  const toml::node* n = t.get(key);
  if (!n) return Status::ok();
  const toml::array* arr = n->as_array();
  if (!arr || !arr->is_array_of_tables())
    return Status::error(
        fmt::format("{}: '{}' must be an array of tables ({})", src.at(*n), key, form));
  for (const toml::node& e : *arr) RETURN_IF_ERROR(parse(e));
  return Status::ok();
}

// name (kebab-case), version (1 or more) and title.
Status parse_identity(const toml::table& t, const TomlSource& src, int top, Transformation& tr) {
  auto name = get_string(t, "name", src, top, true, "the front matter");
  if (!name) return name.status();
  if (!is_kebab(*name))
    return Status::error(fmt::format(
        "{}: name '{}' must be kebab-case (lowercase letters, digits and single dashes)",
        src.at(*t.get("name")), *name));
  tr.name = *name;

  auto version = get_int(t, "version", src, top, 1, "the front matter");
  if (!version) return version.status();
  if (*version < 1)
    return Status::error(fmt::format("{}: version must be 1 or more", src.at(*t.get("version"))));
  tr.version = static_cast<int>(*version);

  return read_string(t, "title", src, top, true, "the front matter", &tr.title);
}

// `families` (format 2): kernel family names such as "matmul", each once.
Status parse_families(const toml::table& t, const TomlSource& src, Transformation& tr) {
  const toml::node* f = t.get("families");
  if (!f) return Status::ok();
  if (tr.format < 2)
    return Status::error(fmt::format(
        "{}: 'families' needs transformation format 2; write 'format = 2'", src.at(*f)));
  const toml::array* arr = f->as_array();
  if (!arr || arr->empty())
    return Status::error(fmt::format(
        "{}: 'families' must be a non-empty array of kernel family names such as [\"matmul\"] "
        "(leave it out for a transformation that suits any family)",
        src.at(*f)));
  for (const toml::node& e : *arr) {
    if (!e.is_string() || !is_kebab(e.as_string()->get()))
      return Status::error(fmt::format(
          "{}: 'families' must hold kernel family names (lowercase, as kernel.toml's `family`)",
          src.at(e)));
    const std::string name = e.as_string()->get();
    if (std::find(tr.families.begin(), tr.families.end(), name) != tr.families.end())
      return Status::error(fmt::format("{}: family '{}' appears twice", src.at(e), name));
    tr.families.push_back(name);
  }
  return Status::ok();
}

Status parse_backends(const toml::table& t, const TomlSource& src, Transformation& tr) {
  const toml::node* b = t.get("backends");
  if (!b) return Status::ok();
  const toml::array* arr = b->as_array();
  if (!arr)
    return Status::error(
        fmt::format("{}: 'backends' must be an array of strings such as "
                    "[\"cuda\", \"hlsl\"], found {}",
                    src.at(*b), toml_type_name(*b)));
  for (const toml::node& e : *arr) {
    if (!e.is_string() || !is_known_backend(e.as_string()->get()))
      return Status::error(
          fmt::format("{}: unknown backend {}; expected one of: {}", src.at(e),
                      e.is_string() ? "'" + e.as_string()->get() + "'" : toml_type_name(e),
                      known_backends_text()));
    tr.backends.push_back(e.as_string()->get());
  }
  return Status::ok();
}

// Reads the optional expression `key` into `out` (unchanged when absent). Only its syntax is
// checked: the names it may use are known when the transformation is applied to a kernel.
Status read_expression(const toml::table& t, std::string_view key, const TomlSource& src, int top,
                       std::string* out) {
  if (!t.get(key)) return Status::ok();
  auto text = get_string(t, key, src, top, false, "the front matter");
  if (!text) return text.status();
  if (auto e = expr::Expression::parse(*text); !e)
    return Status::error(fmt::format("{}: cannot parse {} = \"{}\": {}", src.at(*t.get(key)), key,
                                     *text, e.error()));
  *out = *text;
  return Status::ok();
}

// `requires`: the CUDA architecture the transformation needs ("sm_80", "sm_90a").
Status parse_requires(const toml::table& t, const TomlSource& src, int top, Transformation& tr) {
  if (!t.get("requires")) return Status::ok();
  auto req = get_string(t, "requires", src, top, false, "the front matter");
  if (!req) return req.status();
  auto arch = parse_cuda_arch(*req);
  if (!arch || (arch->suffix != 0 && arch->suffix != 'a'))
    return Status::error(fmt::format(
        "{}: requires = \"{}\" is not a device architecture; expected a CUDA architecture "
        "such as \"sm_80\" (compute capability 8.0 or newer) or \"sm_90a\" (with the "
        "architecture-specific features of 9.0)",
        src.at(*t.get("requires")), *req));
  tr.required_arch = *req;
  return Status::ok();
}

Status parse_retires(const toml::table& t, const TomlSource& src, Transformation& tr) {
  const toml::node* r = t.get("retires");
  if (!r) return Status::ok();
  const toml::array* arr = r->as_array();
  if (!arr)
    return Status::error(fmt::format(
        "{}: 'retires' must be an array of tuning parameter names such as [\"BLOCK_X\"]",
        src.at(*r)));
  for (const toml::node& e : *arr) {
    if (!e.is_string() || !is_identifier(e.as_string()->get()))
      return Status::error(fmt::format(
          "{}: 'retires' must list tuning parameter names (preprocessor identifiers such as "
          "BLOCK_X)",
          src.at(e)));
    tr.retires.push_back(e.as_string()->get());
  }
  return Status::ok();
}

// One [[tuning]] entry: a new parameter, its values and its default.
Status parse_tuning_param(const toml::node& e, const TomlSource& src, Transformation& tr) {
  const toml::table& pt = *e.as_table();
  int line = src.line_of(e);
  RETURN_IF_ERROR(check_keys(pt, {"name", "values", "default"}, src, "a [[tuning]] entry"));
  TuningParam p;
  auto pname = get_string(pt, "name", src, line, true, "a [[tuning]] entry");
  if (!pname) return pname.status();
  if (!is_identifier(*pname))
    return Status::error(fmt::format(
        "{}: tuning parameter name '{}' must be a preprocessor identifier (e.g. TILE_K)",
        src.at(*pt.get("name")), *pname));
  p.name = *pname;
  for (const auto& q : tr.tuning)
    if (q.name == p.name)
      return Status::error(fmt::format("{}: tuning parameter '{}' is declared twice",
                                       src.at(*pt.get("name")), p.name));
  const toml::node* vn = pt.get("values");
  if (!vn)
    return Status::error(
        fmt::format("{}: tuning parameter '{}' has no 'values'", src.at_line(line), p.name));
  auto values = get_int_list(*vn, "values", src);
  if (!values) return values.status();
  p.values = *values;
  auto def = get_int(pt, "default", src, line, p.values.front(), "a [[tuning]] entry");
  if (!def) return def.status();
  if (std::find(p.values.begin(), p.values.end(), *def) == p.values.end())
    return Status::error(fmt::format("{}: default {} of '{}' is not one of its values",
                                     src.at(*pt.get("default")), *def, p.name));
  p.default_value = *def;
  tr.tuning.push_back(std::move(p));
  return Status::ok();
}

// [translations.BACKEND] "phrase" = "spelling".
Status parse_translations(const toml::table& t, const TomlSource& src, Transformation& tr) {
  const toml::node* tn = t.get("translations");
  if (!tn) return Status::ok();
  const toml::table* tt = tn->as_table();
  if (!tt)
    return Status::error(fmt::format(
        "{}: 'translations' must be tables like [translations.cuda] \"phrase\" = \"spelling\"",
        src.at(*tn)));
  for (auto&& [backend, table] : *tt) {
    if (!is_known_backend(backend.str()))
      return Status::error(
          fmt::format("{}: unknown backend '{}' in translations; expected "
                      "one of: {}",
                      src.at(table), backend.str(), known_backends_text()));
    const toml::table* bt = table.as_table();
    if (!bt)
      return Status::error(
          fmt::format("{}: translations.{} must be a table of \"phrase\" = "
                      "\"spelling\"",
                      src.at(table), backend.str()));
    auto& dst = tr.translations[std::string(backend.str())];
    for (auto&& [phrase, spelling] : *bt) {
      if (!spelling.is_string())
        return Status::error(fmt::format("{}: translation of '{}' must be a string, found {}",
                                         src.at(spelling), phrase.str(), toml_type_name(spelling)));
      dst[std::string(phrase.str())] = spelling.as_string()->get();
    }
  }
  return Status::ok();
}

// [devices."NAME"] note = "...": notes for devices whose name contains NAME.
Status parse_device_notes(const toml::table& t, const TomlSource& src, Transformation& tr) {
  const toml::node* dn = t.get("devices");
  if (!dn) return Status::ok();
  const toml::table* dt = dn->as_table();
  if (!dt)
    return Status::error(fmt::format(
        "{}: 'devices' must be tables like [devices.\"H100\"] note = \"...\"", src.at(*dn)));
  for (auto&& [device, table] : *dt) {
    const toml::table* nt = table.as_table();
    if (!nt)
      return Status::error(fmt::format("{}: devices.\"{}\" must be a table with a 'note' string",
                                       src.at(table), device.str()));
    RETURN_IF_ERROR(check_keys(*nt, {"note"}, src, fmt::format("devices.\"{}\"", device.str())));
    auto note = get_string(*nt, "note", src, src.line_of(table), true,
                           fmt::format("devices.\"{}\"", device.str()));
    if (!note) return note.status();
    if (device.str().empty())
      return Status::error(
          fmt::format("{}: a device key must be a non-empty name substring", src.at(table)));
    tr.device_notes[std::string(device.str())] = trim(*note);
  }
  return Status::ok();
}

// One [[helpers]] entry: code inserted into a region (of one backend, or of all), or the helper
// of the same name of another transformation (`from`), resolved when the library is loaded.
Status parse_helper(const toml::node& e, const TomlSource& src, Transformation& tr) {
  const toml::table& ht = *e.as_table();
  int line = src.line_of(e);
  RETURN_IF_ERROR(
      check_keys(ht, {"name", "region", "backend", "code", "from"}, src, "a [[helpers]] entry"));
  HelperSnippet h;
  RETURN_IF_ERROR(read_string(ht, "name", src, line, true, "a [[helpers]] entry", &h.name));
  RETURN_IF_ERROR(read_string(ht, "from", src, line, false, "a [[helpers]] entry", &h.from));
  if (!h.from.empty()) {
    for (const char* key : {"region", "backend", "code"})
      if (ht.contains(key))
        return Status::error(fmt::format(
            "{}: helper '{}' comes from transformation '{}', which gives its {}; remove '{}' "
            "(or remove 'from' and give the whole helper)",
            src.at(*ht.get(key)), h.name, h.from, key, key));
    tr.helpers.push_back(std::move(h));
    return Status::ok();
  }
  auto region = get_string(ht, "region", src, line, true, "a [[helpers]] entry");
  if (!region) return region.status();
  auto r = region_from_string(*region);
  if (!r)
    return Status::error(fmt::format("{}: unknown region '{}'; expected macros, device or host",
                                     src.at(*ht.get("region")), *region));
  h.region = *r;
  RETURN_IF_ERROR(read_string(ht, "backend", src, line, false, "a [[helpers]] entry", &h.backend));
  if (!h.backend.empty() && !is_known_backend(h.backend))
    return Status::error(fmt::format("{}: unknown backend '{}'; expected one of: {}",
                                     src.at(*ht.get("backend")), h.backend, known_backends_text()));
  RETURN_IF_ERROR(read_string(ht, "code", src, line, true, "a [[helpers]] entry", &h.code));
  tr.helpers.push_back(std::move(h));
  return Status::ok();
}

Status parse_front_matter(const toml::table& t, const TomlSource& src, Transformation& tr) {
  RETURN_IF_ERROR(check_keys(
      t,
      {"format", "name", "version", "title", "backends", "families", "tuning", "tuning_valid",
       "workspace", "valid", "lifts", "requires", "retires", "translations", "devices", "helpers"},
      src, "the front matter"));
  RETURN_IF_ERROR(check_format(t, src, kTransformationFormatVersion, "transformation", &tr.format));
  const int top = src.first_line - 1;  // the opening "+++" line
  RETURN_IF_ERROR(parse_identity(t, src, top, tr));
  RETURN_IF_ERROR(parse_backends(t, src, tr));
  RETURN_IF_ERROR(parse_families(t, src, tr));
  RETURN_IF_ERROR(read_expression(t, "workspace", src, top, &tr.workspace));
  RETURN_IF_ERROR(read_expression(t, "tuning_valid", src, top, &tr.tuning_valid));
  tr.tuning_valid = trim(tr.tuning_valid);
  RETURN_IF_ERROR(read_expression(t, "valid", src, top, &tr.valid));
  RETURN_IF_ERROR(read_expression(t, "lifts", src, top, &tr.lifts));
  tr.lifts = trim(tr.lifts);
  RETURN_IF_ERROR(parse_requires(t, src, top, tr));
  RETURN_IF_ERROR(parse_retires(t, src, tr));
  RETURN_IF_ERROR(
      for_each_table(t, "tuning", src, "[[tuning]] with name, values, default",
                     [&](const toml::node& e) { return parse_tuning_param(e, src, tr); }));
  RETURN_IF_ERROR(parse_translations(t, src, tr));
  RETURN_IF_ERROR(parse_device_notes(t, src, tr));
  return for_each_table(t, "helpers", src, "[[helpers]] with name, region, code",
                        [&](const toml::node& e) { return parse_helper(e, src, tr); });
}

// ---- Markdown body ----

// Returns the fence ("```", "~~~~", ...) a line opens or closes, or "" when it is none.
std::string fence_of(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && i < 3 && line[i] == ' ') ++i;
  if (i >= line.size() || (line[i] != '`' && line[i] != '~')) return "";
  char c = line[i];
  size_t n = 0;
  while (i + n < line.size() && line[i + n] == c) ++n;
  if (n < 3) return "";
  return std::string(n, c);
}

std::string strip_blank_edges(const std::vector<std::string>& lines) {
  size_t b = 0, e = lines.size();
  while (b < e && trim(lines[b]).empty()) ++b;
  while (e > b && trim(lines[e - 1]).empty()) --e;
  std::string out;
  for (size_t i = b; i < e; ++i) {
    std::string l = lines[i];
    while (!l.empty() && (l.back() == ' ' || l.back() == '\t')) l.pop_back();
    out += l;
    if (i + 1 < e) out += '\n';
  }
  return out;
}

Status parse_body(const std::vector<std::string>& lines, size_t first, const TomlSource& src,
                  Transformation& tr) {
  std::vector<std::string> chunk;
  std::string open_fence;
  int heading_line = 0;
  auto flush = [&]() -> Status {
    if (tr.passes.empty()) {
      tr.description = strip_blank_edges(chunk);
    } else {
      tr.passes.back().instruction = strip_blank_edges(chunk);
      if (tr.passes.back().instruction.empty())
        return Status::error(fmt::format(
            "{}: pass {} has no instruction text; write what the pass must do below its heading",
            src.at_line(heading_line), tr.passes.back().index));
    }
    chunk.clear();
    return Status::ok();
  };

  for (size_t i = first; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    const int lineno = static_cast<int>(i) + 1;
    std::string fence = fence_of(line);
    if (!open_fence.empty()) {
      if (!fence.empty() && fence[0] == open_fence[0] && fence.size() >= open_fence.size() &&
          trim(line) == fence)
        open_fence.clear();
      chunk.push_back(line);
      continue;
    }
    if (!fence.empty()) {
      open_fence = fence;
      chunk.push_back(line);
      continue;
    }
    std::string t = trim(line);
    bool is_pass_heading = false;
    if (starts_with(t, "## ")) {
      std::string rest = trim(std::string_view(t).substr(3));
      std::string lower = rest;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      is_pass_heading =
          starts_with(lower, "pass") && (lower.size() == 4 || lower[4] == ' ' || lower[4] == ':' ||
                                         std::isdigit(static_cast<unsigned char>(lower[4])));
      if (is_pass_heading) {
        const size_t expected = tr.passes.size() + 1;
        std::string_view r = std::string_view(rest).substr(4);
        const std::string form =
            fmt::format("'## Pass {}: REGION' (REGION is macros, device or host)", expected);
        size_t p = 0;
        while (p < r.size() && r[p] == ' ') ++p;
        size_t d = p;
        while (d < r.size() && std::isdigit(static_cast<unsigned char>(r[d]))) ++d;
        if (d == p || d - p > 4)
          return Status::error(fmt::format("{}: malformed pass heading '{}'; expected {}",
                                           src.at_line(lineno), t, form));
        int n = std::stoi(std::string(r.substr(p, d - p)));
        size_t colon = d;
        while (colon < r.size() && r[colon] == ' ') ++colon;
        if (colon >= r.size() || r[colon] != ':')
          return Status::error(fmt::format("{}: malformed pass heading '{}'; expected {}",
                                           src.at_line(lineno), t, form));
        std::string region_text = trim(r.substr(colon + 1));
        for (char& c : region_text)
          c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (n != static_cast<int>(expected))
          return Status::error(fmt::format(
              "{}: pass {} out of order; passes are numbered 1, 2, 3, ... and this one must be "
              "{}",
              src.at_line(lineno), n, form));
        auto region = region_from_string(region_text);
        if (!region)
          return Status::error(fmt::format(
              "{}: unknown region '{}' in pass heading; expected macros, device or host",
              src.at_line(lineno), region_text));
        RETURN_IF_ERROR(flush());
        Pass pass;
        pass.index = n;
        pass.region = *region;
        tr.passes.push_back(std::move(pass));
        heading_line = lineno;
        continue;
      }
    }
    chunk.push_back(line);
  }
  const int last = static_cast<int>(lines.size());
  if (tr.passes.empty())
    return Status::error(fmt::format(
        "{}: no pass found; a transformation needs at least one '## Pass 1: REGION' section "
        "(REGION is macros, device or host)",
        src.at_line(std::max(last, 1))));
  if (!open_fence.empty())
    return Status::error(
        fmt::format("{}: a code fence '{}' is never closed", src.at_line(last), open_fence));
  return flush();
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

namespace {
// An expression as an operand of &&: parenthesized when it has operators that bind less tightly.
std::string conjunct(const std::string& e) {
  return e.find("||") != std::string::npos || e.find('?') != std::string::npos ? "(" + e + ")" : e;
}

// `supports` without the condition `c`: the whole expression, or an operand of a top-level `&&`
// as transformed_context joins them ("(A) && (B)").
std::string without_condition(const std::string& supports, const std::string& c) {
  if (supports == c) return "";
  for (const std::string& part : {"(" + c + ") && ", " && (" + c + ")"})
    if (auto at = supports.find(part); at != std::string::npos) {
      std::string out = supports;
      out.erase(at, part.size());
      return out;
    }
  return supports;
}
}  // namespace

KernelContext transformed_context(const Transformation& t, const KernelContext& ctx) {
  KernelContext out = ctx;
  for (const auto& p : t.tuning)
    if (std::none_of(out.tuning.begin(), out.tuning.end(),
                     [&](const TuningParam& q) { return q.name == p.name; }))
      out.tuning.push_back(p);
  if (!t.workspace.empty() && out.workspace.find(t.workspace) == std::string::npos)
    out.workspace = out.workspace.empty() ? t.workspace
                                          : fmt::format("max({}, {})", out.workspace, t.workspace);
  // A transformation that needs aligned shapes narrows what the kernel supports (the problem's
  // `valid` stays: the listed shapes still belong to it).
  // One that handles those shapes again lifts the condition.
  if (!t.lifts.empty()) out.supports = without_condition(out.supports, t.lifts);
  if (!t.valid.empty() && out.supports.find(t.valid) == std::string::npos)
    out.supports =
        out.supports.empty() ? t.valid : fmt::format("({}) && ({})", out.supports, t.valid);
  if (!t.tuning_valid.empty() && out.tuning_valid.find(t.tuning_valid) == std::string::npos)
    out.tuning_valid =
        out.tuning_valid.empty()
            ? t.tuning_valid
            : fmt::format("{} && {}", conjunct(out.tuning_valid), conjunct(t.tuning_valid));
  // A retired parameter keeps one value: the kernel no longer reads it.
  for (const auto& name : t.retires)
    for (auto& p : out.tuning)
      if (p.name == name) p.values = {p.default_value};
  return out;
}

namespace {
std::string compute_capability(int number) {
  return fmt::format("{}.{}", number / 10, number % 10);
}

std::string gpu_generation(int number) {
  if (number >= 100) return "Blackwell";
  if (number >= 90) return "Hopper";
  if (number == 89) return "Ada";
  if (number >= 80) return "Ampere";
  if (number == 75) return "Turing";
  if (number >= 70) return "Volta";
  return "";
}

// "sm_90a" -> "a Hopper GPU, compute capability 9.0, with its architecture-specific instructions
// such as wgmma"; "sm_80" -> "compute capability 8.0 or newer".
std::string describe_requirement(const CudaArch& a) {
  if (a.suffix != 'a')
    return fmt::format("compute capability {} or newer", compute_capability(a.number));
  const std::string gen = gpu_generation(a.number);
  std::string examples;
  if (a.number == 90) examples = " such as wgmma and setmaxnreg";
  if (a.number >= 100 && a.number < 120) examples = " such as tcgen05";
  return fmt::format("{}compute capability {}, with its architecture-specific instructions{}",
                     gen.empty() ? "" : "a " + gen + " GPU, ", compute_capability(a.number),
                     examples);
}
}  // namespace

bool arch_meets(std::string_view device_arch, std::string_view required) {
  if (required.empty()) return true;
  auto need = parse_cuda_arch(required);
  auto have = parse_cuda_arch(device_arch);
  if (!need || !have) return false;
  // Architecture-specific features (sm_90a) belong to that architecture alone: a newer one does
  // not have them (Blackwell has no wgmma).
  if (need->suffix == 'a') return have->suffix == 'a' && have->number == need->number;
  return have->number >= need->number;
}

std::string requirement_problem(const Transformation& t, std::string_view backend,
                                std::string_view device_name, std::string_view device_arch) {
  if (t.required_arch.empty()) return "";
  auto need = parse_cuda_arch(t.required_arch);
  const std::string what =
      need ? fmt::format("{} ({})", t.required_arch, describe_requirement(*need)) : t.required_arch;
  // HIP kernels run on NVIDIA through peak's mapping header: the architecture is that device's.
  if (backend != "cuda" && backend != "hip")
    return fmt::format(
        "transformation {} requires {}, a CUDA device architecture, so it applies only to kernels "
        "of the cuda and hip backends; this kernel's backend is {}: choose another sequence or a "
        "CUDA kernel context",
        t.name, what, backend);
  if (device_arch.empty() || arch_meets(device_arch, t.required_arch)) return "";
  return fmt::format(
      "transformation {} requires {}; the device is {} ({}): choose another sequence or run on a "
      "device that has it",
      t.name, what, device_name.empty() ? "unnamed" : device_name, device_arch);
}

bool Transformation::supports(std::string_view backend) const {
  return backends.empty() || std::find(backends.begin(), backends.end(), backend) != backends.end();
}

bool Transformation::suits_family(std::string_view family) const {
  return families.empty() || std::find(families.begin(), families.end(), family) != families.end();
}

std::string families_text(const Transformation& t) {
  return t.families.empty() ? "any family" : join(t.families, ", ");
}

std::string family_problem(const Transformation& t, std::string_view family) {
  if (t.suits_family(family)) return "";
  std::string written = join(t.families, ", ");
  if (const auto comma = written.rfind(", "); comma != std::string::npos)
    written.replace(comma, 2, " and ");
  return fmt::format(
      "{} is written for the {} famil{}; this context is {} (transformations list shows the ones "
      "for it; --all shows every one)",
      t.name, written, t.families.size() == 1 ? "y" : "ies",
      family.empty() ? std::string("of no family (generic)") : std::string(family));
}

Result<Transformation> parse_transformation(std::string_view text, std::string_view filename) {
  const std::string norm = normalize_newlines(text);
  const std::vector<std::string> lines = split_lines(norm);
  if (lines.empty() || trim(lines[0]) != "+++")
    return make_error(
        fmt::format("{}:1: expected '+++' on the first line, opening the TOML front matter (see "
                    "docs/transformations.md)",
                    filename));
  size_t close = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (trim(lines[i]) == "+++") {
      close = i;
      break;
    }
  }
  if (close == 0)
    return make_error(fmt::format(
        "{}:{}: the front matter opened on line 1 is never closed; expected a '+++' line", filename,
        lines.size()));
  std::string toml_text;
  for (size_t i = 1; i < close; ++i) toml_text += lines[i] + "\n";

  TomlSource src{filename, 2};
  auto table = parse_toml(toml_text, src);
  if (!table) return make_error(table.error());
  Transformation tr;
  RETURN_IF_ERROR(parse_front_matter(*table, src, tr));
  RETURN_IF_ERROR(parse_body(lines, close + 1, src, tr));
  return tr;
}

Result<Transformation> load_transformation(const std::filesystem::path& path) {
  auto text = read_file(path);
  if (!text) return make_error(text.error());
  auto tr = parse_transformation(*text, path.string());
  if (!tr) return tr;
  tr->path = path;
  return tr;
}

namespace {

const Transformation* find_by_name(const std::vector<Transformation>& lib, std::string_view name) {
  for (const auto& t : lib)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace

Status resolve_helper_sources(Transformation& t, const std::vector<Transformation>& lib,
                              const std::vector<Transformation>* outer) {
  const std::string where = t.path.empty() ? t.name : t.path.string();
  for (auto& h : t.helpers) {
    if (h.from.empty()) continue;
    const Transformation* src = find_by_name(lib, h.from);
    if (!src && outer) src = find_by_name(*outer, h.from);
    if (!src)
      return Status::error(fmt::format(
          "{}: helper '{}' comes from transformation '{}', which is not in the library; name a "
          "transformation that defines the helper",
          where, h.name, h.from));
    const HelperSnippet* own = nullptr;
    for (const auto& sh : src->helpers)
      if (sh.name == h.name) own = &sh;
    if (!own || !own->from.empty())
      return Status::error(fmt::format(
          "{}: transformation '{}' does not define a helper '{}' of its own{}; name the "
          "transformation whose [[helpers]] entry holds its code",
          where, h.from, h.name,
          own ? fmt::format(" (it borrows it from '{}')", own->from) : std::string()));
    h.region = own->region;
    h.backend = own->backend;
    h.code = own->code;
  }
  return Status::ok();
}

Result<std::vector<Transformation>> load_library(const std::filesystem::path& dir,
                                                 std::vector<std::string>* problems,
                                                 const std::vector<Transformation>* outer) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return make_error(fmt::format(
        "transformation library {} is not a directory (give the folder holding the *.md files)",
        dir.string()));
  std::vector<std::filesystem::path> files;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const auto& p = it->path();
    if (p.extension() != ".md") continue;
    std::string stem = p.filename().string();
    for (char& c : stem) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (stem == "readme.md") continue;
    files.push_back(p);
  }
  if (ec) return make_error(fmt::format("cannot list {}: {}", dir.string(), ec.message()));
  std::sort(files.begin(), files.end());

  std::vector<Transformation> loaded;
  std::vector<std::string> errors;
  std::map<std::string, std::filesystem::path> seen;
  for (const auto& f : files) {
    auto tr = load_transformation(f);
    if (!tr) {
      errors.push_back(tr.error());
      continue;
    }
    auto [it, inserted] = seen.emplace(tr->name, f);
    if (!inserted) {
      errors.push_back(fmt::format(
          "{}: transformation '{}' is already defined in {}; names must be unique in the "
          "library (rename one)",
          f.string(), tr->name, it->second.string()));
      continue;
    }
    loaded.push_back(std::move(*tr));
  }
  // Borrowed helpers are resolved in place: only entries with `from` are written, and sources are
  // read through their own entries, which never have one.
  std::vector<Transformation> out;
  std::vector<bool> resolved(loaded.size());
  for (size_t i = 0; i < loaded.size(); ++i) {
    Status s = resolve_helper_sources(loaded[i], loaded, outer);
    resolved[i] = s.is_ok();
    if (!s) errors.push_back(s.message());
  }
  for (size_t i = 0; i < loaded.size(); ++i)
    if (resolved[i]) out.push_back(std::move(loaded[i]));
  if (problems)
    problems->insert(problems->end(), errors.begin(), errors.end());
  else if (!errors.empty())
    return make_error(join(errors, "\n"), ErrorKind::input);
  std::sort(out.begin(), out.end(),
            [](const Transformation& a, const Transformation& b) { return a.name < b.name; });
  return out;
}

Result<Transformation> find_transformation(const std::vector<Transformation>& library,
                                           std::string_view name) {
  if (const Transformation* t = find_by_name(library, name)) return *t;
  // Closest names: the smallest edit distance within a tolerance, plus names containing the
  // query, in library order.
  size_t best = std::string_view::npos;
  for (const auto& t : library) best = std::min(best, edit_distance(t.name, name));
  const size_t tolerance = std::max<size_t>(2, name.size() / 3);
  std::vector<std::string> close;
  for (const auto& t : library) {
    bool near = best <= tolerance && edit_distance(t.name, name) == best;
    bool contains = name.size() >= 3 && t.name.find(name) != std::string::npos;
    if (near || contains) close.push_back("'" + t.name + "'");
  }
  std::string msg = fmt::format("unknown transformation '{}'", name);
  if (!close.empty()) {
    std::string list;
    for (size_t i = 0; i < close.size(); ++i) {
      if (i) list += (i + 1 == close.size()) ? " or " : ", ";
      list += close[i];
    }
    msg += fmt::format("; did you mean {}?", list);
  }
  const char* sep = close.empty() ? "; " : " ";
  msg += library.empty() ? std::string(sep) + "the transformation library is empty"
                         : std::string(sep) + "`peak transformations list` shows all";
  return make_error(msg);
}

// ---- sequences ----

namespace {

// Keys that sequence format 1 did not have are refused there, so that a file states what it
// needs.
Status needs_format_2(const toml::table& tbl, std::string_view key, const TomlSource& src,
                      int format) {
  const toml::node* n = tbl.get(key);
  if (!n || format >= 2) return Status::ok();
  return Status::error(
      fmt::format("{}: '{}' needs sequence format 2; write 'format = 2'", src.at(*n), key));
}

// `budget` of the sequence or of a step (0 when absent).
Status read_budget(const toml::table& tbl, int line, const TomlSource& src, int format, int* out) {
  RETURN_IF_ERROR(needs_format_2(tbl, "budget", src, format));
  auto b = get_int(tbl, "budget", src, line, 0, "the sequence");
  if (!b) return Status::error(b.error());
  if (tbl.get("budget") && (*b < 1 || *b > 100000))
    return Status::error(fmt::format("{}: budget must be between 1 and 100000, found {}",
                                     src.at(*tbl.get("budget")), *b));
  *out = static_cast<int>(*b);
  return Status::ok();
}

// NAME = [values] for each tuning parameter of table `tt`.
Status read_tuning_table(const toml::table& tt, const TomlSource& src,
                         std::map<std::string, std::vector<int64_t>>* out) {
  for (auto&& [k, v] : tt) {
    if (!is_identifier(k.str()))
      return Status::error(
          fmt::format("{}: '{}' is not a tuning parameter name (a preprocessor identifier)",
                      src.at(v), k.str()));
    auto values = get_int_list(v, k.str(), src);
    if (!values) return Status::error(values.error());
    (*out)[std::string(k.str())] = *values;
  }
  return Status::ok();
}

// Reads string `key` of a [[step]] (optional) into `out`, without its surrounding blanks.
Status read_step_text(const toml::table& st, std::string_view key, const TomlSource& src, int line,
                      std::string* out) {
  RETURN_IF_ERROR(read_string(st, key, src, line, false, "a [[step]]", out));
  *out = trim(*out);
  return Status::ok();
}

Result<SequenceStep> parse_step(const toml::node& e, const TomlSource& src, int format) {
  const toml::table& st = *e.as_table();
  const int line = src.line_of(e);
  RETURN_IF_ERROR(check_keys(st,
                             {"transformation", "attempts", "budget", "keep", "instructions",
                              "tuning", "strategy", "strategy_budget"},
                             src, "a [[step]]"));
  SequenceStep step;
  RETURN_IF_ERROR(
      read_string(st, "transformation", src, line, true, "a [[step]]", &step.transformation));
  if (step.transformation.empty())
    return make_error(fmt::format("{}: 'transformation' is empty; name a transformation",
                                  src.at(*st.get("transformation"))));
  auto a = get_int(st, "attempts", src, line, 0, "a [[step]]");
  if (!a) return make_error(a.error());
  if (st.get("attempts") && (*a < 1 || *a > 100))
    return make_error(fmt::format("{}: attempts must be between 1 and 100, found {}",
                                  src.at(*st.get("attempts")), *a));
  step.attempts = static_cast<int>(*a);
  RETURN_IF_ERROR(read_budget(st, line, src, format, &step.budget));
  RETURN_IF_ERROR(needs_format_2(st, "keep", src, format));
  if (const toml::node* k = st.get("keep")) {
    if (!k->is_boolean())
      return make_error(fmt::format("{}: 'keep' must be true or false, found {}", src.at(*k),
                                    toml_type_name(*k)));
    step.keep = k->as_boolean()->get();
  }
  RETURN_IF_ERROR(read_step_text(st, "instructions", src, line, &step.instructions));
  RETURN_IF_ERROR(read_step_text(st, "strategy", src, line, &step.strategy));
  RETURN_IF_ERROR(read_step_text(st, "strategy_budget", src, line, &step.strategy_budget));
  if (const toml::node* tn = st.get("tuning")) {
    if (!tn->as_table())
      return make_error(fmt::format(
          "{}: step tuning must be a table ([step.tuning] NAME = [values])", src.at(*tn)));
    RETURN_IF_ERROR(read_tuning_table(*tn->as_table(), src, &step.tuning));
  }
  return step;
}

// name, description, attempts, budget and [tuning]: what the steps share.
Status parse_sequence_header(const toml::table& t, const TomlSource& src, Sequence& seq) {
  RETURN_IF_ERROR(read_string(t, "name", src, 1, true, "the sequence", &seq.name));
  if (seq.name.empty())
    return Status::error(fmt::format("{}: the sequence name is empty", src.at(*t.get("name"))));
  RETURN_IF_ERROR(read_string(t, "description", src, 1, false, "the sequence", &seq.description));
  seq.description = trim(seq.description);
  auto attempts = get_int(t, "attempts", src, 1, 3, "the sequence");
  if (!attempts) return Status::error(attempts.error());
  if (*attempts < 1 || *attempts > 100)
    return Status::error(fmt::format("{}: attempts must be between 1 and 100, found {}",
                                     src.at(*t.get("attempts")), *attempts));
  seq.attempts = static_cast<int>(*attempts);
  RETURN_IF_ERROR(read_budget(t, 1, src, seq.format, &seq.budget));
  if (const toml::node* tn = t.get("tuning")) {
    RETURN_IF_ERROR(needs_format_2(t, "tuning", src, seq.format));
    if (!tn->as_table())
      return Status::error(fmt::format(
          "{}: the sequence's tuning must be a table ([tuning] NAME = [values])", src.at(*tn)));
    RETURN_IF_ERROR(read_tuning_table(*tn->as_table(), src, &seq.tuning));
  }
  return Status::ok();
}

}  // namespace

Result<Sequence> parse_sequence(std::string_view text, std::string_view filename) {
  const std::string norm = normalize_newlines(text);
  TomlSource src{filename, 1};
  auto parsed = parse_toml(norm, src);
  if (!parsed) return make_error(parsed.error());
  const toml::table& t = *parsed;
  Sequence seq;
  RETURN_IF_ERROR(
      check_keys(t, {"format", "name", "description", "attempts", "budget", "tuning", "step"}, src,
                 "a sequence"));
  RETURN_IF_ERROR(check_format(t, src, kSequenceFormatVersion, "sequence", &seq.format));
  RETURN_IF_ERROR(parse_sequence_header(t, src, seq));

  const toml::node* steps = t.get("step");
  if (!steps)
    return make_error(fmt::format(
        "{}:1: the sequence has no steps; add [[step]] tables with transformation = \"NAME\"",
        filename));
  RETURN_IF_ERROR(for_each_table(t, "step", src, "[[step]] with transformation = \"NAME\"",
                                 [&](const toml::node& e) -> Status {
                                   auto step = parse_step(e, src, seq.format);
                                   if (!step) return step.status();
                                   seq.steps.push_back(std::move(*step));
                                   return Status::ok();
                                 }));
  if (seq.steps.empty())
    return make_error(fmt::format("{}: the sequence has no steps", src.at(*steps)));
  return seq;
}

std::string sequence_family_problem(const Sequence& seq, const std::vector<Transformation>& library,
                                    std::string_view family) {
  for (size_t i = 0; i < seq.steps.size(); ++i) {
    const std::string& name = seq.steps[i].transformation;
    auto t = std::find_if(library.begin(), library.end(),
                          [&](const Transformation& x) { return x.name == name; });
    if (t == library.end()) continue;
    if (auto why = family_problem(*t, family); !why.empty())
      return fmt::format("step {} ({}): {}", i + 1, name, why);
  }
  return "";
}

Result<Sequence> load_sequence(const std::filesystem::path& path) {
  auto text = read_file(path);
  if (!text) return make_error(text.error());
  auto seq = parse_sequence(*text, path.string());
  if (!seq) return seq;
  seq->path = path;
  return seq;
}

}  // namespace peak
