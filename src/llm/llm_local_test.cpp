// Spec parsing and the drivers that need no network: command, manual, replay, recording.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <thread>

#include <nlohmann/json.hpp>

#include "llm/llm.h"
#include "llm/llm_internal.h"
#include "util/fs.h"

namespace peak {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

LlmRequest request(const std::string& key, const std::string& user = "Tile the loop.") {
  LlmRequest r;
  r.system = "You are a GPU performance engineer.";
  r.user = user;
  r.key = key;
  r.step_label = "tb-tiling pass 2/6 (device)";
  r.timeout_s = 10;
  return r;
}

const std::string kKeyA = "3fa2c1d0e5b6a7980011223344556677889900aabbccddeeff00112233445566";
const std::string kKeyB = "bbbbbbbbbbbbbbbb0011223344556677889900aabbccddeeff00112233445566";
const std::string kKeyC = "cccccccccccccccc0011223344556677889900aabbccddeeff00112233445566";

class TempDir {
 public:
  TempDir() : path_(*make_temp_dir("peak-llm-test-")) {}
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::unique_ptr<LlmDriver> must(Result<std::unique_ptr<LlmDriver>> d) {
  EXPECT_TRUE(d.is_ok()) << (d ? "" : d.error());
  return d ? std::move(d).value() : nullptr;
}

// ---- spec strings ----------------------------------------------------------------------------

TEST(LlmSpec, BadSpecsListTheValidForms) {
  for (const char* spec :
       {"gpt-5", "openai", "openai:", "openai:m@ftp://x", "command:", "replay:", "manual:x", ""}) {
    auto d = make_driver(spec, DriverOptions{});
    ASSERT_FALSE(d.is_ok()) << spec;
    EXPECT_NE(d.error().find("valid forms"), std::string::npos) << d.error();
    EXPECT_NE(d.error().find("openai:MODEL@http://host:port/v1"), std::string::npos) << d.error();
    EXPECT_NE(d.error().find("replay:DIR"), std::string::npos) << d.error();
  }
}

TEST(LlmSpec, ToString) {
  EXPECT_EQ(to_string(LlmStatus::ok), "ok");
  EXPECT_EQ(to_string(LlmStatus::truncated), "truncated");
  EXPECT_EQ(to_string(LlmStatus::miss), "miss");
  EXPECT_EQ(to_string(LlmStatus::pending), "pending");
}

TEST(LlmSpec, ReplayOfMissingDirectoryIsAnError) {
  auto d = make_driver("replay:/nonexistent/peak-recordings", DriverOptions{});
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.error().find("/nonexistent/peak-recordings"), std::string::npos) << d.error();
  EXPECT_EQ(d.error_kind(), ErrorKind::input);  // a bad argument: exit 2
}

TEST(LlmHelpers, RetryAfterUrlsAndLabels) {
  using namespace llm_detail;
  EXPECT_DOUBLE_EQ(parse_retry_after("7"), 7.0);
  EXPECT_DOUBLE_EQ(parse_retry_after(" 0 "), 0.0);
  EXPECT_LT(parse_retry_after("soon"), 0);
  EXPECT_LT(parse_retry_after(""), 0);
  EXPECT_DOUBLE_EQ(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), 0.0);  // in the past
  EXPECT_EQ(display_url("https://u:secret@host:8080/v1?key=abc"), "https://host:8080/v1");
  EXPECT_EQ(url_host("http://LOCALHOST:11434/v1"), "localhost");
  EXPECT_EQ(url_host("http://[::1]:8000/v1"), "::1");
  EXPECT_TRUE(is_loopback_host("127.0.0.1"));
  EXPECT_FALSE(is_loopback_host("api.openai.com"));
  EXPECT_EQ(step_phrase("tb-tiling pass 2/6 (device)"), "tb-tiling pass 2/6, device region");
  EXPECT_EQ(step_phrase("free text"), "free text");
  register_secret("registered-secret-value");
  EXPECT_EQ(redact("a registered-secret-value b"), "a [redacted] b");
  EXPECT_EQ(redact("short"), "short");
}

// ---- command ---------------------------------------------------------------------------------

