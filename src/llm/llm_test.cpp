// The HTTP drivers against loopback servers (cpp-httplib).
#include "llm/llm.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "util/fs.h"

namespace peak {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
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
    stopping = true;
    svr_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // Sleeps up to `seconds`, returning early when the server is being stopped.
  void nap(double seconds) {
    auto t0 = Clock::now();
    while (!stopping && since(t0) < seconds)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  void remember(const httplib::Request& req) {
    std::lock_guard lock(mu);
    bodies.push_back(req.body);
    std::map<std::string, std::string> h;
    for (const auto& [k, v] : req.headers) h[k] = v;
    headers.push_back(h);
  }

  std::atomic<bool> stopping{false};
  std::atomic<int> hits{0};
  std::mutex mu;
  std::vector<std::string> bodies;
  std::vector<std::map<std::string, std::string>> headers;

 private:
  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
};

std::string openai_body(const std::string& content, const std::string& finish = "stop") {
  json j = {{"id", "chatcmpl-1"},
            {"model", "gpt-test-2025"},
            {"choices", json::array({{{"index", 0},
                                      {"message", {{"role", "assistant"}, {"content", content}}},
                                      {"finish_reason", finish}}})},
            {"usage", {{"prompt_tokens", 12}, {"completion_tokens", 7}, {"total_tokens", 19}}}};
  return j.dump();
}

std::string anthropic_body(const std::string& text, const std::string& stop = "end_turn") {
  json j = {{"id", "msg_1"},
            {"type", "message"},
            {"role", "assistant"},
            {"model", "claude-test-1"},
            {"content", json::array({{{"type", "text"}, {"text", text.substr(0, 5)}},
                                     {{"type", "tool_use"}, {"id", "x"}, {"name", "t"}},
                                     {{"type", "text"}, {"text", text.substr(5)}}})},
            {"stop_reason", stop},
            {"usage", {{"input_tokens", 21}, {"output_tokens", 9}}}};
  return j.dump();
}

const char* kCode = "Here it is:\n```cpp\n__global__ void k() {}\n```\n";

LlmRequest request(double timeout_s = 10) {
  LlmRequest r;
  r.system = "You are a GPU performance engineer.";
  r.user = "Tile the loop.";
  r.key = "3fa2c1d0e5b6a7980011223344556677889900aabbccddeeff00112233445566";
  r.step_label = "tb-tiling pass 2/6 (device)";
  r.max_tokens = 1000;
  r.timeout_s = timeout_s;
  return r;
}

DriverOptions fast_options() {
  DriverOptions o;
  o.retries = 3;
  o.backoff_s = 0.01;
  o.max_backoff_s = 5;
  return o;
}

// Clears the variables the drivers read, and restores them afterwards.
class LlmHttp : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) {
      if (const char* old = std::getenv(v)) saved_[v] = old;
      ::unsetenv(v);
    }
  }
  void TearDown() override {
    for (const char* v : kVars) {
      ::unsetenv(v);
      if (auto it = saved_.find(v); it != saved_.end()) ::setenv(v, it->second.c_str(), 1);
    }
  }
  std::unique_ptr<LlmDriver> driver(const std::string& spec, DriverOptions o = fast_options()) {
    auto d = make_driver(spec, o);
    EXPECT_TRUE(d.is_ok()) << (d ? "" : d.error());
    return d ? std::move(d).value() : nullptr;
  }
  static constexpr const char* kVars[] = {"OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY",
                                          "ANTHROPIC_BASE_URL", "PEAK_TEST_KEY"};
  std::map<std::string, std::string> saved_;
};

// ---- OpenAI ----------------------------------------------------------------------------------

