// `peak mcp`: options to ServerOptions, then the transport.
#include <cstdio>

#include "mcp/serve.h"

namespace peak::mcp {

int run(const std::string& workspace, const std::string& root, const std::string& listen,
        const std::string& token_env) {
  std::error_code ec;
  ServerOptions o;
  o.root = std::filesystem::weakly_canonical(
      root.empty() ? std::filesystem::current_path(ec) : std::filesystem::path(root), ec);
  if (ec || !std::filesystem::is_directory(o.root, ec)) {
    std::fprintf(stderr, "peak mcp: --root %s is not a folder\n", root.c_str());
    return 2;
  }
  std::filesystem::path ws =
      workspace.empty() ? std::filesystem::path(".") : std::filesystem::path(workspace);
  if (std::filesystem::is_directory(ws / ".peak", ec))
    o.workspace = std::filesystem::weakly_canonical(std::filesystem::absolute(ws, ec), ec);
  if (listen.empty()) return serve_stdio(o);
  auto http = parse_listen_address(listen);
  if (!http) {
    std::fprintf(stderr, "peak mcp: --http %s\n", http.error().c_str());
    return 2;
  }
  if (!token_env.empty()) http->token_env = token_env;
  o.transport = "http";
  return serve_http(o, *http);
}

}  // namespace peak::mcp
