// The Streamable HTTP transport (MCP 2025-11-25): one endpoint, /mcp.
//   POST   a JSON-RPC message. A request is answered with application/json when the answer is
//          ready at once, else with a text/event-stream that carries the notifications and
//          requests about it (progress, sampling) and ends with the answer. Notifications and
//          responses get 202 Accepted.
//   GET    405: peak sends nothing outside the stream of the request it concerns.
//   DELETE ends the session (a running step of the session is cancelled).
// Sessions: initialize creates one and returns its Mcp-Session-Id; every later request carries
// it and MCP-Protocol-Version. Host and Origin must name this machine (DNS rebinding); a bearer
// token from the environment is checked when set.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>

#include "mcp/serve.h"
#include "util/listen.h"

namespace peak::mcp {

namespace {

// Messages for one POST: queued by the server (from any thread), drained by the HTTP thread.
class QueueOutbox : public Outbox {
 public:
  void send(const json& message) override {
    std::lock_guard lock(mu_);
    if (closed_) return;
    queue_.push_back(message);
    cv_.notify_all();
  }
  // The next message, or nothing after `wait`.
  std::optional<json> pop(std::chrono::milliseconds wait) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, wait, [&] { return !queue_.empty(); });
    if (queue_.empty()) return std::nullopt;
    json m = std::move(queue_.front());
    queue_.pop_front();
    return m;
  }
  size_t size() {
    std::lock_guard lock(mu_);
    return queue_.size();
  }
  void close() {
    std::lock_guard lock(mu_);
    closed_ = true;
    queue_.clear();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<json> queue_;
  bool closed_ = false;
};

struct Session {
  std::unique_ptr<McpServer> server;
};

std::string random_hex(size_t bytes) {
  std::string out;
  unsigned char buf[64];
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = ::read(fd, buf, bytes);
    ::close(fd);
    if (n == static_cast<ssize_t>(bytes)) {
      for (size_t i = 0; i < bytes; ++i) out += fmt::format("{:02x}", buf[i]);
      return out;
    }
  }
  // /dev/urandom unreadable: time and address entropy (session ids are not secrets; the token is)
  auto t = std::chrono::steady_clock::now().time_since_epoch().count();
  return fmt::format("{:016x}{:016x}", static_cast<uint64_t>(t), reinterpret_cast<uintptr_t>(&out));
}

