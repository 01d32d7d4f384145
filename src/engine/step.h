#pragma once
// One step of a workflow (`peak apply`, or one step of `peak run`): what the step is given, and
// the hooks through which it writes its attempt rows, prints its progress and meets the points
// where tests inject faults (engine/step.cpp).
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/workspace.h"

namespace peak {

struct Workspace::StepContext {
  std::string name;  // the transformation
  // The transformation itself, loaded once by the caller (apply, or run's check of its steps).
  const Transformation* transformation = nullptr;
  // HEAD as the caller read it (apply); unset: read when the step starts (each step of a run).
  std::optional<CheckpointRecord> head;
  const ApplyOptions* opts = nullptr;
  int64_t workflow_id = 0;
  std::map<std::string, std::vector<int64_t>> tuning;  // the step's overrides
  LlmDriver* driver = nullptr;
  int attempts = 3;  // charged attempts allowed
  // The resumable state: {"transformation", "parent", "failures", "pass", "feedback",
  // "source_blob"}; saved through `save` after every recorded attempt.
  json state = json::object();
  std::function<void(const json&)> save;
};

// The side effects of a step other than its evaluations and its checkpoint, one callback each:
// the attempt rows it appends to the store, the lines it shows, and the fault points that tests
// use (util/fault.h). step_hooks() gives the ones every step uses.
struct StepHooks {
  // Appends an attempt row; its id, or none when the store refused it.
  std::function<std::optional<int64_t>(const AttemptRecord&)> add_attempt;
  std::function<void(const std::string&)> print;   // a permanent line
  std::function<void(const std::string&)> status;  // the status line (shown at once)
  std::function<void()> clear_status;
  // A point where a test may kill the process (PEAK_FAULT=kill@POINT).
  std::function<void(std::string_view)> reached;
  // Whether a test injects a fault at this point on this hit.
  std::function<bool(std::string_view)> injected;
};
StepHooks step_hooks(Store& store, Progress& progress);

// `res` as the result of a step or command that could not run (disposition not_run), with the
// kind of its error and its message.
inline ApplyResult not_run(ApplyResult& res, ErrorKind k, std::string msg) {
  res.input_error = k == ErrorKind::input;
  res.environment_error = k == ErrorKind::environment;
  res.disposition = Disposition::not_run;
  res.message = std::move(msg);
  return res;
}

}  // namespace peak