TEST(LlmCommand, PromptOnStdinReplyOnStdout) {
  auto d = must(
      make_driver("command:'cat; printf \"\\nKEY=%s STEP=%s\" \"$PEAK_PROMPT_KEY\" \"$PEAK_STEP\"'",
                  DriverOptions{}));
  LlmReply r = d->complete(request(kKeyA));
  ASSERT_EQ(r.status, LlmStatus::ok) << r.error;
  EXPECT_EQ(r.text, "You are a GPU performance engineer.\n---\nTile the loop.\nKEY=" + kKeyA +
                        " STEP=tb-tiling pass 2/6 (device)");
  EXPECT_EQ(r.driver, "command");
  EXPECT_EQ(d->describe().rfind("command:", 0), 0u);
}

TEST(LlmCommand, ProducerFromOptions) {
  DriverOptions o;
  o.producer = "agent: test-bot";
  auto d = must(make_driver("command:echo hi", o));
  LlmReply r = d->complete(request(kKeyA));
  ASSERT_EQ(r.status, LlmStatus::ok) << r.error;
  EXPECT_EQ(r.text, "hi\n");
  EXPECT_EQ(r.producer, "agent: test-bot");
}

TEST(LlmCommand, FailingCommandReportsExitCodeAndStderr) {
  auto d = must(
      make_driver("command:'echo partial; echo model not loaded >&2; exit 3'", DriverOptions{}));
  LlmReply r = d->complete(request(kKeyA));
  EXPECT_EQ(r.status, LlmStatus::failed);
  EXPECT_TRUE(r.infrastructure);
  EXPECT_NE(r.error.find("exit code 3"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("model not loaded"), std::string::npos) << r.error;
}

TEST(LlmCommand, EmptyOutputFails) {
  auto d = must(make_driver("command:true", DriverOptions{}));
  LlmReply r = d->complete(request(kKeyA));
  EXPECT_EQ(r.status, LlmStatus::failed);
  EXPECT_NE(r.error.find("nothing"), std::string::npos) << r.error;
}

TEST(LlmCommand, Timeout) {
  auto d = must(make_driver("command:'sleep 5; echo late'", DriverOptions{}));
  LlmRequest req = request(kKeyA);
  req.timeout_s = 0.5;
  LlmReply r = d->complete(req);
  EXPECT_EQ(r.status, LlmStatus::timeout) << r.error;
  EXPECT_TRUE(r.infrastructure);  // a hung program is not the model's mistake
}

TEST(LlmCommand, CheckFindsTheProgram) {
  auto ok = must(make_driver("command:'cat -'", DriverOptions{}));
  auto checks = ok->check();
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_TRUE(checks[0].ok) << checks[0].detail;
  EXPECT_TRUE(preflight(*ok));
  auto missing = must(make_driver("command:'no-such-program-xyz --flag'", DriverOptions{}));
  Status s = preflight(*missing);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.kind(), ErrorKind::environment);
  EXPECT_NE(s.message().find("`no-such-program-xyz` is not found"), std::string::npos)
      << s.message();
}