// The host part of a Host header or an Origin ("http://localhost:8080" -> "localhost").
std::string host_of(std::string v) {
  if (auto s = v.find("://"); s != std::string::npos) v = v.substr(s + 3);
  if (auto slash = v.find('/'); slash != std::string::npos) v = v.substr(0, slash);
  if (!v.empty() && v.front() == '[') {
    auto close = v.find(']');
    return close == std::string::npos ? v : v.substr(1, close - 1);
  }
  if (auto colon = v.rfind(':'); colon != std::string::npos) v = v.substr(0, colon);
  for (auto& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v;
}

bool equal_constant_time(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

void json_error(httplib::Response& res, int status, int code, const std::string& message,
                const json& id = nullptr) {
  res.status = status;
  res.set_content(error_response(id, code, message).dump(), "application/json");
}

std::string sse_event(const json& m) {
  return "event: message\ndata: " + m.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

bool is_response_to(const json& m, const json& id) {
  return m.is_object() && m.contains("id") && m["id"] == id &&
         (m.contains("result") || m.contains("error")) && !m.contains("method");
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

Result<HttpOptions> parse_listen_address(const std::string& text) {
  HttpOptions o;
  std::string host, port = text;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return make_error(fmt::format("'{}': expected [IPV6]:PORT", text));
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else if (auto colon = text.rfind(':'); colon != std::string::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (!host.empty()) o.host = host;
  try {
    size_t used = 0;
    int p = std::stoi(port, &used);
    if (used != port.size() || p < 0 || p > 65535) throw std::out_of_range("port");
    o.port = p;
  } catch (const std::exception&) {
    return make_error(
        fmt::format("'{}' is not HOST:PORT (e.g. 127.0.0.1:8808, :8808, or 0 for any port)", text));
  }
  return o;
}

namespace {

// The sessions of one server, by Mcp-Session-Id.
struct Sessions {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<Session>> by_id;

  std::shared_ptr<Session> find(const std::string& sid) {
    std::lock_guard lock(mu);
    auto it = by_id.find(sid);
    return it == by_id.end() ? nullptr : it->second;
  }
  void add(const std::string& sid, std::shared_ptr<Session> s) {
    std::lock_guard lock(mu);
    by_id[sid] = std::move(s);
  }
  // Removes the session and returns it (nothing when there is none).
  std::shared_ptr<Session> take(const std::string& sid) {
    std::lock_guard lock(mu);
    auto it = by_id.find(sid);
    if (it == by_id.end()) return nullptr;
    auto s = it->second;
    by_id.erase(it);
    return s;
  }
  void shutdown_all() {
    std::lock_guard lock(mu);
    for (auto& [id, s] : by_id) s->server->shutdown();
  }
};

// Every request, before its route: Host and Origin must name this machine (DNS rebinding), and
// the bearer token must match when one is set.
httplib::Server::HandlerResponse check_request(const httplib::Request& req, httplib::Response& res,
                                               const HttpOptions& http, const std::string& token) {
  auto allowed_host = [&](const std::string& h) {
    return is_loopback_host(h) || h == host_of(http.host);
  };
  if (req.has_header("Host") && !allowed_host(host_of(req.get_header_value("Host")))) {
    json_error(res, 403, kInvalidRequest,
               "forbidden: the Host header does not name this server (DNS rebinding "
               "protection)");
    return httplib::Server::HandlerResponse::Handled;
  }
  if (req.has_header("Origin") && !allowed_host(host_of(req.get_header_value("Origin")))) {
    json_error(res, 403, kInvalidRequest,
               "forbidden: requests from origin " + req.get_header_value("Origin") +
                   " are not accepted (DNS rebinding protection)");
    return httplib::Server::HandlerResponse::Handled;
  }
  if (!token.empty()) {
    std::string auth = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (auth.rfind(prefix, 0) != 0 || !equal_constant_time(auth.substr(prefix.size()), token)) {
      res.set_header("WWW-Authenticate", "Bearer realm=\"peak\"");
      json_error(res, 401, kInvalidRequest,
                 "unauthorized: send Authorization: Bearer <the token in " + http.token_env +
                     " where peak mcp runs>");
      return httplib::Server::HandlerResponse::Handled;
    }
  }
  return httplib::Server::HandlerResponse::Unhandled;
}

// The POSTed JSON-RPC message, or nothing when the request was answered with an error (media
// type, Accept, JSON).
std::optional<json> posted_message(const httplib::Request& req, httplib::Response& res) {
  std::string ctype = req.get_header_value("Content-Type");
  if (ctype.find("application/json") == std::string::npos) {
    json_error(res, 415, kInvalidRequest,
               "unsupported media type: POST a JSON-RPC message as application/json");
    return std::nullopt;
  }
  std::string accept = req.get_header_value("Accept");
  if (!accept.empty() && accept.find("application/json") == std::string::npos &&
      accept.find("text/event-stream") == std::string::npos &&
      accept.find("*/*") == std::string::npos) {
    json_error(res, 406, kInvalidRequest,
               "not acceptable: accept application/json and text/event-stream");
    return std::nullopt;
  }
  json msg = json::parse(req.body, nullptr, false);
  if (msg.is_discarded()) {
    json_error(res, 400, kParseError,
               "parse error: the body is not valid JSON (one JSON-RPC 2.0 message)");
    return std::nullopt;
  }
  return msg;
}

// The session a POST (not initialize) belongs to, or nothing when the request was answered with
// an error (no or an unknown session id, an unsupported protocol version).
std::shared_ptr<Session> session_of(const httplib::Request& req, httplib::Response& res,
                                    const json& msg, bool is_request, Sessions& sessions) {
  std::string sid = req.get_header_value("Mcp-Session-Id");
  if (sid.empty()) {
    json_error(res, 400, kInvalidRequest,
               "bad request: no Mcp-Session-Id header; start with initialize",
               is_request ? msg["id"] : json(nullptr));
    return nullptr;
  }
  auto session = sessions.find(sid);
  if (!session) {
    json_error(res, 404, kInvalidRequest,
               "session not found (it ended or the server restarted): initialize "
               "again",
               is_request ? msg["id"] : json(nullptr));
    return nullptr;
  }
  std::string v = req.get_header_value("MCP-Protocol-Version");
  if (!v.empty() && !supported_protocol_version(v)) {
    json_error(res, 400, kInvalidRequest,
               fmt::format("unsupported MCP-Protocol-Version {}; this server speaks "
                           "2025-11-25, 2025-06-18 and 2025-03-26",
                           v));
    return nullptr;
  }
  return session;
}

// The answer to request `id`: plain JSON when it is the only message ready, else an event
// stream of everything the server sends about it, ending with the answer.
void reply(httplib::Response& res, std::shared_ptr<QueueOutbox> q, const json& id) {
  if (q->size() == 1) {
    auto m = q->pop(std::chrono::milliseconds(0));
    if (m && is_response_to(*m, id)) {
      res.set_content(m->dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
      return;
    }
    if (m) q->send(*m);  // not the answer: stream it
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [q, id](size_t, httplib::DataSink& sink) {
        for (;;) {
          if (!sink.is_writable()) {
            q->close();
            return false;
          }
          auto m = q->pop(std::chrono::milliseconds(15000));
          std::string chunk = m ? sse_event(*m) : std::string(": keep-alive\n\n");
          if (!sink.write(chunk.data(), chunk.size())) {
            q->close();
            return false;
          }
          if (m && is_response_to(*m, id)) {
            sink.done();
            return true;
          }
        }
      },
      [q](bool) { q->close(); });
}

void handle_post(const httplib::Request& req, httplib::Response& res, const ServerOptions& opts,
                 Sessions& sessions) {
  auto msg = posted_message(req, res);
  if (!msg) return;
  bool is_request = msg->is_object() && msg->contains("method") && msg->contains("id");
  bool is_init = is_request && (*msg)["method"] == "initialize";
  std::shared_ptr<Session> session;
  std::string sid;
  if (is_init) {
    session = std::make_shared<Session>();
    ServerOptions so = opts;
    so.transport = "http";
    session->server = std::make_unique<McpServer>(so);
    sid = random_hex(16);
  } else {
    session = session_of(req, res, *msg, is_request, sessions);
    if (!session) return;
  }
  auto q = std::make_shared<QueueOutbox>();
  session->server->handle_json(*msg, q);
  if (!is_request) {
    // A notification or a response: accepted; a malformed message gets its error.
    if (auto m = q->pop(std::chrono::milliseconds(0))) {
      res.status = 400;
      res.set_content(m->dump(), "application/json");
      return;
    }
    res.status = 202;
    return;
  }
  if (is_init) {
    sessions.add(sid, session);
    res.set_header("Mcp-Session-Id", sid);
  }
  reply(res, q, (*msg)["id"]);
}

// Binds the address; returns the port, or -1 (said on standard error).
int bind(httplib::Server& svr, const HttpOptions& http) {
  if (http.port == 0) {
    int port = svr.bind_to_any_port(http.host.c_str());
    if (port < 0) std::fprintf(stderr, "peak mcp: cannot listen on %s\n", http.host.c_str());
    return port < 0 ? -1 : port;
  }
  if (!svr.bind_to_port(http.host.c_str(), http.port)) {
    std::fprintf(stderr, "peak mcp: %s\n",
                 listen_failure(http.host, http.port,
                                "choose another port (`--http HOST:0` picks a "
                                "free one)")
                     .c_str());
    return -1;
  }
  return http.port;
}

}  // namespace

int serve_http(const ServerOptions& opts, const HttpOptions& http) {
  const char* tok = std::getenv(http.token_env.c_str());
  const std::string token = tok ? tok : "";
  if (!is_loopback_host(http.host) && token.empty()) {
    std::fprintf(stderr,
                 "peak mcp: refusing to listen on %s without a token: anyone who reaches it could "
                 "drive peak. Set %s to a secret (clients send Authorization: Bearer <secret>), "
                 "or listen on 127.0.0.1.\n",
                 http.host.c_str(), http.token_env.c_str());
    return 2;
  }
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  Sessions sessions;
  httplib::Server svr;
  svr.set_socket_options(exclusive_listen_options);
  svr.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    return check_request(req, res, http, token);
  });
  svr.Post("/mcp", [&](const httplib::Request& req, httplib::Response& res) {
    handle_post(req, res, opts, sessions);
  });
  svr.Get("/mcp", [](const httplib::Request&, httplib::Response& res) {
    res.status = 405;
    res.set_header("Allow", "POST, DELETE");
    res.set_content("peak sends every message on the stream of the request it concerns\n",
                    "text/plain");
  });
  svr.Delete("/mcp", [&](const httplib::Request& req, httplib::Response& res) {
    auto session = sessions.take(req.get_header_value("Mcp-Session-Id"));
    if (!session) return json_error(res, 404, kInvalidRequest, "session not found");
    std::thread([session] { session->server->shutdown(); }).detach();
    res.status = 200;
  });

  int port = bind(svr, http);
  if (port < 0) return 4;
  std::thread signals([&svr, set] {
    int sig = 0;
    sigwait(&set, &sig);
    std::fprintf(stderr, "peak mcp: signal %d: stopping\n", sig);
    svr.stop();
  });
  signals.detach();
  std::string shown = http.host.find(':') != std::string::npos ? "[" + http.host + "]" : http.host;
  std::fprintf(stderr, "peak mcp: listening on http://%s:%d/mcp (root %s%s)\n", shown.c_str(), port,
               opts.root.string().c_str(), token.empty() ? "" : ", bearer token required");
  std::fflush(stderr);
  svr.listen_after_bind();
  sessions.shutdown_all();
  return 0;
}

}  // namespace peak::mcp
