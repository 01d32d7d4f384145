#include "mcp/server.h"

#include <chrono>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/front.h"  // utc_now_iso8601: the times of the store
#include "mcp/tools.h"
#include "peak/version.h"

namespace peak::mcp {

namespace {

constexpr const char* kInstructions =
    "peak optimizes one GPU kernel through a sequence of natural transformations: each step asks "
    "a model to rewrite one region of the kernel, then compiles, validates (on hidden shapes), "
    "tunes, times and checkpoints the result. Start with `status` (or `init` a workspace from a "
    "kernel context such as matmul-hlsl-fp32), list the library with `transformations_list`, "
    "then `apply` one transformation or `run` a sequence. Steps take minutes: they report "
    "progress, can be cancelled, and `status` answers meanwhile. To be the model yourself, pass "
    "llm \"manual\": the step stops with a prompt; answer it with `respond` and call the same "
    "tool again (run with resume). With llm \"mcp\" peak asks your model through sampling. "
    "`log`, `show`, `diff`, `report` and the peak:// resources show the history.";

// Long steps share a workspace's HEAD: one at a time in this process, whatever the session.
std::atomic<int>& running_jobs() {
  static std::atomic<int> n{0};
  return n;
}

std::string id_key(const json& id) { return id.dump(); }

std::string now_iso() { return utc_now_iso8601(); }

json tool_result_json(const ToolResult& r) {
  std::string text = r.text.empty() ? r.structured.dump(2) : r.text;
  json j{{"content", json::array({{{"type", "text"}, {"text", text}}})}, {"isError", r.is_error}};
  if (!r.is_error) j["structuredContent"] = r.structured;
  return j;
}

int level_rank(const std::string& level) {
  static const char* levels[] = {"debug", "info",     "notice", "warning",
                                 "error", "critical", "alert",  "emergency"};
  for (int i = 0; i < 8; ++i)
    if (level == levels[i]) return i;
  return -1;
}

}  // namespace

struct Job {
  json request_id;
  std::string tool;
  std::string started_at;
  std::chrono::steady_clock::time_point t0;
  json progress_token;  // null when the client asked for no progress
  std::shared_ptr<Outbox> out;
  std::atomic<bool> cancel{false};
  std::atomic<bool> client_cancelled{false};  // by notifications/cancelled: not answered
  std::atomic<bool> done{false};
  std::mutex mu;
  std::string last_line;
  int64_t lines = 0;
};

bool supported_protocol_version(const std::string& v) {
  return v == "2025-11-25" || v == "2025-06-18" || v == "2025-03-26";
}

json error_response(const json& id, int code, const std::string& message) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}};
}

ToolResult ToolResult::error(std::string message) {
  ToolResult r;
  r.text = std::move(message);
  r.is_error = true;
  return r;
}

McpServer::McpServer(ServerOptions opts) : opts_(std::move(opts)) {}

McpServer::~McpServer() { shutdown(); }

std::string McpServer::protocol_version() const {
  std::lock_guard lock(mu_);
  return version_;
}

bool McpServer::client_has_sampling() const {
  std::lock_guard lock(mu_);
  return client_caps_.is_object() && client_caps_.contains("sampling");
}

std::string McpServer::client_name() const {
  std::lock_guard lock(mu_);
  if (!client_info_.is_object()) return "an MCP client";
  std::string n = client_info_.value("name", "an MCP client");
  std::string v = client_info_.value("version", "");
  return v.empty() ? n : n + " " + v;
}

std::filesystem::path McpServer::workspace() const {
  std::lock_guard lock(mu_);
  return opts_.workspace;
}

void McpServer::set_workspace(const std::filesystem::path& p) {
  std::lock_guard lock(mu_);
  opts_.workspace = p;
}

json McpServer::job_status() const {
  std::shared_ptr<Job> job;
  {
    std::lock_guard lock(mu_);
    job = job_;
  }
  if (!job || job->done) return nullptr;
  std::lock_guard lock(job->mu);
  double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - job->t0).count();
  return {{"tool", job->tool},
          {"request", job->request_id},
          {"started_at", job->started_at},
          {"elapsed_s", std::round(elapsed * 10) / 10},
          {"progress", job->last_line},
          {"cancelling", job->cancel.load()}};
}

