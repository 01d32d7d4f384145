// The HTTP drivers: OpenAI Chat Completions (and compatible servers) and Anthropic Messages.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "llm/llm_internal.h"
#include "util/fs.h"

namespace peak::llm_detail {

namespace {

using nlohmann::json;

std::string getenv_str(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  return v ? std::string(v) : std::string();
}

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int int_field(const json& obj, const char* name) {
  if (obj.is_object() && obj.contains(name) && obj[name].is_number_integer())
    return obj[name].get<int>();
  return 0;
}

std::string str_field(const json& obj, const char* name) {
  if (obj.is_object() && obj.contains(name) && obj[name].is_string())
    return obj[name].get<std::string>();
  return "";
}

std::string body_start(const std::string& body) {
  std::string t = trim(body);
  return t.size() > 200 ? t.substr(0, 200) + "..." : t;
}

// Looks up the API key. `default_env` is used unless opts.key_env names another variable.
// `required` means the key must be present (the official endpoint).
Result<std::string> load_key(const DriverOptions& opts, const std::string& default_env,
                             bool required, const std::string& driver, std::string& env_name) {
  env_name = opts.key_env.empty() ? default_env : opts.key_env;
  std::string key = getenv_str(env_name);
  if (key.empty() && !opts.key_env.empty())
    return make_error(
        fmt::format("{}: the API key variable ${} (named by --key-env) is not set; export it first",
                    driver, env_name),
        ErrorKind::environment);
  if (key.empty() && required)
    return make_error(fmt::format("{}: no API key: set {} in the environment (export {}=...)",
                                  driver, env_name, env_name),
                      ErrorKind::environment);
  register_secret(key);
  return key;
}

// What the two HTTP API drivers share: the endpoint, the key and the retry policy.
class ApiDriver : public LlmDriver {
 public:
  ApiDriver(std::string name, std::string model, std::string base, bool show_base, std::string key,
            std::string key_env, RetryPolicy policy, double check_timeout_s)
      : name_(std::move(name)),
        model_(std::move(model)),
        base_(std::move(base)),
        show_base_(show_base),
        key_(std::move(key)),
        key_env_(std::move(key_env)),
        policy_(policy),
        check_timeout_s_(check_timeout_s) {}

  std::string describe() const override {
    std::string d = name_ + ":" + model_;
    if (show_base_) d += "@" + display_url(base_);
    return redact(d);
  }

 protected:
  // A reply carrying this driver's identity, before the request is made.
  LlmReply new_reply() const {
    LlmReply reply;
    reply.driver = name_;
    reply.model = model_;
    reply.producer = name_ + ":" + model_;
    return reply;
  }

  // Marks `reply` as an infrastructure failure (the endpoint's fault, not the candidate's).
  void fail_reply(LlmReply& reply, const std::string& what, const std::string& url,
                  const std::string& body) const {
    reply.status = LlmStatus::failed;
    reply.infrastructure = true;
    reply.error = redact(fmt::format("{}: the reply from {} {}: {}", name_, display_url(url), what,
                                     body_start(body)));
  }

  // The reply body as a JSON object, or nullopt with `reply` marked as a failure.
  std::optional<json> parse_reply(const HttpResponse& r, const std::string& url,
                                  LlmReply& reply) const {
    json j = json::parse(r.body, nullptr, false);
    if (j.is_discarded()) {
      fail_reply(reply, "is not JSON", url, r.body);
      return std::nullopt;
    }
    return j;
  }

  // Nothing a server sends back is trusted to be free of the key.
  static void redact_reply(LlmReply& reply) {
    reply.text = redact(std::move(reply.text));
    reply.model = redact(std::move(reply.model));
    reply.producer = redact(std::move(reply.producer));
  }

  // The endpoint checks: a few quick requests, never past the check timeout in all.
  std::vector<LlmCheck> check_with(const std::string& model_url, const std::string& list_url,
                                   const std::vector<std::string>& headers) {
    RetryPolicy quick = policy_;
    quick.deadline_s = check_timeout_s_;
    return check_endpoint(name_, model_, model_url, list_url, headers, key_env_, quick,
                          check_timeout_s_);
  }

  std::string name_, model_, base_;
  bool show_base_;
  std::string key_, key_env_;
  RetryPolicy policy_;
  double check_timeout_s_;
};

class OpenAiDriver : public ApiDriver {
 public:
  OpenAiDriver(std::string model, std::string base, bool show_base, std::string key,
               std::string key_env, RetryPolicy policy, double check_timeout_s)
      : ApiDriver("openai", std::move(model), std::move(base), show_base, std::move(key),
                  std::move(key_env), policy, check_timeout_s) {}

  std::vector<LlmCheck> check() override {
    return check_with(base_ + "/models/" + url_escape(model_), base_ + "/models", headers());
  }

