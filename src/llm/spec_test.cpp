// The LLM spec parser: every form, the errors, and the replay:NAME lookup of a shipped recording.
#include "llm/spec.h"

#include <gtest/gtest.h>

#include "util/fs.h"

namespace peak {
namespace {

TEST(LlmSpec, ParsesEveryForm) {
  auto openai = parse_llm_spec("openai:gpt-5");
  ASSERT_TRUE(openai) << openai.error();
  EXPECT_EQ(openai->kind, LlmKind::openai);
  EXPECT_EQ(openai->model, "gpt-5");
  EXPECT_EQ(openai->url, "");
  auto local = parse_llm_spec("openai:qwen@http://127.0.0.1:8080/v1");
  ASSERT_TRUE(local) << local.error();
  EXPECT_EQ(local->model, "qwen");
  EXPECT_EQ(local->url, "http://127.0.0.1:8080/v1");
  auto anthropic = parse_llm_spec("anthropic:claude@https://example.com");
  ASSERT_TRUE(anthropic) << anthropic.error();
  EXPECT_EQ(anthropic->kind, LlmKind::anthropic);
  EXPECT_EQ(anthropic->url, "https://example.com");
  auto command = parse_llm_spec("command:'cat reply.txt'");
  ASSERT_TRUE(command) << command.error();
  EXPECT_EQ(command->kind, LlmKind::command);
  EXPECT_EQ(command->program, "cat reply.txt");
  auto manual = parse_llm_spec(" manual ");
  ASSERT_TRUE(manual) << manual.error();
  EXPECT_EQ(manual->kind, LlmKind::manual);
  EXPECT_EQ(manual->text, " manual ") << "the spec is kept as given";
  auto replay = parse_llm_spec("replay: /some/recording ");
  ASSERT_TRUE(replay) << replay.error();
  EXPECT_EQ(replay->kind, LlmKind::replay);
  EXPECT_EQ(replay->dir, "/some/recording");
  EXPECT_EQ(to_string(replay->kind), "replay");
}

TEST(LlmSpec, RefusesMalformedSpecsWithTheValidForms) {
  for (const char* bad : {"", "foo:bar", "openai", "openai:", "openai:m@ftp://x", "command:''",
                          "manual:x", "replay:", "gpt-5"}) {
    auto s = parse_llm_spec(bad);
    ASSERT_FALSE(s) << bad;
    EXPECT_EQ(s.error_kind(), ErrorKind::input) << bad;
    EXPECT_NE(s.error().find("invalid LLM driver"), std::string::npos) << s.error();
    EXPECT_NE(s.error().find("valid forms"), std::string::npos) << s.error();
  }
  EXPECT_NE(parse_llm_spec("foo:bar").error().find("unknown driver \"foo\""), std::string::npos);
}

// replay:NAME names a recording under the recordings folder when NAME is no folder here; a
// folder of that name here wins, and without a recordings folder nothing is looked up.
TEST(LlmSpec, FindsAShippedRecordingByName) {
  auto tmp = make_temp_dir("peak-llm-spec-");
  ASSERT_TRUE(tmp);
  const fs::path recordings = *tmp / "recordings";
  fs::create_directories(recordings / "hlsl-test-rec");
  auto shipped = parse_llm_spec("replay:hlsl-test-rec", recordings);
  ASSERT_TRUE(shipped) << shipped.error();
  EXPECT_EQ(shipped->dir, recordings / "hlsl-test-rec");
  EXPECT_EQ(shipped->text, "replay:" + (recordings / "hlsl-test-rec").string());
  EXPECT_EQ(resolve_llm_spec("replay:hlsl-test-rec", recordings), shipped->text);
  auto unlooked = parse_llm_spec("replay:hlsl-test-rec");
  ASSERT_TRUE(unlooked);
  EXPECT_EQ(unlooked->dir, "hlsl-test-rec");
  EXPECT_EQ(unlooked->text, "replay:hlsl-test-rec");
  auto missing = parse_llm_spec("replay:no-such-recording", recordings);
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->dir, "no-such-recording") << "left for the replay driver to refuse";
  const std::string here = (*tmp / "here").string();
  fs::create_directories(here);
  auto local = parse_llm_spec("replay:" + here, recordings);
  ASSERT_TRUE(local);
  EXPECT_EQ(local->dir, here);
  EXPECT_EQ(resolve_llm_spec("foo:bar", recordings), "foo:bar") << "malformed: as given";
  EXPECT_EQ(resolve_llm_spec("openai:m", recordings), "openai:m");
  fs::remove_all(*tmp);
}

}  // namespace
}  // namespace peak
