#include "engine/front.h"

#include <algorithm>

#include <fmt/format.h>

#include "report/stats.h"
#include "tune/bench.h"
#include "tune/record.h"
#include "tune/strategy.h"
#include "util/fs.h"

namespace peak::api {

std::vector<std::string> strategy_names() { return peak::strategy_names(); }

std::string resolve_llm_spec(const std::string& spec) {
  if (!starts_with(spec, "replay:")) return spec;
  std::string dir = trim(spec.substr(7));
  std::error_code ec;
  if (!dir.empty() && !fs::exists(dir, ec) && fs::is_directory(data_path("recordings") / dir, ec))
    return "replay:" + (data_path("recordings") / dir).string();
  return spec;
}

Result<Sequence> open_sequence(const std::string& arg) {
  auto p = find_sequence(arg);
  if (!p) return Error{p.error(), ErrorKind::input};
  auto seq = load_sequence(*p);
  if (!seq) return Error{seq.error(), ErrorKind::input};
  return seq;
}

Result<std::string> render_stats(const std::vector<std::string>& where, const std::string& format) {
  std::vector<std::pair<std::string, Report>> reports;
  for (const auto& arg : where) {
    auto found = find_stores(arg);
    if (!found) return Error{found.error(), ErrorKind::input};
    for (const auto& path : *found) {
      auto store = open_store_for_reading(path);
      if (!store) return Error{store.error(), ErrorKind::input};
      auto rep = build_report(**store);
      if (!rep)
        return Error{fmt::format("{}: {}", path.string(), rep.error()), ErrorKind::environment};
      reports.emplace_back(path.string(), std::move(*rep));
    }
  }
  Stats st = build_stats(reports);
  if (format == "json") return render_stats_json(st).dump(2) + "\n";
  if (format == "csv") return render_stats_csv(st);
  if (format == "text") return render_stats_text(st);
  if (format == "html") {
    auto html = render_stats_html(st);
    if (!html) return Error{html.error(), ErrorKind::environment};
    return html;
  }
  return make_error(fmt::format("unknown stats format '{}' (text, json, csv, html)", format),
                    ErrorKind::input);
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

}  // namespace peak::api
