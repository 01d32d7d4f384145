// HTTP for the API drivers: one POST through libcurl, retries with backoff, error messages.
#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <ctime>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "llm/llm_internal.h"
#include "util/fs.h"

namespace peak::llm_detail {

namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* headers = static_cast<std::map<std::string, std::string>*>(user);
  std::string line(data, size * n);
  auto colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = trim(line.substr(0, colon));
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    (*headers)[name] = trim(line.substr(colon + 1));
  }
  return size * n;
}

// A connection that broke after it was made can heal; a refused connection, an unknown host or a
// bad URL or certificate cannot (asking again gives the same answer at once).
bool retryable_curl_code(CURLcode code) {
  switch (code) {
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_READ_ERROR:
      return true;
    default:
      return false;
  }
}

// What a refused or unresolvable connection means, for the message.
std::string network_hint(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
      return "nothing answers there: start the server or check the URL";
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
      return "the host name is unknown: check the URL and the network";
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
      return "the TLS certificate was refused: check the URL and the system's CA certificates";
    default:
      return retryable_curl_code(code) ? "the connection broke" : "check the URL and the network";
  }
}

}  // namespace

namespace {

HttpResponse http_request(const std::string& url, const std::vector<std::string>& headers,
                          const std::string* body, double timeout_s) {
  global_init();
  HttpResponse r;
  auto t0 = std::chrono::steady_clock::now();
  CURL* curl = curl_easy_init();
  if (!curl) {
    r.network_error = true;
    r.network_message = "cannot initialise libcurl";
    return r;
  }
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_slist* list = nullptr;
  for (const auto& h : headers) list = curl_slist_append(list, h.c_str());
  if (body) {
    list = curl_slist_append(list, "Content-Type: application/json");
    list = curl_slist_append(list, "Expect:");  // no 100-continue round trip
  }
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
  if (body) {
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body->data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size()));
  } else {
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  }
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &r.headers);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "peak");
  curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
  if (timeout_s > 0) {
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(std::max(1.0, std::ceil(timeout_s * 1000))));
  }
  // A local server is never reached through a proxy.
  if (is_loopback_host(url_host(url))) curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");

  CURLcode code = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.status);
  if (code == CURLE_OPERATION_TIMEDOUT) {
    r.timed_out = true;
  } else if (code != CURLE_OK) {
    r.network_error = true;
    r.retryable_network = retryable_curl_code(code);
    std::string what = errbuf[0] ? std::string(errbuf) : curl_easy_strerror(code);
    r.network_message = fmt::format("{} ({})", trim(what), network_hint(code));
  }
  if (code != CURLE_OK) r.status = 0;
  curl_slist_free_all(list);
  curl_easy_cleanup(curl);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace

HttpResponse http_post(const std::string& url, const std::vector<std::string>& headers,
                       const std::string& body, double timeout_s) {
  return http_request(url, headers, &body, timeout_s);
}

HttpResponse http_get(const std::string& url, const std::vector<std::string>& headers,
                      double timeout_s) {
  return http_request(url, headers, nullptr, timeout_s);
}

std::string url_escape(const std::string& segment) {
  global_init();
  char* e = curl_easy_escape(nullptr, segment.c_str(), static_cast<int>(segment.size()));
  std::string out = e ? e : segment;
  curl_free(e);
  return out;
}

double parse_retry_after(const std::string& value_in) {
  std::string value = trim(value_in);
  if (value.empty()) return -1;
  if (std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    try {
      return std::stod(value);
    } catch (const std::exception&) {
      return -1;
    }
  }
  // An HTTP date.
  time_t when = curl_getdate(value.c_str(), nullptr);
  if (when < 0) return -1;
  return std::max(0.0, std::difftime(when, std::time(nullptr)));
}

bool retryable(const HttpResponse& r) {
  if (r.timed_out) return true;
  if (r.network_error) return r.retryable_network;
  if (r.status == 429) {
    // An exhausted quota (OpenAI: "insufficient_quota") does not heal by waiting.
    return r.body.find("insufficient_quota") == std::string::npos;
  }
  return r.status >= 500;
}

