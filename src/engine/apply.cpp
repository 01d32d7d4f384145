// Applying transformations and sequences, manual commits, and history operations.
#include <algorithm>

#include <fmt/format.h>

#include "engine/workspace.h"
#include "transform/prompt.h"
#include "transform/reply.h"
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

std::string feedback_for(Disposition d, const std::string& message) {
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

}  // namespace

Result<Evaluation> Workspace::evaluate_checkpoint(int64_t id, const EvalOptions& opts, bool force) {
  auto c = store_->checkpoint(id);
  if (!c) return Error{c.error()};
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
  auto files = checkpoint_files(id);
  if (!files) return Error{files.error()};
  Evaluation ev = evaluate(files->first, files->second, opts, std::nullopt, id);
  if (c->parent) {
    auto ps = evaluate_checkpoint(*c->parent, opts, false);
    if (ps) add_speedups(ev.summary, ps->summary, seed_summary(opts));
  } else {
    add_speedups(ev.summary, ev.summary, ev.summary);
  }
  if (opts.cancelled && opts.cancelled()) return ev;  // a partial evaluation is not kept
  auto blob = store_->put_blob(ev.summary.dump());
  if (blob) (void)store_->set_meta(fmt::format("eval.{}", id), *blob);
  return ev;
}

Result<DeviceFacts> read_device_facts(const fs::path& path) {
  auto text = read_file(path);
  if (!text) return Error{text.error()};
  json j = json::parse(*text, nullptr, false);
  if (j.is_object() && j.contains("device")) j = j["device"];
  if (!j.is_object() || !j.contains("name"))
    return make_error(
        fmt::format("{} holds no device facts (a JSON object with \"name\", "
                    "\"subgroup_size\", ... as a runner's probe prints)",
                    path.string()));
  return DeviceFacts::from_json(j);
}

json Workspace::seed_summary(const EvalOptions& opts) {
  auto seed = store_->find_tag("seed");
  if (!seed || !*seed) return json::object();
  auto ss = evaluate_checkpoint(**seed, opts, false);
  return ss ? ss->summary : json::object();
}

json Workspace::summary(const CheckpointRecord& c) const { return checkpoint_summary(*store_, c); }

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

