#include "util/disposition.h"

#include <array>
#include <utility>

namespace peak {
namespace {
struct Row {
  Disposition d;
  std::string_view name;
  std::string_view text;
};
constexpr std::array kRows = {
    Row{Disposition::passed, "passed", "passed every check"},
    Row{Disposition::llm_error, "llm_error", "the LLM request failed"},
    Row{Disposition::no_code, "no_code", "the reply held no single fenced code block"},
    Row{Disposition::region_violation, "region_violation",
        "the reply changed code outside the region it was asked to edit"},
    Row{Disposition::compile_failed, "compile_failed", "the candidate did not compile"},
    Row{Disposition::invalid_config, "invalid_config",
        "the configuration cannot run on this device"},
    Row{Disposition::launch_failed, "launch_failed", "the kernel launch failed"},
    Row{Disposition::crashed, "crashed", "the runner process crashed"},
    Row{Disposition::timeout, "timeout", "the candidate did not finish in time"},
    Row{Disposition::incorrect, "incorrect", "outputs differ from the reference"},
    Row{Disposition::unwritten_output, "unwritten_output", "some outputs were never written"},
    Row{Disposition::out_of_bounds, "out_of_bounds",
        "the candidate wrote past the end of a buffer"},
    Row{Disposition::inputs_modified, "inputs_modified", "the candidate modified its inputs"},
    Row{Disposition::nondeterministic, "nondeterministic",
        "two runs on the same inputs disagree (a race?)"},
    Row{Disposition::faster_than_peak, "faster_than_peak",
        "faster than the device's physical peak: rejected as a measurement error"},
    Row{Disposition::forbidden_api, "forbidden_api",
        "the candidate uses an API candidates may not use"},
    Row{Disposition::workspace_exceeded, "workspace_exceeded",
        "the launch plan needs more scratch memory than the context grants"},
    Row{Disposition::not_run, "not_run", "not run"},
};
}  // namespace

std::string_view to_string(Disposition d) {
  for (const auto& r : kRows)
    if (r.d == d) return r.name;
  return "unknown";
}

std::optional<Disposition> disposition_from_string(std::string_view s) {
  for (const auto& r : kRows)
    if (r.name == s) return r.d;
  return std::nullopt;
}

std::string_view describe(Disposition d) {
  for (const auto& r : kRows)
    if (r.d == d) return r.text;
  return "unknown";
}

}  // namespace peak