void McpServer::handle(const std::string& text, const std::shared_ptr<Outbox>& out) {
  json msg = json::parse(text, nullptr, false);
  if (msg.is_discarded()) {
    out->send(error_response(nullptr, kParseError,
                             "parse error: the message is not valid JSON (one JSON-RPC 2.0 "
                             "object per message)"));
    return;
  }
  handle_json(msg, out);
}

void McpServer::handle_json(const json& msg, const std::shared_ptr<Outbox>& out) {
  if (msg.is_array()) {
    out->send(error_response(nullptr, kInvalidRequest,
                             "JSON-RPC batches are not part of this protocol revision; send one "
                             "message at a time"));
    return;
  }
  json id = msg.is_object() && msg.contains("id") ? msg["id"] : json(nullptr);
  if (!msg.is_object() || msg.value("jsonrpc", "") != "2.0") {
    out->send(error_response(id.is_string() || id.is_number_integer() ? id : json(nullptr),
                             kInvalidRequest,
                             "invalid request: expected a JSON-RPC 2.0 object with "
                             "\"jsonrpc\": \"2.0\""));
    return;
  }
  bool has_id = msg.contains("id");
  if (msg.contains("method")) {
    if (!msg["method"].is_string()) {
      if (has_id) out->send(error_response(id, kInvalidRequest, "\"method\" must be a string"));
      return;
    }
    if (has_id) {
      if (!id.is_string() && !id.is_number_integer()) {
        out->send(error_response(nullptr, kInvalidRequest,
                                 "invalid request: \"id\" must be a string or an integer"));
        return;
      }
      if (msg.contains("params") && !msg["params"].is_object()) {
        out->send(error_response(id, kInvalidParams, "\"params\" must be an object"));
        return;
      }
      bool deferred = false;
      json response;
      try {
        response = dispatch(msg, out, deferred);
      } catch (const std::exception& e) {
        response = error_response(id, kInternalError, fmt::format("internal error: {}", e.what()));
      }
      if (!deferred) out->send(response);
      return;
    }
    // A notification: nothing is answered.
    const std::string method = msg["method"];
    json params = msg.value("params", json::object());
    if (method == "notifications/initialized") {
      initialized_ = true;
    } else if (method == "notifications/cancelled" && params.is_object()) {
      cancel_request(params);
    }
    return;
  }
  if (has_id && (msg.contains("result") || msg.contains("error"))) {
    std::lock_guard lock(mu_);
    auto it = pending_.find(id_key(id));
    if (it != pending_.end()) {
      it->second->done = true;
      it->second->response = msg;
      pending_cv_.notify_all();
    }
    return;
  }
  if (has_id)
    out->send(error_response(id, kInvalidRequest,
                             "invalid request: a message needs \"method\" (a request or "
                             "notification) or \"result\"/\"error\" (a response)"));
}

json McpServer::dispatch(const json& msg, const std::shared_ptr<Outbox>& out, bool& deferred) {
  const json& id = msg["id"];
  const std::string method = msg["method"];
  json params = msg.value("params", json::object());
  auto ok = [&](json result) { return json{{"jsonrpc", "2.0"}, {"id", id}, {"result", result}}; };
  if (method == "initialize") return ok(initialize(params));
  if (method == "ping") return ok(json::object());
  bool seen_initialize = false;
  {
    std::lock_guard lock(mu_);
    seen_initialize = initialize_seen_;
  }
  if (!seen_initialize)
    return error_response(id, kInvalidRequest,
                          fmt::format("{} before initialize: send initialize first", method));
  if (method == "tools/list") {
    json list = json::array();
    for (const auto& t : tools()) list.push_back(tool_descriptor(t));
    return ok({{"tools", list}});
  }
  if (method == "tools/call") return call_tool(id, params, out, deferred);
  if (method == "resources/list") return ok({{"resources", list_resources(*this)}});
  if (method == "resources/templates/list")
    return ok({{"resourceTemplates", list_resource_templates()}});
  if (method == "resources/read") {
    if (!params.contains("uri") || !params["uri"].is_string())
      return error_response(id, kInvalidParams, "resources/read needs \"uri\" (a string)");
    auto r = read_resource(*this, params["uri"]);
    if (!r) return error_response(id, kResourceNotFound, r.error());
    return ok(*r);
  }
  if (method == "logging/setLevel") {
    std::string level = params.value("level", "");
    if (level_rank(level) < 0)
      return error_response(id, kInvalidParams,
                            fmt::format("unknown log level '{}' (debug, info, notice, warning, "
                                        "error, critical, alert, emergency)",
                                        level));
    std::lock_guard lock(mu_);
    log_level_ = level;
    return ok(json::object());
  }
  if (method == "completion/complete") {
    json ref = params.value("ref", json::object());
    json arg = params.value("argument", json::object());
    std::vector<std::string> values;
    if (ref.value("type", "") == "ref/resource" && arg.is_object())
      values = complete_resource_argument(*this, ref.value("uri", ""), arg.value("name", ""),
                                          arg.value("value", ""));
    else if (ref.value("type", "") != "ref/resource")
      return error_response(id, kInvalidParams,
                            "peak completes resource template arguments only (ref/resource); it "
                            "has no prompts");
    size_t total = values.size();
    if (values.size() > 100) values.resize(100);
    return ok({{"completion", {{"values", values}, {"total", total}, {"hasMore", total > 100}}}});
  }
  return error_response(id, kMethodNotFound,
                        fmt::format("method not found: {} (peak serves tools, resources, "
                                    "logging and completion)",
                                    method));
}

