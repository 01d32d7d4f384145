#include "llm/llm.h"

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "llm/llm_internal.h"
#include "llm/spec.h"
#include "util/fs.h"

namespace peak {

std::string_view to_string(LlmStatus s) {
  switch (s) {
    case LlmStatus::ok:
      return "ok";
    case LlmStatus::failed:
      return "failed";
    case LlmStatus::truncated:
      return "truncated";
    case LlmStatus::timeout:
      return "timeout";
    case LlmStatus::pending:
      return "pending";
    case LlmStatus::miss:
      return "miss";
  }
  return "failed";
}

namespace llm_detail {

namespace {
std::mutex& secrets_mutex() {
  static std::mutex m;
  return m;
}
std::set<std::string>& secrets() {
  static std::set<std::string> s;
  return s;
}
constexpr size_t kMinSecretLength = 8;
}  // namespace

void register_secret(const std::string& secret) {
  if (secret.size() < kMinSecretLength) return;
  std::lock_guard lock(secrets_mutex());
  secrets().insert(secret);
}

std::string redact(std::string text) {
  std::set<std::string> all;
  {
    std::lock_guard lock(secrets_mutex());
    all = secrets();
  }
  for (const char* var : {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}) {
    const char* v = std::getenv(var);
    if (v && std::string_view(v).size() >= kMinSecretLength) all.insert(v);
  }
  for (const auto& s : all) text = replace_all(std::move(text), s, "[redacted]");
  return text;
}

namespace {
// Splits "scheme://authority/path?query" into its parts (authority may hold user:pw@).
struct UrlParts {
  std::string scheme, userinfo, hostport, path;
};
UrlParts split_url(const std::string& url) {
  UrlParts p;
  std::string rest = url;
  if (auto s = rest.find("://"); s != std::string::npos) {
    p.scheme = rest.substr(0, s);
    rest = rest.substr(s + 3);
  }
  size_t end = rest.find_first_of("/?#");
  std::string authority = rest.substr(0, end);
  p.path = end == std::string::npos ? "" : rest.substr(end);
  if (auto at = authority.rfind('@'); at != std::string::npos) {
    p.userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
  }
  p.hostport = authority;
  return p;
}
}  // namespace

std::string url_host(const std::string& url) {
  std::string hp = split_url(url).hostport;
  if (starts_with(hp, "[")) {  // [::1]:8080
    auto close = hp.find(']');
    return close == std::string::npos ? hp : hp.substr(1, close - 1);
  }
  if (auto colon = hp.rfind(':'); colon != std::string::npos) hp = hp.substr(0, colon);
  for (auto& c : hp) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return hp;
}

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || starts_with(host, "127.") || host == "0.0.0.0";
}

std::string display_url(const std::string& url) {
  UrlParts p = split_url(url);
  std::string path = p.path.substr(0, p.path.find_first_of("?#"));
  return (p.scheme.empty() ? "" : p.scheme + "://") + p.hostport + path;
}

std::string strip_trailing_slash(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

std::string now_iso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string step_phrase(const std::string& label) {
  auto open = label.rfind(" (");
  if (open == std::string::npos || label.empty() || label.back() != ')') return label;
  std::string region = label.substr(open + 2, label.size() - open - 3);
  if (region.empty()) return label;
  return label.substr(0, open) + ", " + region + " region";
}

std::string key_prefix(const std::string& key) {
  if (key.empty()) return "(empty)";
  if (key.size() <= 12) return key;
  return key.substr(0, 12) + "\u2026";
}

std::string tail(const std::string& text, size_t n) {
  std::string t = trim(text);
  if (t.size() <= n) return t;
  return "..." + t.substr(t.size() - n);
}

}  // namespace llm_detail

Status preflight(LlmDriver& driver) {
  for (const auto& c : driver.check())
    if (!c.ok)
      return Status::error(llm_detail::redact(fmt::format("{}: {}", driver.describe(), c.detail)),
                           ErrorKind::environment);
  return Status::ok();
}

Result<std::unique_ptr<LlmDriver>> make_driver(const std::string& spec_in,
                                               const DriverOptions& opts) {
  auto spec = parse_llm_spec(spec_in);
  if (!spec) return Error{spec.error(), spec.error_kind()};
  switch (spec->kind) {
    case LlmKind::openai:
      return llm_detail::make_openai_driver(spec->model, spec->url, opts);
    case LlmKind::anthropic:
      return llm_detail::make_anthropic_driver(spec->model, spec->url, opts);
    case LlmKind::command:
      return llm_detail::make_command_driver(spec->program, opts);
    case LlmKind::manual:
      return llm_detail::make_manual_driver(opts);
    case LlmKind::replay:
      return llm_detail::make_replay_driver(spec->dir);
  }
  return make_error("unknown LLM driver kind", ErrorKind::input);
}

}  // namespace peak
