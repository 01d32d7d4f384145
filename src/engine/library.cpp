#include "engine/library.h"

#include <cstdlib>

#include <fmt/format.h>

#include "engine/paths.h"
#include "engine/workspace.h"
#include "util/fs.h"

namespace peak {

namespace {

bool path_exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

}  // namespace

Result<fs::path> find_context(const std::string& arg) {
  if (arg.empty()) return make_error("no kernel context given (a folder with kernel.toml)");
  fs::path p = arg;
  if (!path_exists(p) && path_exists(data_path("examples") / p)) p = data_path("examples") / p;
  if (!path_exists(p / "kernel.toml"))
    return make_error(fmt::format(
        "{} is not a kernel context (a folder with kernel.toml); the examples are under {}", arg,
        data_path("examples").string()));
  return p;
}

Result<fs::path> find_sequence(const std::string& arg) {
  if (arg.empty()) return make_error("no sequence given (a .toml file or a name under sequences/)");
  fs::path p = arg;
  if (!path_exists(p) && path_exists(data_path("sequences") / p)) p = data_path("sequences") / p;
  if (!path_exists(p) && path_exists(data_path("sequences") / (arg + ".toml")))
    p = data_path("sequences") / (arg + ".toml");
  if (!path_exists(p))
    return make_error(fmt::format("no sequence '{}' (a .toml file, or a name under {})", arg,
                                  data_path("sequences").string()));
  return p;
}

Result<Sequence> open_sequence(const std::string& arg) {
  auto p = find_sequence(arg);
  if (!p) return Error{p.error(), ErrorKind::input};
  auto seq = load_sequence(*p);
  if (!seq) return Error{seq.error(), ErrorKind::input};
  return seq;
}

fs::path shared_library_dir() {
  if (const char* env = std::getenv("PEAK_LIBRARY"); env && *env) return env;
  return data_path("transformations");
}

fs::path workspace_library_dir(const fs::path& workspace) { return workspace / "transformations"; }

Result<std::vector<Transformation>> load_library_for(const fs::path& workspace,
                                                     std::vector<std::string>* problems) {
  auto lib = load_library(shared_library_dir(), problems);
  if (!lib) return lib;
  std::error_code ec;
  fs::path own = workspace.empty() ? fs::path() : workspace_library_dir(workspace);
  if (own.empty() || !fs::is_directory(own, ec)) return lib;
  auto extra = load_library(own, problems, &*lib);
  if (!extra) return Error{extra.error(), extra.error_kind()};
  for (auto& t : *extra) {
    for (const auto& s : *lib)
      if (s.name == t.name)
        return make_error(
            fmt::format("{} reuses the name '{}' of the shared transformation {}; rename it",
                        t.path.string(), t.name, s.path.string()),
            ErrorKind::input);
    lib->push_back(std::move(t));
  }
  return lib;
}

LibraryListing filter_library(std::vector<Transformation> lib,
                              const std::optional<std::string>& family, bool all) {
  LibraryListing out;
  if (all || !family) {
    out.shown = std::move(lib);
    return out;
  }
  out.family = family;
  for (auto& t : lib) {
    if (t.suits_family(*family))
      out.shown.push_back(std::move(t));
    else
      ++out.others;
  }
  return out;
}

Result<std::string> context_family(const Workspace& ws) {
  auto head = ws.head();
  if (!head) return Error{head.error(), head.error_kind()};
  auto files = ws.checkpoint_files(head->id);
  if (!files) return Error{files.error(), files.error_kind()};
  return files->first.family;
}

Result<LibraryListing> list_library(const Workspace* ws, bool all,
                                    std::vector<std::string>* problems) {
  auto lib = ws ? ws->library(problems) : load_library_for("", problems);
  if (!lib) return Error{lib.error(), lib.error_kind()};
  std::optional<std::string> family;
  if (ws && !all) {
    auto f = context_family(*ws);
    if (!f) return Error{f.error(), f.error_kind()};
    family = *f;
  }
  return filter_library(std::move(*lib), family, all);
}

std::string others_line(const LibraryListing& l) {
  if (l.others == 0) return "";
  return fmt::format(
      "{} more transformation{} {} written for other families than {}; --all lists {}", l.others,
      l.others == 1 ? "" : "s", l.others == 1 ? "is" : "are",
      l.family && !l.family->empty() ? *l.family : "the generic family",
      l.others == 1 ? "it" : "them");
}

Result<Transformation> write_transformation(const fs::path& workspace, const std::string& text) {
  auto t = parse_transformation(text, "the new transformation");
  if (!t) return t;
  auto shared = load_library(shared_library_dir());
  if (shared)
    for (const auto& s : *shared)
      if (s.name == t->name)
        return make_error(fmt::format(
            "the shared library already has a transformation named '{}' ({}); choose another "
            "name in the front matter",
            t->name, s.path.string()));
  // A helper borrowed from another transformation must name one that holds it: the workspace's
  // own, or a shared one.
  const std::vector<Transformation>* outer = shared ? &*shared : nullptr;
  std::vector<Transformation> own;
  std::vector<std::string> unreadable;
  std::error_code ec;
  if (fs::is_directory(workspace_library_dir(workspace), ec))
    if (auto o = load_library(workspace_library_dir(workspace), &unreadable, outer)) own = *o;
  if (Status s = resolve_helper_sources(*t, own, outer); !s)
    return Error{s.message(), ErrorKind::input};
  fs::path dest = workspace_library_dir(workspace) / (t->name + ".md");
  if (auto s = write_file_atomic(dest, text); !s) return Error{s.message()};
  t->path = dest;
  return t;
}

}  // namespace peak
