#pragma once
// Private to src/llm: the HTTP client, secret redaction and the driver factories.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "llm/llm.h"

namespace peak::llm_detail {

// ---- secrets ---------------------------------------------------------------------------------

// Remembers an API key so that redact() removes it from every text this module writes.
void register_secret(const std::string& secret);
// Replaces every registered key, and the current values of OPENAI_API_KEY and ANTHROPIC_API_KEY,
// with "[redacted]". Values shorter than 8 characters are not treated as keys.
std::string redact(std::string text);

// ---- URLs ------------------------------------------------------------------------------------

// "https://user:pw@host:8080/v1?x=1" -> host "host".
std::string url_host(const std::string& url);
bool is_loopback_host(const std::string& host);
// The URL without credentials (user:password@) or query string, for messages and describe().
std::string display_url(const std::string& url);
// Removes trailing slashes.
std::string strip_trailing_slash(std::string url);
// Percent-encodes a path segment (a model name in a URL).
std::string url_escape(const std::string& segment);

// ---- HTTP ------------------------------------------------------------------------------------

struct HttpResponse {
  long status = 0;         // HTTP status; 0 when no response arrived
  bool timed_out = false;  // the whole request exceeded its deadline
  bool network_error = false;
  bool retryable_network = false;              // the connection broke mid-way (reset, cut reply)
  std::string network_message;                 // curl's explanation when network_error
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  double seconds = 0;
};

// POSTs `body` (JSON) to `url` with extra header lines ("Name: value"). timeout_s <= 0: no limit.
HttpResponse http_post(const std::string& url, const std::vector<std::string>& headers,
                       const std::string& body, double timeout_s);
// GETs `url` (the endpoint checks).
HttpResponse http_get(const std::string& url, const std::vector<std::string>& headers,
                      double timeout_s);

struct RetryPolicy {
  int retries = 4;
  double backoff_s = 2.0;
  double max_backoff_s = 60.0;
  double deadline_s = 0;  // every request and wait of one call together; <= 0: no limit
};

// Seconds to wait from a Retry-After header (delta-seconds or HTTP date); < 0 when absent/invalid.
double parse_retry_after(const std::string& value);

// Whether a response is worth asking again: 429 (but not an exhausted quota), 5xx, a timeout, a
// connection that broke mid-reply. Not: a refused connection, an unknown host, 4xx.
bool retryable(const HttpResponse& r);

// http_post (or http_get when `body` is nullptr) with retries on what can heal (retryable()),
// at most policy.retries extra requests and never past policy.deadline_s. `attempts` is increased
// by the number of requests made; `gave_up` (when given) tells whether the deadline stopped it.
HttpResponse request_with_retries(const std::string& url, const std::vector<std::string>& headers,
                                  const std::string* body, double timeout_s,
                                  const RetryPolicy& policy, int& attempts,
                                  bool* deadline_reached = nullptr);

// The server's explanation of an error reply: JSON error.message, error (string), message, or
// the start of the body.
std::string server_error_message(const std::string& body);

// Fills status/error of `reply` for a response that is not a 2xx success (timeout, network error,
// HTTP error; all of them infrastructure failures). Returns false when the response is a success
// and must be parsed by the caller.
bool classify_failure(const HttpResponse& r, const std::string& driver, const std::string& url,
                      const LlmRequest& request, int attempts, const std::string& key_env,
                      bool deadline_reached, double deadline_s, LlmReply& reply);

// The endpoint checks of an HTTP driver: `model_url` answers for the model (200), else the
// listing at `list_url` names it. Reachable, authenticated and model, in that order; a failed
// step ends the list.
std::vector<LlmCheck> check_endpoint(const std::string& driver, const std::string& model,
                                     const std::string& model_url, const std::string& list_url,
                                     const std::vector<std::string>& headers,
                                     const std::string& key_env, const RetryPolicy& policy,
                                     double timeout_s);

// ---- misc ------------------------------------------------------------------------------------

std::string now_iso8601();
// "tb-tiling pass 2/6 (device)" -> "tb-tiling pass 2/6, device region"; other labels unchanged.
std::string step_phrase(const std::string& step_label);
// The first 12 hex digits of a key followed by an ellipsis (for messages).
std::string key_prefix(const std::string& key);
// Last `n` bytes of a text, trimmed, with "..." in front when cut.
std::string tail(const std::string& text, size_t n);

// ---- factories -------------------------------------------------------------------------------

Result<std::unique_ptr<LlmDriver>> make_openai_driver(const std::string& model,
                                                      const std::string& url,
                                                      const DriverOptions& opts);
Result<std::unique_ptr<LlmDriver>> make_anthropic_driver(const std::string& model,
                                                         const std::string& url,
                                                         const DriverOptions& opts);
Result<std::unique_ptr<LlmDriver>> make_command_driver(const std::string& command,
                                                       const DriverOptions& opts);
Result<std::unique_ptr<LlmDriver>> make_manual_driver(const DriverOptions& opts);
Result<std::unique_ptr<LlmDriver>> make_replay_driver(const std::filesystem::path& dir);

}  // namespace peak::llm_detail
