// Campaign files, the matrix, the Slurm executor's commands and decisions (through a scheduler
// that runs its jobs in this process), and the local executor with the real peak binary,
// including a workflow process killed in the middle of a step.
#include "campaign/campaign.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <thread>

#include "campaign/slurm.h"
#include "engine/testing.h"
#include "store/store.h"
#include "util/device_lock.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/workspace_lock.h"

namespace peak::campaign {
namespace {

namespace fs = std::filesystem;

class CampaignTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = make_temp_dir("peak-campaign-test-");
    ASSERT_TRUE(d);
    tmp_ = *d;
    ::setenv("PEAK_DATA_DIR", PEAK_SOURCE_DIR, 1);
    ::unsetenv("PEAK_FAULT");
    ::unsetenv("PEAK_LIBRARY");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
  fs::path write(const std::string& name, const std::string& text) {
    EXPECT_TRUE(write_file(tmp_ / name, text));
    return tmp_ / name;
  }
  // The campaign's file is written too: its workflows' processes read it.
  Result<Campaign> parse(const std::string& text) {
    write("campaign.toml", text);
    return parse_campaign(text, tmp_ / "campaign.toml");
  }
  // The small kernel (Y = 2 X), its one-pass transformation in $PEAK_LIBRARY, a one-step
  // sequence, and a `command:` model that answers it and counts its calls.
  std::string scale_campaign(const std::string& extra = "") {
    write("scale/kernel.toml", testing::kScaleToml);
    write("scale/kernel.hlsl", testing::kScaleSource);
    write("lib/add-twice.md", testing::kAddTwice);
    ::setenv("PEAK_LIBRARY", (tmp_ / "lib").c_str(), 1);
    write("twice.toml",
          "format = 1\nname = \"twice\"\n\n[[step]]\ntransformation = \"add-twice\"\n");
    write("reply.md", std::string("```hlsl\n") + testing::kAddedDevice + "```\n");
    std::string llm = "command:'echo x >> " + (tmp_ / "llm-calls").string() + "; cat " +
                      (tmp_ / "reply.md").string() + "'";
    return "format = 1\nname = \"scale\"\ncontexts = [\"scale\"]\nsequences = [\"twice.toml\"]\n"
           "llms = [\"" +
           replace_all(llm, "'", "\\u0027") +
           "\"]\n\n[eval]\nshapes = \"small\"\nbudget = 1\nbaseline = false\n" + extra;
  }
  // Every workflow's log, for failure messages.
  static std::string logs(const Campaign& c) {
    std::string out;
    for (const auto& w : workflows(c)) {
      auto t = read_file(w.log);
      out += "---- " + w.id + " ----\n" + (t ? *t : std::string("(no log)")) + "\n";
    }
    return out;
  }
  size_t llm_calls() {
    auto t = read_file(tmp_ / "llm-calls");
    return t ? split_lines(*t).size() : 0;
  }
  fs::path tmp_;
};

TEST_F(CampaignTest, ParsesTheMatrixAndResolvesItsNames) {
  write("my-seq.toml", "format = 1\nname = \"mine\"\n\n[[step]]\ntransformation = \"refactor\"\n");
  auto c = parse(R"(
format = 1
name = "matmul"
description = "two devices, two models"
contexts = ["matmul-hlsl-fp32"]
sequences = ["hlsl-fp32-short", "my-seq.toml"]
llms = ["replay:hlsl-fp32", "openai:gpt-5@http://127.0.0.1:8080/v1"]
attempts = 2

[[device]]
name = "lavapipe"
select = "llvmpipe"

[[device]]
name = "h100"
select = "H100"
partition = "gpu"

[eval]
shapes = "small"
budget = 2
strategy = "random"

[slurm]
time = "01:00:00"
cpus_per_task = 4
extra = ["--exclusive"]
max_requeues = 5
poll_seconds = 2
)");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->dir, tmp_ / "matmul.campaign");
  ASSERT_EQ(c->contexts.size(), 1u);
  EXPECT_EQ(c->contexts[0].name, "matmul-hlsl-fp32");
  EXPECT_EQ(c->contexts[0].value,
            (fs::path(PEAK_SOURCE_DIR) / "examples/matmul-hlsl-fp32").lexically_normal().string());
  ASSERT_EQ(c->sequences.size(), 2u);
  EXPECT_EQ(c->sequences[1].name, "mine");
  EXPECT_EQ(c->sequences[1].value, (tmp_ / "my-seq.toml").string());
  EXPECT_EQ(c->llms[0].name, "replay-hlsl-fp32");
  EXPECT_EQ(
      c->llms[0].value,
      "replay:" + (fs::path(PEAK_SOURCE_DIR) / "recordings/hlsl-fp32").lexically_normal().string());
  EXPECT_EQ(c->llms[1].name, "openai-gpt-5");
  EXPECT_EQ(c->devices[0].gpus, 0);  // a CPU device asks Slurm for no GPU
  EXPECT_EQ(c->devices[1].gpus, 1);
  EXPECT_EQ(c->attempts, 2);
  EXPECT_EQ(c->eval.small, std::optional<bool>(true));
  EXPECT_EQ(c->slurm.max_requeues, 5);

  auto ws = workflows(*c);
  ASSERT_EQ(ws.size(), 8u);  // 1 x 2 x 2 x 2
  EXPECT_EQ(ws[0].id, "matmul-hlsl-fp32__hlsl-fp32-short__replay-hlsl-fp32__lavapipe");
  EXPECT_EQ(ws[0].steps, 3);
  EXPECT_EQ(ws[7].id, "matmul-hlsl-fp32__mine__openai-gpt-5__h100");
  EXPECT_EQ(ws[7].workspace, c->dir / "workspaces" / ws[7].id);
  EXPECT_TRUE(find_workflow(*c, ws[3].id));
  auto missing = find_workflow(*c, "nope");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find(ws[0].id), std::string::npos);
}