HttpResponse request_with_retries(const std::string& url, const std::vector<std::string>& headers,
                                  const std::string* body, double timeout_s,
                                  const RetryPolicy& policy, int& attempts,
                                  bool* deadline_reached) {
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  auto left = [&] {
    if (policy.deadline_s <= 0) return 1e18;
    return policy.deadline_s - std::chrono::duration<double>(Clock::now() - t0).count();
  };
  if (deadline_reached) *deadline_reached = false;
  HttpResponse r;
  for (int attempt = 0;; ++attempt) {
    double limit = timeout_s;
    if (policy.deadline_s > 0) limit = timeout_s > 0 ? std::min(timeout_s, left()) : left();
    r = http_request(url, headers, body, limit);
    ++attempts;
    if (!retryable(r) || attempt >= policy.retries) return r;
    double wait = policy.backoff_s * std::pow(2.0, attempt);
    if (auto it = r.headers.find("retry-after"); it != r.headers.end()) {
      double ra = parse_retry_after(it->second);
      if (ra >= 0) wait = ra;
    }
    wait = std::clamp(wait, 0.0, std::max(0.0, policy.max_backoff_s));
    // No time for the wait and one more request: stop here.
    if (left() <= wait + 0.05) {
      if (deadline_reached) *deadline_reached = true;
      return r;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  }
}

std::string server_error_message(const std::string& body) {
  try {
    auto j = nlohmann::json::parse(body);
    if (j.is_object()) {
      if (j.contains("error")) {
        const auto& e = j["error"];
        if (e.is_object() && e.contains("message") && e["message"].is_string())
          return e["message"].get<std::string>();
        if (e.is_string()) return e.get<std::string>();
      }
      if (j.contains("message") && j["message"].is_string()) return j["message"].get<std::string>();
      if (j.contains("detail") && j["detail"].is_string()) return j["detail"].get<std::string>();
    }
  } catch (const std::exception&) {
  }
  std::string t = trim(body);
  if (t.empty()) return "(empty body)";
  if (t.size() > 300) t = t.substr(0, 300) + "...";
  return t;
}

bool classify_failure(const HttpResponse& r, const std::string& driver, const std::string& url,
                      const LlmRequest& request, int attempts, const std::string& key_env,
                      bool deadline_reached, double deadline_s, LlmReply& reply) {
  std::string where = display_url(url);
  std::string tries = attempts > 1 ? fmt::format(" after {} attempts", attempts) : "";
  if (deadline_reached)
    tries += fmt::format(" (stopped at the deadline of {} for one call; --llm-deadline changes it)",
                         format_seconds(deadline_s));
  std::string msg;
  if (r.timed_out) {
    reply.status = LlmStatus::timeout;
    msg = fmt::format(
        "{}: no reply from {} within {} (the per-request timeout){}; the server may be overloaded "
        "or the reply very long: try again later, or raise --llm-deadline",
        driver, where, format_seconds(request.timeout_s), tries);
  } else if (r.network_error) {
    reply.status = LlmStatus::failed;
    msg = fmt::format("{}: cannot reach {}{}: {}", driver, where, tries, r.network_message);
  } else if (r.status >= 200 && r.status < 300) {
    return false;
  } else {
    reply.status = LlmStatus::failed;
    std::string server = server_error_message(r.body);
    std::string hint;
    if (r.status == 401 || r.status == 403)
      hint = fmt::format("; check the API key in ${}", key_env);
    else if (r.status == 404)
      hint = "; check the model name and the base URL";
    else if (r.status == 429)
      hint = r.body.find("insufficient_quota") != std::string::npos
                 ? "; the account's quota is used up: add credit or use another key"
                 : "; the server is rate-limiting: wait and run again";
    else if (r.status >= 500)
      hint = "; the server failed: try again later";
    msg = fmt::format("{}: HTTP {} from {}{}: {}{}", driver, r.status, where, tries, server, hint);
    reply.text.clear();
  }
  reply.infrastructure = true;
  reply.error = redact(msg);
  return true;
}

namespace {

// The model ids of a listing ({"data": [{"id": ...}, ...]}, as OpenAI, Anthropic, vLLM, Ollama
// and llama.cpp answer); nullopt when the body is not such a listing.
std::optional<std::vector<std::string>> model_ids(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array()) return std::nullopt;
  std::vector<std::string> ids;
  for (const auto& m : j["data"])
    if (m.is_object() && m.contains("id") && m["id"].is_string())
      ids.push_back(m["id"].get<std::string>());
  return ids;
}

}  // namespace

std::vector<LlmCheck> check_endpoint(const std::string& driver, const std::string& model,
                                     const std::string& model_url, const std::string& list_url,
                                     const std::vector<std::string>& headers,
                                     const std::string& key_env, const RetryPolicy& policy,
                                     double timeout_s) {
  std::vector<LlmCheck> out;
  int attempts = 0;
  auto fail_http = [&](const HttpResponse& r, const std::string& url) {
    LlmRequest req;
    req.timeout_s = timeout_s;
    LlmReply reply;
    classify_failure(r, driver, url, req, attempts, key_env, false, 0, reply);
    if (r.timed_out)  // the check's own limit is fixed: --llm-deadline is for completions
      reply.error = fmt::format(
          "{}: no reply from {} within {} (the endpoint check's limit); the server accepts "
          "connections but does not answer: check that it is up and not overloaded",
          driver, display_url(url), format_seconds(timeout_s));
    if (r.status == 401 || r.status == 403) {
      out.push_back({"reachable", true, display_url(url)});
      out.push_back({"authenticated", false, reply.error});
    } else {
      out.push_back({"reachable", false, reply.error});
    }
    return out;
  };
  HttpResponse r = request_with_retries(model_url, headers, nullptr, timeout_s, policy, attempts);
  if (r.status == 200) {
    out.push_back({"reachable", true, display_url(model_url)});
    out.push_back({"authenticated", true, "the server accepted the request"});
    out.push_back({"model", true, fmt::format("the server knows {}", model)});
    return out;
  }
  if (r.status != 404) return fail_http(r, model_url);
  // No such model, or a server that does not answer for one model: ask for its list.
  HttpResponse l = request_with_retries(list_url, headers, nullptr, timeout_s, policy, attempts);
  if (l.status != 200 && l.status != 404) return fail_http(l, list_url);
  out.push_back({"reachable", true, display_url(list_url)});
  out.push_back({"authenticated", true, "the server accepted the request"});
  auto ids = l.status == 200 ? model_ids(l.body) : std::nullopt;
  if (!ids) {
    out.push_back({"model", true,
                   fmt::format("not checked: the server lists no models (HTTP {} from {})",
                               l.status, display_url(list_url))});
    return out;
  }
  if (std::find(ids->begin(), ids->end(), model) != ids->end()) {
    out.push_back({"model", true, fmt::format("the server offers {}", model)});
    return out;
  }
  std::vector<std::string> shown(ids->begin(), ids->begin() + std::min<size_t>(ids->size(), 12));
  out.push_back(
      {"model", false,
       redact(fmt::format("{}: the server at {} does not offer the model \"{}\" (it offers: {}{}); "
                          "check the model name in --llm",
                          driver, display_url(list_url), model,
                          shown.empty() ? "nothing" : join(shown, ", "),
                          ids->size() > shown.size() ? ", ..." : ""))});
  return out;
}

}  // namespace peak::llm_detail
