// One workflow of a campaign, run on whatever machine its process lands on (this one, or a Slurm
// node): its workspace, its run (started or resumed), its outcome; and where a workflow stands,
// read from its store.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "campaign/campaign.h"
#include "engine/workspace.h"
#include "store/store.h"
#include "transform/transformation.h"
#include "util/fs.h"
#include "util/workspace_lock.h"

namespace peak::campaign {

namespace fs = std::filesystem;

namespace {

json parse_object(const std::string& text) {
  json j = json::parse(text.empty() ? "{}" : text, nullptr, false);
  return j.is_object() ? j : json::object();
}

// The newest run of sequence `name` in the workspace, with its effective status.
std::optional<WorkflowRecord> newest_run(Workspace& ws, const std::string& name) {
  auto all = ws.workflows();
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (it->kind != "run") continue;
    if (parse_object(it->state_json).value("sequence", "") == name) return *it;
  }
  return std::nullopt;
}

std::string env_or(const char* name, const std::string& dflt = "") {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : dflt;
}

void write_outcome(const Workflow& w, const ExecOutcome& o) {
  json j = {{"format", kOutcomeFormatVersion},
            {"workflow", w.id},
            {"status", o.status},
            {"message", o.message},
            {"steps_done", o.steps_done},
            {"steps", w.steps},
            {"run", o.run},
            {"input_error", o.input_error},
            {"environment_error", o.environment_error},
            {"host", this_process().host},
            {"pid", this_process().pid},
            {"finished_at", utc_now_iso8601()}};
  if (auto job = env_or("SLURM_JOB_ID"); !job.empty()) {
    j["slurm_job"] = job;
    j["slurm_restart_count"] = std::atoi(env_or("SLURM_RESTART_COUNT", "0").c_str());
  }
  std::error_code ec;
  fs::create_directories(w.outcome.parent_path(), ec);
  (void)write_file_atomic(w.outcome, j.dump(2) + "\n");
}

}  // namespace

Status ensure_workspace(const Workflow& w) {
  std::error_code ec;
  if (fs::exists(w.workspace / ".peak" / "peak.db", ec)) return Status::ok();
  if (fs::exists(w.workspace, ec))
    return Status::error(
        fmt::format("{} exists but holds no peak workspace; move it away and run the campaign "
                    "again (it is created there)",
                    w.workspace.string()),
        ErrorKind::environment);
  fs::create_directories(w.workspace.parent_path(), ec);
  // Made aside and renamed into place: a process killed meanwhile leaves no half-made workspace
  // under the workflow's name, only a temporary folder that the next attempt removes.
  const std::string prefix = "." + w.id + ".init.";
  for (const auto& de : fs::directory_iterator(w.workspace.parent_path(), ec))
    if (starts_with(de.path().filename().string(), prefix)) fs::remove_all(de.path(), ec);
  fs::path tmp = w.workspace.parent_path() / (prefix + std::to_string(::getpid()));
  {
    auto ws = Workspace::init(w.context.value, tmp);
    if (!ws) {
      fs::remove_all(tmp, ec);
      return ws.status();
    }
  }
  fs::rename(tmp, w.workspace, ec);
  if (ec) {
    fs::remove_all(tmp, ec);
    if (fs::exists(w.workspace / ".peak" / "peak.db")) return Status::ok();  // made by another
    return Status::error(
        fmt::format("cannot create the workspace {}: {}", w.workspace.string(), ec.message()),
        ErrorKind::environment);
  }
  return Status::ok();
}

