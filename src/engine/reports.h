#pragma once
// Reports and statistics rendered in the formats the front ends offer (report/report.h builds
// them; Workspace::report builds a workspace's).
#include <filesystem>
#include <string>
#include <vector>

#include "engine/workspace.h"

namespace peak {

// Report formats that exist today, by name (HTML will join them).
const std::vector<std::string>& report_formats();
// The report of the history from the seed to `ref`, rendered as `format` (text, markdown, json
// or html).
Result<std::string> render_report(Workspace& ws, const std::string& ref, const std::string& format);
// The same from a workspace folder, a .peak folder or a peak.db file, opened for reading only
// (a store another process is writing gives a partial report that says so); `ref` "" = HEAD.
// `cross_reference` (optional): another store whose vendor-library rates on the same GPU model
// are shown beside the documented peak (add_cross_reference, report/report.h).
Result<std::string> render_report_at(const std::filesystem::path& where, const std::string& ref,
                                     const std::string& format,
                                     const std::filesystem::path& cross_reference = {});

// `peak stats`: the analytics over the stores found under each of `where` (find_stores:
// workspaces, .peak folders, peak.db files, folders to search), rendered as `format` (text,
// json, csv or html). Input errors: a place without a store, an unknown format; environment
// errors: a store whose report cannot be built, an HTML page that cannot be made.
Result<std::string> render_stats(const std::vector<std::string>& where, const std::string& format);

// A store (a folder, or its archive kept under results/: store/archive.h) copied into
// `peak_dir`, a workspace's .peak folder, so that the workspace continues from it.
Status copy_store_into(const std::filesystem::path& store, const std::filesystem::path& peak_dir);

}  // namespace peak
