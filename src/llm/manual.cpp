// The manual driver: prompts are written to <workspace>/.peak/manual/ and answered by a person or
// an agent with `peak respond ID FILE`.
//
//   NNNN.prompt.md   the prompt (system and user text), readable
//   NNNN.json        {format, id, key, step_label, created_at, answered, producer, answered_at}
//   NNNN.reply.md    the reply, once given
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "llm/llm_internal.h"
#include "util/fs.h"

namespace peak {

namespace {

using nlohmann::json;

fs::path workspace_or_cwd(const fs::path& workspace) {
  if (!workspace.empty()) return workspace;
  std::error_code ec;
  fs::path cwd = fs::current_path(ec);
  return ec ? fs::path(".") : cwd;
}

fs::path manual_dir(const fs::path& workspace) {
  return workspace_or_cwd(workspace) / ".peak" / "manual";
}

bool is_id(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "3" / "003" / "0003" -> "0003"; "" when not a number.
std::string normalize_id(const std::string& raw) {
  std::string s = trim(raw);
  if (!is_id(s)) return "";
  size_t nz = s.find_first_not_of('0');
  std::string digits = nz == std::string::npos ? "0" : s.substr(nz);
  if (digits.size() > 9) return "";
  return fmt::format("{:04d}", std::stoi(digits));
}

std::string str(const json& j, const char* name) {
  return j.is_object() && j.contains(name) && j[name].is_string() ? j[name].get<std::string>() : "";
}

struct Entry {
  std::string id;
  json meta;
  fs::path json_path, prompt_path, reply_path;
  std::string key() const { return str(meta, "key"); }
  std::string step_label() const { return str(meta, "step_label"); }
  // A reply file with some text in it.
  bool has_reply() const {
    std::error_code ec;
    if (!fs::exists(reply_path, ec)) return false;
    auto text = read_file(reply_path);
    return text && !trim(*text).empty();
  }
};

// Every NNNN.json under dir, by id. Unreadable entries are skipped.
std::vector<Entry> scan(const fs::path& dir) {
  std::vector<Entry> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& de : fs::directory_iterator(dir, ec)) {
    const fs::path& p = de.path();
    if (p.extension() != ".json" || !is_id(p.stem().string())) continue;
    auto text = read_file(p);
    if (!text) continue;
    Entry e;
    try {
      e.meta = json::parse(*text);
    } catch (const std::exception&) {
      continue;
    }
    if (!e.meta.is_object()) continue;
    e.id = p.stem().string();
    e.json_path = p;
    e.prompt_path = dir / (e.id + ".prompt.md");
    e.reply_path = dir / (e.id + ".reply.md");
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(),
            [](const Entry& a, const Entry& b) { return std::stoll(a.id) < std::stoll(b.id); });
  return out;
}

std::string render_prompt(const std::string& id, const LlmRequest& r) {
  return fmt::format(
      "<!-- peak manual prompt {id}: {label} -->\n"
      "<!-- key {key} -->\n"
      "<!-- Answer: write the reply (one fenced code block with the complete region) to a file,\n"
      "     then run `peak respond {id} FILE` and run the peak command again. -->\n"
      "\n"
      "# System\n"
      "\n"
      "{system}\n"
      "\n"
      "# User\n"
      "\n"
      "{user}\n",
      fmt::arg("id", id), fmt::arg("label", r.step_label), fmt::arg("key", r.key),
      fmt::arg("system", r.system), fmt::arg("user", r.user));
}

std::string dump(const json& j) {
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

class ManualDriver : public LlmDriver {
 public:
  explicit ManualDriver(const DriverOptions& opts)
      : workspace_(workspace_or_cwd(opts.workspace)),
        wait_(opts.manual_wait),
        poll_s_(opts.manual_poll_s > 0 ? opts.manual_poll_s : 1.0),
        producer_(opts.producer) {}

  std::string describe() const override { return "manual"; }

  // The prompt folder can be written.
  std::vector<LlmCheck> check() override {
    fs::path dir = manual_dir(workspace_);
    std::error_code ec;
    fs::create_directories(dir, ec);
    bool ok = !ec && ::access(dir.c_str(), W_OK) == 0;
    return {{"prompt folder", ok,
             ok ? dir.string()
                : fmt::format("manual: prompts cannot be written to {}; the workspace must be "
                              "writable",
                              dir.string())}};
  }

  LlmReply complete(const LlmRequest& request) override {
    std::lock_guard lock(mutex_);
    auto t0 = std::chrono::steady_clock::now();
    fs::path dir = manual_dir(workspace_);
    LlmReply reply;
    reply.driver = "manual";
    reply.model = "manual";

    // Prompts with this key, by id. Within one driver each answer is served once, in id order;
    // asking the same prompt again after that (a retry) writes a new prompt. A new driver (the
    // next run of peak) starts from the first answer again.
    std::vector<Entry> all = scan(dir), same;
    for (const auto& e : all)
      if (e.key() == request.key) same.push_back(e);
    size_t& served = served_[request.key];
    served = std::max(served, static_cast<size_t>(std::max(0, request.served_before)));
    std::optional<Entry> found;
    if (served < same.size()) {
      if (same[served].has_reply()) {
        ++served;
        return serve(same[served - 1], t0);
      }
      found = same[served];  // pending: reuse its id
    }
    std::string id;
    if (found) {
      id = found->id;
    } else {
      long long max_id = 0;
      for (const auto& e : all) max_id = std::max(max_id, std::stoll(e.id));
      id = fmt::format("{:04d}", max_id + 1);
    }
    // The record first, the prompt last: whoever sees the prompt (a person, an agent, a test
    // waiting for the file) can answer it, even if this process ends right after writing it.
    if (!found) {
      json meta = {{"format", 1},
                   {"id", id},
                   {"key", request.key},
                   {"step_label", request.step_label},
                   {"created_at", llm_detail::now_iso8601()},
                   {"answered", false}};
      if (auto s = write_file_atomic(dir / (id + ".json"), dump(meta)); !s) {
        reply.status = LlmStatus::failed;
        reply.infrastructure = true;
        reply.error = "manual: " + s.message();
        return reply;
      }
    }
    fs::path prompt_path = dir / (id + ".prompt.md");
    if (auto s = write_file_atomic(prompt_path, llm_detail::redact(render_prompt(id, request)));
        !s) {
      reply.status = LlmStatus::failed;
      reply.infrastructure = true;
      reply.error = "manual: " + s.message();
      return reply;
    }

    if (wait_) {
      Entry e;
      e.id = id;
      e.json_path = dir / (id + ".json");
      e.reply_path = dir / (id + ".reply.md");
      for (;;) {
        if (e.has_reply()) {
          ++served;
          if (auto text = read_file(e.json_path)) {
            try {
              e.meta = json::parse(*text);
            } catch (const std::exception&) {
            }
          }
          return serve(e, t0);
        }
        double elapsed = seconds_since(t0);
        if (request.timeout_s > 0 && elapsed >= request.timeout_s) {
          reply.status = LlmStatus::timeout;
          reply.infrastructure = true;  // nobody answered: not the model's failure
          reply.error = fmt::format(
              "no reply to manual prompt {} ({}) within {}; answer it with `peak respond {} FILE` "
              "and run the same command again",
              id, display_path(prompt_path), format_seconds(request.timeout_s), id);
          reply.latency_s = elapsed;
          return reply;
        }
        double nap = poll_s_;
        if (request.timeout_s > 0) nap = std::min(nap, request.timeout_s - elapsed);
        std::this_thread::sleep_for(std::chrono::duration<double>(std::max(nap, 0.001)));
      }
    }

    reply.status = LlmStatus::pending;
    reply.pending_id = id;
    reply.pending_path = display_path(prompt_path);
    std::string label = llm_detail::step_phrase(request.step_label);
    reply.error = fmt::format(
        "prompt written to {}{}. Write the reply (one fenced code block with the complete region) "
        "to a file and run `peak respond {} FILE`, then run the same command again to continue.",
        display_path(prompt_path), label.empty() ? "" : " (" + label + ")", id);
    return reply;
  }

 private:
  static double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  // The prompt path relative to the workspace when peak runs inside it, else in full.
  std::string display_path(const fs::path& p) const {
    std::error_code ec;
    fs::path cwd = fs::current_path(ec);
    if (!ec) cwd = fs::weakly_canonical(cwd, ec);
    fs::path ws = ec ? fs::path() : fs::weakly_canonical(workspace_, ec);
    if (!ec && cwd == ws) return p.lexically_relative(workspace_).string();
    return p.string();
  }

  LlmReply serve(const Entry& e, std::chrono::steady_clock::time_point t0) const {
    LlmReply reply;
    reply.driver = "manual";
    reply.model = "manual";
    auto text = read_file(e.reply_path);
    if (!text) {
      reply.status = LlmStatus::failed;
      reply.infrastructure = true;
      reply.error = "manual: " + text.error();
      return reply;
    }
    reply.text = *text;
    std::string producer = str(e.meta, "producer");
    if (producer.empty()) producer = producer_.empty() ? "human" : producer_;
    reply.producer = producer;
    reply.status = LlmStatus::ok;
    reply.latency_s = seconds_since(t0);
    return reply;
  }

  fs::path workspace_;
  bool wait_;
  double poll_s_;
  std::string producer_;
  std::map<std::string, size_t> served_;  // answers served so far, by prompt key
  std::mutex mutex_;
};

std::string pending_list(const std::vector<Entry>& entries) {
  std::vector<std::string> pending;
  for (const auto& e : entries)
    if (!e.has_reply()) pending.push_back(fmt::format("{} ({})", e.id, e.step_label()));
  if (pending.empty()) return "no prompt is waiting for a reply";
  return "waiting for a reply: " + join(pending, ", ");
}

}  // namespace

namespace llm_detail {
Result<std::unique_ptr<LlmDriver>> make_manual_driver(const DriverOptions& opts) {
  return std::unique_ptr<LlmDriver>(new ManualDriver(opts));
}
}  // namespace llm_detail

Status respond_manual(const fs::path& workspace, const std::string& raw_id,
                      const std::string& reply_text, const std::string& producer) {
  fs::path dir = manual_dir(workspace);
  auto entries = scan(dir);
  std::string id = normalize_id(raw_id);
  auto it = std::find_if(entries.begin(), entries.end(),
                         [&](const Entry& e) { return !id.empty() && e.id == id; });
  if (it == entries.end())
    return Status::error(fmt::format("no manual prompt {} in {}; {}",
                                     id.empty() ? "\"" + trim(raw_id) + "\"" : id, dir.string(),
                                     pending_list(entries)));
  if (trim(reply_text).empty())
    return Status::error(fmt::format(
        "the reply for manual prompt {} is empty; write the complete reply (one fenced code block "
        "with the complete region) to the file",
        id));
  // Who answered first, then the reply: a peak waiting for it (--wait) reads the metadata once
  // the reply is there, so it always finds the producer.
  json meta = it->meta;
  meta["answered"] = true;
  meta["producer"] = producer.empty() ? "human" : producer;
  meta["answered_at"] = llm_detail::now_iso8601();
  if (auto s = write_file_atomic(it->json_path, dump(meta)); !s) return s;
  return write_file_atomic(it->reply_path, reply_text);
}

std::vector<PendingPrompt> list_manual(const fs::path& workspace) {
  std::vector<PendingPrompt> out;
  for (const auto& e : scan(manual_dir(workspace)))
    out.push_back(PendingPrompt{e.id, e.step_label(), e.prompt_path, e.has_reply()});
  return out;
}

}  // namespace peak
