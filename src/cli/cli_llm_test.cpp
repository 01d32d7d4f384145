// First contact with a model: bad arguments and unreachable endpoints fail before any device
// work, with the right exit code; what can heal is retried and counted as one attempt;
// `peak doctor --llm` checks an endpoint.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/testing.h"
#include "util/fs.h"
#include "util/process.h"

namespace peak {
namespace {

using namespace peak::testing;

// Runs a copy of peak whose runner, next to it, records that it was started before it runs the
// real one: peak looks for its runner beside its own executable first.
class CliBeforeDevice : public Cli {
 protected:
  void SetUp() override {
    Cli::SetUp();
    fs::path bin = tmp_ / "bin";
    fs::create_directories(bin);
    fs::copy_file(fs::path(PEAK_BINARY_DIR) / "peak", bin / "peak");
    marker_ = tmp_ / "runner-started";
    ASSERT_TRUE(write_file(bin / "peak-runner",
                           "#!/bin/sh\necho started >> " + marker_.string() + "\nexec " +
                               (fs::path(PEAK_BINARY_DIR) / "peak-runner").string() + " \"$@\"\n"));
    fs::permissions(bin / "peak-runner",
                    fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    peak_binary_ = (bin / "peak").string();
    // The wrapper writes its marker outside any scratch folder: the sandbox would refuse it.
    ::setenv("PEAK_NO_SANDBOX", "1", 1);
  }
  void TearDown() override {
    ::unsetenv("PEAK_NO_SANDBOX");
    Cli::TearDown();
  }
  bool runner_started() { return fs::exists(marker_); }
  fs::path marker_;
};

TEST_F(CliBeforeDevice, ExitCodesComeBeforeAnyDeviceWork) {
  fs::path ws = scale_workspace("ws");
  auto unauthorized = std::make_unique<TestServer>([](httplib::Server& s, TestServer& t) {
    s.Get(R"(/v1/models.*)", [&t](const httplib::Request&, httplib::Response& res) {
      ++t.gets;
      res.status = 401;
      res.set_content(R"({"error":{"message":"Incorrect API key provided"}})", "application/json");
    });
    s.Post("/v1/chat/completions", [&t](const httplib::Request&, httplib::Response& res) {
      ++t.posts;
      res.status = 401;
    });
  });
  auto server = openai_server(added_reply());
  std::string closed = "http://127.0.0.1:" + std::to_string(closed_port()) + "/v1";
  ASSERT_TRUE(write_file(tmp_ / "seq.toml",
                         "format = 1\nname = \"s\"\n[[step]]\ntransformation = \"nope\"\n"));
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"apply", "add-twice", "--llm", "foo:bar"}, 2, "invalid LLM driver \"foo:bar\""},
      {{"apply", "add-twice", "--llm", "openai:gpt-5"}, 4, "set OPENAI_API_KEY"},
      {{"apply", "add-twice", "--llm", "openai:m@" + closed}, 4, "nothing answers there"},
      {{"apply", "add-twice", "--llm", "openai:m@" + unauthorized->url() + "/v1"},
       4,
       "check the API key in $OPENAI_API_KEY"},
      {{"apply", "add-twice", "--llm", "openai:other@" + server->url() + "/v1"},
       4,
       "does not offer the model \"other\""},
      {{"apply", "add-twice", "--llm", "command:'no-such-program-xyz'"}, 4, "is not found"},
      {{"apply", "add-tvice", "--llm", "manual"}, 2, "did you mean"},
      {{"apply", "add-twice", "--tune", "BLOCK=x"}, 2, "not an integer"},
      {{"apply", "add-twice", "--attempts", "0"}, 2, "--attempts"},
      {{"apply", "add-twice", "--prompt-device", "/nonexistent.json"}, 2, "--prompt-device"},
      {{"run", (tmp_ / "seq.toml").string(), "--llm", "manual"}, 2, "nope"},
      {{"run", "no-such-sequence"}, 2, "no-such-sequence"},
      {{"validate", "--tune", "BLOCK"}, 2, "NAME=V1,V2"},
      {{"tune", "--small", "--full"}, 2, "exclude each other"},
      {{"commit", "-m", "nothing"}, 2, "nothing to commit"},
      {{"checkout", "seed"}, 2, "--detach"},
      {{"show", "99"}, 2, "no checkpoint 99"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args[0] + " " + c.args[1] + " " + (c.args.size() > 3 ? c.args[3] : ""));
    Out o = peak(c.args, ws);
    EXPECT_EQ(o.code, c.code) << o.out << o.err;
    EXPECT_NE(o.err.find(c.says), std::string::npos) << o.err;
    EXPECT_FALSE(runner_started());
  }
  EXPECT_EQ(unauthorized->gets, 1);   // one check request, not retried
  EXPECT_EQ(unauthorized->posts, 0);  // the model was never asked
  EXPECT_EQ(server->posts, 0);
  // Local changes are refused before any device work too.
  ASSERT_TRUE(write_file(ws / "kernel.hlsl", std::string(kScaleSource) + "// edit\n"));
  Out dirty = peak({"apply", "add-twice", "--llm", "openai:m@" + server->url() + "/v1"}, ws);
  EXPECT_EQ(dirty.code, 2) << dirty.err;
  EXPECT_FALSE(runner_started());
  EXPECT_EQ(server->posts, 0);
  // The marker does tell: a command that evaluates starts the runner.
  ASSERT_TRUE(write_file(ws / "kernel.hlsl", kScaleSource));
  EXPECT_EQ(peak({"-q", "validate", "--budget", "1"}, ws).code, 0);
  EXPECT_TRUE(runner_started());
}

