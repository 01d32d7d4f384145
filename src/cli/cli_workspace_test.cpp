// The workspace keeps what the user made: local edits survive every command, checkouts are
// atomic, checkpoints keep every measurement, one writer at a time, read-only workspaces read.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <regex>

#include <nlohmann/json.hpp>

#include "cli/testing.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/workspace_lock.h"

namespace peak {
namespace {

using namespace peak::testing;

std::string integrity(const fs::path& ws) { return sql_value(ws, "PRAGMA integrity_check"); }

TEST_F(Cli, GlobalOptionsGoAnywhereAndTyposGetASuggestion) {
  fs::path ws = scale_workspace("ws");
  Out before = peak({"--json", "log"}, ws);
  Out after = peak({"log", "--json"}, ws);
  ASSERT_EQ(after.code, 0) << after.err;
  EXPECT_EQ(before.out, after.out);
  EXPECT_TRUE(json::parse(after.out, nullptr, false).is_array());
  Out c = peak({"log", "-C", ws.string(), "--json"});
  EXPECT_EQ(c.code, 0) << c.err;
  Out typo = peak({"lgo"}, ws);
  EXPECT_EQ(typo.code, 2);
  EXPECT_NE(typo.err.find("did you mean 'log'"), std::string::npos) << typo.err;
  Out other = peak({"frobnicate"}, ws);
  EXPECT_EQ(other.code, 2);
  EXPECT_NE(other.err.find("peak --help"), std::string::npos) << other.err;
}

// Every command that writes the working files, tried with an edit in them: each refuses and
// names the change, and the edit survives; --force stashes it and `stash pop` brings it back.
TEST_F(Cli, EveryCommandThatWritesWorkingFilesKeepsALocalEdit) {
  fs::path ws = scale_workspace("ws");
  ASSERT_TRUE(write_file(ws / "kernel.hlsl", replace_region(kScaleSource, "device", kAddedDevice)));
  ASSERT_EQ(peak({"-q", "commit", "-m", "add", "--budget", "1"}, ws).code, 0);  // checkpoint 2
  ASSERT_EQ(peak({"-q", "branch", "side", "seed"}, ws).code, 0);
  ASSERT_EQ(peak({"-q", "checkout", "main"}, ws).code, 0);
  ASSERT_TRUE(write_file(ws / "kernel.hlsl", *read_file(ws / "kernel.hlsl") + "// set aside\n"));
  ASSERT_EQ(peak({"-q", "stash", "-m", "for later"}, ws).code, 0);
  ASSERT_TRUE(status(ws)["clean"].get<bool>());

  const std::string edited =
      replace_region(*read_file(ws / "kernel.hlsl"), "device",
                     std::string(kAddedDevice) + "// my edit, not committed\n");
  ASSERT_TRUE(write_file(ws / "kernel.hlsl", edited));
  json st = status(ws);
  EXPECT_FALSE(st["clean"].get<bool>());
  EXPECT_EQ(st["changes"], json::array({"the device region of kernel.hlsl"}));
  Out diff = peak({"diff"}, ws);
  EXPECT_NE(diff.out.find("+// my edit, not committed"), std::string::npos) << diff.out;
  ASSERT_TRUE(write_file(tmp_ / "seq.toml",
                         "format = 1\nname = \"s\"\n[[step]]\ntransformation = \"add-twice\"\n"));
  const std::string llm = command_llm(added_reply());
  const std::vector<std::vector<std::string>> commands = {
      {"checkout", "side"},
      {"checkout", "--detach", "seed"},
      {"checkout", "--detach", "1"},
      {"checkout", "HEAD"},
      {"branch", "b2", "seed"},
      {"stash", "pop"},
      {"apply", "add-twice", "--llm", llm, "--budget", "1"},
      {"run", (tmp_ / "seq.toml").string(), "--llm", llm, "--budget", "1"},
  };
  for (const auto& c : commands) {
    SCOPED_TRACE(c[0] + " " + c[1]);
    Out o = peak(c, ws);
    EXPECT_EQ(o.code, 2) << o.out << o.err;
    EXPECT_NE(o.err.find("the device region of kernel.hlsl"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("peak commit"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("peak stash"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("--force"), std::string::npos) << o.err;
    EXPECT_EQ(*read_file(ws / "kernel.hlsl"), edited);
  }
  EXPECT_EQ(llm_calls(), 0u);
  st = status(ws);
  EXPECT_EQ(st["head"], "main");
  EXPECT_EQ(st["stashes"].size(), 1u);
  Out branches = peak({"--json", "branch"}, ws);
  EXPECT_FALSE(json::parse(branches.out)["branches"].contains("b2"));

  // --force: stashed first, then brought back.
  Out forced = peak({"--json", "checkout", "side", "--force"}, ws);
  ASSERT_EQ(forced.code, 0) << forced.err;
  json f = json::parse(forced.out);
  ASSERT_TRUE(f["stash"].is_number()) << forced.out;
  EXPECT_EQ(*read_file(ws / "kernel.hlsl"), kScaleSource);
  ASSERT_EQ(peak({"-q", "checkout", "main"}, ws).code, 0);
  Out pop = peak({"stash", "pop", std::to_string(f["stash"].get<int>())}, ws);
  ASSERT_EQ(pop.code, 0) << pop.err;
  EXPECT_EQ(*read_file(ws / "kernel.hlsl"), edited);
  EXPECT_EQ(status(ws)["stashes"].size(), 1u);
}

TEST_F(Cli, RefNamesAreCheckedAndDetachingIsAskedFor) {
  fs::path ws = scale_workspace("ws");
  for (const std::vector<std::string>& c : std::vector<std::vector<std::string>>{{"branch", ""},
                                                                                 {"branch", "seed"},
                                                                                 {"branch", "HEAD"},
                                                                                 {"branch", "7"},
                                                                                 {"checkout", ""},
                                                                                 {"tag", "main"}}) {
    SCOPED_TRACE(c[0] + " '" + c[1] + "'");
    Out o = peak(c, ws);
    EXPECT_EQ(o.code, 2) << o.out << o.err;
  }
  Out co = peak({"checkout", "seed"}, ws);
  EXPECT_EQ(co.code, 2);
  EXPECT_NE(co.err.find("--detach"), std::string::npos) << co.err;
  EXPECT_EQ(status(ws)["head"], "main");
  Out head = peak({"checkout", "HEAD"}, ws);
  EXPECT_EQ(head.code, 0) << head.err;
  EXPECT_EQ(status(ws)["head"], "main");  // still on the branch
  Out detach = peak({"checkout", "--detach", "seed"}, ws);
  EXPECT_EQ(detach.code, 0) << detach.err;
  EXPECT_NE(detach.out.find("detached"), std::string::npos) << detach.out;
  EXPECT_EQ(status(ws)["head"], "#1");
}

// kill -9 at every step of a checkout, and an unwritable folder or file: store and files agree.
TEST_F(Cli, CheckoutFaultsLeaveStoreAndFilesConsistent) {
  fs::path ws = scale_workspace("ws");
  ASSERT_TRUE(write_file(ws / "kernel.hlsl", replace_region(kScaleSource, "device", kAddedDevice)));
  ASSERT_EQ(peak({"-q", "commit", "-m", "add", "--budget", "1"}, ws).code, 0);
  ASSERT_EQ(peak({"-q", "branch", "side", "seed"}, ws).code, 0);
  const std::string on_main = replace_region(kScaleSource, "device", kAddedDevice);
  std::string head = "side";
  for (const char* point :
       {"switch.temps-written", "switch.journaled", "switch.renamed-one", "switch.files-written"}) {
    SCOPED_TRACE(point);
    std::string target = head == "side" ? "main" : "side";
    Out killed = peak({"checkout", target}, ws, {{"PEAK_FAULT", std::string("kill@") + point}});
    EXPECT_EQ(killed.code, -1) << killed.out << killed.err;  // killed by a signal
    json st = status(ws);  // the next command completes or undoes it
    if (std::string(point) != "switch.temps-written") head = target;
    EXPECT_EQ(st["head"], head);
    EXPECT_TRUE(st["clean"].get<bool>()) << st.dump();
    EXPECT_EQ(*read_file(ws / "kernel.hlsl"), head == "side" ? kScaleSource : on_main);
    EXPECT_EQ(integrity(ws), "ok");
  }
  // An unwritable folder: exit 4, nothing changed.
  ASSERT_EQ(head, "main");  // side -> (not done) -> main -> side -> main
  if (::geteuid() == 0) {   // the checkout runs as nobody: .peak is theirs, the folder is not
    ASSERT_EQ(std::system(("chown -R 65534:65534 " + (ws / ".peak").string()).c_str()), 0);
  } else {
    fs::permissions(ws, fs::perms::owner_write, fs::perm_options::remove);
  }
  Out denied = peak_as_other_user({"checkout", "side"}, ws);
  EXPECT_EQ(denied.code, 4) << denied.out << denied.err;
  EXPECT_NE(denied.err.find("chmod u+w"), std::string::npos) << denied.err;
  EXPECT_EQ(denied.err.find(".tmp"), std::string::npos) << denied.err;
  fs::permissions(ws, fs::perms::owner_write, fs::perm_options::add);
  if (::geteuid() == 0) {
    ASSERT_EQ(std::system(("chown -R 0:0 " + (ws / ".peak").string()).c_str()), 0);
  }
  json st = status(ws);
  EXPECT_EQ(st["head"], "main");
  EXPECT_TRUE(st["clean"].get<bool>());
  EXPECT_EQ(*read_file(ws / "kernel.hlsl"), on_main);
  EXPECT_EQ(integrity(ws), "ok");
}

TEST_F(Cli, ReadOnlyWorkspaceCanBeRead) {
  fs::path ws = scale_workspace("ws");
  std::error_code ec;
  // The other user must reach the workspace: temporary folders are private to their owner.
  fs::permissions(tmp_,
                  fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                      fs::perms::others_read | fs::perms::others_exec,
                  ec);
  for (auto it = fs::recursive_directory_iterator(ws); it != fs::end(it); ++it)
    fs::permissions(it->path(),
                    fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                    fs::perm_options::remove, ec);
  fs::permissions(ws, fs::perms::owner_write, fs::perm_options::remove, ec);
  for (const std::vector<std::string>& c : std::vector<std::vector<std::string>>{
           {"log"}, {"status"}, {"show"}, {"diff"}, {"report"}, {"--json", "log"}}) {
    SCOPED_TRACE(c[0]);
    Out o = peak_as_other_user(c, ws);
    EXPECT_EQ(o.code, 0) << o.out << o.err;
  }
  Out write = peak_as_other_user({"tag", "v1"}, ws);
  EXPECT_EQ(write.code, 4) << write.err;
  EXPECT_NE(write.err.find("read-only"), std::string::npos) << write.err;
}

TEST_F(Cli, ASecondWriterNamesTheFirstOrWaits) {
  fs::path ws = scale_workspace("ws");
  auto held = WorkspaceLock::acquire(ws / ".peak" / "lock", "peak apply add-twice", false);
  ASSERT_TRUE(held) << held.error();
  Out busy = peak({"tag", "v1"}, ws);
  EXPECT_EQ(busy.code, 4);
  EXPECT_NE(busy.err.find("peak apply add-twice (pid " + std::to_string(::getpid())),
            std::string::npos)
      << busy.err;
  EXPECT_NE(busy.err.find("--wait"), std::string::npos) << busy.err;
  EXPECT_EQ(peak({"log"}, ws).code, 0);  // readers do not wait
  json st = status(ws);
  EXPECT_EQ(st["busy"]["pid"], ::getpid());
  // --wait: the second one says whom it waits for, and goes on once the first is done.
  Subprocess waiter;
  ASSERT_TRUE(waiter.start(options({"tag", "v2", "--wait"}, ws, {})));
  std::string line;
  for (int i = 0; i < 3000 && waiter.err().find("waiting for") == std::string::npos; ++i)
    waiter.read_line(line, 0.01);
  EXPECT_NE(waiter.err().find("waiting for peak apply add-twice"), std::string::npos)
      << waiter.err();
  held->reset();
  ProcessResult r = waiter.wait(60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  Out tags = peak({"--json", "tag"}, ws);
  EXPECT_TRUE(json::parse(tags.out).contains("v2")) << tags.out;
}

// A re-tune with other options adds a measurement and changes no result; log, show and report
// agree on the result; a commit with no change is refused.
TEST_F(Cli, CheckpointsKeepEveryMeasurement) {
  fs::path ws = scale_workspace("ws");
  ASSERT_EQ(peak({"-q", "validate", "--budget", "1"}, ws).code, 0);
  Out tuned = peak({"tune", "--tune", "BLOCK=32", "--budget", "1"}, ws);
  ASSERT_EQ(tuned.code, 0) << tuned.err;
  EXPECT_NE(tuned.out.find("kept in the history"), std::string::npos) << tuned.out;
  Out show = peak({"--json", "show", "1", "--all"}, ws);
  ASSERT_EQ(show.code, 0);
  json s = json::parse(show.out);
  ASSERT_EQ(s["evaluations"].size(), 2u);
  EXPECT_TRUE(s["evaluations"][0]["result"].get<bool>());
  EXPECT_FALSE(s["evaluations"][1]["result"].get<bool>());
  EXPECT_FALSE(s["evaluations"][1]["standard"].get<bool>());
  EXPECT_EQ(s["evaluations"][1]["options"]["tuning"]["BLOCK"], json::array({32}));
  double result = s["evaluations"][0]["gflops"].get<double>();
  EXPECT_DOUBLE_EQ(s["summary"]["bench"][0]["gflops"].get<double>(), result);
  EXPECT_EQ(s["summary"]["best"]["config"]["BLOCK"], 64);  // the default options' best
  Out log = peak({"--json", "log"}, ws);
  std::string perf = json::parse(log.out)[0]["perf"];
  EXPECT_NE(perf.find("GFLOP/s"), std::string::npos) << perf;  // the seed's result is shown
  Out rep = peak({"report", "--format", "json"}, ws);
  EXPECT_DOUBLE_EQ(json::parse(rep.out)["steps"][0]["bench"][0]["gflops"].get<double>(), result);
  Out text = peak({"show", "1", "--all"}, ws);
  EXPECT_NE(text.out.find("other options"), std::string::npos) << text.out;
  Out nothing = peak({"commit", "-m", "same"}, ws);
  EXPECT_EQ(nothing.code, 2);
  EXPECT_NE(nothing.err.find("nothing to commit"), std::string::npos) << nothing.err;
  EXPECT_EQ(checkpoints(ws), 1u);
}

TEST_F(Cli, ContextErrorsExitWithTwoAtCommit) {
  fs::path ws = scale_workspace("ws");
  ASSERT_TRUE(write_file(ws / "kernel.hlsl", replace_all(kScaleSource, "// peak:end host", "")));
  Out marker = peak({"commit", "-m", "x"}, ws);
  EXPECT_EQ(marker.code, 2) << marker.err;
  EXPECT_NE(marker.err.find("peak:end host"), std::string::npos) << marker.err;
  EXPECT_EQ(marker.err.find("not_run"), std::string::npos) << marker.err;
  ASSERT_TRUE(write_file(ws / "kernel.hlsl", kScaleSource));
  ASSERT_TRUE(write_file(ws / "kernel.toml", "format = 1\nname = = \"x\"\n"));
  Out toml = peak({"commit", "-m", "x"}, ws);
  EXPECT_EQ(toml.code, 2) << toml.err;
  EXPECT_NE(toml.err.find("kernel.toml:2:"), std::string::npos) << toml.err;
  // tuning_valid with an unknown name is refused at init already.
  std::string ctx = kScaleToml;
  ctx.insert(ctx.find("[[arrays]]"), "tuning_valid = \"BLOK <= 64\"\n\n");
  ASSERT_TRUE(write_file(tmp_ / "bad-ctx" / "kernel.toml", ctx));
  ASSERT_TRUE(write_file(tmp_ / "bad-ctx" / "kernel.hlsl", kScaleSource));
  Out init = peak({"init", (tmp_ / "bad-ctx").string(), (tmp_ / "bad").string()});
  EXPECT_EQ(init.code, 2);
  EXPECT_NE(init.err.find("unknown name 'BLOK'"), std::string::npos) << init.err;
}

TEST_F(Cli, ABrokenTransformationFileIsSkipped) {
  fs::path ws = scale_workspace("ws");
  ASSERT_TRUE(write_file(library_ / "broken.md", "+++\nformat = 1\nname = \"broken\"\n"));
  Out list = peak({"transformations", "list"}, ws);
  EXPECT_EQ(list.code, 0) << list.err;
  EXPECT_NE(list.out.find("add-twice"), std::string::npos) << list.out;
  EXPECT_NE(list.err.find("broken.md"), std::string::npos) << list.err;
  Out show = peak({"transformations", "show", "add-twice"}, ws);
  EXPECT_EQ(show.code, 0) << show.err;
}

// A workspace lists the transformations of its kernel's family; --all and outside a workspace,
// every one with its families.
TEST_F(Cli, TransformationsAreListedForTheWorkspacesFamily) {
  fs::path ws = tmp_ / "softmax";
  Out init =
      peak({"init", std::string(PEAK_SOURCE_DIR) + "/src/cli/testdata/softmax-hlsl", ws.string()});
  ASSERT_EQ(init.code, 0) << init.err;
  Out list = peak({"transformations", "list"}, ws);
  EXPECT_EQ(list.code, 0) << list.err;
  EXPECT_NE(list.out.find("transformations for the softmax family:"), std::string::npos)
      << list.out;
  EXPECT_NE(list.out.find("online-softmax"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("warp-reduce"), std::string::npos) << list.out;
  EXPECT_EQ(list.out.find("thread-tiling"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("written for other families than softmax; --all lists them"),
            std::string::npos)
      << list.out;
  Out json_list = peak({"--json", "transformations", "list"}, ws);
  json j = json::parse(json_list.out, nullptr, false);
  ASSERT_TRUE(j.is_array()) << json_list.out;
  for (const auto& t : j) EXPECT_NE(t["name"], "tb-tiling");

  Out all = peak({"transformations", "list", "--all"}, ws);
  EXPECT_EQ(all.code, 0) << all.err;
  EXPECT_NE(all.out.find("families"), std::string::npos) << all.out;
  for (const char* name : {"thread-tiling", "online-softmax"})
    EXPECT_NE(all.out.find(name), std::string::npos) << name << "\n" << all.out;
  EXPECT_EQ(all.out.find("--all lists"), std::string::npos) << all.out;
  Out outside = peak({"transformations", "list"});
  EXPECT_EQ(outside.code, 0) << outside.err;
  EXPECT_NE(outside.out.find("thread-tiling"), std::string::npos) << outside.out;
  EXPECT_NE(outside.out.find("softmax, rmsnorm, layernorm"), std::string::npos) << outside.out;
  Out show = peak({"transformations", "show", "thread-tiling"}, ws);
  EXPECT_EQ(show.code, 0) << show.err;
  EXPECT_EQ(show.out.rfind("families: matmul\n", 0), 0u) << show.out;
  // A family the library has no transformation for (here a name peak does not know) says so,
  // and where the others are.
  fs::path scan_ctx = tmp_ / "scan-ctx";
  fs::create_directories(scan_ctx);
  const fs::path from = fs::path(PEAK_SOURCE_DIR) / "src/cli/testdata/softmax-hlsl";
  fs::copy_file(from / "kernel.hlsl", scan_ctx / "kernel.hlsl");
  auto toml = read_file(from / "kernel.toml");
  ASSERT_TRUE(toml);
  std::string text = *toml;
  text.replace(text.find("family = \"softmax\""), 18, "family = \"scan\"");
  ASSERT_TRUE(write_file(scan_ctx / "kernel.toml", text));
  fs::path scan = tmp_ / "scan";
  Out scan_init = peak({"init", scan_ctx.string(), scan.string()});
  ASSERT_EQ(scan_init.code, 0) << scan_init.err;
  Out none = peak({"transformations", "list"}, scan);
  EXPECT_EQ(none.code, 0) << none.err;
  EXPECT_NE(none.out.find("no transformation of the library is written for the scan family"),
            std::string::npos)
      << none.out;
  EXPECT_EQ(none.out.find("passes"), std::string::npos) << none.out;  // no empty table
  EXPECT_NE(none.out.find("--all lists them"), std::string::npos) << none.out;
}

// A transformation or a sequence written for another family is refused before any model call.
TEST_F(Cli, ATransformationOfAnotherFamilyIsRefusedBeforeAnyModelCall) {
  fs::path ws = tmp_ / "softmax";
  Out init =
      peak({"init", std::string(PEAK_SOURCE_DIR) + "/src/cli/testdata/softmax-hlsl", ws.string()});
  ASSERT_EQ(init.code, 0) << init.err;
  const std::string why =
      "thread-tiling is written for the matmul family; this context is softmax (transformations "
      "list shows the ones for it; --all shows every one)";
  std::string llm = command_llm(added_reply());
  Out apply = peak({"apply", "thread-tiling", "--llm", llm}, ws);
  EXPECT_EQ(apply.code, 2) << apply.out << apply.err;
  EXPECT_NE(apply.err.find(why), std::string::npos) << apply.err;
  EXPECT_EQ(llm_calls(), 0u);
  Out manual = peak({"apply", "thread-tiling", "--llm", "manual"}, ws);
  EXPECT_EQ(manual.code, 2) << manual.out << manual.err;
  EXPECT_FALSE(fs::exists(ws / ".peak/manual/0001.prompt.md"));
  Out run = peak({"run", "hlsl-fp32", "--llm", "manual"}, ws);
  EXPECT_EQ(run.code, 2) << run.out << run.err;
  EXPECT_NE(run.err.find("step 1 (refactor): refactor is written for the matmul family"),
            std::string::npos)
      << run.err;
  EXPECT_FALSE(fs::exists(ws / ".peak/manual/0001.prompt.md"));
  EXPECT_EQ(checkpoints(ws), 1u);
}

// The command line wins over a sequence file: attempts = 1 in the file, --attempts 2 given.
TEST_F(Cli, CommandLineAttemptsWinOverTheSequenceFile) {
  fs::path ws = scale_workspace("ws");
  ASSERT_TRUE(write_file(tmp_ / "seq.toml",
                         "format = 1\nname = \"s\"\nattempts = 1\n[[step]]\n"
                         "transformation = \"add-twice\"\n"));
  std::string llm = command_llm("no code block here");
  Out r = peak({"--json", "run", (tmp_ / "seq.toml").string(), "--llm", llm, "--attempts", "2",
                "--budget", "1"},
               ws);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_EQ(llm_calls(), 2u);
  json j = json::parse(r.out, nullptr, false);
  EXPECT_EQ(j["steps"][0]["attempts"], 2) << r.out;
  EXPECT_NE(j["message"].get<std::string>().find("--attempts"), std::string::npos);
  // Without --attempts, the file's 1.
  Out again = peak({"run", (tmp_ / "seq.toml").string(), "--llm", llm, "--budget", "1"}, ws);
  EXPECT_EQ(again.code, 1);
  EXPECT_EQ(llm_calls(), 3u);
}

// A signal ends the command with its workflow recorded as interrupted (by the process itself,
// before it ends), and the same command continues it.
TEST_F(Cli, ASignalMarksTheWorkflowInterrupted) {
  fs::path ws = scale_workspace("ws");
  Subprocess p;
  ASSERT_TRUE(p.start(
      options({"-q", "apply", "add-twice", "--llm", "manual", "--wait", "--budget", "1"}, ws, {})));
  fs::path prompt = ws / ".peak" / "manual" / "0001.prompt.md";
  std::string line;
  for (int i = 0; i < 6000 && !fs::exists(prompt); ++i) p.read_line(line, 0.01);
  ASSERT_TRUE(fs::exists(prompt)) << p.err();
  EXPECT_EQ(sql_value(ws, "SELECT status FROM workflows"), "running");
  ::kill(p.pid(), SIGTERM);
  ProcessResult r = p.wait(60);
  EXPECT_EQ(r.term_signal, SIGTERM) << r.describe();
  EXPECT_EQ(sql_value(ws, "SELECT status FROM workflows"), "interrupted");
  EXPECT_NE(sql_value(ws, "SELECT finished_at FROM workflows"), "");
  ASSERT_TRUE(write_file(tmp_ / "reply.md", added_reply()));
  ASSERT_EQ(peak({"respond", "0001", (tmp_ / "reply.md").string()}, ws).code, 0);
  Out again = peak({"--json", "-q", "apply", "add-twice", "--llm", "manual", "--budget", "1"}, ws);
  ASSERT_EQ(again.code, 0) << again.out << again.err;
  EXPECT_EQ(json::parse(again.out)["workflow"], 1);
  EXPECT_EQ(sql_value(ws, "SELECT count(*) FROM workflows"), "1");
}

// The README's examples, exactly as written there, with nothing but the built peak.
TEST_F(Cli, ReadmeExamplesRunOffline) {
  auto readme = read_file(fs::path(PEAK_SOURCE_DIR) / "README.md");
  ASSERT_TRUE(readme);
  auto marker = readme->find("<!-- peak:readme-example");
  ASSERT_NE(marker, std::string::npos);
  auto begin = readme->find("```sh\n", marker);
  auto end = readme->find("```\n", begin + 6);
  ASSERT_NE(begin, std::string::npos);
  std::string script = readme->substr(begin + 6, end - begin - 6);
  ASSERT_NE(script.find("peak apply"), std::string::npos);
  ProcessOptions o = options({}, tmp_, {});
  o.argv = {"bash", "-euo", "pipefail", "-c", script};
  o.env["PATH"] = std::string(PEAK_BINARY_DIR) + ":" + std::getenv("PATH");
  Out r = run(o);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(fs::exists(tmp_ / "ws" / "report.md"));
  EXPECT_EQ(checkpoints(tmp_ / "ws"), 3u);
  EXPECT_EQ(status(tmp_ / "ws")["head"], "try-more");
}

// A damaged store is an environment error (4) that says how to check it, and a reader writes
// nothing into it; a folder with files is no place for `peak init` without --force (2).
TEST_F(Cli, ADamagedStoreExitsWithFourAndStaysAsItIs) {
  fs::path ws = scale_workspace("ws");
  ASSERT_TRUE(write_file(ws / ".peak" / "peak.db", ""));
  std::error_code ec;
  fs::remove(ws / ".peak" / "peak.db-wal", ec);
  fs::remove(ws / ".peak" / "peak.db-shm", ec);
  for (const char* command : {"log", "status"}) {
    Out o = peak({command}, ws);
    EXPECT_EQ(o.code, 4) << command << ": " << o.err;
    EXPECT_NE(o.err.find("PRAGMA integrity_check"), std::string::npos) << o.err;
    EXPECT_EQ(fs::file_size(ws / ".peak" / "peak.db"), 0u) << command;
  }
  fs::path ws2 = scale_workspace("ws2");
  ASSERT_TRUE(write_file(ws2 / ".peak" / "FORMAT", "garbage\n"));
  Out garbage = peak({"log"}, ws2);
  EXPECT_EQ(garbage.code, 4) << garbage.err;
  EXPECT_NE(garbage.err.find("damaged"), std::string::npos) << garbage.err;
  EXPECT_EQ(garbage.err.find("run `peak init`"), std::string::npos) << garbage.err;
  fs::remove(ws2 / ".peak" / "FORMAT");
  Out missing = peak({"log"}, ws2);
  EXPECT_EQ(missing.code, 4) << missing.err;
  EXPECT_NE(missing.err.find("damaged"), std::string::npos) << missing.err;
}

TEST_F(Cli, InitKeepsTheFilesOfAFolderThatIsNotEmpty) {
  fs::path ctx = fs::path(PEAK_SOURCE_DIR) / "examples" / "matmul-hlsl-fp32";
  ASSERT_TRUE(write_file(tmp_ / "mine" / "kernel.hlsl", "// my own kernel\n"));
  ASSERT_TRUE(write_file(tmp_ / "mine" / "kernel.toml", "# mine\n"));
  Out refused = peak({"init", ctx.string(), (tmp_ / "mine").string()});
  EXPECT_EQ(refused.code, 2) << refused.err;
  EXPECT_NE(refused.err.find("--force"), std::string::npos) << refused.err;
  EXPECT_EQ(*read_file(tmp_ / "mine" / "kernel.hlsl"), "// my own kernel\n");
  EXPECT_EQ(*read_file(tmp_ / "mine" / "kernel.toml"), "# mine\n");
  Out forced = peak({"init", ctx.string(), (tmp_ / "mine").string(), "--force"});
  ASSERT_EQ(forced.code, 0) << forced.err;
  EXPECT_NE(forced.out.find("stash 1"), std::string::npos) << forced.out;
  Out status = peak({"status"}, tmp_ / "mine");
  EXPECT_NE(status.out.find("1 stash(es)"), std::string::npos) << status.out;
  Out pop = peak({"stash", "pop"}, tmp_ / "mine");
  ASSERT_EQ(pop.code, 0) << pop.err;
  EXPECT_EQ(*read_file(tmp_ / "mine" / "kernel.hlsl"), "// my own kernel\n");
}

// An output that cannot be written is an environment failure, even when the data fits the
// write buffer and the error comes only at the flush or the close.
TEST_F(Cli, AReportThatCannotBeWrittenExitsFour) {
  fs::path ws = workspace_with_device("ws", "");
  for (const char* target : {"/dev/full", "/proc/version"}) {
    SCOPED_TRACE(target);
    if (!fs::exists(target)) continue;
    Out o = peak({"report", "--format", "text", "-o", target}, ws);  // a few hundred bytes
    EXPECT_EQ(o.code, 4) << o.out << o.err;
    EXPECT_EQ(o.out.find("wrote"), std::string::npos) << o.out;
    EXPECT_NE(o.err.find(target), std::string::npos) << o.err;
  }
  EXPECT_TRUE(fs::is_character_file("/dev/full"));
  // A link is written through and stays a link.
  ASSERT_TRUE(write_file(tmp_ / "real.json", "{}"));
  fs::create_symlink("real.json", tmp_ / "report.json");
  Out o = peak({"report", "--format", "json", "-o", (tmp_ / "report.json").string()}, ws);
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_TRUE(fs::is_symlink(tmp_ / "report.json"));
  EXPECT_NE(read_file(tmp_ / "real.json")->find("peak-report"), std::string::npos);
}

// `peak mcp` given a batch of requests at once: a long call that would fail at once is answered
// before the next request is read (which is then not refused as busy), and a step still running
// when the input ends is stopped and answered: every request gets exactly one response.
TEST_F(Cli, McpAnswersEveryRequestOfAPipelinedBatch) {
  fs::path ws = scale_workspace("ws");
  auto line = [](int id, const std::string& method, const json& params) {
    return json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}}.dump() +
           "\n";
  };
  ProcessOptions o = options({"mcp", "--root", tmp_.string()}, ws, {});
  o.stdin_data =
      line(1, "initialize", {{"protocolVersion", "2025-06-18"}, {"capabilities", json::object()}}) +
      R"({"jsonrpc":"2.0","method":"notifications/initialized"})" + "\n" +
      line(2, "tools/call",
           {{"name", "apply"},
            {"arguments", {{"transformation", "add-twice"}, {"llm", "command:true"}}}}) +
      line(3, "tools/call",
           {{"name", "evaluate"}, {"arguments", {{"small", true}, {"no_baseline", true}}}});
  Out r = run(o);
  ASSERT_EQ(r.code, 0) << r.err;
  std::map<int, std::vector<json>> answers;
  for (const auto& l : split_lines(r.out)) {
    json m = json::parse(l, nullptr, false);
    ASSERT_TRUE(m.is_object()) << l;
    if (m.contains("id")) answers[m["id"].get<int>()].push_back(m);
  }
  for (int id : {1, 2, 3}) EXPECT_EQ(answers[id].size(), 1u) << "request " << id << ": " << r.out;
  ASSERT_EQ(answers[2].size(), 1u);
  EXPECT_TRUE(answers[2][0]["result"]["isError"]) << answers[2][0].dump();
  EXPECT_NE(answers[2][0].dump().find("command:"), std::string::npos) << answers[2][0].dump();
  ASSERT_EQ(answers[3].size(), 1u);
  EXPECT_EQ(answers[3][0].dump().find("peak is busy"), std::string::npos) << answers[3][0].dump();
}

}  // namespace
}  // namespace peak