TEST(LlmCommand, KeyInStderrIsRedacted) {
  const char* old = std::getenv("OPENAI_API_KEY");
  std::string saved = old ? old : "";
  ::setenv("OPENAI_API_KEY", "sk-command-leak-1234567890", 1);
  auto d = must(make_driver("command:'echo \"$OPENAI_API_KEY\" >&2; exit 1'", DriverOptions{}));
  LlmReply r = d->complete(request(kKeyA));
  EXPECT_EQ(r.status, LlmStatus::failed);
  EXPECT_EQ(r.error.find("sk-command-leak-1234567890"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("[redacted]"), std::string::npos) << r.error;
  if (old)
    ::setenv("OPENAI_API_KEY", saved.c_str(), 1);
  else
    ::unsetenv("OPENAI_API_KEY");
}

// ---- manual ----------------------------------------------------------------------------------

TEST(LlmManual, PendingRespondThenServed) {
  TempDir ws;
  DriverOptions o;
  o.workspace = ws.path();
  auto d = must(make_driver("manual", o));
  EXPECT_EQ(d->describe(), "manual");

  EXPECT_TRUE(preflight(*d));  // the prompt folder can be written
  LlmReply r = d->complete(request(kKeyA));
  ASSERT_EQ(r.status, LlmStatus::pending);
  EXPECT_EQ(r.pending_id, "0001");
  EXPECT_NE(r.pending_path.find("0001.prompt.md"), std::string::npos) << r.pending_path;
  fs::path dir = ws.path() / ".peak" / "manual";
  EXPECT_NE(r.error.find("0001.prompt.md (tb-tiling pass 2/6, device region)"), std::string::npos)
      << r.error;
  EXPECT_NE(r.error.find("run `peak respond 0001 FILE`, then run the same command again"),
            std::string::npos)
      << r.error;
  ASSERT_TRUE(fs::exists(dir / "0001.prompt.md"));
  std::string prompt = *read_file(dir / "0001.prompt.md");
  EXPECT_NE(prompt.find("You are a GPU performance engineer."), std::string::npos);
  EXPECT_NE(prompt.find("Tile the loop."), std::string::npos);
  json meta = json::parse(*read_file(dir / "0001.json"));
  EXPECT_EQ(meta["format"], 1);
  EXPECT_EQ(meta["id"], "0001");
  EXPECT_EQ(meta["key"], kKeyA);
  EXPECT_EQ(meta["step_label"], "tb-tiling pass 2/6 (device)");
  EXPECT_EQ(meta["answered"], false);
  EXPECT_TRUE(meta.contains("created_at"));

  // The same prompt again: same id. Another prompt: the next id.
  EXPECT_NE(d->complete(request(kKeyA)).error.find("peak respond 0001 FILE"), std::string::npos);
  LlmReply other = d->complete(request(kKeyB, "Another pass."));
  EXPECT_EQ(other.status, LlmStatus::pending);
  EXPECT_NE(other.error.find("peak respond 0002 FILE"), std::string::npos) << other.error;

  auto listed = list_manual(ws.path());
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].id, "0001");
  EXPECT_FALSE(listed[0].answered);
  EXPECT_EQ(listed[0].prompt_path, dir / "0001.prompt.md");

  // Wrong id: the pending ones are listed.
  Status bad = respond_manual(ws.path(), "0042", "```cpp\n```", "human: ann");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("0042"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("0001 (tb-tiling pass 2/6 (device))"), std::string::npos)
      << bad.message();
  EXPECT_NE(bad.message().find("0002"), std::string::npos) << bad.message();
  EXPECT_FALSE(respond_manual(ws.path(), "1", "   \n", "human: ann").is_ok());  // empty reply

  const std::string answer = "```cpp\n__global__ void k() {}\n```\n";
  ASSERT_TRUE(respond_manual(ws.path(), "1", answer, "human: ann").is_ok());  // "1" == "0001"
  json answered = json::parse(*read_file(dir / "0001.json"));
  EXPECT_EQ(answered["answered"], true);
  EXPECT_EQ(answered["producer"], "human: ann");
  EXPECT_TRUE(answered.contains("answered_at"));
  EXPECT_EQ(answered["key"], kKeyA);

  // A fresh driver (a new peak process) serves the reply.
  auto again = must(make_driver("manual", o));
  LlmReply served = again->complete(request(kKeyA));
  ASSERT_EQ(served.status, LlmStatus::ok) << served.error;
  EXPECT_EQ(served.text, answer);
  EXPECT_EQ(served.driver, "manual");
  EXPECT_EQ(served.producer, "human: ann");
  EXPECT_TRUE(list_manual(ws.path())[0].answered);
  EXPECT_FALSE(list_manual(ws.path())[1].answered);
  // Still pending: the other one.
  EXPECT_EQ(again->complete(request(kKeyB, "Another pass.")).status, LlmStatus::pending);

  // The same prompt asked again in the same run (a retry) is a new prompt, 0003.
  LlmReply retry = again->complete(request(kKeyA));
  ASSERT_EQ(retry.status, LlmStatus::pending);
  EXPECT_NE(retry.error.find("peak respond 0003 FILE"), std::string::npos) << retry.error;
  ASSERT_TRUE(respond_manual(ws.path(), "0003", "second answer", "human: ann").is_ok());
  EXPECT_EQ(again->complete(request(kKeyA)).text, "second answer");
  // The next run serves both answers in order.
  auto third = must(make_driver("manual", o));
  EXPECT_EQ(third->complete(request(kKeyA)).text, answer);
  EXPECT_EQ(third->complete(request(kKeyA)).text, "second answer");
  EXPECT_EQ(third->complete(request(kKeyA)).status, LlmStatus::pending);  // 0004
  EXPECT_EQ(list_manual(ws.path()).size(), 4u);
}

