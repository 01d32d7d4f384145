#pragma once
// The job the tests of the runner's defences give peak-hostile-runner (hostile_device_main.cpp):
// a "copy" of 16 floats whose one kernel, "attack", does what PEAK_HOSTILE_ATTACK names.
#include <string>
#include <vector>

#include "plan/launch_plan.h"
#include "runner/protocol.h"

namespace peak::testing {

// One task per id, each a single launch of "attack", writing its outputs to `output_dir`.
inline RunnerJob hostile_job(const std::vector<std::string>& ids, const std::string& output_dir) {
  RunnerJob job;
  job.family = "copy";
  job.arrays = {ArraySpec{"X", DType::f32, "16", Initializer{}, false},
                ArraySpec{"Y", DType::f32, "16", Initializer{}, true}};
  for (const std::string& id : ids) {
    RunnerTask t;
    t.id = id;
    t.sizes = {{"X", 16}, {"Y", 16}};
    t.repeat = false;
    t.output_dir = output_dir;
    LaunchPlan plan;  // one launch of the device's only kernel
    PlanStep step;
    step.kernel = step.symbol = "attack";
    plan.steps.push_back(step);
    t.plan = plan.to_json();
    job.tasks.push_back(t);
  }
  return job;
}

}  // namespace peak::testing
