// Building the report of a store: one pass over its rows, then the steps along the history.
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include <fmt/format.h>

#include "context/context.h"
#include "peak/version.h"
#include "report/build_rows.h"
#include "report/report.h"
#include "store/archive.h"
#include "util/diff.h"
#include "util/fs.h"

namespace peak {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace report_build {
namespace {

bool process_alive(int64_t pid) {
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

struct Group {  // the attempts of one transformation from one parent in one workflow
  int64_t workflow = 0;
  int64_t parent = 0;
  std::string transformation;
  std::vector<const AttemptRecord*> rows;
  std::optional<int64_t> checkpoint;  // the checkpoint it made, if any
};

// The phases of building one report, over the store's rows read once: the chain of checkpoints
// from the seed to the tip, the attempts grouped by step, then one step row per checkpoint (and
// one per step tried from it that made none), the failures, the provenance and the notes.
class ReportBuilder {
 public:
  ReportBuilder(const Store& store, const ReportOptions& opts, Report& r, Rows rows)
      : store_(store), opts_(opts), r_(r), rows_(std::move(rows)) {
    for (const auto& c : rows_.checkpoints) by_id_[c.id] = &c;
  }
  ReportBuilder(const ReportBuilder&) = delete;
  ReportBuilder& operator=(const ReportBuilder&) = delete;

  Status pick_chain();
  void group_attempts();
  void read_live_state();
  void add_steps();
  void add_failures();
  void add_provenance();
  void name_kernel();
  void add_copy_note();
  void add_notes();

 private:
  int attempt_rows(const Group& g, std::vector<AttemptRow>& out, PhaseCosts& costs);
  void read_kernel(const CheckpointRecord& cp, StepRow& step, std::string& source);
  void read_bench(const CheckpointRecord& cp, const EvalRows& e, const std::string& note,
                  EvalSummary& s, StepRow& step);
  void read_facts(const EvalSummary& s);
  static void read_search(const EvalRows& e, const EvalSummary& s, StepRow& step);
  void read_costs(const CheckpointRecord& cp, const Group* group, const std::set<int64_t>& linked,
                  const EvalRows& e, const EvalSummary& s, StepRow& step);
  void diff_step(const CheckpointRecord& cp, const std::string& source, StepRow& step);
  void add_step(const CheckpointRecord& cp);
  void add_unfinished_steps(const CheckpointRecord& cp);
  void add_recordings(const WorkflowRecord& w);

  const Store& store_;
  const ReportOptions& opts_;
  Report& r_;
  Rows rows_;
  std::map<int64_t, const CheckpointRecord*> by_id_;
  std::vector<const CheckpointRecord*> chain_;  // from the seed to the tip
  bool blobs_ = false;
  std::map<int64_t, int64_t> link_;  // attempt -> checkpoint
  std::vector<Group> groups_;
  std::map<int64_t, std::string> workflow_status_;
  std::string kernel_name_;
  std::string kernel_precision_;
  std::string kernel_supports_;  // of the newest checkpoint read
  std::set<std::string> peak_versions_;
  std::vector<std::pair<double, double>> clocks_;
};

// The tip and the chain from the seed to it.
Status ReportBuilder::pick_chain() {
  int64_t tip = rows_.checkpoints.back().id;
  if (opts_.tip) {
    if (!by_id_.count(*opts_.tip))
      return make_error(fmt::format("no checkpoint {} in {}", *opts_.tip, r_.source));
    tip = *opts_.tip;
  } else if (auto h = store_.head_checkpoint(); h && *h && by_id_.count(**h)) {
    tip = **h;
  }
  r_.tip = tip;
  for (std::optional<int64_t> id = tip; id && by_id_.count(*id);) {
    chain_.push_back(by_id_[*id]);
    id = by_id_[*id]->parent;
  }
  std::reverse(chain_.begin(), chain_.end());

  blobs_ = store_.has_blobs();
  if (!blobs_)
    r_.notes.push_back(
        "this store has no blobs folder (only its database was kept): kernel sources, prompts and "
        "replies are not in it, so the report shows no diffs");
  return Status::ok();
}

// Attempts grouped by (workflow, parent, transformation); links to checkpoints.
void ReportBuilder::group_attempts() {
  for (const auto* c : chain_) {
    auto ids = store_.checkpoint_attempts(c->id);
    if (ids)
      for (int64_t a : *ids) link_[a] = c->id;
  }
  for (const auto& a : rows_.attempts) {
    if (!a.parent_checkpoint) continue;
    auto it = std::find_if(groups_.begin(), groups_.end(), [&](const Group& g) {
      return g.workflow == a.workflow_id && g.parent == *a.parent_checkpoint &&
             g.transformation == a.transformation;
    });
    if (it == groups_.end()) {
      groups_.push_back(Group{a.workflow_id, *a.parent_checkpoint, a.transformation, {}, {}});
      it = std::prev(groups_.end());
    }
    it->rows.push_back(&a);
    if (link_.count(a.id)) it->checkpoint = link_[a.id];
  }
  // A checkpoint made on another branch also links its attempts: find those links too, so that
  // their groups are not taken for failed steps of this history.
  for (auto& g : groups_) {
    if (g.checkpoint) continue;
    for (const auto* a : g.rows)
      if (a->pass_index == 0) {
        auto in_other = std::find_if(
            rows_.checkpoints.begin(), rows_.checkpoints.end(), [&](const CheckpointRecord& c) {
              return c.parent == g.parent && c.transformation == g.transformation &&
                     c.source_blob == a->reply_blob && !a->reply_blob.empty();
            });
        if (in_other != rows_.checkpoints.end()) g.checkpoint = in_other->id;
      }
  }
  for (const auto& w : rows_.workflows) workflow_status_[w.id] = w.status;
}

// The live state of a run (status file beside the store, when there is one).
void ReportBuilder::read_live_state() {
  fs::path status_file = opts_.status_file;
  if (status_file.empty() && store_.dir().filename() == ".peak")
    status_file = store_.dir() / "status.json";
  for (auto it = rows_.workflows.rbegin(); it != rows_.workflows.rend(); ++it) {
    if (it->status != "running") continue;
    r_.live.running = true;
    r_.live.workflow = it->id;
    r_.live.kind = it->kind;
    break;
  }
  if (r_.live.running && !status_file.empty()) {
    if (auto text = read_file(status_file)) {
      json st = parse_object(*text);
      r_.live.line = st.value("line", "");
      r_.live.status = st.value("status", "");
      r_.live.updated_unix = st.value("updated_unix", 0.0);
      int64_t pid = st.value("pid", int64_t{0});
      if (st.value("format", 0) == 1 && pid > 0 && !process_alive(pid)) r_.live.process_gone = true;
    }
  }
}

// Attempt rows of a group, evaluation rows folded: a placeholder (not_run) followed by its
// outcome shows once. Returns the number of the transformation's tries.
int ReportBuilder::attempt_rows(const Group& g, std::vector<AttemptRow>& out, PhaseCosts& costs) {
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
      if (link_.count(a->id) || (g.checkpoint && a->attempt == g.rows.back()->attempt)) {
        row.disposition = "passed";
        row.error = g.checkpoint ? fmt::format("checkpoint {}", *g.checkpoint) : "";
      } else {
        bool running = workflow_status_[a->workflow_id] == "running" && !r_.live.process_gone;
        row.disposition = running ? "running" : "interrupted";
      }
    }
    out.push_back(row);
  }
  return static_cast<int>(tries.size());
}

void ReportBuilder::add_steps() {
  for (const CheckpointRecord* cp : chain_) {
    add_step(*cp);
    add_unfinished_steps(*cp);
  }
}

// kernel.toml of the checkpoint: the kernel's name and source file; and its source.
void ReportBuilder::read_kernel(const CheckpointRecord& cp, StepRow& step, std::string& source) {
  std::optional<KernelContext> ctx;
  if (blobs_) {
    if (auto toml = store_.get_blob(cp.context_blob)) {
      auto parsed = parse_context(*toml, fmt::format("checkpoint {}: kernel.toml", cp.id));
      if (parsed) ctx = std::move(*parsed);
    }
    if (auto src = store_.get_blob(cp.source_blob)) source = *src;
  }
  if (ctx) {
    kernel_name_ = ctx->name;
    kernel_precision_ = ctx->precision;
    kernel_supports_ = ctx->supports;
    step.source_file = ctx->source_file;
  }
}

// The step's bench shapes and best configuration: from its summary, else from its rows.
void ReportBuilder::read_bench(const CheckpointRecord& cp, const EvalRows& e,
                               const std::string& note, EvalSummary& s, StepRow& step) {
  if (s.bench) {
    for (const auto& m : *s.bench) step.bench.push_back(bench_from_summary(m));
  } else if (!e.final_timing.empty()) {
    if (!note.empty()) r_.notes.push_back(note);
    step.bench = bench_from_measurements(e, !cp.parent, s);
    if (!step.bench.empty()) s.disposition = "passed";
  }
  for (auto& b : step.bench) {
    finish_bench(b);
    if (b.clock_mhz_before > 0) clocks_.emplace_back(b.clock_mhz_before, b.clock_mhz_after);
    r_.provenance.throttled = r_.provenance.throttled || b.throttled;
  }
  step.disposition = s.disposition.value_or(step.bench.empty() ? "not_run" : "passed");
  if (s.best) {
    step.best_config =
        s.best->config_text.value_or(config_words(s.best->config.value_or(json::object())));
    step.resources_raw = s.best->resources.value_or(json::object());
    step.resources = describe_resources(step.resources_raw);
    step.instruction_mix = instruction_mix_text(step.resources_raw);
    if (!step.instruction_mix.empty()) step.sass = step.resources_raw["sass"];
  }
}

// Facts of the device and toolchain: the first summary that has them.
void ReportBuilder::read_facts(const EvalSummary& s) {
  if (s.peak_version) peak_versions_.insert(*s.peak_version);
  Provenance& p = r_.provenance;
  if (s.device && p.device.empty()) {
    const SummaryDevice& d = *s.device;
    p.device = d.name.value_or("");
    p.backend = d.backend.value_or("");
    p.driver = d.driver.value_or("");
    p.api = d.api.value_or("");
    p.arch = d.arch.value_or("");
    p.measured_fp32_tflops = d.measured_fp32_tflops.value_or(0.0);
  }
  if (s.peak && p.peak_tflops == 0) {
    p.peak_tflops = s.peak->tflops.value_or(0.0);
    p.peak_source = s.peak->source.value_or("");
  }
  if (s.peak && p.memory_gbs == 0) p.memory_gbs = s.peak->documented_memory_gbs.value_or(0.0);
  if (s.toolchain)
    for (const auto& [k, v] : *s.toolchain) p.toolchain[k] = v;
}

// The search: every configuration, and the counts per disposition.
void ReportBuilder::read_search(const EvalRows& e, const EvalSummary& s, StepRow& step) {
  step.configs = config_rows(e, s);
  if (s.configs) {
    const SummaryConfigs& c = *s.configs;
    if (c.dispositions)
      for (const auto& [k, v] : *c.dispositions) step.config_dispositions[k] = static_cast<int>(v);
    step.space = c.space.value_or(0);
    step.pruned = c.rejected_by_constraint.value_or(0);
    step.sampled = c.sampled.value_or(false);
  }
  if (step.config_dispositions.empty())
    for (const auto& c : step.configs) step.config_dispositions[c.disposition]++;
}

// Attempts and costs.
void ReportBuilder::read_costs(const CheckpointRecord& cp, const Group* group,
                               const std::set<int64_t>& linked, const EvalRows& e,
                               const EvalSummary& s, StepRow& step) {
  std::set<int64_t> all_evals;  // the evaluation behind the step, and the linked attempts
  if (group)
    for (const auto* a : group->rows)
      if (a->pass_index == 0) all_evals.insert(a->id);
  if (group) step.attempts = attempt_rows(*group, step.attempt_rows, step.costs);
  step.failed_attempts = std::max(0, step.attempts - (group ? 1 : 0));
  if (s.phases) {
    const SummaryPhases& ph = *s.phases;
    step.costs.compile_s = ph.compile_s.value_or(0.0);
    step.costs.validate_s = ph.validate_s.value_or(0.0);
    step.costs.tune_s = ph.tune_s.value_or(0.0);
    step.costs.bench_s = ph.bench_s.value_or(0.0);
    step.costs.recorded = true;
  }
  all_evals.insert(linked.begin(), linked.end());
  for (const auto& b : rows_.builds)
    if ((b.attempt_id && all_evals.count(*b.attempt_id)) ||
        (!b.attempt_id && all_evals.empty() && b.source_hash == cp.source_blob))
      step.costs.compile_cpu_s += finite_or_zero(b.seconds);
  for (const auto* m : e.final_timing) step.costs.gpu_s += sum_seconds(samples_of(m->samples_json));
  for (const auto* m : e.screening) step.costs.gpu_s += sum_seconds(samples_of(m->samples_json));
}

// The diff against the parent.
void ReportBuilder::diff_step(const CheckpointRecord& cp, const std::string& source,
                              StepRow& step) {
  if (!cp.parent) {
    step.diff_note = "the seed: nothing to compare with";
  } else if (!blobs_) {
    step.diff_note = "no sources in this store (no blobs folder)";
  } else if (opts_.diffs && by_id_.count(*cp.parent)) {
    const CheckpointRecord& pc = *by_id_[*cp.parent];
    auto ps = store_.get_blob(pc.source_blob);
    auto pt = store_.get_blob(pc.context_blob);
    auto mt = store_.get_blob(cp.context_blob);
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
}

// The step row of one checkpoint of the chain.
void ReportBuilder::add_step(const CheckpointRecord& cp) {
  std::string note;
  EvalSummary s = checkpoint_result_summary(store_, cp, &note);
  StepRow step;
  step.checkpoint = cp.id;
  step.parent = cp.parent;
  step.transformation = cp.transformation.empty() ? "seed" : cp.transformation;
  step.message = cp.message;
  step.branch = cp.branch;
  step.created_at = cp.created_at;
  step.suite = latest_suite(store_, cp.id);  // `peak bench`, kept apart from the result
  std::string source;
  read_kernel(cp, step, source);

  // The evaluation behind the step.
  const Group* group = nullptr;
  for (const auto& g : groups_)
    if (g.checkpoint && *g.checkpoint == cp.id) group = &g;
  std::set<int64_t> linked;
  if (auto ids = store_.checkpoint_attempts(cp.id))
    for (int64_t a : *ids) linked.insert(a);
  EvalRows e = eval_rows(rows_, linked, cp.id, cp.source_blob);

  read_bench(cp, e, note, s, step);
  read_facts(s);
  read_search(e, s, step);
  read_costs(cp, group, linked, e, s, step);
  diff_step(cp, source, step);
  r_.steps.push_back(std::move(step));
}

// Steps tried from this checkpoint that made no checkpoint (every attempt failed, or still
// running), in the order they were tried.
void ReportBuilder::add_unfinished_steps(const CheckpointRecord& cp) {
  for (const auto& g : groups_) {
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
    EvalRows fe = eval_rows(rows_, ids, -1, "");
    f.configs = config_rows(fe, EvalSummary{});
    for (const auto& c : f.configs) f.config_dispositions[c.disposition]++;
    for (const auto& b : fe.builds) f.costs.compile_cpu_s += finite_or_zero(b->seconds);
    for (const auto* m : fe.screening) f.costs.gpu_s += sum_seconds(samples_of(m->samples_json));
    f.diff_note = "no checkpoint: the failed candidates are kept under .peak/failed/";
    if (f.disposition == "running") {
      r_.live.transformation = g.transformation;
      r_.live.attempt = f.attempt_rows.empty() ? 0 : f.attempt_rows.back().attempt;
      r_.live.phase = "evaluation";
      r_.live.configs = f.configs;
    } else if (r_.live.running && g.workflow == r_.live.workflow && !r_.live.process_gone &&
               &g == &groups_.back()) {
      // The newest group of the running workflow: its LLM passes are under way.
      r_.live.transformation = g.transformation;
      r_.live.attempt = f.attempt_rows.empty() ? 0 : f.attempt_rows.back().attempt;
      r_.live.phase = "llm";
      f.disposition = "running";
    }
    r_.steps.push_back(std::move(f));
  }
}

// Failures of every attempt in the store (first lines).
void ReportBuilder::add_failures() {
  for (const auto& a : rows_.attempts) {
    if (a.disposition == "passed" || a.disposition == "not_run") continue;
    FailureRow f;
    f.transformation = a.transformation;
    f.pass_index = a.pass_index;
    f.attempt = a.attempt;
    f.disposition = a.disposition;
    f.error = first_line(a.error, 160);
    f.infrastructure = a.infrastructure;
    r_.failures.push_back(f);
  }
}

// The recordings a workflow replayed or recorded (its arguments).
void ReportBuilder::add_recordings(const WorkflowRecord& w) {
  Provenance& p = r_.provenance;
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
}

// Provenance: LLMs, recordings, workflows, clocks, versions.
void ReportBuilder::add_provenance() {
  Provenance& p = r_.provenance;
  for (const auto& a : rows_.attempts) {
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
  for (const auto& w : rows_.workflows) {
    add_recordings(w);
    p.workflows.push_back({w.id, w.kind, w.status, w.started_at, w.finished_at, w.args_json});
    if (kernel_name_.empty()) {
      std::string seq = parse_object(w.state_json).value("sequence", "");
      if (!seq.empty()) kernel_name_ = seq;
    }
  }
  for (const auto& [before, after] : clocks_)
    for (double c : {before, after}) {
      if (c <= 0) continue;
      p.clock_mhz_min = p.clock_mhz_min == 0 ? c : std::min(p.clock_mhz_min, c);
      p.clock_mhz_max = std::max(p.clock_mhz_max, c);
    }
  for (const auto& v : peak_versions_) p.peak_versions += (p.peak_versions.empty() ? "" : ", ") + v;
  p.report_version = PEAK_VERSION;
  p.store_schema = kStoreSchemaVersion;
  if (p.toolchain.empty())
    for (const auto& b : rows_.builds)
      if (!b.toolchain.empty()) {
        p.toolchain["compiler"] = b.toolchain;
        break;
      }
  // The % of peak of summaries rebuilt from rows.
  if (p.peak_tflops > 0)
    for (auto& st : r_.steps)
      for (auto& b : st.bench)
        if (b.pct_of_peak == 0 && b.gflops > 0)
          b.pct_of_peak = 100.0 * b.gflops / (p.peak_tflops * 1e3);
}

void ReportBuilder::name_kernel() {
  r_.kernel = !opts_.title.empty()    ? opts_.title
              : !kernel_name_.empty() ? kernel_name_
                                      : fs::path(r_.source).stem().string();
  r_.precision = kernel_precision_;
}

// How the memory-bound headline's % of copy was measured, or that it was not.
void ReportBuilder::add_copy_note() {
  std::set<std::string> methods;
  for (const auto& st : r_.steps)
    for (const auto& b : st.bench)
      if (!b.copy_method.empty()) methods.insert(b.copy_method);
  if (methods.empty()) {
    r_.notes.push_back(
        "% of copy: not measured (the runner timed no same-traffic copy beside the kernel)");
    return;
  }
  std::string list;
  for (const auto& m : methods) list += (list.empty() ? "" : ", ") + m;
  r_.notes.push_back(fmt::format(
      "% of copy: the copy's median time over the kernel's, a device-to-device copy of the same "
      "traffic ({}) timed in the same run; a row without it had none timed",
      list));
}

// What the reader should know.
void ReportBuilder::add_notes() {
  bool any_numbers = std::any_of(r_.steps.begin(), r_.steps.end(),
                                 [](const StepRow& s) { return !s.bench.empty(); });
  if (!any_numbers)
    r_.notes.push_back(
        "no checkpoint has been evaluated yet: `peak tune`, `peak apply` or `peak run` measures "
        "them");
  if (!kernel_supports_.empty())
    r_.notes.push_back(fmt::format(
        "the kernel supports the shapes with {} (its transformations narrowed the problem's "
        "shapes); it is validated and timed on those only",
        kernel_supports_));
  if (bytes_headlined(r_)) add_copy_note();
  if (r_.live.running) {
    if (r_.live.process_gone)
      r_.notes.push_back(fmt::format(
          "workflow {} ({}) is marked running but its process has ended: it was interrupted; "
          "`peak run SEQUENCE --resume` continues it. This report shows what it recorded",
          r_.live.workflow, r_.live.kind));
    else
      r_.notes.push_back(fmt::format(
          "workflow {} ({}) is still running: this report shows what it has recorded so far",
          r_.live.workflow, r_.live.kind));
  }
}

}  // namespace
}  // namespace report_build

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

bool bytes_headlined(const Report& r) {
  for (const auto& s : r.steps)
    for (const auto& b : s.bench)
      if (b.bytes_headline) return true;
  return false;
}

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

Result<std::unique_ptr<Store>> open_store_for_reading(const fs::path& where) {
  std::error_code ec;
  const fs::path path = store_or_archive(where);
  if (is_store_archive(path) && fs::is_regular_file(path, ec)) {
    auto dir = unpack_store_archive(path);
    if (!dir) return Error{dir.error()};
    return Store::open_read_only(*dir);
  }
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
      "folder, a peak.db file or a store archive: store.tar.xz, *-store.tar.xz, *.db.xz)",
      path.string()));
}

Result<Report> build_report(const Store& store, const ReportOptions& opts) {
  Report r;
  r.source = store.dir().string();
  auto rows = report_build::read_rows(store);
  if (!rows) return Error{rows.error()};
  if (rows->checkpoints.empty())
    return make_error(fmt::format(
        "the store {} holds no checkpoint yet (`peak init` records the seed); nothing to report",
        r.source));
  report_build::ReportBuilder b(store, opts, r, std::move(*rows));
  if (Status st = b.pick_chain(); !st.is_ok()) return st;
  b.group_attempts();
  b.read_live_state();
  b.add_steps();
  b.add_failures();
  b.add_provenance();
  b.name_kernel();
  b.add_notes();
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