TEST(LlmManual, WaitModePollsUntilTheReplyArrives) {
  TempDir ws;
  DriverOptions o;
  o.workspace = ws.path();
  o.manual_wait = true;
  o.manual_poll_s = 0.05;
  auto d = must(make_driver("manual", o));
  std::thread responder([&] {
    fs::path json_path = ws.path() / ".peak" / "manual" / "0001.json";
    auto t0 = Clock::now();
    while (!fs::exists(json_path) && since(t0) < 5)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_TRUE(respond_manual(ws.path(), "0001", "the reply", "agent: helper").is_ok());
  });
  LlmReply r = d->complete(request(kKeyA));
  responder.join();
  ASSERT_EQ(r.status, LlmStatus::ok) << r.error;
  EXPECT_EQ(r.text, "the reply");
  EXPECT_EQ(r.producer, "agent: helper");

  LlmRequest req = request(kKeyB);
  req.timeout_s = 0.3;
  LlmReply late = d->complete(req);
  EXPECT_EQ(late.status, LlmStatus::timeout);
  EXPECT_TRUE(late.infrastructure);
  EXPECT_NE(late.error.find("0002"), std::string::npos) << late.error;
}

// ---- replay ----------------------------------------------------------------------------------

void write_recording(const fs::path& dir, int seq, const std::string& key, const std::string& reply,
                     const std::string& status = "ok", const std::string& user = "u",
                     const std::string& label = "tb-tiling pass 2/6 (device)") {
  json j = {{"format", 1},
            {"seq", seq},
            {"key", key},
            {"step_label", label},
            {"system", "s"},
            {"user", user},
            {"reply", reply},
            {"status", status},
            {"error", status == "ok" ? "" : "it went wrong"},
            {"driver", "openai"},
            {"model", "gpt-rec"},
            {"producer", "openai:gpt-rec"},
            {"finish_reason", status == "truncated" ? "length" : "stop"},
            {"prompt_tokens", 100},
            {"completion_tokens", 50},
            {"latency_s", 3.5},
            {"recorded_at", "2025-01-01T00:00:00Z"},
            {"note", ""}};
  char name[64];
  std::snprintf(name, sizeof name, "%04d-%s.json", seq, key.substr(0, 16).c_str());
  ASSERT_TRUE(write_file(dir / name, j.dump(2)).is_ok());
}

TEST(LlmReplay, HitMissAndOrder) {
  TempDir dir;
  write_recording(dir.path(), 1, kKeyA, "only A");
  write_recording(dir.path(), 4, kKeyB, "B second");  // seq order, not file order
  write_recording(dir.path(), 2, kKeyB, "B timed out", "timeout");
  write_recording(dir.path(), 3, kKeyB, "B first");
  write_recording(dir.path(), 5, kKeyC, "C cut", "truncated");
  ASSERT_TRUE(write_file(dir.path() / "README.md", "campaign notes").is_ok());

  auto d = must(make_driver("replay:" + dir.path().string(), DriverOptions{}));
  LlmReply a = d->complete(request(kKeyA));
  ASSERT_EQ(a.status, LlmStatus::ok) << a.error;
  EXPECT_EQ(a.text, "only A");
  EXPECT_EQ(a.driver, "replay");
  EXPECT_EQ(a.producer, "openai:gpt-rec");
  EXPECT_EQ(a.model, "gpt-rec");
  EXPECT_EQ(a.prompt_tokens, 100);
  EXPECT_EQ(a.completion_tokens, 50);

  EXPECT_EQ(d->complete(request(kKeyB)).text, "B first");
  EXPECT_EQ(d->complete(request(kKeyB)).text, "B second");
  LlmReply exhausted = d->complete(request(kKeyB));
  EXPECT_EQ(exhausted.status, LlmStatus::miss);
  EXPECT_NE(exhausted.error.find("already used"), std::string::npos) << exhausted.error;

  LlmReply c = d->complete(request(kKeyC));
  EXPECT_EQ(c.status, LlmStatus::truncated);
  EXPECT_EQ(c.text, "C cut");

  LlmReply miss = d->complete(request("0123456789abcdef0123"));
  EXPECT_EQ(miss.status, LlmStatus::miss);
  EXPECT_TRUE(miss.infrastructure);
  EXPECT_NE(miss.error.find("no recorded reply for tb-tiling pass 2/6 (device), prompt key "
                            "0123456789ab\u2026: this prompt was never recorded"),
            std::string::npos)
      << miss.error;
  EXPECT_NE(miss.error.find("--record DIR"), std::string::npos) << miss.error;
  EXPECT_NE(miss.error.find("--llm manual"), std::string::npos) << miss.error;
}

