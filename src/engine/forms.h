#pragma once
// The JSON forms of what the engine returns: a transformation, a sequence, the history, a
// checkpoint and a step's outcome. The CLI prints them under --json; the MCP tools return them.
#include <cstdint>

#include <nlohmann/json.hpp>

#include "engine/workspace.h"

namespace peak {

json transformation_json(const Transformation& t);
json sequence_json(const Sequence& s);
json log_json(Workspace& ws);  // checkpoints, newest first, with refs, tags and a perf line
Result<json> checkpoint_json(Workspace& ws, int64_t id);  // numbers, resources, source, toml
json apply_json(const ApplyResult& r);
// `peak export`'s result.
json export_json(const ExportResult& r);
std::string export_text(const ExportResult& r);
json run_json(const RunResult& r);

}  // namespace peak