TEST_F(LlmHttp, OpenAiSuccessParsesTextTokensAndSendsTheRequest) {
  ::setenv("OPENAI_API_KEY", "sk-test-abcdefgh12345678", 1);
  TestServer server([](httplib::Server& s, TestServer& t) {
    s.Post("/v1/chat/completions", [&t](const httplib::Request& req, httplib::Response& res) {
      t.remember(req);
      res.set_content(openai_body(kCode), "application/json");
    });
  });
  auto d = driver("openai:gpt-test@" + server.url() + "/v1");
  LlmReply r = d->complete(request());
  ASSERT_EQ(r.status, LlmStatus::ok) << r.error;
  EXPECT_EQ(r.text, kCode);
  EXPECT_EQ(r.driver, "openai");
  EXPECT_EQ(r.model, "gpt-test-2025");
  EXPECT_EQ(r.producer, "openai:gpt-test-2025");
  EXPECT_EQ(r.finish_reason, "stop");
  EXPECT_EQ(r.prompt_tokens, 12);
  EXPECT_EQ(r.completion_tokens, 7);
  EXPECT_EQ(r.http_attempts, 1);
  EXPECT_GT(r.latency_s, 0);

  ASSERT_EQ(server.bodies.size(), 1u);
  json sent = json::parse(server.bodies[0]);
  EXPECT_EQ(sent["model"], "gpt-test");
  EXPECT_EQ(sent["max_completion_tokens"], 1000);
  ASSERT_EQ(sent["messages"].size(), 2u);
  EXPECT_EQ(sent["messages"][0]["role"], "system");
  EXPECT_EQ(sent["messages"][0]["content"], "You are a GPU performance engineer.");
  EXPECT_EQ(sent["messages"][1]["role"], "user");
  EXPECT_EQ(sent["messages"][1]["content"], "Tile the loop.");
  EXPECT_EQ(server.headers[0]["Authorization"], "Bearer sk-test-abcdefgh12345678");
  EXPECT_EQ(d->describe(), "openai:gpt-test@" + server.url() + "/v1");
}

TEST_F(LlmHttp, OpenAiLocalServerNeedsNoKeyAndSendsNoAuthorization) {
  TestServer server([](httplib::Server& s, TestServer& t) {
    s.Post("/v1/chat/completions", [&t](const httplib::Request& req, httplib::Response& res) {
      t.remember(req);
      res.set_content(openai_body("hello"), "application/json");
    });
  });
  ::setenv("OPENAI_BASE_URL", (server.url() + "/v1/").c_str(), 1);  // from the environment
  auto d = driver("openai:local-model");
  LlmReply r = d->complete(request());
  ASSERT_EQ(r.status, LlmStatus::ok) << r.error;
  EXPECT_EQ(server.headers[0].count("Authorization"), 0u);
}

TEST_F(LlmHttp, OpenAiOfficialEndpointWithoutKeyIsAnError) {
  auto d = make_driver("openai:gpt-5", fast_options());
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.error().find("set OPENAI_API_KEY"), std::string::npos) << d.error();
}

TEST_F(LlmHttp, KeyEnvNamesAnotherVariable) {
  TestServer server([](httplib::Server& s, TestServer& t) {
    s.Post("/v1/chat/completions", [&t](const httplib::Request& req, httplib::Response& res) {
      t.remember(req);
      res.set_content(openai_body("hello"), "application/json");
    });
  });
  DriverOptions o = fast_options();
  o.key_env = "PEAK_TEST_KEY";
  auto missing = make_driver("openai:m@" + server.url() + "/v1", o);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.error().find("PEAK_TEST_KEY"), std::string::npos) << missing.error();
  ::setenv("PEAK_TEST_KEY", "other-key-987654321", 1);
  auto d = driver("openai:m@" + server.url() + "/v1", o);
  ASSERT_TRUE(d->complete(request()).ok());
  EXPECT_EQ(server.headers[0]["Authorization"], "Bearer other-key-987654321");
}

TEST_F(LlmHttp, OpenAi429HonoursRetryAfter) {
  TestServer server([](httplib::Server& s, TestServer& t) {
    s.Post("/v1/chat/completions", [&t](const httplib::Request&, httplib::Response& res) {
      if (t.hits++ == 0) {
        res.status = 429;
        res.set_header("Retry-After", "1");
        res.set_content(R"({"error":{"message":"Rate limit reached"}})", "application/json");
        return;
      }
      res.set_content(openai_body("ok after wait"), "application/json");
    });
  });
  auto d = driver("openai:m@" + server.url() + "/v1");
  LlmReply r = d->complete(request());
  ASSERT_EQ(r.status, LlmStatus::ok) << r.error;
  EXPECT_EQ(r.text, "ok after wait");
  EXPECT_EQ(r.http_attempts, 2);
  EXPECT_EQ(server.hits, 2);
  // A Retry-After longer than what is left of the deadline: no second request.
  TestServer slow([](httplib::Server& s, TestServer& t) {
    s.Post("/v1/chat/completions", [&t](const httplib::Request&, httplib::Response& res) {
      ++t.hits;
      res.status = 429;
      res.set_header("Retry-After", "30");
      res.set_content(R"({"error":{"message":"Rate limit reached"}})", "application/json");
    });
  });
  DriverOptions o = fast_options();
  o.max_backoff_s = 60;
  o.deadline_s = 2;
  LlmReply cut = driver("openai:m@" + slow.url() + "/v1", o)->complete(request());
  EXPECT_EQ(cut.status, LlmStatus::failed);
  EXPECT_TRUE(cut.infrastructure);
  EXPECT_EQ(slow.hits, 1);
  EXPECT_NE(cut.error.find("--llm-deadline"), std::string::npos) << cut.error;
}

