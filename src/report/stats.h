#pragma once
// Campaign analytics over any number of stores (different sequences, backends, models,
// devices): step success per transformation and per model, the error taxonomy, performance
// along each sequence normalized to the seed and to the vendor library, and where the time went.
// Built from the stores' reports; rendered as text, JSON, CSV and HTML. docs/report.md.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/report.h"
#include "util/result.h"

namespace peak {

// Version of the stats JSON and CSV (the CSV's first column repeats it on every row).
inline constexpr int kStatsFormatVersion = 1;

struct SuccessRow {
  std::string key;            // a transformation, or "driver:model"
  int tries = 0, passed = 0;  // one try = one attempt of a step (all its passes and evaluation)
  int steps = 0, steps_passed = 0;  // one step = a transformation applied (its tries together)
};

struct ErrorCell {
  std::string disposition, transformation;
  int count = 0;
  std::string example;  // first line of the first message
};

struct EvolutionPoint {
  std::string campaign;  // the store's label
  int step = 0;          // position along the history (0 = seed)
  int64_t checkpoint = 0;
  std::string transformation, shape;
  double gflops = 0, vs_seed = 0, pct_of_vendor = 0, pct_of_peak = 0;
  double gflops_low = 0, gflops_high = 0;
  // A memory-bound headline (BenchRow::bytes_headline): vs_seed is of GB/s, and GB/s with its
  // error bars and its shares of the same-run copy and the documented bandwidth (0: not measured).
  bool bytes_headline = false;
  double gbs = 0, gbs_low = 0, gbs_high = 0, pct_of_copy = 0, pct_of_bandwidth = 0;
};

struct CostRow {
  std::string campaign;
  double llm_s = 0, compile_s = 0, validate_s = 0, tune_s = 0, bench_s = 0, gpu_s = 0;
  int steps = 0;
  double total() const { return llm_s + compile_s + validate_s + tune_s + bench_s; }
};

struct Campaign {
  std::string label, source, kernel, backend, device, baseline;
  int steps = 0;
  std::vector<std::string> models;
};

struct Stats {
  std::vector<Campaign> campaigns;
  std::vector<std::string> notes;  // per store: what is partial or could not be read
  std::vector<SuccessRow> by_transformation, by_model;
  std::vector<ErrorCell> errors;
  std::vector<EvolutionPoint> evolution;
  std::vector<CostRow> costs;
  CostRow total;
};

// Stores under `path`: the store of a workspace (or of a folder inside one), a .peak folder, a
// peak.db file, or every store found below a folder that is none of these.
Result<std::vector<std::filesystem::path>> find_stores(const std::filesystem::path& path);

// `reports`: (label, report) per store.
Stats build_stats(const std::vector<std::pair<std::string, Report>>& reports);

std::string render_stats_text(const Stats& s);
nlohmann::json render_stats_json(const Stats& s);
std::string render_stats_csv(const Stats& s);
Result<std::string> render_stats_html(const Stats& s);

}  // namespace peak
