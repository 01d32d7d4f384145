// The protocol layer with a fake transport: an outbox that keeps what the server sends.
#include <chrono>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "engine/reports.h"
#include "mcp/sampling.h"
#include "mcp/serve.h"
#include "mcp/server.h"
#include "mcp/tools.h"
#include "util/fs.h"
#include "util/process.h"

namespace peak::mcp {
namespace {

class FakeOutbox : public Outbox {
 public:
  void send(const json& m) override {
    std::lock_guard lock(mu);
    sent.push_back(m);
  }
  json last() {
    std::lock_guard lock(mu);
    return sent.empty() ? json() : sent.back();
  }
  size_t size() {
    std::lock_guard lock(mu);
    return sent.size();
  }
  std::mutex mu;
  std::vector<json> sent;
};

class McpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = make_temp_dir("peak-mcp-test");
    ASSERT_TRUE(d) << d.error();
    root = *d;
    server = std::make_unique<McpServer>(ServerOptions{root, "", "stdio"});
    out = std::make_shared<FakeOutbox>();
  }
  void TearDown() override {
    server.reset();
    std::filesystem::remove_all(root);
  }
  json request(const std::string& method, json params = json::object()) {
    server->handle_json({{"jsonrpc", "2.0"}, {"id", ++id}, {"method", method}, {"params", params}},
                        out);
    return out->last();
  }
  void initialize(json caps = json::object()) {
    json r = request("initialize", {{"protocolVersion", "2025-06-18"},
                                    {"capabilities", caps},
                                    {"clientInfo", {{"name", "fake"}, {"version", "1"}}}});
    ASSERT_EQ(r["result"]["protocolVersion"], "2025-06-18");
    server->handle_json({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}, out);
  }
  std::filesystem::path root;
  std::unique_ptr<McpServer> server;
  std::shared_ptr<FakeOutbox> out;
  int id = 0;
};

TEST_F(McpServerTest, NegotiatesTheVersionAndDeclaresCapabilities) {
  json r =
      request("initialize", {{"protocolVersion", "2030-01-01"}, {"capabilities", json::object()}});
  EXPECT_EQ(r["result"]["protocolVersion"], kLatestProtocolVersion);
  EXPECT_TRUE(r["result"]["capabilities"].contains("tools"));
  EXPECT_TRUE(r["result"]["capabilities"].contains("resources"));
  EXPECT_EQ(r["result"]["serverInfo"]["name"], "peak");
  EXPECT_FALSE(server->client_has_sampling());
}

TEST_F(McpServerTest, MalformedMessagesGetJsonRpcErrors) {
  server->handle("{oops", out);
  EXPECT_EQ(out->last()["error"]["code"], kParseError);
  server->handle("[]", out);
  EXPECT_EQ(out->last()["error"]["code"], kInvalidRequest);
  EXPECT_EQ(request("tools/list")["error"]["code"], kInvalidRequest);  // before initialize
  initialize();
  EXPECT_EQ(request("nothing/here")["error"]["code"], kMethodNotFound);
  EXPECT_EQ(request("tools/call", {{"name", "nope"}})["error"]["code"], kInvalidParams);
  EXPECT_EQ(request("resources/read", {{"uri", "file:///etc/passwd"}})["error"]["code"],
            kResourceNotFound);
  size_t before = out->size();
  server->handle_json({{"jsonrpc", "2.0"}, {"method", "notifications/unknown"}}, out);
  EXPECT_EQ(out->size(), before) << "notifications are never answered";
}

TEST_F(McpServerTest, ToolsHaveSchemasAndBadArgumentsAreToolErrors) {
  initialize();
  json tools = request("tools/list")["result"]["tools"];
  ASSERT_GE(tools.size(), 15u);
  for (const auto& t : tools) {
    EXPECT_EQ(t["inputSchema"]["type"], "object") << t["name"];
    EXPECT_EQ(t["outputSchema"]["type"], "object") << t["name"];
  }
  json r = request("tools/call", {{"name", "show"}, {"arguments", {{"ref", 3}}}});
  EXPECT_TRUE(r["result"]["isError"]);
  EXPECT_NE(r["result"]["content"][0]["text"].get<std::string>().find("must be a string"),
            std::string::npos);
  r = request("tools/call", {{"name", "log"}});
  EXPECT_TRUE(r["result"]["isError"]);
  EXPECT_NE(r["result"]["content"][0]["text"].get<std::string>().find("call init"),
            std::string::npos);
}

