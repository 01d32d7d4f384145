#pragma once
// The options of an evaluation: what a user asks (EvalChoices) and its one check that needs no
// device, the device(s) it names once resolved (EvalDevices), and the options an evaluation runs
// with (EvalOptions). The command line, the MCP tools and campaigns fill in EvalChoices and check
// it here; Workspace::resolve_devices resolves its devices once per command, and
// eval_options_for makes the options from both.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "context/context.h"
#include "engine/devices.h"
#include "runner/protocol.h"
#include "tune/strategy.h"
#include "util/result.h"

namespace peak {

class ValidationMemo;  // tune/tuner.h

// The default time bound of one step's search on a GPU (`--budget` replaces it).
inline constexpr double kDefaultGpuTuningSeconds = 600;

// What a user asks of an evaluation; the rest follows from the device (a CPU device gets small
// shapes and a smaller budget).
struct EvalChoices {
  std::string device;  // device selector ("" = best)
  // --devices: "all", indices ("0,1") or a name substring (engine/devices.h); "" = `device`
  // alone. The two exclude each other.
  std::string devices;
  std::optional<bool> small;  // --small / --full; unset: the device's default
  size_t budget = 0;          // --budget: configurations at most (0: the device's default)
  double budget_seconds = 0;  // --budget with a time: the search's time bound (0: the default)
  int jobs = 0;               // 0: all cores
  bool baseline = true;       // --no-baseline: false
  std::map<std::string, std::vector<int64_t>> tuning;  // --tune NAME=V1,V2
  bool compile_only = false;
  bool sanitize = false;
  uint64_t validation_seed = 0;     // --validation-seed: EvalOptions::validation_seed
  std::function<bool()> cancelled;  // EvalOptions::cancelled
  // The tuning search (docs/tuning.md): --strategy ("" = the default), --strategy-budget (parsed
  // by check_eval_choices; unset: the strategy's default, or `budget` evaluations when that is
  // given) and --reuse-measurements.
  std::string strategy;
  std::optional<Budget> strategy_budget;
  bool reuse_measurements = false;
};

// How a front end names the choices in its messages: the command line's flags by default.
struct ChoiceNames {
  std::string device = "--device";
  std::string devices = "--devices";
  std::string compile_only = "--compile-only";
};
// The names of the JSON arguments (the MCP tools).
inline ChoiceNames json_choice_names() { return {"device", "devices", "compile_only"}; }

// The check of what a user asked, before anything is probed: the strategy is a known one,
// `device` and `devices` are not both given, `devices` is well formed and not given with
// `compile_only`, and `budget_spec` (the strategy budget as written, "24,15%,600s"; "" = none
// given) is well formed: it is read into c.strategy_budget. Input errors say why, naming the
// choices as `names` does.
Status check_eval_choices(EvalChoices& c, const std::string& budget_spec = {},
                          const ChoiceNames& names = {});

// `--budget` as written: "N" configurations, a time ("10m", "600s", "1h") or both ("24,10m"),
// read into c.budget and c.budget_seconds; "" leaves them. A percentage belongs to
// --strategy-budget, and the error says so.
Status read_budget_option(std::string_view text, EvalChoices& c,
                          std::string_view name = "--budget");

// The device(s) an evaluation's choices name, resolved once per command
// (Workspace::resolve_devices).
struct EvalDevices {
  // The device that makes the final timing: the choices' `device`, or the first of `devices`.
  std::string selector;
  // Its facts: probed, or given by Workspace::set_device. Unset: compiling only, for a device
  // whose facts are not known here (nothing runs on it).
  std::optional<DeviceFacts> facts;
  // --devices: every device the tuning search spreads over, `selector` first (empty: `selector`
  // alone).
  std::vector<std::string> lanes;
};

// How candidates are evaluated (validated, tuned, timed).
struct EvalOptions {
  std::string device;  // device selector ("" = best)
  // Several devices of one host (--devices, engine/devices.h): their selectors, `device` first.
  // The tuning search validates and times on all of them; the final timing of the best
  // configuration and of the vendor baseline runs on `device` alone. Empty: `device` alone.
  std::vector<std::string> devices;
  bool small = false;  // time the context's small shapes instead of its bench shapes
  // Tune on, and make the final timing at, these shapes instead of the bench (or small) shapes:
  // the shapes of one class of the suite (`peak tune --classes`). Such an evaluation is never a
  // checkpoint's result. Empty: the bench or small shapes.
  std::vector<Shape> shapes;
  // The tuning search (docs/tuning.md): the strategy ("" = the default) and its budget: at most
  // budget.evaluations configurations, or budget.fraction of the valid space when that is more,
  // and budget.seconds.
  std::string strategy;
  Budget budget{48, 0, 0};
  // Configurations of this very source measured before in this workspace (same tuning shape and
  // device) are not run again: their recorded outcomes are reused (a search resumed).
  bool reuse_measurements = false;
  int top_k = 8;
  int jobs = 0;  // parallel compiles
  int seeds = 2;
  // The seed of the hidden validation shapes drawn for this evaluation (docs/validation.md); 0: a
  // fresh one. The evaluation's summary records the one used (`validation_seed`).
  uint64_t validation_seed = 0;
  // Passed validations shared with other evaluations of this process on the same shapes (one
  // validation_seed): `peak tune --classes` validates a binary once for all its class searches.
  std::shared_ptr<ValidationMemo> validation_memo;
  TimingPolicy policy;     // final timing of the best configuration
  TimingPolicy screening;  // ranking of configurations
  bool baseline = true;    // time the vendor baseline interleaved (when the backend has one)
  double task_timeout_s = 60;
  std::map<std::string, std::vector<int64_t>> tuning_overrides;
  std::vector<Config> must_include;  // e.g. the parent's top configurations
  // Compile every configuration but run nothing: for recording a campaign on a machine without
  // the target device (the run is replayed, fully evaluated, where the device is).
  bool compile_only = false;
  bool sanitize = false;  // CUDA: compute-sanitizer memcheck and racecheck on one small shape
  // The default options (the kernel's own tuning values, the device's default shapes): only
  // such evaluations count for a checkpoint's result (docs/store.md, "Results").
  bool standard = true;
  // Cancellation: polled between passes and between tuning configurations; when it returns true
  // the step stops at the next such point, records what it did, and checkpoints nothing.
  std::function<bool()> cancelled;
};
EvalOptions default_eval_options(bool cpu_device);

// The options for `c` on its resolved device(s) `d`: a CPU device gets the small shapes and a
// smaller budget unless the choices say otherwise.
EvalOptions eval_options_for(const EvalChoices& c, const EvalDevices& d);
// The options as JSON (recorded with every evaluation).
nlohmann::json eval_options_json(const EvalOptions& o);

}  // namespace peak
