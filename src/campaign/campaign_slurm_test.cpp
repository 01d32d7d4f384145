// A real Slurm on this machine: munged, slurmctld and slurmd started under a temporary folder
// (loopback only, a generated slurm.conf), a small HLSL campaign on lavapipe through the Slurm
// executor, one job killed (SIGKILL) in the middle of a step and requeued by the executor, and the
// campaign completing with every step checkpointed once and every store consistent. Nothing depends
// on timing: the test holds the CPU device to stop the job inside a step, and every wait polls with
// a generous deadline. The daemons are stopped at the end, whatever happened.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "campaign/campaign.h"
#include "campaign/slurm.h"
#include "store/store.h"
#include "util/device_lock.h"
#include "util/fs.h"
#include "util/process.h"

namespace peak::campaign {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Polls `pred` every `every` until it holds or `limit` passes: a deadline, never a pace.
bool eventually(const std::function<bool()>& pred, std::chrono::seconds limit,
                std::chrono::milliseconds every = std::chrono::milliseconds(250)) {
  auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(every);
  }
  return pred();
}

// A device lock file held with a blocking flock, woken the moment its holder lets go, and named
// in the file as DeviceLock names its holders ("pid N ..."), so that a waiting peak says whom it
// waits for.
struct LockHold {
  explicit LockHold(const fs::path& file)
      : fd(::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666)) {}
  ~LockHold() {
    release();
    if (fd >= 0) ::close(fd);
  }
  bool take() {
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0) return false;
    const std::string me = fmt::format("pid {} (the test)\n", ::getpid());
    held = ::ftruncate(fd, 0) == 0 && ::pwrite(fd, me.data(), me.size(), 0) > 0;
    return held;
  }
  void release() {
    if (!held) return;
    (void)!::ftruncate(fd, 0);
    ::flock(fd, LOCK_UN);
    held = false;
  }
  int fd = -1;
  bool held = false;
};

