// The command driver: any program answers the prompt (stdin) on its stdout.
#include <chrono>

#include <fmt/format.h>

#include "llm/llm_internal.h"
#include "util/fs.h"
#include "util/process.h"

namespace peak::llm_detail {

namespace {

class CommandDriver : public LlmDriver {
 public:
  CommandDriver(std::string command, std::string producer)
      : command_(std::move(command)), producer_(std::move(producer)) {}

  std::string describe() const override { return redact("command:" + shell_quote(command_)); }

  // The program (the first word of the command) can be found.
  std::vector<LlmCheck> check() override {
    std::string program = first_word(command_);
    if (program.empty()) return {};
    ProcessOptions po;
    po.argv = {"sh", "-c", "command -v \"$1\"", "sh", program};
    po.timeout_s = 10;
    auto r = run_process(po);
    bool found = r && r->ok() && !trim(r->out).empty();
    return {{"program", found,
             found ? trim(r->out)
                   : fmt::format("command: the program `{}` is not found (not a file, not on "
                                 "$PATH); check the command in --llm",
                                 program)}};
  }

  LlmReply complete(const LlmRequest& request) override {
    auto t0 = std::chrono::steady_clock::now();
    LlmReply reply;
    reply.driver = "command";
    reply.producer = producer_.empty() ? "command:" + command_ : producer_;
    reply.producer = redact(reply.producer);
    auto finish = [&](LlmStatus status, std::string error) {
      reply.status = status;
      // A program that fails or hangs is the endpoint failing, not the model answering badly.
      reply.infrastructure = status != LlmStatus::ok;
      reply.error = redact(std::move(error));
      reply.latency_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return reply;
    };

    // The prompt goes through a file so that a program that writes before it has read everything
    // cannot block on a full pipe.
    auto dir = make_temp_dir("peak-prompt-");
    if (!dir) return finish(LlmStatus::failed, "command: " + dir.error());
    fs::path prompt_file = *dir / "prompt.txt";
    struct Cleanup {
      fs::path dir;
      ~Cleanup() {
        std::error_code ec;
        fs::remove_all(dir, ec);
      }
    } cleanup{*dir};
    if (auto s = write_file(prompt_file, request.system + "\n---\n" + request.user); !s)
      return finish(LlmStatus::failed, "command: " + s.message());

    ProcessOptions po;
    po.argv = {"sh", "-c", "exec <\"$PEAK_PROMPT_FILE\"; " + command_};
    po.timeout_s = request.timeout_s > 0 ? request.timeout_s : 0;
    po.env = {{"PEAK_PROMPT_KEY", request.key},
              {"PEAK_STEP", request.step_label},
              {"PEAK_PROMPT_FILE", prompt_file.string()}};
    auto run = run_process(po);
    if (!run) return finish(LlmStatus::failed, fmt::format("command: {}", run.error()));
    const ProcessResult& pr = *run;
    if (pr.timed_out)
      return finish(LlmStatus::timeout,
                    fmt::format("command `{}` gave no reply within {}; it was stopped (raise the "
                                "LLM timeout if the program needs longer)",
                                command_, format_seconds(request.timeout_s)));
    if (!pr.ok()) {
      std::string err = tail(pr.err, 1500);
      reply.text = redact(pr.out);
      return finish(LlmStatus::failed,
                    fmt::format("command `{}` failed ({}){}", command_, pr.describe(),
                                err.empty() ? "; it printed nothing on stderr" : ":\n" + err));
    }
    if (trim(pr.out).empty())
      return finish(
          LlmStatus::failed,
          fmt::format("command `{}` printed nothing on stdout; it must print the reply", command_));
    reply.text = redact(pr.out);
    return finish(LlmStatus::ok, "");
  }

 private:
  // The first word of a shell command line, without quotes ("" when it starts with a shell
  // construct the check cannot follow).
  static std::string first_word(const std::string& command) {
    std::string t = trim(command);
    if (t.empty()) return "";
    char q = t[0];
    if (q == '\'' || q == '"') {
      auto end = t.find(q, 1);
      return end == std::string::npos ? "" : t.substr(1, end - 1);
    }
    size_t end = t.find_first_of(" \t;|&<>()$`");
    std::string w = t.substr(0, end);
    // Variable assignments (VAR=x prog) and shell keywords are not followed.
    if (w.find('=') != std::string::npos) return "";
    return w;
  }

  std::string command_;
  std::string producer_;
};

}  // namespace

Result<std::unique_ptr<LlmDriver>> make_command_driver(const std::string& command,
                                                       const DriverOptions& opts) {
  return std::unique_ptr<LlmDriver>(new CommandDriver(command, opts.producer));
}

}  // namespace peak::llm_detail
