#pragma once
// Fixtures of the end-to-end tests of the peak binary: running it, workspaces of a small HLSL
// kernel (fast on lavapipe) with a one-pass transformation, and loopback LLM servers.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sqlite3.h>
#include <nlohmann/json.hpp>

#include "engine/testing.h"
#include "util/fs.h"
#include "util/process.h"

namespace peak::testing {

using json = nlohmann::json;

struct Out {
  int code = -1;
  std::string out, err;
};

// The first column of the first row `sql` reads from the workspace's store (read-only).
inline std::string sql_value(const fs::path& ws, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string uri = "file:" + (ws / ".peak" / "peak.db").string() + "?mode=ro";
  if (sqlite3_open_v2(uri.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr) !=
      SQLITE_OK)
    return "cannot open";
  std::string out;
  sqlite3_exec(
      db, sql.c_str(),
      [](void* o, int, char** v, char**) {
        *static_cast<std::string*>(o) = v[0] ? v[0] : "";
        return 0;
      },
      &out, nullptr);
  sqlite3_close(db);
  return out;
}

inline std::string added_reply() { return std::string("```hlsl\n") + kAddedDevice + "```\n"; }

// An OpenAI Chat Completions reply.
inline std::string openai_body(const std::string& content) {
  json j = {{"id", "chatcmpl-1"},
            {"model", "m"},
            {"choices", json::array({{{"index", 0},
                                      {"message", {{"role", "assistant"}, {"content", content}}},
                                      {"finish_reason", "stop"}}})},
            {"usage", {{"prompt_tokens", 12}, {"completion_tokens", 7}}}};
  return j.dump();
}

// A server on 127.0.0.1 with an ephemeral port, serving in a background thread.
class TestServer {
 public:
  explicit TestServer(const std::function<void(httplib::Server&, TestServer&)>& setup) {
    setup(svr_, *this);
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    while (!svr_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~TestServer() {
    svr_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::atomic<int> gets{0}, posts{0};

 private:
  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
};

// An OpenAI-compatible server that knows model "m" and answers completions with `reply`
// after the failures `before` returns for the first requests (nullopt: answer normally).
using Failure = std::function<bool(int n, httplib::Response& res)>;
inline std::unique_ptr<TestServer> openai_server(const std::string& reply, Failure before = {}) {
  return std::make_unique<TestServer>([reply, before](httplib::Server& s, TestServer& t) {
    s.Get("/v1/models/m", [&t](const httplib::Request&, httplib::Response& res) {
      ++t.gets;
      res.set_content(R"({"id":"m","object":"model"})", "application/json");
    });
    s.Get("/v1/models", [&t](const httplib::Request&, httplib::Response& res) {
      ++t.gets;
      res.set_content(R"({"object":"list","data":[{"id":"m"}]})", "application/json");
    });
    s.Get(R"(/v1/models/.+)", [&t](const httplib::Request&, httplib::Response& res) {
      ++t.gets;
      res.status = 404;
      res.set_content(R"({"error":{"message":"no such model"}})", "application/json");
    });
    s.Post("/v1/chat/completions",
           [&t, reply, before](const httplib::Request&, httplib::Response& res) {
             int n = t.posts++;
             if (before && before(n, res)) return;
             res.set_content(openai_body(reply), "application/json");
           });
  });
}

// A port that was free a moment ago and has nobody listening on it.
inline int closed_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = make_temp_dir("peak-cli-test-");
    ASSERT_TRUE(d);
    tmp_ = *d;
    // Other users (the read-only tests run as nobody) may enter the folder.
    ::chmod(tmp_.c_str(), 0755);
    for (const char* v : {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL",
                          "ANTHROPIC_BASE_URL", "PEAK_FAULT", "PEAK_LIBRARY"})
      ::unsetenv(v);
  }
  void TearDown() override {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(tmp_, ec); it != fs::end(it); ++it)
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(tmp_, ec);
  }
  ProcessOptions options(std::vector<std::string> args, const fs::path& cwd,
                         const std::map<std::string, std::string>& env) {
    ProcessOptions o;
    o.argv = {peak_binary_.empty() ? std::string(PEAK_BINARY_DIR) + "/peak" : peak_binary_};
    for (auto& a : args) o.argv.push_back(a);
    o.cwd = cwd.empty() ? tmp_ : cwd;
    o.timeout_s = 900;
    o.env["PEAK_DATA_DIR"] = PEAK_SOURCE_DIR;
    // The runner's own fence timeout (30 s) holds: a loaded machine makes lavapipe slow, and a
    // test that wants a hung kernel caught sooner sets a shorter one itself.
    if (!library_.empty()) o.env["PEAK_LIBRARY"] = library_.string();
    for (const auto& [k, v] : env) o.env[k] = v;
    return o;
  }
  Out run(const ProcessOptions& o) {
    auto r = run_process(o);
    Out out;
    if (!r) {
      out.err = r.error();
      return out;
    }
    out.code = r->timed_out ? -2 : r->exit_code;
    out.out = r->out;
    out.err = r->err;
    return out;
  }
  Out peak(std::vector<std::string> args, const fs::path& cwd = {},
           const std::map<std::string, std::string>& env = {}) {
    return run(options(std::move(args), cwd, env));
  }
  // As user nobody when the test runs as root (root writes anywhere); as the user otherwise.
  Out peak_as_other_user(std::vector<std::string> args, const fs::path& cwd) {
    ProcessOptions o = options(std::move(args), cwd, {});
    if (::geteuid() == 0) {
      std::vector<std::string> argv = {"setpriv", "--reuid=65534", "--regid=65534",
                                       "--clear-groups"};
      argv.insert(argv.end(), o.argv.begin(), o.argv.end());
      o.argv = argv;
    }
    return run(o);
  }
  // A workspace of the HLSL matmul example whose device region is replaced by `device`.
  fs::path workspace_with_device(const std::string& name, const std::string& device,
                                 const std::string& host = "") {
    fs::path ws = tmp_ / name;
    Out o =
        peak({"init", std::string(PEAK_SOURCE_DIR) + "/examples/matmul-hlsl-fp32", ws.string()});
    EXPECT_EQ(o.code, 0) << o.err;
    if (!device.empty()) {
      auto src = read_file(ws / "kernel.hlsl");
      EXPECT_TRUE(src);
      std::string s = replace_region(*src, "device", device);
      if (!host.empty()) s = replace_region(s, "host", host);
      EXPECT_TRUE(write_file(ws / "kernel.hlsl", s));
    }
    return ws;
  }
  // A workspace of the small kernel, with the one-pass library in $PEAK_LIBRARY.
  fs::path scale_workspace(const std::string& name) {
    EXPECT_TRUE(write_file(tmp_ / "scale-ctx" / "kernel.toml", kScaleToml));
    EXPECT_TRUE(write_file(tmp_ / "scale-ctx" / "kernel.hlsl", kScaleSource));
    EXPECT_TRUE(write_file(tmp_ / "lib" / "add-twice.md", kAddTwice));
    library_ = tmp_ / "lib";
    fs::path ws = tmp_ / name;
    Out o = peak({"init", (tmp_ / "scale-ctx").string(), ws.string()});
    EXPECT_EQ(o.code, 0) << o.err;
    return ws;
  }
  // A `command:` LLM spec that prints `reply` (from a file) and counts its calls.
  std::string command_llm(const std::string& reply) {
    EXPECT_TRUE(write_file(tmp_ / "reply.md", reply));
    return "command:'echo x >> " + (tmp_ / "llm-calls").string() + "; cat " +
           (tmp_ / "reply.md").string() + "'";
  }
  size_t llm_calls() {
    auto t = read_file(tmp_ / "llm-calls");
    return t ? split_lines(*t).size() : 0;
  }
  json commit_json(const fs::path& ws, const std::map<std::string, std::string>& env = {}) {
    Out o = peak({"--json", "-q", "commit", "-m", "edit", "--budget", "1"}, ws, env);
    EXPECT_EQ(o.code, 1) << o.out << o.err;
    json j = json::parse(o.out, nullptr, false);
    EXPECT_TRUE(j.is_object()) << o.out << o.err;
    return j;
  }
  size_t checkpoints(const fs::path& ws) {
    Out o = peak({"--json", "log"}, ws);
    json j = json::parse(o.out, nullptr, false);
    return j.is_array() ? j.size() : 0;
  }
  json status(const fs::path& ws) {
    Out o = peak({"--json", "status"}, ws);
    EXPECT_EQ(o.code, 0) << o.err;
    return json::parse(o.out, nullptr, false);
  }
  fs::path tmp_;
  fs::path library_;         // $PEAK_LIBRARY for every peak run ("" = the shipped library)
  std::string peak_binary_;  // another peak binary ("" = the built one)
};

}  // namespace peak::testing
