// Applying transformations and sequences, manual commits, and a checkpoint's results.
#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "engine/library.h"
#include "engine/step.h"
#include "engine/workspace.h"
#include "transform/prompt.h"
#include "transform/reply.h"
#include "tune/strategy.h"
#include "util/fault.h"
#include "util/fs.h"

namespace peak {

namespace {

// Median times of the bench shapes of a summary, by shape text.
std::map<std::string, double> bench_medians(const EvalSummary& summary) {
  std::map<std::string, double> out;
  if (!summary.bench) return out;
  for (const auto& m : *summary.bench)
    if (m.passed()) out[m.shape.value_or("")] = m.median_ms.value_or(0.0);
  return out;
}

void add_speedups(EvalSummary& summary, const json& parent, const json& seed) {
  auto mine = bench_medians(summary), p = bench_medians(summary_or_empty(parent)),
       s = bench_medians(summary_or_empty(seed));
  if (!summary.bench) return;
  for (auto& m : *summary.bench) {
    std::string shape = m.shape.value_or("");
    if (!mine.count(shape)) continue;
    if (p.count(shape) && mine[shape] > 0) m.speedup_vs_parent = p[shape] / mine[shape];
    if (s.count(shape) && mine[shape] > 0) m.speedup_vs_seed = s[shape] / mine[shape];
  }
}

void add_speedups(json& summary_json, const json& parent, const json& seed) {
  EvalSummary summary = summary_or_empty(summary_json);
  add_speedups(summary, parent, seed);
  summary_json = to_json(summary);
}

}  // namespace

namespace detail {
std::vector<Config> top_configs(const json& summary_json, const KernelContext& ctx) {
  std::vector<Config> out;
  EvalSummary summary = summary_or_empty(summary_json);
  if (!summary.top) return out;
  for (const auto& t : *summary.top) {
    const json config = t.config.value_or(json::object());
    Config c;
    for (const auto& p : ctx.tuning) {
      if (config.contains(p.name))
        c[p.name] = config[p.name].get<int64_t>();
      else
        c[p.name] = p.default_value;
    }
    out.push_back(c);
  }
  return out;
}
}  // namespace detail
using detail::top_configs;

std::vector<Config> carried_configs(const std::vector<Config>& top,
                                    const std::vector<TuningParam>& fresh, size_t limit) {
  std::vector<Config> combos = {Config{}};
  for (const auto& p : fresh) {
    std::vector<Config> next;
    for (const auto& c : combos)
      for (int64_t v : p.values) {
        Config d = c;
        d[p.name] = v;
        next.push_back(std::move(d));
      }
    combos = std::move(next);
  }
  std::vector<Config> out;
  for (const auto& t : top)
    for (const auto& c : combos) {
      if (out.size() >= limit) return out;
      Config d = t;
      for (const auto& [k, v] : c) d[k] = v;
      if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(std::move(d));
    }
  return out;
}

namespace {

json parse_object(const std::string& text) {
  json j = json::parse(text.empty() ? "{}" : text, nullptr, false);
  return j.is_object() ? j : json::object();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Results: every evaluation of a checkpoint is kept; one of them is its result.

void Workspace::record_evaluation(int64_t checkpoint, std::optional<int64_t> workflow,
                                  const std::string& kind, const EvalOptions& opts,
                                  const json& summary) {
  EvaluationRecord e;
  e.checkpoint_id = checkpoint;
  e.workflow_id = workflow;
  e.kind = kind;
  e.options_json = eval_options_json(opts).dump();
  e.standard = opts.standard;
  fill_from_summary(summary_or_empty(summary), e);
  auto blob = store_->put_blob(summary.dump());
  if (!blob) return;
  e.summary_blob = *blob;
  (void)store_->add_evaluation(e);
}

// One rule for log, show and report (report/build.cpp reads the result the same way).
json Workspace::summary(const CheckpointRecord& c) const { return to_json(result_summary(c)); }

EvalSummary Workspace::result_summary(const CheckpointRecord& c) const {
  return checkpoint_result_summary(*store_, c);
}

std::vector<EvaluationEntry> Workspace::evaluations(int64_t id) const {
  std::vector<EvaluationEntry> out;
  auto ev = store_->evaluations(id);
  if (!ev) return out;
  auto result = result_evaluation(*ev);
  for (size_t i = 0; i < ev->size(); ++i) {
    EvaluationEntry e;
    e.record = (*ev)[i];
    if (auto blob = store_->get_blob(e.record.summary_blob)) e.summary = parse_object(*blob);
    e.is_result = result && *result == i;
    out.push_back(std::move(e));
  }
  return out;
}

Result<Evaluation> Workspace::evaluate_checkpoint(int64_t id, const EvalOptions& opts_in,
                                                  bool force, const std::string& kind) {
  auto c = store_->checkpoint(id);
  if (!c) return c.status();
  auto files = checkpoint_files(id);
  if (!files && (force || !opts_in.tuning_overrides.empty())) return files.status();
  // The checkpoint asked for takes only overrides of its own parameters; a parent or the seed,
  // evaluated for comparison, leaves out those of parameters a later step introduced.
  EvalOptions opts = opts_in;
  const std::set<std::string> params = files ? tuning_names(files->first) : std::set<std::string>{};
  if (force) {
    if (auto s =
            check_tuning_overrides(opts.tuning_overrides, params, fmt::format("checkpoint {}", id));
        !s)
      return s;
  } else {
    std::erase_if(opts.tuning_overrides, [&](const auto& o) { return !params.count(o.first); });
  }
  if (!force)
    if (auto recorded = recorded_result(*c, opts)) return *recorded;
  if (auto s = lock(); !s) return s;
  if (!files) return files.status();
  Evaluation ev = evaluate(files->first, files->second, opts, std::nullopt, id);
  if (c->parent) {
    // Compared with the parent as it was measured: a parent never timed (a compile-only replay)
    // is not evaluated only for a speedup, which would run a tuning search per ancestor.
    auto parent = store_->checkpoint(*c->parent);
    auto ps = parent ? recorded_result(*parent, opts) : std::nullopt;
    if (ps) add_speedups(ev.summary, ps->summary, seed_summary(opts));
  } else {
    add_speedups(ev.summary, ev.summary, ev.summary);
  }
  if (opts.cancelled && opts.cancelled()) return ev;  // a partial evaluation is not kept
  record_evaluation(id, std::nullopt, kind, opts, ev.summary);
  return ev;
}

Result<DeviceFacts> read_device_facts(const fs::path& path) {
  auto text = read_file(path);
  if (!text) return make_error(text.error(), ErrorKind::input);
  json j = json::parse(*text, nullptr, false);
  if (j.is_object() && j.contains("device")) j = j["device"];
  if (!j.is_object() || !j.contains("name"))
    return make_error(fmt::format("{} holds no device facts (a JSON object with \"name\", "
                                  "\"subgroup_size\", ... as a runner's probe prints)",
                                  path.string()),
                      ErrorKind::input);
  return DeviceFacts::from_json(j);
}

json Workspace::seed_summary(const EvalOptions& opts) {
  auto seed = store_->find_tag("seed");
  if (!seed || !*seed) return json::object();
  auto c = store_->checkpoint(**seed);
  auto ss = c ? recorded_result(*c, opts) : std::nullopt;
  return ss ? ss->summary : json::object();
}

std::optional<Evaluation> Workspace::recorded_result(const CheckpointRecord& c,
                                                     const EvalOptions& opts) const {
  EvalSummary s = result_summary(c);
  if (!s.bench && !(opts.compile_only && s.compile_only.value_or(false))) return std::nullopt;
  Evaluation ev;
  ev.disposition =
      disposition_from_string(s.disposition.value_or("passed")).value_or(Disposition::passed);
  ev.message = s.message.value_or("");
  ev.summary = to_json(s);
  return ev;
}

std::vector<std::pair<CheckpointRecord, json>> Workspace::history(int64_t tip) const {
  std::vector<std::pair<CheckpointRecord, json>> chain;
  std::optional<int64_t> id = tip;
  while (id) {
    auto c = store_->checkpoint(*id);
    if (!c) break;
    chain.emplace_back(*c, summary(*c));
    id = c->parent;
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

Result<Report> Workspace::report(int64_t tip, const std::string& title) const {
  ReportOptions o;
  o.tip = tip;
  o.title = title;
  auto r = build_report(*store_, o);
  if (r) r->source = root_.string();
  return r;
}

Status Workspace::check_overrides(const std::vector<Transformation>& steps,
                                  const std::map<std::string, std::vector<int64_t>>& overrides) {
  if (overrides.empty()) return Status::ok();
  auto h = head();
  if (!h) return h.status();
  auto files = checkpoint_files(h->id);
  if (!files) return files.status();
  std::set<std::string> params = tuning_names(files->first);
  std::vector<std::string> names = {fmt::format("checkpoint {}", h->id)};
  for (const auto& t : steps) {
    for (const auto& p : t.tuning) params.insert(p.name);
    names.push_back(t.name);
  }
  return check_tuning_overrides(overrides, params, join(names, " or "));
}

namespace {

// How to go on after a transformation used up its attempts.
std::string how_to_go_on(const std::string& rerun, int attempts) {
  return fmt::format(
      "To go on: `{} --attempts {}` tries {} more time(s) (the next prompt says what failed), "
      "another model may do better (--llm), or edit the working files by hand and `peak "
      "commit -m MESSAGE`",
      rerun, attempts + 3, 3);
}

std::string state_text(const json& j) { return j.dump(); }

// Where a workflow stands, as the store records it (WorkflowRecord::status).
enum class WorkflowStatus { running, waiting, interrupted, failed, passed };

const char* status_text(WorkflowStatus s) {
  switch (s) {
    case WorkflowStatus::running:
      return "running";
    case WorkflowStatus::waiting:
      return "waiting";
    case WorkflowStatus::interrupted:
      return "interrupted";
    case WorkflowStatus::failed:
      return "failed";
    case WorkflowStatus::passed:
      return "passed";
  }
  return "running";
}

// Where a workflow stands once a step has ended: passed; waiting for a manual reply;
// interrupted (stopped by the caller, the input or the environment: the same command goes on);
// or failed (the transformation used up its attempts).
WorkflowStatus status_after(const ApplyResult& r) {
  if (r.disposition == Disposition::passed) return WorkflowStatus::passed;
  if (r.pending) return WorkflowStatus::waiting;
  if (r.environment_error || r.input_error || r.cancelled) return WorkflowStatus::interrupted;
  return WorkflowStatus::failed;
}

// A workflow's LLM driver, checked before anything runs (its key, its endpoint), and recording
// its exchanges when asked.
Result<std::unique_ptr<LlmDriver>> open_driver(const ApplyOptions& o) {
  auto drv = o.make_llm ? o.make_llm() : make_driver(o.llm, o.driver);
  if (!drv) return drv;
  std::unique_ptr<LlmDriver> driver = std::move(*drv);
  if (auto s = preflight(*driver); !s) return s;
  if (!o.record_dir.empty())
    driver = make_recording_driver(std::move(driver), o.record_dir, o.record_note);
  return driver;
}

// Local changes to the working files, which a workflow (`command` `name`) would replace: refused
// unless `force`, which stashes them first (the stash's id).
Result<std::optional<int64_t>> set_aside_changes(Workspace& ws, bool force,
                                                 const std::string& command,
                                                 const std::string& name) {
  auto w = ws.working_state();
  if (!w) return w.status();
  if (w->clean) return std::optional<int64_t>{};
  if (!force)
    return make_error(
        fmt::format("{} {} starts from HEAD and would replace local changes to {}. Keep them "
                    "with `peak commit -m MESSAGE`, set them aside with `peak stash`, or run "
                    "again with --force (they are stashed first)",
                    command, name, join(w->changes, ", ")),
        ErrorKind::input);
  auto id = ws.stash_push(fmt::format("auto-stash before {} {}", command, name));
  if (!id) return id.status();
  return std::optional<int64_t>(*id);
}

// The workflow a standalone apply continues: the latest of the same transformation on the same
// checkpoint with the same driver, unless that one passed.
std::optional<WorkflowRecord> unfinished_apply(const std::vector<WorkflowRecord>& all,
                                               const std::string& name, int64_t parent,
                                               const std::string& driver) {
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (it->kind != "apply") continue;
    json args = parse_object(it->args_json);
    if (args.value("transformation", "") != name || args.value("parent", int64_t{-1}) != parent ||
        args.value("llm", "") != driver)
      continue;
    if (it->status == status_text(WorkflowStatus::passed)) return std::nullopt;
    return *it;
  }
  return std::nullopt;
}

// A failed workflow asked to go on with no more attempts than it already used: nothing is tried,
// and the result says how to go on.
std::optional<ApplyResult> no_attempts_left(Store& store, const WorkflowRecord& w, int used,
                                            int attempts, const std::string& name, int64_t parent,
                                            const std::string& rerun) {
  if (attempts > used) return std::nullopt;
  ApplyResult res;
  res.workflow_id = w.id;
  res.attempts = used;
  res.disposition = Disposition::not_run;
  if (auto rows = store.attempts(w.id))
    for (auto it = rows->rbegin(); it != rows->rend(); ++it)
      if (!it->infrastructure && it->disposition != "passed" && it->disposition != "not_run") {
        res.disposition = disposition_from_string(it->disposition).value_or(Disposition::not_run);
        break;
      }
  res.message = fmt::format(
      "{} already failed {} attempt(s) on checkpoint {} (workflow {}); nothing new was "
      "tried. {}",
      name, used, parent, w.id, how_to_go_on(rerun, used));
  return res;
}

// A new workflow owned by this process.
Result<int64_t> add_workflow(Store& store, const std::string& kind, const json& args,
                             const std::string& state_json) {
  ProcessIdentity me = this_process();
  WorkflowRecord w;
  w.kind = kind;
  w.args_json = args.dump();
  w.status = status_text(WorkflowStatus::running);
  w.state_json = state_json;
  w.owner_pid = me.pid;
  w.owner_host = me.host;
  w.owner_start = me.start;
  return store.add_workflow(w);
}

// A sequence's resumable state: the next step, and that step's own state.
std::string run_state(const std::string& sequence, int next, const json& step) {
  json j = {{"sequence", sequence}, {"next_step", next}};
  if (!step.empty()) j["step"] = step;
  return j.dump();
}

// The options of one step of a sequence: the command line's, with the step's instructions,
// budget and strategy.
ApplyOptions step_options(const Sequence& seq, const SequenceStep& st, const ApplyOptions& ao0) {
  ApplyOptions step_opts = ao0;
  if (!st.instructions.empty())
    step_opts.extra_instructions = step_opts.extra_instructions.empty()
                                       ? st.instructions
                                       : step_opts.extra_instructions + "\n" + st.instructions;
  if (const int budget = st.budget > 0 ? st.budget : seq.budget; budget > 0)
    step_opts.eval.budget = step_opts.eval.budget == 0
                                ? static_cast<size_t>(budget)
                                : std::min(step_opts.eval.budget, static_cast<size_t>(budget));
  // A step's tuning strategy wins over the command line's; its budget spec wins over the
  // budgets (the sequence's, the step's, `--budget`) but not over a `--strategy-budget` given
  // on the command line, which bounds every step of the run.
  if (!st.strategy.empty()) step_opts.eval.strategy = st.strategy;
  if (!st.strategy_budget.empty() && !ao0.eval.strategy_budget)
    if (auto b = Budget::parse(st.strategy_budget))  // checked with the sequence
      step_opts.eval.strategy_budget = *b;
  return step_opts;
}

// The result of a run whose step `i` ended without passing (`ended`: the workflow's status).
void step_did_not_pass(RunResult& rr, const ApplyResult& ar, WorkflowStatus ended, size_t i,
                       const SequenceStep& st, const std::string& resume) {
  if (ar.cancelled) {
    rr.cancelled = true;
    rr.message = fmt::format("step {} ({}): {}; continue with `{}`", i + 1, st.transformation,
                             ar.message, resume);
    return;
  }
  if (ended == WorkflowStatus::waiting) {
    rr.pending = true;
    rr.prompt_id = ar.prompt_id;
    rr.prompt_path = ar.prompt_path;
    rr.message = ar.message;
    return;
  }
  rr.disposition = ar.disposition;
  rr.message =
      ended == WorkflowStatus::interrupted
          ? fmt::format("step {} ({}) stopped: {}\nContinue with `{}`.", i + 1, st.transformation,
                        ar.message, resume)
          : fmt::format(
                "step {} ({}) failed: {}\nTo go on: `{} --attempts {}` tries more "
                "times, or edit the working files by hand and `peak commit -m "
                "MESSAGE`, then `{} --from {}` goes on with the next step.",
                i + 1, st.transformation, ar.message, resume, ar.attempts + 3, resume, i + 1);
}

}  // namespace

ApplyResult Workspace::apply(const std::string& name, const ApplyOptions& opts, int64_t workflow_id,
                             const std::map<std::string, std::vector<int64_t>>& tuning) {
  ApplyResult res;
  auto fail_kind = [&](ErrorKind k, std::string msg) { return not_run(res, k, std::move(msg)); };
  // Everything that can be checked without the device is checked first: the transformation,
  // the driver spec, its key and its endpoint, the working files.
  auto lib = library();
  if (!lib) return fail_kind(ErrorKind::input, lib.error());
  auto tr = find_transformation(*lib, name);
  if (!tr) return fail_kind(ErrorKind::input, tr.error());
  // A transformation written for other kernel families is refused before any model call.
  auto family = context_family(*this);
  if (!family) return fail_kind(family.error_kind(), family.error());
  if (auto why = family_problem(*tr, *family); !why.empty())
    return fail_kind(ErrorKind::input, why);
  if (auto s = check_overrides({*tr}, opts.eval.tuning); !s)
    return fail_kind(s.kind(), s.message());
  auto driver = open_driver(opts);
  if (!driver) return fail_kind(driver.error_kind(), driver.error());
  if (auto s = lock(); !s) return fail_kind(s.kind(), s.message());
  auto head_cp = head();
  if (!head_cp) return fail_kind(head_cp.error_kind(), head_cp.error());
  auto stash = set_aside_changes(*this, opts.force, "apply", name);
  if (!stash) return fail_kind(stash.error_kind(), stash.error());
  res.stash = *stash;

  // The command that continues this step, with the options it runs with.
  const std::string rerun =
      fmt::format("peak apply {} --llm {}{}", name, opts.llm, options_text(opts.rerun_options));
  StepContext sc;
  sc.name = name;
  sc.transformation = &*tr;
  sc.head = *head_cp;
  sc.opts = &opts;
  sc.tuning = tuning;
  sc.driver = driver->get();
  sc.attempts = opts.attempts;
  const bool standalone = workflow_id == 0;
  if (standalone) {
    // A rerun continues the workflow of the same transformation on the same checkpoint with
    // the same driver, unless it passed.
    const std::string llm = (*driver)->describe();
    if (auto w = unfinished_apply(workflows(), name, head_cp->id, llm)) {
      workflow_id = w->id;
      sc.state = parse_object(w->state_json);
      if (w->status == status_text(WorkflowStatus::failed))
        if (auto r = no_attempts_left(*store_, *w, sc.state.value("failures", 0), opts.attempts,
                                      name, head_cp->id, rerun)) {
          r->stash = res.stash;
          return *r;
        }
    }
    if (workflow_id == 0) {
      json args = {{"transformation", name},
                   {"llm", llm},
                   {"parent", head_cp->id},
                   {"options", opts.rerun_options}};
      auto id = add_workflow(*store_, "apply", args, "");
      if (!id) return fail_kind(id.error_kind(), id.error());
      workflow_id = *id;
    } else {
      ProcessIdentity me = this_process();
      (void)store_->set_workflow_owner(workflow_id, me.pid, me.host, me.start);
      (void)store_->update_workflow(workflow_id, status_text(WorkflowStatus::running),
                                    state_text(sc.state));
      progress_.print(fmt::format("continuing workflow {} ({} on checkpoint {})", workflow_id, name,
                                  head_cp->id));
    }
    register_workflow(workflow_id, true);
    sc.save = [this, workflow_id](const json& st) {
      (void)store_->update_workflow(workflow_id, status_text(WorkflowStatus::running),
                                    state_text(st));
    };
  }
  sc.workflow_id = workflow_id;
  ApplyResult r = apply_step(sc);
  r.stash = res.stash;
  if (standalone) {
    const WorkflowStatus status = status_after(r);
    (void)store_->update_workflow(workflow_id, status_text(status), state_text(sc.state));
    register_workflow(workflow_id, false);
    if (status == WorkflowStatus::failed && r.disposition != Disposition::not_run)
      r.message += "\n" + how_to_go_on(rerun, r.attempts);
  }
  return r;
}

Result<std::vector<Transformation>> Workspace::check_sequence(const Sequence& seq,
                                                              const RunOptions& opts) {
  auto lib = library();
  if (!lib) return make_error(lib.error(), ErrorKind::input);
  std::vector<Transformation> steps;
  for (const auto& st : seq.steps) {
    auto tr = find_transformation(*lib, st.transformation);
    if (!tr)
      return make_error(fmt::format("{}: {}", seq.path.string(), tr.error()), ErrorKind::input);
    steps.push_back(*tr);
  }
  auto family = context_family(*this);
  if (!family) return Error{family.error(), family.error_kind()};
  if (auto why = sequence_family_problem(seq, *lib, *family); !why.empty())
    return make_error(fmt::format("{}: {}", seq.path.string(), why), ErrorKind::input);
  if (opts.from_step >= static_cast<int>(seq.steps.size()))
    return make_error(
        fmt::format("--from {}: sequence {} has {} step{}, numbered from 0 (the "
                    "first); nothing was run",
                    opts.from_step, seq.name, seq.steps.size(), seq.steps.size() == 1 ? "" : "s"),
        ErrorKind::input);
  if (auto s = check_overrides(steps, opts.apply.eval.tuning); !s) return s;
  for (size_t i = 0; i < seq.steps.size(); ++i) {
    const SequenceStep& st = seq.steps[i];
    auto bad = [&](const std::string& why) {
      return make_error(
          fmt::format("{}: step {} ({}): {}", seq.path.string(), i + 1, st.transformation, why),
          ErrorKind::input);
    };
    if (!st.strategy.empty())
      if (auto s = make_strategy(st.strategy); !s) return bad(s.error());
    if (!st.strategy_budget.empty())
      if (auto b = Budget::parse(st.strategy_budget); !b) return bad(b.error());
  }
  return steps;
}

Result<int64_t> Workspace::open_run_workflow(const Sequence& seq, const RunOptions& opts,
                                             const std::string& llm, int& start, json& step_state) {
  if (!opts.resume)
    return add_workflow(
        *store_, "run",
        json{{"sequence", seq.path.string()}, {"llm", llm}, {"options", opts.apply.rerun_options}},
        run_state(seq.name, start, json::object()));
  int64_t wid = 0;
  auto all = workflows();
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    const WorkflowRecord& w = *it;
    if (w.kind != "run") continue;
    json st = parse_object(w.state_json);
    if (w.status == status_text(WorkflowStatus::passed) || st.value("sequence", "") != seq.name)
      break;
    wid = w.id;
    start = opts.from_step > 0 ? opts.from_step : st.value("next_step", 0);
    if (st.value("next_step", 0) == start) step_state = st.value("step", json::object());
    break;
  }
  if (wid == 0)
    return make_error(fmt::format("no unfinished run of sequence {} to resume; start one with "
                                  "`peak run {}`",
                                  seq.name, seq.path.string()),
                      ErrorKind::input);
  ProcessIdentity me = this_process();
  (void)store_->set_workflow_owner(wid, me.pid, me.host, me.start);
  progress_.print(fmt::format("resuming run {} of {} at step {}", wid, seq.name, start + 1));
  return wid;
}

std::optional<int64_t> Workspace::step_made_before_stop(int64_t wid, const SequenceStep& st,
                                                        const json& step_state) const {
  const json parent = step_state.value("parent", json());
  if (!parent.is_number_integer()) return std::nullopt;
  auto h = head();
  if (!h || h->parent != parent.get<int64_t>() || h->transformation != st.transformation)
    return std::nullopt;
  auto evs = store_->evaluations(h->id);
  if (!evs) return std::nullopt;
  for (const EvaluationRecord& e : *evs)
    if (e.kind == "checkpoint" && e.workflow_id == wid) return h->id;
  return std::nullopt;
}

RunResult Workspace::run(const Sequence& seq, const RunOptions& opts) {
  RunResult rr;
  auto fail_kind = [&](ErrorKind k, std::string msg) {
    rr.input_error = k == ErrorKind::input;
    rr.environment_error = k == ErrorKind::environment;
    rr.message = std::move(msg);
    return rr;
  };
  // The checks that need no device, for every step, before anything runs.
  auto steps = check_sequence(seq, opts);
  if (!steps) return fail_kind(steps.error_kind(), steps.error());
  const ApplyOptions& ao0 = opts.apply;
  auto driver = open_driver(ao0);
  if (!driver) return fail_kind(driver.error_kind(), driver.error());
  if (auto s = lock(); !s) return fail_kind(s.kind(), s.message());
  if (auto stash = set_aside_changes(*this, ao0.force, "run", seq.name); !stash)
    return fail_kind(stash.error_kind(), stash.error());

  int start = opts.from_step;
  json step_state = json::object();
  auto id = open_run_workflow(seq, opts, (*driver)->describe(), start, step_state);
  if (!id) return fail_kind(id.error_kind(), id.error());
  const int64_t wid = *id;
  rr.workflow_id = wid;
  register_workflow(wid, true);
  const char* running = status_text(WorkflowStatus::running);
  (void)store_->update_workflow(wid, running, run_state(seq.name, start, step_state));
  const std::string resume = fmt::format("peak run {} --resume --llm {}{}", seq.path.string(),
                                         ao0.llm, options_text(ao0.rerun_options));
  // A step that is done: the sequence goes on from its checkpoint, or (keep = false) from where
  // the step started, the checkpoint staying in the history.
  auto step_done = [&](int i, std::optional<int64_t> checkpoint) {
    const SequenceStep& st = seq.steps[static_cast<size_t>(i)];
    if (!st.keep && checkpoint) {
      auto made = store_->checkpoint(*checkpoint);
      if (made && made->parent) {
        if (auto s = move_head(*made->parent); !s) return s;
        progress_.print(fmt::format(
            "step {} ({}): checkpoint {} is kept aside (keep = false); the next step builds on "
            "checkpoint {}",
            i + 1, st.transformation, *checkpoint, *made->parent));
      }
    }
    rr.steps_done = i + 1;
    (void)store_->update_workflow(wid, running, run_state(seq.name, i + 1, json::object()));
    return Status{};
  };
  // Resumed after its process was stopped between a step's checkpoint and the run's record of
  // it: that step is done.
  if (opts.resume && start < static_cast<int>(seq.steps.size()))
    if (auto made = step_made_before_stop(wid, seq.steps[static_cast<size_t>(start)], step_state)) {
      progress_.print(fmt::format("step {} ({}) had made checkpoint {} when the run stopped",
                                  start + 1, seq.steps[static_cast<size_t>(start)].transformation,
                                  *made));
      if (auto s = step_done(start, made); !s) {
        rr.environment_error = true;
        rr.message = s.message();
        return rr;
      }
      ++start;
    }
  for (int i = start; i < static_cast<int>(seq.steps.size()); ++i) {
    const SequenceStep& st = seq.steps[static_cast<size_t>(i)];
    const ApplyOptions step_opts = step_options(seq, st, ao0);
    StepContext sc;
    sc.name = st.transformation;
    sc.transformation = &(*steps)[static_cast<size_t>(i)];
    sc.opts = &step_opts;
    sc.workflow_id = wid;
    sc.tuning = step_tuning(seq, st, *sc.transformation);
    sc.driver = driver->get();
    // The command line wins over the sequence file, which wins over the default.
    sc.attempts = opts.attempts      ? *opts.attempts
                  : st.attempts > 0  ? st.attempts
                  : seq.attempts > 0 ? seq.attempts
                                     : ao0.attempts;
    sc.state = i == start ? step_state : json::object();
    sc.save = [&, i](const json& s) {
      (void)store_->update_workflow(wid, running, run_state(seq.name, i, s));
    };
    progress_.print(fmt::format("step {}/{}: {}", i + 1, seq.steps.size(), st.transformation));
    ApplyResult ar = apply_step(sc);
    rr.steps.push_back(ar);
    rr.input_error = ar.input_error;
    rr.environment_error = ar.environment_error;
    if (const WorkflowStatus ended = status_after(ar); ended != WorkflowStatus::passed) {
      (void)store_->update_workflow(wid, status_text(ended), run_state(seq.name, i, sc.state));
      register_workflow(wid, false);
      step_did_not_pass(rr, ar, ended, static_cast<size_t>(i), st, resume);
      return rr;
    }
    if (auto s = step_done(i, ar.checkpoint); !s) {
      rr.disposition = Disposition::not_run;
      rr.environment_error = true;
      rr.message = s.message();
      return rr;
    }
  }
  (void)store_->update_workflow(
      wid, status_text(WorkflowStatus::passed),
      run_state(seq.name, static_cast<int>(seq.steps.size()), json::object()));
  register_workflow(wid, false);
  rr.disposition = Disposition::passed;
  rr.steps_done = static_cast<int>(seq.steps.size());
  rr.message = fmt::format("{} steps of {} done", seq.steps.size(), seq.name);
  return rr;
}

Result<int64_t> Workspace::checkpoint_passed(const PassedCandidate& c, json& summary) {
  EvalSummary typed = summary_or_empty(summary);
  if (c.parent_summary) add_speedups(typed, *c.parent_summary, seed_summary(*c.seed_opts));
  typed.transformation = c.made_by;
  summary = to_json(typed);
  auto id = make_checkpoint(c.parent, c.transformation, c.message, *c.ctx, *c.source, summary,
                            c.context_text);
  if (!id) return id;
  record_evaluation(*id, c.workflow, "checkpoint", *c.opts, summary);
  return id;
}

RefUpdate Workspace::head_update(int64_t id) const {
  auto h = store_->head();
  RefUpdate u;
  if (h && !starts_with(*h, "#"))
    u.branches = {{*h, id}};
  else
    u.head = fmt::format("#{}", id);
  return u;
}

ApplyResult Workspace::commit(const std::string& message, const EvalChoices& choices) {
  ApplyResult res;
  auto fail_kind = [&](ErrorKind k, std::string msg) { return not_run(res, k, std::move(msg)); };
  if (auto s = lock(); !s) return fail_kind(s.kind(), s.message());
  auto head_cp = head();
  if (!head_cp) return fail_kind(head_cp.error_kind(), head_cp.error());
  // The working files are checked before anything runs.
  auto toml = read_file(root_ / "kernel.toml");
  if (!toml) return fail_kind(ErrorKind::input, toml.error());
  auto ctx = load_context(root_);
  if (!ctx) return fail_kind(ErrorKind::input, ctx.error());
  auto src = read_file(root_ / ctx->source_file);
  if (!src) return fail_kind(ErrorKind::input, src.error());
  if (auto r = split_regions(*src, ctx->source_file); !r)
    return fail_kind(ErrorKind::input, r.error());
  if (auto s = check_context_names(*ctx, (root_ / "kernel.toml").string()); !s)
    return fail_kind(s.kind(), s.message());
  if (auto s = check_tuning_overrides(choices.tuning, tuning_names(*ctx), "the working files"); !s)
    return fail_kind(s.kind(), s.message());
  auto head_files = files_of(head_cp->id);
  if (!head_files) return fail_kind(head_files.error_kind(), head_files.error());
  auto same = [&](const std::string& path, const std::string& text) {
    auto it = head_files->find(path);
    return it != head_files->end() && it->second == text;
  };
  if (same("kernel.toml", *toml) && same(ctx->source_file, *src))
    return fail_kind(ErrorKind::input,
                     fmt::format("nothing to commit: the working files are those of checkpoint "
                                 "{} (HEAD)",
                                 head_cp->id));
  auto eo0 = eval_options(choices);
  if (!eo0) return fail_kind(eo0.error_kind(), eo0.error());
  auto parent_eval = evaluate_checkpoint(head_cp->id, *eo0, false, "parent");
  EvalOptions eo = *eo0;
  if (parent_eval) eo.must_include = top_configs(parent_eval->summary, *ctx);
  Evaluation ev = evaluate(*ctx, *src, eo);
  res.disposition = ev.disposition;
  res.message = ev.message;
  res.summary = ev.summary;  // a failed evaluation's too (`peak --json commit`)
  if (ev.disposition != Disposition::passed) return res;
  PassedCandidate made;
  made.parent = head_cp->id;
  made.transformation = "manual";
  made.message = message.empty() ? "manual edit" : message;
  made.made_by = {{"name", "manual"}, {"message", message}};
  made.ctx = &*ctx;
  made.source = &*src;
  made.context_text = &*toml;
  made.parent_summary = parent_eval ? &parent_eval->summary : nullptr;
  made.seed_opts = &*eo0;
  made.opts = &eo;
  auto id = checkpoint_passed(made, ev.summary);
  if (!id) return fail_kind(id.error_kind(), id.error());
  // The working files stay as they are; HEAD (its branch, or itself when detached) moves.
  if (auto s = store_->update_refs(head_update(*id)); !s) return fail_kind(s.kind(), s.message());
  res.checkpoint = *id;
  res.summary = ev.summary;
  return res;
}

std::map<std::string, std::vector<int64_t>> Workspace::step_tuning(const Sequence& seq,
                                                                   const SequenceStep& st,
                                                                   const Transformation& t) {
  std::map<std::string, std::vector<int64_t>> out = st.tuning;
  if (seq.tuning.empty()) return out;
  // The sequence's value sets apply to the parameters the step's context will have.
  std::set<std::string> names;
  if (auto h = head())
    if (auto files = checkpoint_files(h->id))
      for (const auto& p : files->first.tuning) names.insert(p.name);
  for (const auto& p : t.tuning) names.insert(p.name);
  for (const auto& [name, values] : seq.tuning)
    if (names.count(name) && !out.count(name)) out[name] = values;
  return out;
}

}  // namespace peak
