// Recordings: the recording wrapper writes one JSON file per exchange; the replay driver serves
// them back by prompt key (docs/llm.md, "Recordings").
#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>

#include <fmt/format.h>
#include <dtl/dtl.hpp>
#include <nlohmann/json.hpp>

#include "llm/llm_internal.h"
#include "util/diff.h"
#include "util/fs.h"

namespace peak {

namespace {

using nlohmann::json;

constexpr int kRecordingFormat = 1;

std::optional<LlmStatus> status_from_string(const std::string& s) {
  for (LlmStatus st : {LlmStatus::ok, LlmStatus::failed, LlmStatus::truncated, LlmStatus::timeout,
                       LlmStatus::pending, LlmStatus::miss})
    if (to_string(st) == s) return st;
  return std::nullopt;
}

// The sequence number in a recording's file name ("0012-3fa2....json" -> 12), or -1.
long long file_seq(const fs::path& p) {
  std::string name = p.filename().string();
  size_t n = 0;
  while (n < name.size() && name[n] >= '0' && name[n] <= '9') ++n;
  if (n == 0 || n > 12 || n >= name.size() || name[n] != '-') return -1;
  return std::stoll(name.substr(0, n));
}

// ---- recording ---------------------------------------------------------------------------------

class RecordingDriver : public LlmDriver {
 public:
  RecordingDriver(std::unique_ptr<LlmDriver> inner, fs::path dir, std::string note)
      : inner_(std::move(inner)), dir_(std::move(dir)), note_(std::move(note)) {}

  std::string describe() const override { return inner_->describe(); }

  LlmReply complete(const LlmRequest& request) override {
    LlmReply reply = inner_->complete(request);
    if (reply.status == LlmStatus::pending) return reply;  // recorded once answered
    std::lock_guard lock(mutex_);
    // A resumed manual run serves the stored answers again: they are not new exchanges.
    if (reply.driver == "manual" && already_recorded(request.key, reply.text)) return reply;
    if (auto s = write(request, reply); !s)
      std::fprintf(stderr, "peak: warning: the LLM exchange was not recorded: %s\n",
                   s.message().c_str());
    return reply;
  }

 private:
  bool already_recorded(const std::string& key, const std::string& text) const {
    std::error_code ec;
    if (!fs::is_directory(dir_, ec)) return false;
    for (const auto& de : fs::directory_iterator(dir_, ec)) {
      if (de.path().extension() != ".json" || file_seq(de.path()) < 0) continue;
      auto body = read_file(de.path());
      if (!body) continue;
      json j = json::parse(*body, nullptr, false);
      if (j.is_object() && j.value("key", "") == key &&
          j.value("reply", "") == llm_detail::redact(text))
        return true;
    }
    return false;
  }

  long long next_seq() {
    long long max_seq = last_seq_;
    std::error_code ec;
    if (fs::is_directory(dir_, ec))
      for (const auto& de : fs::directory_iterator(dir_, ec))
        if (de.path().extension() == ".json") max_seq = std::max(max_seq, file_seq(de.path()));
    return last_seq_ = max_seq + 1;
  }

  Status write(const LlmRequest& request, const LlmReply& reply) {
    using llm_detail::redact;
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec)
      return Status::error(
          fmt::format("cannot create the recording directory {}: {}", dir_.string(), ec.message()));
    long long seq = next_seq();
    json j = {
        {"format", kRecordingFormat},
        {"seq", seq},
        {"key", request.key},
        {"step_label", redact(request.step_label)},
        {"system", redact(request.system)},
        {"user", redact(request.user)},
        {"reply", redact(reply.text)},
        {"status", std::string(to_string(reply.status))},
        {"error", redact(reply.error)},
        {"driver", reply.driver},
        {"model", redact(reply.model)},
        {"producer", redact(reply.producer)},
        {"finish_reason", reply.finish_reason},
        {"prompt_tokens", reply.prompt_tokens},
        {"completion_tokens", reply.completion_tokens},
        {"latency_s", reply.latency_s},
        {"recorded_at", llm_detail::now_iso8601()},
        {"note", redact(note_)},
    };
    std::string key16 = request.key.substr(0, std::min<size_t>(16, request.key.size()));
    if (key16.empty()) key16 = "nokey";
    fs::path path = dir_ / fmt::format("{:04d}-{}.json", seq, key16);
    return write_file_atomic(path, j.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  }

