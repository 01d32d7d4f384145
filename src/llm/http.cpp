// HTTP for the API drivers: one POST through libcurl, retries with backoff, error messages.
#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <ctime>
#include <mutex>
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

bool retryable_curl_code(CURLcode code) {
  switch (code) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_NOT_BUILT_IN:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_BAD_FUNCTION_ARGUMENT:
    case CURLE_OUT_OF_MEMORY:
      return false;
    default:
      return true;
  }
}

}  // namespace

HttpResponse http_post(const std::string& url, const std::vector<std::string>& headers,
                       const std::string& body, double timeout_s) {
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
  list = curl_slist_append(list, "Content-Type: application/json");
  list = curl_slist_append(list, "Expect:");  // no 100-continue round trip
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(curl, CURLOPT_POST, 1L);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
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
    r.network_message = errbuf[0] ? std::string(errbuf) : curl_easy_strerror(code);
    r.network_message = trim(r.network_message);
  }
  if (code != CURLE_OK) r.status = 0;
  curl_slist_free_all(list);
  curl_easy_cleanup(curl);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
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

HttpResponse post_with_retries(const std::string& url, const std::vector<std::string>& headers,
                               const std::string& body, double timeout_s, const RetryPolicy& policy,
                               int& attempts) {
  HttpResponse r;
  for (int attempt = 0;; ++attempt) {
    r = http_post(url, headers, body, timeout_s);
    ++attempts;
    bool retry = (r.network_error && r.retryable_network) || r.status == 429 || r.status >= 500;
    if (!retry || attempt >= policy.retries) return r;
    double wait = policy.backoff_s * std::pow(2.0, attempt);
    if (auto it = r.headers.find("retry-after"); it != r.headers.end()) {
      double ra = parse_retry_after(it->second);
      if (ra >= 0) wait = ra;
    }
    wait = std::clamp(wait, 0.0, std::max(0.0, policy.max_backoff_s));
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
                      LlmReply& reply) {
  std::string where = display_url(url);
  std::string tries = attempts > 1 ? fmt::format(" after {} attempts", attempts) : "";
  std::string msg;
  if (r.timed_out) {
    reply.status = LlmStatus::timeout;
    msg = fmt::format(
        "{}: no reply from {} within {} (the per-request timeout){}; the server may be overloaded "
        "or the reply very long: raise the LLM timeout or try again",
        driver, where, format_seconds(request.timeout_s), tries);
  } else if (r.network_error) {
    reply.status = LlmStatus::failed;
    msg = fmt::format("{}: cannot reach {}{}: {}; check the URL and that the server is running",
                      driver, where, tries, r.network_message);
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
      hint = "; the server is rate-limiting: wait and run again";
    else if (r.status >= 500)
      hint = "; the server failed: try again later";
    msg = fmt::format("{}: HTTP {} from {}{}: {}{}", driver, r.status, where, tries, server, hint);
    reply.text.clear();
  }
  reply.error = redact(msg);
  return true;
}

}  // namespace peak::llm_detail