fs::path find_binary(const std::string& name) {
  for (const char* dir : {"/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin", "/sbin"}) {
    fs::path p = fs::path(dir) / name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return {};
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

int pid_from(const fs::path& file) {
  auto t = read_file(file);
  if (!t) return 0;
  try {
    return std::stoi(trim(*t));
  } catch (...) {
    return 0;
  }
}

bool alive(int pid) { return pid > 0 && ::kill(pid, 0) == 0; }

// munged, slurmctld and slurmd of one single-node cluster on 127.0.0.1, all files under `dir`.
class Cluster {
 public:
  static std::string missing() {
    std::vector<std::string> m;
    for (const char* b : {"munged", "munge", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol",
                          "scancel", "sinfo"})
      if (find_binary(b).empty()) m.push_back(b);
    return join(m, ", ");
  }

  explicit Cluster(fs::path dir) : dir_(std::move(dir)) {}
  ~Cluster() { stop(); }

  // Starts the daemons and waits for the node to be idle; the error carries their logs.
  Status start() {
    std::error_code ec;
    for (const char* d : {"munge", "run", "state", "spool", "log"})
      fs::create_directories(dir_ / d, ec);
    // munged wants every folder above its socket open to everyone (only the key is private).
    for (fs::path p = dir_; !p.empty() && p != p.root_path(); p = p.parent_path())
      if (struct stat st{}; ::stat(p.c_str(), &st) == 0 && (st.st_mode & 0555) != 0555)
        ::chmod(p.c_str(), st.st_mode | 0555);
    ::chmod((dir_ / "munge").c_str(), 0700);
    ::chmod((dir_ / "run").c_str(), 0755);
    std::string key(1024, '\0');
    std::random_device rd;
    for (auto& ch : key) ch = static_cast<char>(rd());
    if (auto s = write_file(dir_ / "munge" / "munge.key", key); !s) return s;
    ::chmod((dir_ / "munge" / "munge.key").c_str(), 0600);
    socket_ = dir_ / "run" / "munge.socket";
    started_ = true;
    if (auto s = daemon({find_binary("munged").string(),
                         "--key-file=" + (dir_ / "munge" / "munge.key").string(),
                         "--socket=" + socket_.string(),
                         "--pid-file=" + (dir_ / "run" / "munged.pid").string(),
                         "--log-file=" + (dir_ / "log" / "munged.log").string(),
                         "--seed-file=" + (dir_ / "munge" / "seed").string()});
        !s)
      return s;

    const int ctld_port = free_port(), slurmd_port = free_port();
    struct passwd* pw = ::getpwuid(::geteuid());
    const std::string user = pw ? pw->pw_name : "root";
    // The node as slurmd sees this machine (boards, sockets, cores, memory), so that it
    // registers without a mismatch.
    ProcessOptions probe;
    probe.argv = {find_binary("slurmd").string(), "-C"};
    probe.timeout_s = 60;
    auto hw = run_process(probe);
    std::string node;
    if (hw && hw->ok())
      for (const auto& line : split_lines(hw->out))
        if (starts_with(line, "NodeName=")) {
          node = line.substr(line.find(' ') + 1);
          break;
        }
    if (node.empty())
      node = fmt::format("CPUs={}", std::max(1u, std::thread::hardware_concurrency()));
    conf_ = dir_ / "slurm.conf";
    std::string conf = fmt::format(
        "# A single-node cluster on the loopback interface for peak's campaign test.\n"
        "ClusterName=peaktest\n"
        "SlurmctldHost=localhost(127.0.0.1)\n"
        "SlurmctldPort={ctld}\nSlurmdPort={slurmd}\n"
        "SlurmUser={user}\nSlurmdUser={user}\n"
        "AuthType=auth/munge\nAuthInfo=socket={sock}\nCredType=cred/munge\n"
        "StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\n"
        "SlurmctldPidFile={d}/run/slurmctld.pid\nSlurmdPidFile={d}/run/slurmd.pid\n"
        "SlurmctldLogFile={d}/log/slurmctld.log\nSlurmdLogFile={d}/log/slurmd.log\n"
        "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
        "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
        "JobCompType=jobcomp/none\nMpiDefault=none\nSwitchType=switch/none\n"
        "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
        "SchedulerType=sched/backfill\nReturnToService=2\n"
        "MinJobAge=3600\nKillWait=10\nSlurmdTimeout=300\n"
        "NodeName=peak-node NodeHostname=localhost NodeAddr=127.0.0.1 {node} State=UNKNOWN\n"
        "PartitionName=peak Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
        fmt::arg("ctld", ctld_port), fmt::arg("slurmd", slurmd_port), fmt::arg("user", user),
        fmt::arg("sock", socket_.string()), fmt::arg("d", dir_.string()), fmt::arg("node", node));
    if (auto s = write_file(conf_, conf); !s) return s;
    if (auto s = daemon({find_binary("slurmctld").string(), "-f", conf_.string()}); !s) return s;
    if (auto s = daemon({find_binary("slurmd").string(), "-f", conf_.string(), "-N", "peak-node"});
        !s)
      return s;
    std::string last;
    bool idle = eventually(
        [&] {
          auto r = cmd({"sinfo", "-h", "-o", "%T"});
          last = r ? trim(*r) : r.error();
          return r && trim(*r) == "idle";
        },
        std::chrono::seconds(180), std::chrono::milliseconds(500));
    if (!idle)
      return Status::error(
          fmt::format("the node did not become idle (sinfo: {})\n{}", last, logs()));
    return Status::ok();
  }

  // Cancels every job, then stops slurmd, slurmctld and munged (SIGKILL after a deadline).
  void stop() {
    if (!started_) return;
    started_ = false;
    // Without a controller squeue would retry for a minute: ask only a running one.
    if (alive(pid_from(dir_ / "run" / "slurmctld.pid")))
      if (auto q = cmd({"squeue", "-h", "-o", "%i"}))
        for (const auto& id : split_lines(*q))
          if (!trim(id).empty()) (void)cmd({"scancel", "--full", trim(id)});
    if (alive(pid_from(dir_ / "run" / "slurmctld.pid")))
      eventually(
          [&] {
            auto q = cmd({"squeue", "-h", "-o", "%i"});
            return !q || trim(*q).empty();
          },
          std::chrono::seconds(60));
    std::vector<int> pids = {pid_from(dir_ / "run" / "slurmd.pid"),
                             pid_from(dir_ / "run" / "slurmctld.pid"),
                             pid_from(dir_ / "run" / "munged.pid")};
    for (int pid : pids)
      if (alive(pid)) ::kill(pid, SIGTERM);
    for (int pid : pids) {
      eventually([&] { return !alive(pid); }, std::chrono::seconds(30));
      if (alive(pid)) ::kill(pid, SIGKILL);
    }
  }

  std::map<std::string, std::string> env() const { return {{"SLURM_CONF", conf_.string()}}; }

  Result<std::string> cmd(const std::vector<std::string>& argv) const {
    ProcessOptions po;
    po.argv = argv;
    po.argv[0] = find_binary(argv[0]).string();
    po.env = env();
    po.timeout_s = 120;
    auto r = run_process(po);
    if (!r) return r.status();
    if (!r->ok()) return make_error(fmt::format("{}: {} {}", argv[0], r->describe(), r->err));
    return r->out;
  }

  std::string logs() const {
    std::string out;
    for (const char* f : {"munged.log", "slurmctld.log", "slurmd.log"}) {
      auto t = read_file(dir_ / "log" / f);
      std::string text = t ? *t : "(none)";
      if (text.size() > 6000) text = "..." + text.substr(text.size() - 6000);
      out += fmt::format("---- {} ----\n{}\n", f, text);
    }
    return out;
  }

 private:
  // Starts a daemon that forks into the background once it is ready.
  Status daemon(const std::vector<std::string>& argv) {
    ProcessOptions po;
    po.argv = argv;
    po.env = env();
    po.timeout_s = 120;
    auto r = run_process(po);
    if (!r || !r->ok())
      return Status::error(fmt::format("{} did not start: {}\n{}\n{}", argv[0],
                                       r ? r->describe() + " " + r->err : r.error(),
                                       r ? r->out : "", logs()));
    return Status::ok();
  }

  fs::path dir_, conf_, socket_;
  bool started_ = false;
};

std::string job_state(const Cluster& cluster, const std::string& job, int* restarts = nullptr) {
  auto r = cluster.cmd({"scontrol", "show", "job", "-o", job});
  if (!r) return "";
  JobEnd e = parse_scontrol_job(*r);
  if (restarts) *restarts = e.restarts;
  return e.state;
}

// What a workspace's store holds now (read-only; a running job may be writing it).
struct StoreView {
  size_t checkpoints = 0;
  std::map<std::string, int> checkpointed;  // transformation -> checkpoints made by it
  std::vector<WorkflowRecord> workflows;
  std::vector<AttemptRecord> attempts;
};
std::optional<StoreView> view(const fs::path& workspace) {
  std::error_code ec;
  if (!fs::exists(workspace / ".peak" / "peak.db", ec)) return std::nullopt;
  auto s = Store::open_read_only(workspace / ".peak");
  if (!s) return std::nullopt;
  StoreView v;
  auto cps = (*s)->checkpoints();
  auto wfs = (*s)->workflows();
  auto ats = (*s)->attempts();
  if (!cps || !wfs || !ats) return std::nullopt;
  v.checkpoints = cps->size();
  for (const auto& c : *cps)
    if (c.parent) ++v.checkpointed[c.transformation];
  v.workflows = *wfs;
  v.attempts = *ats;
  return v;
}

std::string sqlite_check(const fs::path& db, const char* pragma) {
  sqlite3* h = nullptr;
  std::string out;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(h);
    return "cannot open";
  }
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(h, pragma, -1, &st, nullptr) == SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW)
      for (int i = 0; i < sqlite3_column_count(st); ++i) {
        const unsigned char* t = sqlite3_column_text(st, i);
        out += t ? reinterpret_cast<const char*>(t) : "NULL";
        out += i + 1 < sqlite3_column_count(st) ? "|" : "\n";
      }
  } else {
    out = sqlite3_errmsg(h);
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  return out;
}