  std::unique_ptr<LlmDriver> inner_;
  fs::path dir_;
  std::string note_;
  long long last_seq_ = 0;
  std::mutex mutex_;
};

// ---- replay ------------------------------------------------------------------------------------

struct Recorded {
  long long seq = 0;
  std::string key;
  LlmReply reply;
};

// A recorded prompt (of any status), to explain a miss.
struct RecordedPrompt {
  std::string file;
  std::string step_label;
  std::string system, user;
};

// Sections of a prompt: the system text, then the user text cut at its "# " and "## " headings.
std::vector<std::pair<std::string, std::string>> sections(const std::string& system,
                                                          const std::string& user) {
  std::vector<std::pair<std::string, std::string>> out = {{"the system prompt", system}};
  std::string title = "the start of the user prompt", body;
  for (const auto& line : split_lines(user)) {
    if (starts_with(line, "# ") || starts_with(line, "## ")) {
      out.emplace_back(title, body);
      title = "\"" + trim(line.substr(line.find(' ') + 1)) + "\"";
      body.clear();
      continue;
    }
    body += line + "\n";
  }
  out.emplace_back(title, body);
  return out;
}

// Why two prompts differ, from the sections that differ.
std::string why_different(const RecordedPrompt& rec, const LlmRequest& req) {
  auto a = sections(rec.system, rec.user), b = sections(req.system, req.user);
  std::map<std::string, std::string> ma(a.begin(), a.end()), mb(b.begin(), b.end());
  std::vector<std::string> differ;
  for (const auto& [t, body] : b)
    if (!ma.count(t) || ma[t] != body) differ.push_back(t);
  for (const auto& [t, body] : a)
    if (!mb.count(t)) differ.push_back(t);
  std::vector<std::string> reasons;
  for (const auto& t : differ) {
    if (t == "\"The previous attempt failed\"") {
      if (!ma.count(t))
        reasons.push_back(
            "this prompt carries feedback from a failed attempt that the recording did not have "
            "(an attempt failed here that passed when it was recorded)");
      else if (!mb.count(t))
        reasons.push_back(
            "the recording carried feedback from a failed attempt that this run does not have "
            "(an attempt passed here that failed when it was recorded)");
      else
        reasons.push_back(
            "the feedback from the failed attempt differs (it failed here in another way than "
            "when it was recorded)");
    } else if (t == "\"Device\"") {
      reasons.push_back(
          "the device facts differ (replay shows the recording folder's device.json; was it "
          "removed or changed?)");
    } else if (t == "\"Current source\"") {
      reasons.push_back(
          "the kernel source differs (an earlier step produced other code here, or the seed "
          "changed)");
    } else if (t == "\"Kernel context\"") {
      reasons.push_back("the kernel context (kernel.toml) differs");
    } else if (t == "the system prompt") {
      reasons.push_back("the system prompt differs (the prompt builder changed)");
    } else {
      reasons.push_back(fmt::format("the section {} differs", t));
    }
  }
  if (reasons.empty()) return "the prompts differ in white space only";
  return join(reasons, "; ");
}

class ReplayDriver : public LlmDriver {
 public:
  ReplayDriver(fs::path dir, std::map<std::string, std::deque<Recorded>> by_key, size_t total,
               std::vector<RecordedPrompt> prompts)
      : dir_(std::move(dir)),
        by_key_(std::move(by_key)),
        total_(total),
        prompts_(std::move(prompts)) {}

  std::string describe() const override { return "replay:" + dir_.string(); }

