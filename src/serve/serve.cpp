#include "serve/serve.h"

#include <httplib.h>

#include <fmt/format.h>

#include "report/html.h"
#include "report/report.h"
#include "util/listen.h"

namespace peak {

using json = nlohmann::json;

struct ReportServer::Impl {
  httplib::Server server;
  int port = 0;
};

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

ReportServer::ReportServer(ServeOptions opts)
    : impl_(std::make_unique<Impl>()), opts_(std::move(opts)) {
  impl_->server.set_socket_options(exclusive_listen_options);
  auto send = [](httplib::Response& res, const Response& r) {
    res.status = r.status;
    res.set_header("Cache-Control", "no-store");
    res.set_content(r.body, r.content_type.c_str());
  };
  impl_->server.Get(
      "/", [this, send](const httplib::Request&, httplib::Response& res) { send(res, page()); });
  // Browsers ask for an icon on their own; the page has none (no content, not an error).
  impl_->server.Get("/favicon.ico",
                    [](const httplib::Request&, httplib::Response& res) { res.status = 204; });
  impl_->server.Get("/report.json", [this, send](const httplib::Request&, httplib::Response& res) {
    send(res, json());
  });
}

ReportServer::~ReportServer() = default;

namespace {
// The report's JSON, or why there is none yet (an empty or still-initializing workspace).
json current(const std::filesystem::path& where, int* status) {
  auto store = open_store_for_reading(where);
  if (!store) {
    *status = 503;
    return {{"kind", "peak-error"}, {"format", kReportFormatVersion}, {"message", store.error()}};
  }
  auto rep = build_report(**store);
  if (!rep) {
    *status = 503;
    return {{"kind", "peak-error"}, {"format", kReportFormatVersion}, {"message", rep.error()}};
  }
  if ((*store)->dir().filename() == ".peak") rep->source = (*store)->dir().parent_path().string();
  *status = 200;
  return render_json(*rep);
}
}  // namespace

ReportServer::Response ReportServer::json() const {
  Response r;
  r.body = current(opts_.store, &r.status).dump();
  r.content_type = "application/json";
  return r;
}

ReportServer::Response ReportServer::page() const {
  Response r;
  int status = 200;
  nlohmann::json data = current(opts_.store, &status);
  std::string title = data.value("kind", "") == "peak-report"
                          ? fmt::format("peak serve: {}", data.value("kernel", ""))
                          : std::string("peak serve");
  auto html = html_page(title, data, "/report.json");
  r.content_type = "text/html; charset=utf-8";
  if (!html) {
    r.status = 500;
    r.content_type = "text/plain; charset=utf-8";
    r.body = html.error() + "\n";
    return r;
  }
  r.body = std::move(*html);
  return r;
}

Result<std::string> ReportServer::bind() {
  if (opts_.port == 0) {
    int port = impl_->server.bind_to_any_port(opts_.host.c_str());
    if (port <= 0) return make_error(fmt::format("cannot listen on {}: no free port", opts_.host));
    impl_->port = port;
  } else {
    if (!impl_->server.bind_to_port(opts_.host.c_str(), opts_.port))
      return make_error(listen_failure(opts_.host, opts_.port,
                                       "choose another port (`--port 0` picks a free one)"));
    impl_->port = opts_.port;
  }
  std::string host =
      opts_.host.find(':') != std::string::npos ? "[" + opts_.host + "]" : opts_.host;
  return fmt::format("http://{}:{}/", host, impl_->port);
}

Status ReportServer::listen() {
  if (!impl_->server.listen_after_bind()) return Status::error("the server stopped with an error");
  return Status::ok();
}

void ReportServer::stop() { impl_->server.stop(); }

}  // namespace peak