// What can heal is retried within one attempt; the step passes with the transformation charged
// one attempt, and the requests are counted.
TEST_F(Cli, EndpointFailuresThatHealAreRetriedWithinOneAttempt) {
  struct Case {
    const char* name;
    Failure failure;
    int posts;  // requests for the completion
  };
  const std::vector<Case> cases = {
      {"429 with Retry-After, then 200",
       [](int n, httplib::Response& res) {
         if (n > 0) return false;
         res.status = 429;
         res.set_header("Retry-After", "1");
         res.set_content(R"({"error":{"message":"Rate limit reached"}})", "application/json");
         return true;
       },
       2},
      {"500 twice, then 200",
       [](int n, httplib::Response& res) {
         if (n > 1) return false;
         res.status = 500;
         res.set_content(R"({"error":{"message":"internal error"}})", "application/json");
         return true;
       },
       3},
      {"a reply cut mid-stream, then 200",
       [](int n, httplib::Response& res) {
         if (n > 0) return false;
         std::string full = openai_body(added_reply());
         res.set_content_provider(full.size(), "application/json",
                                  [full](size_t offset, size_t, httplib::DataSink& sink) {
                                    if (offset == 0) sink.write(full.data(), full.size() / 2);
                                    return false;  // the connection drops here
                                  });
         return true;
       },
       2},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    fs::path ws = scale_workspace(std::string("ws-") + std::to_string(c.posts) + c.name[0]);
    auto server = openai_server(added_reply(), c.failure);
    Out o = peak({"--json", "-q", "apply", "add-twice", "--llm",
                  "openai:m@" + server->url() + "/v1", "--budget", "1"},
                 ws);
    ASSERT_EQ(o.code, 0) << o.out << o.err;
    json j = json::parse(o.out);
    EXPECT_EQ(j["disposition"], "passed");
    EXPECT_EQ(j["attempts"], 1);
    EXPECT_EQ(server->posts, c.posts);
    EXPECT_EQ(server->gets, 1);  // the check before the campaign
    json rep = json::parse(peak({"report", "--format", "json"}, ws).out);
    EXPECT_TRUE(rep["failures"].empty()) << rep.dump();
    EXPECT_TRUE(rep["infrastructure_failures"].empty()) << rep.dump();
  }
}

