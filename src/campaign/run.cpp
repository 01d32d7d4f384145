// `peak campaign run`: the local executor (workflows as child processes of this one, a few at a
// time), the dispatch to the Slurm executor, and the summary over every workflow.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "campaign/campaign.h"
#include "campaign/slurm.h"
#include "engine/interrupt.h"
#include "report/report.h"
#include "report/stats.h"
#include "store/store.h"
#include "util/fs.h"
#include "util/workspace_lock.h"

extern char** environ;

namespace peak::campaign {

namespace fs = std::filesystem;

namespace {

// Starts `peak campaign exec FILE ID` with its output appended to the workflow's log.
Result<pid_t> spawn_exec(const Campaign& c, const Workflow& w, const fs::path& peak) {
  std::error_code ec;
  fs::create_directories(w.log.parent_path(), ec);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, w.log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<std::string> args = {peak.string(), "campaign", "exec", c.file.string(), w.id};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, peak.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    return make_error(fmt::format("cannot start {}: {}", peak.string(), std::strerror(rc)),
                      ErrorKind::environment);
  return pid;
}

Status run_local(const Campaign& c, const std::vector<Workflow>& todo, const RunOptions& opts) {
  auto say = [&](const std::string& line) {
    if (opts.progress) opts.progress(line);
  };
  json state = load_state(c);
  const size_t width = static_cast<size_t>(std::max(1, opts.jobs));
  size_t next = 0;
  std::map<pid_t, const Workflow*> running;
  Status result = Status::ok();
  while (next < todo.size() || !running.empty()) {
    while (result && running.size() < width && next < todo.size()) {
      const Workflow& w = todo[next++];
      auto pid = spawn_exec(c, w, opts.peak_binary);
      if (!pid) {
        result = pid.status();
        break;
      }
      json& rec = state["workflows"][w.id];
      if (!rec.is_object()) rec = json::object();
      rec["executor"] = "local";
      rec["runs"] = rec.value("runs", 0) + 1;
      rec["pid"] = *pid;
      rec["started_at"] = utc_now_iso8601();
      (void)save_state(c, state);
      running[*pid] = &w;
      forward_interrupts_to(*pid);  // `kill` of this process ends its workflows too
      say(fmt::format("{}: started (pid {}; log {})", w.id, *pid, w.log.string()));
    }
    bool reaped = false;
    for (auto it = running.begin(); it != running.end();) {
      int status = 0;
      pid_t r = ::waitpid(it->first, &status, WNOHANG);
      if (r == 0) {
        ++it;
        continue;
      }
      const Workflow& w = *it->second;
      stop_forwarding_to(it->first);
      json& rec = state["workflows"][w.id];
      std::string how = r < 0                 ? "lost"
                        : WIFEXITED(status)   ? fmt::format("exit status {}", WEXITSTATUS(status))
                        : WIFSIGNALED(status) ? fmt::format("signal {}", WTERMSIG(status))
                                              : "ended";
      rec["ended"] = how;
      rec["ended_at"] = utc_now_iso8601();
      WorkflowState st = read_state(w);
      say(fmt::format("{}: {} ({}/{} steps; {})", w.id, st.status, st.steps_done, w.steps, how));
      it = running.erase(it);
      reaped = true;
    }
    if (reaped) (void)save_state(c, state);
    if (!result && running.empty()) break;
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return result;
}

std::string fmt_gflops(double g) {
  if (!(g > 0)) return "-";
  if (g >= 100) return fmt::format("{:.0f}", g);
  return g >= 1 ? fmt::format("{:.1f}", g) : fmt::format("{:.3g}", g);
}

}  // namespace

json summarize(const Campaign& c) {
  json state = load_state(c);
  json rows = json::array();
  std::map<std::string, int> totals;
  std::vector<std::pair<std::string, Report>> reports;
  std::vector<std::string> notes;
  for (const auto& w : workflows(c)) {
    json rec = state["workflows"].value(w.id, json::object());
    // A store that a Slurm job may be writing on another machine is not opened from here:
    // SQLite's write-ahead log is not shared between machines over a network file system. Such
    // a workflow is read once its job has ended (the follower knows when).
    const bool job_running =
        rec.value("executor", "") == "slurm" && job_active(rec.value("slurm_state", ""));
    WorkflowState st;
    if (job_running) {
      st.status = rec.value("slurm_state", "") == "RUNNING" ? "running" : "queued";
      st.steps_done = -1;
      st.message = fmt::format(
          "Slurm job {} {} when the executor last looked ({}); its store is "
          "read once the job has ended",
          rec.value("job", "?"), rec.value("slurm_state", ""), state.value("updated_at", "?"));
    } else {
      st = read_state(w);
    }
    json row = {{"id", w.id},
                {"context", w.context.name},
                {"sequence", w.sequence.name},
                {"llm", w.llm.name},
                {"llm_spec", w.llm.value},
                {"device", w.device.name},
                {"status", st.status},
                {"steps_done", st.steps_done},
                {"steps", w.steps},
                {"workspace", w.workspace.string()},
                {"log", w.log.string()}};
    if (st.run) row["run"] = st.run;
    if (!st.message.empty()) row["message"] = st.message;
    if (!rec.empty()) row["executor"] = rec;
    std::error_code ec;
    if (!job_running && fs::exists(w.workspace / ".peak" / "peak.db", ec)) {
      auto store = open_store_for_reading(w.workspace);
      if (store) {
        ReportOptions ro;
        ro.diffs = false;
        ro.title = w.id;
        auto rep = build_report(**store, ro);
        if (rep) {
          int checkpoints = 0;
          for (const auto& s : rep->steps) checkpoints += s.checkpoint != 0;
          row["checkpoints"] = checkpoints;
          for (const auto& s : rep->steps) {
            if (s.checkpoint != rep->tip || s.bench.empty()) continue;
            const BenchRow& b = s.bench.front();
            if (b.disposition != "passed" || !(b.gflops > 0)) continue;
            row["result"] = {{"checkpoint", s.checkpoint},
                             {"transformation", s.transformation},
                             {"shape", b.shape},
                             {"gflops", b.gflops},
                             {"speedup_vs_seed", b.speedup_vs_seed},
                             {"baseline", b.baseline},
                             {"pct_of_baseline", b.pct_of_baseline}};
          }
          reports.emplace_back(w.id, std::move(*rep));
        } else {
          notes.push_back(fmt::format("{}: {}", w.id, rep.error()));
        }
      } else {
        notes.push_back(fmt::format("{}: {}", w.id, store.error()));
      }
    }
    ++totals[st.status];
    rows.push_back(row);
  }
  const bool complete = totals["passed"] + totals["failed"] == static_cast<int>(rows.size());
  std::erase_if(totals, [](const auto& kv) { return kv.second == 0; });
  json j = {{"format", kSummaryFormatVersion},
            {"campaign", c.name},
            {"file", c.file.string()},
            {"dir", c.dir.string()},
            {"workflows", rows},
            {"totals", totals},
            {"complete", complete},
            {"generated_at", utc_now_iso8601()}};
  if (!notes.empty()) j["notes"] = notes;
  if (!reports.empty()) j["stats"] = render_stats_json(build_stats(reports));
  return j;
}

std::string render_summary_text(const json& s) {
  std::vector<std::vector<std::string>> table = {
      {"context", "sequence", "llm", "device", "status", "steps", "GFLOP/s", "vs seed", "job"}};
  for (const auto& r : s["workflows"]) {
    std::string gflops = "-", vs_seed = "-";
    if (r.contains("result")) {
      gflops = fmt_gflops(r["result"].value("gflops", 0.0));
      double v = r["result"].value("speedup_vs_seed", 0.0);
      if (v > 0) vs_seed = fmt::format("x{:.2f}", v);
    }
    std::string job = "-";
    if (r.contains("executor")) {
      const json& e = r["executor"];
      if (e.value("executor", "") == "slurm") {
        job = "slurm " + e.value("job", "?");
        int requeues = std::max(e.value("requeues", 0), e.value("restarts", 0));
        if (requeues > 0) job += fmt::format(" (requeued {}x)", requeues);
        if (e.value("submissions", 0) > 1)
          job += fmt::format(", {} submissions", e.value("submissions", 0));
      } else if (e.value("executor", "") == "local") {
        job =
            fmt::format("local, {} run{}", e.value("runs", 0), e.value("runs", 0) == 1 ? "" : "s");
      }
    }
    table.push_back({r.value("context", ""), r.value("sequence", ""), r.value("llm", ""),
                     r.value("device", ""), r.value("status", ""),
                     r.value("steps_done", 0) < 0
                         ? fmt::format("?/{}", r.value("steps", 0))
                         : fmt::format("{}/{}", r.value("steps_done", 0), r.value("steps", 0)),
                     gflops, vs_seed, job});
  }
  std::vector<size_t> width(table[0].size(), 0);
  for (const auto& row : table)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  std::string out;
  std::vector<std::string> parts;
  for (const auto& [k, v] : s["totals"].items())
    if (v.get<int>() > 0) parts.push_back(fmt::format("{} {}", v.get<int>(), k));
  out += fmt::format("campaign {} ({}): {} workflow{}: {}\n", s.value("campaign", ""),
                     s.value("file", ""), s["workflows"].size(),
                     s["workflows"].size() == 1 ? "" : "s", join(parts, ", "));
  for (const auto& row : table) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out += trim(line) + "\n";
  }
  for (const auto& r : s["workflows"]) {
    std::string st = r.value("status", "");
    std::string note;
    if (r.contains("executor")) note = r["executor"].value("note", "");
    if (st == "passed" && note.empty()) continue;
    std::string msg = r.value("message", "");
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg = msg.substr(0, nl);
    if (msg.empty() && note.empty() && st == "pending") continue;
    out += fmt::format("  {}: {}{}{}\n", r.value("id", ""), msg.empty() ? st : msg,
                       note.empty() ? "" : "; ", note);
  }
  if (s.contains("notes"))
    for (const auto& n : s["notes"]) out += "  note: " + n.get<std::string>() + "\n";
  out += fmt::format(
      "workspaces under {}/workspaces (`peak stats {}/workspaces` for the analytics), logs "
      "under {}/logs\n",
      s.value("dir", ""), s.value("dir", ""), s.value("dir", ""));
  return out;
}

Result<json> run_campaign(const Campaign& c, const RunOptions& opts) {
  if (opts.executor != "local" && opts.executor != "slurm")
    return make_error(
        fmt::format("unknown executor '{}': local (this machine) or slurm (sbatch)", opts.executor),
        ErrorKind::input);
  if (opts.jobs < 0) return make_error("--jobs takes a positive number", ErrorKind::input);
  std::error_code ec;
  fs::create_directories(c.dir, ec);
  if (ec)
    return make_error(
        fmt::format("cannot create the campaign folder {}: {}", c.dir.string(), ec.message()),
        ErrorKind::environment);
  auto lock = WorkspaceLock::acquire(c.dir / "lock",
                                     fmt::format("peak campaign run {}", c.file.string()), false);
  if (!lock)
    return make_error(fmt::format("{} (another `peak campaign run` follows this campaign; wait "
                                  "for it, or stop it: the workflows resume where they were)",
                                  lock.error()),
                      ErrorKind::environment);
  auto say = [&](const std::string& line) {
    if (opts.progress) opts.progress(line);
  };
  // The workspaces are made here, before anything runs elsewhere: a context that cannot start a
  // workspace is found once, not by every job.
  std::vector<Workflow> todo;
  for (const auto& w : workflows(c)) {
    WorkflowState st = read_state(w);
    if (st.status == "passed" || st.status == "failed") {
      say(fmt::format("{}: {} before ({}/{} steps)", w.id, st.status, st.steps_done, w.steps));
      continue;
    }
    if (auto s = ensure_workspace(w); !s) return Error{s.message(), s.kind()};
    todo.push_back(w);
  }
  say(fmt::format("campaign {}: {} workflows, {} to run ({} executor)", c.name, workflows(c).size(),
                  todo.size(), opts.executor));
  Status s = Status::ok();
  if (!todo.empty()) {
    if (opts.executor == "local") {
      s = run_local(c, todo, opts);
    } else {
      auto client = command_slurm(opts.slurm_bin_dir);
      s = follow_slurm(c, todo, opts, *client);
    }
  }
  json summary = summarize(c);
  (void)write_file_atomic(c.dir / "summary.json", summary.dump(2) + "\n");
  (void)write_file_atomic(c.dir / "summary.txt", render_summary_text(summary));
  if (!s) return Error{s.message(), s.kind()};
  return summary;
}

}  // namespace peak::campaign