  // The folder was read when the driver was made; what it holds.
  std::vector<LlmCheck> check() override {
    std::error_code ec;
    bool device = fs::exists(dir_ / "device.json", ec);
    return {{"recordings", total_ > 0,
             total_ > 0 ? fmt::format("{} usable recorded replies ({} prompts) in {}{}", total_,
                                      prompts_.size(), dir_.string(),
                                      device ? "; prompts show the device facts of device.json"
                                             : "; no device.json: prompts show this machine's "
                                               "device")
                        : fmt::format("{} holds no usable recording (*.json files with status "
                                      "ok); record one with --llm <driver> --record {}",
                                      dir_.string(), dir_.string())}};
  }

  LlmReply complete(const LlmRequest& request) override {
    std::lock_guard lock(mutex_);
    auto it = by_key_.find(request.key);
    // Answers the caller already used (a resumed workflow) are not served again.
    if (it != by_key_.end())
      while (served_[request.key] < request.served_before && !it->second.empty()) {
        it->second.pop_front();
        ++served_[request.key];
      }
    if (it != by_key_.end() && !it->second.empty()) {
      LlmReply reply = std::move(it->second.front().reply);
      it->second.pop_front();
      ++served_[request.key];
      return reply;
    }
    LlmReply reply;
    reply.driver = "replay";
    reply.status = LlmStatus::miss;
    reply.infrastructure = true;  // nobody was asked: not the model's failure
    std::string label = request.step_label.empty() ? "this step" : request.step_label;
    if (request.attempt > 0) label += fmt::format(", attempt {}", request.attempt);
    std::string how =
        "Record with --llm <driver> --record DIR, or answer by hand with --llm manual.";
    if (it != by_key_.end()) {
      reply.error = fmt::format(
          "no recorded reply left for {}, prompt key {}: all {} recorded in {} were already used "
          "(the step asked more often than when it was recorded). {}",
          label, llm_detail::key_prefix(request.key), served_[request.key], dir_.string(), how);
      return reply;
    }
    reply.error = fmt::format(
        "no recorded reply for {}, prompt key {}: this prompt was never "
        "recorded in {}. ",
        label, llm_detail::key_prefix(request.key), dir_.string());
    if (const RecordedPrompt* near = nearest(request)) {
      std::string diff =
          unified_diff(near->system + "\n" + near->user, request.system + "\n" + request.user,
                       "recorded " + near->file, "asked now");
      auto lines = split_lines(diff);
      constexpr size_t kMaxLines = 60;
      if (lines.size() > kMaxLines) {
        lines.resize(kMaxLines);
        lines.push_back(fmt::format("... (the diff goes on; the recording is {})",
                                    (dir_ / near->file).string()));
      }
      reply.error += fmt::format(
          "The nearest recording is {} ({}): {}. {}\nThe prompt against that recording:\n{}",
          near->file, near->step_label.empty() ? "no step label" : near->step_label,
          why_different(*near, request), how, join(lines, "\n"));
    } else {
      reply.error +=
          how + (total_ == 0 ? fmt::format(" ({} holds no usable recording.)", dir_.string()) : "");
    }
    return reply;
  }

 private:
  // The recorded prompt closest to the request: among those of the same step when there are
  // any, the one with the fewest differing lines.
  const RecordedPrompt* nearest(const LlmRequest& request) const {
    bool same_step = std::any_of(prompts_.begin(), prompts_.end(), [&](const RecordedPrompt& p) {
      return p.step_label == request.step_label;
    });
    auto asked = split_lines(request.system + "\n" + request.user);
    const RecordedPrompt* best = nullptr;
    long long best_distance = 0;
    for (const auto& p : prompts_) {
      if (same_step && p.step_label != request.step_label) continue;
      dtl::Diff<std::string, std::vector<std::string>> d(split_lines(p.system + "\n" + p.user),
                                                         asked);
      d.onHuge();
      d.compose();
      long long distance = d.getEditDistance();
      if (!best || distance < best_distance) {
        best = &p;
        best_distance = distance;
      }
    }
    return best;
  }

