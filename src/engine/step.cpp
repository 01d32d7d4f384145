// One step of a workflow: the LLM passes, the evaluation, the checkpoint. Resumable from its
// state. A step is a loop over its attempts: each turn either asks the model for the next pass
// or, all passes done, evaluates the candidate; a failure charged to the transformation starts
// the next attempt from the parent's source.
#include "engine/step.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "engine/evaluate_internal.h"
#include "llm/spec.h"
#include "transform/prompt.h"
#include "transform/reply.h"
#include "util/fault.h"
#include "util/fs.h"

namespace peak {

StepHooks step_hooks(Store& store, Progress& progress) {
  StepHooks h;
  h.add_attempt = [&store](const AttemptRecord& r) -> std::optional<int64_t> {
    auto id = store.add_attempt(r);
    if (!id) return std::nullopt;
    return *id;
  };
  h.print = [&progress](const std::string& line) { progress.print(line); };
  h.status = [&progress](const std::string& line) { progress.status(line, true); };
  h.clear_status = [&progress] { progress.clear(); };
  h.reached = [](std::string_view point) { fault_point(point); };
  h.injected = [](std::string_view point) { return fault_active(point); };
  return h;
}

namespace {

// The reply of a workflow's last recorded attempt (`done`: its attempts, oldest first) when that
// attempt is the one about to be made (same pass, attempt number and prompt) and its outcome
// never reached the step's saved state: the process stopped in between. Infrastructure failures
// are asked again, as they always are.
std::optional<LlmReply> unsaved_reply(const Store& store, const std::vector<AttemptRecord>& done,
                                      int pass, int attempt, const std::string& prompt_key) {
  if (done.empty()) return std::nullopt;
  const AttemptRecord& last = done.back();
  if (last.pass_index != pass || last.attempt != attempt || last.prompt_key != prompt_key ||
      last.infrastructure)
    return std::nullopt;
  LlmReply r;
  r.driver = last.driver;
  r.model = last.model;
  r.producer = last.producer;
  r.prompt_tokens = last.prompt_tokens;
  r.completion_tokens = last.completion_tokens;
  r.latency_s = last.latency_s;
  if (!last.reply_blob.empty()) {
    auto text = store.get_blob(last.reply_blob);
    if (!text) return std::nullopt;
    r.text = *text;
  }
  if (last.disposition == to_string(Disposition::llm_error)) {
    r.status = LlmStatus::failed;
    r.error = last.error;
  } else {
    if (r.text.empty()) return std::nullopt;
    r.status = LlmStatus::ok;
  }
  return r;
}

// What the next prompt says about a failed attempt. It never depends on timing (a slower or
// busier machine must send the same prompt, so that replays find their recordings): for the
// dispositions that timing decides, only the disposition is said.
std::string feedback_for(Disposition d, const std::string& message) {
  if (d == Disposition::timeout || d == Disposition::faster_than_peak)
    return fmt::format("Disposition: {} ({}).", to_string(d), describe(d));
  std::string msg = message;
  // Never leak hidden validation shapes into a prompt.
  if (msg.find("[hidden shape]") != std::string::npos)
    msg = fmt::format("{} on a hidden validation shape (not shown).", describe(d));
  auto lines = split_lines(msg);
  if (lines.size() > 40) {
    lines.resize(40);
    lines.push_back("... (truncated)");
  }
  return fmt::format("Disposition: {} ({}).\n{}", to_string(d), describe(d), join(lines, "\n"));
}

// Dispositions the harness can cause on its own (a loaded machine, a lost device): the
// evaluation is repeated once before the candidate is charged with them.
bool harness_suspect(Disposition d) {
  return d == Disposition::timeout || d == Disposition::crashed;
}

std::string first_line(const std::string& text) {
  auto lines = split_lines(text);
  return lines.empty() ? "" : lines.front();
}

}  // namespace

// A step under way: what it resolved before the first pass, where it stands, and one method per
// phase. A method that returns an ApplyResult ends the step with it.
struct Workspace::StepRun {
  using Ended = std::optional<ApplyResult>;