ApplyResult Workspace::apply(const std::string& name, const ApplyOptions& opts, int64_t workflow_id,
                             const std::map<std::string, std::vector<int64_t>>& tuning) {
  ApplyResult res;
  auto fail = [&](Disposition d, std::string msg) {
    res.disposition = d;
    res.message = std::move(msg);
    return res;
  };
  auto cancelled = [&] { return opts.eval.cancelled && opts.eval.cancelled(); };
  // Stopped between passes or configurations: every row written so far stays, no checkpoint.
  auto stop = [&](int64_t at, const std::string& where) {
    res.cancelled = true;
    return fail(Disposition::not_run,
                fmt::format("{}: {} stopped {}; nothing was checkpointed and the workspace stays "
                            "at checkpoint {}",
                            kCancelledMessage, name, where, at));
  };
  auto lib = library();
  auto tr = lib ? find_transformation(*lib, name) : Result<Transformation>(Error{lib.error()});
  if (!tr) {
    res.input_error = true;
    return fail(Disposition::not_run, tr.error());
  }
  const Transformation& T = *tr;
  auto head_cp = head();
  if (!head_cp) return fail(Disposition::not_run, head_cp.error());
  auto files = checkpoint_files(head_cp->id);
  if (!files) return fail(Disposition::not_run, files.error());
  const KernelContext& ctx = files->first;
  if (!T.supports(ctx.backend)) {
    res.input_error = true;
    return fail(Disposition::not_run,
                fmt::format("transformation {} does not support backend {} (it supports: {})",
                            T.name, ctx.backend, join(T.backends, ", ")));
  }
  auto be = backend();
  if (opts.eval.compile_only && opts.prompt_device)
    set_device(opts.eval.device, *opts.prompt_device);
  auto probed = be ? device(opts.eval.device) : Result<DeviceFacts>(Error{be.error()});
  if (!probed) {
    res.environment_error = true;
    return fail(Disposition::not_run, probed.error());
  }
  // Prompts show the facts of the device a campaign was recorded for: --prompt-device, else a
  // replay folder's device.json, else this machine's device.
  std::optional<DeviceFacts> prompt_device = opts.prompt_device;
  if (!prompt_device && starts_with(opts.llm, "replay:")) {
    fs::path recorded = fs::path(opts.llm.substr(7)) / "device.json";
    if (fs::exists(recorded)) {
      auto facts = read_device_facts(recorded);
      if (!facts) return fail(Disposition::not_run, facts.error());
      prompt_device = *facts;
    }
  }
  Result<DeviceFacts> dev = prompt_device ? Result<DeviceFacts>(*prompt_device) : probed;
  if (!opts.record_dir.empty() && !fs::exists(opts.record_dir / "device.json"))
    (void)write_file(opts.record_dir / "device.json", dev->to_json().dump(2) + "\n");

  // The parent's evaluation: the baseline for speedups and the configurations carried forward.
  progress_.print(fmt::format("evaluating checkpoint {} (parent) ...", head_cp->id));
  auto parent_eval = evaluate_checkpoint(head_cp->id, opts.eval, false);
  if (cancelled()) return stop(head_cp->id, "while evaluating the parent");
  if (!parent_eval) return fail(Disposition::not_run, parent_eval.error());
  if (parent_eval->disposition != Disposition::passed)
    return fail(
        Disposition::not_run,
        fmt::format("the parent checkpoint {} does not pass its own evaluation ({}): {}",
                    head_cp->id, to_string(parent_eval->disposition), parent_eval->message));

  // The new context: the transformation's tuning parameters join the context's.
  KernelContext ctx2 = ctx;
  for (const auto& p : T.tuning)
    if (std::none_of(ctx2.tuning.begin(), ctx2.tuning.end(),
                     [&](const TuningParam& q) { return q.name == p.name; }))
      ctx2.tuning.push_back(p);
  // A transformation that needs aligned shapes narrows what the kernel supports.
  if (!T.valid.empty())
    ctx2.valid = ctx2.valid.empty() ? T.valid : fmt::format("({}) && ({})", ctx2.valid, T.valid);
  // Scratch memory the transformation needs (split-K partial sums, ...) joins the workspace.
  if (!T.workspace.empty())
    ctx2.workspace = ctx2.workspace.empty()
                         ? T.workspace
                         : fmt::format("max({}, {})", ctx2.workspace, T.workspace);
  EvalOptions eo = opts.eval;
  for (const auto& [k, v] : tuning) eo.tuning_overrides[k] = v;
  eo.must_include = top_configs(parent_eval->summary, ctx2);

  auto drv = opts.make_llm ? opts.make_llm() : make_driver(opts.llm, opts.driver);
  if (!drv) return fail(Disposition::llm_error, drv.error());
  std::unique_ptr<LlmDriver> driver = std::move(*drv);
  if (!opts.record_dir.empty())
    driver = make_recording_driver(std::move(driver), opts.record_dir, opts.record_note);

  if (workflow_id == 0) {
    WorkflowRecord w;
    w.kind = "apply";
    w.args_json = json{{"transformation", name}, {"llm", driver->describe()}}.dump();
    w.status = "running";
    auto id = store_->add_workflow(w);
    if (id) workflow_id = *id;
  }

  auto regions0 = split_regions(files->second, ctx.source_file);
  if (!regions0) return fail(Disposition::not_run, regions0.error());
  // Helper snippets are peak's to insert, before the first pass; the model only calls them.
  regions0 = insert_helpers(T, ctx.backend, *regions0);
  const std::vector<std::pair<std::string, std::string>> facts = (*be)->prompt_facts(*dev);
  const std::string plan_text = plan_reference((*be)->plan_dialect());

  const int passes = static_cast<int>(T.passes.size());
  std::string feedback;
  int failures = 0;
  SourceRegions regions = *regions0;
  int pass = 1;
  while (failures < opts.attempts) {
    const int attempt_no = failures + 1;
    res.attempts = attempt_no;
    bool pass_failed = false;
    for (; pass <= passes; ++pass) {
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
      in.device_name = dev->name;
      in.plan_reference = plan_text;
      in.extra_instructions = opts.extra_instructions;
      in.feedback = opts.feedback ? feedback : "";
      Prompt prompt = build_prompt(in);
      LlmRequest req;
      req.system = prompt.system;
      req.user = prompt.user;
      req.key = prompt.key();
      req.step_label = fmt::format("{} pass {}/{} ({})", T.name, pass, passes, to_string(P.region));
      progress_.status(fmt::format("{}: asking the LLM ({}, attempt {})", req.step_label,
                                   driver->describe(), attempt_no),
                       true);
      LlmReply reply = driver->complete(req);
      progress_.clear();
      if (cancelled()) return stop(head_cp->id, fmt::format("during pass {}/{}", pass, passes));
      AttemptRecord ar;
      ar.workflow_id = workflow_id;
      ar.parent_checkpoint = head_cp->id;
      ar.transformation = T.name;
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
      if (reply.status == LlmStatus::pending) {
        res.pending = true;
        res.disposition = Disposition::not_run;
        res.message = reply.error;
        return res;
      }
      if (!reply.ok()) {
        ar.disposition = std::string(to_string(Disposition::llm_error));
        ar.error = reply.error;
        (void)store_->add_attempt(ar);
        progress_.print(
            fmt::format("  {} attempt {}: llm_error: {}", req.step_label, attempt_no, reply.error));
        if (reply.status == LlmStatus::miss) return fail(Disposition::llm_error, reply.error);
        feedback.clear();
        pass_failed = true;
        break;
      }
      SpliceOutcome sp = splice_reply(reply.text, regions, P.region);
      ar.disposition = std::string(to_string(sp.disposition));
      ar.error = sp.message;
      (void)store_->add_attempt(ar);
      if (sp.disposition != Disposition::passed) {
        progress_.print(fmt::format("  {} attempt {}: {}: {}", req.step_label, attempt_no,
                                    to_string(sp.disposition), sp.message));
        feedback = feedback_for(sp.disposition, sp.message);
        pass_failed = true;
        break;
      }
      regions = sp.source;
    }
    if (pass_failed) {
      ++failures;
      continue;  // the same pass again
    }
    // All passes done: compile, validate, tune, time.
    progress_.print(
        fmt::format("{}: evaluating the candidate (attempt {}) ...", T.name, attempt_no));
    std::string new_source = join_regions(regions);
    AttemptRecord er;
    er.workflow_id = workflow_id;
    er.parent_checkpoint = head_cp->id;
    er.transformation = T.name;
    er.pass_index = 0;
    er.attempt = attempt_no;
    er.driver = "peak";
    if (auto sb = store_->put_blob(new_source)) er.reply_blob = *sb;
    er.disposition = "not_run";
    auto eval_attempt = store_->add_attempt(er);
    std::optional<int64_t> eval_attempt_id;
    if (eval_attempt) eval_attempt_id = *eval_attempt;
    Evaluation ev = evaluate(ctx2, new_source, eo, eval_attempt_id);
    if (cancelled()) {
      er.error = kCancelledMessage;
      (void)store_->add_attempt(er);
      return stop(head_cp->id, "while evaluating the candidate");
    }
    if (ev.disposition == Disposition::passed) {
      add_speedups(ev.summary, parent_eval->summary, seed_summary(opts.eval));
      ev.summary["transformation"] = {{"name", T.name}, {"version", T.version}};
      ev.summary["attempts"] = attempt_no;
      auto id =
          make_checkpoint(head_cp->id, T.name, "apply " + T.name, ctx2, new_source, ev.summary);
      if (!id) return fail(Disposition::not_run, id.error());
      if (eval_attempt_id) (void)store_->attach_attempt_to_checkpoint(*eval_attempt_id, *id);
      auto h = store_->head();
      if (h && !starts_with(*h, "#"))
        (void)store_->set_ref(*h, *id);
      else
        (void)store_->set_head(fmt::format("#{}", *id));
      ctx2.dir = root_;
      (void)write_working_files(ctx2, new_source);
      res.disposition = Disposition::passed;
      res.checkpoint = *id;
      res.summary = ev.summary;
      res.message = ev.message;
      return res;
    }
    // Record the evaluation's outcome as its own attempt row (append-only).
    er.disposition = std::string(to_string(ev.disposition));
    er.error = ev.message;
    (void)store_->add_attempt(er);
    // Keep the failed candidate for inspection.
    (void)write_file(root_ / ".peak" / "failed" /
                         fmt::format("{}-{}-attempt{}{}", workflow_id, T.name, attempt_no,
                                     fs::path(ctx.source_file).extension().string()),
                     new_source);
    progress_.print(
        fmt::format("  {} attempt {}: {}: {}", T.name, attempt_no, to_string(ev.disposition),
                    split_lines(ev.message).empty() ? "" : split_lines(ev.message).front()));
    feedback = feedback_for(ev.disposition, ev.message);
    ++failures;
    regions = *regions0;
    pass = 1;
  }
  res.disposition = Disposition::not_run;
  // Report the last failure's disposition.
  auto attempts = store_->attempts(workflow_id);
  if (attempts && !attempts->empty()) {
    for (auto it = attempts->rbegin(); it != attempts->rend(); ++it)
      if (it->transformation == T.name && it->disposition != "passed" &&
          it->disposition != "not_run") {
        res.disposition = disposition_from_string(it->disposition).value_or(Disposition::not_run);
        res.message = it->error;
        break;
      }
  }
  res.message = fmt::format(
      "{} failed after {} attempt(s); the workspace stays at checkpoint {}. Last "
      "failure: {}",
      T.name, opts.attempts, head_cp->id, res.message);
  return res;
}

