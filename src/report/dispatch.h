#pragma once
// Per-class tuning and dispatch (`peak tune --classes`): one checkpoint, one configuration per
// shape class of its suite. Each class's configuration was found by a tuning search over the
// suite's shapes of that class (classified by the context's class rules, context/context.h);
// a shape is then run with the configuration of its class, the kernel built once per distinct
// configuration, as a vendor library's heuristics choose a kernel per shape. The table is stored
// as an evaluation of kind "dispatch" of the checkpoint (never its result, docs/store.md) and
// used by `peak bench` for that checkpoint on the same device.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/store.h"

namespace peak {

// Version of the table's JSON form (in the evaluation summary).
inline constexpr int kDispatchFormatVersion = 1;

// One class of the table.
struct DispatchVariant {
  std::string cls;                  // "square", "small-m", ...
  std::string when;                 // its rule ("" = always)
  std::vector<std::string> shapes;  // the suite shapes it was tuned on, by name
  // The configuration its search found; empty when the search found none (the class then runs
  // the fallback configuration).
  std::map<std::string, int64_t> config;
  std::string config_text;
  std::string disposition = "not_run";  // of its search and final timing
  std::string message;
  size_t evaluated = 0;        // configurations the search evaluated
  size_t space = 0;            // valid configurations in the space
  double seconds = 0;          // compile + validation + timing of its search, and its final timing
  double gflops = 0;           // final timing at its first shape
  double baseline_gflops = 0;  // the vendor library at that shape (0: not timed)
};

struct DispatchTable {
  int64_t checkpoint = 0;
  int64_t evaluation = 0;  // its row in the store's evaluations (0: not stored)
  std::string created_at;
  std::string device;
  bool small = false;  // tuned on the suite's small variant
  // The checkpoint's best configuration: shapes of a class without a configuration run it.
  std::map<std::string, int64_t> fallback;
  std::string fallback_text;
  std::vector<DispatchVariant> variants;  // in the order of the class rules
};

// The entry of class `cls` that has a configuration (nullptr: none, or its search found none).
const DispatchVariant* dispatch_variant(const DispatchTable& t, const std::string& cls);
// The configuration a shape of class `cls` runs with: its variant's, else the fallback.
const std::map<std::string, int64_t>& dispatch_config(const DispatchTable& t,
                                                      const std::string& cls);
// Evaluations spent over all classes.
size_t dispatch_evaluations(const DispatchTable& t);

// JSON form (kind "peak-dispatch", format kDispatchFormatVersion) and back; from_json accepts
// what to_json wrote, a missing field reads as its default.
nlohmann::json dispatch_json(const DispatchTable& t);
DispatchTable dispatch_from_json(const nlohmann::json& j);

// The newest dispatch table recorded for a checkpoint (an evaluation of kind "dispatch").
std::optional<DispatchTable> latest_dispatch(const Store& store, int64_t checkpoint);

// The table as text for a terminal: class, rule, shapes, configuration, evaluations, seconds,
// GFLOP/s and the vendor's at the class's first shape.
std::string dispatch_text(const DispatchTable& t);

}  // namespace peak
