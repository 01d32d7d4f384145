#pragma once
// The MCP server (docs/mcp.md): JSON-RPC 2.0 messages of the Model Context Protocol, revision
// 2025-11-25 (earlier revisions negotiated down), over any transport. A transport gives each
// incoming message to McpServer::handle with an Outbox where the answer and the notifications
// about it go; stdio has one outbox, Streamable HTTP one per POST.
//
// Tools run on the caller's thread when they are quick (log, show, diff, ...) and on a worker
// thread when they are long (apply, run, evaluate): the server keeps answering meanwhile, sends
// notifications/progress for the running step, and stops it at the next safe point when the
// client cancels the request or goes away.
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "util/result.h"

namespace peak::mcp {

using json = nlohmann::json;

inline constexpr const char* kLatestProtocolVersion = "2025-11-25";
// Revisions this server speaks; the client's is used when it is one of these.
bool supported_protocol_version(const std::string& v);

// JSON-RPC error codes.
inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;
inline constexpr int kResourceNotFound = -32002;

json error_response(const json& id, int code, const std::string& message);

// Where messages to the client go.
class Outbox {
 public:
  virtual ~Outbox() = default;
  virtual void send(const json& message) = 0;
};

struct ServerOptions {
  // The folder the server works in: workspaces are created and opened only inside it.
  std::filesystem::path root;
  // The workspace the tools use when a call names none ("" = none until `init`).
  std::filesystem::path workspace;
  std::string transport = "stdio";  // shown in server info and the log
};

// The running long tool call (at most one per process: steps share the workspace's HEAD).
struct Job;

class McpServer {
 public:
  explicit McpServer(ServerOptions opts);
  ~McpServer();  // cancels a running job and waits for it
  McpServer(const McpServer&) = delete;
  McpServer& operator=(const McpServer&) = delete;

  // One incoming message: a JSON text (parse errors are answered) or a parsed value.
  void handle(const std::string& text, const std::shared_ptr<Outbox>& out);
  void handle_json(const json& msg, const std::shared_ptr<Outbox>& out);

  // The client is gone: cancel the running job and wait until it stopped.
  void shutdown();
  bool initialized() const { return initialized_; }
  std::string protocol_version() const;

  // A request to the client (sampling/createMessage) from a tool's worker thread; waits for the
  // answer, `timeout_s`, or `cancelled()`. Messages go to `out`.
  Result<json> request_client(const std::string& method, const json& params,
                              const std::shared_ptr<Outbox>& out, double timeout_s,
                              const std::function<bool()>& cancelled);
  bool client_has_sampling() const;
  // "name version" of the client, from initialize (recorded as who answered manual prompts).
  std::string client_name() const;

  const ServerOptions& options() const { return opts_; }
  // The current workspace (set by `init`, or from the options).
  std::filesystem::path workspace() const;
  void set_workspace(const std::filesystem::path& p);

  // The running job, for the status tool: JSON or null.
  json job_status() const;

 private:
  json dispatch(const json& msg, const std::shared_ptr<Outbox>& out, bool& deferred);
  json initialize(const json& params);
  json call_tool(const json& id, const json& params, const std::shared_ptr<Outbox>& out,
                 bool& deferred);
  void cancel_request(const json& params);
  void finish_job();

  ServerOptions opts_;
  mutable std::mutex mu_;
  std::atomic<bool> initialized_{false};
  std::string version_ = kLatestProtocolVersion;
  json client_caps_ = json::object();
  std::string log_level_;  // "" = no log messages until logging/setLevel
  bool initialize_seen_ = false;
  json client_info_ = json::object();

  // Requests to the client waiting for their answer, by id.
  struct Pending {
    bool done = false;
    json response;
  };
  std::map<std::string, std::shared_ptr<Pending>> pending_;
  std::condition_variable pending_cv_;
  int64_t next_client_request_ = 1;

  std::shared_ptr<Job> job_;
  std::mutex worker_mu_;  // joins of worker_ (the reader thread and a signal may both stop it)
  std::thread worker_;
};

}  // namespace peak::mcp