// An endpoint lost during a campaign: not charged, exit 4, resumable; once it is back the same
// command goes on in the same workflow.
TEST_F(Cli, AnEndpointLostMidCampaignIsNotChargedAndResumes) {
  fs::path ws = scale_workspace("ws");
  std::atomic<bool> down{true};
  auto server = openai_server(added_reply(), [&down](int, httplib::Response& res) {
    if (!down) return false;
    res.status = 503;
    res.set_content(R"({"error":{"message":"overloaded"}})", "application/json");
    return true;
  });
  std::vector<std::string> apply = {
      "--json",   "-q", "apply",          "add-twice", "--llm", "openai:m@" + server->url() + "/v1",
      "--budget", "1",  "--llm-deadline", "3"};
  Out lost = peak(apply, ws);
  EXPECT_EQ(lost.code, 4) << lost.out << lost.err;
  json l = json::parse(lost.out);
  EXPECT_NE(l["message"].get<std::string>().find("Nothing was charged"), std::string::npos);
  EXPECT_EQ(status(ws)["workflows"][0]["status"], "interrupted");
  down = false;
  Out back = peak(apply, ws);
  ASSERT_EQ(back.code, 0) << back.out << back.err;
  json b = json::parse(back.out);
  EXPECT_EQ(b["workflow"], l["workflow"]);
  EXPECT_EQ(b["attempts"], 1);
  Out rep = peak({"report"}, ws);
  EXPECT_NE(rep.out.find("infrastructure failures (1; not charged"), std::string::npos) << rep.out;
  EXPECT_EQ(rep.out.find("failed attempts"), std::string::npos) << rep.out;
}

TEST_F(Cli, DoctorChecksAnEndpoint) {
  auto good = openai_server(added_reply());
  Out ok = peak({"--json", "doctor", "--llm", "openai:m@" + good->url() + "/v1"});
  ASSERT_EQ(ok.code, 0) << ok.out << ok.err;
  json j = json::parse(ok.out);
  std::vector<std::string> what;
  for (const auto& c : j["checks"]) {
    what.push_back(c["what"]);
    EXPECT_TRUE(c["ok"].get<bool>()) << c.dump();
  }
  EXPECT_EQ(what, (std::vector<std::string>{"LLM driver", "reachable", "authenticated", "model",
                                            "completion", "reply format"}));
  EXPECT_NE(j["checks"][4]["detail"].get<std::string>().find("12 prompt + 7 completion tokens"),
            std::string::npos)
      << j.dump();
  EXPECT_EQ(good->posts, 1);
  // A model that does not keep the format.
  auto chatty = openai_server("Here:\n```c\nx = 1;\n```\nor\n```c\nx=1;\n```\n");
  Out two = peak({"doctor", "--llm", "openai:m@" + chatty->url() + "/v1"});
  EXPECT_EQ(two.code, 4) << two.out;
  EXPECT_NE(two.out.find("reply format"), std::string::npos) << two.out;
  EXPECT_NE(two.out.find("no_code"), std::string::npos) << two.out;
  // Nothing there, a malformed spec, a shipped recording.
  Out refused = peak(
      {"doctor", "--llm", "openai:m@http://127.0.0.1:" + std::to_string(closed_port()) + "/v1"});
  EXPECT_EQ(refused.code, 4);
  EXPECT_NE(refused.out.find("nothing answers there"), std::string::npos) << refused.out;
  EXPECT_EQ(peak({"doctor", "--llm", "foo:bar"}).code, 2);
  Out replay = peak({"doctor", "--llm", "replay:hlsl-fp32"});
  EXPECT_EQ(replay.code, 0) << replay.out;
  EXPECT_NE(replay.out.find("usable recorded replies"), std::string::npos) << replay.out;
}

}  // namespace
}  // namespace peak
