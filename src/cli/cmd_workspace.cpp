// The workspace and its history: init, transformations, status, log, show, diff, checkout,
// branch, tag, stash.
#include "cli/common.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "util/fs.h"

namespace peak::cli {

namespace {

// "run hlsl-fp32 (workflow 3): interrupted at step 2; continue with ..."
std::string workflow_line(const WorkflowRecord& w) {
  json args = json::parse(w.args_json.empty() ? "{}" : w.args_json, nullptr, false);
  json st = json::parse(w.state_json.empty() ? "{}" : w.state_json, nullptr, false);
  if (!args.is_object()) args = json::object();
  if (!st.is_object()) st = json::object();
  std::string what, next;
  std::string llm = args.value("llm", "");
  // The options the workflow ran with: continuing it repeats them.
  std::vector<std::string> opts;
  if (args.contains("options") && args["options"].is_array())
    for (const auto& v : args["options"])
      if (v.is_string()) opts.push_back(v.get<std::string>());
  const std::string with = (llm.empty() ? "" : " --llm " + llm) + options_text(opts);
  if (w.kind == "run") {
    std::string seq = st.value("sequence", args.value("sequence", ""));
    what = fmt::format("run {} at step {}", seq, st.value("next_step", 0) + 1);
    next = fmt::format("peak run {} --resume{}", seq, with);
  } else if (w.kind == "apply") {
    std::string t = args.value("transformation", "");
    what = fmt::format("apply {} on checkpoint {}", t, args.value("parent", int64_t{0}));
    next = fmt::format("peak apply {}{}", t, with);
  } else {
    what = w.kind;
  }
  std::string owner =
      w.owner_pid > 0 ? fmt::format(", pid {} on {}", w.owner_pid, w.owner_host) : "";
  std::string line = fmt::format("workflow {} ({}{}): {}", w.id, what, owner, w.status);
  if (w.status == "interrupted" || w.status == "waiting")
    if (!next.empty()) line += "; continue with `" + next + "`";
  if (w.status == "interrupted" && w.owner_pid > 0) line += " (its process is gone)";
  return line;
}

int print_switch(const Result<SwitchResult>& r, const Options& o) {
  if (!r) return fail(r.status());
  if (o.json_out)
    emit_json({{"head", r->head},
               {"checkpoint", r->checkpoint ? json(*r->checkpoint) : json(nullptr)},
               {"stash", r->stash ? json(*r->stash) : json(nullptr)},
               {"message", r->message}});
  else if (!o.quiet)
    std::printf("%s\n", r->message.c_str());
  return kOk;
}

}  // namespace

void setup_init(CLI::App* c, Options& o) {
  c->add_option("args", o.args, "CONTEXT [DIR]");
  c->add_flag("--force", o.force,
              "init into a folder that is not empty; files it replaces are stashed");
}

int cmd_init(Options& o) {
  if (o.args.empty()) {
    err("usage: peak init CONTEXT [DIR] [--force]  (CONTEXT: a folder with kernel.toml, e.g. "
        "examples/matmul-hlsl-fp32, or just its name; DIR: a new or empty folder)");
    return kUsage;
  }
  auto found = find_context(o.args[0]);
  if (!found) {
    err(found.error());
    return kUsage;
  }
  fs::path src = *found;
  auto ctx = load_context(src);
  if (!ctx) {
    err(ctx.error());
    return kUsage;
  }
  fs::path dest = o.args.size() > 1 ? fs::path(o.args[1]) : fs::path(ctx->name);
  auto ws = Workspace::init(src, dest, o.force);
  if (!ws) return fail(ws.status());
  auto stash = (*ws)->init_stash();
  if (o.json_out) {
    emit_json({{"workspace", (*ws)->root().string()},
               {"checkpoint", 1},
               {"stash", stash ? json(*stash) : json(nullptr)}});
    return kOk;
  }
  std::printf("created workspace %s from %s (checkpoint 1: seed, branch main)\n",
              (*ws)->root().string().c_str(), src.string().c_str());
  if (stash)
    std::printf(
        "the files it replaced are stash %lld (`peak stash list`; `peak stash pop` "
        "brings them back)\n",
        static_cast<long long>(*stash));
  std::printf("next: cd %s && peak transformations list\n", dest.string().c_str());
  return kOk;
}

void setup_transformations(CLI::App* c, Options& o) {
  c->add_option("args", o.args, "list | show NAME");
  c->add_flag("--all", o.all,
              "list every transformation, also those written for other kernel families than the "
              "workspace's");
}

namespace {

// The table of `transformations list`; with `families`, a column naming each one's families.
void print_transformations(const std::vector<Transformation>& lib, bool families) {
  std::printf("%-20s %-4s %-7s %-24s %s%s\n", "name", "ver", "passes", "tuning parameters",
              families ? "families                      " : "", "title");
  for (const auto& t : lib) {
    std::vector<std::string> tp;
    for (const auto& p : t.tuning) tp.push_back(p.name);
    const std::string fam = families ? fmt::format("{:<29} ", families_text(t)) : "";
    std::printf("%-20s %-4d %-7zu %-24s %s%s\n", t.name.c_str(), t.version, t.passes.size(),
                join(tp, ",").c_str(), fam.c_str(), t.title.c_str());
  }
}

}  // namespace

int cmd_transformations(Options& o) {
  std::vector<std::string> problems;
  // Inside a workspace: its own transformations join the shared library, and the list shows
  // those written for its kernel's family unless --all.
  // Any transformation can be shown, whatever family it is written for.
  const std::string sub = o.args.empty() ? "list" : o.args[0];
  auto ws = Workspace::open(o.workspace);
  auto l = list_library(ws ? ws->get() : nullptr, o.all || sub == "show", &problems);
  if (!l) return fail(l.status());
  for (const auto& p : problems)
    note(fmt::format("warning: skipped a transformation file that cannot be read: {}", p));
  const auto& lib = l->shown;
  if (sub == "list") {
    if (o.json_out) {
      json j = json::array();
      for (const auto& t : lib) j.push_back(transformation_json(t));
      emit_json(j);
      return kOk;
    }
    const char* family = l->family && !l->family->empty() ? l->family->c_str() : "generic";
    if (l->family && lib.empty())
      std::printf("no transformation of the library is written for the %s family yet\n", family);
    else if (l->family)
      std::printf("transformations for the %s family:\n", family);
    if (!lib.empty() || !l->family) print_transformations(lib, !l->family);
    if (auto line = others_line(*l); !line.empty()) std::printf("%s\n", line.c_str());
    return kOk;
  }
  if (sub == "show") {
    if (o.args.size() < 2) {
      err("usage: peak transformations show NAME");
      return kUsage;
    }
    auto t = find_transformation(lib, o.args[1]);
    if (!t) {
      err(t.error());
      return kUsage;
    }
    auto text = read_file(t->path);
    std::printf("families: %s\n\n%s", families_text(*t).c_str(), text ? text->c_str() : "");
    return kOk;
  }
  err(fmt::format("unknown `transformations {}`; use `list` or `show NAME`", sub));
  return kUsage;
}

int cmd_status(Options& o) {
  int code = kOk;
  auto ws = open_ws(o, &code);
  if (!ws) return code;
  WorkspaceStatus st = ws->status();
  if (o.json_out) {
    json wf = json::array();
    for (const auto& w : st.workflows)
      wf.push_back(
          {{"id", w.id},
           {"kind", w.kind},
           {"status", w.status},
           {"args", json::parse(w.args_json.empty() ? "{}" : w.args_json, nullptr, false)},
           {"state", json::parse(w.state_json.empty() ? "{}" : w.state_json, nullptr, false)},
           {"owner", {{"pid", w.owner_pid}, {"host", w.owner_host}, {"start", w.owner_start}}},
           {"line", workflow_line(w)}});
    json prompts = json::array();
    for (const auto& p : st.prompts)
      prompts.push_back({{"id", p.id}, {"step", p.step_label}, {"path", p.prompt_path.string()}});
    json stashes = json::array();
    for (const auto& s : st.stashes)
      stashes.push_back({{"id", s.id}, {"message", s.message}, {"created_at", s.created_at}});
    json busy = nullptr;
    if (st.busy)
      busy = {{"pid", st.busy->process.pid},
              {"host", st.busy->process.host},
              {"command", st.busy->command},
              {"since", st.busy->since}};
    emit_json({{"head", st.head},
               {"checkpoint", st.checkpoint ? json(*st.checkpoint) : json(nullptr)},
               {"clean", st.working.clean},
               {"changes", st.working.changes},
               {"workflows", wf},
               {"prompts", prompts},
               {"stashes", stashes},
               {"busy", busy}});
    return kOk;
  }
  if (starts_with(st.head, "#"))
    std::printf("HEAD is detached at checkpoint %s\n", st.head.substr(1).c_str());
  else
    std::printf("on branch %s, checkpoint %s\n", st.head.c_str(),
                st.checkpoint ? std::to_string(*st.checkpoint).c_str() : "(none yet)");
  if (st.working.clean)
    std::printf("working files: as in HEAD\n");
  else {
    std::printf(
        "working files: changed since HEAD (`peak diff` shows how; `peak commit -m "
        "MESSAGE` keeps them, `peak stash` sets them aside):\n");
    for (const auto& c : st.working.changes) std::printf("  %s\n", c.c_str());
  }
  if (st.busy) std::printf("busy: %s is changing the workspace\n", st.busy->describe().c_str());
  for (const auto& w : st.workflows) std::printf("%s\n", workflow_line(w).c_str());
  for (const auto& p : st.prompts)
    std::printf("manual prompt %s waits for a reply (%s): `peak respond %s FILE`\n", p.id.c_str(),
                p.step_label.c_str(), p.id.c_str());
  if (!st.stashes.empty()) std::printf("%zu stash(es): `peak stash list`\n", st.stashes.size());
  return kOk;
}

int cmd_log(Options& o) {
  int code = kOk;
  auto ws = open_ws(o, &code);
  if (!ws) return code;
  json j = log_json(*ws);  // each checkpoint's result (the rule of docs/store.md)
  if (o.json_out) {
    emit_json(j);
    return kOk;
  }
  for (const auto& c : j) {
    auto names = c["refs"].get<std::vector<std::string>>();
    std::string perf = c.value("perf", "");
    std::printf("%-4lld %s%s  parent %-4s %-16s %s\n", c["id"].get<long long>(),
                names.empty() ? "" : fmt::format("({}) ", join(names, ", ")).c_str(),
                c.value("created_at", "").c_str(),
                c["parent"].is_null() ? "-" : std::to_string(c["parent"].get<long long>()).c_str(),
                c.value("message", "").c_str(), perf.empty() ? "-" : perf.c_str());
  }
  for (const auto& w : ws->status().workflows) std::printf("%s\n", workflow_line(w).c_str());
  return kOk;
}

void setup_show(CLI::App* c, Options& o) {
  c->add_option("args", o.args, "CHECKPOINT");
  c->add_flag("--all", o.all, "list every evaluation of the checkpoint");
}

int cmd_show(Options& o) {
  if (o.args.size() > 1) {
    err("usage: peak show [CHECKPOINT] [--all]");
    return kUsage;
  }
  int code = kOk;
  auto ws = open_ws(o, &code);
  if (!ws) return code;
  auto id = ws->resolve(o.args.empty() ? "HEAD" : o.args[0]);
  if (!id) return fail(id.status());
  auto c = ws->store().checkpoint(*id);
  if (!c) return fail(c.status());
  auto files = ws->checkpoint_files(*id);
  if (!files) return fail(files.status());
  EvalSummary summary = ws->result_summary(*c);
  auto evaluations = ws->evaluations(*id);
  if (o.json_out) {
    auto cj = checkpoint_json(*ws, *id);
    if (!cj) return fail(Status::error(cj.error(), ErrorKind::environment));
    json j = *cj;
    if (o.all) {
      json all = json::array();
      for (const auto& e : evaluations)
        all.push_back(
            {{"id", e.record.id},
             {"kind", e.record.kind},
             {"created_at", e.record.created_at},
             {"device", e.record.device},
             {"options", json::parse(e.record.options_json, nullptr, false)},
             {"standard", e.record.standard},
             {"disposition", e.record.disposition},
             {"shape", e.record.shape},
             {"gflops", std::isfinite(e.record.gflops) ? json(e.record.gflops) : json(nullptr)},
             {"result", e.is_result},
             {"summary", e.summary}});
      j["evaluations"] = all;
    }
    emit_json(j);
    return kOk;
  }
  std::printf("checkpoint %lld  %s  (%s)\nparent: %s  branch: %s\n", static_cast<long long>(c->id),
              c->message.c_str(), c->created_at.c_str(),
              c->parent ? std::to_string(*c->parent).c_str() : "-", c->branch.c_str());
  if (summary.best)
    std::printf("best configuration: %s\n", summary.best->config_text.value_or("").c_str());
  if (summary.bench)
    for (const auto& m : *summary.bench)
      std::printf("  %-20s %s  spread %.1f%%\n", m.shape.value_or("").c_str(),
                  headline_rate(m, 10).c_str(), 100 * m.spread.value_or(0.0));
  if (o.all) {
    std::printf("\nevaluations (%zu; * marks the result: the best under the default options):\n",
                evaluations.size());
    for (const auto& e : evaluations) {
      json opts = json::parse(e.record.options_json, nullptr, false);
      std::string detail;
      if (opts.is_object()) {
        if (opts.contains("tuning") && !opts["tuning"].empty())
          detail += " --tune " + opts["tuning"].dump();
        if (opts.contains("budget")) detail += fmt::format(" budget {}", opts.value("budget", 0));
        if (opts.contains("small")) detail += opts.value("small", false) ? " small" : " full";
      }
      std::printf("%s %-4lld %s  %-10s %-9s %-14s %s%s  [%s%s]\n", e.is_result ? "*" : " ",
                  static_cast<long long>(e.record.id), e.record.created_at.c_str(),
                  e.record.kind.c_str(), e.record.disposition.c_str(), e.record.device.c_str(),
                  std::isfinite(e.record.gflops)
                      ? fmt::format("{:.1f} GFLOP/s", e.record.gflops).c_str()
                      : "-",
                  e.record.shape.empty() ? "" : (" at " + e.record.shape).c_str(),
                  e.record.standard ? "default options" : "other options", detail.c_str());
    }
  }
  std::printf("\n%s", files->second.c_str());
  return kOk;
}

void setup_diff(CLI::App* c, Options& o) { c->add_option("args", o.args, "[A [B]]"); }

int cmd_diff(Options& o) {
  if (o.args.size() > 2) {
    err("usage: peak diff [A [B]]");
    return kUsage;
  }
  int code = kOk;
  auto ws = open_ws(o, &code);
  if (!ws) return code;
  // No argument: HEAD against the working files; one: A against the working files.
  std::string a = o.args.size() > 0 ? o.args[0] : "HEAD";
  std::string b = o.args.size() > 1 ? o.args[1] : "";
  auto d = ws->diff(a, b);
  if (!d) return fail(d.status());
  if (o.json_out)
    emit_json({{"a", a}, {"b", b.empty() ? "working files" : b}, {"diff", *d}});
  else
    std::printf("%s", d->c_str());
  return kOk;
}

void setup_checkout(CLI::App* c, Options& o) {
  c->add_option("args", o.args, "REF");
  c->add_flag("--detach", o.detach,
              "check out a checkpoint number, HEAD~N or tag with a detached HEAD");
  c->add_flag("--force", o.force,
              "replace local changes to the working files (they are stashed first)");
  add_wait_option(c, o);
}

int cmd_checkout(Options& o) {
  if (o.args.size() != 1) {
    err("usage: peak checkout REF [--detach] [--force]  (REF: a branch, or with --detach a "
        "checkpoint number, HEAD~N or a tag)");
    return kUsage;
  }
  int code = kOk;
  auto ws = open_ws(o, &code);
  if (!ws) return code;
  SwitchOptions so;
  so.force = o.force;
  so.detach = o.detach;
  return print_switch(ws->checkout(o.args[0], so), o);
}

void setup_branch(CLI::App* c, Options& o) {
  c->add_option("args", o.args, "[NAME [REF]]");
  c->add_flag("--force", o.force,
              "replace local changes to the working files (they are stashed first)");
  add_wait_option(c, o);
}

int cmd_branch(Options& o) {
  if (o.args.size() > 2) {
    err("usage: peak branch [NAME [REF]]");
    return kUsage;
  }
  int code = kOk;
  auto ws = open_ws(o, &code);
  if (!ws) return code;
  if (o.args.empty()) {
    auto refs = ws->store().refs();
    auto head = ws->store().head();
    if (!refs) return fail(refs.status());
    if (o.json_out) {
      emit_json({{"head", head ? *head : ""}, {"branches", *refs}});
      return kOk;
    }
    for (const auto& [n, id] : *refs)
      std::printf("%s %s -> %lld\n", head && *head == n ? "*" : " ", n.c_str(),
                  static_cast<long long>(id));
    if (head && starts_with(*head, "#"))
      std::printf("* (detached HEAD at checkpoint %s)\n", head->substr(1).c_str());
    return kOk;
  }
  SwitchOptions so;
  so.force = o.force;
  return print_switch(ws->branch(o.args[0], o.args.size() > 1 ? o.args[1] : "HEAD", so), o);
}

void setup_tag(CLI::App* c, Options& o) {
  c->add_option("args", o.args, "[NAME [REF]]");
  add_wait_option(c, o);
}

int cmd_tag(Options& o) {
  if (o.args.size() > 2) {
    err("usage: peak tag [NAME [REF]]");
    return kUsage;
  }
  int code = kOk;
  auto ws = open_ws(o, &code);
  if (!ws) return code;
  if (o.args.empty()) {
    auto tags = ws->store().tags();
    if (!tags) return fail(tags.status());
    if (o.json_out) {
      emit_json(*tags);
      return kOk;
    }
    for (const auto& [n, id] : *tags)
      std::printf("%s -> %lld\n", n.c_str(), static_cast<long long>(id));
    return kOk;
  }
  if (auto s = ws->tag(o.args[0], o.args.size() > 1 ? o.args[1] : "HEAD"); !s) return fail(s);
  if (!o.quiet) std::printf("tagged %s\n", o.args[0].c_str());
  return kOk;
}

void setup_stash(CLI::App* c, Options& o) {
  c->add_option("args", o.args, "push | list | pop [ID] | drop [ID]");
  c->add_option("-m,--message", o.message, "what the changes are (push)");
  c->add_flag("--force", o.force,
              "pop: replace local changes to the working files (they are stashed first)");
  add_wait_option(c, o);
}

int cmd_stash(Options& o) {
  std::string sub = o.args.empty() ? "push" : o.args[0];
  int64_t id = 0;
  if (o.args.size() > 2 || (o.args.size() == 2 && sub != "pop" && sub != "drop")) {
    err("usage: peak stash [push [-m MESSAGE]] | list | pop [ID] | drop [ID]");
    return kUsage;
  }
  if (o.args.size() == 2) {
    std::string n = o.args[1];
    if (n.empty() || !std::all_of(n.begin(), n.end(), ::isdigit) || n.size() > 15) {
      err(fmt::format("'{}' is not a stash id (`peak stash list` shows them)", n));
      return kUsage;
    }
    id = std::stoll(n);
  }
  int code = kOk;
  auto ws = open_ws(o, &code);
  if (!ws) return code;
  if (sub == "push") {
    auto r = ws->stash_push(o.message);
    if (!r) return fail(r.status());
    if (o.json_out)
      emit_json({{"stash", *r}});
    else if (!o.quiet)
      std::printf("local changes are stash %lld; the working files are HEAD's again\n",
                  static_cast<long long>(*r));
    return kOk;
  }
  if (sub == "list") {
    auto l = ws->stash_list();
    if (!l) return fail(l.status());
    if (o.json_out) {
      json j = json::array();
      for (const auto& s : *l) {
        json files = json::array();
        for (const auto& [path, blob] : s.files) files.push_back(path);
        j.push_back(
            {{"id", s.id},
             {"base_checkpoint", s.base_checkpoint ? json(*s.base_checkpoint) : json(nullptr)},
             {"branch", s.branch},
             {"message", s.message},
             {"files", files},
             {"created_at", s.created_at}});
      }
      emit_json(j);
      return kOk;
    }
    if (l->empty()) std::printf("no stashes\n");
    for (const auto& s : *l)
      std::printf("%lld  %s  on checkpoint %s%s: %s\n", static_cast<long long>(s.id),
                  s.created_at.c_str(),
                  s.base_checkpoint ? std::to_string(*s.base_checkpoint).c_str() : "-",
                  s.branch.empty() ? "" : (" (" + s.branch + ")").c_str(), s.message.c_str());
    return kOk;
  }
  if (sub == "pop") return print_switch(ws->stash_pop(id, o.force), o);
  if (sub == "drop") {
    if (auto s = ws->stash_drop(id); !s) return fail(s);
    if (!o.quiet) std::printf("dropped\n");
    return kOk;
  }
  err(fmt::format("unknown `stash {}`; use push, list, pop or drop", sub));
  return kUsage;
}

}  // namespace peak::cli