RunResult Workspace::run(const Sequence& seq, const RunOptions& opts) {
  RunResult rr;
  int64_t wid = 0;
  int start = opts.from_step;
  if (opts.resume) {
    auto ws = store_->workflows();
    if (ws)
      for (auto it = ws->rbegin(); it != ws->rend(); ++it) {
        if (it->kind != "run" || it->status == "done") continue;
        json st = json::parse(it->state_json.empty() ? "{}" : it->state_json, nullptr, false);
        if (st.is_object() && st.value("sequence", "") == seq.name) {
          wid = it->id;
          start = st.value("next_step", 0);
        }
        break;
      }
    if (wid == 0) {
      rr.disposition = Disposition::not_run;
      rr.message =
          fmt::format("no interrupted run of sequence {} to resume; start one with `peak run {}`",
                      seq.name, seq.path.string());
      return rr;
    }
    progress_.print(fmt::format("resuming run {} of {} at step {}", wid, seq.name, start + 1));
  } else {
    WorkflowRecord w;
    w.kind = "run";
    w.args_json = json{{"sequence", seq.path.string()}, {"llm", opts.apply.llm}}.dump();
    w.status = "running";
    w.state_json = json{{"sequence", seq.name}, {"next_step", start}}.dump();
    auto id = store_->add_workflow(w);
    if (!id) {
      rr.message = id.error();
      return rr;
    }
    wid = *id;
  }
  rr.workflow_id = wid;
  for (int i = start; i < static_cast<int>(seq.steps.size()); ++i) {
    const SequenceStep& st = seq.steps[static_cast<size_t>(i)];
    ApplyOptions ao = opts.apply;
    ao.attempts = st.attempts > 0 ? st.attempts : (seq.attempts > 0 ? seq.attempts : ao.attempts);
    if (!st.strategy.empty()) ao.eval.strategy = st.strategy;
    Budget step_budget = default_budget(
        st.strategy, {ao.eval.budget, ao.eval.budget_fraction, ao.eval.budget_seconds});
    ao.eval.budget = step_budget.evaluations;
    ao.eval.budget_fraction = step_budget.fraction;
    ao.eval.budget_seconds = step_budget.seconds;
    if (!st.strategy_budget.empty()) {
      auto b = Budget::parse(st.strategy_budget);
      if (!b) {
        (void)store_->update_workflow(wid, "failed",
                                      json{{"sequence", seq.name}, {"next_step", i}}.dump());
        rr.input_error = true;
        rr.message = fmt::format("step {} ({}): {}", i + 1, st.transformation, b.error());
        return rr;
      }
      ao.eval.budget = b->evaluations;
      ao.eval.budget_fraction = b->fraction;
      ao.eval.budget_seconds = b->seconds;
    }
    if (!st.instructions.empty())
      ao.extra_instructions = ao.extra_instructions.empty()
                                  ? st.instructions
                                  : ao.extra_instructions + "\n" + st.instructions;
    progress_.print(fmt::format("step {}/{}: {}", i + 1, seq.steps.size(), st.transformation));
    ApplyResult ar = apply(st.transformation, ao, wid, st.tuning);
    rr.steps.push_back(ar);
    rr.input_error = ar.input_error;
    rr.environment_error = ar.environment_error;
    if (ar.cancelled) {
      (void)store_->update_workflow(wid, "interrupted",
                                    json{{"sequence", seq.name}, {"next_step", i}}.dump());
      rr.cancelled = true;
      rr.message = fmt::format("step {} ({}): {}; continue with `peak run {} --resume`", i + 1,
                               st.transformation, ar.message, seq.path.string());
      return rr;
    }
    if (ar.pending) {
      (void)store_->update_workflow(wid, "waiting",
                                    json{{"sequence", seq.name}, {"next_step", i}}.dump());
      rr.pending = true;
      rr.message = ar.message;
      return rr;
    }
    if (ar.disposition != Disposition::passed) {
      (void)store_->update_workflow(wid, "failed",
                                    json{{"sequence", seq.name}, {"next_step", i}}.dump());
      rr.disposition = ar.disposition;
      rr.message = fmt::format(
          "step {} ({}) failed: {}\nFix it by hand and `peak commit`, or rephrase the "
          "transformation, "
          "then `peak run {} --resume`.",
          i + 1, st.transformation, ar.message, seq.path.string());
      return rr;
    }
    rr.steps_done = i + 1;
    (void)store_->update_workflow(wid, "running",
                                  json{{"sequence", seq.name}, {"next_step", i + 1}}.dump());
  }
  (void)store_->update_workflow(
      wid, "done", json{{"sequence", seq.name}, {"next_step", seq.steps.size()}}.dump());
  rr.disposition = Disposition::passed;
  rr.steps_done = static_cast<int>(seq.steps.size());
  rr.message = fmt::format("{} steps of {} done", seq.steps.size(), seq.name);
  return rr;
}