TEST_F(LlmHttp, OpenAiRetryAfterIsCappedByMaxBackoff) {
  TestServer server([](httplib::Server& s, TestServer& t) {
    s.Post("/v1/chat/completions", [&t](const httplib::Request&, httplib::Response& res) {
      if (t.hits++ == 0) {
        res.status = 429;
        res.set_header("Retry-After", "30");
        return;
      }
      res.set_content(openai_body("fine"), "application/json");
    });
  });
  DriverOptions o = fast_options();
  o.max_backoff_s = 0.1;
  // Uncapped, the 30 s wait would not fit in the deadline and the second request never come.
  o.deadline_s = 20;
  auto d = driver("openai:m@" + server.url() + "/v1", o);
  LlmReply r = d->complete(request());
  EXPECT_EQ(r.status, LlmStatus::ok) << r.error;
  EXPECT_EQ(server.hits, 2);
}

TEST_F(LlmHttp, OpenAiExhaustedQuotaIsNotRetried) {
  TestServer server([](httplib::Server& s, TestServer& t) {
    s.Post("/v1/chat/completions", [&t](const httplib::Request&, httplib::Response& res) {
      ++t.hits;
      res.status = 429;
      res.set_content(R"({"error":{"message":"You exceeded your current quota",)"
                      R"("type":"insufficient_quota","code":"insufficient_quota"}})",
                      "application/json");
    });
  });
  LlmReply r = driver("openai:m@" + server.url() + "/v1")->complete(request());
  EXPECT_EQ(r.status, LlmStatus::failed);
  EXPECT_TRUE(r.infrastructure);
  EXPECT_EQ(server.hits, 1);
  EXPECT_NE(r.error.find("quota is used up"), std::string::npos) << r.error;
}

TEST_F(LlmHttp, OpenAi500ThenSuccess) {
  TestServer server([](httplib::Server& s, TestServer& t) {
    s.Post("/v1/chat/completions", [&t](const httplib::Request&, httplib::Response& res) {
      if (t.hits++ == 0) {
        res.status = 500;
        res.set_content("internal error", "text/plain");
        return;
      }
      res.set_content(openai_body("second time lucky"), "application/json");
    });
  });
  LlmReply r = driver("openai:m@" + server.url() + "/v1")->complete(request());
  ASSERT_EQ(r.status, LlmStatus::ok) << r.error;
  EXPECT_EQ(r.text, "second time lucky");
  EXPECT_EQ(r.http_attempts, 2);
}

TEST_F(LlmHttp, OpenAiReplyCutMidStreamIsAskedAgain) {
  TestServer server([](httplib::Server& s, TestServer& t) {
    s.Post("/v1/chat/completions", [&t](const httplib::Request&, httplib::Response& res) {
      if (t.hits++ == 0) {
        // Promises the whole reply, sends a part of it, and drops the connection.
        std::string full = openai_body("never seen");
        res.set_content_provider(full.size(), "application/json",
                                 [full](size_t offset, size_t, httplib::DataSink& sink) {
                                   if (offset == 0) sink.write(full.data(), full.size() / 2);
                                   return false;  // the connection is closed here
                                 });
        return;
      }
      res.set_content(openai_body("the whole reply"), "application/json");
    });
  });
  LlmReply r = driver("openai:m@" + server.url() + "/v1")->complete(request());
  ASSERT_EQ(r.status, LlmStatus::ok) << r.error;
  EXPECT_EQ(r.text, "the whole reply");
  EXPECT_EQ(r.http_attempts, 2);
  EXPECT_EQ(server.hits, 2);
}

