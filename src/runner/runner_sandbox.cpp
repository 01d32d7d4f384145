#include "runner/runner_sandbox.h"

#include <algorithm>

#include "plan/launch_plan.h"

namespace peak {

SandboxPolicy runner_sandbox(const RunnerOptions& opts, const RunnerJob& job) {
  std::vector<std::filesystem::path> inputs, outputs;
  auto add = [](std::vector<std::filesystem::path>& v, const std::string& p) {
    if (!p.empty() && std::find(v.begin(), v.end(), p) == v.end()) v.emplace_back(p);
  };
  for (const auto& t : job.tasks) {
    add(inputs, t.artifact);
    add(outputs, t.output_dir);
    // A plan's launches may each name their own module (HLSL: one SPIR-V file per entry point).
    if (auto plan = LaunchPlan::from_json(t.plan, job.arrays.size()))
      for (const auto& step : plan->steps) add(inputs, step.module);
  }
  // The longest the parent lets this runner live: start-up, then every task to its deadline.
  double budget = opts.start_timeout_s * 2 +
                  opts.task_timeout_s * static_cast<double>(std::max<size_t>(job.tasks.size(), 1));
  return SandboxPolicy::runner(opts.executable, std::move(inputs), std::move(outputs), budget);
}

}  // namespace peak
