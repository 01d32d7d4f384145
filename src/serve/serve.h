#pragma once
// `peak serve`: a local HTTP server showing a workspace's report, redrawn while a run goes on.
//   GET /             the HTML report (the same page as `peak report --html`), polling:
//   GET /report.json  the report's JSON, built afresh from the store on every request
// Loopback only unless another address is asked for. docs/report.md.
#include <filesystem>
#include <functional>
#include <string>

#include "util/result.h"

namespace peak {

struct ServeOptions {
  std::filesystem::path store;  // a workspace (or folder inside one), .peak folder or peak.db
  std::string host = "127.0.0.1";
  int port = 8765;  // 0: any free port
};

class ReportServer {
 public:
  explicit ReportServer(ServeOptions opts);
  ~ReportServer();
  ReportServer(const ReportServer&) = delete;
  ReportServer& operator=(const ReportServer&) = delete;

  // Binds the address; returns the URL it serves.
  Result<std::string> bind();
  // Serves until stop() (from another thread or a signal handler's thread).
  Status listen();
  void stop();

  // The page and the JSON, as served (also for tests without sockets).
  struct Response {
    int status = 200;
    std::string content_type, body;
  };
  Response page() const;
  Response json() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  ServeOptions opts_;
};

bool is_loopback_host(const std::string& host);

}  // namespace peak
