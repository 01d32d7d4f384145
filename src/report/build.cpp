// Building the report of a store: one pass over its rows, then the steps along the history.
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "context/context.h"
#include "peak/version.h"
#include "report/report.h"
#include "util/diff.h"
#include "util/fs.h"

namespace peak {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

json parse_object(const std::string& text) {
  if (text.empty()) return json::object();
  json j = json::parse(text, nullptr, false);
  return j.is_object() ? j : json::object();
}

double finite_or_zero(double v) { return std::isfinite(v) ? v : 0.0; }

std::string first_line(const std::string& s, size_t max = 200) {
  std::string line = s.substr(0, s.find('\n'));
  if (line.size() > max) line = line.substr(0, max - 3) + "...";
  return line;
}

// The first lines of a message, for attempt tables.
std::string first_lines(const std::string& s, size_t lines = 6, size_t max = 600) {
  auto all = split_lines(s);
  std::string out;
  for (size_t i = 0; i < all.size() && i < lines; ++i) out += (i ? "\n" : "") + all[i];
  if (all.size() > lines) out += "\n...";
  if (out.size() > max) out = out.substr(0, max - 3) + "...";
  return out;
}

// "BLOCK_X=16 BLOCK_Y=8" from a configuration object (keys in order).
std::string config_words(const json& c) {
  std::string out;
  if (!c.is_object()) return out;
  for (const auto& [k, v] : c.items())
    out += (out.empty() ? "" : " ") + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
  return out;
}

std::string config_words(const std::string& config_json) {
  return config_words(parse_object(config_json));
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double pos = q * static_cast<double>(v.size() - 1);
  size_t i = static_cast<size_t>(pos);
  double f = pos - static_cast<double>(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

std::vector<double> samples_of(const std::string& samples_json) {
  std::vector<double> out;
  json j = json::parse(samples_json.empty() ? "[]" : samples_json, nullptr, false);
  if (!j.is_array()) return out;
  for (const auto& v : j)
    if (v.is_number()) out.push_back(v.get<double>());
  return out;
}

double sum_seconds(const std::vector<double>& ms) {
  double s = 0;
  for (double v : ms) s += v;
  return s / 1000.0;
}

bool process_alive(int64_t pid) {
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// Compiler resources of a build (CUDA: ptxas; HLSL: SPIR-V reflection; HIP: the AMD names),
// in words.
std::string describe_resources(const json& r) {
  if (!r.is_object()) return "";
  std::vector<std::string> parts;
  auto num = [&](const char* k) { return r.contains(k) && r[k].is_number(); };
  if (num("max_registers"))
    parts.push_back(fmt::format("{} registers", r.value("max_registers", 0)));
  if (num("vgprs")) parts.push_back(fmt::format("{} VGPRs", r.value("vgprs", 0)));
  if (num("sgprs")) parts.push_back(fmt::format("{} SGPRs", r.value("sgprs", 0)));
  int64_t shared = r.value("max_shared_bytes", r.value("shared_bytes", int64_t{-1}));
  if (shared >= 0)
    parts.push_back(fmt::format("{:.1f} KiB shared", static_cast<double>(shared) / 1024.0));
  if (num("lds_bytes"))
    parts.push_back(fmt::format("{:.1f} KiB LDS", r.value("lds_bytes", 0.0) / 1024.0));
  if (num("scratch_bytes"))
    parts.push_back(fmt::format("{} B scratch", r.value("scratch_bytes", 0)));
  if (num("max_local_bytes"))
    parts.push_back(fmt::format("{} B local memory per thread", r.value("max_local_bytes", 0)));
  if (num("occupancy")) parts.push_back(fmt::format("occupancy {}", r.value("occupancy", 0)));
  if (num("threads")) parts.push_back(fmt::format("{} threads/group", r.value("threads", 0)));
  if (r.contains("spills")) parts.push_back(r.value("spills", false) ? "SPILLS" : "no spills");
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  // A build also compiled for targets it does not run on (HIP: AMD gfx90a, gfx1030) carries each
  // target's report under "targets", with its own "summary", shown after the run target's.
  if (r.contains("targets") && r["targets"].is_object())
    for (const auto& [target, t] : r["targets"].items())
      if (t.is_object() && t.contains("summary") && t["summary"].is_string() &&
          !t["summary"].get<std::string>().empty())
        out += fmt::format("{}{} (compiled, not run): {}", out.empty() ? "" : "; ", target,
                           t["summary"].get<std::string>());
  return out;
}

}  // namespace

std::string resources_text(const json& resources) { return describe_resources(resources); }

std::string instruction_mix_text(const json& resources) {
  if (!resources.is_object() || !resources.contains("sass") || !resources["sass"].is_object())
    return "";
  const json& sass = resources["sass"];
  if (!sass.contains("kernels") || !sass["kernels"].is_object()) return "";
  std::map<std::string, int64_t> opcodes;
  int64_t total = 0;
  size_t kernels = 0;
  for (const auto& [name, k] : sass["kernels"].items()) {
    if (!k.is_object()) continue;
    ++kernels;
    if (k.contains("instructions") && k["instructions"].is_number_integer())
      total += k["instructions"].get<int64_t>();
    if (k.contains("opcodes") && k["opcodes"].is_object())
      for (const auto& [op, n] : k["opcodes"].items())
        if (n.is_number_integer()) opcodes[op] += n.get<int64_t>();
  }
  if (kernels == 0) return "";
  auto count = [&](const std::string& op) {
    auto it = opcodes.find(op);
    return it == opcodes.end() ? int64_t{0} : it->second;
  };
  std::vector<std::string> parts;
  // Tensor cores: Hopper's warpgroup MMA and the warp-level MMA always, the others when used
  // (IMMA, QGMMA, then any other *MMA: IGMMA, DMMA, Blackwell's UTC*MMA, ...).
  std::vector<std::string> mma = {"HGMMA", "HMMA"};
  for (const char* op : {"IMMA", "QGMMA"})
    if (count(op) > 0) mma.push_back(op);
  for (const auto& [op, n] : opcodes)
    if (n > 0 && op.size() > 3 && op.compare(op.size() - 3, 3, "MMA") == 0 &&
        std::find(mma.begin(), mma.end(), op) == mma.end())
      mma.push_back(op);
  for (const auto& op : mma) parts.push_back(fmt::format("{} {}", op, count(op)));
  for (const char* op : {"FFMA", "LDS", "LDG", "STS", "STG", "BAR"})
    parts.push_back(fmt::format("{} {}", op, count(op)));
  std::string out = "SASS: ";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  out += fmt::format(" of {} instructions", total);
  if (kernels > 1) out += fmt::format(" in {} kernels", kernels);
  return out;
}

json checkpoint_summary(const Store& store, const CheckpointRecord& c, std::string* note) {
  json s = parse_object(c.summary_json);
  // The result among the checkpoint's evaluations (store/store.h, result_evaluation).
  if (auto ev = store.evaluations(c.id); ev && !ev->empty()) {
    if (auto i = result_evaluation(*ev)) {
      if (auto blob = store.get_blob((*ev)[*i].summary_blob)) {
        json e = parse_object(*blob);
        if (!e.empty()) return e;
      } else if (note) {
        *note = fmt::format(
            "checkpoint {}: its evaluation is in a blob this store does not hold; its numbers are "
            "rebuilt from the measurement rows",
            c.id);
      }
    }
  }
  auto m = store.meta(fmt::format("eval.{}", c.id));
  if (m && *m) {
    auto blob = store.get_blob(**m);
    if (blob) {
      json e = parse_object(*blob);
      if (!e.empty()) return e;
    } else if (note) {
      *note = fmt::format(
          "checkpoint {}: its evaluation is in a blob this store does not hold; its numbers are "
          "rebuilt from the measurement rows",
          c.id);
    }
  }
  return s;
}

namespace {

BenchRow bench_from_summary(const json& m) {
  BenchRow b;
  b.shape = m.value("shape", "");
  b.disposition = m.value("disposition", "");
  b.median_ms = m.value("median_ms", 0.0);
  b.spread = m.value("spread", 0.0);
  b.gflops = m.value("gflops", 0.0);
  b.pct_of_peak = m.value("pct_of_peak", 0.0);
  b.baseline = m.value("baseline", "");
  b.baseline_gflops = m.value("baseline_gflops", 0.0);
  b.baseline_median_ms = m.value("baseline_median_ms", 0.0);
  b.baseline_spread = m.value("baseline_spread", 0.0);
  b.pct_of_baseline = m.value("pct_of_baseline", 0.0);
  b.speedup_vs_seed = m.value("speedup_vs_seed", 0.0);
  b.speedup_vs_parent = m.value("speedup_vs_parent", 0.0);
  if (m.contains("samples_ms") && m["samples_ms"].is_array())
    b.samples_ms = m["samples_ms"].get<std::vector<double>>();
  if (m.contains("baseline_samples_ms") && m["baseline_samples_ms"].is_array())
    b.baseline_samples_ms = m["baseline_samples_ms"].get<std::vector<double>>();
  b.samples = b.samples_ms.size();
  b.p25_ms = m.value("p25_ms", percentile(b.samples_ms, 0.25));
  b.p75_ms = m.value("p75_ms", percentile(b.samples_ms, 0.75));
  b.clock_mhz_before = m.value("clock_mhz_before", 0.0);
  b.clock_mhz_after = m.value("clock_mhz_after", 0.0);
  b.throttled = m.value("throttled", false);
  return b;
}

void finish_bench(BenchRow& b) {
  if (b.gflops > 0 && b.median_ms > 0) {
    b.gflops_low = b.p75_ms > 0 ? b.gflops * b.median_ms / b.p75_ms : b.gflops;
    b.gflops_high = b.p25_ms > 0 ? b.gflops * b.median_ms / b.p25_ms : b.gflops;
  }
  if (b.baseline_gflops > 0 && b.baseline_median_ms > 0 && !b.baseline_samples_ms.empty()) {
    double p25 = percentile(b.baseline_samples_ms, 0.25),
           p75 = percentile(b.baseline_samples_ms, 0.75);
    b.baseline_gflops_low = p75 > 0 ? b.baseline_gflops * b.baseline_median_ms / p75 : 0;
    b.baseline_gflops_high = p25 > 0 ? b.baseline_gflops * b.baseline_median_ms / p25 : 0;
  }
}

// Everything read from the store once.
struct Rows {
  std::vector<CheckpointRecord> checkpoints;
  std::vector<AttemptRecord> attempts;
  std::vector<BuildRecord> builds;
  std::vector<ValidationRecord> validations;
  std::vector<MeasurementRecord> measurements;
  std::vector<WorkflowRecord> workflows;
};

// The rows of one evaluation (a step's search and final timing).
struct EvalRows {
  std::vector<const BuildRecord*> builds;
  std::vector<const ValidationRecord*> validations;
  std::vector<const MeasurementRecord*> screening, final_timing;
};

EvalRows eval_rows(const Rows& rows, const std::set<int64_t>& attempt_ids, int64_t checkpoint,
                   const std::string& source_hash) {
  EvalRows e;
  auto mine = [&](const std::optional<int64_t>& a, const std::optional<int64_t>& c) {
    return (a && attempt_ids.count(*a)) || (c && *c == checkpoint);
  };
  for (const auto& b : rows.builds)
    if ((b.attempt_id && attempt_ids.count(*b.attempt_id)) ||
        (!b.attempt_id && attempt_ids.empty() && !source_hash.empty() &&
         b.source_hash == source_hash))
      e.builds.push_back(&b);
  for (const auto& v : rows.validations)
    if (mine(v.attempt_id, v.checkpoint_id)) e.validations.push_back(&v);
  for (const auto& m : rows.measurements) {
    if (!mine(m.attempt_id, m.checkpoint_id)) continue;
    // A class's search (`peak tune --classes`) timed the suite's shapes, not the checkpoint's.
    if (m.what.rfind(kClassMeasurementPrefix, 0) == 0) continue;
    if (m.what == "screening")
      e.screening.push_back(&m);
    else
      e.final_timing.push_back(&m);
  }
  return e;
}

std::vector<ConfigRow> config_rows(const EvalRows& e, const json& summary) {
  std::vector<ConfigRow> out;
  std::map<std::string, size_t> index;  // config text -> row
  auto row = [&](const std::string& config_json) -> ConfigRow& {
    std::string key = config_words(config_json);
    auto it = index.find(key);
    if (it != index.end()) return out[it->second];
    index[key] = out.size();
    out.push_back(ConfigRow{});
    out.back().config = key;
    out.back().disposition = "not_run";
    return out.back();
  };
  for (const auto* b : e.builds) {
    ConfigRow& c = row(b->config_json);
    c.compile_s += finite_or_zero(b->seconds);
    c.cached = b->cached;
    c.resources = describe_resources(parse_object(b->resources_json));
    c.disposition = b->disposition;
    if (b->disposition != "passed") c.message = fmt::format("compiler exit code {}", b->exit_code);
  }
  for (const auto* v : e.validations) {
    ConfigRow& c = row(v->config_json);
    c.checks++;
    if (v->disposition != "passed") {
      if (c.failed_checks == 0 && (c.disposition == "passed" || c.disposition == "not_run")) {
        c.disposition = v->disposition;
        c.message = first_line(v->message);
      }
      c.failed_checks++;
    } else if (c.disposition == "not_run") {
      c.disposition = "passed";
    }
  }
  for (const auto* m : e.screening) {
    ConfigRow& c = row(m->config_json);
    auto samples = samples_of(m->samples_json);
    c.shape = m->shape;
    c.score_ms = finite_or_zero(m->median_ms);
    c.score_gflops = finite_or_zero(m->gflops);
    c.spread = finite_or_zero(m->spread);
    c.gpu_s += sum_seconds(samples);
    if (m->disposition != "passed" && (c.disposition == "passed" || c.disposition == "not_run")) {
      c.disposition = m->disposition;
      c.message = "timing on the tuning shape";
    } else if (c.disposition == "not_run") {
      c.disposition = m->disposition;
    }
  }
  if (summary.contains("top") && summary["top"].is_array())
    for (const auto& t : summary["top"]) {
      ConfigRow& c = row(t.value("config", json::object()).dump());
      c.top = true;
      if (c.score_ms == 0) c.score_ms = t.value("score_ms", 0.0);
      if (c.disposition == "not_run") c.disposition = "passed";
    }
  if (summary.contains("best") && summary["best"].contains("config")) {
    ConfigRow& c = row(summary["best"]["config"].dump());
    c.best = true;
  }
  return out;
}

struct Group {  // the attempts of one transformation from one parent in one workflow
  int64_t workflow = 0;
  int64_t parent = 0;
  std::string transformation;
  std::vector<const AttemptRecord*> rows;
  std::optional<int64_t> checkpoint;  // the checkpoint it made, if any
};

}  // namespace

namespace {
Result<CheckpointRecord> head_of(const Store& store) {
  auto id = store.head_checkpoint();
  if (!id) return Error{id.error()};
  if (!*id)
    return make_error(
        "HEAD points at no checkpoint; `peak log` lists them, `peak checkout N` picks one");
  return store.checkpoint(**id);
}
}  // namespace

Result<int64_t> resolve_checkpoint(const Store& store, const std::string& ref_in) {
  std::string ref = trim(ref_in);
  if (ref.empty() || ref == "HEAD") {
    auto h = head_of(store);
    if (!h) return h.status();
    return h->id;
  }
  if (starts_with(ref, "HEAD~")) {
    auto h = head_of(store);
    if (!h) return h.status();
    int n = std::atoi(ref.c_str() + 5);
    CheckpointRecord c = *h;
    for (int i = 0; i < n; ++i) {
      if (!c.parent)
        return make_error(fmt::format("{} goes past the seed checkpoint", ref), ErrorKind::input);
      auto p = store.checkpoint(*c.parent);
      if (!p) return p.status();
      c = *p;
    }
    return c.id;
  }
  std::string num = starts_with(ref, "#") ? ref.substr(1) : ref;
  if (!num.empty() && num.size() < 18 && std::all_of(num.begin(), num.end(), ::isdigit)) {
    int64_t id = std::stoll(num);
    auto c = store.checkpoint(id);
    if (!c)
      return make_error(fmt::format("no checkpoint {}; `peak log` lists them", id),
                        ErrorKind::input);
    return id;
  }
  auto r = store.ref(ref);
  if (r && *r) return **r;
  auto t = store.find_tag(ref);
  if (t && *t) return **t;
  return make_error(
      fmt::format(
          "'{}' names no checkpoint, branch or tag; `peak log` lists checkpoints and branches",
          ref),
      ErrorKind::input);
}

Result<std::unique_ptr<Store>> open_store_for_reading(const fs::path& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return Store::open_read_only(path);
  if (!fs::is_directory(path, ec))
    return make_error(fmt::format("no peak store or workspace at {}", path.string()));
  if (fs::exists(path / "peak.db", ec)) return Store::open_read_only(path);
  fs::path p = fs::absolute(path, ec).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  for (;;) {
    if (fs::exists(p / ".peak" / "peak.db", ec)) return Store::open_read_only(p / ".peak");
    if (!p.has_parent_path() || p.parent_path() == p) break;
    p = p.parent_path();
  }
  if (fs::exists(path / ".peak", ec))
    return make_error(
        fmt::format("{} is an empty workspace: its .peak folder has no database (was `peak init` "
                    "interrupted?)",
                    path.string()));
  return make_error(fmt::format(
      "{} is not a peak workspace and holds no store (expected a workspace folder, its .peak "
      "folder, or a peak.db file)",
      path.string()));
}

Result<Report> build_report(const Store& store, const ReportOptions& opts) {
  Report r;
  r.source = store.dir().string();
  Rows rows;
  {
    auto cps = store.checkpoints();
    if (!cps) return Error{cps.error()};
    rows.checkpoints = std::move(*cps);
    auto at = store.attempts();
    if (!at) return Error{at.error()};
    rows.attempts = std::move(*at);
    auto bu = store.builds();
    if (!bu) return Error{bu.error()};
    rows.builds = std::move(*bu);
    auto va = store.validations();
    if (!va) return Error{va.error()};
    rows.validations = std::move(*va);
    auto me = store.measurements();
    if (!me) return Error{me.error()};
    rows.measurements = std::move(*me);
    auto wf = store.workflows();
    if (!wf) return Error{wf.error()};
    rows.workflows = std::move(*wf);
  }
  if (rows.checkpoints.empty())
    return make_error(fmt::format(
        "the store {} holds no checkpoint yet (`peak init` records the seed); nothing to report",
        r.source));
  std::map<int64_t, const CheckpointRecord*> by_id;
  for (const auto& c : rows.checkpoints) by_id[c.id] = &c;

  // The tip and the chain from the seed to it.
  int64_t tip = rows.checkpoints.back().id;
  if (opts.tip) {
    if (!by_id.count(*opts.tip))
      return make_error(fmt::format("no checkpoint {} in {}", *opts.tip, r.source));
    tip = *opts.tip;
  } else if (auto h = store.head_checkpoint(); h && *h && by_id.count(**h)) {
    tip = **h;
  }
  r.tip = tip;
  std::vector<const CheckpointRecord*> chain;
  for (std::optional<int64_t> id = tip; id && by_id.count(*id);) {
    chain.push_back(by_id[*id]);
    id = by_id[*id]->parent;
  }
  std::reverse(chain.begin(), chain.end());

  const bool blobs = store.has_blobs();
  if (!blobs)
    r.notes.push_back(
        "this store has no blobs folder (only its database was kept): kernel sources, prompts and "
        "replies are not in it, so the report shows no diffs");

  // Attempts grouped by (workflow, parent, transformation); links to checkpoints.
  std::map<int64_t, int64_t> link;  // attempt -> checkpoint
  for (const auto* c : chain) {
    auto ids = store.checkpoint_attempts(c->id);
    if (ids)
      for (int64_t a : *ids) link[a] = c->id;
  }
  std::vector<Group> groups;
  for (const auto& a : rows.attempts) {
    if (!a.parent_checkpoint) continue;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
      return g.workflow == a.workflow_id && g.parent == *a.parent_checkpoint &&
             g.transformation == a.transformation;
    });
    if (it == groups.end()) {
      groups.push_back(Group{a.workflow_id, *a.parent_checkpoint, a.transformation, {}, {}});
      it = std::prev(groups.end());
    }
    it->rows.push_back(&a);
    if (link.count(a.id)) it->checkpoint = link[a.id];
  }
  // A checkpoint made on another branch also links its attempts: find those links too, so that
  // their groups are not taken for failed steps of this history.
  for (auto& g : groups) {
    if (g.checkpoint) continue;
    for (const auto* a : g.rows)
      if (a->pass_index == 0) {
        auto in_other = std::find_if(
            rows.checkpoints.begin(), rows.checkpoints.end(), [&](const CheckpointRecord& c) {
              return c.parent == g.parent && c.transformation == g.transformation &&
                     c.source_blob == a->reply_blob && !a->reply_blob.empty();
            });
        if (in_other != rows.checkpoints.end()) g.checkpoint = in_other->id;
      }
  }
  std::map<int64_t, std::string> workflow_status;
  for (const auto& w : rows.workflows) workflow_status[w.id] = w.status;

  // The live state of a run (status file beside the store, when there is one).
  fs::path status_file = opts.status_file;
  if (status_file.empty() && store.dir().filename() == ".peak")
    status_file = store.dir() / "status.json";
  for (auto it = rows.workflows.rbegin(); it != rows.workflows.rend(); ++it) {
    if (it->status != "running") continue;
    r.live.running = true;
    r.live.workflow = it->id;
    r.live.kind = it->kind;
    break;
  }
  if (r.live.running && !status_file.empty()) {
    if (auto text = read_file(status_file)) {
      json st = parse_object(*text);
      r.live.line = st.value("line", "");
      r.live.status = st.value("status", "");
      r.live.updated_unix = st.value("updated_unix", 0.0);
      int64_t pid = st.value("pid", int64_t{0});
      if (st.value("format", 0) == 1 && pid > 0 && !process_alive(pid)) r.live.process_gone = true;
    }
  }

  // Attempt rows of a group, evaluation rows folded: a placeholder (not_run) followed by its
  // outcome shows once.
  auto attempt_rows = [&](const Group& g, std::vector<AttemptRow>& out, PhaseCosts& costs) {
    std::set<int> tries;
    for (const auto* a : g.rows) {
      if (!a->infrastructure) tries.insert(a->attempt);  // not the transformation's try
      if (a->pass_index > 0) {
        costs.llm_s += finite_or_zero(a->latency_s);
        costs.llm_calls++;
        costs.prompt_tokens += a->prompt_tokens;
        costs.completion_tokens += a->completion_tokens;
      }
      AttemptRow row;
      row.id = a->id;
      row.workflow = a->workflow_id;
      row.attempt = a->attempt;
      row.pass = a->pass_index;
      row.region = a->region;
      row.driver = a->driver;
      row.model = a->model;
      row.producer = a->producer;
      row.prompt_tokens = a->prompt_tokens;
      row.completion_tokens = a->completion_tokens;
      row.latency_s = finite_or_zero(a->latency_s);
      row.disposition = a->disposition;
      row.error = first_lines(a->error);
      row.created_at = a->created_at;
      row.infrastructure = a->infrastructure;
      if (a->pass_index == 0 && a->disposition == "not_run") {
        bool superseded = std::any_of(g.rows.begin(), g.rows.end(), [&](const AttemptRecord* b) {
          return b->id > a->id && b->pass_index == 0 && b->attempt == a->attempt;
        });
        if (superseded) continue;
        if (link.count(a->id) || (g.checkpoint && a->attempt == g.rows.back()->attempt)) {
          row.disposition = "passed";
          row.error = g.checkpoint ? fmt::format("checkpoint {}", *g.checkpoint) : "";
        } else {
          bool running = workflow_status[a->workflow_id] == "running" && !r.live.process_gone;
          row.disposition = running ? "running" : "interrupted";
        }
      }
      out.push_back(row);
    }
    return static_cast<int>(tries.size());
  };

  std::string kernel_name;
  std::string kernel_precision;
  std::string kernel_supports;  // of the newest checkpoint read
  std::set<std::string> peak_versions;
  std::vector<std::pair<double, double>> clocks;
  for (size_t ci = 0; ci < chain.size(); ++ci) {
    const CheckpointRecord& cp = *chain[ci];
    std::string note;
    json s = checkpoint_summary(store, cp, &note);
    StepRow step;
    step.checkpoint = cp.id;
    step.parent = cp.parent;
    step.transformation = cp.transformation.empty() ? "seed" : cp.transformation;
    step.message = cp.message;
    step.branch = cp.branch;
    step.created_at = cp.created_at;
    step.suite = latest_suite(store, cp.id);  // `peak bench`, kept apart from the result
    // kernel.toml of the checkpoint: the kernel's name and source file.
    std::optional<KernelContext> ctx;
    std::string source;
    if (blobs) {
      if (auto toml = store.get_blob(cp.context_blob)) {
        auto parsed = parse_context(*toml, fmt::format("checkpoint {}: kernel.toml", cp.id));
        if (parsed) ctx = std::move(*parsed);
      }
      if (auto src = store.get_blob(cp.source_blob)) source = *src;
    }
    if (ctx) {
      kernel_name = ctx->name;
      kernel_precision = ctx->precision;
      kernel_supports = ctx->supports;
      step.source_file = ctx->source_file;
    }

    // The evaluation behind the step.
    std::set<int64_t> eval_ids;
    const Group* group = nullptr;
    for (const auto& g : groups)
      if (g.checkpoint && *g.checkpoint == cp.id) group = &g;
    if (group)
      for (const auto* a : group->rows)
        if (a->pass_index == 0) eval_ids.insert(a->id);
    std::set<int64_t> linked;
    if (auto ids = store.checkpoint_attempts(cp.id))
      for (int64_t a : *ids) linked.insert(a);
    EvalRows e = eval_rows(rows, linked, cp.id, cp.source_blob);

    if (s.contains("bench") && s["bench"].is_array()) {
      for (const auto& m : s["bench"]) step.bench.push_back(bench_from_summary(m));
    } else if (!e.final_timing.empty()) {
      // No summary with numbers (e.g. its blob is missing): the measurement rows, newest set.
      if (!note.empty()) r.notes.push_back(note);
      std::map<std::string, BenchRow> by_shape;
      std::vector<std::string> order;
      for (const auto* m : e.final_timing) {
        if (!by_shape.count(m->shape)) order.push_back(m->shape);
        BenchRow& b = by_shape[m->shape];
        b.shape = m->shape;
        json dj = parse_object(m->device_json);
        if (m->what == "candidate") {
          b.disposition = m->disposition;
          b.samples_ms = samples_of(m->samples_json);
          b.samples = b.samples_ms.size();
          b.median_ms = finite_or_zero(m->median_ms);
          b.spread = finite_or_zero(m->spread);
          b.gflops = finite_or_zero(m->gflops);
          b.p25_ms = percentile(b.samples_ms, 0.25);
          b.p75_ms = percentile(b.samples_ms, 0.75);
          b.clock_mhz_before = dj.value("clock_mhz_before", 0.0);
          b.clock_mhz_after = dj.value("clock_mhz_after", 0.0);
          if (!s.contains("device")) s["device"] = dj;
          if (!s.contains("best")) s["best"] = {{"config", parse_object(m->config_json)}};
        } else if (m->what.rfind("baseline:", 0) == 0) {
          b.baseline = m->what.substr(9);
          b.baseline_samples_ms = samples_of(m->samples_json);
          b.baseline_median_ms = finite_or_zero(m->median_ms);
          b.baseline_spread = finite_or_zero(m->spread);
          b.baseline_gflops = finite_or_zero(m->gflops);
        }
      }
      for (const auto& shape : order) {
        BenchRow& b = by_shape[shape];
        if (b.baseline_gflops > 0 && b.gflops > 0)
          b.pct_of_baseline = 100.0 * b.gflops / b.baseline_gflops;
        if (!cp.parent) b.speedup_vs_seed = b.speedup_vs_parent = b.gflops > 0 ? 1.0 : 0.0;
        step.bench.push_back(b);
      }
      if (!step.bench.empty()) s["disposition"] = "passed";
    }
    for (auto& b : step.bench) {
      finish_bench(b);
      if (b.clock_mhz_before > 0) clocks.emplace_back(b.clock_mhz_before, b.clock_mhz_after);
      r.provenance.throttled = r.provenance.throttled || b.throttled;
    }
    step.disposition = s.value("disposition", step.bench.empty() ? "not_run" : "passed");
    if (s.contains("best") && s["best"].is_object()) {
      step.best_config =
          s["best"].value("config_text", config_words(s["best"].value("config", json::object())));
      step.resources_raw = s["best"].value("resources", json::object());
      step.resources = describe_resources(step.resources_raw);
      step.instruction_mix = instruction_mix_text(step.resources_raw);
      if (!step.instruction_mix.empty()) step.sass = step.resources_raw["sass"];
    }
    if (s.contains("peak_version")) peak_versions.insert(s.value("peak_version", ""));
    // Facts of the device and toolchain: the first summary that has them.
    Provenance& p = r.provenance;
    if (s.contains("device") && s["device"].is_object() && p.device.empty()) {
      const json& d = s["device"];
      p.device = d.value("name", "");
      p.backend = d.value("backend", "");
      p.driver = d.value("driver", "");
      p.api = d.value("api", "");
      p.arch = d.value("arch", "");
      p.measured_fp32_tflops = d.value("measured_fp32_tflops", 0.0);
    }
    if (s.contains("peak") && s["peak"].is_object() && p.peak_tflops == 0) {
      p.peak_tflops = s["peak"].value("tflops", 0.0);
      p.peak_source = s["peak"].value("source", "");
    }
    if (s.contains("toolchain") && s["toolchain"].is_object())
      for (const auto& [k, v] : s["toolchain"].items())
        p.toolchain[k] = v.is_string() ? v.get<std::string>() : v.dump();

    // The search: every configuration, and the counts per disposition.
    step.configs = config_rows(e, s);
    if (s.contains("configs") && s["configs"].is_object()) {
      const json& c = s["configs"];
      if (c.contains("dispositions") && c["dispositions"].is_object())
        for (const auto& [k, v] : c["dispositions"].items())
          if (v.is_number_integer()) step.config_dispositions[k] = v.get<int>();
      step.space = c.value("space", int64_t{0});
      step.pruned = c.value("rejected_by_constraint", int64_t{0});
      step.sampled = c.value("sampled", false);
    }
    if (step.config_dispositions.empty())
      for (const auto& c : step.configs) step.config_dispositions[c.disposition]++;

    // Attempts and costs.
    if (group) step.attempts = attempt_rows(*group, step.attempt_rows, step.costs);
    step.failed_attempts = std::max(0, step.attempts - (group ? 1 : 0));
    if (s.contains("phases") && s["phases"].is_object()) {
      const json& ph = s["phases"];
      step.costs.compile_s = ph.value("compile_s", 0.0);
      step.costs.validate_s = ph.value("validate_s", 0.0);
      step.costs.tune_s = ph.value("tune_s", 0.0);
      step.costs.bench_s = ph.value("bench_s", 0.0);
      step.costs.recorded = true;
    }
    {
      std::set<int64_t> all_evals = eval_ids;
      all_evals.insert(linked.begin(), linked.end());
      for (const auto& b : rows.builds)
        if ((b.attempt_id && all_evals.count(*b.attempt_id)) ||
            (!b.attempt_id && all_evals.empty() && b.source_hash == cp.source_blob))
          step.costs.compile_cpu_s += finite_or_zero(b.seconds);
    }
    for (const auto* m : e.final_timing)
      step.costs.gpu_s += sum_seconds(samples_of(m->samples_json));
    for (const auto* m : e.screening) step.costs.gpu_s += sum_seconds(samples_of(m->samples_json));

    // The diff against the parent.
    if (!cp.parent) {
      step.diff_note = "the seed: nothing to compare with";
    } else if (!blobs) {
      step.diff_note = "no sources in this store (no blobs folder)";
    } else if (opts.diffs && by_id.count(*cp.parent)) {
      const CheckpointRecord& pc = *by_id[*cp.parent];
      auto ps = store.get_blob(pc.source_blob);
      auto pt = store.get_blob(pc.context_blob);
      auto mt = store.get_blob(cp.context_blob);
      if (ps && pt && mt && !source.empty()) {
        std::string file = step.source_file.empty() ? "kernel" : step.source_file;
        step.diff = unified_diff(*ps, source, fmt::format("#{}/{}", pc.id, file),
                                 fmt::format("#{}/{}", cp.id, file));
        step.diff += unified_diff(*pt, *mt, fmt::format("#{}/kernel.toml", pc.id),
                                  fmt::format("#{}/kernel.toml", cp.id));
        if (step.diff.empty()) step.diff_note = "the same source as its parent";
      } else {
        step.diff_note = "a source blob of this step or its parent cannot be read";
      }
    }
    r.steps.push_back(std::move(step));

    // Steps tried from this checkpoint that made no checkpoint (every attempt failed, or still
    // running), in the order they were tried.
    for (const auto& g : groups) {
      if (g.checkpoint || g.parent != cp.id) continue;
      StepRow f;
      f.parent = cp.id;
      f.transformation = g.transformation;
      f.message = fmt::format("{} (no checkpoint)", g.transformation);
      f.attempts = attempt_rows(g, f.attempt_rows, f.costs);
      f.failed_attempts = f.attempts;
      f.disposition = "not_run";
      for (auto it = f.attempt_rows.rbegin(); it != f.attempt_rows.rend(); ++it)
        if (it->disposition != "passed") {
          f.disposition = it->disposition;
          break;
        }
      f.created_at = g.rows.front()->created_at;
      std::set<int64_t> ids;
      for (const auto* a : g.rows)
        if (a->pass_index == 0) ids.insert(a->id);
      EvalRows fe = eval_rows(rows, ids, -1, "");
      f.configs = config_rows(fe, json::object());
      for (const auto& c : f.configs) f.config_dispositions[c.disposition]++;
      for (const auto& b : fe.builds) f.costs.compile_cpu_s += finite_or_zero(b->seconds);
      for (const auto* m : fe.screening) f.costs.gpu_s += sum_seconds(samples_of(m->samples_json));
      f.diff_note = "no checkpoint: the failed candidates are kept under .peak/failed/";
      if (f.disposition == "running") {
        r.live.transformation = g.transformation;
        r.live.attempt = f.attempt_rows.empty() ? 0 : f.attempt_rows.back().attempt;
        r.live.phase = "evaluation";
        r.live.configs = f.configs;
      } else if (r.live.running && g.workflow == r.live.workflow && !r.live.process_gone &&
                 &g == &groups.back()) {
        // The newest group of the running workflow: its LLM passes are under way.
        r.live.transformation = g.transformation;
        r.live.attempt = f.attempt_rows.empty() ? 0 : f.attempt_rows.back().attempt;
        r.live.phase = "llm";
        f.disposition = "running";
      }
      r.steps.push_back(std::move(f));
    }
  }

  // Failures of every attempt in the store (first lines).
  for (const auto& a : rows.attempts) {
    if (a.disposition == "passed" || a.disposition == "not_run") continue;
    FailureRow f;
    f.transformation = a.transformation;
    f.pass_index = a.pass_index;
    f.attempt = a.attempt;
    f.disposition = a.disposition;
    f.error = first_line(a.error, 160);
    f.infrastructure = a.infrastructure;
    r.failures.push_back(f);
  }

  // Provenance: LLMs, recordings, workflows, clocks, versions.
  Provenance& p = r.provenance;
  for (const auto& a : rows.attempts) {
    if (a.pass_index == 0) continue;
    auto it = std::find_if(p.llm.begin(), p.llm.end(), [&](const LlmUse& u) {
      return u.driver == a.driver && u.model == a.model && u.producer == a.producer;
    });
    if (it == p.llm.end()) {
      p.llm.push_back(LlmUse{a.driver, a.model, a.producer, 0});
      it = std::prev(p.llm.end());
    }
    it->calls++;
  }
  for (const auto& w : rows.workflows) {
    json args = parse_object(w.args_json);
    std::string llm = args.value("llm", "");
    for (const char* prefix : {"replay:", "record:"})
      if (llm.rfind(prefix, 0) == 0) {
        std::string dir = llm.substr(std::string(prefix).size());
        if (std::find(p.recordings.begin(), p.recordings.end(), dir) == p.recordings.end())
          p.recordings.push_back(dir);
      }
    for (const char* key : {"record", "record_dir"})
      if (args.contains(key) && args[key].is_string() && !args[key].get<std::string>().empty())
        p.recordings.push_back(args[key].get<std::string>());
    p.workflows.push_back({w.id, w.kind, w.status, w.started_at, w.finished_at, w.args_json});
    if (kernel_name.empty()) {
      std::string seq = parse_object(w.state_json).value("sequence", "");
      if (!seq.empty()) kernel_name = seq;
    }
  }
  for (const auto& [before, after] : clocks)
    for (double c : {before, after}) {
      if (c <= 0) continue;
      p.clock_mhz_min = p.clock_mhz_min == 0 ? c : std::min(p.clock_mhz_min, c);
      p.clock_mhz_max = std::max(p.clock_mhz_max, c);
    }
  for (const auto& v : peak_versions) p.peak_versions += (p.peak_versions.empty() ? "" : ", ") + v;
  p.report_version = PEAK_VERSION;
  p.store_schema = kStoreSchemaVersion;
  if (p.toolchain.empty())
    for (const auto& b : rows.builds)
      if (!b.toolchain.empty()) {
        p.toolchain["compiler"] = b.toolchain;
        break;
      }
  // The % of peak of summaries rebuilt from rows.
  if (p.peak_tflops > 0)
    for (auto& st : r.steps)
      for (auto& b : st.bench)
        if (b.pct_of_peak == 0 && b.gflops > 0)
          b.pct_of_peak = 100.0 * b.gflops / (p.peak_tflops * 1e3);

  r.kernel = !opts.title.empty()    ? opts.title
             : !kernel_name.empty() ? kernel_name
                                    : fs::path(r.source).stem().string();
  r.precision = kernel_precision;

  // What the reader should know.
  bool any_numbers = std::any_of(r.steps.begin(), r.steps.end(),
                                 [](const StepRow& s) { return !s.bench.empty(); });
  if (!any_numbers)
    r.notes.push_back(
        "no checkpoint has been evaluated yet: `peak tune`, `peak apply` or `peak run` measures "
        "them");
  if (!kernel_supports.empty())
    r.notes.push_back(fmt::format(
        "the kernel supports the shapes with {} (its transformations narrowed the problem's "
        "shapes); it is validated and timed on those only",
        kernel_supports));
  if (r.live.running) {
    if (r.live.process_gone)
      r.notes.push_back(fmt::format(
          "workflow {} ({}) is marked running but its process has ended: it was interrupted; "
          "`peak run SEQUENCE --resume` continues it. This report shows what it recorded",
          r.live.workflow, r.live.kind));
    else
      r.notes.push_back(fmt::format(
          "workflow {} ({}) is still running: this report shows what it has recorded so far",
          r.live.workflow, r.live.kind));
  }
  return r;
}

Status add_cross_reference(Report& r, const Report& other) {
  std::set<std::string> shapes;
  for (const auto& s : r.steps)
    for (const auto& b : s.bench) shapes.insert(b.shape);
  const std::string& device = r.provenance.device;
  if (device.empty() || shapes.empty())
    return Status::error(fmt::format("{} has no timed bench shape to compare", r.source),
                         ErrorKind::input);
  if (other.provenance.device != device)
    return Status::error(
        fmt::format("{} was measured on {}, not on {}: a cross-reference must come from the same "
                    "GPU model",
                    other.source,
                    other.provenance.device.empty() ? "no device" : other.provenance.device,
                    device),
        ErrorKind::input);
  if (!r.precision.empty() && !other.precision.empty() && other.precision != r.precision)
    return Status::error(fmt::format("{} is a {} kernel ({}), this one is {}: a cross-reference "
                                     "must be of the same precision",
                                     other.source, other.precision, other.kernel, r.precision),
                         ErrorKind::input);
  // The newest checkpoint first: its vendor rate at each shape.
  std::vector<const StepRow*> steps;
  for (const auto& s : other.steps) steps.push_back(&s);
  std::stable_sort(steps.begin(), steps.end(), [](const StepRow* a, const StepRow* b) {
    return a->created_at > b->created_at;
  });
  std::vector<CrossReference> found;
  for (const auto& shape : shapes) {
    for (const StepRow* s : steps) {
      auto it = std::find_if(s->bench.begin(), s->bench.end(), [&](const BenchRow& b) {
        return b.shape == shape && !b.baseline.empty() && b.baseline_gflops > 0;
      });
      if (it == s->bench.end()) continue;
      CrossReference c;
      c.source = other.source;
      c.kernel = other.kernel;
      c.baseline = it->baseline;
      c.shape = shape;
      c.gflops = it->baseline_gflops;
      c.checkpoint = s->checkpoint;
      c.measured_at = s->created_at;
      found.push_back(std::move(c));
      break;
    }
  }
  if (found.empty())
    return Status::error(
        fmt::format("{} holds no vendor-library measurement at {}", other.source,
                    join(std::vector<std::string>(shapes.begin(), shapes.end()), ", ")),
        ErrorKind::input);
  r.cross_reference = std::move(found);
  return Status::ok();
}

}  // namespace peak