TEST(LlmReplay, AMissNamesTheAttemptAndShowsWhyThePromptDiffers) {
  const std::string base =
      "# Transformation: tiling\n\n## Current source\n\nint k;\n\n## Device\n\nname: X\n";
  TempDir dir;
  write_recording(dir.path(), 1, kKeyA, "pass 1", "ok", base, "tiling pass 1/2 (device)");
  write_recording(dir.path(), 2, kKeyB, "pass 2", "ok", base + "\n## This pass\n\nsecond\n",
                  "tiling pass 2/2 (host)");
  auto d = must(make_driver("replay:" + dir.path().string(), DriverOptions{}));
  // The first pass asked again with feedback from a failure the recording never saw.
  LlmRequest req = request(kKeyC, base +
                                      "\n## The previous attempt failed\n\nDisposition: "
                                      "timeout\n");
  req.system = "s";
  req.step_label = "tiling pass 1/2 (device)";
  req.attempt = 2;
  LlmReply miss = d->complete(req);
  ASSERT_EQ(miss.status, LlmStatus::miss);
  EXPECT_NE(miss.error.find("tiling pass 1/2 (device), attempt 2"), std::string::npos)
      << miss.error;
  EXPECT_NE(miss.error.find("The nearest recording is 0001-"), std::string::npos) << miss.error;
  EXPECT_NE(miss.error.find("carries feedback from a failed attempt that the recording did not "
                            "have"),
            std::string::npos)
      << miss.error;
  EXPECT_NE(miss.error.find("+## The previous attempt failed"), std::string::npos) << miss.error;
  EXPECT_NE(miss.error.find("+Disposition: timeout"), std::string::npos) << miss.error;
  // Another device: the device section is named.
  LlmRequest other = request(kKeyC, replace_all(base, "name: X", "name: Y"));
  other.system = "s";
  other.step_label = "tiling pass 1/2 (device)";
  LlmReply m2 = d->complete(other);
  EXPECT_NE(m2.error.find("the device facts differ"), std::string::npos) << m2.error;
  EXPECT_NE(m2.error.find("-name: X"), std::string::npos) << m2.error;
}

TEST(LlmReplay, BrokenRecordingsAreReported) {
  TempDir dir;
  ASSERT_TRUE(write_file(dir.path() / "0001-x.json", "{not json").is_ok());
  auto d = make_driver("replay:" + dir.path().string(), DriverOptions{});
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.error().find("0001-x.json"), std::string::npos) << d.error();
  EXPECT_EQ(d.error_kind(), ErrorKind::input);

  TempDir dir2;
  ASSERT_TRUE(write_file(dir2.path() / "0001-x.json", R"({"format": 9, "key": "k"})").is_ok());
  auto d2 = make_driver("replay:" + dir2.path().string(), DriverOptions{});
  ASSERT_FALSE(d2.is_ok());
  EXPECT_NE(d2.error().find("format 9"), std::string::npos) << d2.error();
}

// ---- recording -------------------------------------------------------------------------------

// A scripted driver: replies in order.
class ScriptedDriver : public LlmDriver {
 public:
  explicit ScriptedDriver(std::deque<LlmReply> replies) : replies_(std::move(replies)) {}
  LlmReply complete(const LlmRequest&) override {
    LlmReply r = replies_.front();
    replies_.pop_front();
    return r;
  }
  std::string describe() const override { return "scripted"; }

 private:
  std::deque<LlmReply> replies_;
};

LlmReply reply(LlmStatus status, const std::string& text, const std::string& error = "") {
  LlmReply r;
  r.status = status;
  r.text = text;
  r.error = error;
  r.driver = "openai";
  r.model = "gpt-x";
  r.producer = "openai:gpt-x";
  r.finish_reason = status == LlmStatus::truncated ? "length" : "stop";
  r.prompt_tokens = 10;
  r.completion_tokens = 20;
  r.latency_s = 1.25;
  r.http_attempts = 1;
  return r;
}

