#include "runner/client.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <system_error>

#include <fmt/format.h>

#include "peak/version.h"
#include "runner/runner_sandbox.h"
#include "util/fs.h"
#include "util/process.h"

namespace peak {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}
void add_seconds(std::atomic<int64_t>* to, Clock::time_point since) {
  if (to)
    *to += std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - since).count();
}
Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(std::max(seconds, 0.0)));
}

// The last `max_lines` lines of `text` (at most `max_chars` characters), trimmed.
std::string tail(const std::string& text, size_t max_lines = 20, size_t max_chars = 4000) {
  std::string t = trim(text);
  size_t pos = t.size(), lines = 0;
  while (pos > 0 && lines < max_lines) {
    size_t nl = t.rfind('\n', pos - 1);
    if (nl == std::string::npos) {
      pos = 0;
      break;
    }
    pos = nl;
    ++lines;
  }
  std::string r = t.substr(pos == 0 ? 0 : pos + 1);
  if (r.size() > max_chars) r = "..." + r.substr(r.size() - max_chars);
  return r;
}

bool is_executable(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

std::string runner_name(const RunnerOptions& opts) { return opts.executable.filename().string(); }

Status start_runner(Subprocess& p, const RunnerOptions& opts, const RunnerJob& job) {
  if (opts.executable.empty()) return Status::error("internal: no runner executable was given");
  if (opts.executable.has_parent_path() && !is_executable(opts.executable))
    return Status::error(runner_missing_message(opts.executable.filename().string()) +
                         fmt::format(" ({} is not an executable file)", opts.executable.string()));
  ProcessOptions po;
  po.argv = {opts.executable.string()};
  po.stdin_data = job.to_json().dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  po.keep_stdin_open = job.hold;
  po.env = opts.env;
  po.sandbox = runner_sandbox(opts, job);
  if (opts.tally) ++opts.tally->starts;
  return p.start(po);
}

// The error for a runner that ended (or hung) before starting any task.
Error start_failure(const RunnerOptions& opts, const ProcessResult& pr, const std::string& err,
                    const std::string& context) {
  std::string name = runner_name(opts);
  if (pr.exit_code == 127 && err.find("cannot run") != std::string::npos)
    return make_error(runner_missing_message(name) + " (" + trim(err) + ")");
  std::string what = pr.timed_out ? "did not answer in time" : pr.describe();
  std::string e = tail(err);
  if (e.empty()) return make_error(fmt::format("the runner {}{} failed: {}", name, context, what));
  return make_error(fmt::format("{} ({}{}: {})", e, name, context, what));
}

TaskResult charged(Disposition d, std::string message, double seconds) {
  TaskResult r;
  r.disposition = d;
  r.message = std::move(message);
  r.seconds = seconds;
  return r;
}

}  // namespace

void RunnerTally::add_steps(const json& seconds) {
  if (!seconds.is_object()) return;
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& [step, s] : seconds.items())
    if (s.is_number()) startup_steps[step] += s.get<double>();
}

std::string runner_missing_message(const std::string& name) {
  std::string msg = fmt::format(
      "peak cannot find the runner '{}'. Build it with `cmake --build {} --target {}`; peak looks "
      "next to its own binary, then in {}, then on $PATH",
      name, PEAK_RUNNER_DIR, name, PEAK_RUNNER_DIR);
  if (name.find("cuda") != std::string::npos)
    msg += " (the CUDA runner is built only when CMake finds the CUDA toolkit)";
  return msg;
}

std::filesystem::path find_runner(const std::string& name) {
  auto self = self_executable();
  if (!self.empty() && is_executable(self.parent_path() / name)) return self.parent_path() / name;
  if (is_executable(std::filesystem::path(PEAK_RUNNER_DIR) / name))
    return std::filesystem::path(PEAK_RUNNER_DIR) / name;
  if (auto on_path = find_program(name); is_executable(on_path)) return on_path;
  return name;
}

