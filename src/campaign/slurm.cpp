// The Slurm executor: batch scripts, sbatch options, squeue/scontrol/sacct, and the loop that
// follows the jobs until every workflow has ended.
#include "campaign/slurm.h"

#include <sys/stat.h>

#include <chrono>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "store/store.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/sha256.h"

namespace peak::campaign {

// How long a job this executor requeued may stay out of the queue before it counts as ended
// again (at least five polls).
constexpr std::chrono::seconds kRequeueGrace{60};

namespace fs = std::filesystem;

namespace {

class CommandSlurm : public SlurmClient {
 public:
  explicit CommandSlurm(std::string bin_dir) : bin_dir_(std::move(bin_dir)) {}

  Result<std::vector<SlurmJob>> queue() override {
    auto r = run({"squeue", "--me", "-h", "-o", "%i|%T|%j|%r"});
    if (!r) return r.status();
    return parse_squeue(*r);
  }

  Result<std::string> submit(const std::vector<std::string>& options,
                             const fs::path& script) override {
    std::vector<std::string> argv = {"sbatch", "--parsable"};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.push_back(script.string());
    auto r = run(argv);
    if (!r) return r.status();
    std::string id = trim(*r);
    if (auto semi = id.find(';'); semi != std::string::npos) id = id.substr(0, semi);
    if (id.empty() || id.find_first_not_of("0123456789_") != std::string::npos)
      return make_error(fmt::format("sbatch answered '{}' instead of a job id", trim(*r)),
                        ErrorKind::environment);
    return id;
  }

  Status requeue(const std::string& id) override {
    auto r = run({"scontrol", "requeue", id});
    return r ? Status::ok() : r.status();
  }

  JobEnd ended(const std::string& id) override {
    if (auto r = run({"scontrol", "show", "job", "-o", id})) {
      JobEnd e = parse_scontrol_job(*r);
      if (e.known) return e;
    }
    // The controller forgot it (MinJobAge): the accounting database may still know it.
    JobEnd e;
    if (auto r = run({"sacct", "-n", "-P", "-X", "-j", id, "-o", "State,ExitCode"})) {
      for (const auto& line : split_lines(*r)) {
        auto bar = line.find('|');
        if (bar == std::string::npos) continue;
        std::string state = trim(line.substr(0, bar));
        if (auto sp = state.find(' '); sp != std::string::npos) state = state.substr(0, sp);
        e.known = !state.empty();
        e.state = state;
        e.exit_code = trim(line.substr(bar + 1));
        break;
      }
    }
    return e;
  }

