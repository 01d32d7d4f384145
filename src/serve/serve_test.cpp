// peak serve: the JSON and page it serves, and the page in headless Chromium following a real
// campaign on the CPU Vulkan device (lavapipe) while it runs.
#include "serve/serve.h"

#include <httplib.h>

#include <functional>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "report/report.h"
#include "report/testing.h"
#include "util/process.h"

namespace peak {
namespace {

using json = nlohmann::json;

class ServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = make_temp_dir("peak-serve-test-");
    ASSERT_TRUE(d.is_ok()) << d.error();
    tmp_ = *d;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
  ProcessOptions peak(std::vector<std::string> args) {
    ProcessOptions o;
    o.argv = {std::string(PEAK_BINARY_DIR) + "/peak"};
    for (auto& a : args) o.argv.push_back(a);
    o.cwd = tmp_;
    o.env["PEAK_DATA_DIR"] = PEAK_SOURCE_DIR;
    return o;
  }
  fs::path tmp_;
};

TEST_F(ServeTest, ServesTheReportAndItsJsonOnLoopback) {
  testing::write_campaign(tmp_ / "ws", /*running=*/true);
  ServeOptions o;
  o.store = tmp_ / "ws";
  o.port = 0;
  ReportServer server(o);
  auto url = server.bind();
  ASSERT_TRUE(url.is_ok()) << url.error();
  EXPECT_EQ(url->rfind("http://127.0.0.1:", 0), 0u) << *url;
  std::thread t([&] { (void)server.listen(); });
  std::string hostport = url->substr(7, url->size() - 8);
  httplib::Client cli(("http://" + hostport).c_str());
  auto res = cli.Get("/report.json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  json j = json::parse(res->body, nullptr, false);
  EXPECT_EQ(j["kind"], "peak-report");
  EXPECT_EQ(j["live"]["running"], true);
  EXPECT_EQ(j["live"]["configs"].size(), 1u);
  auto page = cli.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("data-live=\"/report.json\""), std::string::npos);
  server.stop();
  t.join();
  EXPECT_TRUE(is_loopback_host("127.0.0.1"));
  EXPECT_TRUE(is_loopback_host("::1"));
  EXPECT_FALSE(is_loopback_host("0.0.0.0"));
}

TEST_F(ServeTest, AWorkspaceWithoutAStoreGetsAPageThatSaysSo) {
  fs::create_directories(tmp_ / "empty" / ".peak");
  ServeOptions o;
  o.store = tmp_ / "empty";
  ReportServer server(o);
  auto r = server.json();
  EXPECT_EQ(r.status, 503);
  json j = json::parse(r.body);
  EXPECT_EQ(j["kind"], "peak-error");
  EXPECT_NE(j["message"].get<std::string>().find("empty workspace"), std::string::npos);
  EXPECT_EQ(server.page().status, 200);
}

// A recorded campaign replayed on lavapipe while `peak serve` shows it: the page follows the run
// (its progress and the configurations timed so far), then shows the finished campaign.
TEST_F(ServeTest, PageFollowsARunningCampaignInChromium) {
  fs::path ws = tmp_ / "ws";
  auto init = run_process(
      peak({"init", std::string(PEAK_SOURCE_DIR) + "/examples/matmul-hlsl-fp32", ws.string()}));
  ASSERT_TRUE(init.is_ok() && init->ok()) << (init.is_ok() ? init->err : init.error());
  Subprocess serve;
  ASSERT_TRUE(serve.start(peak({"-C", ws.string(), "serve", "--port", "0"})).is_ok());
  std::string line;
  ASSERT_EQ(serve.read_line(line, 60), Subprocess::ReadStatus::line) << serve.err();
  ASSERT_EQ(line.rfind("serving http://127.0.0.1:", 0), 0u) << line;
  std::string url = line.substr(8, line.find(' ', 8) - 8);
  Subprocess run;
  std::string rec = std::string("replay:") + PEAK_SOURCE_DIR + "/recordings/hlsl-fp32";
  std::string seq = "hlsl-fp32-short";  // the steps the recording covers
  auto ro = peak({"-q", "run", seq, "--llm", rec, "--budget", "3", "--small"});
  ro.cwd = ws;
  ASSERT_TRUE(run.start(ro).is_ok());
  ProcessOptions check;
  check.argv = {"node", std::string(PEAK_SOURCE_DIR) + "/web/test/check-page.js", url,
                // the run in progress, with the configurations timed so far ...
                "--wait-for", "!!document.getElementById('live-configs')",
                // ... then the finished campaign, redrawn in the same page
                "--wait-for",
                "!document.getElementById('live') && "
                "document.querySelectorAll('details.step').length === 4",
                "--timeout", "1500", "--charts", "5", "--diffs", "3", "--screenshot",
                (tmp_ / "serve.png").string()};
  check.timeout_s = 1800;
  auto checked = run_process(check);
  auto ran = run.wait(1800);
  serve.kill_group();
  EXPECT_TRUE(ran.ok()) << ran.describe() << ran.err;
  ASSERT_TRUE(checked.is_ok()) << checked.error();
  json j = json::parse(checked->out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << checked->out << checked->err;
  EXPECT_EQ(j["ok"], true) << j.dump(1);
  EXPECT_GT(j.value("polls", 0), 0);
  EXPECT_GT(j.value("renders", 0), 1);  // redrawn as the run went on
}

// peak's HTTP servers never share a port: while one listens, a second one on that port exits 4
// with a message naming the port (a shared port would split the requests between two
// workspaces, or two MCP servers' sessions).
struct SecondServer {
  std::vector<std::string> first;  // args with port 0
  std::string listening;           // the line the first prints, up to the port
  std::function<std::vector<std::string>(const std::string& port)> second;
  std::string fix;  // what the second one's message suggests
};

TEST_F(ServeTest, ASecondServerOnATakenPortExitsFour) {
  const std::string root = tmp_.string();
  const std::vector<SecondServer> cases = {
      {{"-C", root, "serve", "--port", "0"},
       "serving http://127.0.0.1:",
       [&](const std::string& port) {
         return std::vector<std::string>{"-C", root, "serve", "--port", port};
       },
       "--port 0"},
      {{"mcp", "--http", "127.0.0.1:0", "--root", root},
       "peak mcp: listening on http://127.0.0.1:",
       [&](const std::string& port) {
         return std::vector<std::string>{"mcp", "--http", "127.0.0.1:" + port, "--root", root};
       },
       "--http HOST:0"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.listening);
    // The first server's messages, standard error included, on its standard output.
    ProcessOptions o = peak(c.first);
    o.argv.insert(o.argv.begin(), {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1"});
    Subprocess first;
    ASSERT_TRUE(first.start(o).is_ok());
    std::string line;
    while (line.rfind(c.listening, 0) != 0)
      ASSERT_EQ(first.read_line(line, 120), Subprocess::ReadStatus::line) << first.err();
    std::string port = line.substr(c.listening.size());
    port = port.substr(0, port.find_first_not_of("0123456789"));
    ASSERT_FALSE(port.empty()) << line;
    ProcessOptions again = peak(c.second(port));
    again.timeout_s = 120;  // a bound only: the second one exits at once
    auto second = run_process(again);
    first.kill_group();
    ASSERT_TRUE(second.is_ok()) << second.error();
    EXPECT_FALSE(second->timed_out) << "the second server listened on the same port";
    EXPECT_EQ(second->exit_code, 4) << second->describe() << second->err;
    EXPECT_NE(second->err.find("cannot listen on 127.0.0.1:" + port), std::string::npos)
        << second->err;
    EXPECT_NE(second->err.find(c.fix), std::string::npos) << second->err;
  }
}

}  // namespace
}  // namespace peak
