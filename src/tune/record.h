#pragma once
// Tuning searches in the workspace store: the observer that records an evaluation as it goes
// (the run, the configurations the validity expression ruled out with why, the screening
// measurements of each configuration as it is timed and every evaluated one after its batch, so an
// interrupted search keeps what it measured; then the builds and validations of the search, and
// the final timings), and the export of a recorded search as a tuning cache (tune/cache.h) for the
// simulation runner.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/store.h"
#include "tune/cache.h"
#include "tune/search.h"

namespace peak {

// What a recorded search belongs to, and the facts its cache needs.
struct RecordTarget {
  std::optional<int64_t> attempt_id, checkpoint_id;
  std::string source_hash;
  std::string kernel;     // the context's name
  std::string shape;      // the tuning shape
  Work work;              // its FLOPs and bytes
  std::string toolchain;  // the backend's toolchain
  DeviceFacts device;
  nlohmann::json options = nlohmann::json::object();  // strategy options (budget, seed, ...)
  int jobs = 1;                                       // parallel compiles
  // The measurement rows: what each device that timed records of itself (one per DeviceLane;
  // the first made the final timing), and the prefix of their `what` (a class's search of `peak
  // tune --classes` keeps its rows apart from the checkpoint's own numbers).
  std::vector<nlohmann::json> devices;
  std::string what_prefix;
  // A compile-only search runs nothing: it records its run and configurations alone, no builds.
  bool build_rows = true;
};

// Configurations the validity expression rules out are written as rows (position -1, with the
// reason) up to this many per search; a larger set is summarized in the run's space (the count
// per false conjunct) and rebuilt from the space's definition when the search is exported
// (cache_from_store), so that a step whose space holds 100,000 invalid combinations does not add
// 100,000 rows to the store.
inline constexpr size_t kValidityRowLimit = 1024;

class StoreRecorder : public TuneObserver {
 public:
  StoreRecorder(Store& store, RecordTarget target);
  void on_start(const TuningSpace& space, const std::string& strategy, size_t limit) override;
  void on_batch(const std::vector<size_t>& indices, const std::vector<ConfigOutcome>& outcomes,
                double elapsed_seconds) override;
  // Measurement rows (what = "screening"): every configuration timed on the tuning shape, at
  // once, so reports see the distribution of the search, and `peak serve` its progress.
  void on_screened(const ConfigOutcome& o) override;
  // The build row of a configuration and a row per validation check.
  void on_evaluated(const ConfigOutcome& o) override;
  // The rows of one final-timing measurement: the candidate's, and the baseline's when it ran.
  void on_final(const Measurement& m) override;
  std::optional<int64_t> run_id() const { return run_id_; }
  // The first store error, if any (recording never stops a search).
  const std::string& error() const { return error_; }

 private:
  Store& store_;
  RecordTarget target_;
  std::optional<int64_t> run_id_;
  int64_t position_ = 0;
  std::string error_;
};

// The tuning cache of a recorded search. `with_validity_pruned` false: without the configurations
// the validity expression ruled out that have no rows (a caller that drops them anyway need not
// rebuild the space).
Result<TuningCache> cache_from_store(const Store& store, int64_t run_id,
                                     bool with_validity_pruned = true);
// Every outcome recorded for `source_hash` on the tuning shape `shape` and the device named
// `device` (the latest where a configuration was evaluated more than once), as a cache.
Result<TuningCache> recorded_outcomes(const Store& store, const std::string& source_hash,
                                      const std::string& shape, const std::string& device);
// The last search recorded for a checkpoint (by its evaluation, or by the attempt that made it),
// a class's search of `peak tune --classes` (options "per_class") excepted.
Result<int64_t> latest_tuning_run(const Store& store, int64_t checkpoint_id);

}  // namespace peak