TEST_F(CampaignTest, MistakesAreNamedWithTheirLine) {
  struct Case {
    std::string text, expect;
  };
  const std::string base =
      "name = \"c\"\ncontexts = [\"matmul-hlsl-fp32\"]\nsequences = [\"hlsl-fp32-short\"]\n"
      "llms = [\"replay:hlsl-fp32\"]\n";
  std::vector<Case> cases = {
      {base, "no 'format'; add 'format = 1'"},
      {"format = 2\n" + base, "campaign format 2 is newer than this peak supports"},
      {"format = 1\n" + base + "budget = 3\n", "campaign.toml:6: unknown key 'budget'"},
      {"format = 1\nname = \"c\"\ncontexts = [\"matmul-hlsl-fp32\"]\nsequences = "
       "[\"hlsl-fp32-short\"]\n",
       "the campaign has no 'llms'"},
      {"format = 1\n" + base + "\n[eval]\nshapes = \"tiny\"\n",
       "shapes must be \"small\" or \"full\""},
      {"format = 1\n" + base + "\n[eval]\nstrategy = \"magic\"\n", "magic"},
      {"format = 1\nname = \"c\"\ncontexts = [\"no-such-context\"]\nsequences = "
       "[\"hlsl-fp32-short\"]\nllms = [\"replay:hlsl-fp32\"]\n",
       "campaign.toml:3: no-such-context is not a kernel context"},
      {"format = 1\nname = \"c\"\ncontexts = [\"matmul-hlsl-fp32\"]\nsequences = "
       "[\"hlsl-fp32-short\"]\nllms = [\"gpt-5\"]\n",
       "campaign.toml:5: 'gpt-5' is not an LLM driver spec"},
      {"format = 1\n" + base + "\n[[device]]\nname = \"a\"\n\n[[device]]\nname = \"a\"\n",
       "two combinations are both named"},
      {"format = 1\n" + base + "\n[slurm]\nextra = [\"exclusive\"]\n",
       "'exclusive' is not an sbatch option"},
      {"format = 1\n" + base + "\n[[device]]\nname = \"a\"\ngpus = -1\n",
       "'gpus' must be between 0 and 64"},
      {"format = 1\n" + base + "\n[[device]]\nselect = \"0\"\ndevices = \"0,1\"\n",
       "select and devices exclude each other"},
      {"format = 1\n" + base + "\n[[device]]\ndevices = \"0,,1\"\n",
       "devices: --devices '0,,1': '' is not a device index"},
      // Each sequence runs on each context: a matmul sequence on a softmax context is refused.
      {"format = 1\nname = \"c\"\ncontexts = [\"matmul-hlsl-fp32\", \"" +
           std::string(PEAK_SOURCE_DIR) +
           "/src/cli/testdata/softmax-hlsl\"]\nsequences = [\"hlsl-fp32-short\"]\nllms = "
           "[\"replay:hlsl-fp32\"]\n",
       "sequence hlsl-fp32-short cannot run on context softmax-hlsl: step 1 (refactor): refactor "
       "is written for the matmul family; this context is softmax"},
  };
  for (const auto& k : cases) {
    auto c = parse(k.text);
    ASSERT_FALSE(c) << k.text;
    EXPECT_EQ(c.error_kind(), ErrorKind::input);
    EXPECT_NE(c.error().find(k.expect), std::string::npos) << c.error();
  }
}

