#pragma once
// The benchmarks and tuning searches of a checkpoint named by a reference (`peak bench`, `peak
// tune --classes`), a tuning search written as a tuning cache (`peak export-space`), and the
// tuning strategies in simulation (`peak bench tuning`).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/workspace.h"

namespace peak {

// `peak bench [REF]`: the best configuration of `ref` ("" = HEAD) timed over its context's shape
// suite with the vendor library in the same run (Workspace::bench_suite), recorded as an
// evaluation of kind "suite". `choices` uses the device, --small / --full and --no-baseline.
// suite_json (results/suite.h) is its JSON form; suite_text (report/suite.h) its table.
// With a dispatch table recorded for `ref` on this device (`tune_classes`), each shape runs its
// class's configuration unless `single`. `on_shape` gets the result so far after every shape.
Result<SuiteResult> bench(Workspace& ws, const std::string& ref, const EvalChoices& choices,
                          bool single = false, const SuiteProgress& on_shape = {});
// `peak tune --classes [REF]`: one tuning search per shape class of the suite, the configurations
// found recorded as the checkpoint's dispatch table (Workspace::tune_classes); dispatch_json
// (results/dispatch.h) is its JSON form, dispatch_text (report/dispatch.h) its table. `only`:
// the classes to search (empty: all); the others run the checkpoint's best configuration.
Result<DispatchTable> tune_classes(Workspace& ws, const std::string& ref,
                                   const EvalChoices& choices,
                                   const std::vector<std::string>& only = {});

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

}  // namespace peak
