#include "validate/task_timeout.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "util/fs.h"

namespace peak {
namespace {

const char* kind_name(TaskKind k) {
  switch (k) {
    case TaskKind::validate:
      return "validation";
    case TaskKind::screen:
      return "screening";
    case TaskKind::bench:
      return "timing";
  }
  return "";
}

double of_kind(const TaskSeconds& t, TaskKind k) {
  switch (k) {
    case TaskKind::validate:
      return t.validate;
    case TaskKind::screen:
      return t.screen;
    case TaskKind::bench:
      return t.bench;
  }
  return 0;
}

// The charge of a task that missed its deadline twice, with what it ran against the reference.
TaskResult charged(const TaskResult& first, const TaskResult& retry, const TaskBudget& budget) {
  TaskResult r = retry;
  r.id = first.id;
  r.disposition = Disposition::timeout;
  double ran = std::max(first.seconds, retry.seconds);
  std::string ratio =
      budget.reference_s > 0
          ? fmt::format(
                "it ran {}, {:.0f}x the slowest reference task ({}): a hung kernel, not "
                "a slow machine",
                format_seconds(ran), ran / budget.reference_s, format_seconds(budget.reference_s))
          : fmt::format("it ran {} (no reference task measured on this device yet)",
                        format_seconds(ran));
  r.message = fmt::format("{}; retried alone in a fresh runner: {}; {}. Deadline: {}",
                          first.message, retry.message, ratio, format_seconds(budget.timeout_s));
  if (!budget.basis.empty()) r.message += fmt::format(" ({})", budget.basis);
  return r;
}

TaskResult not_run(const std::string& id, std::string message) {
  TaskResult r;
  r.id = id;
  r.disposition = Disposition::not_run;
  r.message = std::move(message);
  return r;
}

}  // namespace

double timing_allowance(const TimingPolicy& policy, bool with_baseline) {
  return 10 * policy.max_seconds * (with_baseline ? 2 : 1);
}

nlohmann::json TaskSeconds::to_json() const {
  return {{"validate", validate}, {"screen", screen}, {"bench", bench}};
}

TaskSeconds TaskSeconds::from_json(const nlohmann::json& j) {
  TaskSeconds t;
  if (!j.is_object()) return t;
  auto num = [&](const char* k) {
    auto it = j.find(k);
    return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
  };
  t.validate = num("validate");
  t.screen = num("screen");
  t.bench = num("bench");
  return t;
}

nlohmann::json TaskBudget::to_json() const {
  return {{"timeout_s", timeout_s}, {"reference_s", reference_s}, {"basis", basis}};
}

TaskBudget task_budget(TaskKind kind, bool cpu_device,
                       const std::vector<std::pair<std::string, TaskSeconds>>& references,
                       double default_s, double min_s) {
  TaskBudget b;
  double ref = 0;
  std::string who;
  for (const auto& [name, t] : references)
    if (of_kind(t, kind) > ref) {
      ref = of_kind(t, kind);
      who = name;
    }
  const char* device = cpu_device ? "CPU" : "GPU";
  if (!(ref > 0)) {
    b.timeout_s = default_s;
    b.basis = fmt::format("the default for a {} device: no {} task measured here yet", device,
                          kind_name(kind));
    return b;
  }
  double floor = std::max(cpu_device ? kCpuFloorSeconds : kGpuFloorSeconds, min_s);
  b.reference_s = ref;
  b.timeout_s = std::max(floor, kTimeoutFactor * ref);
  b.basis = fmt::format("{:.0f}x the {}'s slowest {} task here ({}), at least {}", kTimeoutFactor,
                        who, kind_name(kind), format_seconds(ref), format_seconds(floor));
  return b;
}

Result<std::vector<TaskResult>> run_job_retrying_timeouts(
    const RunnerJob& job, RunnerOptions opts, const TaskBudget& budget,
    const std::function<void(const TaskResult&)>& on_hung) {
  opts.task_timeout_s = budget.timeout_s;
  opts.stop_after_timeout = true;  // a hung kernel would hang every task left: one at a time
  std::vector<TaskResult> results(job.tasks.size());
  std::vector<size_t> pending(job.tasks.size());
  std::iota(pending.begin(), pending.end(), size_t{0});
  // Each round runs the tasks left in one runner, up to the first that times out, then that task
  // alone in a fresh runner: every round settles at least that task.
  for (bool first_round = true; !pending.empty(); first_round = false) {
    RunnerJob round = job;
    round.tasks.clear();
    for (size_t i : pending) round.tasks.push_back(job.tasks[i]);
    // A miss is reported while the round's runner still holds the device: a nested hold keeps it
    // for the retry.
    DeviceLock::Guard kept;
    auto keep_on_miss = [&](const TaskResult& r, size_t, size_t) {
      if (r.disposition != Disposition::timeout || !opts.device_lock) return;
      if (auto g = opts.device_lock->acquire()) kept = std::move(*g);
    };
    auto got = run_job(round, opts, keep_on_miss);
    if (!got && first_round) return got;  // nothing could run
    std::optional<size_t> late;
    std::vector<size_t> left;
    for (size_t k = 0; k < pending.size(); ++k) {
      const size_t i = pending[k];
      if (!got) {
        results[i] =
            not_run(job.tasks[i].id, "not run: the runner did not start again: " + got.error());
        continue;
      }
      TaskResult& r = (*got)[k];
      if (r.disposition == Disposition::not_run && r.message == kLeftAfterTimeout) {
        left.push_back(i);
        continue;
      }
      results[i] = std::move(r);
      if (results[i].disposition == Disposition::timeout && !late) late = i;
    }
    if (!late) break;
    RunnerJob one = job;
    one.tasks = {job.tasks[*late]};
    auto retry = run_job(one, opts);
    TaskResult failed;
    if (!retry) failed.message = "the runner did not start again: " + retry.error();
    const TaskResult& again = retry ? retry->front() : failed;
    if (!retry || again.disposition == Disposition::timeout) {
      // Twice late: a hung kernel. It would hang the tasks left as well.
      results[*late] = charged(results[*late], again, budget);
      if (on_hung) on_hung(results[*late]);  // the device still held
      for (size_t i : left)
        results[i] = not_run(job.tasks[i].id,
                             fmt::format("not run: task {} missed its deadline twice and was "
                                         "charged `timeout`",
                                         job.tasks[*late].id));
      break;
    }
    results[*late] = again;  // it was the machine: the second outcome stands
    pending = std::move(left);
  }
  return results;
}

}  // namespace peak