ApplyResult Workspace::commit(const std::string& message, const EvalOptions& opts) {
  ApplyResult res;
  auto head_cp = head();
  if (!head_cp) {
    res.message = head_cp.error();
    return res;
  }
  auto ctx = load_context(root_);
  if (!ctx) {
    res.message = ctx.error();
    return res;
  }
  auto src = read_file(root_ / ctx->source_file);
  if (!src) {
    res.message = src.error();
    return res;
  }
  auto parent_eval = evaluate_checkpoint(head_cp->id, opts, false);
  EvalOptions eo = opts;
  if (parent_eval) eo.must_include = top_configs(parent_eval->summary, *ctx);
  Evaluation ev = evaluate(*ctx, *src, eo);
  res.disposition = ev.disposition;
  res.message = ev.message;
  if (ev.disposition != Disposition::passed) return res;
  if (parent_eval) add_speedups(ev.summary, parent_eval->summary, seed_summary(opts));
  ev.summary["transformation"] = {{"name", "manual"}, {"message", message}};
  auto id = make_checkpoint(head_cp->id, "manual", message.empty() ? "manual edit" : message, *ctx,
                            *src, ev.summary);
  if (!id) {
    res.message = id.error();
    return res;
  }
  auto h = store_->head();
  if (h && !starts_with(*h, "#"))
    (void)store_->set_ref(*h, *id);
  else
    (void)store_->set_head(fmt::format("#{}", *id));
  res.checkpoint = *id;
  res.summary = ev.summary;
  return res;
}