  LlmReply complete(const LlmRequest& request) override {
    auto t0 = std::chrono::steady_clock::now();
    LlmReply reply = new_reply();
    std::string url = base_ + "/chat/completions";
    HttpResponse r;
    int attempts = 0;
    bool deadline_reached = false;
    for (int round = 0; round < 2; ++round) {
      json messages = json::array();
      if (!request.system.empty())
        messages.push_back({{"role", "system"}, {"content", request.system}});
      messages.push_back({{"role", "user"}, {"content", request.user}});
      json body = {{"model", model_}, {"messages", messages}};
      body[use_max_tokens_ ? "max_tokens" : "max_completion_tokens"] = request.max_tokens;
      std::string text = dump_json(body);
      r = request_with_retries(url, headers(), &text, request.timeout_s, policy_, attempts,
                               &deadline_reached);
      // Older servers only know "max_tokens": switch once and remember.
      if (r.status == 400 && !use_max_tokens_ &&
          r.body.find("max_completion_tokens") != std::string::npos) {
        use_max_tokens_ = true;
        continue;
      }
      break;
    }
    reply.http_attempts = attempts;
    reply.latency_s = since(t0);
    if (classify_failure(r, "openai", url, request, attempts, key_env_, deadline_reached,
                         policy_.deadline_s, reply))
      return reply;

    auto parsed = parse_reply(r, url, reply);
    if (!parsed) return reply;
    const json& j = *parsed;
    if (!j.is_object() || !j.contains("choices") || !j["choices"].is_array() ||
        j["choices"].empty() || !j["choices"][0].is_object()) {
      fail_reply(reply, "has no choices", url, r.body);
      return reply;
    }
    const json& choice = j["choices"][0];
    if (auto m = str_field(j, "model"); !m.empty()) {
      reply.model = m;
      reply.producer = "openai:" + m;
    }
    if (j.contains("usage")) {
      reply.prompt_tokens = int_field(j["usage"], "prompt_tokens");
      reply.completion_tokens = int_field(j["usage"], "completion_tokens");
    }
    reply.finish_reason = str_field(choice, "finish_reason");
    if (choice.contains("message") && choice["message"].is_object()) {
      const json& content =
          choice["message"].contains("content") ? choice["message"]["content"] : json();
      if (content.is_string()) {
        reply.text = content.get<std::string>();
      } else if (content.is_array()) {  // content parts
        for (const auto& part : content)
          if (part.is_object() && part.contains("text") && part["text"].is_string())
            reply.text += part["text"].get<std::string>();
      }
    }
    redact_reply(reply);
    if (reply.finish_reason == "length") {
      reply.status = LlmStatus::truncated;
      reply.error = fmt::format(
          "openai: the reply was cut off at the token limit (finish_reason \"length\", "
          "max_tokens {}); raise max_tokens or ask for a shorter reply",
          request.max_tokens);
      return reply;
    }
    if (reply.text.empty()) {
      std::string refusal;
      if (choice.contains("message")) refusal = str_field(choice["message"], "refusal");
      reply.status = LlmStatus::failed;
      reply.error = redact(refusal.empty()
                               ? fmt::format("openai: the reply has no text (finish_reason \"{}\")",
                                             reply.finish_reason)
                               : fmt::format("openai: the model refused: {}", refusal));
      return reply;
    }
    reply.status = LlmStatus::ok;
    return reply;
  }

 private:
  std::vector<std::string> headers() const {
    std::vector<std::string> h;
    if (!key_.empty()) h.push_back("Authorization: Bearer " + key_);
    return h;
  }

  std::atomic<bool> use_max_tokens_{false};
};

class AnthropicDriver : public ApiDriver {
 public:
  AnthropicDriver(std::string model, std::string base, bool show_base, std::string key,
                  std::string key_env, RetryPolicy policy, double check_timeout_s)
      : ApiDriver("anthropic", std::move(model), std::move(base), show_base, std::move(key),
                  std::move(key_env), policy, check_timeout_s) {}

  std::vector<LlmCheck> check() override {
    // GET /v1/models/{model} also resolves aliases (claude-sonnet-4-5 -> a dated id).
    return check_with(v1() + "/models/" + url_escape(model_), v1() + "/models?limit=1000",
                      headers());
  }