// A [[device]] with `devices`: several GPUs of the node for each workflow; a Slurm job asks
// for as many GPUs as indices were given.
TEST_F(CampaignTest, ADeviceMayNameSeveralGpusOfOneHost) {
  auto c = parse(R"(
format = 1
name = "m"
contexts = ["matmul-hlsl-fp32"]
sequences = ["hlsl-fp32-short"]
llms = ["replay:hlsl-fp32"]

[[device]]
devices = "0,1"

[[device]]
name = "h100s"
devices = "all"
gpus = 4
)");
  ASSERT_TRUE(c) << c.error();
  auto ws = workflows(*c);
  ASSERT_EQ(ws.size(), 2u);
  EXPECT_EQ(ws[0].device.devices, "0,1");
  EXPECT_EQ(ws[0].device.select, "");
  EXPECT_EQ(ws[0].device.gpus, 2);
  EXPECT_EQ(ws[1].device.name, "h100s");
  EXPECT_EQ(ws[1].device.gpus, 4);
  auto has = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  EXPECT_TRUE(has(sbatch_options(*c, ws[0]), "--gres=gpu:2"));
  EXPECT_TRUE(has(sbatch_options(*c, ws[1]), "--gres=gpu:4"));
}

TEST_F(CampaignTest, SlurmJobsAskForGpusOnlyOnGpuDevices) {
  auto c = parse(R"(
format = 1
name = "m"
contexts = ["matmul-hlsl-fp32"]
sequences = ["hlsl-fp32-short"]
llms = ["replay:hlsl-fp32"]

[[device]]
name = "lavapipe"
select = "llvmpipe"

[[device]]
name = "h200"
select = "H200"
gpus = 2
partition = "h200"
constraint = "nvlink"

[slurm]
partition = "batch"
time = "02:00:00"
extra = ["--exclusive"]
peak = "/opt/peak/bin/peak"
)");
  ASSERT_TRUE(c) << c.error();
  auto ws = workflows(*c);
  ASSERT_EQ(ws.size(), 2u);
  auto cpu = sbatch_options(*c, ws[0]);
  auto gpu = sbatch_options(*c, ws[1]);
  auto has = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  for (const auto* o : {&cpu, &gpu}) {
    EXPECT_TRUE(has(*o, "--requeue"));
    EXPECT_TRUE(has(*o, "--open-mode=append"));
    EXPECT_TRUE(has(*o, "--time=02:00:00"));
    EXPECT_TRUE(has(*o, "--exclusive"));
  }
  EXPECT_TRUE(has(cpu, "--partition=batch"));
  EXPECT_TRUE(has(cpu, "--output=" + ws[0].log.string()));
  for (const auto& o : cpu) EXPECT_FALSE(starts_with(o, "--gres")) << o;
  EXPECT_TRUE(has(gpu, "--gres=gpu:2"));
  EXPECT_TRUE(has(gpu, "--partition=h200"));
  EXPECT_TRUE(has(gpu, "--constraint=nvlink"));
  EXPECT_TRUE(has(gpu, "--job-name=" + job_name(*c, ws[1])));
  EXPECT_NE(job_name(*c, ws[0]), job_name(*c, ws[1]));
  std::string script = job_script(*c, ws[1], c->slurm.peak);
  EXPECT_TRUE(starts_with(script, "#!/bin/sh\n"));
  EXPECT_NE(script.find("exec '/opt/peak/bin/peak' campaign exec '" + c->file.string() + "' '" +
                        ws[1].id + "'"),
            std::string::npos)
      << script;
}

