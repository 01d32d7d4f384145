#pragma once
// What the front ends (cli/, mcp/) use beyond engine/api.h, so that they include engine headers
// only (docs/architecture.md). The data a front end fills in or prints comes through here with
// its own small helpers: Transformation and Sequence (transform/), the LLM driver interface and
// the manual prompts (llm/; the MCP server implements a driver), the report (report/), the
// store's timestamps (utc_now_iso8601, store/ through engine/workspace.h). Work that
// reaches into the store, the tuning caches or the statistics is done by the functions below.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/api.h"
#include "engine/demo.h"
#include "engine/paths.h"
#include "engine/workspace.h"
#include "llm/llm.h"
#include "report/report.h"
#include "transform/transformation.h"

namespace peak::api {

// The tuning strategies by name (docs/tuning.md), as the MCP tools' schema lists them.
std::vector<std::string> strategy_names();

// An LLM driver spec as the command line takes it: "replay:NAME" names a recording shipped with
// peak (<data>/recordings/NAME) when NAME is no folder here; every other spec is returned as is.
std::string resolve_llm_spec(const std::string& spec);

// The sequence `arg` names (find_sequence), loaded. Errors are input errors.
Result<Sequence> open_sequence(const std::string& arg);

// `peak stats`: the analytics over the stores found under each of `where` (find_stores:
// workspaces, .peak folders, peak.db files, folders to search), rendered as `format` (text,
// json, csv or html). Input errors: a place without a store, an unknown format; environment
// errors: a store whose report cannot be built, an HTML page that cannot be made.
Result<std::string> render_stats(const std::vector<std::string>& where, const std::string& format);

// A tuning search written as a tuning cache (docs/tuning.md).
struct SpaceExport {
  int64_t run = 0;     // the tuning run exported
  size_t configs = 0;  // configurations in the cache
};
// Writes tuning run `run` (unset: the last search of checkpoint `checkpoint`) to `file` as a
// tuning cache that records `command`. Input error: no such search; environment error: the file
// cannot be written.
Result<SpaceExport> export_space(Workspace& ws, std::optional<int64_t> run, int64_t checkpoint,
                                 const std::string& command, const std::filesystem::path& file);

// `peak bench tuning`: the tuning strategies in simulation over recorded tuning caches.
struct TuningBenchArgs {
  std::vector<std::string> files;  // tuning caches; empty: <data>/results/*/spaces/*.json
  std::string strategies;          // comma-separated; empty: every strategy
  int seeds = 20;
  int batch = 8;
  int jobs = 0;
  bool json = false;  // the JSON form instead of the table
};
// The comparison as text (the table, or JSON). Errors are input errors.
Result<std::string> bench_tuning(const TuningBenchArgs& a);

}  // namespace peak::api
