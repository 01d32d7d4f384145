#include "mcp/sampling.h"

#include <chrono>

#include <fmt/format.h>

#include "mcp/server.h"

namespace peak::mcp {

namespace {

class SamplingDriver : public LlmDriver {
 public:
  SamplingDriver(McpServer& server, std::shared_ptr<Outbox> out, std::function<bool()> cancelled)
      : server_(server), out_(std::move(out)), cancelled_(std::move(cancelled)) {}

  std::string describe() const override { return "mcp"; }

  LlmReply complete(const LlmRequest& request) override {
    LlmReply reply;
    reply.driver = "mcp";
    auto t0 = std::chrono::steady_clock::now();
    json params = {
        {"messages", json::array({{{"role", "user"},
                                   {"content", {{"type", "text"}, {"text", request.user}}}}})},
        {"systemPrompt", request.system},
        {"maxTokens", request.max_tokens},
        {"includeContext", "none"},
        {"metadata", {{"peak/step", request.step_label}, {"peak/key", request.key}}}};
    auto r = server_.request_client("sampling/createMessage", params, out_, request.timeout_s,
                                    cancelled_);
    reply.latency_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    reply.http_attempts = 1;
    if (!r) {
      reply.status = r.error().rfind("no answer", 0) == 0 ? LlmStatus::timeout : LlmStatus::failed;
      reply.error = fmt::format("mcp sampling for {}: {}", request.step_label, r.error());
      return reply;
    }
    // content: one block (2025-06-18) or an array of blocks (2025-11-25); text blocks count.
    json content = r->value("content", json());
    if (content.is_object()) content = json::array({content});
    std::string text;
    if (content.is_array())
      for (const auto& b : content)
        if (b.is_object() && b.value("type", "") == "text") text += b.value("text", "");
    reply.model = r->value("model", "");
    reply.finish_reason = r->value("stopReason", "");
    reply.producer = "mcp:" + (reply.model.empty() ? server_.client_name() : reply.model);
    reply.text = text;
    if (text.empty()) {
      reply.status = LlmStatus::failed;
      reply.error = fmt::format("mcp sampling for {}: the client's answer holds no text content",
                                request.step_label);
      return reply;
    }
    reply.status = reply.finish_reason == "maxTokens" ? LlmStatus::truncated : LlmStatus::ok;
    if (reply.status == LlmStatus::truncated)
      reply.error = fmt::format("mcp sampling for {}: the reply reached maxTokens ({})",
                                request.step_label, request.max_tokens);
    return reply;
  }

 private:
  McpServer& server_;
  std::shared_ptr<Outbox> out_;
  std::function<bool()> cancelled_;
};

}  // namespace

std::unique_ptr<LlmDriver> make_sampling_driver(McpServer& server, std::shared_ptr<Outbox> out,
                                                std::function<bool()> cancelled) {
  return std::make_unique<SamplingDriver>(server, std::move(out), std::move(cancelled));
}

}  // namespace peak::mcp