// The tuning strategy and its budget, as the CLI's --strategy and --strategy-budget.
TEST_F(McpServerTest, EvaluationToolsTakeATuningStrategy) {
  initialize();
  json tools = request("tools/list")["result"]["tools"];
  for (const char* name : {"evaluate", "apply", "run", "tune_classes"}) {
    auto t =
        std::find_if(tools.begin(), tools.end(), [&](const json& x) { return x["name"] == name; });
    ASSERT_NE(t, tools.end()) << name;
    const json& props = (*t)["inputSchema"]["properties"];
    ASSERT_TRUE(props.contains("strategy")) << name;
    EXPECT_NE(
        std::find(props["strategy"]["enum"].begin(), props["strategy"]["enum"].end(), "exhaustive"),
        props["strategy"]["enum"].end())
        << name;
    EXPECT_TRUE(props.contains("strategy_budget")) << name;
  }
  json r = request("tools/call", {{"name", "evaluate"}, {"arguments", {{"strategy", "nope"}}}});
  EXPECT_TRUE(r["result"]["isError"]);
  EXPECT_NE(r["result"]["content"][0]["text"].get<std::string>().find("strategy"),
            std::string::npos)
      << r.dump();
}

// `peak bench` as a tool: the shape suite of a checkpoint, with the CLI's options.
TEST_F(McpServerTest, BenchToolTimesTheShapeSuite) {
  initialize();
  json tools = request("tools/list")["result"]["tools"];
  auto t =
      std::find_if(tools.begin(), tools.end(), [](const json& x) { return x["name"] == "bench"; });
  ASSERT_NE(t, tools.end());
  for (const char* p : {"ref", "device", "small", "full", "no_baseline", "single", "workspace"})
    EXPECT_TRUE((*t)["inputSchema"]["properties"].contains(p)) << p;
  EXPECT_EQ((*t)["outputSchema"]["required"], json({"checkpoint", "rows", "geomean"}));
  // Arguments are checked against the schema before the tool runs.
  json r = request("tools/call", {{"name", "bench"}, {"arguments", {{"small", "yes"}}}});
  EXPECT_TRUE(r["result"]["isError"]) << r.dump();
  EXPECT_NE(r["result"]["content"][0]["text"].get<std::string>().find("bench: "), std::string::npos)
      << r.dump();
}

// A long call that would fail at once is answered on the caller's thread, before it takes the
// worker: the next call of a pipelined batch is not refused as busy, and every request gets
// exactly one answer, at once.
TEST_F(McpServerTest, LongCallsAreCheckedBeforeTheyTakeTheWorker) {
  initialize();
  const std::vector<json> calls = {
      {{"name", "apply"}, {"arguments", {{"transformation", "refactor"}, {"workspace", "nope"}}}},
      {{"name", "run"}, {"arguments", {{"sequence", "hlsl-fp32"}, {"workspace", "nope"}}}},
      {{"name", "evaluate"}, {"arguments", {{"workspace", "nope"}}}},
      {{"name", "bench"}, {"arguments", {{"workspace", "nope"}}}},
      {{"name", "tune_classes"}, {"arguments", {{"workspace", "nope"}}}},
      {{"name", "export"}, {"arguments", {{"output", "lib"}, {"workspace", "nope"}}}}};
  for (const json& call : calls) {
    SCOPED_TRACE(call["name"].get<std::string>());
    size_t before = out->size();
    json r = request("tools/call", call);
    ASSERT_EQ(out->size(), before + 1) << "answered once, before handle returns";
    EXPECT_EQ(r["id"], id) << r.dump();
    EXPECT_TRUE(r["result"]["isError"]) << r.dump();
    std::string text = r["result"]["content"][0]["text"];
    EXPECT_EQ(text.find("busy"), std::string::npos) << text;
    EXPECT_TRUE(server->job_status().is_null()) << "nothing runs";
  }
}