TEST_F(LlmHttp, OpenAi500ForeverFailsAfterRetries) {
  TestServer server([](httplib::Server& s, TestServer& t) {
    s.Post("/v1/chat/completions", [&t](const httplib::Request&, httplib::Response& res) {
      ++t.hits;
      res.status = 503;
      res.set_content(R"({"error":{"message":"The engine is overloaded"}})", "application/json");
    });
  });
  DriverOptions o = fast_options();
  o.retries = 2;
  LlmReply r = driver("openai:m@" + server.url() + "/v1", o)->complete(request());
  EXPECT_EQ(r.status, LlmStatus::failed);
  EXPECT_EQ(r.http_attempts, 3);
  EXPECT_EQ(server.hits, 3);
  EXPECT_NE(r.error.find("HTTP 503"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("The engine is overloaded"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("3 attempts"), std::string::npos) << r.error;
}

TEST_F(LlmHttp, OpenAiSlowReplyTimesOutAndIsAskedAgain) {
  TestServer server([](httplib::Server& s, TestServer& t) {
    s.Post("/v1/chat/completions", [&t](const httplib::Request&, httplib::Response& res) {
      ++t.hits;
      t.nap(5);
      res.set_content(openai_body("too late"), "application/json");
    });
  });
  DriverOptions o = fast_options();
  o.retries = 1;
  LlmReply r = driver("openai:m@" + server.url() + "/v1", o)->complete(request(0.5));
  EXPECT_EQ(r.status, LlmStatus::timeout) << r.error;
  EXPECT_TRUE(r.infrastructure);
  EXPECT_EQ(r.http_attempts, 2);  // a timeout can heal: asked once more
  EXPECT_NE(r.error.find("no reply"), std::string::npos) << r.error;
}

TEST_F(LlmHttp, TheDeadlineBoundsEveryRetry) {
  TestServer server([](httplib::Server& s, TestServer& t) {
    s.Post("/v1/chat/completions", [&t](const httplib::Request&, httplib::Response& res) {
      ++t.hits;
      t.nap(5);
      res.set_content(openai_body("too late"), "application/json");
    });
  });
  DriverOptions o = fast_options();
  o.retries = 10;
  o.deadline_s = 0.5;  // shorter than one request's timeout: the first request is cut there
  LlmReply r = driver("openai:m@" + server.url() + "/v1", o)->complete(request(30));
  EXPECT_EQ(r.status, LlmStatus::timeout) << r.error;
  EXPECT_EQ(r.http_attempts, 1);
  EXPECT_NE(r.error.find("--llm-deadline"), std::string::npos) << r.error;
}

TEST_F(LlmHttp, OpenAiTruncatedKeepsText) {
  TestServer server([](httplib::Server& s, TestServer&) {
    s.Post("/v1/chat/completions", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(openai_body("```cpp\nvoid k() {", "length"), "application/json");
    });
  });
  LlmReply r = driver("openai:m@" + server.url() + "/v1")->complete(request());
  EXPECT_EQ(r.status, LlmStatus::truncated);
  EXPECT_EQ(r.text, "```cpp\nvoid k() {");
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_FALSE(r.error.empty());
}

TEST_F(LlmHttp, OpenAiReplyWithoutCodeBlockIsOk) {
  TestServer server([](httplib::Server& s, TestServer&) {
    s.Post("/v1/chat/completions", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(openai_body("I cannot help with that kernel."), "application/json");
    });
  });
  LlmReply r = driver("openai:m@" + server.url() + "/v1")->complete(request());
  EXPECT_EQ(r.status, LlmStatus::ok) << r.error;
  EXPECT_EQ(r.text, "I cannot help with that kernel.");
}

TEST_F(LlmHttp, OpenAi400SurfacesTheServerMessageWithoutRetrying) {
  TestServer server([](httplib::Server& s, TestServer& t) {
    s.Post("/v1/chat/completions", [&t](const httplib::Request&, httplib::Response& res) {
      ++t.hits;
      res.status = 400;
      res.set_content(R"({"error":{"message":"The model 'nope' does not exist","type":"x"}})",
                      "application/json");
    });
  });
  LlmReply r = driver("openai:nope@" + server.url() + "/v1")->complete(request());
  EXPECT_EQ(r.status, LlmStatus::failed);
  EXPECT_TRUE(r.infrastructure);
  EXPECT_EQ(r.http_attempts, 1);
  EXPECT_EQ(server.hits, 1);
  EXPECT_NE(r.error.find("HTTP 400"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("The model 'nope' does not exist"), std::string::npos) << r.error;
}

TEST_F(LlmHttp, OpenAiFallsBackToMaxTokens) {
  TestServer server([](httplib::Server& s, TestServer& t) {
    s.Post("/v1/chat/completions", [&t](const httplib::Request& req, httplib::Response& res) {
      t.remember(req);
      if (json::parse(req.body).contains("max_completion_tokens")) {
        res.status = 400;
        res.set_content(R"({"error":{"message":"Unrecognized request argument supplied: )"
                        R"(max_completion_tokens"}})",
                        "application/json");
        return;
      }
      res.set_content(openai_body("old server"), "application/json");
    });
  });
  auto d = driver("openai:m@" + server.url() + "/v1");
  LlmReply r = d->complete(request());
  ASSERT_EQ(r.status, LlmStatus::ok) << r.error;
  EXPECT_EQ(r.http_attempts, 2);
  json second = json::parse(server.bodies.at(1));
  EXPECT_EQ(second["max_tokens"], 1000);
  EXPECT_FALSE(second.contains("max_completion_tokens"));
  // Remembered for the next call.
  LlmReply r2 = d->complete(request());
  EXPECT_EQ(r2.status, LlmStatus::ok);
  EXPECT_EQ(r2.http_attempts, 1);
}

