#include "report/stats.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "report/html.h"
#include "store/archive.h"

namespace peak {

using json = nlohmann::json;
namespace fs = std::filesystem;

Result<std::vector<fs::path>> find_stores(const fs::path& where) {
  std::error_code ec;
  const fs::path path = store_or_archive(where);
  if (!fs::exists(path, ec))
    return make_error(fmt::format("{}: no such file or folder", path.string()));
  if (fs::is_regular_file(path, ec)) return std::vector<fs::path>{path};
  if (fs::exists(path / "peak.db", ec)) return std::vector<fs::path>{path};
  if (fs::exists(path / ".peak", ec)) return std::vector<fs::path>{path};
  // Inside a workspace?
  for (fs::path p = fs::absolute(path, ec).lexically_normal();
       p.has_parent_path() && p != p.parent_path(); p = p.parent_path())
    if (fs::exists(p / ".peak" / "peak.db", ec)) return std::vector<fs::path>{p};
  // Every store below.
  std::vector<fs::path> out;
  for (auto it = fs::recursive_directory_iterator(
           path, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const fs::path& p = it->path();
    std::string name = p.filename().string();
    if (it->is_directory(ec) && name == ".peak") {
      if (fs::exists(p / "peak.db", ec)) out.push_back(p);
      it.disable_recursion_pending();
    } else if (it->is_directory(ec) && (name == "node_modules" || name == ".git")) {
      it.disable_recursion_pending();
    } else if (it->is_regular_file(ec) &&
               ((p.extension() == ".db" && p.parent_path().filename() != ".peak") ||
                is_store_archive(p))) {
      out.push_back(p);
    }
  }
  std::sort(out.begin(), out.end());
  if (out.empty())
    return make_error(fmt::format(
        "{} holds no peak store (no workspace, .peak folder, .db file or store archive below it)",
        path.string()));
  return out;
}

namespace {

// A step's numbers at one bench shape, as the evolution shows them (campaign, position and
// vs_seed are the caller's).
EvolutionPoint evolution_point(const StepRow& s, const BenchRow& b) {
  EvolutionPoint p;
  p.checkpoint = s.checkpoint;
  p.transformation = s.transformation;
  p.shape = b.shape;
  p.gflops = b.gflops;
  p.gflops_low = b.gflops_low;
  p.gflops_high = b.gflops_high;
  p.pct_of_vendor = b.pct_of_baseline;
  p.pct_of_peak = b.pct_of_peak;
  p.bytes_headline = b.bytes_headline;
  p.gbs = b.gbs;
  p.gbs_low = b.gbs_low;
  p.gbs_high = b.gbs_high;
  p.pct_of_copy = b.pct_of_copy;
  p.pct_of_bandwidth = b.pct_of_bandwidth;
  return p;
}

std::string model_of(const std::vector<AttemptRow>& rows, int attempt) {
  for (const auto& a : rows)
    if (a.attempt == attempt && a.pass > 0) {
      std::string m = a.model.empty() ? a.driver : a.driver + ":" + a.model;
      return m.empty() ? "unknown" : m;
    }
  return "";
}

SuccessRow& row_for(std::vector<SuccessRow>& v, const std::string& key) {
  auto it = std::find_if(v.begin(), v.end(), [&](const SuccessRow& r) { return r.key == key; });
  if (it != v.end()) return *it;
  v.push_back(SuccessRow{key});
  return v.back();
}

std::string first_line(const std::string& s) {
  std::string l = s.substr(0, s.find('\n'));
  return l.size() > 160 ? l.substr(0, 157) + "..." : l;
}

}  // namespace

Stats build_stats(const std::vector<std::pair<std::string, Report>>& reports) {
  Stats st;
  for (const auto& [label, r] : reports) {
    Campaign c;
    c.label = label;
    c.source = r.source;
    c.kernel = r.kernel;
    c.backend = r.provenance.backend;
    c.device = r.provenance.device;
    for (const auto& u : r.provenance.llm) {
      std::string m = u.model.empty() ? u.driver : u.driver + ":" + u.model;
      if (std::find(c.models.begin(), c.models.end(), m) == c.models.end()) c.models.push_back(m);
    }
    for (const auto& n : r.notes) st.notes.push_back(fmt::format("{}: {}", label, n));
    CostRow cost;
    cost.campaign = label;
    std::map<std::string, double> seed_rate;  // per shape: the headline rate of the seed
    int index = 0;
    for (const auto& s : r.steps) {
      // Success and errors: every step that was tried (not the seed, not manual commits).
      if (!s.attempt_rows.empty()) {
        std::set<int> tries;
        for (const auto& a : s.attempt_rows) tries.insert(a.attempt);
        bool running = s.disposition == "running";
        int last = tries.empty() ? 0 : *tries.rbegin();
        std::string step_model;
        for (int t : tries) {
          bool passed = s.checkpoint != 0 && t == last;
          bool in_progress = running && t == last;
          if (in_progress) continue;
          std::string model = model_of(s.attempt_rows, t);
          if (model.empty()) model = "unknown";
          step_model = model;
          for (SuccessRow* row :
               {&row_for(st.by_transformation, s.transformation), &row_for(st.by_model, model)}) {
            row->tries++;
            row->passed += passed ? 1 : 0;
          }
          if (!passed)
            for (const auto& a : s.attempt_rows) {
              if (a.attempt != t || a.disposition == "passed" || a.disposition == "running" ||
                  a.disposition == "not_run")
                continue;
              auto it = std::find_if(st.errors.begin(), st.errors.end(), [&](const ErrorCell& e) {
                return e.disposition == a.disposition && e.transformation == s.transformation;
              });
              if (it == st.errors.end()) {
                st.errors.push_back(
                    ErrorCell{a.disposition, s.transformation, 0, first_line(a.error)});
                it = std::prev(st.errors.end());
              }
              it->count++;
              break;  // one failure per try: the pass or evaluation that ended it
            }
        }
        if (!running) {
          for (SuccessRow* row :
               {&row_for(st.by_transformation, s.transformation),
                &row_for(st.by_model, step_model.empty() ? "unknown" : step_model)}) {
            row->steps++;
            row->steps_passed += s.checkpoint != 0 ? 1 : 0;
          }
        }
      }
      // Performance along the history.
      if (s.checkpoint != 0) {
        for (const auto& b : s.bench) {
          // The headline rate: GB/s for a memory-bound family, else GFLOP/s.
          const double rate = b.bytes_headline ? b.gbs : b.gflops;
          if (rate <= 0) continue;
          if (!s.parent) seed_rate[b.shape] = rate;
          EvolutionPoint p = evolution_point(s, b);
          p.campaign = label;
          p.step = index;
          p.vs_seed = seed_rate.count(b.shape) ? rate / seed_rate[b.shape] : 0;
          if (!b.baseline.empty()) c.baseline = b.baseline;
          st.evolution.push_back(p);
        }
        ++index;
        c.steps++;
      }
      cost.llm_s += s.costs.llm_s;
      cost.compile_s += s.costs.recorded ? s.costs.compile_s : s.costs.compile_cpu_s;
      cost.validate_s += s.costs.validate_s;
      cost.tune_s += s.costs.tune_s;
      cost.bench_s += s.costs.bench_s;
      cost.gpu_s += s.costs.gpu_s;
      cost.steps++;
    }
    st.costs.push_back(cost);
    st.total.llm_s += cost.llm_s;
    st.total.compile_s += cost.compile_s;
    st.total.validate_s += cost.validate_s;
    st.total.tune_s += cost.tune_s;
    st.total.bench_s += cost.bench_s;
    st.total.gpu_s += cost.gpu_s;
    st.total.steps += cost.steps;
    st.campaigns.push_back(c);
  }
  st.total.campaign = "all";
  std::sort(st.errors.begin(), st.errors.end(), [](const ErrorCell& a, const ErrorCell& b) {
    return a.count != b.count ? a.count > b.count
                              : std::tie(a.disposition, a.transformation) <
                                    std::tie(b.disposition, b.transformation);
  });
  return st;
}

namespace {

std::string rate(int passed, int total) {
  return total > 0 ? fmt::format("{:.0f}%", 100.0 * passed / total) : "-";
}

std::string share(double part, double total) {
  return total > 0 ? fmt::format("{:.0f}%", 100.0 * part / total) : "-";
}

json cost_json(const CostRow& c) {
  return {{"campaign", c.campaign},   {"steps", c.steps},           {"llm_s", c.llm_s},
          {"compile_s", c.compile_s}, {"validate_s", c.validate_s}, {"tune_s", c.tune_s},
          {"bench_s", c.bench_s},     {"gpu_s", c.gpu_s},           {"total_s", c.total()}};
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string number(double v) { return fmt::format("{:.6g}", v); }

}  // namespace

namespace {

std::string percent_or_dash(double v) { return v > 0 ? fmt::format("{:.1f}%", v) : "-"; }

// One step of a sequence at one shape: its headline rate and shares.
std::string evolution_line(const EvolutionPoint& p) {
  if (p.bytes_headline)
    return fmt::format("    {:>2} {:<16} {:>10.1f} GB/s     x{:<6.2f} {:>7} {:>7} {:>7}\n", p.step,
                       p.transformation, p.gbs, p.vs_seed, percent_or_dash(p.pct_of_vendor),
                       percent_or_dash(p.pct_of_copy), percent_or_dash(p.pct_of_bandwidth));
  return fmt::format("    {:>2} {:<16} {:>10.1f} GFLOP/s  x{:<6.2f} {:>7} {:>7}\n", p.step,
                     p.transformation, p.gflops, p.vs_seed, percent_or_dash(p.pct_of_vendor),
                     percent_or_dash(p.pct_of_peak));
}

}  // namespace

std::string render_stats_text(const Stats& s) {
  std::ostringstream o;
  o << fmt::format("peak stats: {} store(s)\n", s.campaigns.size());
  for (const auto& c : s.campaigns)
    o << fmt::format(
        "  {}: {} on {} [{}], {} checkpoints{}\n", c.label, c.kernel,
        c.device.empty() ? "(not evaluated)" : c.device, c.backend, c.steps,
        c.models.empty() ? "" : ", LLM " + fmt::format("{}", fmt::join(c.models, ", ")));
  for (const auto& n : s.notes) o << "note: " << n << "\n";
  auto success = [&](const char* title, const std::vector<SuccessRow>& rows) {
    o << fmt::format("\nstep success per {}:\n", title);
    o << fmt::format("  {:<32} {:>6} {:>7} {:>6} {:>7}\n", title, "tries", "passed", "steps",
                     "passed");
    for (const auto& r : rows)
      o << fmt::format("  {:<32} {:>6} {:>7} {:>6} {:>7}\n", r.key, r.tries,
                       rate(r.passed, r.tries), r.steps, rate(r.steps_passed, r.steps));
  };
  success("transformation", s.by_transformation);
  success("model", s.by_model);
  o << "\nerror taxonomy (failed tries by disposition and transformation):\n";
  if (s.errors.empty()) o << "  (no failed try)\n";
  for (const auto& e : s.errors)
    o << fmt::format("  {:>4}  {:<18} {:<16} {}\n", e.count, e.disposition, e.transformation,
                     e.example);
  o << "\nperformance along each sequence (x seed, % of vendor library, % of peak";
  if (std::any_of(s.evolution.begin(), s.evolution.end(),
                  [](const EvolutionPoint& p) { return p.bytes_headline; }))
    o << "; memory-bound: GB/s, x seed, % of vendor library, % of copy, % of bandwidth";
  o << "):\n";
  std::string last;
  auto points = s.evolution;
  std::stable_sort(
      points.begin(), points.end(), [](const EvolutionPoint& a, const EvolutionPoint& b) {
        return std::tie(a.campaign, a.shape, a.step) < std::tie(b.campaign, b.shape, b.step);
      });
  for (const auto& p : points) {
    if (p.campaign + p.shape != last) o << fmt::format("  {} {}\n", p.campaign, p.shape);
    last = p.campaign + p.shape;
    o << evolution_line(p);
  }
  o << "\ncost breakdown (seconds, share of the total):\n";
  o << fmt::format("  {:<40} {:>14} {:>14} {:>14} {:>14} {:>14} {:>9}\n", "campaign", "LLM",
                   "compile", "validate", "tune", "time", "GPU");
  auto cost_line = [&](const CostRow& c) {
    double t = c.total();
    auto cell = [&](double v) { return fmt::format("{:.1f} ({})", v, share(v, t)); };
    o << fmt::format("  {:<40} {:>14} {:>14} {:>14} {:>14} {:>14} {:>9.2f}\n", c.campaign,
                     cell(c.llm_s), cell(c.compile_s), cell(c.validate_s), cell(c.tune_s),
                     cell(c.bench_s), c.gpu_s);
  };
  for (const auto& c : s.costs) cost_line(c);
  if (s.costs.size() > 1) cost_line(s.total);
  return o.str();
}

json render_stats_json(const Stats& s) {
  json j;
  j["format"] = kStatsFormatVersion;
  j["kind"] = "peak-stats";
  j["campaigns"] = json::array();
  for (const auto& c : s.campaigns)
    j["campaigns"].push_back({{"label", c.label},
                              {"source", c.source},
                              {"kernel", c.kernel},
                              {"backend", c.backend},
                              {"device", c.device},
                              {"baseline", c.baseline},
                              {"checkpoints", c.steps},
                              {"models", c.models}});
  j["notes"] = s.notes;
  auto success = [](const std::vector<SuccessRow>& rows) {
    json a = json::array();
    for (const auto& r : rows)
      a.push_back({{"key", r.key},
                   {"tries", r.tries},
                   {"passed", r.passed},
                   {"try_success", r.tries ? static_cast<double>(r.passed) / r.tries : 0.0},
                   {"steps", r.steps},
                   {"steps_passed", r.steps_passed}});
    return a;
  };
  j["success_by_transformation"] = success(s.by_transformation);
  j["success_by_model"] = success(s.by_model);
  j["errors"] = json::array();
  for (const auto& e : s.errors)
    j["errors"].push_back({{"disposition", e.disposition},
                           {"transformation", e.transformation},
                           {"count", e.count},
                           {"example", e.example}});
  j["evolution"] = json::array();
  for (const auto& p : s.evolution) {
    json e = {{"campaign", p.campaign},
              {"step", p.step},
              {"checkpoint", p.checkpoint},
              {"transformation", p.transformation},
              {"shape", p.shape},
              {"gflops", p.gflops},
              {"gflops_low", p.gflops_low},
              {"gflops_high", p.gflops_high},
              {"vs_seed", p.vs_seed},
              {"pct_of_vendor", p.pct_of_vendor},
              {"pct_of_peak", p.pct_of_peak}};
    if (p.bytes_headline) e["headline"] = "bytes";
    if (p.bytes_headline || p.gbs > 0)  // absent for GFLOP/s families' points
      e.update({{"gbs", p.gbs},
                {"gbs_low", p.gbs_low},
                {"gbs_high", p.gbs_high},
                {"pct_of_copy", p.pct_of_copy},
                {"pct_of_bandwidth", p.pct_of_bandwidth}});
    j["evolution"].push_back(std::move(e));
  }
  j["costs"] = json::array();
  for (const auto& c : s.costs) j["costs"].push_back(cost_json(c));
  j["total"] = cost_json(s.total);
  return j;
}

std::string render_stats_csv(const Stats& s) {
  // One tidy table: every figure is a row; `format` is the stats format version.
  std::ostringstream o;
  o << "format,table,campaign,transformation,model,disposition,step,shape,metric,value,text\n";
  auto row = [&](const std::string& table, const std::string& campaign, const std::string& tr,
                 const std::string& model, const std::string& disp, const std::string& step,
                 const std::string& shape, const std::string& metric, double value,
                 const std::string& text = "") {
    o << kStatsFormatVersion << "," << table << "," << csv_field(campaign) << "," << csv_field(tr)
      << "," << csv_field(model) << "," << csv_field(disp) << "," << step << "," << csv_field(shape)
      << "," << metric << "," << number(value) << "," << csv_field(text) << "\n";
  };
  for (const auto& r : s.by_transformation) {
    row("success", "", r.key, "", "", "", "", "tries", r.tries);
    row("success", "", r.key, "", "", "", "", "tries_passed", r.passed);
    row("success", "", r.key, "", "", "", "", "steps", r.steps);
    row("success", "", r.key, "", "", "", "", "steps_passed", r.steps_passed);
  }
  for (const auto& r : s.by_model) {
    row("success", "", "", r.key, "", "", "", "tries", r.tries);
    row("success", "", "", r.key, "", "", "", "tries_passed", r.passed);
    row("success", "", "", r.key, "", "", "", "steps", r.steps);
    row("success", "", "", r.key, "", "", "", "steps_passed", r.steps_passed);
  }
  for (const auto& e : s.errors)
    row("errors", "", e.transformation, "", e.disposition, "", "", "count", e.count, e.example);
  for (const auto& p : s.evolution) {
    const std::string step = std::to_string(p.step);
    auto measure = [&](const std::string& metric, double value) {
      row("evolution", p.campaign, p.transformation, "", "", step, p.shape, metric, value);
    };
    measure("gflops", p.gflops);
    measure("vs_seed", p.vs_seed);
    // The shares and GB/s only where they were measured.
    for (const auto& [metric, value] :
         {std::pair<const char*, double>{"pct_of_vendor", p.pct_of_vendor},
          {"pct_of_peak", p.pct_of_peak},
          {"gbs", p.gbs},
          {"pct_of_copy", p.pct_of_copy},
          {"pct_of_bandwidth", p.pct_of_bandwidth}})
      if (value > 0) measure(metric, value);
  }
  auto costs = s.costs;
  costs.push_back(s.total);
  for (const auto& c : costs) {
    row("cost", c.campaign, "", "", "", "", "", "llm_s", c.llm_s);
    row("cost", c.campaign, "", "", "", "", "", "compile_s", c.compile_s);
    row("cost", c.campaign, "", "", "", "", "", "validate_s", c.validate_s);
    row("cost", c.campaign, "", "", "", "", "", "tune_s", c.tune_s);
    row("cost", c.campaign, "", "", "", "", "", "bench_s", c.bench_s);
    row("cost", c.campaign, "", "", "", "", "", "gpu_s", c.gpu_s);
  }
  return o.str();
}

Result<std::string> render_stats_html(const Stats& s) {
  return html_page(fmt::format("peak stats: {} store(s)", s.campaigns.size()),
                   render_stats_json(s));
}

}  // namespace peak