WorkflowState read_state(const Workflow& w) {
  WorkflowState st;
  std::error_code ec;
  if (!fs::exists(w.workspace / ".peak" / "peak.db", ec)) return st;
  // Read-only, no lock taken: the follower of a campaign may read a store that a job on another
  // machine is writing.
  auto store = Store::open_read_only(w.workspace / ".peak");
  if (!store) {
    st.message = store.error();
    return st;
  }
  auto all = (*store)->workflows();
  if (!all) {
    st.message = all.error();
    return st;
  }
  auto seq = load_sequence(w.sequence.value);
  const std::string name = seq ? seq->name : w.sequence.name;
  for (auto it = all->rbegin(); it != all->rend(); ++it) {
    if (it->kind != "run" || parse_object(it->state_json).value("sequence", "") != name) continue;
    st.status = it->status;
    // Marked running, but nobody holds the workspace or its process is gone: it was killed.
    if (st.status == "running") {
      auto holder = WorkspaceLock::holder(w.workspace / ".peak" / "lock");
      if (!holder || liveness({it->owner_pid, it->owner_host, it->owner_start}) == Liveness::dead)
        st.status = "interrupted";
    }
    st.run = it->id;
    st.steps_done = parse_object(it->state_json).value("next_step", 0);
    if (st.status == "passed") st.steps_done = w.steps;
    break;
  }
  if (st.run == 0) return st;
  if (auto text = read_file(w.outcome)) {
    json o = parse_object(*text);
    if (o.value("run", int64_t{0}) == st.run || o.value("run", int64_t{0}) == 0)
      st.message = o.value("message", "");
  }
  return st;
}

Result<ExecOutcome> exec_workflow(const Campaign& c, const std::string& id) {
  auto w = find_workflow(c, id);
  if (!w) return w.status();
  if (auto s = ensure_workspace(*w); !s) return s;
  OpenOptions oo;
  oo.command = fmt::format("peak campaign exec {} {}", c.file.string(), id);
  // The workflow's process is its workspace's only writer; anyone else in it (a reader completing
  // a checkout a killed process left, a person at the command line) is waited for.
  oo.wait = true;
  auto ws = Workspace::open(w->workspace, oo);
  if (!ws) return ws.status();
  auto seq = load_sequence(w->sequence.value);
  if (!seq) return make_error(seq.error(), ErrorKind::input);

  ExecOutcome out;
  auto prev = newest_run(**ws, seq->name);
  if (prev && (prev->status == "passed" || prev->status == "failed")) {
    // Ended before: nothing to run again (a failed step stays failed; docs/scale-out.md).
    out.status = prev->status;
    out.run = prev->id;
    out.steps_done =
        prev->status == "passed" ? w->steps : parse_object(prev->state_json).value("next_step", 0);
    out.message = fmt::format("the run of {} already ended: {}", seq->name, prev->status);
    return out;
  }

  ::peak::RunOptions ro;
  ro.resume = prev.has_value();
  ApplyOptions& a = ro.apply;
  a.llm = w->llm.value;
  a.driver.workspace = (*ws)->root();
  if (c.llm_deadline > 0) a.driver.deadline_s = c.llm_deadline;
  if (c.attempts > 0) {
    a.attempts = c.attempts;
    ro.attempts = c.attempts;
  }
  a.eval = c.eval;  // checked when the campaign was parsed
  a.eval.device = w->device.select;
  a.eval.devices = w->device.devices;

  RunResult r = (*ws)->run(*seq, ro);
  out.run = r.workflow_id;
  out.message = r.message;
  out.input_error = r.input_error;
  out.environment_error = r.environment_error;
  if (r.pending)
    out.status = "waiting";
  else if (r.disposition == Disposition::passed)
    out.status = "passed";
  else if (r.input_error || r.environment_error || r.cancelled || r.workflow_id == 0)
    out.status = "interrupted";
  else
    out.status = "failed";
  out.steps_done = r.steps_done;
  if (out.status == "passed") out.steps_done = w->steps;
  if (auto now = newest_run(**ws, seq->name); now && now->id == r.workflow_id)
    out.steps_done =
        now->status == "passed" ? w->steps : parse_object(now->state_json).value("next_step", 0);
  if (out.message.empty())
    out.message = fmt::format("{} steps of {} done", out.steps_done, seq->name);
  write_outcome(*w, out);
  return out;
}

}  // namespace peak::campaign
