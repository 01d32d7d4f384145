#pragma once
// Tuning caches: a measured tuning space in one versioned JSON file, replayed by the simulation
// runner (tune/simulation.h) so strategies can be developed, tested and compared without the
// device. Written by `peak export-space` from a workspace's store (tune/record.h); the format is
// documented in docs/tuning.md:
//
//   {"format": "peak-tuning-cache", "version": 1, "produced_by": "peak 0.1.0", "command": "...",
//    "kernel": "matmul-hlsl-fp32", "transformation": "thread-tiling", "source_hash": "...",
//    "device": {...DeviceFacts...}, "toolchain": "...", "shape": "K=256 M=256 N=256",
//    "work": {"flops", "bytes", "matmul", "m", "n", "k", "element_bytes"},
//    "objective": "...", "space": {"parameters": [{"name", "values", "default"}], "valid": "..."},
//    "run": {"strategy": "exhaustive", "jobs": 2},
//    "configs": [{"config": {...}, "disposition": "passed", "stage": "time", "reason": "",
//                 "score_ms": 1.25, "compile_s": 0.08, "validate_s": 1.4, "time_s": 0.3,
//                 "resources": {...}, "launch": {...}}, ...]}
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/protocol.h"
#include "tune/prune.h"
#include "tune/search.h"
#include "tune/space.h"

namespace peak {

inline constexpr int kCacheFormatVersion = 1;
inline constexpr std::string_view kCacheFormatName = "peak-tuning-cache";

// The recorded outcome of one configuration.
struct CacheEntry {
  Config config;
  Disposition disposition = Disposition::not_run;
  Stage stage = Stage::compile;
  std::string reason;
  double score_ms = 0;  // passed configurations: median time on the tuning shape
  double compile_s = 0, validate_s = 0, time_s = 0;
  nlohmann::json resources = nlohmann::json::object();
  nlohmann::json launch = nlohmann::json::object();
};

class TuningCache {
 public:
  std::string produced_by;     // "peak 0.1.0"
  std::string command;         // the command that produced it, when known
  std::string kernel;          // the context's name
  std::string transformation;  // the step whose kernel was tuned ("" for the seed)
  std::string source_hash;     // sha256 of the kernel source
  DeviceFacts device;
  std::string toolchain;
  std::string shape;  // the tuning shape
  Work work;          // FLOPs and bytes of the tuning shape (for the performance model)
  std::string objective = "median time of one launch on the tuning shape (ms, lower is better)";
  std::vector<SpaceParam> params;
  std::string valid;     // the space's validity expression
  std::string strategy;  // of the recorded run
  int jobs = 1;          // parallel compiles of the recorded run

  const std::vector<CacheEntry>& entries() const { return entries_; }
  // Adds or replaces the entry of a configuration.
  void add(CacheEntry e);
  const CacheEntry* find(const Config& c) const;
  // The space rebuilt from the parameters, the validity expression and the device.
  Result<TuningSpace> space() const;
  // The fastest passing entry (nullptr when none passed).
  const CacheEntry* best() const;

  nlohmann::json to_json() const;
  static Result<TuningCache> from_json(const nlohmann::json& j, std::string_view where);

 private:
  std::vector<CacheEntry> entries_;
  std::map<Config, size_t> index_;
};

Result<TuningCache> read_cache(const std::filesystem::path& path);
Status write_cache(const std::filesystem::path& path, const TuningCache& cache);

}  // namespace peak
