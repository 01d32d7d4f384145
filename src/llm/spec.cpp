#include "llm/spec.h"

#include <fmt/format.h>

#include "llm/llm_internal.h"
#include "util/fs.h"

namespace peak {

namespace {

constexpr const char* kValidForms =
    "valid forms:\n"
    "  openai:MODEL                      OpenAI Chat Completions ($OPENAI_BASE_URL or "
    "api.openai.com)\n"
    "  openai:MODEL@http://host:port/v1  any OpenAI-compatible server (llama.cpp, vLLM, Ollama)\n"
    "  anthropic:MODEL[@URL]             Anthropic Messages API\n"
    "  command:'PROGRAM ARGS'            a program: prompt on stdin, reply on stdout\n"
    "  manual                            prompt written to .peak/manual/, reply from `peak "
    "respond`\n"
    "  replay:DIR                        recorded replies (see --record)";

Error bad_spec(const std::string& spec, const std::string& why) {
  return make_error(
      fmt::format("invalid LLM driver \"{}\": {}; {}", llm_detail::redact(spec), why, kValidForms),
      ErrorKind::input);
}

// "MODEL" or "MODEL@URL" -> (model, url).
Status split_model_url(const std::string& spec, const std::string& rest, const std::string& driver,
                       LlmSpec& out) {
  std::string model = rest, url;
  for (const char* scheme : {"@http://", "@https://"}) {
    if (auto at = rest.find(scheme); at != std::string::npos) {
      model = rest.substr(0, at);
      url = rest.substr(at + 1);
      break;
    }
  }
  if (url.empty() && model.find('@') != std::string::npos)
    return bad_spec(spec, "the part after '@' must be an http:// or https:// URL");
  if (model.empty())
    return bad_spec(spec, fmt::format("{} needs a model name ({}:MODEL)", driver, driver));
  out.model = model;
  out.url = url;
  return Status::ok();
}

// replay:DIR, or replay:NAME of a recording under `recordings` when NAME is no folder here.
void find_recording(LlmSpec& out, const std::filesystem::path& recordings) {
  out.dir = out.arg;
  std::error_code ec;
  if (recordings.empty() || std::filesystem::exists(out.arg, ec) ||
      !std::filesystem::is_directory(recordings / out.arg, ec))
    return;
  out.dir = recordings / out.arg;
  out.text = "replay:" + out.dir.string();
}

}  // namespace

std::string_view to_string(LlmKind k) {
  switch (k) {
    case LlmKind::openai:
      return "openai";
    case LlmKind::anthropic:
      return "anthropic";
    case LlmKind::command:
      return "command";
    case LlmKind::manual:
      return "manual";
    case LlmKind::replay:
      return "replay";
  }
  return "manual";
}

Result<LlmSpec> parse_llm_spec(const std::string& spec_in,
                               const std::filesystem::path& recordings) {
  std::string spec = trim(spec_in);
  if (spec.empty()) return bad_spec(spec, "the spec is empty");
  auto colon = spec.find(':');
  std::string kind = spec.substr(0, colon);
  std::string rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
  LlmSpec out;
  out.text = spec_in;
  out.arg = trim(rest);
  if (kind == "openai" || kind == "anthropic") {
    out.kind = kind == "openai" ? LlmKind::openai : LlmKind::anthropic;
    if (colon == std::string::npos)
      return bad_spec(spec, fmt::format("{} needs a model name ({}:MODEL)", kind, kind));
    if (auto s = split_model_url(spec, rest, kind, out); !s) return s;
    return out;
  }
  if (kind == "command") {
    out.kind = LlmKind::command;
    std::string cmd = out.arg;
    if (cmd.size() >= 2 && (cmd.front() == '\'' || cmd.front() == '"') && cmd.back() == cmd.front())
      cmd = cmd.substr(1, cmd.size() - 2);
    if (trim(cmd).empty())
      return bad_spec(spec, "command needs a program (command:'PROGRAM ARGS')");
    out.program = cmd;
    return out;
  }
  if (kind == "manual") {
    if (!out.arg.empty()) return bad_spec(spec, "manual takes no argument");
    return out;
  }
  if (kind == "replay") {
    out.kind = LlmKind::replay;
    if (out.arg.empty()) return bad_spec(spec, "replay needs a directory (replay:DIR)");
    find_recording(out, recordings);
    return out;
  }
  return bad_spec(spec, fmt::format("unknown driver \"{}\"", kind));
}

std::string resolve_llm_spec(const std::string& spec, const std::filesystem::path& recordings) {
  auto parsed = parse_llm_spec(spec, recordings);
  return parsed ? parsed->text : spec;
}

}  // namespace peak