// A port that was free a moment ago and has nobody listening on it.
int closed_port() {
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

TEST_F(LlmHttp, RefusedConnectionIsNotRetried) {
  auto d = driver("openai:m@http://127.0.0.1:" + std::to_string(closed_port()) + "/v1");
  LlmReply r = d->complete(request());
  EXPECT_EQ(r.status, LlmStatus::failed);
  EXPECT_TRUE(r.infrastructure);
  EXPECT_EQ(r.http_attempts, 1);
  EXPECT_NE(r.error.find("cannot reach"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("nothing answers there"), std::string::npos) << r.error;
  // The check before a campaign says the same, with one request.
  Status s = preflight(*d);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.kind(), ErrorKind::environment);
  EXPECT_NE(s.message().find("nothing answers there"), std::string::npos) << s.message();
}

TEST_F(LlmHttp, UnauthorizedIsNotRetried) {
  TestServer server([](httplib::Server& s, TestServer& t) {
    auto deny = [&t](const httplib::Request&, httplib::Response& res) {
      ++t.hits;
      res.status = 401;
      res.set_content(R"({"error":{"message":"Incorrect API key provided"}})", "application/json");
    };
    s.Post("/v1/chat/completions", deny);
    s.Get("/v1/models/m", deny);
  });
  ::setenv("OPENAI_API_KEY", "sk-wrong-key-0123456789", 1);
  auto d = driver("openai:m@" + server.url() + "/v1");
  LlmReply r = d->complete(request());
  EXPECT_EQ(r.status, LlmStatus::failed);
  EXPECT_TRUE(r.infrastructure);
  EXPECT_EQ(server.hits, 1);
  EXPECT_NE(r.error.find("check the API key in $OPENAI_API_KEY"), std::string::npos) << r.error;
  auto checks = d->check();
  ASSERT_EQ(checks.size(), 2u);
  EXPECT_TRUE(checks[0].ok);   // reachable
  EXPECT_FALSE(checks[1].ok);  // authenticated
  EXPECT_EQ(checks[1].what, "authenticated");
  EXPECT_EQ(server.hits, 2);
}

TEST_F(LlmHttp, CheckFindsTheModel) {
  TestServer server([](httplib::Server& s, TestServer& t) {
    // Answers for one model (as OpenAI and Ollama do) ...
    s.Get("/v1/models/known", [&t](const httplib::Request&, httplib::Response& res) {
      ++t.hits;
      res.set_content(R"({"id":"known","object":"model"})", "application/json");
    });
    s.Get(R"(/v1/models/.+)", [&t](const httplib::Request&, httplib::Response& res) {
      ++t.hits;
      res.status = 404;
      res.set_content(R"({"error":{"message":"not found"}})", "application/json");
    });
    // ... and lists them (as vLLM and llama.cpp do, without the one-model form).
    s.Get("/v1/models", [&t](const httplib::Request&, httplib::Response& res) {
      ++t.hits;
      res.set_content(R"({"object":"list","data":[{"id":"known"},{"id":"listed"}]})",
                      "application/json");
    });
  });
  auto known = driver("openai:known@" + server.url() + "/v1")->check();
  ASSERT_EQ(known.size(), 3u);
  for (const auto& c : known) EXPECT_TRUE(c.ok) << c.what << ": " << c.detail;
  EXPECT_EQ(server.hits, 1);
  auto listed = driver("openai:listed@" + server.url() + "/v1")->check();
  ASSERT_EQ(listed.size(), 3u);
  EXPECT_TRUE(listed[2].ok) << listed[2].detail;
  EXPECT_EQ(server.hits, 3);
  auto d = driver("openai:nope@" + server.url() + "/v1");
  auto unknown = d->check();
  ASSERT_EQ(unknown.size(), 3u);
  EXPECT_EQ(unknown[2].what, "model");
  EXPECT_FALSE(unknown[2].ok);
  EXPECT_NE(unknown[2].detail.find("does not offer the model \"nope\" (it offers: known, listed)"),
            std::string::npos)
      << unknown[2].detail;
  Status s = preflight(*d);
  EXPECT_EQ(s.kind(), ErrorKind::environment);
}

// A server that accepts the connection and never answers fails the check at the check's own
// limit, and the message names that limit (not --llm-deadline, which is for completions).
TEST_F(LlmHttp, CheckOfAServerThatNeverAnswersNamesTheChecksLimit) {
  TestServer server([](httplib::Server& s, TestServer& t) {
    s.Get(R"(/v1/models.*)", [&t](const httplib::Request&, httplib::Response& res) {
      ++t.hits;
      t.nap(30);
      res.status = 500;
    });
  });
  DriverOptions o = fast_options();
  o.check_timeout_s = 0.3;
  auto checks = driver("openai:m@" + server.url() + "/v1", o)->check();
  ASSERT_FALSE(checks.empty());
  EXPECT_EQ(checks[0].what, "reachable");
  EXPECT_FALSE(checks[0].ok);
  EXPECT_NE(checks[0].detail.find("(the endpoint check's limit)"), std::string::npos)
      << checks[0].detail;
  EXPECT_EQ(checks[0].detail.find("--llm-deadline"), std::string::npos) << checks[0].detail;
}

TEST_F(LlmHttp, CheckOfAServerWithoutModelListsOnlyChecksReachability) {
  TestServer server([](httplib::Server&, TestServer&) {});  // 404 for everything
  auto checks = driver("openai:m@" + server.url() + "/v1")->check();
  ASSERT_EQ(checks.size(), 3u);
  EXPECT_TRUE(checks[2].ok);
  EXPECT_NE(checks[2].detail.find("not checked"), std::string::npos) << checks[2].detail;
}

// A reply that is not JSON, or JSON without the reply's fields, is the endpoint's failure (an
// infrastructure failure, not the candidate's), named with the driver and the body's start.
TEST_F(LlmHttp, MalformedRepliesAreInfrastructureFailures) {
  ::setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789", 1);
  struct Case {
    std::string spec_prefix, path, body, expected;
  };
  const std::vector<Case> cases = {
      {"openai:m@", "/v1/chat/completions", "<html>gateway</html>", "openai: the reply from "},
      {"openai:m@", "/v1/chat/completions", R"({"id":"x","object":"chat.completion"})",
       "has no choices"},
      {"anthropic:m@", "/v1/messages", "<html>gateway</html>", "anthropic: the reply from "},
      {"anthropic:m@", "/v1/messages", R"({"id":"x","type":"message"})", "has no content"},
  };
  for (const auto& c : cases) {
    TestServer server([&c](httplib::Server& s, TestServer&) {
      s.Post(c.path, [&c](const httplib::Request&, httplib::Response& res) {
        res.set_content(c.body, c.body[0] == '{' ? "application/json" : "text/html");
      });
    });
    const std::string base = server.url() + (c.spec_prefix == "openai:m@" ? "/v1" : "");
    LlmReply r = driver(c.spec_prefix + base)->complete(request());
    EXPECT_EQ(r.status, LlmStatus::failed) << c.body;
    EXPECT_TRUE(r.infrastructure) << c.body;
    EXPECT_NE(r.error.find(c.expected), std::string::npos) << r.error;
    EXPECT_NE(r.error.find(c.body[0] == '{' ? "\"id\"" : "gateway"), std::string::npos) << r.error;
    if (c.body[0] == '<') {
      EXPECT_NE(r.error.find("is not JSON"), std::string::npos) << r.error;
    }
  }
}

// ---- Anthropic -------------------------------------------------------------------------------

TEST_F(LlmHttp, AnthropicSuccessParsesTextAndSendsHeaders) {
  ::setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789", 1);
  TestServer server([](httplib::Server& s, TestServer& t) {
    s.Post("/v1/messages", [&t](const httplib::Request& req, httplib::Response& res) {
      t.remember(req);
      res.set_content(anthropic_body(kCode), "application/json");
    });
  });
  auto d = driver("anthropic:claude-test@" + server.url());
  LlmReply r = d->complete(request());
  ASSERT_EQ(r.status, LlmStatus::ok) << r.error;
  EXPECT_EQ(r.text, kCode);  // text blocks joined, other blocks ignored
  EXPECT_EQ(r.driver, "anthropic");
  EXPECT_EQ(r.model, "claude-test-1");
  EXPECT_EQ(r.producer, "anthropic:claude-test-1");
  EXPECT_EQ(r.finish_reason, "end_turn");
  EXPECT_EQ(r.prompt_tokens, 21);
  EXPECT_EQ(r.completion_tokens, 9);
  EXPECT_EQ(r.http_attempts, 1);
  EXPECT_EQ(server.headers[0]["x-api-key"], "sk-ant-test-0123456789");
  EXPECT_EQ(server.headers[0]["anthropic-version"], "2023-06-01");
  json sent = json::parse(server.bodies[0]);
  EXPECT_EQ(sent["model"], "claude-test");
  EXPECT_EQ(sent["max_tokens"], 1000);
  EXPECT_EQ(sent["system"], "You are a GPU performance engineer.");
  ASSERT_EQ(sent["messages"].size(), 1u);
  EXPECT_EQ(sent["messages"][0]["role"], "user");
  EXPECT_EQ(sent["messages"][0]["content"], "Tile the loop.");
}

TEST_F(LlmHttp, AnthropicOfficialEndpointWithoutKeyIsAnError) {
  auto d = make_driver("anthropic:claude-x", fast_options());
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.error().find("ANTHROPIC_API_KEY"), std::string::npos) << d.error();
}

