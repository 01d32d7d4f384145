#include "validate/task_timeout.h"

#include <algorithm>

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

Result<std::vector<TaskResult>> run_job_retrying_timeouts(const RunnerJob& job, RunnerOptions opts,
                                                          const TaskBudget& budget) {
  opts.task_timeout_s = budget.timeout_s;
  auto results = run_job(job, opts);
  if (!results) return results;
  std::vector<size_t> late;
  for (size_t i = 0; i < results->size(); ++i)
    if ((*results)[i].disposition == Disposition::timeout) late.push_back(i);
  if (late.empty()) return results;
  // The first late task alone, in a fresh runner.
  RunnerJob one = job;
  one.tasks = {job.tasks[late.front()]};
  auto retry = run_job(one, opts);
  if (!retry) {
    TaskResult failed;
    failed.message = "the runner did not start again: " + retry.error();
    for (size_t i : late) (*results)[i] = charged((*results)[i], failed, budget);
    return results;
  }
  const TaskResult& again = retry->front();
  if (again.disposition == Disposition::timeout) {
    for (size_t i : late) (*results)[i] = charged((*results)[i], again, budget);
    return results;
  }
  // It was the machine: the first late task's second outcome stands, the others get theirs.
  (*results)[late.front()] = again;
  if (late.size() == 1) return results;
  RunnerJob rest = job;
  rest.tasks.clear();
  for (size_t k = 1; k < late.size(); ++k) rest.tasks.push_back(job.tasks[late[k]]);
  auto others = run_job(rest, opts);
  if (!others) return results;  // the first outcomes (timeouts) stand
  for (size_t k = 1; k < late.size(); ++k) {
    const TaskResult& r = (*others)[k - 1];
    (*results)[late[k]] =
        r.disposition == Disposition::timeout ? charged((*results)[late[k]], r, budget) : r;
  }
  return results;
}

}  // namespace peak
