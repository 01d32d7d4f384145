#pragma once
// The MCP tools and resources of peak: one table, each row a name, a description, JSON schemas
// for its arguments and its structured result, and a handler over the engine's API
// (engine/front.h: the Workspace and the engine functions beside it). This file and tools.cpp
// are the MCP layer's only contact with the workspace.
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace peak::mcp {

using json = nlohmann::json;
class McpServer;
class Outbox;

// What a handler may use besides its arguments.
struct ToolContext {
  McpServer& server;
  std::shared_ptr<Outbox> out;                       // where requests to the client (sampling) go
  std::function<bool()> cancelled;                   // true once the client cancelled the call
  std::function<void(const std::string&)> progress;  // a line of progress for the client
};

// A tool's outcome: `structured` matches the tool's output schema; `text` is what a person reads
// (the JSON text when empty). An error result says what went wrong and what to do.
struct ToolResult {
  json structured = json::object();
  std::string text;
  bool is_error = false;
  static ToolResult error(std::string message);
};

struct Tool {
  std::string name;
  std::string title;
  std::string description;
  json input_schema;
  json output_schema;
  bool long_running = false;     // runs on the worker thread, with progress and cancellation
  bool changes_history = false;  // refused while a step runs (it would move HEAD under it)
  bool read_only = false;
  std::function<ToolResult(const json& args, ToolContext& ctx)> run;
};

const std::vector<Tool>& tools();
const Tool* find_tool(const std::string& name);
json tool_descriptor(const Tool& t);  // the tools/list entry

// What can be checked of a long tool's call without doing its work (the workspace, the
// checkpoint, the sequence, the transformation, the LLM spec and the tuning arguments), checked
// on the caller's thread before the call takes the worker: a call that would fail at once is
// answered at once and keeps no other call waiting. Returns what is wrong, or nothing.
std::optional<std::string> check_long_call(const Tool& tool, const json& args, ToolContext& ctx);

// Checks `args` against a tool's input schema (the subset the table uses: object properties
// with type string/integer/number/boolean/array/object, enum, required, no extra properties).
// Returns what is wrong, or nothing.
std::optional<std::string> check_arguments(const json& schema, const json& args);

// Paths from a client are resolved against the server's root and refused outside `allowed`.
Result<std::filesystem::path> confine(const std::filesystem::path& root, const std::string& arg,
                                      const std::vector<std::filesystem::path>& allowed);

// Resources: checkpoint sources and kernel.toml files, reports, transformation files, manual
// prompts (docs/mcp.md lists the URIs).
json list_resources(McpServer& server);
json list_resource_templates();
Result<json> read_resource(McpServer& server, const std::string& uri);
// Values for an argument of a resource template (completion/complete).
std::vector<std::string> complete_resource_argument(McpServer& server, const std::string& uri,
                                                    const std::string& argument,
                                                    const std::string& prefix);

}  // namespace peak::mcp