json McpServer::initialize(const json& params) {
  std::string requested = params.value("protocolVersion", "");
  std::lock_guard lock(mu_);
  version_ = supported_protocol_version(requested) ? requested : kLatestProtocolVersion;
  client_caps_ = params.value("capabilities", json::object());
  client_info_ = params.value("clientInfo", json::object());
  initialize_seen_ = true;
  return {{"protocolVersion", version_},
          {"capabilities",
           {{"tools", {{"listChanged", false}}},
            {"resources", {{"subscribe", false}, {"listChanged", false}}},
            {"logging", json::object()},
            {"completions", json::object()}}},
          {"serverInfo",
           {{"name", "peak"},
            {"title", "peak: performance engineering for GPU kernels"},
            {"version", PEAK_VERSION}}},
          {"instructions", kInstructions}};
}

json McpServer::call_tool(const json& id, const json& params, const std::shared_ptr<Outbox>& out,
                          bool& deferred) {
  auto respond = [&](const ToolResult& r) {
    return json{{"jsonrpc", "2.0"}, {"id", id}, {"result", tool_result_json(r)}};
  };
  if (!params.contains("name") || !params["name"].is_string())
    return error_response(id, kInvalidParams, "tools/call needs \"name\" (a string)");
  const std::string name = params["name"];
  const Tool* tool = find_tool(name);
  if (!tool) {
    std::vector<std::string> names;
    for (const auto& t : tools()) names.push_back(t.name);
    return error_response(
        id, kInvalidParams,
        fmt::format("unknown tool '{}'; peak's tools are: {}", name, fmt::join(names, ", ")));
  }
  json args = params.contains("arguments") ? params["arguments"] : json::object();
  if (args.is_null()) args = json::object();
  if (!args.is_object())
    return error_response(id, kInvalidParams, "\"arguments\" must be an object");
  if (auto problem = check_arguments(tool->input_schema, args))
    return respond(ToolResult::error(fmt::format(
        "{}: {}. See the tool's inputSchema (tools/list) for its arguments.", name, *problem)));
  // A long call that would fail at once is answered here, before it takes the worker.
  try {
    ToolContext check_ctx{*this, out, [] { return false; }, [](const std::string&) {}};
    if (auto problem = check_long_call(*tool, args, check_ctx))
      return respond(ToolResult::error(*problem));
  } catch (const std::exception& e) {
    return respond(ToolResult::error(fmt::format("{} failed: internal error: {}", name, e.what())));
  }

  auto busy = [&] {
    json running = job_status();
    if (running.is_null()) running = json{{"tool", "a step of another session"}};
    return respond(ToolResult::error(fmt::format(
        "peak is busy: {} is running (started {}). Wait for it (the status tool shows its "
        "progress) or cancel that request, then call {} again.",
        running.value("tool", ""), running.value("started_at", "earlier"), name)));
  };
  if (tool->long_running) {
    int expected = 0;  // reserve the one slot for steps
    if (!running_jobs().compare_exchange_strong(expected, 1)) return busy();
  } else if (tool->changes_history && running_jobs() > 0) {
    return busy();
  }

  if (!tool->long_running) {
    ToolContext ctx{*this, out, [] { return false; }, [](const std::string&) {}};
    try {
      return respond(tool->run(args, ctx));
    } catch (const std::exception& e) {
      return respond(
          ToolResult::error(fmt::format("{} failed: internal error: {}", name, e.what())));
    }
  }

  // A long tool: on the worker thread; the answer is sent when it ends.
  auto job = std::make_shared<Job>();
  job->request_id = id;
  job->tool = name;
  job->started_at = now_iso();
  job->t0 = std::chrono::steady_clock::now();
  job->out = out;
  if (params.contains("_meta") && params["_meta"].is_object() &&
      params["_meta"].contains("progressToken"))
    job->progress_token = params["_meta"]["progressToken"];
  std::lock_guard worker_lock(worker_mu_);
  if (worker_.joinable()) worker_.join();  // the previous job has ended (checked above)
  {
    std::lock_guard lock(mu_);
    job_ = job;
  }
  deferred = true;
  worker_ = std::thread([this, job, tool, args] {
    auto cancelled = [job] { return job->cancel.load(); };
    auto progress = [this, job](const std::string& line) {
      if (line.empty()) return;
      int64_t n = 0;
      {
        std::lock_guard lock(job->mu);
        if (line == job->last_line) return;
        job->last_line = line;
        n = ++job->lines;
      }
      if (!job->progress_token.is_null())
        job->out->send(
            {{"jsonrpc", "2.0"},
             {"method", "notifications/progress"},
             {"params",
              {{"progressToken", job->progress_token}, {"progress", n}, {"message", line}}}});
      std::string level;
      {
        std::lock_guard lock(mu_);
        level = log_level_;
      }
      if (!level.empty() && level_rank(level) <= level_rank("info"))
        job->out->send({{"jsonrpc", "2.0"},
                        {"method", "notifications/message"},
                        {"params", {{"level", "info"}, {"logger", "peak"}, {"data", line}}}});
    };
    ToolContext ctx{*this, job->out, cancelled, progress};
    ToolResult result;
    try {
      result = tool->run(args, ctx);
    } catch (const std::exception& e) {
      result =
          ToolResult::error(fmt::format("{} failed: internal error: {}", tool->name, e.what()));
    }
    // Free the slot first: a client may call the next step as soon as it has the answer.
    job->done = true;
    --running_jobs();
    // A request the client cancelled is not answered (the client has stopped waiting for it);
    // one stopped because the input ended or a signal came is, with what the step did.
    if (!job->client_cancelled)
      job->out->send(
          {{"jsonrpc", "2.0"}, {"id", job->request_id}, {"result", tool_result_json(result)}});
  });
  return nullptr;
}

