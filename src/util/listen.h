#pragma once
// The listening sockets of peak's HTTP servers (`peak serve`, `peak mcp --http`).
#include <sys/socket.h>

#include <string>

#include <fmt/format.h>

namespace peak {

// Options for a listening socket, before it binds: SO_REUSEADDR only (a restarted server binds
// at once while the connections of the previous one linger), never SO_REUSEPORT, with which a
// second server could bind the same port and take part of the first one's requests. A port that
// is taken makes the second server fail to listen.
inline void exclusive_listen_options(int sock) {
  int yes = 1;
  (void)::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
}

// Why a server could not listen on host:port, and what to do.
inline std::string listen_failure(const std::string& host, int port, const std::string& fix) {
  return fmt::format(
      "cannot listen on {}:{}: the port is in use (another server, perhaps another peak, is "
      "listening there) or {} is not an address of this machine; stop the other server, or {}",
      host, port, host, fix);
}

}  // namespace peak