TEST_F(CampaignTest, ReadsWhatSlurmSays) {
  auto jobs = parse_squeue("12|RUNNING|peak-1-a|None\n13|PENDING|peak-1-b|BeginTime\n\n");
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[1].id, "13");
  EXPECT_EQ(jobs[1].state, "PENDING");
  EXPECT_EQ(jobs[1].name, "peak-1-b");
  EXPECT_EQ(jobs[1].reason, "BeginTime");
  JobEnd e = parse_scontrol_job(
      "JobId=12 JobName=x UserId=root(0) JobState=CANCELLED Reason=None Requeue=1 Restarts=1 "
      "BatchFlag=1 ExitCode=0:9");
  EXPECT_TRUE(e.known);
  EXPECT_EQ(e.state, "CANCELLED");
  EXPECT_EQ(e.exit_code, "0:9");
  EXPECT_EQ(e.restarts, 1);
  EXPECT_FALSE(parse_scontrol_job("slurm_load_jobs error: Invalid job id specified").known);
  for (const char* s : {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED"})
    EXPECT_TRUE(job_active(s)) << s;
  for (const char* s : {"COMPLETED", "FAILED", "CANCELLED", "PREEMPTED", "NODE_FAIL", "TIMEOUT"})
    EXPECT_FALSE(job_active(s)) << s;
}

// A scheduler whose jobs run in this process when the queue is looked at: the first run of the
// first job dies before doing anything (as a node that fails at start), and the controller may
// have forgotten a job (requeue refused).
class FakeSlurm : public SlurmClient {
 public:
  explicit FakeSlurm(const Campaign& c) : c_(c) {}
  Result<std::vector<SlurmJob>> queue() override {
    ++polls;
    std::vector<SlurmJob> out;
    for (auto& [id, j] : jobs_) {
      if (j.hidden > 0) {
        --j.hidden;  // requeued, not back in the queue yet
        continue;
      }
      if (j.state == "PENDING") {
        j.state = "RUNNING";  // seen running once, then it runs
      } else if (j.state == "RUNNING") {
        if (fail_first_run && runs == 0) {
          j.state = "FAILED";
          j.exit = "1:0";
        } else {
          auto r = exec_workflow(c_, j.workflow);
          j.state = r ? "COMPLETED" : "FAILED";
          j.exit = r && r->status == "passed" ? "0:0" : "1:0";
        }
        ++runs;
      }
      if (job_active(j.state)) out.push_back({id, j.name, j.state, "None"});
    }
    return out;
  }
  Result<std::string> submit(const std::vector<std::string>& options,
                             const fs::path& script) override {
    std::string id = std::to_string(next_id_++);
    Job j;
    for (const auto& o : options)
      if (starts_with(o, "--job-name=")) j.name = o.substr(11);
    auto text = read_file(script);
    EXPECT_TRUE(text);
    for (const auto& w : workflows(c_))
      if (text && text->find("'" + w.id + "'") != std::string::npos) j.workflow = w.id;
    EXPECT_FALSE(j.workflow.empty());
    jobs_[id] = j;
    ++submissions;
    return id;
  }
  Status requeue(const std::string& id) override {
    ++requeue_calls;
    if (refuse_requeue) return Status::error("Invalid job id specified", ErrorKind::environment);
    jobs_[id].ended_as = jobs_[id].state;
    jobs_[id].state = "PENDING";
    jobs_[id].hidden = hidden_after_requeue;
    ++jobs_[id].restarts;
    return Status::ok();
  }
  JobEnd ended(const std::string& id) override {
    JobEnd e;
    if (!jobs_.count(id)) return e;
    e.known = true;
    e.state = jobs_[id].hidden > 0 ? jobs_[id].ended_as : jobs_[id].state;
    e.exit_code = jobs_[id].exit;
    e.restarts = jobs_[id].restarts;
    return e;
  }
  bool fail_first_run = false, refuse_requeue = false;
  // Polls for which a requeued job stays out of the queue, its state still the ended one.
  int hidden_after_requeue = 0;
  int polls = 0, runs = 0, submissions = 0, requeue_calls = 0;

 private:
  struct Job {
    std::string name, workflow, state = "PENDING", exit, ended_as;
    int restarts = 0, hidden = 0;
  };
  const Campaign& c_;
  std::map<std::string, Job> jobs_;
  int next_id_ = 100;
};

TEST_F(CampaignTest, SlurmExecutorRequeuesAJobThatEndedWithItsWorkflowUnfinished) {
  auto c = parse(scale_campaign("\n[slurm]\npoll_seconds = 0.1\n"));
  ASSERT_TRUE(c) << c.error();
  auto todo = workflows(*c);
  ASSERT_EQ(todo.size(), 1u);
  ASSERT_TRUE(ensure_workspace(todo[0]));
  FakeSlurm slurm(*c);
  slurm.fail_first_run = true;
  RunOptions ro;
  ro.executor = "slurm";
  ro.peak_binary = fs::path(PEAK_BINARY_DIR) / "peak";
  std::vector<std::string> lines;
  ro.progress = [&](const std::string& l) { lines.push_back(l); };
  ASSERT_TRUE(follow_slurm(*c, todo, ro, slurm));
  EXPECT_EQ(slurm.submissions, 1);
  EXPECT_EQ(slurm.requeue_calls, 1);
  EXPECT_EQ(read_state(todo[0]).status, "passed");
  EXPECT_EQ(llm_calls(), 1u);
  json state = load_state(*c);
  json rec = state["workflows"][todo[0].id];
  EXPECT_EQ(rec.value("job", ""), "100");
  EXPECT_EQ(rec.value("requeues", 0), 1);
  EXPECT_EQ(rec.value("restarts", 0), 1);
  EXPECT_EQ(rec.value("slurm_state", ""), "COMPLETED");
  json s = summarize(*c);
  EXPECT_EQ(s["totals"].value("passed", 0), 1);
  EXPECT_TRUE(s.value("complete", false));
  EXPECT_EQ(s["workflows"][0].value("checkpoints", 0), 2);
  EXPECT_TRUE(s.contains("stats"));
  std::string text = render_summary_text(s);
  EXPECT_NE(text.find("slurm 100 (requeued 1x)"), std::string::npos) << text;

  // Run again: the workflow ended, nothing is submitted.
  FakeSlurm again(*c);
  auto r = run_campaign(*c, ro);  // the real squeue is never reached: nothing to run
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(llm_calls(), 1u);
}

// Slurm may leave a job it was just asked to requeue out of the queue for a few polls, its state
// still the ended one: the executor waits for it instead of requeueing it a second time.
TEST_F(CampaignTest, SlurmExecutorRequeuesOnceWhenTheRequeuedJobIsMissingForAMoment) {
  auto c = parse(scale_campaign("\n[slurm]\npoll_seconds = 0.1\n"));
  ASSERT_TRUE(c) << c.error();
  auto todo = workflows(*c);
  ASSERT_TRUE(ensure_workspace(todo[0]));
  FakeSlurm slurm(*c);
  slurm.fail_first_run = true;
  slurm.hidden_after_requeue = 3;
  RunOptions ro;
  ro.peak_binary = fs::path(PEAK_BINARY_DIR) / "peak";
  ASSERT_TRUE(follow_slurm(*c, todo, ro, slurm));
  EXPECT_EQ(slurm.requeue_calls, 1);
  EXPECT_EQ(slurm.submissions, 1);
  EXPECT_EQ(read_state(todo[0]).status, "passed");
  EXPECT_EQ(load_state(*c)["workflows"][todo[0].id].value("requeues", 0), 1);
}

TEST_F(CampaignTest, SlurmExecutorSubmitsAgainWhenTheControllerForgotTheJob) {
  auto c = parse(scale_campaign("\n[slurm]\npoll_seconds = 0.1\nmax_requeues = 2\n"));
  ASSERT_TRUE(c) << c.error();
  auto todo = workflows(*c);
  ASSERT_TRUE(ensure_workspace(todo[0]));
  FakeSlurm slurm(*c);
  slurm.fail_first_run = true;
  slurm.refuse_requeue = true;
  RunOptions ro;
  ro.peak_binary = fs::path(PEAK_BINARY_DIR) / "peak";
  ASSERT_TRUE(follow_slurm(*c, todo, ro, slurm));
  EXPECT_EQ(slurm.submissions, 2);
  EXPECT_EQ(read_state(todo[0]).status, "passed");
  EXPECT_EQ(load_state(*c)["workflows"][todo[0].id].value("submissions", 0), 2);
}

TEST_F(CampaignTest, SlurmExecutorGivesUpAfterItsRequeues) {
  auto c = parse(scale_campaign("\n[slurm]\npoll_seconds = 0.1\nmax_requeues = 0\n"));
  ASSERT_TRUE(c) << c.error();
  auto todo = workflows(*c);
  ASSERT_TRUE(ensure_workspace(todo[0]));
  FakeSlurm slurm(*c);
  slurm.fail_first_run = true;
  RunOptions ro;
  ro.peak_binary = fs::path(PEAK_BINARY_DIR) / "peak";
  ASSERT_TRUE(follow_slurm(*c, todo, ro, slurm));
  EXPECT_EQ(slurm.requeue_calls, 0);
  EXPECT_EQ(read_state(todo[0]).status, "pending");
  json s = summarize(*c);
  EXPECT_FALSE(s.value("complete", true));
  EXPECT_NE(render_summary_text(s).find("gave up after 0 requeues"), std::string::npos);
}

// The local executor with the real binary: two workflows at once, then a second run that runs
// nothing again.
TEST_F(CampaignTest, LocalExecutorRunsEveryWorkflowOnceAndResumes) {
  auto c = parse(
      scale_campaign("\n[[device]]\nname = \"cpu-a\"\nselect = \"llvmpipe\"\n\n[[device]]\nname = "
                     "\"cpu-b\"\nselect = \"llvmpipe\"\n"));
  ASSERT_TRUE(c) << c.error();
  RunOptions ro;
  ro.jobs = 2;
  ro.peak_binary = fs::path(PEAK_BINARY_DIR) / "peak";
  auto r = run_campaign(*c, ro);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ((*r)["totals"].value("passed", 0), 2) << logs(*c);
  EXPECT_EQ(llm_calls(), 2u);
  EXPECT_TRUE(fs::exists(c->dir / "summary.json"));
  EXPECT_TRUE(fs::exists(c->dir / "summary.txt"));
  for (const auto& w : workflows(*c)) {
    EXPECT_TRUE(fs::exists(w.log)) << w.log;
    EXPECT_TRUE(fs::exists(w.outcome)) << w.outcome;
  }
  auto again = run_campaign(*c, ro);
  ASSERT_TRUE(again) << again.error();
  EXPECT_EQ(llm_calls(), 2u);
  EXPECT_EQ(load_state(*c)["workflows"][workflows(*c)[0].id].value("runs", 0), 1);

  // A second follower of the same campaign is refused while the first holds it.
  auto lock = WorkspaceLock::acquire(c->dir / "lock", "test", false);
  ASSERT_TRUE(lock);
  auto busy = run_campaign(*c, ro);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error_kind(), ErrorKind::environment);
  EXPECT_NE(busy.error().find("another `peak campaign run` follows this campaign"),
            std::string::npos)
      << busy.error();
}

