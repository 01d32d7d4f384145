#pragma once
// The `mcp` LLM driver: asks the connected client's model through MCP sampling
// (sampling/createMessage). Each request carries the system text, the user text, the token
// limit, and metadata naming peak's step ("peak/step") and prompt key ("peak/key"). Wrapped by
// the recording driver like any other, so a campaign answered this way replays later.
#include <functional>
#include <memory>

#include "engine/front.h"  // LlmDriver

namespace peak::mcp {

class McpServer;
class Outbox;

std::unique_ptr<LlmDriver> make_sampling_driver(McpServer& server, std::shared_ptr<Outbox> out,
                                                std::function<bool()> cancelled);

}  // namespace peak::mcp