 private:
  Result<std::string> run(std::vector<std::string> argv) {
    if (!bin_dir_.empty()) argv[0] = (fs::path(bin_dir_) / argv[0]).string();
    ProcessOptions po;
    po.argv = argv;
    po.timeout_s = 120;
    auto r = run_process(po);
    if (!r)
      return make_error(fmt::format("cannot run {}: {} (is Slurm installed here? `{}` must be on "
                                    "PATH)",
                                    argv[0], r.error(), fs::path(argv[0]).filename().string()),
                        ErrorKind::environment);
    if (!r->ok())
      return make_error(fmt::format("`{}` failed ({}): {}", join(argv, " "), r->describe(),
                                    trim(r->err.empty() ? r->out : r->err)),
                        ErrorKind::environment);
    return r->out;
  }
  std::string bin_dir_;
};

std::string now_iso() { return utc_now_iso8601(); }

}  // namespace

std::unique_ptr<SlurmClient> command_slurm(const std::string& bin_dir) {
  return std::make_unique<CommandSlurm>(bin_dir);
}

std::string job_name(const Campaign& c, const Workflow& w) {
  return fmt::format("peak-{}-{}", sha256_hex(c.dir.string()).substr(0, 8), w.id);
}

std::vector<std::string> sbatch_options(const Campaign& c, const Workflow& w) {
  const SlurmSettings& s = c.slurm;
  std::vector<std::string> o = {"--job-name=" + job_name(c, w), "--requeue", "--open-mode=append",
                                "--output=" + w.log.string(), "--chdir=" + c.dir.string()};
  std::string partition = w.device.partition.empty() ? s.partition : w.device.partition;
  if (!partition.empty()) o.push_back("--partition=" + partition);
  if (!s.account.empty()) o.push_back("--account=" + s.account);
  if (!s.qos.empty()) o.push_back("--qos=" + s.qos);
  if (!s.time.empty()) o.push_back("--time=" + s.time);
  if (!s.mem.empty()) o.push_back("--mem=" + s.mem);
  if (s.cpus_per_task > 0) o.push_back(fmt::format("--cpus-per-task={}", s.cpus_per_task));
  if (!w.device.gres.empty())
    o.push_back("--gres=" + w.device.gres);
  else if (w.device.gpus > 0)
    o.push_back(fmt::format("--gres=gpu:{}", w.device.gpus));
  if (!w.device.constraint.empty()) o.push_back("--constraint=" + w.device.constraint);
  o.insert(o.end(), s.extra.begin(), s.extra.end());
  return o;
}

std::string job_script(const Campaign& c, const Workflow& w, const fs::path& peak) {
  return fmt::format(
      "#!/bin/sh\n"
      "# peak campaign {}, workflow {}: written by `peak campaign run`. Slurm runs it again when\n"
      "# it requeues the job; the workflow then resumes from its last checkpoint.\n"
      "exec {} campaign exec {} {}\n",
      c.name, w.id, shell_quote(peak.string()), shell_quote(c.file.string()), shell_quote(w.id));
}

std::vector<SlurmJob> parse_squeue(const std::string& out) {
  std::vector<SlurmJob> jobs;
  for (const auto& line : split_lines(out)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string part;
    while (std::getline(ss, part, '|')) f.push_back(trim(part));
    if (f.size() < 3 || f[0].empty()) continue;
    jobs.push_back({f[0], f[2], f[1], f.size() > 3 ? f[3] : ""});
  }
  return jobs;
}

JobEnd parse_scontrol_job(const std::string& out) {
  JobEnd e;
  std::stringstream ss(out);
  std::string word;
  while (ss >> word) {
    auto eq = word.find('=');
    if (eq == std::string::npos) continue;
    std::string k = word.substr(0, eq), v = word.substr(eq + 1);
    if (k == "JobState") {
      e.state = v;
      e.known = true;
    } else if (k == "ExitCode") {
      e.exit_code = v;
    } else if (k == "Restarts") {
      try {
        e.restarts = std::stoi(v);
      } catch (...) {
      }
    }
  }
  return e;
}

bool job_active(const std::string& state) {
  static const std::set<std::string> ended = {
      "COMPLETED", "FAILED",   "CANCELLED",     "TIMEOUT", "NODE_FAIL",   "PREEMPTED",
      "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "REVOKED", "SPECIAL_EXIT"};
  return !state.empty() && !ended.count(state);
}

json load_state(const Campaign& c) {
  json j = json::object();
  if (auto text = read_file(c.dir / "campaign.json")) {
    json p = json::parse(*text, nullptr, false);
    if (p.is_object() && p.value("format", 0) <= kStateFormatVersion) j = p;
  }
  j["format"] = kStateFormatVersion;
  j["campaign"] = c.name;
  j["file"] = c.file.string();
  if (!j.contains("workflows") || !j["workflows"].is_object()) j["workflows"] = json::object();
  return j;
}

Status save_state(const Campaign& c, const json& state) {
  std::error_code ec;
  fs::create_directories(c.dir, ec);
  if (auto s = write_file_atomic(c.dir / "campaign.json", state.dump(2) + "\n"); !s)
    return Status::error(s.message(), ErrorKind::environment);
  return Status::ok();
}

namespace {

// Follows the jobs of the workflows of one run until each has ended: looks at the queue every
// poll, records what it sees in <dir>/campaign.json, and requeues or submits the jobs of the
// workflows that are not finished.
class SlurmFollower {
 public:
  SlurmFollower(const Campaign& c, const std::vector<Workflow>& todo, const RunOptions& opts,
                SlurmClient& slurm)
      : c_(c),
        todo_(todo),
        opts_(opts),
        slurm_(slurm),
        peak_(c.slurm.peak.empty() ? opts.peak_binary : fs::path(c.slurm.peak)),
        state_(load_state(c)),
        poll_(static_cast<int64_t>(c.slurm.poll_s * 1000)),
        requeue_grace_(std::max<std::chrono::steady_clock::duration>(kRequeueGrace, 5 * poll_)) {}

  Status follow();

 private:
  void say(const std::string& line) const {
    if (opts_.progress) opts_.progress(line);
  }
  // Records the jobs of `jobs` (this user's queue) that belong to workflows of the run; returns
  // how many of those are queued or running.
  int track_queued(const std::vector<SlurmJob>& jobs);
  // Moves one workflow on whose job is not in the queue: notes how it ended, requeues or
  // submits. Fails only when sbatch keeps failing.
  Status advance(const Workflow& w, int& active);
  // A followed job left the queue with its workflow unfinished: waits for a job requeued a
  // moment ago, stops at what cannot be retried, else requeues. True when a new job must be
  // submitted instead.
  bool handle_ended(const Workflow& w, json& rec, const std::string& job, const WorkflowState& st,
                    int& active);
  // Submits, and counts the refusals in a row: the error when sbatch keeps refusing.
  Status submit_counted(const Workflow& w, json& rec, int& active);
  Status submit(const Workflow& w, json& rec);
  // A job that left the queue: how it ended, as far as Slurm still knows ("ENDED" when not).
  JobEnd note_end(json& rec, const std::string& job);

  const Campaign& c_;
  const std::vector<Workflow>& todo_;
  const RunOptions& opts_;
  SlurmClient& slurm_;
  const fs::path peak_;
  json state_;
  std::set<std::string> done_, followed_;  // ended in this run; whose job was seen or submitted
  std::map<std::string, int> tries_;       // requeues and resubmissions in this run
  // Workflows whose job this run requeued and has not seen in the queue since. Slurm may leave a
  // requeued job out of the queue for a moment while the old run finishes (its state then still
  // reads as ended); it is not counted as ended again before requeue_grace_ has passed.
  std::map<std::string, std::chrono::steady_clock::time_point> requeued_;
  std::map<std::string, SlurmJob> by_id_, by_name_;  // the queue at the last look
  int queue_failures_ = 0, submit_failures_ = 0;
  const std::chrono::milliseconds poll_;
  const std::chrono::steady_clock::duration requeue_grace_;
};

Status SlurmFollower::follow() {
  std::error_code ec;
  fs::create_directories(c_.dir / "jobs", ec);
  fs::create_directories(c_.dir / "logs", ec);
  for (;;) {
    auto jobs = slurm_.queue();
    if (!jobs) {
      if (++queue_failures_ >= 10)
        return Status::error(
            fmt::format("Slurm did not answer 10 times in a row: {}\nThe jobs go on without "
                        "this process; `peak campaign run {} --executor slurm` follows them "
                        "again",
                        jobs.error(), c_.file.string()),
            ErrorKind::environment);
      say(fmt::format("squeue failed ({}); trying again", jobs.error()));
      std::this_thread::sleep_for(poll_);
      continue;
    }
    queue_failures_ = 0;
    int active = track_queued(*jobs);
    for (const auto& w : todo_)
      if (auto s = advance(w, active); !s) return s;
    state_["updated_at"] = now_iso();
    if (auto s = save_state(c_, state_); !s) return s;
    if (done_.size() >= todo_.size()) return Status::ok();
    std::this_thread::sleep_for(poll_);
  }
}

int SlurmFollower::track_queued(const std::vector<SlurmJob>& jobs) {
  by_id_.clear();
  by_name_.clear();
  for (const auto& j : jobs) {
    by_id_[j.id] = j;
    by_name_[j.name] = j;
  }
  int active = 0;
  for (const auto& w : todo_) {
    json& rec = state_["workflows"][w.id];
    if (!rec.is_object()) rec = json::object();
    std::string job = rec.value("job", "");
    if (!by_id_.count(job) && by_name_.count(job_name(c_, w))) {
      job = by_name_[job_name(c_, w)].id;  // submitted, but its id was never recorded
      rec["executor"] = "slurm";
      rec["job"] = job;
      rec["job_name"] = job_name(c_, w);
    }
    if (by_id_.count(job)) {
      ++active;
      followed_.insert(w.id);
      requeued_.erase(w.id);
      const SlurmJob& sj = by_id_[job];
      if (rec.value("slurm_state", "") != sj.state)
        say(fmt::format("{}: job {} {}{}", w.id, job, sj.state,
                        sj.reason.empty() || sj.reason == "None" ? "" : " (" + sj.reason + ")"));
      rec["slurm_state"] = sj.state;
    }
  }
  return active;
}

Status SlurmFollower::advance(const Workflow& w, int& active) {
  if (done_.count(w.id)) return Status::ok();
  json& rec = state_["workflows"][w.id];
  std::string job = rec.value("job", "");
  if (!job.empty() && by_id_.count(job)) return Status::ok();  // queued or running
  WorkflowState st = read_state(w);
  if (st.status == "passed" || st.status == "failed") {
    done_.insert(w.id);
    if (!job.empty() && job_active(rec.value("slurm_state", ""))) note_end(rec, job);
    say(fmt::format("{}: {} ({}/{} steps)", w.id, st.status, st.steps_done, w.steps));
    return Status::ok();
  }
  if (followed_.count(w.id) && !job.empty() && !handle_ended(w, rec, job, st, active))
    return Status::ok();
  if (opts_.jobs > 0 && active >= opts_.jobs) return Status::ok();
  return submit_counted(w, rec, active);
}

bool SlurmFollower::handle_ended(const Workflow& w, json& rec, const std::string& job,
                                 const WorkflowState& st, int& active) {
  if (auto it = requeued_.find(w.id);
      it != requeued_.end() && std::chrono::steady_clock::now() - it->second < requeue_grace_) {
    ++active;  // requeued by this run a moment ago: not back in the queue yet
    return false;
  }
  // Its job ended with the workflow unfinished: killed, preempted beyond Slurm's own
  // requeue, failed, or stopped by the workflow itself.
  JobEnd e = note_end(rec, job);
  json outcome = json::object();
  if (auto text = read_file(w.outcome)) outcome = json::parse(*text, nullptr, false);
  if (!outcome.is_object()) outcome = json::object();
  bool this_job = outcome.value("slurm_job", "") == job;
  if (st.status == "waiting") {
    done_.insert(w.id);
    say(
        fmt::format("{}: waiting for a manual reply (`peak respond` in {}, then run the "
                    "campaign again)",
                    w.id, w.workspace.string()));
    return false;
  }
  if ((this_job && outcome.value("input_error", false)) || e.exit_code == "2:0") {
    done_.insert(w.id);
    rec["note"] = "the workflow could not start: see " + w.log.string();
    say(fmt::format("{}: cannot run ({}); see {}", w.id,
                    this_job ? outcome.value("message", "") : "exit status 2", w.log.string()));
    return false;
  }
  if (tries_[w.id] >= c_.slurm.max_requeues) {
    done_.insert(w.id);
    rec["note"] = fmt::format("gave up after {} requeues; see {}", tries_[w.id], w.log.string());
    say(fmt::format(
        "{}: job {} ended ({}) with the workflow {} after {} requeues; giving "
        "up (see {})",
        w.id, job, e.known ? e.state : "state unknown", st.status, tries_[w.id], w.log.string()));
    return false;
  }
  ++tries_[w.id];
  if (auto s = slurm_.requeue(job); s) {
    requeued_[w.id] = std::chrono::steady_clock::now();
    rec["requeues"] = rec.value("requeues", 0) + 1;
    rec["slurm_state"] = "PENDING";
    ++active;
    say(fmt::format("{}: job {} ended ({}) with the workflow {} at step {}/{}; requeued", w.id, job,
                    e.known ? e.state : "state unknown", st.status, st.steps_done + 1, w.steps));
    return false;
  }
  // Requeued meanwhile by someone else, or forgotten by the controller: look again before
  // submitting a second job for the same workspace.
  auto again = slurm_.queue();
  bool queued = false;
  if (again)
    for (const auto& j : *again) queued |= j.id == job || j.name == job_name(c_, w);
  return again && !queued;
}

Status SlurmFollower::submit_counted(const Workflow& w, json& rec, int& active) {
  if (auto s = submit(w, rec); !s) {
    // A busy controller refuses now and then ("Socket timed out"): try again at the next
    // look, and stop only when it keeps refusing.
    if (++submit_failures_ >= 10) {
      (void)save_state(c_, state_);
      return Status::error(
          fmt::format("{}\nsbatch failed 10 times in a row; the jobs already submitted go on, "
                      "and `peak campaign run {} --executor slurm` follows them again",
                      s.message(), c_.file.string()),
          s.kind());
    }
    say(fmt::format("{}: {}; trying again", w.id, s.message()));
    return Status::ok();
  }
  submit_failures_ = 0;
  ++active;
  return Status::ok();
}

Status SlurmFollower::submit(const Workflow& w, json& rec) {
  if (auto s = write_file_atomic(w.script, job_script(c_, w, peak_)); !s)
    return Status::error(s.message(), ErrorKind::environment);
  ::chmod(w.script.c_str(), 0755);
  auto id = slurm_.submit(sbatch_options(c_, w), w.script);
  if (!id) return id.status();
  rec["executor"] = "slurm";
  rec["job"] = *id;
  rec["job_name"] = job_name(c_, w);
  rec["submissions"] = rec.value("submissions", 0) + 1;
  rec["submitted_at"] = now_iso();
  rec["slurm_state"] = "PENDING";
  followed_.insert(w.id);
  say(fmt::format("{}: submitted as Slurm job {}", w.id, *id));
  return Status::ok();
}

JobEnd SlurmFollower::note_end(json& rec, const std::string& job) {
  JobEnd e = slurm_.ended(job);
  rec["slurm_state"] = e.known && !e.state.empty() ? e.state : "ENDED";
  if (e.known) rec["exit_code"] = e.exit_code;
  if (e.restarts >= 0) rec["restarts"] = e.restarts;
  return e;
}

}  // namespace

Status follow_slurm(const Campaign& c, const std::vector<Workflow>& todo, const RunOptions& opts,
                    SlurmClient& slurm) {
  return SlurmFollower(c, todo, opts, slurm).follow();
}

}  // namespace peak::campaign