// In a workspace the library is its kernel's family's (`all` lists every one), and apply of a
// transformation written for another family is refused before anything runs.
TEST_F(McpServerTest, TransformationsAreTheWorkspacesFamilys) {
  initialize();
  const std::filesystem::path ctx = std::filesystem::path(PEAK_SOURCE_DIR) / "src/cli/testdata";
  std::filesystem::copy(ctx / "softmax-hlsl", root / "softmax-hlsl",
                        std::filesystem::copy_options::recursive);
  json init = request("tools/call", {{"name", "init"},
                                     {"arguments", {{"context", "softmax-hlsl"}, {"dir", "ws"}}}});
  ASSERT_FALSE(init["result"]["isError"]) << init.dump();
  auto names = [](const json& r) {
    std::set<std::string> out;
    for (const auto& t : r["result"]["structuredContent"]["transformations"])
      out.insert(t["name"].get<std::string>());
    return out;
  };
  json list =
      request("tools/call", {{"name", "transformations_list"}, {"arguments", json::object()}});
  ASSERT_FALSE(list["result"]["isError"]) << list.dump();
  EXPECT_TRUE(names(list).count("warp-reduce")) << list.dump();
  EXPECT_FALSE(names(list).count("tb-tiling")) << list.dump();
  EXPECT_EQ(list["result"]["structuredContent"]["family"], "softmax");
  EXPECT_GT(list["result"]["structuredContent"]["others"].get<int>(), 0);
  json all =
      request("tools/call", {{"name", "transformations_list"}, {"arguments", {{"all", true}}}});
  EXPECT_TRUE(names(all).count("tb-tiling")) << all.dump();
  json apply =
      request("tools/call", {{"name", "apply"}, {"arguments", {{"transformation", "tb-tiling"}}}});
  EXPECT_TRUE(apply["result"]["isError"]) << apply.dump();
  std::string text = apply["result"]["content"][0]["text"];
  EXPECT_NE(text.find("tb-tiling is written for the matmul family; this context is softmax"),
            std::string::npos)
      << text;
  EXPECT_TRUE(server->job_status().is_null()) << "nothing runs";
}