  StepRun(Workspace& w, StepContext& s)
      : ws(w), sc(s), opts(*s.opts), hooks(step_hooks(*w.store_, w.progress_)) {
    res.workflow_id = sc.workflow_id;
  }
  ApplyResult run();

  // Before the first pass.
  Ended resolve();
  Ended resolve_device();
  Ended evaluate_parent();
  void plan_tuning();
  Ended prepare_source();
  void restore_state();
  // One turn of the loop.
  Ended run_pass(int attempt_no);
  LlmRequest request_for(const Pass& P, int attempt_no, const std::vector<AttemptRecord>& done);
  AttemptRecord attempt_row(const Pass& P, const LlmRequest& req, const LlmReply& reply,
                            int attempt_no);
  Ended reply_failed(AttemptRecord& ar, const LlmRequest& req, const LlmReply& reply, bool recorded,
                     int attempt_no);
  Ended evaluate_candidate(int attempt_no);
  Evaluation evaluate_once(const std::string& source, std::optional<int64_t> attempt_id);
  ApplyResult checkpoint_candidate(Evaluation& ev, int attempt_no,
                                   std::optional<int64_t> eval_attempt_id,
                                   const std::string& new_source);
  Ended charge_evaluation(AttemptRecord& er, const Evaluation& ev, int attempt_no,
                          const std::string& new_source);
  ApplyResult exhausted();
  // The step's state and its endings.
  void save();
  void charge(std::string next_feedback);
  bool cancelled() const { return opts.eval.cancelled && opts.eval.cancelled(); }
  ApplyResult fail(Disposition d, std::string msg);
  ApplyResult fail_kind(ErrorKind k, std::string msg);
  ApplyResult stop(const std::string& where);
  ApplyResult stop_for_infrastructure(const std::string& what);
  std::optional<int64_t> workflow() const {
    return sc.workflow_id > 0 ? std::optional<int64_t>(sc.workflow_id) : std::nullopt;
  }

