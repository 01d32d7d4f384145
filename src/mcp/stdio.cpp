// The stdio transport: newline-delimited JSON-RPC on standard input and output.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

#include "mcp/serve.h"

namespace peak::mcp {

namespace {

// Writes whole lines to the protocol's file descriptor; one writer at a time.
class FdOutbox : public Outbox {
 public:
  explicit FdOutbox(int fd) : fd_(fd) {}
  void send(const json& message) override {
    std::string line = message.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    std::lock_guard lock(mu_);
    size_t off = 0;
    while (off < line.size()) {
      ssize_t n = ::write(fd_, line.data() + off, line.size() - off);
      if (n <= 0) return;  // the client is gone (EPIPE): nothing more to say
      off += static_cast<size_t>(n);
    }
  }

 private:
  int fd_;
  std::mutex mu_;
};

}  // namespace

int serve_stdio(const ServerOptions& opts) {
  // Standard output carries only the protocol: keep a private copy of it for the messages and
  // send everything else the process might print to standard error.
  int proto_fd = ::dup(STDOUT_FILENO);
  if (proto_fd < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    std::fprintf(stderr, "peak mcp: cannot set up standard output\n");
    return 4;
  }
  ::signal(SIGPIPE, SIG_IGN);
  // SIGINT/SIGTERM/SIGHUP: stop a running step at its next safe point, then exit.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  auto out = std::make_shared<FdOutbox>(proto_fd);
  auto server = std::make_shared<McpServer>(opts);
  std::thread signals([server, set] {
    int sig = 0;
    sigwait(&set, &sig);
    if (sig == 0) return;
    std::fprintf(stderr, "peak mcp: signal %d: stopping\n", sig);
    server->shutdown();
    std::fflush(nullptr);
    std::_Exit(0);
  });
  signals.detach();

  std::fprintf(stderr, "peak mcp: serving on standard input/output (root %s)\n",
               opts.root.string().c_str());
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    server->handle(line, out);
  }
  // The client closed its end: stop the running step (the store stays consistent; a run can be
  // resumed) and leave.
  server->shutdown();
  return 0;
}

}  // namespace peak::mcp