// The answer to request `request_id` of a long call, waited for (the worker sends it).
json wait_for_answer(FakeOutbox& out, const json& request_id, int seconds) {
  for (int i = 0; i < seconds * 20; ++i) {
    {
      std::lock_guard lock(out.mu);
      for (const auto& m : out.sent)
        if (m.contains("id") && m["id"] == request_id && m.contains("result")) return m;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return json();
}

// `peak export` as a tool: its schema, a folder outside the root refused before anything runs,
// and the engine's own refusal (entry points whose name is no C identifier) as a tool error.
TEST_F(McpServerTest, ExportToolWritesUnderTheRootOnly) {
  initialize();
  json tools = request("tools/list")["result"]["tools"];
  auto t =
      std::find_if(tools.begin(), tools.end(), [](const json& x) { return x["name"] == "export"; });
  ASSERT_NE(t, tools.end());
  std::set<std::string> props;
  for (const auto& [k, v] : (*t)["inputSchema"]["properties"].items()) props.insert(k);
  EXPECT_EQ(props, (std::set<std::string>{"checkpoint", "output", "single", "force", "name", "arch",
                                          "workspace"}));
  EXPECT_EQ((*t)["inputSchema"]["required"], json({"output"}));
  for (const char* k : {"dir", "entry", "checkpoint", "configurations", "files"})
    EXPECT_NE(std::find((*t)["outputSchema"]["required"].begin(),
                        (*t)["outputSchema"]["required"].end(), k),
              (*t)["outputSchema"]["required"].end())
        << k;
  EXPECT_FALSE((*t)["annotations"]["readOnlyHint"]);

  const std::filesystem::path ctx = std::filesystem::path(PEAK_SOURCE_DIR) / "src/cli/testdata";
  std::filesystem::copy(ctx / "softmax-hlsl", root / "softmax-hlsl",
                        std::filesystem::copy_options::recursive);
  json init = request("tools/call", {{"name", "init"},
                                     {"arguments", {{"context", "softmax-hlsl"}, {"dir", "ws"}}}});
  ASSERT_FALSE(init["result"]["isError"]) << init.dump();

  json r = request("tools/call", {{"name", "export"}, {"arguments", json::object()}});
  EXPECT_TRUE(r["result"]["isError"]) << r.dump();
  EXPECT_NE(r.dump().find("missing required argument 'output'"), std::string::npos) << r.dump();
  for (const char* outside : {"../lib", "/tmp/peak-export-outside"}) {
    size_t before = out->size();
    r = request("tools/call", {{"name", "export"}, {"arguments", {{"output", outside}}}});
    ASSERT_EQ(out->size(), before + 1) << "answered at once";
    EXPECT_TRUE(r["result"]["isError"]) << r.dump();
    EXPECT_NE(r.dump().find("outside the folders this server may use"), std::string::npos)
        << r.dump();
  }
  r = request("tools/call",
              {{"name", "export"}, {"arguments", {{"output", "lib"}, {"checkpoint", "nope"}}}});
  EXPECT_TRUE(r["result"]["isError"]) << r.dump();
  EXPECT_NE(r.dump().find("nope"), std::string::npos) << r.dump();
  EXPECT_TRUE(server->job_status().is_null()) << "nothing runs";

  request("tools/call",
          {{"name", "export"}, {"arguments", {{"output", "lib"}, {"name", "not-a-c-name"}}}});
  json answer = wait_for_answer(*out, id, 120);
  ASSERT_TRUE(answer.is_object()) << "no answer";
  EXPECT_TRUE(answer["result"]["isError"]) << answer.dump();
  EXPECT_NE(answer.dump().find("--name not-a-c-name: not a C identifier"), std::string::npos)
      << answer.dump();
  EXPECT_FALSE(std::filesystem::exists(root / "lib"));
}

// A CUDA checkpoint with a dispatch table (checkpoint 19 of the FP32 campaign under results/),
// exported through the tool: the structured result is export_json's, the files are there.
TEST_F(McpServerTest, ExportToolExportsACudaCheckpoint) {
  const std::filesystem::path store =
      std::filesystem::path(PEAK_SOURCE_DIR) / "results/h100/cuda-fp32-small-m-loads/suite/store";
  if (peak::find_tool(ToolSearch{"nvcc", "PEAK_NVCC", {"CUDA_HOME"}, {"/usr/local/cuda/bin/nvcc"}})
          .empty())
    GTEST_SKIP() << "nvcc not found";
  Status copied = copy_store_into(store, root / "ws" / ".peak");
  ASSERT_TRUE(copied) << copied.message();
  initialize();
  for (json args : {json{{"ref", "19"}, {"detach", true}, {"force", true}, {"workspace", "ws"}},
                    json{{"ref", "HEAD"}, {"force", true}, {"workspace", "ws"}}}) {
    json c = request("tools/call", {{"name", "checkout"}, {"arguments", args}});
    ASSERT_FALSE(c["result"]["isError"]) << c.dump();
  }
  request("tools/call",
          {{"name", "export"},
           {"arguments", {{"workspace", "ws"}, {"output", "lib"}, {"checkpoint", "19"}}},
           {"_meta", {{"progressToken", 7}}}});
  json answer = wait_for_answer(*out, id, 300);
  ASSERT_TRUE(answer.is_object()) << "no answer";
  ASSERT_FALSE(answer["result"]["isError"]) << answer.dump();
  const json& s = answer["result"]["structuredContent"];
  EXPECT_EQ(s["entry"], "peak_matmul_cuda_fp32");
  EXPECT_EQ(s["configurations"], 2);
  EXPECT_EQ(s["checkpoint"], 19);
  EXPECT_TRUE(s["dispatch_evaluation"].is_number_integer());
  EXPECT_EQ(std::filesystem::path(s["dir"].get<std::string>()), root / "lib");
  for (const auto& f : s["files"])
    EXPECT_TRUE(std::filesystem::exists(root / "lib" / f.get<std::string>())) << f;
  EXPECT_NE(
      answer["result"]["content"][0]["text"].get<std::string>().find("exported checkpoint 19"),
      std::string::npos);
  // The builds were progress.
  bool progress = false;
  {
    std::lock_guard lock(out->mu);
    for (const auto& m : out->sent)
      progress |= m.value("method", "") == "notifications/progress" &&
                  m["params"]["message"].get<std::string>().find("building configuration") !=
                      std::string::npos;
  }
  EXPECT_TRUE(progress);
  // A second export into the folder needs force.
  request("tools/call",
          {{"name", "export"},
           {"arguments", {{"workspace", "ws"}, {"output", "lib"}, {"checkpoint", "19"}}}});
  answer = wait_for_answer(*out, id, 300);
  ASSERT_TRUE(answer.is_object()) << "no answer";
  EXPECT_TRUE(answer["result"]["isError"]) << answer.dump();
  EXPECT_NE(answer.dump().find("--force"), std::string::npos) << answer.dump();
}

TEST(CheckArguments, TypesRequiredEnumsAndExtras) {
  json schema = {{"type", "object"},
                 {"properties",
                  {{"n", {{"type", "integer"}}},
                   {"f", {{"type", "string"}, {"enum", {"a", "b"}}}},
                   {"t", {{"type", "object"}, {"additionalProperties", {{"type", "array"}}}}}}},
                 {"required", {"n"}}};
  EXPECT_FALSE(check_arguments(schema, {{"n", 1}, {"f", "a"}, {"t", {{"X", {1, 2}}}}}));
  EXPECT_TRUE(check_arguments(schema, json::object()));
  EXPECT_TRUE(check_arguments(schema, {{"n", 1.5}}));
  EXPECT_TRUE(check_arguments(schema, {{"n", 1}, {"f", "c"}}));
  EXPECT_TRUE(check_arguments(schema, {{"n", 1}, {"zzz", 1}}));
  EXPECT_TRUE(check_arguments(schema, {{"n", 1}, {"t", {{"X", {"1"}}}}}));
}

TEST(Confine, InsideIsAllowedOutsideIsRefused) {
  auto d = make_temp_dir("peak-mcp-confine");
  ASSERT_TRUE(d);
  EXPECT_TRUE(confine(*d, "ws", {*d}));
  EXPECT_TRUE(confine(*d, (*d / "a" / "b").string(), {*d}));
  EXPECT_FALSE(confine(*d, "../x", {*d}));
  EXPECT_FALSE(confine(*d, "/etc", {*d}));
  EXPECT_FALSE(confine(*d, "a/../../x", {*d}));
  std::filesystem::create_symlink("/etc", *d / "link");
  EXPECT_FALSE(confine(*d, "link/passwd", {*d})) << "a symbolic link out is followed";
  std::filesystem::remove_all(*d);
}

TEST(ListenAddress, Parses) {
  auto a = parse_listen_address("127.0.0.1:8808");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 8808);
  auto b = parse_listen_address(":0");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->host, "127.0.0.1");
  auto c = parse_listen_address("[::1]:9");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->host, "::1");
  EXPECT_FALSE(parse_listen_address("host:port"));
  EXPECT_FALSE(parse_listen_address("1:70000"));
  EXPECT_TRUE(is_loopback_host("localhost"));
  EXPECT_FALSE(is_loopback_host("0.0.0.0"));
}

