#include "engine/bench.h"

#include <algorithm>

#include <fmt/format.h>

#include "engine/paths.h"
#include "tune/bench.h"
#include "tune/record.h"
#include "util/fs.h"

namespace peak {

Result<SuiteResult> bench(Workspace& ws, const std::string& ref, const EvalChoices& choices,
                          bool single, const SuiteProgress& on_shape) {
  auto id = ws.resolve(ref.empty() ? "HEAD" : ref);
  if (!id) return id.status();
  return ws.bench_suite(*id, choices, single, on_shape);
}

Result<DispatchTable> tune_classes(Workspace& ws, const std::string& ref,
                                   const EvalChoices& choices,
                                   const std::vector<std::string>& only) {
  auto id = ws.resolve(ref.empty() ? "HEAD" : ref);
  if (!id) return id.status();
  return ws.tune_classes(*id, choices, only);
}

Result<SpaceExport> export_space(Workspace& ws, std::optional<int64_t> run, int64_t checkpoint,
                                 const std::string& command, const std::filesystem::path& file) {
  Result<int64_t> id = run ? Result<int64_t>(*run) : latest_tuning_run(ws.store(), checkpoint);
  auto cache = id ? cache_from_store(ws.store(), *id) : Result<TuningCache>(Error{id.error()});
  if (!cache) return Error{cache.error(), ErrorKind::input};
  cache->command = command;
  if (auto s = write_cache(file, *cache); !s) return Error{s.message(), ErrorKind::environment};
  return SpaceExport{*id, cache->entries().size()};
}

namespace {

// The tuning caches shipped with peak: <data>/results/*/spaces/*.json, sorted.
Result<std::vector<std::string>> shipped_caches() {
  std::vector<std::string> files;
  std::error_code ec;
  fs::path results = data_path("results");
  if (fs::is_directory(results, ec))
    for (const auto& d : fs::directory_iterator(results, ec))
      if (fs::is_directory(d.path() / "spaces", ec))
        for (const auto& f : fs::directory_iterator(d.path() / "spaces", ec))
          if (f.path().extension() == ".json") files.push_back(f.path().string());
  std::sort(files.begin(), files.end());
  if (files.empty())
    return make_error(
        fmt::format("no tuning caches under {}/*/spaces/; name some: peak bench tuning FILE...",
                    results.string()),
        ErrorKind::input);
  return files;
}

}  // namespace

Result<std::string> bench_tuning(const TuningBenchArgs& a) {
  auto files = a.files.empty() ? shipped_caches() : Result<std::vector<std::string>>(a.files);
  if (!files) return files.status();
  std::vector<std::pair<std::string, TuningCache>> caches;
  for (const auto& f : *files) {
    auto c = read_cache(f);
    if (!c) return Error{c.error(), ErrorKind::input};
    caches.emplace_back(f, std::move(*c));
  }
  TuningBenchOptions bo;
  for (const auto& s : split_lines(replace_all(a.strategies, ",", "\n")))
    if (!trim(s).empty()) bo.strategies.push_back(trim(s));
  bo.seeds = std::max(1, a.seeds);
  bo.batch = static_cast<size_t>(std::max(1, a.batch));
  bo.jobs = a.jobs;
  auto rep = peak::bench_tuning(caches, bo);
  if (!rep) return Error{rep.error(), ErrorKind::input};
  return a.json ? rep->to_json().dump(2) + "\n" : rep->text();
}

}  // namespace peak