void McpServer::cancel_request(const json& params) {
  if (!params.contains("requestId")) return;
  std::lock_guard lock(mu_);
  if (job_ && !job_->done && job_->request_id == params["requestId"]) {
    job_->client_cancelled = true;
    job_->cancel = true;
  }
}

void McpServer::shutdown() {
  {
    std::lock_guard lock(mu_);
    if (job_) job_->cancel = true;
    pending_cv_.notify_all();
  }
  std::lock_guard worker_lock(worker_mu_);
  if (worker_.joinable()) worker_.join();
}

Result<json> McpServer::request_client(const std::string& method, const json& params,
                                       const std::shared_ptr<Outbox>& out, double timeout_s,
                                       const std::function<bool()>& cancelled) {
  auto pending = std::make_shared<Pending>();
  json id;
  {
    std::lock_guard lock(mu_);
    id = fmt::format("peak-{}", next_client_request_++);
    pending_[id_key(id)] = pending;
  }
  out->send({{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}});
  auto t0 = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_);
  std::string why;
  while (!pending->done) {
    if (cancelled && cancelled()) {
      why = "cancelled";
      break;
    }
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (timeout_s > 0 && waited >= timeout_s) {
      why = fmt::format("no answer to {} within {:.0f} s", method, timeout_s);
      break;
    }
    pending_cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
  pending_.erase(id_key(id));
  lock.unlock();
  if (!why.empty()) {
    out->send({{"jsonrpc", "2.0"},
               {"method", "notifications/cancelled"},
               {"params", {{"requestId", id}, {"reason", why}}}});
    return make_error(why);
  }
  const json& r = pending->response;
  if (r.contains("error")) {
    const json& e = r["error"];
    return make_error(fmt::format("the client answered {} with error {}: {}", method,
                                  e.value("code", 0),
                                  e.is_object() ? e.value("message", "") : e.dump()));
  }
  return r.value("result", json::object());
}

}  // namespace peak::mcp
