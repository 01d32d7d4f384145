// Exit codes, error output and the text of summaries and hints, as docs/cli.md describes them:
// bad arguments exit with 2 before any device work or LLM call, errors are JSON under --json,
// summaries are for people and every "continue with" repeats the options the command used.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/testing.h"
#include "util/fs.h"

namespace peak {
namespace {

using json = nlohmann::json;

using namespace peak::testing;

// A one-step sequence of the one-pass transformation.
fs::path one_step_sequence(const fs::path& dir) {
  fs::path seq = dir / "twice.toml";
  EXPECT_TRUE(
      write_file(seq, "format = 1\nname = \"twice\"\n[[step]]\ntransformation = \"add-twice\"\n"));
  return seq;
}

class CliCodes : public Cli {
 public:
  using Cli::peak;
};

// The evaluations recorded of checkpoint 1.
size_t evaluations(CliCodes& t, const fs::path& ws) {
  Out o = t.peak({"--json", "show", "1", "--all"}, ws);
  json j = json::parse(o.out, nullptr, false);
  EXPECT_TRUE(j.is_object() && j.contains("evaluations")) << o.out << o.err;
  return j.is_object() && j.contains("evaluations") ? j["evaluations"].size() : 0;
}

TEST_F(CliCodes, RunFromPastTheLastStepIsRefused) {
  fs::path ws = scale_workspace("ws");
  fs::path seq = one_step_sequence(tmp_);
  Out o = peak({"run", seq.string(), "--from", "99", "--llm", command_llm(added_reply())}, ws);
  EXPECT_EQ(o.code, 2) << o.out << o.err;
  EXPECT_NE(o.err.find("--from 99"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("1 step"), std::string::npos) << o.err;
  EXPECT_EQ(llm_calls(), 0u);
  EXPECT_TRUE(status(ws)["workflows"].empty());
  EXPECT_EQ(checkpoints(ws), 1u);
  EXPECT_EQ(evaluations(*this, ws), 0u);
}

TEST_F(CliCodes, UnknownOrMalformedTuneIsRefusedBeforeAnyWork) {
  fs::path ws = scale_workspace("ws");
  fs::path seq = one_step_sequence(tmp_);
  const std::string llm = command_llm(added_reply());
  struct Bad {
    std::vector<std::string> args;
    std::string says;
  };
  for (const Bad& b : std::vector<Bad>{
           {{"apply", "add-twice", "--llm", llm, "--tune", "BLOCK_Z=1,2"}, "BLOCK_Z"},
           {{"run", seq.string(), "--llm", llm, "--tune", "BLOCK_Z=1,2"}, "BLOCK_Z"},
           {{"tune", "--tune", "UNKNOWN=1,2"}, "UNKNOWN"},
           {{"validate", "--tune", "UNKNOWN=1"}, "UNKNOWN"},
           {{"apply", "add-twice", "--llm", llm, "--tune", "BLOCK=32,,64"}, "empty value"},
           {{"tune", "--tune", "=32,64"}, "no parameter name"},
           {{"tune", "--tune", "BLOCK=32,32"}, "twice"},
           {{"tune", "--tune", "BLOCK=32", "--tune", "BLOCK=64"}, "twice"},
           {{"tune", "--tune", "BLOCK=x"}, "not an integer"},
       }) {
    Out o = peak(b.args, ws);
    EXPECT_EQ(o.code, 2) << b.args[0] << " " << b.args.back() << o.out << o.err;
    EXPECT_NE(o.err.find(b.says), std::string::npos) << o.err;
    EXPECT_EQ(o.err.find("does not pass"), std::string::npos) << o.err;
  }
  // The unknown names are named with the parameters there are.
  Out o = peak({"tune", "--tune", "UNKNOWN=1,2"}, ws);
  EXPECT_NE(o.err.find("BLOCK"), std::string::npos) << o.err;
  EXPECT_EQ(llm_calls(), 0u);
  EXPECT_EQ(evaluations(*this, ws), 0u);
  EXPECT_TRUE(status(ws)["workflows"].empty());
}

TEST_F(CliCodes, ExitCodesFollowTheDocsAndErrorsAreJsonUnderJson) {
  fs::path ws = scale_workspace("ws");
  Out replay = peak({"apply", "add-twice", "--llm", "replay:/missing/recordings"}, ws);
  EXPECT_EQ(replay.code, 2) << replay.out << replay.err;
  EXPECT_NE(replay.err.find("/missing/recordings"), std::string::npos) << replay.err;
  EXPECT_EQ(replay.err.find("not_run"), std::string::npos) << replay.err;
  for (const char* cmd : {"show", "report"}) {
    Out o = peak({cmd, "99"}, ws);
    EXPECT_EQ(o.code, 2) << cmd << o.out << o.err;
    EXPECT_NE(o.err.find("99"), std::string::npos) << o.err;
  }
  // Under --json every error is one JSON object on standard output.
  fs::path seq = one_step_sequence(tmp_);
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"show", "99"},
           {"report", "99"},
           {"tune", "--tune", "UNKNOWN=1,2"},
           {"run", seq.string(), "--from", "99"},
           {"apply", "add-twice", "--llm", "replay:/missing/recordings"},
           {"lgo"},
           {"log", "--no-such-option"},
       }) {
    std::vector<std::string> with_json = args;
    with_json.insert(with_json.begin(), "--json");
    Out o = peak(with_json, ws);
    EXPECT_EQ(o.code, 2) << args[0] << o.out << o.err;
    json j = json::parse(o.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << args[0] << ": " << o.out << o.err;
    std::string message =
        j.contains("error") ? j["error"].value("message", "") : j.value("message", "");
    EXPECT_FALSE(message.empty()) << o.out;
    EXPECT_EQ(o.err.find("peak: "), std::string::npos) << o.err;
  }
  Out show = peak({"--json", "show", "99"}, ws);
  json j = json::parse(show.out, nullptr, false);
  EXPECT_EQ(j["error"]["exit_code"], 2) << show.out;
  EXPECT_NE(j["error"]["message"].get<std::string>().find("99"), std::string::npos) << show.out;
}

TEST_F(CliCodes, SummariesAreForPeopleAndHintsRepeatTheOptions) {
  fs::path ws = scale_workspace("ws");
  Out t = peak({"-q", "tune", "--budget", "1", "--small"}, ws);
  ASSERT_EQ(t.code, 0) << t.out << t.err;
  EXPECT_NE(t.out.find("configurations: 1 of 2 (budget 1"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("\n  BLOCK="), std::string::npos) << t.out;  // a configuration, its time
  EXPECT_NE(t.out.find(" ms\n"), std::string::npos) << t.out;
  EXPECT_EQ(t.out.find("{\""), std::string::npos) << t.out;
  // A manual run waits: the hint, and the workflow line of log and status, repeat its options.
  fs::path seq = one_step_sequence(tmp_);
  Out m = peak({"-q", "run", seq.string(), "--llm", "manual", "--budget", "1", "--small",
                "--instructions", "keep it short"},
               ws);
  ASSERT_EQ(m.code, 3) << m.out << m.err;
  const std::string resume = "peak run " + seq.string() +
                             " --resume --llm manual --small --budget 1 --instructions 'keep it "
                             "short'";
  EXPECT_NE(m.out.find(resume), std::string::npos) << m.out;
  Out log = peak({"log"}, ws);
  EXPECT_NE(log.out.find("peak run twice --resume --llm manual --small --budget 1"),
            std::string::npos)
      << log.out;
  // A step that used up its attempts: the hint gives more attempts with the same options.
  Out f = peak({"apply", "add-twice", "--llm", command_llm("no code block here"), "--attempts", "1",
                "--budget", "1", "--small"},
               ws);
  ASSERT_EQ(f.code, 1) << f.out << f.err;
  EXPECT_NE(f.err.find("--small --budget 1 --attempts 4`"), std::string::npos) << f.err;
}

}  // namespace
}  // namespace peak
