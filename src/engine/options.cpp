#include "engine/options.h"

#include <fmt/format.h>

#include "engine/workspace.h"
#include "util/fs.h"

namespace peak {

using json = nlohmann::json;

EvalOptions default_eval_options(bool cpu_device) {
  EvalOptions o;
  o.small = cpu_device;
  o.budget.fraction = 0.15;
  if (cpu_device) {
    o.budget.evaluations = 24;
    o.top_k = 4;
    o.seeds = 1;
    o.policy = TimingPolicy{2, 5, 20, 4.0, 0.03, false};
    o.screening = TimingPolicy{1, 3, 5, 1.5, 0.05, false};
    o.task_timeout_s = 120;
  } else {
    // A step's search ends: 15 % of a large space is thousands of configurations (hours). CPU
    // devices keep a count alone (24), so what they find does not depend on the host's load.
    o.budget.seconds = kDefaultGpuTuningSeconds;
    o.policy = TimingPolicy{5, 20, 200, 6.0, 0.01, true};
    o.screening = TimingPolicy{2, 5, 20, 1.0, 0.03, true};
  }
  return o;
}

Status read_budget_option(std::string_view text, EvalChoices& c, std::string_view name) {
  if (text.empty()) return Status::ok();
  auto b = Budget::parse(text);
  if (!b) return Status::error(fmt::format("{}: {}", name, b.error()), ErrorKind::input);
  if (b->fraction > 0 || (b->evaluations == 0 && b->seconds <= 0))
    return Status::error(fmt::format("{} {}: N configurations and/or a time (24, 10m, 24,10m); "
                                     "a share of the space is --strategy-budget's (15%)",
                                     name, text),
                         ErrorKind::input);
  c.budget = b->evaluations;
  c.budget_seconds = b->seconds;
  return Status::ok();
}

Status check_eval_choices(EvalChoices& c, const std::string& budget_spec,
                          const ChoiceNames& names) {
  if (!c.device.empty() && !c.devices.empty())
    return Status::error(fmt::format("{} and {} exclude each other: {} picks one device, {} "
                                     "several of one model (all, 0,1 or a name substring)",
                                     names.device, names.devices, names.device, names.devices),
                         ErrorKind::input);
  if (!c.devices.empty() && c.compile_only)
    return Status::error(fmt::format("{} and {} exclude each other: nothing runs with {}",
                                     names.devices, names.compile_only, names.compile_only),
                         ErrorKind::input);
  if (!c.devices.empty())
    if (auto d = parse_devices_spec(c.devices); !d) {
      // The spec's own messages name --devices; another name goes in front of them.
      std::string why = d.error();
      if (!starts_with(why, names.devices)) why = names.devices + ": " + why;
      return Status::error(why, d.error_kind());
    }
  if (!c.strategy.empty())
    if (auto s = make_strategy(c.strategy); !s) return Status::error(s.error(), ErrorKind::input);
  if (!budget_spec.empty()) {
    auto b = Budget::parse(budget_spec);
    if (!b) return Status::error(b.error(), ErrorKind::input);
    c.strategy_budget = *b;
  }
  return Status::ok();
}

EvalOptions eval_options_for(const EvalChoices& c, const EvalDevices& d) {
  const bool cpu_device = d.facts && d.facts->is_cpu;
  EvalOptions e = default_eval_options(cpu_device);
  e.device = d.selector;
  if (d.lanes.size() > 1) e.devices = d.lanes;
  if (c.small) e.small = *c.small;
  if (c.budget > 0) e.budget = Budget{c.budget, 0, 0};  // budget N: N configurations at most
  e.strategy = c.strategy;
  e.reuse_measurements = c.reuse_measurements;
  if (c.strategy_budget)
    e.budget = *c.strategy_budget;
  else if (c.budget == 0)
    e.budget = default_budget(c.strategy, e.budget);
  if (c.budget_seconds > 0 && !c.strategy_budget) e.budget.seconds = c.budget_seconds;
  if (c.jobs > 0) e.jobs = c.jobs;
  e.baseline = c.baseline;
  e.tuning_overrides = c.tuning;
  e.compile_only = c.compile_only;
  e.sanitize = c.sanitize;
  e.validation_seed = c.validation_seed;
  e.cancelled = c.cancelled;
  // The kernel's own tuning values on the device's default shapes: comparable with every other
  // evaluation of the same kind (the budget only changes how much of the space is searched).
  e.standard = c.tuning.empty() && e.small == cpu_device && !c.compile_only;
  return e;
}

json eval_options_json(const EvalOptions& o) {
  json overrides = json::object();
  for (const auto& [k, v] : o.tuning_overrides) overrides[k] = v;
  json j{{"device", o.device},
         {"small", o.small},
         {"budget", o.budget.evaluations},
         {"top_k", o.top_k},
         {"seeds", o.seeds},
         {"baseline", o.baseline},
         {"tuning", overrides},
         {"compile_only", o.compile_only},
         {"sanitize", o.sanitize},
         {"task_timeout_s", o.task_timeout_s},
         {"standard", o.standard}};
  if (!o.devices.empty()) j["devices"] = o.devices;
  if (o.validation_seed != 0) j["validation_seed"] = o.validation_seed;
  if (!o.shapes.empty()) {
    json shapes = json::array();
    for (const auto& sh : o.shapes) shapes.push_back(sh.text());
    j["shapes"] = shapes;
  }
  return j;
}

Result<EvalDevices> Workspace::resolve_devices(const EvalChoices& choices) {
  EvalChoices checked = choices;
  if (Status st = check_eval_choices(checked); !st) return st;
  EvalDevices d;
  d.selector = choices.device;
  if (choices.compile_only) {
    // Nothing runs: the device need not be here (its facts may come from --prompt-device).
    if (auto it = devices_.find(choices.device); it != devices_.end()) d.facts = it->second;
    return d;
  }
  if (!choices.devices.empty()) {
    // The first device decides the defaults (all are of one model) and makes the final timing.
    auto sel = devices(choices.devices);
    if (!sel) return Error{sel.error(), sel.error_kind()};
    d.selector = sel->devices.front().selector;
    d.facts = sel->devices.front().facts;
    for (const auto& dev : sel->devices) d.lanes.push_back(dev.selector);
    return d;
  }
  auto dev = device(choices.device);
  if (!dev) return dev.status();
  d.facts = *dev;
  return d;
}

Result<EvalOptions> Workspace::eval_options(const EvalChoices& choices) {
  auto d = resolve_devices(choices);
  if (!d) return d.status();
  return eval_options_for(choices, *d);
}

}  // namespace peak