  fs::path dir_;
  std::map<std::string, std::deque<Recorded>> by_key_;
  std::map<std::string, int> served_;
  size_t total_;
  std::vector<RecordedPrompt> prompts_;
  std::mutex mutex_;
};

std::string str(const json& j, const char* name) {
  return j.contains(name) && j[name].is_string() ? j[name].get<std::string>() : "";
}

int integer(const json& j, const char* name) {
  return j.contains(name) && j[name].is_number_integer() ? j[name].get<int>() : 0;
}

}  // namespace

namespace llm_detail {

Result<std::unique_ptr<LlmDriver>> make_replay_driver(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return make_error(fmt::format("replay: {} is not a directory of recordings; record one with "
                                  "--llm <driver> --record {}",
                                  dir.string(), dir.string()),
                      ErrorKind::input);
  std::vector<fs::path> files;
  for (const auto& de : fs::directory_iterator(dir, ec))
    if (de.is_regular_file() && de.path().extension() == ".json" && file_seq(de.path()) >= 0)
      files.push_back(de.path());  // recordings are NNNN-KEY.json; device.json and others are not
  std::sort(files.begin(), files.end());

  std::vector<Recorded> all;
  std::vector<RecordedPrompt> prompts;
  for (const auto& f : files) {
    auto text = read_file(f);
    if (!text) return make_error("replay: " + text.error(), ErrorKind::input);
    json j;
    try {
      j = json::parse(*text);
    } catch (const json::exception& e) {
      return make_error(
          fmt::format("replay: {} is not valid JSON ({}); fix or remove it", f.string(), e.what()),
          ErrorKind::input);
    }
    if (!j.is_object() || !j.contains("format") || !j["format"].is_number_integer())
      return make_error(
          fmt::format("replay: {} is not a peak recording (no \"format\" field); move it out of {}",
                      f.string(), dir.string()),
          ErrorKind::input);
    if (j["format"].get<int>() != kRecordingFormat)
      return make_error(
          fmt::format("replay: {} has recording format {}, this peak reads format {}; re-record it",
                      f.string(), j["format"].get<int>(), kRecordingFormat),
          ErrorKind::input);
    auto status = status_from_string(str(j, "status"));
    if (!status || str(j, "key").empty() || !j.contains("reply") || !j["reply"].is_string())
      return make_error(
          fmt::format(
              "replay: {} lacks a valid \"key\", \"reply\" or \"status\" field; re-record it",
              f.string()),
          ErrorKind::input);
    prompts.push_back(
        {f.filename().string(), str(j, "step_label"), str(j, "system"), str(j, "user")});
    // LLM-level failures carry no usable reply; they are not served.
    if (*status != LlmStatus::ok && *status != LlmStatus::truncated) continue;
    Recorded r;
    r.key = str(j, "key");
    r.seq =
        j.contains("seq") && j["seq"].is_number_integer() ? j["seq"].get<long long>() : file_seq(f);
    r.reply.status = *status;
    r.reply.text = str(j, "reply");
    if (*status != LlmStatus::ok) r.reply.error = str(j, "error");
    r.reply.driver = "replay";
    r.reply.model = str(j, "model");
    r.reply.producer = str(j, "producer");
    r.reply.finish_reason = str(j, "finish_reason");
    r.reply.prompt_tokens = integer(j, "prompt_tokens");
    r.reply.completion_tokens = integer(j, "completion_tokens");
    r.reply.latency_s =
        j.contains("latency_s") && j["latency_s"].is_number() ? j["latency_s"].get<double>() : 0.0;
    r.reply.http_attempts = 0;
    all.push_back(std::move(r));
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const Recorded& a, const Recorded& b) { return a.seq < b.seq; });
  std::map<std::string, std::deque<Recorded>> by_key;
  for (auto& r : all) by_key[r.key].push_back(std::move(r));
  size_t total = all.size();
  return std::unique_ptr<LlmDriver>(
      new ReplayDriver(dir, std::move(by_key), total, std::move(prompts)));
}

}  // namespace llm_detail

std::unique_ptr<LlmDriver> make_recording_driver(std::unique_ptr<LlmDriver> inner,
                                                 const fs::path& dir, std::string note) {
  return std::unique_ptr<LlmDriver>(new RecordingDriver(std::move(inner), dir, std::move(note)));
}

}  // namespace peak