TEST_F(LlmHttp, Anthropic429HonoursRetryAfter) {
  TestServer server([](httplib::Server& s, TestServer& t) {
    s.Post("/v1/messages", [&t](const httplib::Request&, httplib::Response& res) {
      if (t.hits++ == 0) {
        res.status = 429;
        res.set_header("retry-after", "1");
        res.set_content(R"({"type":"error","error":{"type":"rate_limit_error","message":"slow"}})",
                        "application/json");
        return;
      }
      res.set_content(anthropic_body("hello world"), "application/json");
    });
  });
  LlmReply r = driver("anthropic:c@" + server.url())->complete(request());
  ASSERT_EQ(r.status, LlmStatus::ok) << r.error;
  EXPECT_EQ(r.text, "hello world");
  EXPECT_EQ(r.http_attempts, 2);
}

TEST_F(LlmHttp, AnthropicCheckResolvesTheModel) {
  TestServer server([](httplib::Server& s, TestServer& t) {
    s.Get("/v1/models/claude-x", [&t](const httplib::Request& req, httplib::Response& res) {
      t.remember(req);
      res.set_content(R"({"type":"model","id":"claude-x-20250101"})", "application/json");
    });
  });
  ::setenv("ANTHROPIC_API_KEY", "sk-ant-check-0123456789", 1);
  auto checks = driver("anthropic:claude-x@" + server.url())->check();
  ASSERT_EQ(checks.size(), 3u);
  for (const auto& c : checks) EXPECT_TRUE(c.ok) << c.detail;
  ASSERT_EQ(server.headers.size(), 1u);
  EXPECT_EQ(server.headers[0]["x-api-key"], "sk-ant-check-0123456789");
  EXPECT_EQ(server.headers[0]["anthropic-version"], "2023-06-01");
}