  Workspace& ws;
  StepContext& sc;
  const ApplyOptions& opts;
  StepHooks hooks;
  ApplyResult res;
  // Resolved before the first pass.
  Transformation T;
  CheckpointRecord head;
  KernelContext ctx;          // the parent's context
  std::string parent_source;  // the parent's source
  Backend* be = nullptr;
  DeviceFacts dev;  // the device the prompts show
  EvalOptions base_eval;
  json parent_summary;
  KernelContext ctx2;  // the candidate's context: the transformation's parameters joined
  EvalOptions eo;      // the candidate's evaluation
  SourceRegions regions0;
  std::vector<std::pair<std::string, std::string>> facts;
  std::string plan_text;
  // Where the step stands.
  int passes = 0, failures = 0, pass = 1;
  std::string feedback;
  SourceRegions regions;
};

ApplyResult Workspace::apply_step(StepContext& sc) { return StepRun(*this, sc).run(); }

ApplyResult Workspace::StepRun::run() {
  if (Ended e = resolve()) return *e;
  if (Ended e = resolve_device()) return *e;
  if (Ended e = evaluate_parent()) return *e;
  plan_tuning();
  if (Ended e = prepare_source()) return *e;
  restore_state();
  while (failures < sc.attempts) {
    const int attempt_no = failures + 1;
    res.attempts = attempt_no;
    Ended e = pass <= passes ? run_pass(attempt_no) : evaluate_candidate(attempt_no);
    if (e) return *e;
  }
  return exhausted();
}

ApplyResult Workspace::StepRun::fail(Disposition d, std::string msg) {
  res.disposition = d;
  res.message = std::move(msg);
  return res;
}

ApplyResult Workspace::StepRun::fail_kind(ErrorKind k, std::string msg) {
  return not_run(res, k, std::move(msg));
}

// Stopped between passes or configurations: every row written so far stays, no checkpoint.
ApplyResult Workspace::StepRun::stop(const std::string& where) {
  res.cancelled = true;
  return fail(Disposition::not_run,
              fmt::format("{}: {} stopped {}; nothing was checkpointed and the workspace stays "
                          "at checkpoint {}",
                          kCancelledMessage, sc.name, where, head.id));
}

// An infrastructure failure: recorded apart, charged to nobody, the state kept as it was.
ApplyResult Workspace::StepRun::stop_for_infrastructure(const std::string& what) {
  res.environment_error = true;
  res.attempts = failures + 1;
  return fail(Disposition::not_run,
              fmt::format("{}\nNothing was charged to {}; the workflow stays where it was. Fix "
                          "the cause and run the same command again to continue",
                          what, T.name));
}

void Workspace::StepRun::save() {
  json& st = sc.state;
  st["transformation"] = T.name;
  st["parent"] = head.id;
  st["failures"] = failures;
  st["pass"] = pass;
  st["feedback"] = feedback;
  if (auto b = ws.store_->put_blob(join_regions(regions))) st["source_blob"] = *b;
  if (sc.save) sc.save(st);
}

void Workspace::StepRun::charge(std::string next_feedback) {
  ++failures;
  feedback = std::move(next_feedback);
  regions = regions0;
  pass = 1;
  save();
}

// The transformation and the checkpoint it applies to.
Workspace::StepRun::Ended Workspace::StepRun::resolve() {
  T = *sc.transformation;
  if (sc.head) {
    head = *sc.head;
  } else {
    auto head_cp = ws.head();
    if (!head_cp) return fail_kind(head_cp.error_kind(), head_cp.error());
    head = *head_cp;
  }
  auto files = ws.checkpoint_files(head.id);
  if (!files) return fail_kind(files.error_kind(), files.error());
  ctx = files->first;
  parent_source = files->second;
  if (!T.supports(ctx.backend))
    return fail_kind(ErrorKind::input,
                     fmt::format("transformation {} does not support backend {} (it supports: {})",
                                 T.name, ctx.backend, join(T.backends, ", ")));
  if (auto why = family_problem(T, ctx.family); !why.empty())
    return fail_kind(ErrorKind::input, why);
  // `requires` names a CUDA architecture: on another backend it is refused before any probing.
  if (auto why = requirement_problem(T, ctx.backend, "", ""); !why.empty())
    return fail_kind(ErrorKind::input, why);
  return std::nullopt;
}

// The device: this machine's (probed), shown in prompts unless a campaign's facts are given.
Workspace::StepRun::Ended Workspace::StepRun::resolve_device() {
  auto b = ws.backend();
  if (!b) return fail_kind(b.error_kind(), b.error());
  be = *b;
  if (opts.eval.compile_only && opts.prompt_device)
    ws.set_device(opts.eval.device, *opts.prompt_device);
  auto devices = ws.resolve_devices(opts.eval);  // with --devices, the first makes the timing
  if (!devices) return fail_kind(devices.error_kind(), devices.error());
  if (!devices->facts) {
    // Compiling only for a device whose facts were not given: this machine's, probed.
    auto probed = ws.device(devices->selector);
    if (!probed) return fail_kind(ErrorKind::environment, probed.error());
    devices->facts = *probed;
  }
  std::optional<DeviceFacts> prompt_device = opts.prompt_device;
  auto llm = parse_llm_spec(opts.llm);
  if (!prompt_device && llm && llm->kind == LlmKind::replay) {
    fs::path recorded = llm->dir / "device.json";
    if (fs::exists(recorded)) {
      auto facts = read_device_facts(recorded);
      if (!facts) return fail_kind(ErrorKind::input, facts.error());
      prompt_device = *facts;
    }
  }
  dev = prompt_device ? *prompt_device : *devices->facts;
  // A transformation for a newer architecture than the device's (the facts the prompts show: the
  // probed device, --prompt-device or a replayed recording's) stops here, before any prompt.
  if (auto why = requirement_problem(T, ctx.backend, dev.name, dev.arch); !why.empty())
    return fail_kind(ErrorKind::input, why);
  if (!opts.record_dir.empty() && !fs::exists(opts.record_dir / "device.json"))
    (void)write_file(opts.record_dir / "device.json", dev.to_json().dump(2) + "\n");
  base_eval = eval_options_for(opts.eval, *devices);
  return std::nullopt;
}

// The parent's evaluation: the baseline for speedups and the configurations carried forward.
Workspace::StepRun::Ended Workspace::StepRun::evaluate_parent() {
  hooks.print(fmt::format("evaluating checkpoint {} (parent) ...", head.id));
  auto parent_eval = ws.evaluate_checkpoint(head.id, base_eval, false, "parent");
  if (cancelled()) return stop("while evaluating the parent");
  if (!parent_eval) return fail_kind(ErrorKind::environment, parent_eval.error());
  if (parent_eval->disposition != Disposition::passed)
    return fail_kind(
        ErrorKind::environment,
        fmt::format("the parent checkpoint {} does not pass its own evaluation ({}): {}", head.id,
                    to_string(parent_eval->disposition), parent_eval->message));
  parent_summary = parent_eval->summary;
  return std::nullopt;
}

// The new context: the transformation's tuning parameters, constraint and workspace join; the
// search starts from the parent's best configurations with the new parameters' values.
void Workspace::StepRun::plan_tuning() {
  ctx2 = transformed_context(T, ctx);
  eo = base_eval;
  for (const auto& [k, v] : sc.tuning) eo.tuning_overrides[k] = v;
  // A run's overrides name the parameters of all its steps: this step takes its context's.
  const std::set<std::string> params2 = tuning_names(ctx2);
  std::erase_if(eo.tuning_overrides, [&](const auto& o) { return !params2.count(o.first); });
  std::vector<TuningParam> fresh;
  for (const auto& p : ctx2.tuning)
    if (std::none_of(ctx.tuning.begin(), ctx.tuning.end(),
                     [&](const TuningParam& q) { return q.name == p.name; })) {
      fresh.push_back(p);
      if (auto it = eo.tuning_overrides.find(p.name); it != eo.tuning_overrides.end())
        fresh.back().values = it->second;
    }
  // A parameter this transformation retires keeps its one value, and no override widens it again.
  std::vector<Config> top = detail::top_configs(parent_summary, ctx2);
  for (const auto& name : T.retires) {
    auto p = std::find_if(ctx2.tuning.begin(), ctx2.tuning.end(),
                          [&](const TuningParam& q) { return q.name == name; });
    if (p == ctx2.tuning.end()) continue;
    eo.tuning_overrides.erase(name);
    for (auto& c : top) c[name] = p->default_value;
  }
  eo.must_include = carried_configs(top, fresh, eo.budget.evaluations);
}

Workspace::StepRun::Ended Workspace::StepRun::prepare_source() {
  auto r = split_regions(parent_source, ctx.source_file);
  if (!r) return fail_kind(ErrorKind::input, r.error());
  // Helper snippets are peak's to insert, before the first pass; the model only calls them.
  regions0 = insert_helpers(T, ctx.backend, *r);
  facts = be->prompt_facts(dev);
  plan_text = plan_reference(be->plan_dialect());
  return std::nullopt;
}

// Where the step stands: from its saved state when it belongs to this transformation on this
// checkpoint (a rerun or a resume), else from the start.
void Workspace::StepRun::restore_state() {
  passes = static_cast<int>(T.passes.size());
  regions = regions0;
  json& st = sc.state;
  if (st.value("transformation", "") != T.name || st.value("parent", int64_t{-1}) != head.id) {
    st = json::object();
    return;
  }
  failures = st.value("failures", 0);
  pass = std::clamp(st.value("pass", 1), 1, passes + 1);
  feedback = st.value("feedback", "");
  if (auto blob = st.value("source_blob", ""); !blob.empty()) {
    auto text = ws.store_->get_blob(blob);
    auto r = text ? split_regions(*text, ctx.source_file)
                  : Result<SourceRegions>(Error{text ? "" : text.error()});
    if (r)
      regions = *r;
    else
      pass = 1;  // the saved source is unusable: the attempt starts over
  }
}

// One pass: the prompt, the model's reply, its splice into the source.
Workspace::StepRun::Ended Workspace::StepRun::run_pass(int attempt_no) {
  if (cancelled()) return stop(fmt::format("before pass {}/{}", pass, passes));
  const Pass& P = T.passes[static_cast<size_t>(pass - 1)];
  // Answers to this very prompt that the workflow already used (it resumed after them).
  std::vector<AttemptRecord> done;
  if (sc.workflow_id > 0)
    if (auto rows = ws.store_->attempts(sc.workflow_id)) done = std::move(*rows);
  LlmRequest req = request_for(P, attempt_no, done);
  // A reply recorded just before the process stopped (killed after the attempt's row and
  // before the step's state was saved): it is this very attempt, and its reply is used
  // again instead of asking the model a second time; no second row is recorded.
  std::optional<LlmReply> recorded = unsaved_reply(*ws.store_, done, pass, attempt_no, req.key);
  if (recorded)
    hooks.print(fmt::format("  {} attempt {}: the reply recorded before the stop is used",
                            req.step_label, attempt_no));
  else
    hooks.status(fmt::format("{}: asking the LLM ({}, attempt {})", req.step_label,
                             sc.driver->describe(), attempt_no));
  LlmReply reply = recorded ? *recorded : sc.driver->complete(req);
  hooks.clear_status();
  if (cancelled()) return stop(fmt::format("during pass {}/{}", pass, passes));
  if (reply.status == LlmStatus::pending) {
    save();
    res.pending = true;
    res.prompt_id = reply.pending_id;
    res.prompt_path = reply.pending_path;
    res.disposition = Disposition::not_run;
    res.message = reply.error;
    return res;
  }
  AttemptRecord ar = attempt_row(P, req, reply, attempt_no);
  if (!reply.ok()) return reply_failed(ar, req, reply, recorded.has_value(), attempt_no);
  SpliceOutcome sp = splice_reply(reply.text, regions, P.region);
  ar.disposition = std::string(to_string(sp.disposition));
  ar.error = sp.message;
  if (!recorded) (void)hooks.add_attempt(ar);
  hooks.reached("apply.attempt-recorded");
  if (sp.disposition != Disposition::passed) {
    hooks.print(fmt::format("  {} attempt {}: {}: {}", req.step_label, attempt_no,
                            to_string(sp.disposition), first_line(sp.message)));
    charge(feedback_for(sp.disposition, sp.message));
    return std::nullopt;
  }
  regions = sp.source;
  ++pass;
  save();
  return std::nullopt;
}

LlmRequest Workspace::StepRun::request_for(const Pass& P, int attempt_no,
                                           const std::vector<AttemptRecord>& done) {
  PromptInput in;
  in.transformation = &T;
  in.pass_index = pass;
  in.context = &ctx2;
  in.source = &regions;
  in.backend = ctx.backend;
  in.backend_translation = be->translation_table();
  in.device_facts = facts;
  in.device_name = dev.name;
  in.device_arch = dev.arch;
  in.plan_reference = plan_text;
  in.extra_instructions = opts.extra_instructions;
  in.feedback = opts.feedback ? feedback : "";
  Prompt prompt = build_prompt(in);
  LlmRequest req;
  req.system = prompt.system;
  req.user = prompt.user;
  req.key = prompt.key();
  req.attempt = attempt_no;
  req.served_before =
      static_cast<int>(std::count_if(done.begin(), done.end(), [&](const AttemptRecord& a) {
        return a.prompt_key == req.key && !a.infrastructure;
      }));
  req.step_label = fmt::format("{} pass {}/{} ({})", T.name, pass, passes, to_string(P.region));
  return req;
}

// The attempt row of a pass, its disposition not yet set.
AttemptRecord Workspace::StepRun::attempt_row(const Pass& P, const LlmRequest& req,
                                              const LlmReply& reply, int attempt_no) {
  AttemptRecord ar;
  ar.workflow_id = sc.workflow_id;
  ar.parent_checkpoint = head.id;
  ar.transformation = T.name;
  ar.pass_index = pass;
  ar.attempt = attempt_no;
  ar.region = std::string(to_string(P.region));
  ar.driver = reply.driver;
  ar.model = reply.model;
  ar.producer = reply.producer;
  ar.prompt_key = req.key;
  if (auto pb = ws.store_->put_blob(req.system + "\n\n" + req.user)) ar.prompt_blob = *pb;
  if (!reply.text.empty())
    if (auto rb = ws.store_->put_blob(reply.text)) ar.reply_blob = *rb;
  ar.prompt_tokens = reply.prompt_tokens;
  ar.completion_tokens = reply.completion_tokens;
  ar.latency_s = reply.latency_s;
  return ar;
}

// The model gave no usable reply: charged as the model's mistake (asked afresh), unless the
// failure is the infrastructure's.
Workspace::StepRun::Ended Workspace::StepRun::reply_failed(AttemptRecord& ar, const LlmRequest& req,
                                                           const LlmReply& reply, bool recorded,
                                                           int attempt_no) {
  ar.disposition = std::string(to_string(Disposition::llm_error));
  ar.error = reply.error;
  ar.infrastructure = reply.infrastructure;
  if (!recorded) (void)hooks.add_attempt(ar);
  hooks.reached("apply.attempt-recorded");
  hooks.print(fmt::format("  {} attempt {}: {}: {}", req.step_label, attempt_no,
                          reply.infrastructure ? "infrastructure" : "llm_error",
                          first_line(reply.error)));
  if (reply.infrastructure) {
    save();
    return stop_for_infrastructure(reply.error);
  }
  charge("");  // the model's mistake (a truncated reply, a refusal): asked afresh
  return std::nullopt;
}

// All passes done: compile, validate, tune, time.
Workspace::StepRun::Ended Workspace::StepRun::evaluate_candidate(int attempt_no) {
  hooks.print(fmt::format("{}: evaluating the candidate (attempt {}) ...", T.name, attempt_no));
  const std::string new_source = join_regions(regions);
  AttemptRecord er;
  er.workflow_id = sc.workflow_id;
  er.parent_checkpoint = head.id;
  er.transformation = T.name;
  er.pass_index = 0;
  er.attempt = attempt_no;
  er.driver = "peak";
  if (auto sb = ws.store_->put_blob(new_source)) er.reply_blob = *sb;
  er.disposition = "not_run";
  const std::optional<int64_t> eval_attempt_id = hooks.add_attempt(er);
  auto cancelled_eval = [&] {
    er.error = kCancelledMessage;
    (void)hooks.add_attempt(er);
    return stop("while evaluating the candidate");
  };
  // Tests inject a harness-side timeout here, in place of the first evaluation.
  Evaluation ev;
  if (hooks.injected("eval.task-timeout")) {
    ev.disposition = Disposition::timeout;
    ev.message = "a runner task did not finish within its deadline (injected: PEAK_FAULT)";
  } else {
    ev = evaluate_once(new_source, eval_attempt_id);
  }
  if (cancelled()) return cancelled_eval();
  if (harness_suspect(ev.disposition)) {
    // A slow or disturbed machine can time out or lose a runner: evaluate once more before
    // the candidate is charged. The first outcome is recorded as the harness's.
    AttemptRecord ir = er;
    ir.disposition = std::string(to_string(ev.disposition));
    ir.error = "evaluated again before charging the candidate: " + first_line(ev.message);
    ir.infrastructure = true;
    (void)hooks.add_attempt(ir);
    hooks.print(fmt::format("  {} attempt {}: {} (evaluating again before charging it)", T.name,
                            attempt_no, to_string(ev.disposition)));
    ev = evaluate_once(new_source, eval_attempt_id);
    if (cancelled()) return cancelled_eval();
  }
  if (ev.disposition == Disposition::passed)
    return checkpoint_candidate(ev, attempt_no, eval_attempt_id, new_source);
  return charge_evaluation(er, ev, attempt_no, new_source);
}

Evaluation Workspace::StepRun::evaluate_once(const std::string& source,
                                             std::optional<int64_t> attempt_id) {
  return ws.evaluate(ctx2, source, eo, attempt_id);
}

// The candidate passed: it becomes a checkpoint, and HEAD's branch moves to it (a detached HEAD
// moves itself) together with the working files. Edits made to the files while the step ran are
// stashed first.
ApplyResult Workspace::StepRun::checkpoint_candidate(Evaluation& ev, int attempt_no,
                                                     std::optional<int64_t> eval_attempt_id,
                                                     const std::string& new_source) {
  EvalSummary typed = summary_or_empty(ev.summary);
  typed.attempts = attempt_no;
  ev.summary = to_json(typed);
  PassedCandidate made;
  made.parent = head.id;
  made.transformation = T.name;
  made.message = "apply " + T.name;
  made.made_by = {{"name", T.name}, {"version", T.version}};
  made.ctx = &ctx2;
  made.source = &new_source;
  made.parent_summary = &parent_summary;
  made.seed_opts = &base_eval;
  made.opts = &eo;
  made.workflow = workflow();
  auto id = ws.checkpoint_passed(made, ev.summary);
  if (!id) return fail_kind(ErrorKind::environment, id.error());
  if (eval_attempt_id) (void)ws.store_->attach_attempt_to_checkpoint(*eval_attempt_id, *id);
  RefUpdate u = ws.head_update(*id);
  ctx2.dir = ws.root_;
  std::map<std::string, std::string> target = {{"kernel.toml", to_toml(ctx2)},
                                               {ctx2.source_file, new_source}};
  if (auto w = ws.working_state(); w && !w->clean)
    if (auto stashed = ws.stash_push("changes made while " + T.name + " ran")) {
      res.stash = *stashed;
      hooks.print(
          fmt::format("the working files changed while {} ran: they are stash "
                      "{} (`peak stash pop` brings them back)",
                      T.name, *stashed));
    }
  if (auto s = ws.switch_files(target, u); !s) return fail_kind(s.kind(), s.message());
  sc.state["checkpoint"] = *id;
  res.disposition = Disposition::passed;
  res.checkpoint = *id;
  res.summary = ev.summary;
  res.message = ev.message;
  return res;
}

// The candidate failed its evaluation: the outcome is its own attempt row (append-only), and
// the failure is charged unless the evaluation could not run at all.
Workspace::StepRun::Ended Workspace::StepRun::charge_evaluation(AttemptRecord& er,
                                                                const Evaluation& ev,
                                                                int attempt_no,
                                                                const std::string& new_source) {
  er.disposition = std::string(to_string(ev.disposition));
  er.error = ev.message;
  if (ev.disposition == Disposition::not_run) {
    // The evaluation could not run (device, toolchain, reference): not the candidate's fault.
    er.infrastructure = true;
    (void)hooks.add_attempt(er);
    return stop_for_infrastructure("the candidate could not be evaluated: " + ev.message);
  }
  (void)hooks.add_attempt(er);
  // Keep the failed candidate for inspection.
  (void)write_file(ws.root_ / ".peak" / "failed" /
                       fmt::format("{}-{}-attempt{}{}", sc.workflow_id, T.name, attempt_no,
                                   fs::path(ctx.source_file).extension().string()),
                   new_source);
  hooks.print(fmt::format("  {} attempt {}: {}: {}", T.name, attempt_no, to_string(ev.disposition),
                          first_line(ev.message)));
  charge(feedback_for(ev.disposition, ev.message));
  return std::nullopt;
}

// Every attempt failed: the last charged failure is the step's disposition.
ApplyResult Workspace::StepRun::exhausted() {
  res.disposition = Disposition::not_run;
  std::string last;
  if (auto attempts = ws.store_->attempts(workflow())) {
    for (auto it = attempts->rbegin(); it != attempts->rend(); ++it)
      if (it->transformation == T.name && !it->infrastructure && it->disposition != "passed" &&
          it->disposition != "not_run") {
        res.disposition = disposition_from_string(it->disposition).value_or(Disposition::not_run);
        last = it->error;
        break;
      }
  }
  res.attempts = failures;
  res.message = fmt::format(
      "{} failed after {} attempt(s); the workspace stays at checkpoint {}. Last failure: {}",
      T.name, failures, head.id, last);
  return res;
}

}  // namespace peak