  LlmReply complete(const LlmRequest& request) override {
    auto t0 = std::chrono::steady_clock::now();
    LlmReply reply = new_reply();
    std::string url = v1() + "/messages";
    json body = {{"model", model_},
                 {"max_tokens", request.max_tokens},
                 {"messages", json::array({{{"role", "user"}, {"content", request.user}}})}};
    if (!request.system.empty()) body["system"] = request.system;
    int attempts = 0;
    bool deadline_reached = false;
    std::string text = dump_json(body);
    HttpResponse r = request_with_retries(url, headers(), &text, request.timeout_s, policy_,
                                          attempts, &deadline_reached);
    reply.http_attempts = attempts;
    reply.latency_s = since(t0);
    if (classify_failure(r, "anthropic", url, request, attempts, key_env_, deadline_reached,
                         policy_.deadline_s, reply))
      return reply;

    auto parsed = parse_reply(r, url, reply);
    if (!parsed) return reply;
    const json& j = *parsed;
    if (!j.is_object() || !j.contains("content") || !j["content"].is_array()) {
      fail_reply(reply, "has no content", url, r.body);
      return reply;
    }
    for (const auto& block : j["content"])
      if (block.is_object() && str_field(block, "type") == "text")
        reply.text += str_field(block, "text");
    if (auto m = str_field(j, "model"); !m.empty()) {
      reply.model = m;
      reply.producer = "anthropic:" + m;
    }
    if (j.contains("usage")) {
      reply.prompt_tokens = int_field(j["usage"], "input_tokens");
      reply.completion_tokens = int_field(j["usage"], "output_tokens");
    }
    reply.finish_reason = str_field(j, "stop_reason");
    redact_reply(reply);
    if (reply.finish_reason == "max_tokens") {
      reply.status = LlmStatus::truncated;
      reply.error = fmt::format(
          "anthropic: the reply was cut off at the token limit (stop_reason \"max_tokens\", "
          "max_tokens {}); raise max_tokens or ask for a shorter reply",
          request.max_tokens);
      return reply;
    }
    if (reply.text.empty()) {
      reply.status = LlmStatus::failed;
      reply.error =
          fmt::format("anthropic: the reply has no text (stop_reason \"{}\")", reply.finish_reason);
      return reply;
    }
    reply.status = LlmStatus::ok;
    return reply;
  }

 private:
  // The API root: a base given with or without the /v1 suffix.
  std::string v1() const {
    return base_.size() >= 3 && base_.substr(base_.size() - 3) == "/v1" ? base_ : base_ + "/v1";
  }
  std::vector<std::string> headers() const {
    std::vector<std::string> h = {"anthropic-version: 2023-06-01"};
    if (!key_.empty()) h.push_back("x-api-key: " + key_);
    return h;
  }
};

RetryPolicy policy_from(const DriverOptions& opts) {
  return RetryPolicy{std::max(0, opts.retries), std::max(0.0, opts.backoff_s),
                     std::max(0.0, opts.max_backoff_s), opts.deadline_s};
}

}  // namespace

Result<std::unique_ptr<LlmDriver>> make_openai_driver(const std::string& model,
                                                      const std::string& url,
                                                      const DriverOptions& opts) {
  constexpr const char* kDefault = "https://api.openai.com/v1";
  std::string base = url;
  if (base.empty()) base = getenv_str("OPENAI_BASE_URL");
  bool show_base = !base.empty();
  if (base.empty()) base = kDefault;
  base = strip_trailing_slash(base);
  if (!starts_with(base, "http://") && !starts_with(base, "https://"))
    return make_error(
        fmt::format("openai: the base URL \"{}\" must start with http:// or https:// (from {})",
                    display_url(base), url.empty() ? "$OPENAI_BASE_URL" : "the --llm spec"),
        ErrorKind::input);
  std::string host = url_host(base);
  bool official = host == "api.openai.com";
  std::string env_name;
  auto key = load_key(opts, "OPENAI_API_KEY", official, "openai", env_name);
  if (!key) return Error{key.error(), key.error_kind()};
  return std::unique_ptr<LlmDriver>(new OpenAiDriver(model, base, show_base, *key, env_name,
                                                     policy_from(opts), opts.check_timeout_s));
}

Result<std::unique_ptr<LlmDriver>> make_anthropic_driver(const std::string& model,
                                                         const std::string& url,
                                                         const DriverOptions& opts) {
  constexpr const char* kDefault = "https://api.anthropic.com";
  std::string base = url;
  if (base.empty()) base = getenv_str("ANTHROPIC_BASE_URL");
  bool show_base = !base.empty();
  if (base.empty()) base = kDefault;
  base = strip_trailing_slash(base);
  if (!starts_with(base, "http://") && !starts_with(base, "https://"))
    return make_error(
        fmt::format("anthropic: the base URL \"{}\" must start with http:// or https:// (from {})",
                    display_url(base), url.empty() ? "$ANTHROPIC_BASE_URL" : "the --llm spec"),
        ErrorKind::input);
  bool official = url_host(base) == "api.anthropic.com";
  std::string env_name;
  auto key = load_key(opts, "ANTHROPIC_API_KEY", official, "anthropic", env_name);
  if (!key) return Error{key.error(), key.error_kind()};
  return std::unique_ptr<LlmDriver>(new AnthropicDriver(model, base, show_base, *key, env_name,
                                                        policy_from(opts), opts.check_timeout_s));
}

}  // namespace peak::llm_detail