TEST_F(LlmHttp, Anthropic500ThenSuccessAnd500Forever) {
  TestServer server([](httplib::Server& s, TestServer& t) {
    s.Post("/v1/messages", [&t](const httplib::Request&, httplib::Response& res) {
      int n = t.hits++;
      if (n == 0 || n >= 2) {
        res.status = 529;
        res.set_content(
            R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})",
            "application/json");
        return;
      }
      res.set_content(anthropic_body("recovered"), "application/json");
    });
  });
  DriverOptions o = fast_options();
  o.retries = 2;
  auto d = driver("anthropic:c@" + server.url() + "/v1", o);  // base given with /v1
  LlmReply r = d->complete(request());
  ASSERT_EQ(r.status, LlmStatus::ok) << r.error;
  EXPECT_EQ(r.text, "recovered");
  EXPECT_EQ(r.http_attempts, 2);
  LlmReply r2 = d->complete(request());
  EXPECT_EQ(r2.status, LlmStatus::failed);
  EXPECT_EQ(r2.http_attempts, 3);
  EXPECT_NE(r2.error.find("Overloaded"), std::string::npos) << r2.error;
}

TEST_F(LlmHttp, AnthropicTruncatedKeepsText) {
  TestServer server([](httplib::Server& s, TestServer&) {
    s.Post("/v1/messages", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(anthropic_body("```cpp\nint partial", "max_tokens"), "application/json");
    });
  });
  LlmReply r = driver("anthropic:c@" + server.url())->complete(request());
  EXPECT_EQ(r.status, LlmStatus::truncated);
  EXPECT_EQ(r.text, "```cpp\nint partial");
  EXPECT_EQ(r.finish_reason, "max_tokens");
}