// A workflow's process killed (SIGKILL) in the middle of a step: its store stays consistent, and
// the next run resumes the same workflow where it stopped, asking the model nothing again.
TEST_F(CampaignTest, AWorkflowKilledMidStepResumesWithNothingLostOrRepeated) {
  auto c = parse(scale_campaign());
  ASSERT_TRUE(c) << c.error();
  auto w = workflows(*c)[0];
  ASSERT_TRUE(ensure_workspace(w));
  // The seed is evaluated first (a step evaluates its parent before it asks the model). Then the
  // test holds the CPU device: the step stops at its candidate's evaluation, after the model's
  // reply is recorded, until the test lets it go. No timing is involved.
  ProcessOptions validate;
  validate.argv = {(fs::path(PEAK_BINARY_DIR) / "peak").string(),
                   "-q",
                   "-C",
                   w.workspace.string(),
                   "validate",
                   "--small",
                   "--budget",
                   "1",
                   "--no-baseline"};
  auto v = run_process(validate);
  ASSERT_TRUE(v && v->ok()) << (v ? v->err : v.error());
  auto locks = make_temp_dir("locks-", tmp_);
  ASSERT_TRUE(locks);
  ::setenv("PEAK_LOCK_DIR", locks->c_str(), 1);
  DeviceLock device("cpu", "the CPU");
  auto held = std::make_optional(device.acquire());
  ASSERT_TRUE(*held);

  Subprocess p;
  ProcessOptions po;
  po.argv = {(fs::path(PEAK_BINARY_DIR) / "peak").string(), "campaign", "exec", c->file.string(),
             w.id};
  ASSERT_TRUE(p.start(po));
  auto store_says = [&](auto pred) {
    for (int i = 0; i < 6000; ++i) {  // 10 minutes at most: a generous deadline, never a pace
      if (auto s = Store::open_read_only(w.workspace / ".peak"); s && pred(**s)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  };
  ASSERT_TRUE(store_says([](Store& s) {
    auto a = s.attempts();
    if (!a) return false;
    for (const auto& r : *a)
      if (r.pass_index == 1 && r.disposition == "passed") return true;
    return false;
  }));
  ::kill(p.pid(), SIGKILL);
  auto ended = p.wait(60);
  EXPECT_EQ(ended.term_signal, SIGKILL);
  held.reset();  // the device is free again

  EXPECT_EQ(read_state(w).status, "interrupted");
  RunOptions ro;
  ro.peak_binary = fs::path(PEAK_BINARY_DIR) / "peak";
  auto r = run_campaign(*c, ro);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ((*r)["totals"].value("passed", 0), 1) << r->dump(2);
  EXPECT_EQ(llm_calls(), 1u);  // the reply recorded before the kill was used, not asked again
  auto s = Store::open_read_only(w.workspace / ".peak");
  ASSERT_TRUE(s);
  auto cps = (*s)->checkpoints();
  ASSERT_TRUE(cps);
  ASSERT_EQ(cps->size(), 2u);  // the seed and the step, once
  EXPECT_EQ((*cps)[1].transformation, "add-twice");
  auto wfs = (*s)->workflows();
  ASSERT_TRUE(wfs);
  ASSERT_EQ(wfs->size(), 1u);  // the same workflow, resumed
  EXPECT_EQ((*wfs)[0].status, "passed");
  ::unsetenv("PEAK_LOCK_DIR");
}

// `kill` of `peak campaign run` (SIGTERM to it alone, as a scheduler or a user's kill sends it)
// ends the workflow processes it started too: each marks its workflow interrupted and ends,
// instead of running on without the process that follows them.
TEST_F(CampaignTest, TerminatingTheCampaignEndsItsWorkflowProcesses) {
  auto c = parse(scale_campaign());
  ASSERT_TRUE(c) << c.error();
  auto w = workflows(*c)[0];
  ASSERT_TRUE(ensure_workspace(w));
  // The seed is evaluated first, then the test holds the CPU device: the workflow's step stops at
  // its candidate's evaluation, after the model's reply is recorded, until the signal comes. No
  // timing is involved.
  ProcessOptions validate;
  validate.argv = {(fs::path(PEAK_BINARY_DIR) / "peak").string(),
                   "-q",
                   "-C",
                   w.workspace.string(),
                   "validate",
                   "--small",
                   "--budget",
                   "1",
                   "--no-baseline"};
  auto v = run_process(validate);
  ASSERT_TRUE(v && v->ok()) << (v ? v->err : v.error());
  auto locks = make_temp_dir("locks-", tmp_);
  ASSERT_TRUE(locks);
  ::setenv("PEAK_LOCK_DIR", locks->c_str(), 1);
  DeviceLock device("cpu", "the CPU");
  auto held = std::make_optional(device.acquire());
  ASSERT_TRUE(*held);

  Subprocess p;
  ProcessOptions po;
  po.argv = {(fs::path(PEAK_BINARY_DIR) / "peak").string(), "campaign", "run", c->file.string()};
  ASSERT_TRUE(p.start(po));
  // The workflow's process, once its step has the model's reply and waits for the device.
  auto replied = [&] {
    auto s = Store::open_read_only(w.workspace / ".peak");
    if (!s) return false;
    auto a = (*s)->attempts();
    if (!a) return false;
    for (const auto& r : *a)
      if (r.pass_index == 1 && r.disposition == "passed") return true;
    return false;
  };
  int child = 0;
  for (int i = 0; i < 6000 && child == 0; ++i) {  // 10 minutes at most: a deadline, never a pace
    const json rec = load_state(*c)["workflows"].value(w.id, json::object());
    if (rec.contains("pid") && replied()) child = rec["pid"].get<int>();
    if (child == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GT(child, 0) << logs(*c);
  ::kill(p.pid(), SIGTERM);
  auto ended = p.wait(60);
  EXPECT_EQ(ended.term_signal, SIGTERM);
  // Ended: no such process, or a zombie its new parent has not reaped yet.
  auto ended_process = [](int pid) {
    if (::kill(pid, 0) != 0) return true;
    auto stat = read_file(fs::path("/proc") / std::to_string(pid) / "stat");
    if (!stat) return true;
    const auto close = stat->rfind(')');
    return close != std::string::npos && close + 2 < stat->size() && (*stat)[close + 2] == 'Z';
  };
  bool gone = false;
  for (int i = 0; i < 600 && !gone; ++i) {  // one minute at most
    gone = ended_process(child);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(gone) << "the workflow process " << child << " runs on after its campaign ended";
  if (!gone) ::kill(child, SIGKILL);
  held.reset();
  EXPECT_EQ(read_state(w).status, "interrupted") << logs(*c);
  ::unsetenv("PEAK_LOCK_DIR");
}

}  // namespace
}  // namespace peak::campaign

namespace peak::campaign {
namespace {

// The commands themselves: help, mistakes (exit 2 with what to do), status of a campaign that
// has not run yet.
TEST_F(CampaignTest, TheCommandsSayWhatTheyDoAndRefuseMistakes) {
  auto peak = [&](std::vector<std::string> args) {
    ProcessOptions po;
    po.argv = {(fs::path(PEAK_BINARY_DIR) / "peak").string()};
    po.argv.insert(po.argv.end(), args.begin(), args.end());
    po.cwd = tmp_;
    po.timeout_s = 300;
    auto r = run_process(po);
    EXPECT_TRUE(r);
    return r ? *r : ProcessResult{};
  };
  auto help = peak({"campaign", "run", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--executor"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--jobs"), std::string::npos) << help.out;
  EXPECT_NE(peak({"campaign", "--help"}).out.find("status"), std::string::npos);

  auto missing = peak({"campaign", "run", "nope.toml"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("nope.toml"), std::string::npos) << missing.err;

  auto c = parse(scale_campaign());
  ASSERT_TRUE(c) << c.error();
  auto executor = peak({"campaign", "run", c->file.string(), "--executor", "pbs"});
  EXPECT_EQ(executor.exit_code, 2);
  EXPECT_NE(executor.err.find("local"), std::string::npos) << executor.err;
  auto exec = peak({"campaign", "exec", c->file.string(), "no-such-workflow"});
  EXPECT_EQ(exec.exit_code, 2);
  EXPECT_NE(exec.err.find(workflows(*c)[0].id), std::string::npos) << exec.err;

  auto status = peak({"campaign", "status", c->file.string()});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("1 workflow: 1 pending"), std::string::npos) << status.out;
  auto js = peak({"--json", "campaign", "status", c->file.string()});
  json j = json::parse(js.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << js.out;
  EXPECT_EQ(j.value("format", 0), kSummaryFormatVersion);
  EXPECT_EQ(j["workflows"][0].value("status", ""), "pending");
  EXPECT_FALSE(fs::exists(c->dir / "workspaces"));  // status writes nothing
}

}  // namespace
}  // namespace peak::campaign
