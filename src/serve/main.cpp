// peak-serve: the program behind `peak serve` (docs/cli.md). It links cpp-httplib, which the
// peak binary does without, so that peak runs where that library is not installed.
#include <signal.h>

#include <cstdio>
#include <thread>

#include <CLI/CLI.hpp>

#include "serve/serve.h"

namespace {
peak::ReportServer* g_server = nullptr;
}

int main(int argc, char** argv) {
  CLI::App app{"peak serve: a local page with the workspace's report", "peak serve"};
  std::string workspace = ".", store, host = "127.0.0.1";
  int port = 8765;
  bool quiet = false;
  app.add_option("-C,--workspace", workspace, "workspace folder (default: the current one)");
  app.add_option("--store", store, "serve this store instead of the workspace");
  app.add_option("--host", host, "address to listen on (default: loopback only)");
  app.add_option("--port", port, "port (0: any free port)");
  app.add_flag("-q,--quiet", quiet, "no messages");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  peak::ServeOptions o;
  o.store = store.empty() ? workspace : store;
  o.host = host;
  o.port = port;
  peak::ReportServer server(o);
  auto url = server.bind();
  if (!url) {
    std::fprintf(stderr, "peak: %s\n", url.error().c_str());
    return 4;
  }
  if (!peak::is_loopback_host(host))
    std::fprintf(stderr,
                 "peak: serving on %s, not a loopback address: anyone who reaches it reads this "
                 "workspace's report\n",
                 host.c_str());
  std::printf("serving %s (Ctrl-C stops)\n", url->c_str());
  std::fflush(stdout);
  g_server = &server;
  // SIGINT and SIGTERM stop the server from a thread of its own (stop() is not signal-safe).
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread waiter([set] {
    int sig = 0;
    sigwait(&set, &sig);
    if (g_server) g_server->stop();
  });
  waiter.detach();
  auto s = server.listen();
  if (!s) {
    std::fprintf(stderr, "peak: %s\n", s.message().c_str());
    return 4;
  }
  if (!quiet) std::printf("stopped\n");
  return 0;
}
