#pragma once
// LLM driver specs (docs/llm.md), parsed in one place: make_driver builds a driver from one, and
// the command line, the MCP server, campaigns and the engine read what one names from it.
//
//   openai:MODEL[@URL]     an OpenAI-compatible server (URL: http:// or https://)
//   anthropic:MODEL[@URL]  the Anthropic Messages API
//   command:'PROGRAM ARGS' a program: prompt on stdin, reply on stdout (quotes optional)
//   manual                 a person or an agent answers each prompt (`peak respond`)
//   replay:DIR             recorded replies; replay:NAME also names a recording shipped with
//                          peak (<data>/recordings/NAME) when NAME is no folder here
#include <filesystem>
#include <string>
#include <string_view>

#include "util/result.h"

namespace peak {

enum class LlmKind { openai, anthropic, command, manual, replay };
std::string_view to_string(LlmKind k);

struct LlmSpec {
  LlmKind kind = LlmKind::manual;
  // The spec as given, but with a shipped recording's folder in place of replay:NAME
  // ("replay:<recordings>/NAME"): what a workflow records and runs.
  std::string text;
  std::string arg;            // what follows "KIND:", trimmed ("" for manual)
  std::string model, url;     // openai, anthropic: MODEL, and URL ("" = the default endpoint)
  std::string program;        // command: the program and its arguments, outer quotes removed
  std::filesystem::path dir;  // replay: the recording folder
};

// Parses `spec`. `recordings`: the folder of the recordings shipped with peak, where replay:NAME
// is looked up when NAME is no folder here ("" = no lookup). Errors are input errors that name
// the spec (keys redacted), what is wrong and the valid forms.
Result<LlmSpec> parse_llm_spec(const std::string& spec,
                               const std::filesystem::path& recordings = {});

// The spec a workflow runs: replay:NAME of a shipped recording with its folder; every other
// spec, a malformed one too (make_driver says what is wrong with it), as given.
std::string resolve_llm_spec(const std::string& spec, const std::filesystem::path& recordings);

}  // namespace peak
