#pragma once
// Dispositions: the one spelling of every outcome, shared by the store, CLI, JSON and reports.
#include <optional>
#include <string_view>

namespace peak {

enum class Disposition {
  passed,            // everything asked of the step succeeded
  llm_error,         // the LLM driver failed (network, HTTP error, truncated reply, timeout)
  no_code,           // the reply had no fenced code block, or more than one
  region_violation,  // the reply changed text outside the region it was asked to edit
  compile_failed,    // the candidate did not compile
  invalid_config,    // the configuration cannot run on this device (pruned, not an error)
  launch_failed,     // the launch itself failed (bad grid, too many resources)
  crashed,           // the runner died (segfault, abort, device lost, sticky error)
  timeout,           // the candidate did not finish within its time limit
  incorrect,         // outputs differ from the reference beyond tolerance
  unwritten_output,  // some output elements kept the poison value
  out_of_bounds,     // the candidate wrote past the end of a buffer (guard bytes changed)
  inputs_modified,   // the candidate wrote to its inputs
  nondeterministic,  // two runs on the same inputs disagree
  faster_than_peak,  // faster than the device's physical peak: a measurement error or a cheat
  forbidden_api,     // the artifact calls something candidates may not (host code, device malloc)
  workspace_exceeded,  // the plan's scratch memory exceeds the context's declared workspace
  not_run,           // skipped (an earlier phase failed)
};

std::string_view to_string(Disposition d);
std::optional<Disposition> disposition_from_string(std::string_view s);
// A short human sentence for a disposition, for reports and error messages.
std::string_view describe(Disposition d);

}  // namespace peak
