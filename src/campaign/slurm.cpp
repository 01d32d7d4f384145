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

Status follow_slurm(const Campaign& c, const std::vector<Workflow>& todo, const RunOptions& opts,
                    SlurmClient& slurm) {
  auto say = [&](const std::string& line) {
    if (opts.progress) opts.progress(line);
  };
  fs::path peak = c.slurm.peak.empty() ? opts.peak_binary : fs::path(c.slurm.peak);
  json state = load_state(c);
  std::error_code ec;
  fs::create_directories(c.dir / "jobs", ec);
  fs::create_directories(c.dir / "logs", ec);

  std::set<std::string> done, followed;  // ended in this run; whose job was seen or submitted
  std::map<std::string, int> tries;      // requeues and resubmissions in this run
  // Workflows whose job this run requeued and has not seen in the queue since. Slurm may leave a
  // requeued job out of the queue for a moment while the old run finishes (its state then still
  // reads as ended); it is not counted as ended again before kRequeueGrace has passed.
  std::map<std::string, std::chrono::steady_clock::time_point> requeued;
  int queue_failures = 0, submit_failures = 0;
  const auto poll = std::chrono::milliseconds(static_cast<int64_t>(c.slurm.poll_s * 1000));
  const auto requeue_grace = std::max<std::chrono::steady_clock::duration>(kRequeueGrace, 5 * poll);

  auto submit = [&](const Workflow& w, json& rec) -> Status {
    if (auto s = write_file_atomic(w.script, job_script(c, w, peak)); !s)
      return Status::error(s.message(), ErrorKind::environment);
    ::chmod(w.script.c_str(), 0755);
    auto id = slurm.submit(sbatch_options(c, w), w.script);
    if (!id) return id.status();
    rec["executor"] = "slurm";
    rec["job"] = *id;
    rec["job_name"] = job_name(c, w);
    rec["submissions"] = rec.value("submissions", 0) + 1;
    rec["submitted_at"] = now_iso();
    rec["slurm_state"] = "PENDING";
    followed.insert(w.id);
    say(fmt::format("{}: submitted as Slurm job {}", w.id, *id));
    return Status::ok();
  };

  // A job that left the queue: how it ended, as far as Slurm still knows ("ENDED" when not).
  auto note_end = [&](json& rec, const std::string& job) {
    JobEnd e = slurm.ended(job);
    rec["slurm_state"] = e.known && !e.state.empty() ? e.state : "ENDED";
    if (e.known) rec["exit_code"] = e.exit_code;
    if (e.restarts >= 0) rec["restarts"] = e.restarts;
    return e;
  };

  for (;;) {
    auto jobs = slurm.queue();
    if (!jobs) {
      if (++queue_failures >= 10)
        return Status::error(
            fmt::format("Slurm did not answer 10 times in a row: {}\nThe jobs go on without "
                        "this process; `peak campaign run {} --executor slurm` follows them "
                        "again",
                        jobs.error(), c.file.string()),
            ErrorKind::environment);
      say(fmt::format("squeue failed ({}); trying again", jobs.error()));
      std::this_thread::sleep_for(poll);
      continue;
    }
    queue_failures = 0;
    std::map<std::string, SlurmJob> by_id, by_name;
    for (const auto& j : *jobs) {
      by_id[j.id] = j;
      by_name[j.name] = j;
    }
    int active = 0;
    for (const auto& w : todo) {
      json& rec = state["workflows"][w.id];
      if (!rec.is_object()) rec = json::object();
      std::string job = rec.value("job", "");
      if (!by_id.count(job) && by_name.count(job_name(c, w))) {
        job = by_name[job_name(c, w)].id;  // submitted, but its id was never recorded
        rec["executor"] = "slurm";
        rec["job"] = job;
        rec["job_name"] = job_name(c, w);
      }
      if (by_id.count(job)) {
        ++active;
        followed.insert(w.id);
        requeued.erase(w.id);
        const SlurmJob& sj = by_id[job];
        if (rec.value("slurm_state", "") != sj.state)
          say(fmt::format("{}: job {} {}{}", w.id, job, sj.state,
                          sj.reason.empty() || sj.reason == "None" ? "" : " (" + sj.reason + ")"));
        rec["slurm_state"] = sj.state;
      }
    }
    for (const auto& w : todo) {
      if (done.count(w.id)) continue;
      json& rec = state["workflows"][w.id];
      std::string job = rec.value("job", "");
      if (!job.empty() && by_id.count(job)) continue;  // queued or running
      WorkflowState st = read_state(w);
      if (st.status == "passed" || st.status == "failed") {
        done.insert(w.id);
        if (!job.empty() && job_active(rec.value("slurm_state", ""))) note_end(rec, job);
        say(fmt::format("{}: {} ({}/{} steps)", w.id, st.status, st.steps_done, w.steps));
        continue;
      }
      if (followed.count(w.id) && !job.empty()) {
        if (auto it = requeued.find(w.id);
            it != requeued.end() && std::chrono::steady_clock::now() - it->second < requeue_grace) {
          ++active;  // requeued by this run a moment ago: not back in the queue yet
          continue;
        }
        // Its job ended with the workflow unfinished: killed, preempted beyond Slurm's own
        // requeue, failed, or stopped by the workflow itself.
        JobEnd e = note_end(rec, job);
        json outcome = json::object();
        if (auto text = read_file(w.outcome)) outcome = json::parse(*text, nullptr, false);
        if (!outcome.is_object()) outcome = json::object();
        bool this_job = outcome.value("slurm_job", "") == job;
        if (st.status == "waiting") {
          done.insert(w.id);
          say(
              fmt::format("{}: waiting for a manual reply (`peak respond` in {}, then run the "
                          "campaign again)",
                          w.id, w.workspace.string()));
          continue;
        }
        if ((this_job && outcome.value("input_error", false)) || e.exit_code == "2:0") {
          done.insert(w.id);
          rec["note"] = "the workflow could not start: see " + w.log.string();
          say(fmt::format("{}: cannot run ({}); see {}", w.id,
                          this_job ? outcome.value("message", "") : "exit status 2",
                          w.log.string()));
          continue;
        }
        if (tries[w.id] >= c.slurm.max_requeues) {
          done.insert(w.id);
          rec["note"] =
              fmt::format("gave up after {} requeues; see {}", tries[w.id], w.log.string());
          say(
              fmt::format("{}: job {} ended ({}) with the workflow {} after {} requeues; giving "
                          "up (see {})",
                          w.id, job, e.known ? e.state : "state unknown", st.status, tries[w.id],
                          w.log.string()));
          continue;
        }
        ++tries[w.id];
        if (auto s = slurm.requeue(job); s) {
          requeued[w.id] = std::chrono::steady_clock::now();
          rec["requeues"] = rec.value("requeues", 0) + 1;
          rec["slurm_state"] = "PENDING";
          ++active;
          say(fmt::format("{}: job {} ended ({}) with the workflow {} at step {}/{}; requeued",
                          w.id, job, e.known ? e.state : "state unknown", st.status,
                          st.steps_done + 1, w.steps));
          continue;
        }
        // Requeued meanwhile by someone else, or forgotten by the controller: look again before
        // submitting a second job for the same workspace.
        auto again = slurm.queue();
        bool queued = false;
        if (again)
          for (const auto& j : *again) queued |= j.id == job || j.name == job_name(c, w);
        if (!again || queued) continue;
      }
      if (opts.jobs > 0 && active >= opts.jobs) continue;
      if (auto s = submit(w, rec); !s) {
        // A busy controller refuses now and then ("Socket timed out"): try again at the next
        // look, and stop only when it keeps refusing.
        if (++submit_failures >= 10) {
          (void)save_state(c, state);
          return Status::error(
              fmt::format("{}\nsbatch failed 10 times in a row; the jobs already submitted go on, "
                          "and `peak campaign run {} --executor slurm` follows them again",
                          s.message(), c.file.string()),
              s.kind());
        }
        say(fmt::format("{}: {}; trying again", w.id, s.message()));
        continue;
      }
      submit_failures = 0;
      ++active;
    }
    state["updated_at"] = now_iso();
    if (auto s = save_state(c, state); !s) return s;
    if (done.size() >= todo.size()) return Status::ok();
    std::this_thread::sleep_for(poll);
  }
}

}  // namespace peak::campaign
