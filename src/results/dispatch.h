#pragma once
// The dispatch table of a per-class tuning (`peak tune --classes`): one checkpoint, one
// configuration per shape class of its suite, found by a tuning search over the suite's shapes of
// that class; a shape then runs with the configuration of its class. Stored in the summary of an
// evaluation of kind "dispatch" (never the checkpoint's result, docs/store.md); report/dispatch.h
// reads the latest one back and renders it.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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
  // A family headlined in GB/s (SummaryBench::headline "bytes"): the same timing's GB/s, the
  // vendor library's, and the share of the same-run copy (0: not measured).
  bool bytes_headline = false;
  double gbs = 0, baseline_gbs = 0, pct_of_copy = 0;
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

}  // namespace peak
