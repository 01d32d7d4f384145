// Applying transformations and sequences, manual commits, and a checkpoint's results.
#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "engine/workspace.h"
#include "transform/prompt.h"
#include "transform/reply.h"
#include "tune/strategy.h"
#include "util/fault.h"
#include "util/fs.h"

namespace peak {

namespace {

// Median times of the bench shapes of a summary, by shape text.
std::map<std::string, double> bench_medians(const json& summary) {
  std::map<std::string, double> out;
  if (!summary.contains("bench")) return out;
  for (const auto& m : summary["bench"])
    if (m.value("disposition", "") == "passed")
      out[m.value("shape", "")] = m.value("median_ms", 0.0);
  return out;
}

void add_speedups(json& summary, const json& parent, const json& seed) {
  auto mine = bench_medians(summary), p = bench_medians(parent), s = bench_medians(seed);
  if (!summary.contains("bench")) return;
  for (auto& m : summary["bench"]) {
    std::string shape = m.value("shape", "");
    if (!mine.count(shape)) continue;
    if (p.count(shape) && mine[shape] > 0) m["speedup_vs_parent"] = p[shape] / mine[shape];
    if (s.count(shape) && mine[shape] > 0) m["speedup_vs_seed"] = s[shape] / mine[shape];
  }
}

// The reply of a workflow's last recorded attempt (`done`: its attempts, oldest first) when that
// attempt is the one about to be made
// (same pass, attempt number and prompt) and its outcome never reached the step's saved state:
// the process stopped in between. Infrastructure failures are asked again, as they always are.
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

}  // namespace

namespace detail {
std::vector<Config> top_configs(const json& summary, const KernelContext& ctx) {
  std::vector<Config> out;
  if (!summary.contains("top")) return out;
  for (const auto& t : summary["top"]) {
    Config c;
    for (const auto& p : ctx.tuning) {
      if (t["config"].contains(p.name))
        c[p.name] = t["config"][p.name].get<int64_t>();
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

json parse_object(const std::string& text) {
  json j = json::parse(text.empty() ? "{}" : text, nullptr, false);
  return j.is_object() ? j : json::object();
}

std::string first_line(const std::string& text) {
  auto lines = split_lines(text);
  return lines.empty() ? "" : lines.front();
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
  bool timed =
      summary.contains("bench") && summary["bench"].is_array() && !summary["bench"].empty();
  e.disposition = summary.value("disposition", timed ? "passed" : "not_run");
  e.gflops = std::nan("");
  if (timed) {
    e.shape = summary["bench"][0].value("shape", "");
    e.gflops = summary["bench"][0].value("gflops", std::nan(""));
  }
  if (summary.contains("device") && summary["device"].is_object())
    e.device = summary["device"].value("name", "");
  auto blob = store_->put_blob(summary.dump());
  if (!blob) return;
  e.summary_blob = *blob;
  (void)store_->add_evaluation(e);
}

// One rule for log, show and report (report/build.cpp reads the result the same way).
json Workspace::summary(const CheckpointRecord& c) const { return checkpoint_summary(*store_, c); }

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
  if (!force) {
    json s = summary(*c);
    if ((s.contains("bench") || (opts.compile_only && s.value("compile_only", false)))) {
      Evaluation ev;
      ev.disposition =
          disposition_from_string(s.value("disposition", "passed")).value_or(Disposition::passed);
      ev.message = s.value("message", "");
      ev.summary = s;
      return ev;
    }
  }
  if (auto s = lock(); !s) return s;
  if (!files) return files.status();
  Evaluation ev = evaluate(files->first, files->second, opts, std::nullopt, id);
  if (c->parent) {
    auto ps = evaluate_checkpoint(*c->parent, opts, false, "parent");
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
  auto ss = evaluate_checkpoint(**seed, opts, false, "parent");
  return ss ? ss->summary : json::object();
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

// ---------------------------------------------------------------------------------------------
// One step: the LLM passes, the evaluation, the checkpoint. Resumable from its state.

struct Workspace::StepContext {
  std::string name;  // the transformation
  const ApplyOptions* opts = nullptr;
  int64_t workflow_id = 0;
  std::map<std::string, std::vector<int64_t>> tuning;  // the step's overrides
  LlmDriver* driver = nullptr;
  int attempts = 3;  // charged attempts allowed
  // The resumable state: {"transformation", "parent", "failures", "pass", "feedback",
  // "source_blob"}; saved through `save` after every recorded attempt.
  json state = json::object();
  std::function<void(const json&)> save;
};

ApplyResult Workspace::apply_step(StepContext& sc) {
  ApplyResult res;
  res.workflow_id = sc.workflow_id;
  const ApplyOptions& opts = *sc.opts;
  auto fail = [&](Disposition d, std::string msg) {
    res.disposition = d;
    res.message = std::move(msg);
    return res;
  };
  auto fail_kind = [&](ErrorKind k, std::string msg) {
    res.input_error = k == ErrorKind::input;
    res.environment_error = k == ErrorKind::environment;
    return fail(Disposition::not_run, std::move(msg));
  };
  auto cancelled = [&] { return opts.eval.cancelled && opts.eval.cancelled(); };
  // Stopped between passes or configurations: every row written so far stays, no checkpoint.
  auto stop = [&](int64_t at, const std::string& where) {
    res.cancelled = true;
    return fail(Disposition::not_run,
                fmt::format("{}: {} stopped {}; nothing was checkpointed and the workspace stays "
                            "at checkpoint {}",
                            kCancelledMessage, sc.name, where, at));
  };
  auto lib = library();
  if (!lib) return fail_kind(ErrorKind::input, lib.error());
  auto tr = find_transformation(*lib, sc.name);
  if (!tr) return fail_kind(ErrorKind::input, tr.error());
  const Transformation& T = *tr;
  auto head_cp = head();
  if (!head_cp) return fail_kind(head_cp.error_kind(), head_cp.error());
  auto files = checkpoint_files(head_cp->id);
  if (!files) return fail_kind(files.error_kind(), files.error());
  const KernelContext& ctx = files->first;
  if (!T.supports(ctx.backend))
    return fail_kind(ErrorKind::input,
                     fmt::format("transformation {} does not support backend {} (it supports: {})",
                                 T.name, ctx.backend, join(T.backends, ", ")));
  // `requires` names a CUDA architecture: on another backend it is refused before any probing.
  if (auto why = requirement_problem(T, ctx.backend, "", ""); !why.empty())
    return fail_kind(ErrorKind::input, why);

  // The device: this machine's (probed), shown in prompts unless a campaign's facts are given.
  auto be = backend();
  if (!be) return fail_kind(be.error_kind(), be.error());
  if (opts.eval.compile_only && opts.prompt_device)
    set_device(opts.eval.device, *opts.prompt_device);
  auto selector = device_selector(opts.eval);  // with --devices, the first of them
  if (!selector) return fail_kind(selector.error_kind(), selector.error());
  auto probed = device(*selector);
  if (!probed) return fail_kind(ErrorKind::environment, probed.error());
  std::optional<DeviceFacts> prompt_device = opts.prompt_device;
  if (!prompt_device && starts_with(opts.llm, "replay:")) {
    fs::path recorded = fs::path(opts.llm.substr(7)) / "device.json";
    if (fs::exists(recorded)) {
      auto facts = read_device_facts(recorded);
      if (!facts) return fail_kind(ErrorKind::input, facts.error());
      prompt_device = *facts;
    }
  }
  DeviceFacts dev = prompt_device ? *prompt_device : *probed;
  // A transformation for a newer architecture than the device's (the facts the prompts show: the
  // probed device, --prompt-device or a replayed recording's) stops here, before any prompt.
  if (auto why = requirement_problem(T, ctx.backend, dev.name, dev.arch); !why.empty())
    return fail_kind(ErrorKind::input, why);
  if (!opts.record_dir.empty() && !fs::exists(opts.record_dir / "device.json"))
    (void)write_file(opts.record_dir / "device.json", dev.to_json().dump(2) + "\n");
  auto base_eval = eval_options(opts.eval);
  if (!base_eval) return fail_kind(base_eval.error_kind(), base_eval.error());

  // The parent's evaluation: the baseline for speedups and the configurations carried forward.
  progress_.print(fmt::format("evaluating checkpoint {} (parent) ...", head_cp->id));
  auto parent_eval = evaluate_checkpoint(head_cp->id, *base_eval, false, "parent");
  if (cancelled()) return stop(head_cp->id, "while evaluating the parent");
  if (!parent_eval) return fail_kind(ErrorKind::environment, parent_eval.error());
  if (parent_eval->disposition != Disposition::passed)
    return fail_kind(
        ErrorKind::environment,
        fmt::format("the parent checkpoint {} does not pass its own evaluation ({}): {}",
                    head_cp->id, to_string(parent_eval->disposition), parent_eval->message));

  // The new context: the transformation's tuning parameters, constraint and workspace join.
  KernelContext ctx2 = transformed_context(T, ctx);
  EvalOptions eo = *base_eval;
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
  std::vector<Config> top = top_configs(parent_eval->summary, ctx2);
  for (const auto& name : T.retires) {
    auto p = std::find_if(ctx2.tuning.begin(), ctx2.tuning.end(),
                          [&](const TuningParam& q) { return q.name == name; });
    if (p == ctx2.tuning.end()) continue;
    eo.tuning_overrides.erase(name);
    for (auto& c : top) c[name] = p->default_value;
  }
  eo.must_include = carried_configs(top, fresh, eo.budget);

  auto regions0 = split_regions(files->second, ctx.source_file);
  if (!regions0) return fail_kind(ErrorKind::input, regions0.error());
  // Helper snippets are peak's to insert, before the first pass; the model only calls them.
  regions0 = insert_helpers(T, ctx.backend, *regions0);
  const std::vector<std::pair<std::string, std::string>> facts = (*be)->prompt_facts(dev);
  const std::string plan_text = plan_reference((*be)->plan_dialect());

  // Where the step stands: from its saved state when it belongs to this transformation on this
  // checkpoint (a rerun or a resume), else from the start.
  const int passes = static_cast<int>(T.passes.size());
  int failures = 0, pass = 1;
  std::string feedback;
  SourceRegions regions = *regions0;
  json& st = sc.state;
  if (st.value("transformation", "") == T.name && st.value("parent", int64_t{-1}) == head_cp->id) {
    failures = st.value("failures", 0);
    pass = std::clamp(st.value("pass", 1), 1, passes + 1);
    feedback = st.value("feedback", "");
    if (auto blob = st.value("source_blob", ""); !blob.empty()) {
      auto text = store_->get_blob(blob);
      auto r = text ? split_regions(*text, ctx.source_file)
                    : Result<SourceRegions>(Error{text ? "" : text.error()});
      if (r) {
        regions = *r;
      } else {
        pass = 1;  // the saved source is unusable: the attempt starts over
      }
    }
  } else {
    st = json::object();
  }
  auto save = [&] {
    st["transformation"] = T.name;
    st["parent"] = head_cp->id;
    st["failures"] = failures;
    st["pass"] = pass;
    st["feedback"] = feedback;
    if (auto b = store_->put_blob(join_regions(regions))) st["source_blob"] = *b;
    if (sc.save) sc.save(st);
  };
  auto charge = [&](std::string next_feedback) {
    ++failures;
    feedback = std::move(next_feedback);
    regions = *regions0;
    pass = 1;
    save();
  };
  // An infrastructure failure: recorded apart, charged to nobody, the state kept as it was.
  auto stop_for_infrastructure = [&](const std::string& what) {
    res.environment_error = true;
    res.attempts = failures + 1;
    return fail(Disposition::not_run,
                fmt::format("{}\nNothing was charged to {}; the workflow stays where it was. Fix "
                            "the cause and run the same command again to continue",
                            what, T.name));
  };
  AttemptRecord base;
  base.workflow_id = sc.workflow_id;
  base.parent_checkpoint = head_cp->id;
  base.transformation = T.name;

  while (failures < sc.attempts) {
    const int attempt_no = failures + 1;
    res.attempts = attempt_no;
    if (pass <= passes) {
      if (cancelled()) return stop(head_cp->id, fmt::format("before pass {}/{}", pass, passes));
      const Pass& P = T.passes[static_cast<size_t>(pass - 1)];
      PromptInput in;
      in.transformation = &T;
      in.pass_index = pass;
      in.context = &ctx2;
      in.source = &regions;
      in.backend = ctx.backend;
      in.backend_translation = (*be)->translation_table();
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
      // Answers to this very prompt that the workflow already used (it resumed after them).
      std::vector<AttemptRecord> done;
      if (sc.workflow_id > 0)
        if (auto rows = store_->attempts(sc.workflow_id)) done = std::move(*rows);
      req.served_before =
          static_cast<int>(std::count_if(done.begin(), done.end(), [&](const AttemptRecord& a) {
            return a.prompt_key == req.key && !a.infrastructure;
          }));
      req.step_label = fmt::format("{} pass {}/{} ({})", T.name, pass, passes, to_string(P.region));
      // A reply recorded just before the process stopped (killed after the attempt's row and
      // before the step's state was saved): it is this very attempt, and its reply is used
      // again instead of asking the model a second time; no second row is recorded.
      std::optional<LlmReply> recorded = unsaved_reply(*store_, done, pass, attempt_no, req.key);
      if (recorded)
        progress_.print(fmt::format("  {} attempt {}: the reply recorded before the stop is used",
                                    req.step_label, attempt_no));
      else
        progress_.status(fmt::format("{}: asking the LLM ({}, attempt {})", req.step_label,
                                     sc.driver->describe(), attempt_no),
                         true);
      LlmReply reply = recorded ? *recorded : sc.driver->complete(req);
      progress_.clear();
      if (cancelled()) return stop(head_cp->id, fmt::format("during pass {}/{}", pass, passes));
      if (reply.status == LlmStatus::pending) {
        save();
        res.pending = true;
        res.prompt_id = reply.pending_id;
        res.prompt_path = reply.pending_path;
        res.disposition = Disposition::not_run;
        res.message = reply.error;
        return res;
      }
      AttemptRecord ar = base;
      ar.pass_index = pass;
      ar.attempt = attempt_no;
      ar.region = std::string(to_string(P.region));
      ar.driver = reply.driver;
      ar.model = reply.model;
      ar.producer = reply.producer;
      ar.prompt_key = req.key;
      if (auto pb = store_->put_blob(req.system + "\n\n" + req.user)) ar.prompt_blob = *pb;
      if (!reply.text.empty())
        if (auto rb = store_->put_blob(reply.text)) ar.reply_blob = *rb;
      ar.prompt_tokens = reply.prompt_tokens;
      ar.completion_tokens = reply.completion_tokens;
      ar.latency_s = reply.latency_s;
      if (!reply.ok()) {
        ar.disposition = std::string(to_string(Disposition::llm_error));
        ar.error = reply.error;
        ar.infrastructure = reply.infrastructure;
        if (!recorded) (void)store_->add_attempt(ar);
        fault_point("apply.attempt-recorded");
        progress_.print(fmt::format("  {} attempt {}: {}: {}", req.step_label, attempt_no,
                                    reply.infrastructure ? "infrastructure" : "llm_error",
                                    first_line(reply.error)));
        if (reply.infrastructure) {
          save();
          return stop_for_infrastructure(reply.error);
        }
        charge("");  // the model's mistake (a truncated reply, a refusal): asked afresh
        continue;
      }
      SpliceOutcome sp = splice_reply(reply.text, regions, P.region);
      ar.disposition = std::string(to_string(sp.disposition));
      ar.error = sp.message;
      if (!recorded) (void)store_->add_attempt(ar);
      fault_point("apply.attempt-recorded");
      if (sp.disposition != Disposition::passed) {
        progress_.print(fmt::format("  {} attempt {}: {}: {}", req.step_label, attempt_no,
                                    to_string(sp.disposition), first_line(sp.message)));
        charge(feedback_for(sp.disposition, sp.message));
        continue;
      }
      regions = sp.source;
      ++pass;
      save();
      continue;
    }

    // All passes done: compile, validate, tune, time.
    progress_.print(
        fmt::format("{}: evaluating the candidate (attempt {}) ...", T.name, attempt_no));
    std::string new_source = join_regions(regions);
    AttemptRecord er = base;
    er.pass_index = 0;
    er.attempt = attempt_no;
    er.driver = "peak";
    if (auto sb = store_->put_blob(new_source)) er.reply_blob = *sb;
    er.disposition = "not_run";
    auto eval_attempt = store_->add_attempt(er);
    std::optional<int64_t> eval_attempt_id;
    if (eval_attempt) eval_attempt_id = *eval_attempt;
    // Tests inject a harness-side timeout here, in place of the first evaluation.
    Evaluation ev;
    if (fault_active("eval.task-timeout")) {
      ev.disposition = Disposition::timeout;
      ev.message = "a runner task did not finish within its deadline (injected: PEAK_FAULT)";
    } else {
      ev = evaluate(ctx2, new_source, eo, eval_attempt_id);
    }
    auto cancelled_eval = [&] {
      er.error = kCancelledMessage;
      (void)store_->add_attempt(er);
      return stop(head_cp->id, "while evaluating the candidate");
    };
    if (cancelled()) return cancelled_eval();
    if (harness_suspect(ev.disposition)) {
      // A slow or disturbed machine can time out or lose a runner: evaluate once more before
      // the candidate is charged. The first outcome is recorded as the harness's.
      AttemptRecord ir = er;
      ir.disposition = std::string(to_string(ev.disposition));
      ir.error = "evaluated again before charging the candidate: " + first_line(ev.message);
      ir.infrastructure = true;
      (void)store_->add_attempt(ir);
      progress_.print(fmt::format("  {} attempt {}: {} (evaluating again before charging it)",
                                  T.name, attempt_no, to_string(ev.disposition)));
      ev = evaluate(ctx2, new_source, eo, eval_attempt_id);
      if (cancelled()) return cancelled_eval();
    }
    if (ev.disposition == Disposition::passed) {
      add_speedups(ev.summary, parent_eval->summary, seed_summary(*base_eval));
      ev.summary["transformation"] = {{"name", T.name}, {"version", T.version}};
      ev.summary["attempts"] = attempt_no;
      auto id =
          make_checkpoint(head_cp->id, T.name, "apply " + T.name, ctx2, new_source, ev.summary);
      if (!id) return fail_kind(ErrorKind::environment, id.error());
      record_evaluation(*id,
                        sc.workflow_id > 0 ? std::optional<int64_t>(sc.workflow_id) : std::nullopt,
                        "checkpoint", eo, ev.summary);
      if (eval_attempt_id) (void)store_->attach_attempt_to_checkpoint(*eval_attempt_id, *id);
      // HEAD's branch moves to the new checkpoint (a detached HEAD moves itself) together with
      // the working files. Edits made to the files while the step ran are stashed first.
      auto h = store_->head();
      RefUpdate u;
      if (h && !starts_with(*h, "#"))
        u.branches = {{*h, *id}};
      else
        u.head = fmt::format("#{}", *id);
      ctx2.dir = root_;
      std::map<std::string, std::string> target = {{"kernel.toml", to_toml(ctx2)},
                                                   {ctx2.source_file, new_source}};
      if (auto w = working_state(); w && !w->clean)
        if (auto stashed = stash_push("changes made while " + T.name + " ran")) {
          res.stash = *stashed;
          progress_.print(
              fmt::format("the working files changed while {} ran: they are stash "
                          "{} (`peak stash pop` brings them back)",
                          T.name, *stashed));
        }
      if (auto s = switch_files(target, u); !s) return fail_kind(s.kind(), s.message());
      st["checkpoint"] = *id;
      res.disposition = Disposition::passed;
      res.checkpoint = *id;
      res.summary = ev.summary;
      res.message = ev.message;
      return res;
    }
    // Record the evaluation's outcome as its own attempt row (append-only).
    er.disposition = std::string(to_string(ev.disposition));
    er.error = ev.message;
    if (ev.disposition == Disposition::not_run) {
      // The evaluation could not run (device, toolchain, reference): not the candidate's fault.
      er.infrastructure = true;
      (void)store_->add_attempt(er);
      return stop_for_infrastructure("the candidate could not be evaluated: " + ev.message);
    }
    (void)store_->add_attempt(er);
    // Keep the failed candidate for inspection.
    (void)write_file(root_ / ".peak" / "failed" /
                         fmt::format("{}-{}-attempt{}{}", sc.workflow_id, T.name, attempt_no,
                                     fs::path(ctx.source_file).extension().string()),
                     new_source);
    progress_.print(fmt::format("  {} attempt {}: {}: {}", T.name, attempt_no,
                                to_string(ev.disposition), first_line(ev.message)));
    charge(feedback_for(ev.disposition, ev.message));
  }
  // Every attempt failed: the last charged failure is the step's disposition.
  res.disposition = Disposition::not_run;
  std::string last;
  if (auto attempts = store_->attempts(sc.workflow_id > 0 ? std::optional<int64_t>(sc.workflow_id)
                                                          : std::nullopt)) {
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
      T.name, failures, head_cp->id, last);
  return res;
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

}  // namespace

ApplyResult Workspace::apply(const std::string& name, const ApplyOptions& opts, int64_t workflow_id,
                             const std::map<std::string, std::vector<int64_t>>& tuning) {
  ApplyResult res;
  auto fail_kind = [&](ErrorKind k, std::string msg) {
    res.input_error = k == ErrorKind::input;
    res.environment_error = k == ErrorKind::environment;
    res.disposition = Disposition::not_run;
    res.message = std::move(msg);
    return res;
  };
  // Everything that can be checked without the device is checked first: the transformation,
  // the driver spec, its key and its endpoint, the working files.
  auto lib = library();
  if (!lib) return fail_kind(ErrorKind::input, lib.error());
  auto tr = find_transformation(*lib, name);
  if (!tr) return fail_kind(ErrorKind::input, tr.error());
  if (auto s = check_overrides({*tr}, opts.eval.tuning); !s)
    return fail_kind(s.kind(), s.message());
  auto drv = opts.make_llm ? opts.make_llm() : make_driver(opts.llm, opts.driver);
  if (!drv) return fail_kind(drv.error_kind(), drv.error());
  std::unique_ptr<LlmDriver> driver = std::move(*drv);
  if (auto s = preflight(*driver); !s) return fail_kind(s.kind(), s.message());
  if (!opts.record_dir.empty())
    driver = make_recording_driver(std::move(driver), opts.record_dir, opts.record_note);
  if (auto s = lock(); !s) return fail_kind(s.kind(), s.message());
  auto head_cp = head();
  if (!head_cp) return fail_kind(head_cp.error_kind(), head_cp.error());
  {
    auto w = working_state();
    if (!w) return fail_kind(w.error_kind(), w.error());
    if (!w->clean) {
      if (!opts.force)
        return fail_kind(
            ErrorKind::input,
            fmt::format("apply {} starts from HEAD and would replace local changes to {}. Keep "
                        "them with `peak commit -m MESSAGE`, set them aside with `peak stash`, "
                        "or run again with --force (they are stashed first)",
                        name, join(w->changes, ", ")));
      auto id = stash_push("auto-stash before apply " + name);
      if (!id) return fail_kind(id.error_kind(), id.error());
      res.stash = *id;
    }
  }

  // The command that continues this step, with the options it runs with.
  const std::string rerun =
      fmt::format("peak apply {} --llm {}{}", name, opts.llm, options_text(opts.rerun_options));
  StepContext sc;
  sc.name = name;
  sc.opts = &opts;
  sc.tuning = tuning;
  sc.driver = driver.get();
  sc.attempts = opts.attempts;
  bool standalone = workflow_id == 0;
  std::string status_before;
  if (standalone) {
    // A rerun continues the workflow of the same transformation on the same checkpoint with
    // the same driver, unless it passed.
    auto all = workflows();
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
      if (it->kind != "apply") continue;
      json args = parse_object(it->args_json);
      if (args.value("transformation", "") != name ||
          args.value("parent", int64_t{-1}) != head_cp->id ||
          args.value("llm", "") != driver->describe())
        continue;
      if (it->status == "passed") break;
      workflow_id = it->id;
      status_before = it->status;
      sc.state = parse_object(it->state_json);
      break;
    }
    if (workflow_id != 0 && status_before == "failed") {
      int used = sc.state.value("failures", 0);
      if (opts.attempts <= used) {
        res.workflow_id = workflow_id;
        res.attempts = used;
        res.disposition = Disposition::not_run;
        if (auto attempts = store_->attempts(workflow_id))
          for (auto it = attempts->rbegin(); it != attempts->rend(); ++it)
            if (!it->infrastructure && it->disposition != "passed" &&
                it->disposition != "not_run") {
              res.disposition =
                  disposition_from_string(it->disposition).value_or(Disposition::not_run);
              break;
            }
        res.message = fmt::format(
            "{} already failed {} attempt(s) on checkpoint {} (workflow {}); nothing new was "
            "tried. {}",
            name, used, head_cp->id, workflow_id, how_to_go_on(rerun, used));
        return res;
      }
    }
    ProcessIdentity me = this_process();
    if (workflow_id == 0) {
      WorkflowRecord w;
      w.kind = "apply";
      w.args_json = json{{"transformation", name},
                         {"llm", driver->describe()},
                         {"parent", head_cp->id},
                         {"options", opts.rerun_options}}
                        .dump();
      w.status = "running";
      w.owner_pid = me.pid;
      w.owner_host = me.host;
      w.owner_start = me.start;
      auto id = store_->add_workflow(w);
      if (!id) return fail_kind(id.error_kind(), id.error());
      workflow_id = *id;
    } else {
      (void)store_->set_workflow_owner(workflow_id, me.pid, me.host, me.start);
      (void)store_->update_workflow(workflow_id, "running", state_text(sc.state));
      progress_.print(fmt::format("continuing workflow {} ({} on checkpoint {})", workflow_id, name,
                                  head_cp->id));
    }
    register_workflow(workflow_id, true);
    sc.save = [this, workflow_id](const json& st) {
      (void)store_->update_workflow(workflow_id, "running", state_text(st));
    };
  }
  sc.workflow_id = workflow_id;
  ApplyResult r = apply_step(sc);
  r.stash = res.stash;
  if (standalone) {
    std::string status = r.disposition == Disposition::passed                    ? "passed"
                         : r.pending                                             ? "waiting"
                         : (r.environment_error || r.input_error || r.cancelled) ? "interrupted"
                                                                                 : "failed";
    (void)store_->update_workflow(workflow_id, status, state_text(sc.state));
    register_workflow(workflow_id, false);
    if (status == "failed" && r.disposition != Disposition::not_run)
      r.message += "\n" + how_to_go_on(rerun, r.attempts);
  }
  return r;
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
  auto lib = library();
  if (!lib) return fail_kind(ErrorKind::input, lib.error());
  std::vector<Transformation> steps;
  for (const auto& st : seq.steps) {
    auto tr = find_transformation(*lib, st.transformation);
    if (!tr)
      return fail_kind(ErrorKind::input, fmt::format("{}: {}", seq.path.string(), tr.error()));
    steps.push_back(*tr);
  }
  if (opts.from_step >= static_cast<int>(seq.steps.size()))
    return fail_kind(
        ErrorKind::input,
        fmt::format("--from {}: sequence {} has {} step{}, numbered from 0 (the "
                    "first); nothing was run",
                    opts.from_step, seq.name, seq.steps.size(), seq.steps.size() == 1 ? "" : "s"));
  if (auto s = check_overrides(steps, opts.apply.eval.tuning); !s)
    return fail_kind(s.kind(), s.message());
  for (size_t i = 0; i < seq.steps.size(); ++i) {
    const SequenceStep& st = seq.steps[i];
    auto bad = [&](const std::string& why) {
      return fail_kind(ErrorKind::input, fmt::format("{}: step {} ({}): {}", seq.path.string(),
                                                     i + 1, st.transformation, why));
    };
    if (!st.strategy.empty())
      if (auto s = make_strategy(st.strategy); !s) return bad(s.error());
    if (!st.strategy_budget.empty())
      if (auto b = Budget::parse(st.strategy_budget); !b) return bad(b.error());
  }
  const ApplyOptions& ao0 = opts.apply;
  auto drv = ao0.make_llm ? ao0.make_llm() : make_driver(ao0.llm, ao0.driver);
  if (!drv) return fail_kind(drv.error_kind(), drv.error());
  std::unique_ptr<LlmDriver> driver = std::move(*drv);
  if (auto s = preflight(*driver); !s) return fail_kind(s.kind(), s.message());
  if (!ao0.record_dir.empty())
    driver = make_recording_driver(std::move(driver), ao0.record_dir, ao0.record_note);
  if (auto s = lock(); !s) return fail_kind(s.kind(), s.message());
  if (auto w = working_state(); !w) {
    return fail_kind(w.error_kind(), w.error());
  } else if (!w->clean) {
    if (!ao0.force)
      return fail_kind(
          ErrorKind::input,
          fmt::format("run {} starts from HEAD and would replace local changes to {}. Keep them "
                      "with `peak commit -m MESSAGE`, set them aside with `peak stash`, or run "
                      "again with --force (they are stashed first)",
                      seq.name, join(w->changes, ", ")));
    if (auto id = stash_push("auto-stash before run " + seq.name); !id)
      return fail_kind(id.error_kind(), id.error());
  }

  int64_t wid = 0;
  int start = opts.from_step;
  json step_state = json::object();
  ProcessIdentity me = this_process();
  if (opts.resume) {
    for (const auto& w : [&] {
           auto all = workflows();
           std::reverse(all.begin(), all.end());
           return all;
         }()) {
      if (w.kind != "run") continue;
      json st = parse_object(w.state_json);
      if (w.status == "passed" || st.value("sequence", "") != seq.name) break;
      wid = w.id;
      start = opts.from_step > 0 ? opts.from_step : st.value("next_step", 0);
      if (st.value("next_step", 0) == start) step_state = st.value("step", json::object());
      break;
    }
    if (wid == 0)
      return fail_kind(ErrorKind::input,
                       fmt::format("no unfinished run of sequence {} to resume; start one with "
                                   "`peak run {}`",
                                   seq.name, seq.path.string()));
    (void)store_->set_workflow_owner(wid, me.pid, me.host, me.start);
    progress_.print(fmt::format("resuming run {} of {} at step {}", wid, seq.name, start + 1));
  } else {
    WorkflowRecord w;
    w.kind = "run";
    w.args_json = json{{"sequence", seq.path.string()},
                       {"llm", driver->describe()},
                       {"options", ao0.rerun_options}}
                      .dump();
    w.status = "running";
    w.state_json = json{{"sequence", seq.name}, {"next_step", start}}.dump();
    w.owner_pid = me.pid;
    w.owner_host = me.host;
    w.owner_start = me.start;
    auto id = store_->add_workflow(w);
    if (!id) return fail_kind(id.error_kind(), id.error());
    wid = *id;
  }
  rr.workflow_id = wid;
  register_workflow(wid, true);
  auto state = [&](int next, const json& step) {
    json j = {{"sequence", seq.name}, {"next_step", next}};
    if (!step.empty()) j["step"] = step;
    return j.dump();
  };
  (void)store_->update_workflow(wid, "running", state(start, step_state));
  for (int i = start; i < static_cast<int>(seq.steps.size()); ++i) {
    const SequenceStep& st = seq.steps[static_cast<size_t>(i)];
    StepContext sc;
    sc.name = st.transformation;
    sc.opts = &ao0;
    sc.workflow_id = wid;
    sc.tuning = step_tuning(seq, st);
    sc.driver = driver.get();
    // The command line wins over the sequence file, which wins over the default.
    sc.attempts = opts.attempts      ? *opts.attempts
                  : st.attempts > 0  ? st.attempts
                  : seq.attempts > 0 ? seq.attempts
                                     : ao0.attempts;
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
    if (!st.strategy_budget.empty() && ao0.eval.strategy_budget.empty())
      step_opts.eval.strategy_budget = st.strategy_budget;
    sc.opts = &step_opts;
    sc.state = i == start ? step_state : json::object();
    sc.save = [&, i](const json& s) { (void)store_->update_workflow(wid, "running", state(i, s)); };
    progress_.print(fmt::format("step {}/{}: {}", i + 1, seq.steps.size(), st.transformation));
    ApplyResult ar = apply_step(sc);
    rr.steps.push_back(ar);
    rr.input_error = ar.input_error;
    rr.environment_error = ar.environment_error;
    std::string resume = fmt::format("peak run {} --resume --llm {}{}", seq.path.string(), ao0.llm,
                                     options_text(ao0.rerun_options));
    if (ar.cancelled) {
      (void)store_->update_workflow(wid, "interrupted", state(i, sc.state));
      register_workflow(wid, false);
      rr.cancelled = true;
      rr.message = fmt::format("step {} ({}): {}; continue with `{}`", i + 1, st.transformation,
                               ar.message, resume);
      return rr;
    }
    if (ar.pending) {
      (void)store_->update_workflow(wid, "waiting", state(i, sc.state));
      register_workflow(wid, false);
      rr.pending = true;
      rr.prompt_id = ar.prompt_id;
      rr.prompt_path = ar.prompt_path;
      rr.message = ar.message;
      return rr;
    }
    if (ar.disposition != Disposition::passed) {
      bool stopped = ar.environment_error || ar.input_error;
      (void)store_->update_workflow(wid, stopped ? "interrupted" : "failed", state(i, sc.state));
      register_workflow(wid, false);
      rr.disposition = ar.disposition;
      rr.message = stopped ? fmt::format("step {} ({}) stopped: {}\nContinue with `{}`.", i + 1,
                                         st.transformation, ar.message, resume)
                           : fmt::format(
                                 "step {} ({}) failed: {}\nTo go on: `{} --attempts {}` tries more "
                                 "times, or edit the working files by hand and `peak commit -m "
                                 "MESSAGE`, then `{} --from {}` goes on with the next step.",
                                 i + 1, st.transformation, ar.message, resume, ar.attempts + 3,
                                 resume, i + 1);
      return rr;
    }
    if (!st.keep && ar.checkpoint) {
      // The step stays in the history, but the sequence goes on from where it started.
      auto made = store_->checkpoint(*ar.checkpoint);
      if (made && made->parent) {
        if (auto s = move_head(*made->parent); !s) {
          rr.disposition = Disposition::not_run;
          rr.environment_error = true;
          rr.message = s.message();
          return rr;
        }
        progress_.print(fmt::format(
            "step {} ({}): checkpoint {} is kept aside (keep = false); the next step builds on "
            "checkpoint {}",
            i + 1, st.transformation, *ar.checkpoint, *made->parent));
      }
    }
    rr.steps_done = i + 1;
    (void)store_->update_workflow(wid, "running", state(i + 1, json::object()));
  }
  (void)store_->update_workflow(wid, "passed",
                                state(static_cast<int>(seq.steps.size()), json::object()));
  register_workflow(wid, false);
  rr.disposition = Disposition::passed;
  rr.steps_done = static_cast<int>(seq.steps.size());
  rr.message = fmt::format("{} steps of {} done", seq.steps.size(), seq.name);
  return rr;
}

ApplyResult Workspace::commit(const std::string& message, const EvalChoices& choices) {
  ApplyResult res;
  auto fail_kind = [&](ErrorKind k, std::string msg) {
    res.input_error = k == ErrorKind::input;
    res.environment_error = k == ErrorKind::environment;
    res.disposition = Disposition::not_run;
    res.message = std::move(msg);
    return res;
  };
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
  if (parent_eval) add_speedups(ev.summary, parent_eval->summary, seed_summary(*eo0));
  ev.summary["transformation"] = {{"name", "manual"}, {"message", message}};
  auto id = make_checkpoint(head_cp->id, "manual", message.empty() ? "manual edit" : message, *ctx,
                            *src, ev.summary, &*toml);
  if (!id) return fail_kind(id.error_kind(), id.error());
  record_evaluation(*id, std::nullopt, "checkpoint", eo, ev.summary);
  // The working files stay as they are; HEAD (its branch, or itself when detached) moves.
  auto h = store_->head();
  RefUpdate u;
  if (h && !starts_with(*h, "#"))
    u.branches = {{*h, *id}};
  else
    u.head = fmt::format("#{}", *id);
  if (auto s = store_->update_refs(u); !s) return fail_kind(s.kind(), s.message());
  res.checkpoint = *id;
  res.summary = ev.summary;
  return res;
}

std::map<std::string, std::vector<int64_t>> Workspace::step_tuning(const Sequence& seq,
                                                                   const SequenceStep& st) {
  std::map<std::string, std::vector<int64_t>> out = st.tuning;
  if (seq.tuning.empty()) return out;
  // The sequence's value sets apply to the parameters the step's context will have.
  std::set<std::string> names;
  if (auto h = head())
    if (auto files = checkpoint_files(h->id))
      for (const auto& p : files->first.tuning) names.insert(p.name);
  if (auto lib = library())
    if (auto t = find_transformation(*lib, st.transformation))
      for (const auto& p : t->tuning) names.insert(p.name);
  for (const auto& [name, values] : seq.tuning)
    if (names.count(name) && !out.count(name)) out[name] = values;
  return out;
}

}  // namespace peak