TEST_F(LlmHttp, AnthropicTimeoutAndClientError) {
  TestServer server([](httplib::Server& s, TestServer& t) {
    s.Post("/v1/messages", [&t](const httplib::Request& req, httplib::Response& res) {
      if (json::parse(req.body)["model"] == "slow") {
        t.nap(5);
        res.set_content(anthropic_body("too late"), "application/json");
        return;
      }
      res.status = 404;
      res.set_content(
          R"({"type":"error","error":{"type":"not_found_error","message":"model: bad"}})",
          "application/json");
    });
  });
  DriverOptions o = fast_options();
  o.retries = 0;
  LlmReply r = driver("anthropic:slow@" + server.url(), o)->complete(request(0.5));
  EXPECT_EQ(r.status, LlmStatus::timeout) << r.error;
  EXPECT_EQ(r.http_attempts, 1);
  LlmReply r2 = driver("anthropic:bad@" + server.url())->complete(request());
  EXPECT_EQ(r2.status, LlmStatus::failed);
  EXPECT_EQ(r2.http_attempts, 1);
  EXPECT_NE(r2.error.find("model: bad"), std::string::npos) << r2.error;
}

// ---- keys never leak -------------------------------------------------------------------------

std::string read_all(const fs::path& dir) {
  std::string all;
  for (const auto& de : fs::recursive_directory_iterator(dir))
    if (de.is_regular_file()) all += *read_file(de.path());
  return all;
}

TEST_F(LlmHttp, KeysNeverAppearInErrorsDescribeOrRecordings) {
  const std::string openai_key = "sk-leaktest-OPENAI-0123456789abcdef";
  const std::string anthropic_key = "sk-ant-leaktest-ABCDEF987654321";
  ::setenv("OPENAI_API_KEY", openai_key.c_str(), 1);
  ::setenv("ANTHROPIC_API_KEY", anthropic_key.c_str(), 1);
  // A hostile server that echoes the credentials it received.
  TestServer server([](httplib::Server& s, TestServer&) {
    s.Post("/v1/chat/completions", [](const httplib::Request& req, httplib::Response& res) {
      res.status = 401;
      json e = {
          {"error",
           {{"message", "Incorrect API key provided: " + req.get_header_value("Authorization")}}}};
      res.set_content(e.dump(), "application/json");
    });
    s.Post("/v1/messages", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(anthropic_body("key is " + req.get_header_value("x-api-key"), "max_tokens"),
                      "application/json");
    });
  });
  auto tmp = make_temp_dir("peak-llm-leak-");
  ASSERT_TRUE(tmp.is_ok());
  fs::path rec = *tmp / "rec";

  auto openai = driver("openai:m@" + server.url() + "/v1");
  auto recorded = make_recording_driver(std::move(openai), rec, "leak test");
  LlmReply r = recorded->complete(request());
  EXPECT_EQ(r.status, LlmStatus::failed);
  EXPECT_EQ(r.error.find(openai_key), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("[redacted]"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("OPENAI_API_KEY"), std::string::npos) << r.error;  // the hint
  EXPECT_EQ(recorded->describe().find(openai_key), std::string::npos);

  auto anthropic = make_recording_driver(driver("anthropic:c@" + server.url()), rec);
  LlmReply r2 = anthropic->complete(request());
  EXPECT_EQ(r2.status, LlmStatus::truncated);
  EXPECT_EQ(r2.text.find(anthropic_key), std::string::npos) << r2.text;
  EXPECT_EQ(anthropic->describe().find(anthropic_key), std::string::npos);

  // Credentials written into the URL are not shown either.
  auto with_userinfo = driver("openai:m@http://user:" + openai_key + "@127.0.0.1:9/v1");
  EXPECT_EQ(with_userinfo->describe(), "openai:m@http://127.0.0.1:9/v1");

  // A custom key variable is redacted too.
  DriverOptions o = fast_options();
  o.key_env = "PEAK_TEST_KEY";
  const std::string custom = "custom-secret-key-424242";
  ::setenv("PEAK_TEST_KEY", custom.c_str(), 1);
  auto custom_driver = make_recording_driver(driver("openai:m@" + server.url() + "/v1", o), rec);
  LlmReply r3 = custom_driver->complete(request());
  EXPECT_EQ(r3.error.find(custom), std::string::npos) << r3.error;

  std::string files = read_all(rec);
  EXPECT_NE(files.find("Incorrect API key"), std::string::npos);  // the exchanges are there
  EXPECT_EQ(files.find(openai_key), std::string::npos);
  EXPECT_EQ(files.find(anthropic_key), std::string::npos);
  EXPECT_EQ(files.find(custom), std::string::npos);
  fs::remove_all(*tmp);
}

}  // namespace
}  // namespace peak
