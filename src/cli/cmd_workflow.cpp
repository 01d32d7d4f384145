// The LLM steps: apply, run, the manual replies (respond), and campaigns of runs.
#include "cli/common.h"

#include <cstdio>
#include <iostream>

#include <fmt/format.h>

#include "campaign/campaign.h"
#include "util/fs.h"

namespace peak::cli {

void setup_apply(CLI::App* c, Options& o) {
  c->add_option("args", o.args, "TRANSFORMATION");
  add_llm_options(c, o);
  add_eval_options(c, o);
  add_wait_option(c, o, "; manual mode: wait for the reply file instead of exiting");
}

int cmd_apply(Options& o) {
  if (o.args.size() != 1) {
    err("usage: peak apply TRANSFORMATION [--llm SPEC]");
    return kUsage;
  }
  int code = kOk;
  auto ws = open_ws(o, &code);
  if (!ws) return code;
  auto ao = apply_options(*ws, o);
  if (!ao) return fail(ao.status());
  return print_apply(ws->apply(o.args[0], *ao), o);
}

void setup_run(CLI::App* c, Options& o) {
  c->add_option("args", o.args, "SEQUENCE (a .toml file or a name under sequences/)");
  c->add_flag("--resume", o.resume,
              "continue the last unfinished run of this sequence (waiting, failed or "
              "interrupted, also when its process was killed)");
  c->add_option("--from", o.from, "start at step N (0-based; with --resume too)");
  add_llm_options(c, o);
  add_eval_options(c, o);
  add_wait_option(c, o, "; manual mode: wait for the reply file instead of exiting");
}

int cmd_run(Options& o) {
  if (o.args.size() != 1) {
    err("usage: peak run SEQUENCE [--llm SPEC] [--resume]");
    return kUsage;
  }
  if (o.from < 0) {
    err("--from takes a step number (0 = the first step)");
    return kUsage;
  }
  int code = kOk;
  auto ws = open_ws(o, &code);
  if (!ws) return code;
  auto seq = open_sequence(o.args[0]);
  if (!seq) return fail(seq.status());
  auto ao = apply_options(*ws, o);
  if (!ao) return fail(ao.status());
  RunOptions ro;
  ro.apply = *ao;
  ro.resume = o.resume;
  ro.from_step = o.from;
  if (o.attempts_given) ro.attempts = o.attempts;
  auto r = ws->run(*seq, ro);
  if (o.json_out) {
    emit_json(run_json(r));
  } else if (r.pending) {
    std::printf("%s\nthen continue with: peak run %s --resume --llm %s%s\n", r.message.c_str(),
                o.args[0].c_str(), o.llm.c_str(), options_text(ao->rerun_options).c_str());
  } else if (r.disposition == Disposition::passed) {
    auto h = ws->head();
    if (h)
      if (auto rep = ws->report(h->id, seq->name)) std::printf("%s", render_text(*rep).c_str());
  } else {
    err(r.message);
  }
  if (r.pending) return kWaiting;
  if (r.input_error) return kUsage;
  if (r.environment_error) return kEnvironment;
  return r.disposition == Disposition::passed ? kOk : kStepFailed;
}

void setup_respond(CLI::App* c, Options& o) {
  c->add_option("args", o.args, "ID FILE");
  c->add_option("--by", o.producer, "who wrote the reply (recorded)");
  c->add_flag("--list", o.list, "list manual prompts");
}

int cmd_respond(Options& o) {
  int code = kOk;
  auto ws = open_ws(o, &code);
  if (!ws) return code;
  if (o.list || o.args.empty()) {
    auto pending = list_manual(ws->root());
    if (o.json_out) {
      json j = json::array();
      for (const auto& p : pending)
        j.push_back({{"id", p.id},
                     {"step", p.step_label},
                     {"prompt", p.prompt_path.string()},
                     {"answered", p.answered}});
      emit_json(j);
      return kOk;
    }
    if (pending.empty()) std::printf("no manual prompts in this workspace\n");
    for (const auto& p : pending)
      std::printf("%s  %-8s %-40s %s\n", p.id.c_str(), p.answered ? "answered" : "waiting",
                  p.step_label.c_str(), p.prompt_path.string().c_str());
    return kOk;
  }
  if (o.args.size() != 2) {
    err("usage: peak respond ID FILE   (FILE: the reply; - for standard input)");
    return kUsage;
  }
  std::string text;
  if (o.args[1] == "-") {
    std::string line;
    while (std::getline(std::cin, line)) text += line + "\n";
  } else {
    auto t = read_file(o.args[1]);
    if (!t) {
      err(t.error());
      return kUsage;
    }
    text = *t;
  }
  std::string producer = o.producer.empty() ? "human (peak respond)" : o.producer;
  if (auto s = respond_manual(ws->root(), o.args[0], text, producer); !s) {
    err(s.message());
    return kUsage;
  }
  if (!o.quiet)
    std::printf("reply %s recorded; run the same apply/run command again to continue\n",
                o.args[0].c_str());
  return kOk;
}

void setup_campaign(CLI::App* c, Options& o) {
  c->require_subcommand(1);
  c->footer("The campaign file and the executors: docs/scale-out.md");
  CLI::App* run = c->add_subcommand(
      "run",
      "run every workflow of the campaign that has not ended (resuming unfinished ones) "
      "and print the summary");
  run->add_option("FILE", o.args, "the campaign file (TOML)")->required()->expected(1);
  run->add_option("--executor", o.executor,
                  "local: workflows as processes here; slurm: one batch job each "
                  "(sbatch, followed through squeue, requeued when killed)")
      ->capture_default_str()
      ->check(CLI::IsMember({"local", "slurm"}));
  run->add_option("--jobs,-j", o.jobs,
                  "workflows at once (local, default 1), or jobs queued or running at "
                  "once (slurm, default all)");
  run->callback([&o] { o.campaign_cmd = "run"; });
  CLI::App* status = c->add_subcommand(
      "status",
      "where every workflow stands, its result and its jobs (reads only; --json for the "
      "summary with peak stats)");
  status->add_option("FILE", o.args, "the campaign file (TOML)")->required()->expected(1);
  status->callback([&o] { o.campaign_cmd = "status"; });
  CLI::App* exec = c->add_subcommand(
      "exec",
      "run one workflow of the campaign here, starting or resuming it (what each job "
      "and each local process runs)");
  exec->add_option("FILE_WORKFLOW", o.args, "the campaign file and a workflow id")
      ->required()
      ->expected(2);
  exec->callback([&o] { o.campaign_cmd = "exec"; });
}

// `peak campaign run|status|exec FILE`: the campaign library (campaign/campaign.h) does the work.
int cmd_campaign(Options& o) {
  const std::string& sub = o.campaign_cmd;
  if (o.args.empty() || (sub == "exec") != (o.args.size() == 2) || o.args.size() > 2) {
    err(sub == "exec" ? "usage: peak campaign exec FILE WORKFLOW"
                      : fmt::format("usage: peak campaign {} FILE", sub));
    return kUsage;
  }
  auto c = campaign::load_campaign(o.args[0]);
  if (!c) return fail(c.status());
  if (sub == "exec") {
    auto r = campaign::exec_workflow(*c, o.args[1]);
    if (!r) return fail(r.status());
    if (o.json_out)
      emit_json({{"workflow", o.args[1]},
                 {"status", r->status},
                 {"steps_done", r->steps_done},
                 {"run", r->run},
                 {"message", r->message}});
    else if (!o.quiet || r->status != "passed")
      std::fprintf(stderr, "peak: campaign workflow %s: %s: %s\n", o.args[1].c_str(),
                   r->status.c_str(), r->message.c_str());
    if (r->input_error) return kUsage;
    if (r->status == "passed") return kOk;
    if (r->status == "failed") return kStepFailed;
    if (r->status == "waiting") return kWaiting;
    return kEnvironment;
  }
  json summary;
  if (sub == "run") {
    campaign::RunOptions ro;
    ro.executor = o.executor;
    ro.jobs = o.jobs;
    ro.peak_binary = self_executable();
    if (!o.quiet) ro.progress = [](const std::string& line) { note(line); };
    auto r = campaign::run_campaign(*c, ro);
    if (!r) return fail(r.status());
    summary = std::move(*r);
  } else {
    summary = campaign::summarize(*c);
  }
  if (o.json_out)
    emit_json(summary);
  else
    std::printf("%s", campaign::render_summary_text(summary).c_str());
  if (sub == "status") return kOk;
  int passed = summary["totals"].value("passed", 0);
  return passed == static_cast<int>(summary["workflows"].size()) ? kOk : kStepFailed;
}

}  // namespace peak::cli