TEST(LlmRecording, RoundTrip) {
  TempDir tmp;
  fs::path dir = tmp.path() / "campaign";
  {
    auto rec =
        make_recording_driver(std::make_unique<ScriptedDriver>(std::deque<LlmReply>{
                                  reply(LlmStatus::timeout, "", "no reply within 600 s"),
                                  reply(LlmStatus::ok, "first try (failed validation later)"),
                                  reply(LlmStatus::ok, "second try"),
                                  reply(LlmStatus::pending, "", "prompt written to ..."),
                                  reply(LlmStatus::truncated, "half"),
                              }),
                              dir, "test campaign");
    EXPECT_EQ(rec->describe(), "scripted");
    EXPECT_EQ(rec->complete(request(kKeyA)).status, LlmStatus::timeout);
    EXPECT_EQ(rec->complete(request(kKeyA)).text, "first try (failed validation later)");
    EXPECT_EQ(rec->complete(request(kKeyA)).text, "second try");
    EXPECT_EQ(rec->complete(request(kKeyB)).status, LlmStatus::pending);
    EXPECT_EQ(rec->complete(request(kKeyC)).status, LlmStatus::truncated);
  }
  // Pending calls are not recorded.
  std::vector<std::string> names;
  for (const auto& de : fs::directory_iterator(dir)) names.push_back(de.path().filename());
  std::sort(names.begin(), names.end());
  ASSERT_EQ(names.size(), 4u);
  EXPECT_EQ(names[0], "0001-" + kKeyA.substr(0, 16) + ".json");
  EXPECT_EQ(names[3], "0004-" + kKeyC.substr(0, 16) + ".json");

  json first = json::parse(*read_file(dir / names[0]));
  EXPECT_EQ(first["format"], 1);
  EXPECT_EQ(first["seq"], 1);
  EXPECT_EQ(first["key"], kKeyA);
  EXPECT_EQ(first["status"], "timeout");
  EXPECT_EQ(first["error"], "no reply within 600 s");
  EXPECT_EQ(first["system"], "You are a GPU performance engineer.");
  EXPECT_EQ(first["user"], "Tile the loop.");
  EXPECT_EQ(first["step_label"], "tb-tiling pass 2/6 (device)");
  EXPECT_EQ(first["note"], "test campaign");
  for (const char* field : {"reply", "driver", "model", "producer", "finish_reason",
                            "prompt_tokens", "completion_tokens", "latency_s", "recorded_at"})
    EXPECT_TRUE(first.contains(field)) << field;
  json second = json::parse(*read_file(dir / names[1]));
  EXPECT_EQ(second["reply"], "first try (failed validation later)");
  EXPECT_EQ(second["producer"], "openai:gpt-x");
  EXPECT_EQ(second["completion_tokens"], 20);
  EXPECT_DOUBLE_EQ(second["latency_s"].get<double>(), 1.25);

  // A second session continues the numbering.
  {
    auto rec = make_recording_driver(
        std::make_unique<ScriptedDriver>(std::deque<LlmReply>{reply(LlmStatus::ok, "B reply")}),
        dir);
    rec->complete(request(kKeyB));
  }
  EXPECT_TRUE(fs::exists(dir / ("0005-" + kKeyB.substr(0, 16) + ".json")));

  // Replay serves them back in order, skipping the LLM-level failure.
  auto replay = must(make_driver("replay:" + dir.string(), DriverOptions{}));
  LlmReply a1 = replay->complete(request(kKeyA));
  EXPECT_EQ(a1.status, LlmStatus::ok);
  EXPECT_EQ(a1.text, "first try (failed validation later)");
  EXPECT_EQ(a1.producer, "openai:gpt-x");
  EXPECT_EQ(a1.model, "gpt-x");
  EXPECT_EQ(a1.driver, "replay");
  EXPECT_EQ(replay->complete(request(kKeyA)).text, "second try");
  EXPECT_EQ(replay->complete(request(kKeyA)).status, LlmStatus::miss);
  EXPECT_EQ(replay->complete(request(kKeyB)).text, "B reply");
  LlmReply c = replay->complete(request(kKeyC));
  EXPECT_EQ(c.status, LlmStatus::truncated);
  EXPECT_EQ(c.text, "half");
}

TEST(LlmRecording, ManualAnswersAreRecordedOnceServed) {
  TempDir ws;
  fs::path dir = ws.path() / "rec";
  DriverOptions o;
  o.workspace = ws.path();
  auto rec = make_recording_driver(must(make_driver("manual", o)), dir);
  EXPECT_EQ(rec->complete(request(kKeyA)).status, LlmStatus::pending);
  EXPECT_FALSE(fs::exists(dir) && !fs::is_empty(dir));
  ASSERT_TRUE(respond_manual(ws.path(), "0001", "by hand", "human: bo").is_ok());
  EXPECT_EQ(rec->complete(request(kKeyA)).text, "by hand");
  auto replay = must(make_driver("replay:" + dir.string(), DriverOptions{}));
  LlmReply r = replay->complete(request(kKeyA));
  EXPECT_EQ(r.text, "by hand");
  EXPECT_EQ(r.producer, "human: bo");
}

}  // namespace
}  // namespace peak