TEST(CampaignSlurm, AJobKilledMidStepIsRequeuedAndTheCampaignCompletesWithNothingLost) {
  if (std::string m = Cluster::missing(); !m.empty())
    GTEST_SKIP() << "Slurm is not installed here (missing: " << m
                 << "); scripts/setup-debian.sh installs slurm-wlm and munge";
  const auto started = Clock::now();
  auto tmp = make_temp_dir("peak-slurm-test-");
  ASSERT_TRUE(tmp);
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{*tmp};
  Cluster cluster(*tmp / "slurm");
  ASSERT_TRUE(cluster.start()) << "the test cluster did not start:\n" << cluster.logs();

  // The campaign: the recorded HLSL sequence (three steps) and its first step alone, on
  // lavapipe, small shapes, one tuning configuration per step.
  const fs::path dir = *tmp / "campaign";
  ASSERT_TRUE(write_file(dir / "refactor-only.toml",
                         "format = 1\nname = \"refactor-only\"\n\n[[step]]\ntransformation = "
                         "\"refactor\"\n"));
  ASSERT_TRUE(write_file(dir / "campaign.toml", R"(format = 1
name = "slurm-lavapipe"
contexts = ["matmul-hlsl-fp32"]
sequences = ["hlsl-fp32-short", "refactor-only.toml"]
llms = ["replay:hlsl-fp32"]

[[device]]
name = "lavapipe"
select = "llvmpipe"

[eval]
shapes = "small"
budget = 1

[slurm]
poll_seconds = 1
max_requeues = 3
time = "00:30:00"
)"));
  ::setenv("PEAK_DATA_DIR", PEAK_SOURCE_DIR, 1);
  ::unsetenv("PEAK_LIBRARY");
  ::unsetenv("PEAK_FAULT");
  auto c = load_campaign(dir / "campaign.toml");
  ASSERT_TRUE(c) << c.error();
  auto all = workflows(*c);
  ASSERT_EQ(all.size(), 2u);
  const Workflow& target = all[0];  // hlsl-fp32-short: the one killed mid-step
  ASSERT_EQ(target.steps, 3);

  // Device locks of this test alone: the jobs inherit PEAK_LOCK_DIR through sbatch.
  const fs::path locks = *tmp / "locks";
  fs::create_directories(locks);
  ::setenv("PEAK_LOCK_DIR", locks.c_str(), 1);
  ::setenv("SLURM_CONF", cluster.env().at("SLURM_CONF").c_str(), 1);

  // The CPU device, held by this test from the start (see below).
  LockHold hold(locks / "cpu.lock");
  ASSERT_TRUE(hold.take());

  // `peak campaign run FILE --executor slurm`, its output in files.
  struct Follower {
    Subprocess p;
    ~Follower() {
      if (p.running()) p.kill_group();
    }
  } follower;
  ProcessOptions po;
  po.argv = {"/bin/sh",
             "-c",
             "exec \"$0\" \"$@\" >" + shell_quote((*tmp / "summary.json").string()) + " 2>" +
                 shell_quote((*tmp / "follower.log").string()),
             (fs::path(PEAK_BINARY_DIR) / "peak").string(),
             "--json",
             "campaign",
             "run",
             c->file.string(),
             "--executor",
             "slurm"};
  ASSERT_TRUE(follower.p.start(po));
  auto follower_log = [&] {
    auto t = read_file(*tmp / "follower.log");
    return t ? *t : std::string("(no output)");
  };
  auto diagnostics = [&] {
    auto q = cluster.cmd({"squeue", "-h", "-o", "%i %T %j %r"});
    std::string out = "follower:\n" + follower_log() + "\nqueue: " + (q ? *q : q.error()) + "\n";
    for (const auto& w : all) {
      auto t = read_file(w.log);
      out += fmt::format("---- {} ----\n{}\n", w.log.filename().string(), t ? *t : "(none)");
    }
    return out + cluster.logs();
  };

  // The follower ended before its time (it is a zombie until waited for): a wait stops at once.
  auto follower_ended = [&] {
    auto stat = read_file(fmt::format("/proc/{}/stat", follower.p.pid()));
    if (!stat) return true;
    auto paren = stat->rfind(')');
    return paren == std::string::npos || stat->substr(paren + 2, 1) == "Z";
  };

  // The test holds the CPU device, which every evaluation needs, and lets the jobs through one
  // hold at a time: each time the target waits for it, the test either finds the target stopped
  // inside a step after step 1's checkpoint (its model's replies recorded, the candidate's
  // evaluation waiting), or lets go until another process holds the device and takes it back the
  // moment that hold ends (a blocking lock, woken by the release).
  const std::string waits_for_us = fmt::format("in use by pid {} ", ::getpid());
  auto waits = [&] {  // how often the target has begun to wait for this process
    auto log = read_file(target.log);
    size_t n = 0;
    for (size_t at = 0; log && (at = log->find(waits_for_us, at)) != std::string::npos; ++at) ++n;
    return n;
  };
  const fs::path lock_file = locks / "cpu.lock";
  auto someone_else_holds = [&] {
    auto holder = read_file(lock_file);
    return holder && !holder->empty() && holder->find(waits_for_us.substr(10)) == std::string::npos;
  };
  auto hand_over = [&] {
    hold.release();
    ASSERT_TRUE(eventually([&] { return follower_ended() || someone_else_holds(); },
                           std::chrono::seconds(600)))
        << "no job took the device\n"
        << diagnostics();
    ASSERT_TRUE(hold.take());
  };
  std::string stopped_in;
  size_t seen = 0;
  ASSERT_TRUE(eventually(
      [&] {
        if (follower_ended()) return true;
        const size_t n = waits();
        if (n == seen) return false;  // the target is not waiting for this process (again)
        seen = n;
        auto v = view(target.workspace);
        if (v && v->checkpoints >= 2)
          for (const auto& a : v->attempts)
            if (a.pass_index >= 1 && a.disposition == "passed" &&
                !v->checkpointed.count(a.transformation)) {
              stopped_in = a.transformation;
              return true;
            }
        hand_over();
        return false;
      },
      std::chrono::seconds(900)))
      << "the job never stopped inside a step (did the run end first?)\n"
      << diagnostics();
  ASSERT_FALSE(stopped_in.empty()) << "`peak campaign run` ended early\n" << diagnostics();
  auto before = view(target.workspace);
  ASSERT_TRUE(before);
  ASSERT_EQ(before->workflows.size(), 1u);
  EXPECT_EQ(before->workflows[0].status, "running");

  // Kill the job: SIGKILL to every process of it, as a node lost or an out-of-memory kill would.
  // The executor sees the job end with its workflow unfinished and requeues it (same job id).
  std::string job;
  ASSERT_TRUE(eventually(
      [&] {
        job = load_state(*c)["workflows"][target.id].value("job", "");
        return !job.empty();
      },
      std::chrono::seconds(60)));
  ASSERT_EQ(job_state(cluster, job), "RUNNING") << diagnostics();
  ASSERT_TRUE(cluster.cmd({"scancel", "--signal=KILL", "--full", job})) << diagnostics();
  ASSERT_TRUE(eventually(
      [&] {
        return job_state(cluster, job) == "PENDING" &&
               load_state(*c)["workflows"][target.id].value("requeues", 0) == 1;
      },
      std::chrono::seconds(300)))
      << "the killed job was not requeued\n"
      << diagnostics();
  // A requeued job waits about two minutes before it may start again, so that its new launch
  // credential postdates the one slurmd revoked when the killed run ended (whole seconds; a launch
  // in the same second is refused as "Job credential revoked" and the job ends FAILED). The kill
  // happened before this point: a start three seconds from now is always past it.
  (void)cluster.cmd({"scontrol", "update", "JobId=" + job, "StartTime=now+3"});
  auto mid = view(target.workspace);
  ASSERT_TRUE(mid);
  EXPECT_EQ(mid->checkpoints, before->checkpoints);  // the kill made nothing, lost nothing
  hold.release();                                    // the device is free: the requeued job resumes

  // The campaign completes.
  ProcessResult end = follower.p.wait(900);
  ASSERT_TRUE(end.ok()) << end.describe() << "\n" << diagnostics();
  auto text = read_file(*tmp / "summary.json");
  ASSERT_TRUE(text);
  json summary = json::parse(*text, nullptr, false);
  ASSERT_TRUE(summary.is_object()) << *text;
  EXPECT_EQ(summary["totals"].value("passed", 0), 2) << summary.dump(2);
  EXPECT_TRUE(summary.value("complete", false));
  EXPECT_TRUE(summary.contains("stats"));

  // Slurm requeued the job: same id, restarted.
  int restarts = -1;
  EXPECT_EQ(job_state(cluster, job, &restarts), "COMPLETED");
  EXPECT_GE(restarts, 1);
  for (const auto& r : summary["workflows"])
    if (r.value("id", "") == target.id) {
      EXPECT_EQ(r["executor"].value("job", ""), job);
      EXPECT_EQ(r["executor"].value("submissions", 0), 1);
      EXPECT_EQ(r["executor"].value("requeues", 0), 1) << diagnostics();
      EXPECT_GE(r["executor"].value("restarts", 0), 1);
    }

  // Nothing lost, nothing twice: one checkpoint per step, one run workflow (resumed, passed),
  // the model's replies recorded once, and every store consistent.
  for (const auto& w : all) {
    auto v = view(w.workspace);
    ASSERT_TRUE(v) << w.id;
    EXPECT_EQ(v->checkpoints, static_cast<size_t>(w.steps) + 1) << w.id;
    for (const auto& [t, n] : v->checkpointed) EXPECT_EQ(n, 1) << w.id << ": " << t;
    ASSERT_EQ(v->workflows.size(), 1u) << w.id;
    EXPECT_EQ(v->workflows[0].kind, "run");
    EXPECT_EQ(v->workflows[0].status, "passed");
    std::map<std::string, int> replies;
    for (const auto& a : v->attempts)
      if (a.pass_index >= 1)
        ++replies[fmt::format("{} try {} pass {}", a.transformation, a.attempt, a.pass_index)];
    for (const auto& [k, n] : replies) EXPECT_EQ(n, 1) << w.id << ": " << k;
    const fs::path db = w.workspace / ".peak" / "peak.db";
    EXPECT_EQ(sqlite_check(db, "PRAGMA integrity_check"), "ok\n") << w.id;
    EXPECT_EQ(sqlite_check(db, "PRAGMA foreign_key_check"), "") << w.id;
  }
  EXPECT_TRUE(view(target.workspace)->checkpointed.count(stopped_in));
  auto log = read_file(target.log);
  ASSERT_TRUE(log);
  EXPECT_NE(log->find("resuming run"), std::string::npos) << *log;

  std::printf("%s", follower_log().c_str());
  std::printf(
      "[ campaign ] %s killed in step '%s' as job %s, requeued %d time(s); whole test %.0f s\n",
      target.id.c_str(), stopped_in.c_str(), job.c_str(), restarts,
      std::chrono::duration<double>(Clock::now() - started).count());
}

}  // namespace
}  // namespace peak::campaign