Status Workspace::checkout(const std::string& ref) {
  // A branch name moves HEAD to the branch; anything else detaches HEAD at the checkpoint.
  auto r = store_->ref(ref);
  int64_t id = 0;
  if (r && *r) {
    id = **r;
    if (auto s = store_->set_head(ref); !s) return s;
  } else {
    auto rid = resolve(ref);
    if (!rid) return Status::error(rid.error());
    id = *rid;
    if (auto s = store_->set_head(fmt::format("#{}", id)); !s) return s;
  }
  auto files = checkpoint_files(id);
  if (!files) return Status::error(files.error());
  return write_working_files(files->first, files->second);
}

Status Workspace::branch(const std::string& name, const std::string& at) {
  if (name.empty() || name.find_first_of(" \t#~") != std::string::npos || name == "HEAD")
    return Status::error(fmt::format("'{}' is not a valid branch name", name));
  auto existing = store_->ref(name);
  if (existing && *existing) return Status::error(fmt::format("branch {} already exists", name));
  auto id = resolve(at.empty() ? "HEAD" : at);
  if (!id) return Status::error(id.error());
  if (auto s = store_->set_ref(name, *id); !s) return s;
  return checkout(name);
}

Result<std::string> Workspace::diff(const std::string& a, const std::string& b) const {
  auto ia = resolve(a);
  if (!ia) return Error{ia.error()};
  auto ib = resolve(b);
  if (!ib) return Error{ib.error()};
  auto fa = checkpoint_files(*ia);
  if (!fa) return Error{fa.error()};
  auto fb = checkpoint_files(*ib);
  if (!fb) return Error{fb.error()};
  std::string out =
      unified_diff(fa->second, fb->second, fmt::format("#{}/{}", *ia, fa->first.source_file),
                   fmt::format("#{}/{}", *ib, fb->first.source_file));
  out += unified_diff(to_toml(fa->first), to_toml(fb->first), fmt::format("#{}/kernel.toml", *ia),
                      fmt::format("#{}/kernel.toml", *ib));
  return out;
}

}  // namespace peak
