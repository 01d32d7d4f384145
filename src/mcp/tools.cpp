// The tool table and the resources: handlers over the library API.
#include "mcp/tools.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/front.h"
#include "mcp/sampling.h"
#include "mcp/server.h"
#include "util/fs.h"

namespace peak::mcp {

namespace {

// ---- schemas ---------------------------------------------------------------------------------

json str(const std::string& d) { return {{"type", "string"}, {"description", d}}; }
json integer(const std::string& d) { return {{"type", "integer"}, {"description", d}}; }
json boolean(const std::string& d) { return {{"type", "boolean"}, {"description", d}}; }
json object_schema(json props, std::vector<std::string> required = {}) {
  json s{{"type", "object"}, {"properties", props}, {"additionalProperties", false}};
  if (!required.empty()) s["required"] = required;
  return s;
}
// Output schemas list what is always there; results may carry more.
json out_schema(json props, std::vector<std::string> required = {}) {
  json s{{"type", "object"}, {"properties", props}};
  if (!required.empty()) s["required"] = required;
  return s;
}

const json& workspace_arg() {
  static const json j =
      str("workspace folder, relative to the server's root (default: the current workspace, set by "
          "init or the folder peak mcp started in)");
  return j;
}

json with_workspace(json props) {
  props["workspace"] = workspace_arg();
  return props;
}

json eval_props(json props) {
  props["device"] = str("device index or name substring (default: the best one)");
  props["devices"] =
      str("several GPUs of this host, of one model, instead of device: \"all\", indices "
          "(\"0,1\") or a name substring; the tuning search spreads over them, the final timing "
          "runs on the first");
  props["small"] = boolean("time the context's small shapes (the default on CPU devices)");
  props["full"] = boolean("time the context's bench shapes even on a CPU device");
  props["budget"] = integer("tuning configurations at most");
  props["jobs"] = integer("parallel compiles (default: all cores)");
  props["no_baseline"] = boolean("do not time the vendor library");
  json names = json::array();
  for (const auto& n : strategy_names()) names.push_back(n);
  props["strategy"] = {{"type", "string"},
                       {"enum", names},
                       {"description", "tuning strategy (default auto; docs/tuning.md)"}};
  props["strategy_budget"] =
      str("tuning budget: N evaluations, P% of the space, Ts seconds (e.g. \"24,15%,600s\")");
  props["tuning"] = {
      {"type", "object"},
      {"description", "override tuning values: {\"NAME\": [V1, V2, ...]}"},
      {"additionalProperties", {{"type", "array"}, {"items", {{"type", "integer"}}}}}};
  return props;
}

json llm_props(json props) {
  props["llm"] =
      str("who writes each pass's code: \"manual\" (default: the step stops with a prompt for you; "
          "answer it with respond, then call again), \"mcp\" (your model, through MCP sampling), "
          "\"replay:DIR\" (a recording under the root or peak's recordings), \"openai:MODEL\" or "
          "\"anthropic:MODEL\" (keys from the server's environment)");
  props["by"] = str("who answers (recorded with manual replies)");
  props["record"] =
      str("folder (inside the workspace) that keeps every exchange for replay; default "
          ".peak/recording for manual and mcp");
  props["attempts"] = integer("attempts per transformation (default 3)");
  props["instructions"] = str("extra text appended to every prompt");
  props["feedback"] = boolean("tell the model why its previous attempt failed (default true)");
  return props;
}

const json& step_out() {
  static const json j =
      out_schema({{"disposition",
                   str("passed, or why the step did not pass (compile_failed, incorrect, ...)")},
                  {"message", str("what happened and what to do next")},
                  {"pending", boolean("a manual prompt waits for respond")},
                  {"attempts", integer("attempts made")},
                  {"checkpoint", integer("the new checkpoint, when the step passed")},
                  {"cancelled", boolean("the step was cancelled")},
                  {"summary", {{"type", "object"}}},
                  {"prompt", {{"type", "object"}, {"description", "the pending manual prompt"}}},
                  {"recording", str("where the exchanges are recorded")}},
                 {"disposition", "message", "pending"});
  return j;
}

// ---- arguments -------------------------------------------------------------------------------

std::string s_arg(const json& a, const char* name, const std::string& def = "") {
  return a.contains(name) && a[name].is_string() ? a[name].get<std::string>() : def;
}
int i_arg(const json& a, const char* name, int def = 0) {
  return a.contains(name) && a[name].is_number_integer() ? a[name].get<int>() : def;
}
bool b_arg(const json& a, const char* name, bool def = false) {
  return a.contains(name) && a[name].is_boolean() ? a[name].get<bool>() : def;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

bool inside(const fs::path& p, const fs::path& dir) {
  auto rel = p.lexically_relative(dir);
  return !rel.empty() && *rel.begin() != "..";
}

fs::path canonical_or_weak(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal() : c;
}

// ---- workspace access ------------------------------------------------------------------------

Result<std::unique_ptr<Workspace>> open_workspace(McpServer& server, const json& a) {
  const fs::path root = server.options().root;
  fs::path dir;
  if (a.contains("workspace") && a["workspace"].is_string()) {
    auto p = confine(root, a["workspace"], {root});
    if (!p) return Error{p.error()};
    dir = *p;
  } else {
    dir = server.workspace();
  }
  if (dir.empty())
    return make_error(
        "no workspace yet: call init with a kernel context (e.g. {\"context\": "
        "\"matmul-hlsl-fp32\"}), or pass \"workspace\"");
  auto ws = Workspace::open(dir);
  if (!ws) return Error{ws.error() + " (call init to create a workspace)"};
  if (!inside(canonical_or_weak((*ws)->root()), canonical_or_weak(root)) &&
      canonical_or_weak((*ws)->root()) != canonical_or_weak(root))
    return make_error(fmt::format("the workspace {} is outside the server's root {}; refused",
                                  (*ws)->root().string(), root.string()));
  (*ws)->progress().set_quiet(true);
  return ws;
}

Result<EvalChoices> choices_from(const json& a, const ToolContext& ctx) {
  EvalChoices c;
  c.device = s_arg(a, "device");
  c.devices = s_arg(a, "devices");
  if (b_arg(a, "small")) c.small = true;
  if (b_arg(a, "full")) c.small = false;
  c.budget = static_cast<size_t>(std::max(0, i_arg(a, "budget")));
  c.jobs = std::max(0, i_arg(a, "jobs"));
  c.baseline = !b_arg(a, "no_baseline");
  c.strategy = s_arg(a, "strategy");
  if (auto s = check_eval_choices(c, s_arg(a, "strategy_budget"), json_choice_names()); !s)
    return make_error(s.message());
  c.cancelled = ctx.cancelled;
  if (a.contains("tuning"))
    for (const auto& [k, v] : a["tuning"].items()) c.tuning[k] = v.get<std::vector<int64_t>>();
  return c;
}

Result<EvalOptions> eval_from(Workspace& ws, const json& a, const ToolContext& ctx) {
  auto c = choices_from(a, ctx);
  if (!c) return Error{c.error()};
  if (auto e = ws.eval_options(*c)) return *e;
  EvalDevices none;  // no device: the evaluation itself will say so
  none.selector = c->device;
  return eval_options_for(*c, none);
}

// The LLM settings of apply/run; an error when the spec is not allowed over MCP.
Result<ApplyOptions> apply_from(Workspace& ws, const json& a, ToolContext& ctx) {
  ApplyOptions o;
  std::string llm = s_arg(a, "llm", "manual");
  const fs::path root = ctx.server.options().root;
  // "mcp" is this server's own driver; a malformed spec is left to the step, which says why.
  if (auto spec = parse_llm_spec(llm)) {
    if (spec->kind == LlmKind::command)
      return make_error(
          "llm \"command:...\" runs a program and is not available over MCP; use manual, mcp, "
          "replay:DIR, openai:MODEL or anthropic:MODEL");
    if (!spec->url.empty())
      return make_error(
          "a server URL in the llm spec is not accepted over MCP (the key would go there); set "
          "OPENAI_BASE_URL or ANTHROPIC_BASE_URL where peak mcp starts");
    if (spec->kind == LlmKind::replay) {
      // A recording under the server's root, or one shipped with peak.
      auto dir = confine(root, spec->arg, {root, data_path("recordings")});
      if (!dir) return Error{dir.error()};
      llm = "replay:" + dir->string();
    }
  }
  o.llm = llm;
  o.driver.workspace = ws.root();
  o.driver.producer = s_arg(a, "by");
  if (llm == "manual" && o.driver.producer.empty())
    o.driver.producer = fmt::format("agent ({} over MCP)", ctx.server.client_name());
  if (llm == "mcp") {
    if (!ctx.server.client_has_sampling())
      return make_error(
          "llm \"mcp\" asks your model through MCP sampling, and this client did not offer the "
          "sampling capability; use llm \"manual\" (answer each prompt with respond) instead");
    McpServer& server = ctx.server;
    auto out = ctx.out;
    auto cancelled = ctx.cancelled;
    o.make_llm = [&server, out, cancelled]() -> Result<std::unique_ptr<LlmDriver>> {
      return make_sampling_driver(server, out, cancelled);
    };
  }
  std::string record = s_arg(a, "record");
  if (record.empty() && (llm == "manual" || llm == "mcp")) record = ".peak/recording";
  if (!record.empty()) {
    fs::path r = fs::path(record).is_absolute() ? fs::path(record) : ws.root() / record;
    auto dir = confine(ws.root(), r.string(), {ws.root()});
    if (!dir) return Error{"record: " + dir.error()};
    o.record_dir = *dir;
  }
  o.record_note = fmt::format("answered through MCP by {}", ctx.server.client_name());
  o.attempts = std::max(1, i_arg(a, "attempts", 3));
  o.extra_instructions = s_arg(a, "instructions");
  o.feedback = b_arg(a, "feedback", true);
  auto eval = choices_from(a, ctx);
  if (!eval) return Error{eval.error()};
  o.eval = std::move(*eval);
  return o;
}

// The newest manual prompt that waits for a reply, with its text.
json pending_prompt(const fs::path& ws_root) {
  auto prompts = list_manual(ws_root);
  for (auto it = prompts.rbegin(); it != prompts.rend(); ++it) {
    if (it->answered) continue;
    auto text = read_file(it->prompt_path);
    return {
        {"id", it->id},
        {"step", it->step_label},
        {"uri", "peak://prompts/" + it->id},
        {"text", text ? *text : ""},
        {"next", fmt::format("answer with respond {{\"id\": \"{}\", \"reply\": \"<one fenced code "
                             "block with the complete region>\"}}, then call the same tool again",
                             it->id)}};
  }
  return nullptr;
}

std::string step_text(const json& s) {
  std::string t;
  if (s.value("pending", false)) {
    t = s.value("message", "");
    if (s.contains("prompt") && s["prompt"].is_object())
      t += "\n\n" + s["prompt"].value("text", "");
    return t;
  }
  t = fmt::format("{}: {}", s.value("disposition", ""), s.value("message", ""));
  if (s.contains("checkpoint")) t = fmt::format("checkpoint {} — {}", s["checkpoint"].dump(), t);
  if (auto it = s.find("summary"); it != s.end())
    if (EvalSummary summary = summary_or_empty(*it); summary.bench)
      for (const auto& m : *summary.bench)
        t += fmt::format("\n  {:<20} {}  x{:.2f} vs parent  x{:.2f} vs seed", m.shape.value_or(""),
                         headline_rate(m, 10), m.speedup_vs_parent.value_or(0.0),
                         m.speedup_vs_seed.value_or(0.0));
  return t;
}

ToolResult ok(json structured, std::string text = "") {
  ToolResult r;
  r.structured = std::move(structured);
  r.text = std::move(text);
  return r;
}

#define OPEN_WS(ws, a, ctx)                              \
  auto ws##_r = open_workspace((ctx).server, (a));       \
  if (!ws##_r) return ToolResult::error(ws##_r.error()); \
  Workspace& ws = **ws##_r

// ---- handlers --------------------------------------------------------------------------------

ToolResult t_doctor(const json& a, ToolContext&) {
  DoctorReport d = run_doctor(s_arg(a, "device"));
  return ok(d.to_json(), d.text());
}

ToolResult t_init(const json& a, ToolContext& ctx) {
  const fs::path root = ctx.server.options().root;
  std::string context = s_arg(a, "context");
  fs::path src;
  if (fs::path(context).is_relative() && fs::exists(data_path("examples") / context))
    src = data_path("examples") / context;
  else {
    auto p = confine(root, context, {root, data_path("examples")});
    if (!p) return ToolResult::error(p.error());
    src = *p;
  }
  auto found = find_context(src.string());
  if (!found) return ToolResult::error(found.error());
  auto cx = load_context(*found);
  if (!cx) return ToolResult::error(cx.error());
  std::string dir = s_arg(a, "dir", cx->name);
  auto dest = confine(root, dir, {root});
  if (!dest) return ToolResult::error(dest.error());
  auto ws = Workspace::init(*found, *dest);
  if (!ws) return ToolResult::error(ws.error());
  ctx.server.set_workspace((*ws)->root());
  json j{{"workspace", (*ws)->root().string()}, {"checkpoint", 1}, {"context", cx->name}};
  return ok(j, fmt::format("created workspace {} from {} (checkpoint 1: seed, branch main); it is "
                           "now the current workspace",
                           (*ws)->root().string(), found->string()));
}

Result<std::vector<Transformation>> library_of(McpServer& server, const json& a) {
  auto ws = open_workspace(server, a);
  return load_library_for(ws ? (*ws)->root() : fs::path());
}

ToolResult t_transformations_list(const json& a, ToolContext& ctx) {
  // In a workspace, those written for its kernel's family unless `all` (engine/library.h).
  auto ws = open_workspace(ctx.server, a);
  auto l = list_library(ws ? ws->get() : nullptr, b_arg(a, "all"));
  if (!l) return ToolResult::error(l.error());
  json list = json::array();
  std::string text;
  for (const auto& t : l->shown) {
    list.push_back(transformation_json(t));
    text += fmt::format("{:<20} v{} {} pass(es)  {}{}\n", t.name, t.version, t.passes.size(),
                        l->family ? "" : "[" + families_text(t) + "] ", t.title);
  }
  if (auto line = others_line(*l); !line.empty()) text += line + " (all: true)\n";
  json j{{"transformations", list}, {"others", l->others}};
  if (l->family) j["family"] = *l->family;
  return ok(j, text);
}

ToolResult t_transformation_show(const json& a, ToolContext& ctx) {
  auto lib = library_of(ctx.server, a);
  if (!lib) return ToolResult::error(lib.error());
  auto t = find_transformation(*lib, s_arg(a, "name"));
  if (!t) return ToolResult::error(t.error());
  auto text = read_file(t->path);
  return ok({{"transformation", transformation_json(*t)}, {"text", text ? *text : ""}},
            text ? *text : "");
}

ToolResult t_transformation_write(const json& a, ToolContext& ctx) {
  OPEN_WS(ws, a, ctx);
  auto t = write_transformation(ws.root(), s_arg(a, "text"));
  if (!t)
    return ToolResult::error(
        fmt::format("the transformation was not written: {}. The format is in "
                    "docs/transformations.md; the shared library's files are examples "
                    "(transformation_show).",
                    t.error()));
  return ok({{"transformation", transformation_json(*t)}, {"path", t->path.string()}},
            fmt::format("wrote {} ({}); apply it with apply {{\"transformation\": \"{}\"}}",
                        t->path.string(), t->title, t->name));
}

ToolResult t_sequence_show(const json& a, ToolContext& ctx) {
  const fs::path root = ctx.server.options().root;
  std::string name = s_arg(a, "name");
  auto p = find_sequence(name);
  if (!p) return ToolResult::error(p.error());
  auto c = confine(root, p->string(), {root, data_path("sequences")});
  if (!c) return ToolResult::error(c.error());
  auto seq = load_sequence(*c);
  if (!seq) return ToolResult::error(seq.error());
  json j = sequence_json(*seq);
  std::string text = fmt::format("{}: {}\n", seq->name, seq->description);
  for (size_t i = 0; i < seq->steps.size(); ++i)
    text += fmt::format("  {}. {}\n", i + 1, seq->steps[i].transformation);
  return ok(j, text);
}

ToolResult t_apply(const json& a, ToolContext& ctx) {
  OPEN_WS(ws, a, ctx);
  auto ao = apply_from(ws, a, ctx);
  if (!ao) return ToolResult::error(ao.error());
  ws.progress().set_listener(ctx.progress);
  std::map<std::string, std::vector<int64_t>> tuning;
  auto r = ws.apply(s_arg(a, "transformation"), *ao, 0, tuning);
  if (r.input_error || r.environment_error) return ToolResult::error(r.message);
  json j = apply_json(r);
  if (r.pending) j["prompt"] = pending_prompt(ws.root());
  if (!ao->record_dir.empty()) j["recording"] = ao->record_dir.string();
  return ok(j, step_text(j));
}

ToolResult t_run(const json& a, ToolContext& ctx) {
  OPEN_WS(ws, a, ctx);
  const fs::path root = ctx.server.options().root;
  auto p = find_sequence(s_arg(a, "sequence"));
  if (!p) return ToolResult::error(p.error());
  auto c = confine(root, p->string(), {root, data_path("sequences")});
  if (!c) return ToolResult::error(c.error());
  auto seq = load_sequence(*c);
  if (!seq) return ToolResult::error(seq.error());
  auto ao = apply_from(ws, a, ctx);
  if (!ao) return ToolResult::error(ao.error());
  ws.progress().set_listener(ctx.progress);
  RunOptions ro;
  ro.apply = *ao;
  ro.resume = b_arg(a, "resume");
  ro.from_step = std::max(0, i_arg(a, "from"));
  auto r = ws.run(*seq, ro);
  if (r.input_error || r.environment_error) return ToolResult::error(r.message);
  if (ro.resume && r.workflow_id == 0) return ToolResult::error(r.message);
  json j = run_json(r);
  if (r.pending) j["prompt"] = pending_prompt(ws.root());
  if (!ao->record_dir.empty()) j["recording"] = ao->record_dir.string();
  std::string text =
      r.pending ? step_text(j)
                : fmt::format("{}: {} ({} step(s) done)", j["disposition"].get<std::string>(),
                              r.message, r.steps_done);
  if (r.pending) text += "\nthen call run again with resume: true";
  return ok(j, text);
}

ToolResult t_respond(const json& a, ToolContext& ctx) {
  OPEN_WS(ws, a, ctx);
  std::string by = s_arg(a, "by");
  if (by.empty()) by = fmt::format("agent ({} over MCP)", ctx.server.client_name());
  std::string id = s_arg(a, "id");
  if (auto s = respond_manual(ws.root(), id, s_arg(a, "reply"), by); !s)
    return ToolResult::error(s.message());
  return ok({{"id", id}, {"answered", true}},
            fmt::format("reply {} recorded; call the same apply (or run with resume) again to "
                        "continue",
                        id));
}

ToolResult t_status(const json& a, ToolContext& ctx) {
  json j{{"job", ctx.server.job_status()}};
  auto ws_r = open_workspace(ctx.server, a);
  if (!ws_r) {
    j["workspace"] = nullptr;
    j["hint"] = ws_r.error();
    return ok(j);
  }
  Workspace& ws = **ws_r;
  j["workspace"] = ws.root().string();
  auto head = ws.store().head();
  auto head_id = ws.store().head_checkpoint();
  j["head"] = head ? json(*head) : json(nullptr);
  j["head_checkpoint"] = head_id && *head_id ? json(**head_id) : json(nullptr);
  auto refs = ws.store().refs();
  j["branches"] = refs ? json(*refs) : json::object();
  json wfs = json::array();
  if (auto w = ws.store().workflows()) {
    size_t start = w->size() > 5 ? w->size() - 5 : 0;
    for (size_t i = w->size(); i-- > start;) {
      const auto& r = (*w)[i];
      wfs.push_back(
          {{"id", r.id},
           {"kind", r.kind},
           {"status", r.status},
           {"started_at", r.started_at},
           {"finished_at", r.finished_at},
           {"args", json::parse(r.args_json.empty() ? "{}" : r.args_json, nullptr, false)},
           {"state", json::parse(r.state_json.empty() ? "{}" : r.state_json, nullptr, false)}});
    }
  }
  j["workflows"] = wfs;
  json prompts = json::array();
  for (const auto& p : list_manual(ws.root()))
    if (!p.answered)
      prompts.push_back({{"id", p.id}, {"step", p.step_label}, {"uri", "peak://prompts/" + p.id}});
  j["waiting_prompts"] = prompts;
  std::string text =
      j["job"].is_null()
          ? "no step is running"
          : fmt::format("running: {} ({} s) — {}", j["job"].value("tool", ""),
                        j["job"].value("elapsed_s", 0.0), j["job"].value("progress", ""));
  text += fmt::format("\nworkspace {}, HEAD {}", ws.root().string(), j["head"].dump());
  if (!prompts.empty())
    text += fmt::format("\n{} manual prompt(s) wait for respond", prompts.size());
  return ok(j, text);
}

ToolResult t_log(const json& a, ToolContext& ctx) {
  OPEN_WS(ws, a, ctx);
  json entries = log_json(ws);
  std::string text;
  for (const auto& c : entries) {
    auto names = c["refs"].get<std::vector<std::string>>();
    text += fmt::format("{:<4} {}{}  parent {:<4} {:<16} {}\n", c["id"].get<int64_t>(),
                        names.empty() ? "" : fmt::format("({}) ", fmt::join(names, ", ")),
                        c.value("created_at", ""), c["parent"].is_null() ? "-" : c["parent"].dump(),
                        c.value("message", ""), c.value("perf", ""));
  }
  return ok({{"checkpoints", entries}}, text);
}

ToolResult t_show(const json& a, ToolContext& ctx) {
  OPEN_WS(ws, a, ctx);
  auto id = ws.resolve(s_arg(a, "ref", "HEAD"));
  if (!id) return ToolResult::error(id.error());
  auto j = checkpoint_json(ws, *id);
  if (!j) return ToolResult::error(j.error());
  std::string text = fmt::format("checkpoint {}  {}\n", *id, j->value("message", ""));
  const EvalSummary s = summary_or_empty((*j)["summary"]);
  if (s.best) text += fmt::format("best configuration: {}\n", s.best->config_text.value_or(""));
  if (s.bench)
    for (const auto& m : *s.bench)
      text += fmt::format("  {:<20} {}  spread {:.1f}%\n", m.shape.value_or(""),
                          headline_rate(m, 10), 100 * m.spread.value_or(0.0));
  text += "\n" + j->value("source", "");
  return ok(*j, text);
}

ToolResult t_diff(const json& a, ToolContext& ctx) {
  OPEN_WS(ws, a, ctx);
  std::string x = s_arg(a, "a", "HEAD~1"), y = s_arg(a, "b", "HEAD");
  auto d = ws.diff(x, y);
  if (!d) return ToolResult::error(d.error());
  return ok({{"a", x}, {"b", y}, {"diff", *d}}, d->empty() ? "(no differences)" : *d);
}

// Local changes to the working files are refused unless `force` (they are stashed first);
// HEAD is detached only when asked (`detach`).
SwitchOptions switch_from(const json& a) {
  SwitchOptions o;
  o.force = b_arg(a, "force");
  o.detach = b_arg(a, "detach");
  return o;
}

json switch_json(const SwitchResult& r) {
  json j{{"head", r.head},
         {"checkpoint", r.checkpoint ? json(*r.checkpoint) : json(nullptr)},
         {"message", r.message}};
  if (r.stash) j["stash"] = *r.stash;
  return j;
}

ToolResult t_checkout(const json& a, ToolContext& ctx) {
  OPEN_WS(ws, a, ctx);
  std::string ref = s_arg(a, "ref");
  auto r = ws.checkout(ref, switch_from(a));
  if (!r) return ToolResult::error(r.error());
  json j = switch_json(*r);
  j["ref"] = ref;
  return ok(j, r->message);
}

ToolResult t_branch(const json& a, ToolContext& ctx) {
  OPEN_WS(ws, a, ctx);
  std::string name = s_arg(a, "name");
  auto r = ws.branch(name, s_arg(a, "at", "HEAD"), switch_from(a));
  if (!r) return ToolResult::error(r.error());
  json j = switch_json(*r);
  j["branch"] = name;
  return ok(j, r->message);
}

ToolResult t_tag(const json& a, ToolContext& ctx) {
  OPEN_WS(ws, a, ctx);
  std::string name = s_arg(a, "name"), ref = s_arg(a, "ref", "HEAD");
  if (auto s = ws.tag(name, ref); !s) return ToolResult::error(s.message());
  auto id = ws.resolve(name);
  return ok({{"tag", name}, {"checkpoint", id ? json(*id) : json(nullptr)}},
            fmt::format("tagged {} as {}", ref, name));
}

ToolResult t_evaluate(const json& a, ToolContext& ctx) {
  OPEN_WS(ws, a, ctx);
  auto id = ws.resolve(s_arg(a, "ref", "HEAD"));
  if (!id) return ToolResult::error(id.error());
  auto options = eval_from(ws, a, ctx);
  if (!options) return ToolResult::error(options.error());
  ws.progress().set_listener(ctx.progress);
  auto ev = ws.evaluate_checkpoint(*id, *options, true);
  if (!ev) return ToolResult::error(ev.error());
  json j{{"checkpoint", *id},
         {"disposition", std::string(to_string(ev->disposition))},
         {"message", ev->message},
         {"summary", ev->summary}};
  if (ctx.cancelled()) j["cancelled"] = true;
  return ok(j, step_text(j));
}

ToolResult t_bench(const json& a, ToolContext& ctx) {
  OPEN_WS(ws, a, ctx);
  if (b_arg(a, "small") && b_arg(a, "full"))
    return ToolResult::error("small and full exclude each other");
  EvalChoices c;
  c.device = s_arg(a, "device");
  if (b_arg(a, "small")) c.small = true;
  if (b_arg(a, "full")) c.small = false;
  c.baseline = !b_arg(a, "no_baseline");
  c.cancelled = ctx.cancelled;
  ws.progress().set_listener(ctx.progress);
  auto r = bench(ws, s_arg(a, "ref", "HEAD"), c, b_arg(a, "single"));
  if (!r) return ToolResult::error(r.error());
  return ok(suite_json(*r), suite_text(*r));
}

ToolResult t_tune_classes(const json& a, ToolContext& ctx) {
  OPEN_WS(ws, a, ctx);
  auto c = choices_from(a, ctx);
  if (!c) return ToolResult::error(c.error());
  ws.progress().set_listener(ctx.progress);
  std::vector<std::string> only;
  if (a.contains("classes") && a["classes"].is_array())
    for (const auto& x : a["classes"])
      if (x.is_string()) only.push_back(x.get<std::string>());
  auto t = tune_classes(ws, s_arg(a, "ref", "HEAD"), *c, only);
  if (!t) return ToolResult::error(t.error());
  return ok(dispatch_json(*t), dispatch_text(*t));
}

ToolResult t_report(const json& a, ToolContext& ctx) {
  OPEN_WS(ws, a, ctx);
  std::string format = s_arg(a, "format", "markdown");
  auto text = render_report(ws, s_arg(a, "ref", "HEAD"), format);
  if (!text) return ToolResult::error(text.error());
  return ok({{"format", format}, {"report", *text}}, *text);
}

// The folder an export goes to: under the server's root, as every path a client names.
Result<fs::path> export_folder(McpServer& server, const json& a) {
  const fs::path root = server.options().root;
  return confine(root, s_arg(a, "output"), {root});
}

ToolResult t_export(const json& a, ToolContext& ctx) {
  OPEN_WS(ws, a, ctx);
  auto out = export_folder(ctx.server, a);
  if (!out) return ToolResult::error(out.error());
  ExportOptions eo;
  eo.out = *out;
  eo.single = b_arg(a, "single");
  eo.force = b_arg(a, "force");
  eo.name = s_arg(a, "name");
  eo.arch = s_arg(a, "arch");
  ws.progress().set_listener(ctx.progress);
  auto r = ws.export_checkpoint(s_arg(a, "checkpoint", "HEAD"), eo);
  if (!r) return ToolResult::error(r.error());
  return ok(export_json(*r), export_text(*r));
}

// The table in four parts, in the order tools/list gives them.
// The machine, the workspace's creation and the library of transformations and sequences.
void add_library_tools(std::vector<Tool>& t) {
  auto add = [&](Tool tool) { t.push_back(std::move(tool)); };
  add({"doctor", "Check the machine",
       "Toolchains, runners, devices and their documented peaks, and what is missing (with how to "
       "get it).",
       object_schema({{"device", str("device selector")}}),
       out_schema({{"ok", boolean("at least one backend can run kernels")},
                   {"checks", {{"type", "array"}}}},
                  {"ok"}),
       false, false, true, t_doctor});
  add({"init", "Create a workspace",
       "Create a workspace from a kernel context (a folder with kernel.toml, or the name of one of "
       "peak's examples such as matmul-hlsl-fp32) and make it the current workspace. Records "
       "checkpoint 1 (the seed) on branch main, tagged seed.",
       object_schema(
           {{"context", str("kernel context: an example name or a folder under the root")},
            {"dir", str("workspace folder under the root (default: the context's name)")}},
           {"context"}),
       out_schema({{"workspace", str("the workspace folder")}, {"checkpoint", integer("the seed")}},
                  {"workspace"}),
       false, true, false, t_init});
  add({"transformations_list", "List transformations",
       "The library of natural transformations: peak's shared library plus the workspace's own. "
       "In a workspace, only those written for its kernel's family (others: how many are left "
       "out); all lists every one with its families.",
       object_schema(with_workspace(
           {{"all", boolean("every transformation, also those for other kernel families")}})),
       out_schema({{"transformations", {{"type", "array"}}}}, {"transformations"}), false, false,
       true, t_transformations_list});
  add({"transformation_show", "Show a transformation",
       "One transformation file: front matter (passes, the region each pass edits, tuning "
       "parameters) and the text of each pass.",
       object_schema(with_workspace({{"name", str("transformation name")}}), {"name"}),
       out_schema({{"transformation", {{"type", "object"}}}, {"text", str("the file")}},
                  {"transformation", "text"}),
       false, false, true, t_transformation_show});
  add({"transformation_write", "Write a new transformation",
       "Add a transformation file to the workspace's library (<workspace>/transformations/"
       "NAME.md, NAME from its front matter). The file is checked first: a malformed one is "
       "refused with what is wrong. A name of the shared library is refused.",
       object_schema(with_workspace({{"text", str("the whole file: front matter and passes")}}),
                     {"text"}),
       out_schema({{"transformation", {{"type", "object"}}}, {"path", str("where it was written")}},
                  {"transformation", "path"}),
       false, false, false, t_transformation_write});
  add({"sequence_show", "Show a sequence",
       "A sequence of transformations (a name under peak's sequences/ or a .toml file under the "
       "root).",
       object_schema({{"name", str("sequence name, e.g. hlsl-fp32")}}, {"name"}),
       out_schema({{"name", str("")}, {"steps", {{"type", "array"}}}}, {"name", "steps"}), false,
       false, true, t_sequence_show});
}

// The LLM steps and the replies of manual mode.
void add_step_tools(std::vector<Tool>& t) {
  auto add = [&](Tool tool) { t.push_back(std::move(tool)); };
  add({"apply", "Apply a transformation",
       "Apply one transformation to HEAD: each pass asks the model to rewrite one region, then the "
       "candidate is compiled, validated (hidden shapes included), tuned and timed; on success a "
       "new checkpoint. Takes minutes: sends progress, can be cancelled. With llm manual it stops "
       "at each pass with a prompt (answer with respond, then call apply again).",
       object_schema(
           eval_props(llm_props(with_workspace({{"transformation", str("transformation name")}}))),
           {"transformation"}),
       step_out(), true, true, false, t_apply});
  add({"run", "Run a sequence",
       "Apply every step of a sequence, resumable: after a manual prompt, a failure or a "
       "cancellation, call run again with resume true. Sends progress, can be cancelled.",
       object_schema(eval_props(llm_props(with_workspace(
                         {{"sequence", str("sequence name or .toml file")},
                          {"resume", boolean("continue the last unfinished run of this sequence")},
                          {"from", integer("start at step N (0-based)")}}))),
                     {"sequence"}),
       out_schema({{"disposition", str("")},
                   {"message", str("")},
                   {"pending", boolean("")},
                   {"steps_done", integer("")},
                   {"workflow", integer("")},
                   {"steps", {{"type", "array"}}},
                   {"prompt", {{"type", "object"}}}},
                  {"disposition", "message", "pending", "steps_done"}),
       true, true, false, t_run});
  add({"respond", "Answer a manual prompt",
       "Manual mode: the reply to a waiting prompt (its id from apply, run or status). The reply "
       "is "
       "one fenced code block holding the complete region the prompt asks for.",
       object_schema(with_workspace({{"id", str("prompt id, e.g. 0003")},
                                     {"reply", str("the reply text")},
                                     {"by", str("who wrote it (recorded)")}}),
                     {"id", "reply"}),
       out_schema({{"id", str("")}, {"answered", boolean("")}}, {"id", "answered"}), false, false,
       false, t_respond});
}

const json& ref_schema() {
  static const json p = str("checkpoint: a number (3 or #3), HEAD, HEAD~N, a branch or a tag");
  return p;
}

// The history: where the workspace stands, its checkpoints, branches and tags.
void add_history_tools(std::vector<Tool>& t) {
  const json& ref_prop = ref_schema();
  auto add = [&](Tool tool) { t.push_back(std::move(tool)); };
  add({"status", "Status",
       "The running step (with its latest progress), HEAD, branches, recent workflows and the "
       "manual prompts that wait for a reply. Answers while a step runs.",
       object_schema(with_workspace({})),
       out_schema(
           {{"job", {{"type", {"object", "null"}}}}, {"workspace", {{"type", {"string", "null"}}}}},
           {"job"}),
       false, false, true, t_status});
  add({"log", "History", "Checkpoints, newest first, with branches, tags and a first number.",
       object_schema(with_workspace({})),
       out_schema({{"checkpoints", {{"type", "array"}}}}, {"checkpoints"}), false, false, true,
       t_log});
  add({"show", "Show a checkpoint",
       "One checkpoint: its numbers (GFLOP/s, speedups, % of the baseline and of the peak), the "
       "best configuration with its resources, the source and kernel.toml.",
       object_schema(with_workspace({{"ref", ref_prop}})),
       out_schema({{"id", integer("")}, {"source", str("")}, {"summary", {{"type", "object"}}}},
                  {"id", "source", "summary"}),
       false, false, true, t_show});
  add({"diff", "Diff two checkpoints",
       "Unified diff of the source and kernel.toml between two checkpoints (default HEAD~1 HEAD).",
       object_schema(with_workspace({{"a", ref_prop}, {"b", ref_prop}})),
       out_schema({{"a", str("")}, {"b", str("")}, {"diff", str("")}}, {"diff"}), false, false,
       true, t_diff});
  add({"checkout", "Check out",
       "Restore a branch (or, with detach, a checkpoint or tag) into the working files and move "
       "HEAD. Local changes to the working files are refused unless force (they are stashed "
       "first).",
       object_schema(
           with_workspace({{"ref", ref_prop},
                           {"detach", boolean("check out a checkpoint or tag: HEAD names it")},
                           {"force", boolean("stash local changes instead of refusing")}}),
           {"ref"}),
       out_schema({{"ref", str("")}, {"checkpoint", {{"type", {"integer", "null"}}}}}, {"ref"}),
       false, true, false, t_checkout});
  add({"branch", "Create a branch",
       "Create a branch at a checkpoint (default HEAD) and switch to it.",
       object_schema(
           with_workspace({{"name", str("branch name")},
                           {"at", ref_prop},
                           {"force", boolean("stash local changes instead of refusing")}}),
           {"name"}),
       out_schema({{"branch", str("")}, {"checkpoint", {{"type", {"integer", "null"}}}}},
                  {"branch"}),
       false, true, false, t_branch});
  add({"tag", "Tag a checkpoint", "Name a checkpoint (default HEAD); tags never move.",
       object_schema(with_workspace({{"name", str("tag name")}, {"ref", ref_prop}}), {"name"}),
       out_schema({{"tag", str("")}, {"checkpoint", {{"type", {"integer", "null"}}}}}, {"tag"}),
       false, false, false, t_tag});
}

// Evaluations of a checkpoint, the shape suite and the report.
void add_evaluation_tools(std::vector<Tool>& t) {
  const json& ref_prop = ref_schema();
  auto add = [&](Tool tool) { t.push_back(std::move(tool)); };
  add({"evaluate", "Validate, tune and time a checkpoint",
       "Evaluate a checkpoint again: validation on visible and hidden shapes, tuning over its "
       "parameters (tuning overrides the values), timing of the best configuration against the "
       "vendor baseline. Sends progress, can be cancelled.",
       object_schema(eval_props(with_workspace({{"ref", ref_prop}}))),
       out_schema({{"checkpoint", integer("")},
                   {"disposition", str("")},
                   {"message", str("")},
                   {"summary", {{"type", "object"}}}},
                  {"checkpoint", "disposition"}),
       true, false, false, t_evaluate});
  add({"bench", "Time a checkpoint over the shape suite",
       "Time a checkpoint's best configuration (default HEAD) at every shape of the shape suite in "
       "kernel.toml (square, irregular, large-k, small-k, small-m, wide), the vendor library timed "
       "in the same run (without one: % of the peak); returns per shape GFLOP/s, the vendor's "
       "and their ratio, and the geometric mean of the ratios; recorded with the checkpoint (the "
       "report shows it). A shape that cannot run is a row with its disposition. Sends progress, "
       "can be cancelled.",
       object_schema(with_workspace(
           {{"ref", ref_prop},
            {"device", str("device index or name substring (default: the best one)")},
            {"small", boolean("the suite's small variant (the default on CPU devices)")},
            {"full", boolean("the full suite even on a CPU device")},
            {"no_baseline", boolean("do not time the vendor library (ratios of the peak)")},
            {"single", boolean("the best configuration at every shape, even where tune_classes "
                               "recorded a configuration per class")}})),
       out_schema({{"checkpoint", integer("")},
                   {"rows", {{"type", "array"}}},
                   {"geomean", {{"type", "number"}}},
                   {"baseline", str("the vendor library; empty: ratios of the peak")}},
                  {"checkpoint", "rows", "geomean"}),
       true, false, false, t_bench});
  add({"tune_classes", "Tune a checkpoint per shape class",
       "One tuning search per shape class of the suite in kernel.toml (shapes classified by the "
       "context's class rules: large-k, small-m, small-k, wide, square, irregular for matmul), "
       "each on the suite's shapes of its class, starting from the checkpoint's best "
       "configurations, validated and timed against the vendor library. The configurations found "
       "become the checkpoint's dispatch table: bench then runs each shape with its class's "
       "configuration. Returns per class the configuration, the evaluations spent and the rate. "
       "`classes` limits the search to the classes named (the others keep the configuration the "
       "newest table has for them, else run the best configuration). Sends progress, can be "
       "cancelled.",
       object_schema(eval_props(with_workspace(
           {{"ref", ref_prop},
            {"classes",
             {{"type", "array"},
              {"items", {{"type", "string"}}},
              {"description", "the classes to search (default: every class of the suite)"}}}}))),
       out_schema({{"checkpoint", integer("")},
                   {"variants", {{"type", "array"}}},
                   {"evaluations", integer("configurations evaluated over all classes")}},
                  {"checkpoint", "variants"}),
       true, false, false, t_tune_classes});
  json formats = report_formats();
  add({"report", "Report",
       "Performance along the history from the seed to a checkpoint, with every attempt.",
       object_schema(with_workspace(
           {{"ref", ref_prop},
            {"format",
             {{"type", "string"}, {"enum", formats}, {"description", "default markdown"}}}})),
       out_schema({{"format", str("")}, {"report", str("")}}, {"format", "report"}), false, false,
       true, t_report});
  add({"export", "Export a checkpoint as a library",
       "Write a checkpoint (default HEAD) as a standalone CMake library that needs nothing of "
       "peak (docs/export.md): the device code of every configuration of its newest dispatch "
       "table (single: the best configuration alone), host code written from its launch plan, "
       "a C header, CMakeLists.txt, README.md with its provenance and export.json. Every "
       "configuration is built first. `output` is a folder under the root: new or empty, or "
       "(with force) one that an export wrote; a folder holding other files is refused. CUDA, "
       "HIP (AMD or NVIDIA) and HLSL (a Vulkan dispatcher) kernels. Sends progress.",
       object_schema(
           with_workspace(
               {{"checkpoint", ref_prop},
                {"output", str("the folder to write, under the root")},
                {"single", boolean("the best configuration alone, not the dispatch table's")},
                {"force", boolean("replace the files of an earlier export in the folder")},
                {"name", str("entry points peak_NAME (default: the context's name as a C "
                             "identifier)")},
                {"arch", str("CUDA architecture of the device code, e.g. sm_90a (default: the "
                             "device the configurations were tuned on)")}}),
           {"output"}),
       out_schema({{"dir", str("the folder written")},
                   {"entry", str("the entry point, e.g. peak_matmul_cuda_fp32")},
                   {"checkpoint", integer("")},
                   {"configurations", integer("configurations built into the library")},
                   {"dispatch_evaluation",
                    {{"type", {"integer", "null"}},
                     {"description", "the dispatch table's evaluation; null: the best alone"}}},
                   {"device", str("where the configurations were measured")},
                   {"files", {{"type", "array"}, {"items", {{"type", "string"}}}}}},
                  {"dir", "entry", "checkpoint", "configurations", "files"}),
       true, false, false, t_export});
}

std::vector<Tool> make_tools() {
  std::vector<Tool> t;
  add_library_tools(t);
  add_step_tools(t);
  add_history_tools(t);
  add_evaluation_tools(t);
  return t;
}

// ---- resources -------------------------------------------------------------------------------

std::string mime_for(const std::string& file) {
  if (ends_with(file, ".md")) return "text/markdown";
  if (ends_with(file, ".toml")) return "application/toml";
  if (ends_with(file, ".json")) return "application/json";
  return "text/plain";
}

}  // namespace

const std::vector<Tool>& tools() {
  static const std::vector<Tool> t = make_tools();
  return t;
}

const Tool* find_tool(const std::string& name) {
  for (const auto& t : tools())
    if (t.name == name) return &t;
  return nullptr;
}

std::optional<std::string> check_long_call(const Tool& tool, const json& a, ToolContext& ctx) {
  if (!tool.long_running) return std::nullopt;
  auto ws = open_workspace(ctx.server, a);
  if (!ws) return ws.error();
  const std::string& name = tool.name;
  if (name == "bench" && b_arg(a, "small") && b_arg(a, "full"))
    return "small and full exclude each other";
  if (name == "evaluate" || name == "bench" || name == "tune_classes")
    if (auto id = (*ws)->resolve(s_arg(a, "ref", "HEAD")); !id) return id.error();
  if (name == "export") {
    if (auto id = (*ws)->resolve(s_arg(a, "checkpoint", "HEAD")); !id) return id.error();
    if (auto out = export_folder(ctx.server, a); !out) return out.error();
  }
  if (name == "evaluate" || name == "tune_classes")
    if (auto c = choices_from(a, ctx); !c) return c.error();
  if (name == "run") {
    auto p = find_sequence(s_arg(a, "sequence"));
    if (!p) return p.error();
    auto c = confine(ctx.server.options().root, p->string(),
                     {ctx.server.options().root, data_path("sequences")});
    if (!c) return c.error();
    auto seq = load_sequence(*c);
    if (!seq) return seq.error();
    auto lib = (*ws)->library();
    auto family = context_family(**ws);
    if (lib && family)
      if (auto why = sequence_family_problem(*seq, *lib, *family); !why.empty()) return why;
  }
  if (name == "apply" || name == "run") {
    auto ao = apply_from(**ws, a, ctx);
    if (!ao) return ao.error();
    if (!ao->make_llm)
      if (auto drv = make_driver(ao->llm, ao->driver); !drv) return drv.error();
  }
  if (name == "apply") {
    auto lib = (*ws)->library();
    if (!lib) return lib.error();
    auto t = find_transformation(*lib, s_arg(a, "transformation"));
    if (!t) return t.error();
    auto family = context_family(**ws);
    if (!family) return family.error();
    if (auto why = family_problem(*t, *family); !why.empty()) return why;
  }
  return std::nullopt;
}

json tool_descriptor(const Tool& t) {
  return {{"name", t.name},
          {"title", t.title},
          {"description", t.description},
          {"inputSchema", t.input_schema},
          {"outputSchema", t.output_schema},
          {"annotations",
           {{"title", t.title},
            {"readOnlyHint", t.read_only},
            {"destructiveHint", false},
            {"idempotentHint", t.read_only},
            {"openWorldHint", false}}}};
}

std::optional<std::string> check_arguments(const json& schema, const json& args) {
  const json props = schema.value("properties", json::object());
  for (const auto& r : schema.value("required", json::array()))
    if (!args.contains(r.get<std::string>()))
      return fmt::format("missing required argument '{}'", r.get<std::string>());
  for (const auto& [name, value] : args.items()) {
    if (!props.contains(name)) {
      std::vector<std::string> known;
      for (const auto& [k, v] : props.items()) known.push_back(k);
      return fmt::format("unknown argument '{}' (arguments: {})", name, fmt::join(known, ", "));
    }
    const json& p = props[name];
    std::string type = p.value("type", "");
    bool good = type == "string"    ? value.is_string()
                : type == "integer" ? value.is_number_integer()
                : type == "number"  ? value.is_number()
                : type == "boolean" ? value.is_boolean()
                : type == "array"   ? value.is_array()
                : type == "object"  ? value.is_object()
                                    : true;
    if (!good)
      return fmt::format("argument '{}' must be {} {} (got {})", name,
                         type == "integer" || type == "array" || type == "object" ? "an" : "a",
                         type, value.dump());
    if (p.contains("enum") &&
        std::find(p["enum"].begin(), p["enum"].end(), value) == p["enum"].end())
      return fmt::format("argument '{}' must be one of {} (got {})", name, p["enum"].dump(),
                         value.dump());
    if (type == "object" && p.contains("additionalProperties") &&
        p["additionalProperties"].is_object())
      for (const auto& [k, v] : value.items()) {
        if (!v.is_array() ||
            !std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_number_integer(); }))
          return fmt::format("argument '{}': '{}' must be an array of integers (got {})", name, k,
                             v.dump());
      }
  }
  return std::nullopt;
}

Result<fs::path> confine(const fs::path& root, const std::string& arg,
                         const std::vector<fs::path>& allowed) {
  if (arg.empty()) return make_error("an empty path");
  fs::path p = fs::path(arg).is_absolute() ? fs::path(arg) : root / arg;
  fs::path c = canonical_or_weak(p);
  std::vector<std::string> names;
  for (const auto& a : allowed) {
    fs::path ca = canonical_or_weak(a);
    if (c == ca || inside(c, ca)) return c;
    names.push_back(ca.string());
  }
  return make_error(fmt::format(
      "the path {} is outside the folders this server may use ({}); refused. Use a path under the "
      "server's root",
      arg, fmt::join(names, ", ")));
}

// Resource URIs:
//   peak://checkpoints/{id}/source        the kernel source of a checkpoint
//   peak://checkpoints/{id}/kernel.toml   its kernel context
//   peak://reports/{ref}.{md,txt,json}    the report up to a checkpoint
//   peak://transformations/{name}         a transformation file
//   peak://prompts/{id}                   a manual prompt
json list_resources(McpServer& server) {
  json out = json::array();
  auto ws_r = open_workspace(server, json::object());
  if (ws_r) {
    Workspace& ws = **ws_r;
    if (auto cps = ws.store().checkpoints())
      for (const auto& c : *cps)
        out.push_back({{"uri", fmt::format("peak://checkpoints/{}/source", c.id)},
                       {"name", fmt::format("checkpoint-{}-source", c.id)},
                       {"title", fmt::format("checkpoint {}: {}", c.id, c.message)},
                       {"mimeType", "text/plain"}});
    out.push_back({{"uri", "peak://reports/HEAD.md"},
                   {"name", "report"},
                   {"title", "report up to HEAD (markdown)"},
                   {"mimeType", "text/markdown"}});
    for (const auto& p : list_manual(ws.root()))
      out.push_back({{"uri", "peak://prompts/" + p.id},
                     {"name", "prompt-" + p.id},
                     {"title", fmt::format("manual prompt {} ({}, {})", p.id, p.step_label,
                                           p.answered ? "answered" : "waiting")},
                     {"mimeType", "text/markdown"}});
  }
  auto lib = load_library_for(ws_r ? (*ws_r)->root() : fs::path());
  if (lib)
    for (const auto& t : *lib)
      out.push_back({{"uri", "peak://transformations/" + t.name},
                     {"name", "transformation-" + t.name},
                     {"title", t.title},
                     {"mimeType", "text/markdown"}});
  return out;
}

json list_resource_templates() {
  return json::array({{{"uriTemplate", "peak://checkpoints/{id}/source"},
                       {"name", "checkpoint-source"},
                       {"title", "the kernel source of a checkpoint"},
                       {"mimeType", "text/plain"}},
                      {{"uriTemplate", "peak://checkpoints/{id}/kernel.toml"},
                       {"name", "checkpoint-context"},
                       {"title", "the kernel.toml of a checkpoint"},
                       {"mimeType", "application/toml"}},
                      {{"uriTemplate", "peak://reports/{ref}.{format}"},
                       {"name", "report"},
                       {"title", "the report up to a checkpoint (format md, txt or json)"}},
                      {{"uriTemplate", "peak://transformations/{name}"},
                       {"name", "transformation"},
                       {"title", "a transformation file"},
                       {"mimeType", "text/markdown"}},
                      {{"uriTemplate", "peak://prompts/{id}"},
                       {"name", "prompt"},
                       {"title", "a manual prompt"},
                       {"mimeType", "text/markdown"}}});
}

Result<json> read_resource(McpServer& server, const std::string& uri) {
  auto text_result = [&](const std::string& text, const std::string& mime) {
    return json{{"contents", json::array({{{"uri", uri}, {"mimeType", mime}, {"text", text}}})}};
  };
  const std::string scheme = "peak://";
  if (!starts_with(uri, scheme))
    return make_error(
        fmt::format("unknown resource {} (peak's resources start with peak://; "
                    "resources/templates/list shows them)",
                    uri));
  std::string rest = uri.substr(scheme.size());
  auto parts = split(rest, '/');
  if (parts.size() == 2 && parts[0] == "transformations") {
    auto ws_r = open_workspace(server, json::object());
    auto lib = load_library_for(ws_r ? (*ws_r)->root() : fs::path());
    if (!lib) return Error{lib.error()};
    auto t = find_transformation(*lib, parts[1]);
    if (!t) return Error{t.error()};
    auto text = read_file(t->path);
    if (!text) return Error{text.error()};
    return text_result(*text, "text/markdown");
  }
  auto ws_r = open_workspace(server, json::object());
  if (!ws_r) return Error{ws_r.error()};
  Workspace& ws = **ws_r;
  if (parts.size() == 3 && parts[0] == "checkpoints") {
    auto id = ws.resolve(parts[1]);
    if (!id) return Error{id.error()};
    auto files = ws.checkpoint_files(*id);
    if (!files) return Error{files.error()};
    if (parts[2] == "source") return text_result(files->second, mime_for(files->first.source_file));
    if (parts[2] == "kernel.toml") return text_result(to_toml(files->first), "application/toml");
  }
  if (parts.size() == 2 && parts[0] == "reports") {
    auto dot = parts[1].rfind('.');
    if (dot != std::string::npos) {
      std::string ref = parts[1].substr(0, dot), ext = parts[1].substr(dot + 1);
      std::string format = ext == "md" ? "markdown" : ext == "txt" ? "text" : ext;
      auto text = render_report(ws, ref, format);
      if (!text) return Error{text.error()};
      return text_result(*text, ext == "md"     ? "text/markdown"
                                : ext == "json" ? "application/json"
                                                : "text/plain");
    }
  }
  if (parts.size() == 2 && parts[0] == "prompts") {
    for (const auto& p : list_manual(ws.root()))
      if (p.id == parts[1]) {
        auto text = read_file(p.prompt_path);
        if (!text) return Error{text.error()};
        return text_result(*text, "text/markdown");
      }
    return make_error(fmt::format("no manual prompt {} in this workspace", parts[1]));
  }
  return make_error(fmt::format(
      "unknown resource {}; resources/templates/list shows the forms peak serves", uri));
}

std::vector<std::string> complete_resource_argument(McpServer& server, const std::string& uri,
                                                    const std::string& argument,
                                                    const std::string& prefix) {
  std::vector<std::string> all;
  auto ws_r = open_workspace(server, json::object());
  if (argument == "name" && starts_with(uri, "peak://transformations/")) {
    auto lib = load_library_for(ws_r ? (*ws_r)->root() : fs::path());
    if (lib)
      for (const auto& t : *lib) all.push_back(t.name);
  } else if (ws_r && (argument == "id" || argument == "ref")) {
    Workspace& ws = **ws_r;
    if (starts_with(uri, "peak://prompts/")) {
      for (const auto& p : list_manual(ws.root())) all.push_back(p.id);
    } else {
      if (argument == "ref") all.push_back("HEAD");
      if (auto cps = ws.store().checkpoints())
        for (const auto& c : *cps) all.push_back(std::to_string(c.id));
      if (argument == "ref") {
        if (auto refs = ws.store().refs())
          for (const auto& [n, id] : *refs) all.push_back(n);
        if (auto tags = ws.store().tags())
          for (const auto& [n, id] : *tags) all.push_back(n);
      }
    }
  } else if (argument == "format") {
    all = {"md", "txt", "json"};
  }
  std::vector<std::string> out;
  for (const auto& v : all)
    if (starts_with(v, prefix)) out.push_back(v);
  return out;
}

}  // namespace peak::mcp
