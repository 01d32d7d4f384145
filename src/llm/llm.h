#pragma once
// LLM drivers behind one interface (docs/llm.md).
//
// Spec strings (make_driver):
//   openai:MODEL                      OpenAI Chat Completions at $OPENAI_BASE_URL or api.openai.com
//   openai:MODEL@http://host:port/v1  any OpenAI-compatible server (llama.cpp, vLLM, Ollama)
//   anthropic:MODEL[@URL]             Anthropic Messages API
//   command:'PROGRAM ARGS'            runs a program: prompt on stdin, reply on stdout
//   manual                            prompt written to .peak/manual/, reply from `peak respond`
//   replay:DIR                        recorded replies keyed by the prompt hash
// Keys come only from the environment (OPENAI_API_KEY, ANTHROPIC_API_KEY, or the variable named
// by --key-env) and are never stored, logged or echoed.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "util/result.h"

namespace peak {

struct LlmRequest {
  std::string system;
  std::string user;
  std::string key;         // sha256 of the prompt (Prompt::key())
  std::string step_label;  // "tb-tiling pass 2/6 (device)": used in messages and recordings
  int attempt = 0;         // the transformation's attempt (1, 2, ...; 0 = not known): messages
  // How many answers to this very prompt the caller already used (a resumed workflow that asks
  // an identical prompt again). Manual and replay drivers skip that many of their answers.
  int served_before = 0;
  int max_tokens = 16384;
  double timeout_s = 600;  // per HTTP request / command run
};

enum class LlmStatus {
  ok,
  failed,     // network, HTTP error, bad JSON, non-zero exit, ...
  truncated,  // finish_reason "length" / stop_reason "max_tokens"
  timeout,    // no reply within timeout_s
  pending,    // manual mode: the prompt is written, the reply is not there yet
  miss,       // replay: no recording for this prompt
};
std::string_view to_string(LlmStatus s);

struct LlmReply {
  LlmStatus status = LlmStatus::failed;
  std::string text;           // the reply (also kept for failed attempts when there was one)
  std::string error;          // user-facing message when status != ok
  std::string driver;         // "openai", "anthropic", "command", "manual", "replay"
  std::string model;          // as reported by the server, or from the spec
  std::string producer;       // who or what produced the reply ("openai:gpt-5", "human: NAME")
  std::string finish_reason;  // as reported
  int prompt_tokens = 0;
  int completion_tokens = 0;
  double latency_s = 0;
  int http_attempts = 0;  // requests made, retries included
  // The failure was the service's, not the model's: endpoint down, authentication, quota,
  // server errors, a command that failed, a manual reply that did not come, no recording.
  // Such a failure is not charged to the model or the transformation (docs/llm.md).
  bool infrastructure = false;
  // Manual mode, status pending: the prompt's id and file.
  std::string pending_id, pending_path;
  bool ok() const { return status == LlmStatus::ok; }
};

// One check of an endpoint before a campaign (reachable, authenticated, model offered, ...).
struct LlmCheck {
  std::string what;
  bool ok = false;
  std::string detail;
};

class LlmDriver {
 public:
  virtual ~LlmDriver() = default;
  virtual LlmReply complete(const LlmRequest& request) = 0;
  virtual std::string describe() const = 0;  // the spec, minus anything secret
  // What can be checked without asking the model anything: the endpoint answers, accepts the
  // key and offers the model; a command's program exists. Fast: a refused connection fails at
  // once. Empty when there is nothing to check.
  virtual std::vector<LlmCheck> check() { return {}; }
};

// The first failed check() as an environment error (exit code 4), else ok.
Status preflight(LlmDriver& driver);

struct DriverOptions {
  std::filesystem::path workspace;  // manual mode writes under workspace/.peak/manual
  int retries = 4;                  // on 429 / 5xx / timeouts / a connection cut mid-reply
  double backoff_s = 2.0;           // first backoff; doubles; Retry-After wins when given
  double max_backoff_s = 60.0;
  double deadline_s = 1200;     // one call, every retry and wait included (--llm-deadline)
  double check_timeout_s = 10;  // each request of check()
  std::string key_env;          // overrides the default API-key variable
  bool manual_wait = false;     // manual: block until the reply file appears
  double manual_poll_s = 1.0;
  std::string producer;  // manual/command: who produces the replies (recorded)
};

// Errors: a malformed spec is ErrorKind::input (exit code 2); a missing key is
// ErrorKind::environment (exit code 4).
Result<std::unique_ptr<LlmDriver>> make_driver(const std::string& spec, const DriverOptions& opts);

// Wraps a driver so that every exchange (successful or not) is written to `dir` as
// <NNNN>-<key16>.json (format documented in docs/llm.md) for later replay.
std::unique_ptr<LlmDriver> make_recording_driver(std::unique_ptr<LlmDriver> inner,
                                                 const std::filesystem::path& dir,
                                                 std::string note = "");

// Manual mode: the reply for pending prompt `id` (as printed when the prompt was written).
Status respond_manual(const std::filesystem::path& workspace, const std::string& id,
                      const std::string& reply_text, const std::string& producer);
struct PendingPrompt {
  std::string id;
  std::string step_label;
  std::filesystem::path prompt_path;
  bool answered = false;
};
std::vector<PendingPrompt> list_manual(const std::filesystem::path& workspace);

}  // namespace peak