// The sampling driver: a request goes out, the fake client answers it through handle_json.
TEST_F(McpServerTest, SamplingDriverAsksTheClient) {
  initialize({{"sampling", json::object()}});
  EXPECT_TRUE(server->client_has_sampling());
  auto driver = make_sampling_driver(*server, out, [] { return false; });
  std::thread client([&] {
    for (int i = 0; i < 500; ++i) {
      json m = out->last();
      if (m.value("method", "") == "sampling/createMessage") {
        EXPECT_EQ(m["params"]["metadata"]["peak/step"], "refactor pass 1/2 (macros)");
        EXPECT_EQ(m["params"]["systemPrompt"], "sys");
        json result = {{"role", "assistant"},
                       {"model", "fake-model"},
                       {"stopReason", "endTurn"},
                       {"content", {{"type", "text"}, {"text", "```\ncode\n```"}}}};
        server->handle_json({{"jsonrpc", "2.0"}, {"id", m["id"]}, {"result", result}}, out);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  LlmRequest req{"sys", "user", "key", "refactor pass 1/2 (macros)", 100, 30};
  LlmReply r = driver->complete(req);
  client.join();
  EXPECT_EQ(r.status, LlmStatus::ok) << r.error;
  EXPECT_EQ(r.text, "```\ncode\n```");
  EXPECT_EQ(r.producer, "mcp:fake-model");
  EXPECT_EQ(r.driver, "mcp");
}

TEST_F(McpServerTest, SamplingStopsWhenCancelled) {
  initialize({{"sampling", json::object()}});
  std::atomic<bool> cancel{false};
  auto driver = make_sampling_driver(*server, out, [&] { return cancel.load(); });
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancel = true;
  });
  LlmRequest req{"sys", "user", "key", "tb-tiling pass 2/3 (device)", 100, 60};
  LlmReply r = driver->complete(req);
  canceller.join();
  EXPECT_EQ(r.status, LlmStatus::failed);
  EXPECT_NE(r.error.find("cancelled"), std::string::npos);
  EXPECT_EQ(out->last()["method"], "notifications/cancelled") << "the client is told";
}

}  // namespace
}  // namespace peak::mcp
