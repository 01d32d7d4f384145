#pragma once
// The transports of `peak mcp` (docs/mcp.md): standard input/output, and Streamable HTTP.
#include <functional>
#include <string>

#include "mcp/server.h"

namespace peak::mcp {

// Reads one JSON-RPC message per line from standard input and writes one per line to standard
// output (which carries nothing else: stray output of the process goes to standard error).
// Returns when the client closes standard input or on SIGINT/SIGTERM, after stopping a running
// step at its next safe point. Returns the process exit code.
int serve_stdio(const ServerOptions& opts);

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port (printed on standard error)
  // The environment variable holding the bearer token clients must send; when it is unset or
  // empty no token is asked, and only a loopback host may be bound.
  std::string token_env = "PEAK_MCP_TOKEN";
};

// "HOST:PORT", ":PORT" or "PORT" (host 127.0.0.1); "[::1]:PORT" for IPv6.
Result<HttpOptions> parse_listen_address(const std::string& text);
bool is_loopback_host(const std::string& host);

// Serves the Streamable HTTP transport at http://HOST:PORT/mcp until SIGINT/SIGTERM. Refuses a
// non-loopback host without a token. Returns the process exit code.
int serve_http(const ServerOptions& opts, const HttpOptions& http);

}  // namespace peak::mcp

namespace peak::mcp {

// `peak mcp`: the server over stdio, or over HTTP when `listen` is given ("HOST:PORT").
// `root` ("" = the current folder) bounds every path a client may name; `workspace` is the -C
// folder (the current workspace when it holds .peak/).
int run(const std::string& workspace, const std::string& root, const std::string& listen,
        const std::string& token_env);

}  // namespace peak::mcp