Result<std::vector<TaskResult>> run_job(const RunnerJob& job, const RunnerOptions& opts,
                                        const TaskCallback& on_result) {
  const size_t n = job.tasks.size();
  std::vector<TaskResult> results(n);
  std::vector<bool> done(n, false);
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < n; ++i) {
    results[i].id = job.tasks[i].id;
    if (!index.emplace(job.tasks[i].id, i).second)
      return make_error(
          fmt::format("internal: task id \"{}\" is used twice in one runner job", job.tasks[i].id));
  }
  // The device lock: taken now, or (start_before_lock) once the first runner has started its
  // device; given back as soon as every task has its result.
  Result<DeviceLock::Guard> held = DeviceLock::Guard{};
  bool lock_to_take = opts.device_lock != nullptr;
  auto take_lock = [&]() -> Status {
    held = opts.device_lock->acquire();
    if (!held) return Status::error(held.error());
    lock_to_take = false;
    return Status::ok();
  };
  if (lock_to_take && !opts.start_before_lock)
    if (Status s = take_lock(); !s) return Error{s.message()};
  size_t ndone = 0;
  auto finish = [&](size_t i, TaskResult r) {
    r.id = job.tasks[i].id;
    results[i] = std::move(r);
    done[i] = true;
    ++ndone;
    if (on_result) on_result(results[i], ndone, n);
  };

  int restarts = 0;
  std::string why_restarted;  // for the error of a restarted runner that cannot start
  while (ndone < n) {
    RunnerJob sub = job;
    sub.mode = "run";
    if (sub.device.empty()) sub.device = opts.device;
    sub.hold = lock_to_take;
    sub.tasks.clear();
    for (size_t i = 0; i < n; ++i)
      if (!done[i]) sub.tasks.push_back(job.tasks[i]);

    Subprocess p;
    const auto started = Clock::now();
    if (auto s = start_runner(p, opts, sub); !s) return Error{s.message()};
    bool began = false;
    bool counted_startup = false;  // the tally has this runner's start-up
    bool timed_out = false;        // a task timed out: with stop_after_timeout, no fresh runner
    int inflight = -1;
    auto task_start = Clock::now();
    double limit = opts.start_timeout_s;
    auto deadline = after(limit);
    std::string noise;  // stdout lines that are not protocol messages
    for (;;) {
      std::string line;
      double left = std::chrono::duration<double>(deadline - Clock::now()).count();
      auto st = left > 0 ? p.read_line(line, left) : Subprocess::ReadStatus::timeout;
      if (st == Subprocess::ReadStatus::line) {
        json m = json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (m.is_discarded() || !m.is_object() || !m.contains("event") || !m["event"].is_string()) {
          if (noise.size() < 4000) noise += line.substr(0, 4000) + "\n";
          continue;
        }
        std::string ev = m["event"].get<std::string>();
        if (ev == "started") {
          if (opts.tally) opts.tally->add_steps(m.value("seconds", json()));
          if (sub.hold && lock_to_take) {
            // A held runner's start-up ends here; the wait for the lock is not part of it.
            if (!began) add_seconds(opts.tally ? &opts.tally->startup_us : nullptr, started);
            counted_startup = true;
            if (Status s = take_lock(); !s) return Error{s.message()};
            if (opts.abandon && opts.abandon()) {
              p.kill_group();
              if (opts.tally) ++opts.tally->abandoned;
              for (size_t i = 0; i < n; ++i)
                if (!done[i]) finish(i, charged(Disposition::not_run, std::string(kAbandoned), 0));
              return results;
            }
            p.write_stdin("go\n");
            p.close_stdin();
            deadline = after(limit);  // the wait for the lock is not the runner's
          }
        } else if (ev == "begin") {
          auto it = m.contains("id") && m["id"].is_string() ? index.find(m["id"].get<std::string>())
                                                            : index.end();
          if (it == index.end() || done[it->second]) continue;  // not ours: ignore
          inflight = static_cast<int>(it->second);
          if (!began && !counted_startup)
            add_seconds(opts.tally ? &opts.tally->startup_us : nullptr, started);
          task_start = Clock::now();
          limit = opts.task_timeout_s;  // device start-up is over once a task begins
          deadline = after(limit);
          began = true;
        } else if (ev == "result") {
          auto r = parse_task_result(m);
          size_t i = n;
          if (r) {
            auto it = index.find(r->id);
            if (it != index.end() && !done[it->second]) i = it->second;
          } else if (inflight >= 0) {
            i = static_cast<size_t>(inflight);
          }
          if (i < n) {
            add_seconds(opts.tally ? &opts.tally->task_us : nullptr, task_start);
            if (r && opts.tally && r->load_ms > 0)
              opts.tally->load_us += static_cast<int64_t>(r->load_ms * 1000);
            if (r)
              finish(i, std::move(r.value()));
            else
              finish(i, charged(Disposition::crashed, r.error(), seconds_since(task_start)));
            timed_out = results[i].disposition == Disposition::timeout;
          }
          inflight = -1;
          if (ndone == n) held = DeviceLock::Guard{};  // the device is free for the next job
          if (timed_out && opts.stop_after_timeout) {
            p.kill_group();
            break;
          }
          limit = opts.task_timeout_s;
          deadline = after(limit);
        }
        continue;
      }
      if (st == Subprocess::ReadStatus::timeout) {
        p.kill_group();
        if (inflight >= 0) {
          double took = seconds_since(task_start);
          finish(static_cast<size_t>(inflight),
                 charged(Disposition::timeout,
                         fmt::format("no result within {}; the runner's process group was "
                                     "killed",
                                     format_seconds(limit)),
                         took));
          why_restarted = fmt::format("after task {} timed out", job.tasks[inflight].id);
          timed_out = true;
          break;
        }
        if (!began) {
          ProcessResult pr;
          pr.timed_out = true;
          return start_failure(
              opts, pr, p.err(),
              fmt::format(" started no task within {}{}", format_seconds(opts.start_timeout_s),
                          why_restarted.empty() ? "" : " " + why_restarted));
        }
        why_restarted = "after it hung between tasks";
        break;  // hung between tasks: a fresh runner for the rest
      }
      // End of output: the runner exited (or closed stdout).
      ProcessResult pr = p.wait(5);
      if (inflight >= 0) {
        std::string msg = fmt::format("the runner died during this task ({})", pr.describe());
        if (std::string e = tail(pr.err); !e.empty()) msg += "; stderr:\n" + e;
        if (std::string o = tail(noise, 10, 2000); !o.empty()) msg += "\nstdout:\n" + o;
        finish(static_cast<size_t>(inflight),
               charged(Disposition::crashed, std::move(msg), seconds_since(task_start)));
        why_restarted = fmt::format("after task {} crashed", job.tasks[inflight].id);
        break;
      }
      if (!began)
        return start_failure(opts, pr, pr.err,
                             why_restarted.empty() ? "" : " (restarted " + why_restarted + ")");
      why_restarted = fmt::format("after it exited ({})", pr.describe());
      break;
    }
    if (ndone == n) break;
    const bool stop = timed_out && opts.stop_after_timeout;
    if (stop || ++restarts > opts.max_restarts) {
      const std::string why =
          stop ? std::string(kLeftAfterTimeout)
               : fmt::format("not run: the runner was restarted {} times, the limit",
                             opts.max_restarts);
      for (size_t i = 0; i < n; ++i)
        if (!done[i]) finish(i, charged(Disposition::not_run, why, 0));
      break;
    }
  }
  return results;
}

