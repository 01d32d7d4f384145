#include "engine/reports.h"

#include <fmt/format.h>

#include "report/stats.h"
#include "store/archive.h"
#include "util/fs.h"

namespace peak {

const std::vector<std::string>& report_formats() {
  static const std::vector<std::string> formats = {"text", "markdown", "json", "html"};
  return formats;
}

namespace {

Result<std::string> render(const Report& rep, const std::string& format) {
  if (format == "json") return render_json(rep).dump(2) + "\n";
  if (format == "markdown" || format == "md") return render_markdown(rep);
  if (format == "text" || format == "txt") return render_text(rep);
  if (format == "html") return render_html(rep);
  return make_error(
      fmt::format("unknown report format '{}' ({})", format, join(report_formats(), ", ")));
}

}  // namespace

Result<std::string> render_report(Workspace& ws, const std::string& ref,
                                  const std::string& format) {
  auto id = ws.resolve(ref.empty() ? "HEAD" : ref);
  if (!id) return Error{id.error()};
  auto files = ws.checkpoint_files(*id);
  auto rep = ws.report(*id, files ? files->first.name : "");
  if (!rep) return Error{rep.error()};
  return render(*rep, format);
}

Result<std::string> render_report_at(const std::filesystem::path& where, const std::string& ref,
                                     const std::string& format,
                                     const std::filesystem::path& cross_reference) {
  auto store = open_store_for_reading(where);
  if (!store) return store.status();
  ReportOptions ro;
  if (!ref.empty()) {
    auto id = resolve_checkpoint(**store, ref);
    if (!id) return id.status();  // an unknown reference is a bad argument, as for `peak show`
    ro.tip = *id;
  }
  auto rep = build_report(**store, ro);
  if (!rep) return rep.status();
  if ((*store)->dir().filename() == ".peak") rep->source = (*store)->dir().parent_path().string();
  if (const auto read = store_or_archive(where); is_store_archive(read))
    rep->source = read.string();
  if (!cross_reference.empty()) {
    auto other_store = open_store_for_reading(cross_reference);
    if (!other_store) return Error{other_store.error()};
    auto other = build_report(**other_store);
    if (!other) return Error{other.error()};
    other->source = cross_reference.string();
    if (auto st = add_cross_reference(*rep, *other); !st) return Error{st.message(), st.kind()};
  }
  return render(*rep, format);
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
      if (is_store_archive(path)) rep->source = path.string();
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

Status copy_store_into(const std::filesystem::path& store, const std::filesystem::path& peak_dir) {
  return copy_store(store, peak_dir);
}

}  // namespace peak
