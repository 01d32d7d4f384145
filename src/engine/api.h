#pragma once
// The operations the command line and the MCP server share, in one place: where a kernel context,
// a sequence or the transformation library is found, the JSON forms of the history, of a
// checkpoint and of a step's outcome, report rendering, and the evaluation options both front
// ends build from their arguments. The front ends only parse arguments and print (or send) what
// these return.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/workspace.h"

namespace peak::api {

using json = nlohmann::json;

// A kernel context folder: `arg` as a path, else a name under <data>/examples.
Result<std::filesystem::path> find_context(const std::string& arg);
// A sequence file: `arg` as a path, else <data>/sequences/arg or <data>/sequences/arg.toml.
Result<std::filesystem::path> find_sequence(const std::string& arg);

// The folder of the shared library ($PEAK_LIBRARY or <data>/transformations).
std::filesystem::path shared_library_dir();
// A workspace's own transformations, written by `write_transformation`.
std::filesystem::path workspace_library_dir(const std::filesystem::path& workspace);
// The shared library plus the workspace's own transformations (`workspace` may be empty). A
// workspace transformation may not reuse a shared name. With `problems`, a file that cannot be
// read is named there and skipped instead of failing the whole library.
Result<std::vector<Transformation>> load_library_for(const std::filesystem::path& workspace,
                                                     std::vector<std::string>* problems = nullptr);
// Checks `text` as a transformation file (docs/transformations.md) and writes it to the
// workspace's library as <name>.md, where <name> is the name in its front matter. Refused: a
// malformed file (the parser's message says what is wrong), a name the shared library holds.
Result<Transformation> write_transformation(const std::filesystem::path& workspace,
                                            const std::string& text);

// JSON forms (also the CLI's --json output).
json transformation_json(const Transformation& t);
json sequence_json(const Sequence& s);
json log_json(Workspace& ws);  // checkpoints, newest first, with refs, tags and a perf line
Result<json> checkpoint_json(Workspace& ws, int64_t id);  // numbers, resources, source, toml
json apply_json(const ApplyResult& r);
json run_json(const RunResult& r);

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

// `peak bench [REF]`: the best configuration of `ref` ("" = HEAD) timed over its context's shape
// suite with the vendor library in the same run (Workspace::bench_suite), recorded as an
// evaluation of kind "suite". `choices` uses the device, --small / --full and --no-baseline.
// suite_json (results/suite.h) is its JSON form; suite_text (report/suite.h) its table.
// With a dispatch table recorded for `ref` on this device (`tune_classes`), each shape runs its
// class's configuration unless `single`.
Result<SuiteResult> bench(Workspace& ws, const std::string& ref, const EvalChoices& choices,
                          bool single = false);
// `peak tune --classes [REF]`: one tuning search per shape class of the suite, the configurations
// found recorded as the checkpoint's dispatch table (Workspace::tune_classes); dispatch_json
// (results/dispatch.h) is its JSON form, dispatch_text (report/dispatch.h) its table. `only`:
// the classes to search (empty: all); the others run the checkpoint's best configuration.
Result<DispatchTable> tune_classes(Workspace& ws, const std::string& ref,
                                   const EvalChoices& choices,
                                   const std::vector<std::string>& only = {});

// Tags `ref` (default HEAD) as `name`.
Status tag(Workspace& ws, const std::string& name, const std::string& ref);

// Evaluation settings as both front ends take them.
struct EvalArgs {
  std::string device;
  bool small = false, full = false;
  int budget = 0, jobs = 0;
  bool no_baseline = false, compile_only = false, sanitize = false;
  // The tuning search (docs/tuning.md): a strategy name ("" = the default), a budget spec
  // ("24,15%,600s"; "" = the strategy's default, or `budget` evaluations when that is given), and
  // whether configurations measured before are reused.
  std::string strategy, strategy_budget;
  bool reuse_measurements = false;
  // Several GPUs of one host: "all", indices ("0,1") or a name substring (engine/devices.h);
  // excludes `device` (check_tuning says so).
  std::string devices;
};
// The strategy names a known strategy, the budget spec is well formed, and `device` and
// `devices` are not both given (`devices` well formed); the error says why not.
Status check_tuning(const EvalArgs& a);
// What the user asked (ApplyOptions::eval); the device decides the rest. `a` was checked by
// check_tuning (a malformed budget spec is ignored).
EvalChoices eval_choices(const EvalArgs& a);
// The options on the chosen device (probed).
EvalOptions eval_options(Workspace& ws, const EvalArgs& a);
EvalOptions eval_options(Workspace& ws, const EvalChoices& c);

}  // namespace peak::api