Result<DeviceFacts> probe_device(const RunnerJob& job, const RunnerOptions& opts) {
  RunnerJob pj = job;
  pj.mode = "probe";
  pj.tasks.clear();
  Subprocess p;
  if (auto s = start_runner(p, opts, pj); !s) return Error{s.message()};
  auto deadline = after(opts.start_timeout_s);
  std::optional<DeviceFacts> facts;
  std::string problem;
  for (;;) {
    std::string line;
    double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    auto st = left > 0 ? p.read_line(line, left) : Subprocess::ReadStatus::timeout;
    if (st == Subprocess::ReadStatus::timeout) {
      p.kill_group();
      if (facts) return *facts;  // it hung on the way out
      ProcessResult pr;
      pr.timed_out = true;
      return start_failure(opts, pr, p.err(),
                           fmt::format(" did not describe its device within {}",
                                       format_seconds(opts.start_timeout_s)));
    }
    if (st == Subprocess::ReadStatus::eof) break;
    json m = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (m.is_discarded() || !m.is_object() || m.value("event", json()) != "probe") continue;
    auto f = parse_device_facts(m.value("device", json::object()));
    if (f) {
      facts = std::move(f.value());
      deadline = std::min(deadline, after(5));
    } else {
      problem = f.error();
    }
  }
  ProcessResult pr = p.wait(5);
  if (facts) return *facts;
  if (!problem.empty())
    return make_error(fmt::format("the runner {} answered: {}", runner_name(opts), problem));
  return start_failure(opts, pr, pr.err, "");
}

}  // namespace peak
