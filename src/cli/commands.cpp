#include "cli/commands.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "engine/api.h"
#include "engine/demo.h"
#include "engine/paths.h"
#include "engine/workspace.h"
#include "llm/llm.h"
#include "mcp/serve.h"
#include "peak/version.h"
#include "report/report.h"
#include "report/stats.h"
#include "transform/transformation.h"
#include "tune/bench.h"
#include "tune/record.h"
#include "util/fs.h"

namespace peak::cli {

namespace {

using json = nlohmann::json;

struct Options {
  // global
  std::string workspace = ".";
  bool json_out = false;
  bool quiet = false;
  // shared by several commands
  std::vector<std::string> args;
  std::string llm = "manual";
  std::string record;
  std::string record_note;
  std::string producer;
  std::string key_env;
  std::string instructions;
  int attempts = 3;
  bool no_feedback = false;
  bool wait = false;
  std::string device;
  bool small = false;
  bool full = false;
  int budget = 0;
  int jobs = 0;
  bool no_baseline = false;
  bool resume = false;
  int from = 0;
  bool force = false;
  std::string format = "text";
  std::string output;
  std::string message;
  std::string backend = "auto";
  std::string dir;
  bool list = false;
  std::vector<std::string> tuning;  // NAME=V1,V2
  std::string prompt_device;        // JSON file of device facts for prompts
  bool compile_only = false;
  bool sanitize = false;
  // tuning search
  std::string strategy;
  std::string strategy_budget;
  std::string export_space;  // tune: write the search's tuning cache here
  int64_t run = 0;           // export-space: a tuning run id
  std::string strategies;    // bench: comma-separated
  int seeds = 20;
  int batch = 8;
  bool reuse = false;
  std::string html;   // report --html FILE
  std::string store;  // report/serve --store PATH
  std::string host = "127.0.0.1";
  int port = 8765;
  // mcp
  std::string mcp_http;
  std::string mcp_root;
  std::string mcp_token_env;
};

void err(const std::string& m) { std::fprintf(stderr, "peak: %s\n", m.c_str()); }

void emit_json(const json& j) { std::cout << j.dump(2) << "\n"; }

// Opens the workspace, or says why not (the caller returns kUsage).
std::unique_ptr<Workspace> open_ws(const Options& o) {
  auto ws = Workspace::open(o.workspace);
  if (!ws) {
    err(ws.error());
    return nullptr;
  }
  (*ws)->progress().set_quiet(o.quiet);
  return std::move(*ws);
}

// Resolves a checkpoint reference, or says why not.
std::optional<int64_t> resolve_or_report(Workspace& ws, const std::string& ref) {
  auto id = ws.resolve(ref);
  if (!id) {
    err(id.error());
    return std::nullopt;
  }
  return *id;
}

Result<std::map<std::string, std::vector<int64_t>>> parse_tuning(
    const std::vector<std::string>& items) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& it : items) {
    auto eq = it.find('=');
    if (eq == std::string::npos)
      return make_error(fmt::format("--tune '{}': expected NAME=V1,V2,...", it));
    std::vector<int64_t> vals;
    std::string rest = it.substr(eq + 1);
    size_t start = 0;
    while (start <= rest.size()) {
      size_t comma = rest.find(',', start);
      std::string v =
          trim(rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (!v.empty()) {
        try {
          vals.push_back(std::stoll(v));
        } catch (...) {
          return make_error(fmt::format("--tune '{}': '{}' is not an integer", it, v));
        }
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    out[it.substr(0, eq)] = vals;
  }
  return out;
}

EvalOptions eval_options(Workspace& ws, const Options& o) {
  return api::eval_options(ws, {o.device, o.small, o.full, o.budget, o.jobs, o.no_baseline,
                                o.compile_only, o.sanitize, o.strategy, o.strategy_budget,
                                o.reuse});
}

// The strategy options name a known strategy and a well-formed budget; says why not.
bool check_strategy(const std::string& strategy, const std::string& budget) {
  api::EvalArgs a;
  a.strategy = strategy;
  a.strategy_budget = budget;
  if (auto s = api::check_tuning(a); !s) {
    err(s.message());
    return false;
  }
  return true;
}

// The options of apply/run; nullopt (after saying why) when --prompt-device is unusable.
std::optional<ApplyOptions> apply_options(Workspace& ws, const Options& o) {
  if (!check_strategy(o.strategy, o.strategy_budget)) return std::nullopt;
  ApplyOptions a;
  a.llm = o.llm;
  a.driver.workspace = ws.root();
  a.driver.manual_wait = o.wait;
  a.driver.producer = o.producer;
  a.driver.key_env = o.key_env;
  a.record_dir = o.record;
  a.record_note = o.record_note;
  a.attempts = o.attempts;
  a.extra_instructions = o.instructions;
  a.feedback = !o.no_feedback;
  a.eval = eval_options(ws, o);
  if (!o.prompt_device.empty()) {
    auto facts = read_device_facts(o.prompt_device);
    if (!facts) {
      err("--prompt-device: " + facts.error());
      return std::nullopt;
    }
    a.prompt_device = *facts;
  }
  return a;
}

void add_llm_options(CLI::App* c, Options& o) {
  c->add_option(
       "--llm", o.llm,
       "LLM driver: openai:MODEL[@URL], anthropic:MODEL[@URL], command:'PROG', manual, replay:DIR")
      ->capture_default_str();
  c->add_option("--record", o.record, "record every LLM exchange into DIR (for replay)");
  c->add_option("--record-note", o.record_note, "a note stored with each recording");
  c->add_option("--by", o.producer, "who produces the replies (manual/command mode; recorded)");
  c->add_option("--key-env", o.key_env, "environment variable holding the API key");
  c->add_option("--attempts", o.attempts, "attempts per transformation")->capture_default_str();
  c->add_option("--instructions", o.instructions, "extra text appended to every prompt");
  c->add_flag("--no-feedback", o.no_feedback,
              "do not tell the model why its previous attempt failed");
  c->add_flag("--wait", o.wait, "manual mode: wait for the reply file instead of exiting");
  c->add_option("--prompt-device", o.prompt_device,
                "JSON device facts shown in prompts instead of this machine's (recording for "
                "another device)");
}

void add_eval_options(CLI::App* c, Options& o) {
  c->add_option("--device", o.device, "device index or name substring (default: the best one)");
  c->add_flag("--small", o.small, "time the context's small shapes (default on CPU devices)");
  c->add_flag("--full", o.full, "time the context's bench shapes even on a CPU device");
  c->add_option("--budget", o.budget, "tuning configurations at most");
  c->add_option("--strategy", o.strategy,
                "tuning strategy: auto (default), exhaustive, random, genetic, annealing, basin, "
                "bayes");
  c->add_option("--strategy-budget", o.strategy_budget,
                "tuning budget: N evaluations, P% of the space, Ts seconds (e.g. 24,15%,600s)");
  c->add_flag("--reuse-measurements", o.reuse,
              "do not run again the configurations of the same source measured before in this "
              "workspace (resumes an interrupted tuning search)");
  c->add_option("--jobs,-j", o.jobs, "parallel compiles (default: all cores)");
  c->add_flag("--no-baseline", o.no_baseline, "do not time the vendor library");
  c->add_option("--tune", o.tuning, "override a tuning parameter's values: NAME=V1,V2,...");
  c->add_flag("--sanitize", o.sanitize,
              "CUDA: also run compute-sanitizer (memcheck, racecheck) on one small shape");
  c->add_flag("--compile-only", o.compile_only,
              "compile every configuration but run nothing (recording without the target device)");
}

int print_apply(const ApplyResult& r, const Options& o) {
  if (o.json_out) {
    emit_json(api::apply_json(r));
  } else if (r.pending) {
    std::printf("%s\n", r.message.c_str());
  } else if (r.disposition == Disposition::passed) {
    std::printf("passed: checkpoint %lld — %s\n", static_cast<long long>(r.checkpoint.value_or(0)),
                r.message.c_str());
    if (r.summary.contains("bench"))
      for (const auto& m : r.summary["bench"])
        std::printf("  %-20s %10.1f GFLOP/s  x%.2f vs parent  x%.2f vs seed%s\n",
                    m.value("shape", "").c_str(), m.value("gflops", 0.0),
                    m.value("speedup_vs_parent", 0.0), m.value("speedup_vs_seed", 0.0),
                    m.contains("pct_of_baseline")
                        ? fmt::format("  {:.1f}% of {}", m.value("pct_of_baseline", 0.0),
                                      m.value("baseline", ""))
                              .c_str()
                        : "");
  } else {
    err(fmt::format("{}: {}", to_string(r.disposition), r.message));
  }
  if (r.pending) return kWaiting;
  if (r.input_error) return kUsage;
  if (r.environment_error) return kEnvironment;
  return r.disposition == Disposition::passed ? kOk : kStepFailed;
}

// ---- handlers --------------------------------------------------------------------------------

int cmd_init(Options& o) {
  if (o.args.empty()) {
    err("usage: peak init CONTEXT [DIR]  (CONTEXT: a folder with kernel.toml, e.g. "
        "examples/matmul-hlsl-fp32)");
    return kUsage;
  }
  auto found = api::find_context(o.args[0]);
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
  auto ws = Workspace::init(src, dest);
  if (!ws) {
    err(ws.error());
    return kUsage;
  }
  if (o.json_out)
    emit_json({{"workspace", (*ws)->root().string()}, {"checkpoint", 1}});
  else
    std::printf(
        "created workspace %s from %s (checkpoint 1: seed, branch main)\nnext: cd %s && peak "
        "transformations list\n",
        (*ws)->root().string().c_str(), src.string().c_str(), dest.string().c_str());
  return kOk;
}

int cmd_transformations(Options& o) {
  std::vector<Transformation> lib;
  auto ws = Workspace::open(o.workspace);
  auto l = ws ? (*ws)->library() : api::load_library_for("");
  if (!l) {
    err(l.error());
    return kUsage;
  }
  lib = *l;
  std::string sub = o.args.empty() ? "list" : o.args[0];
  if (sub == "list") {
    if (o.json_out) {
      json j = json::array();
      for (const auto& t : lib) j.push_back(api::transformation_json(t));
      emit_json(j);
      return kOk;
    }
    std::printf("%-16s %-4s %-7s %-24s %s\n", "name", "ver", "passes", "tuning parameters",
                "title");
    for (const auto& t : lib) {
      std::vector<std::string> tp;
      for (const auto& p : t.tuning) tp.push_back(p.name);
      std::printf("%-16s %-4d %-7zu %-24s %s\n", t.name.c_str(), t.version, t.passes.size(),
                  join(tp, ",").c_str(), t.title.c_str());
    }
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
    std::printf("%s", text ? text->c_str() : "");
    return kOk;
  }
  err(fmt::format("unknown `transformations {}`; use `list` or `show NAME`", sub));
  return kUsage;
}

int cmd_apply(Options& o) {
  if (o.args.empty()) {
    err("usage: peak apply TRANSFORMATION [--llm SPEC]");
    return kUsage;
  }
  auto ws = open_ws(o);
  if (!ws) return kUsage;
  auto tuning = parse_tuning(o.tuning);
  if (!tuning) {
    err(tuning.error());
    return kUsage;
  }
  auto ao = apply_options(*ws, o);
  if (!ao) return kUsage;
  auto r = ws->apply(o.args[0], *ao, 0, *tuning);
  return print_apply(r, o);
}

int cmd_run(Options& o) {
  if (o.args.empty()) {
    err("usage: peak run SEQUENCE.toml [--llm SPEC] [--resume]");
    return kUsage;
  }
  auto ws = open_ws(o);
  if (!ws) return kUsage;
  auto p = api::find_sequence(o.args[0]);
  if (!p) {
    err(p.error());
    return kUsage;
  }
  auto seq = load_sequence(*p);
  if (!seq) {
    err(seq.error());
    return kUsage;
  }
  for (const auto& st : seq->steps)
    if (!check_strategy(st.strategy, st.strategy_budget)) {
      err(fmt::format("in {} (step {})", p->string(), st.transformation));
      return kUsage;
    }
  RunOptions ro;
  auto ao = apply_options(*ws, o);
  if (!ao) return kUsage;
  ro.apply = *ao;
  ro.resume = o.resume;
  ro.from_step = o.from;
  auto r = ws->run(*seq, ro);
  if (o.json_out) {
    emit_json(api::run_json(r));
  } else if (r.pending) {
    std::printf("%s\nthen continue with: peak run %s --resume --llm %s\n", r.message.c_str(),
                o.args[0].c_str(), o.llm.c_str());
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

int cmd_respond(Options& o) {
  auto ws = open_ws(o);
  if (!ws) return kUsage;
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
  if (o.args.size() < 2) {
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

int cmd_eval(Options& o, bool force, const char* what) {
  auto ws = open_ws(o);
  if (!ws) return kUsage;
  auto id = resolve_or_report(*ws, o.args.empty() ? "HEAD" : o.args[0]);
  if (!id) return kUsage;
  if (!check_strategy(o.strategy, o.strategy_budget)) return kUsage;
  EvalOptions e = eval_options(*ws, o);
  auto tuning = parse_tuning(o.tuning);
  if (!tuning) {
    err(tuning.error());
    return kUsage;
  }
  e.tuning_overrides = *tuning;
  auto ev = ws->evaluate_checkpoint(*id, e, force);
  if (!ev) {
    err(ev.error());
    return kEnvironment;
  }
  if (!o.export_space.empty()) {
    auto run = ev->summary.contains("configs") && ev->summary["configs"].contains("tuning_run")
                   ? Result<int64_t>(ev->summary["configs"]["tuning_run"].get<int64_t>())
                   : latest_tuning_run(ws->store(), *id);
    auto cache =
        run ? cache_from_store(ws->store(), *run) : Result<TuningCache>(Error{run.error()});
    if (!cache) {
      err(cache.error());
      return kEnvironment;
    }
    cache->command =
        fmt::format("peak tune {}{}{}", *id, o.strategy.empty() ? "" : " --strategy " + o.strategy,
                    o.strategy_budget.empty() ? "" : " --strategy-budget " + o.strategy_budget);
    if (auto s = write_cache(o.export_space, *cache); !s) {
      err(s.message());
      return kEnvironment;
    }
    if (!o.quiet && !o.json_out)
      std::printf("wrote %s (%zu configurations)\n", o.export_space.c_str(),
                  cache->entries().size());
  }
  if (o.json_out) {
    emit_json(ev->summary);
  } else {
    std::printf("%s checkpoint %lld: %s — %s\n", what, static_cast<long long>(*id),
                std::string(to_string(ev->disposition)).c_str(), ev->message.c_str());
    if (ev->summary.contains("configs"))
      std::printf("  configurations: %s\n", ev->summary["configs"].dump().c_str());
    if (ev->summary.contains("sanitizer"))
      std::printf("  compute-sanitizer (%s):\n%s",
                  ev->summary["sanitizer"].value("config", "").c_str(),
                  ev->summary["sanitizer"].value("report", "").c_str());
    if (ev->summary.contains("top"))
      for (const auto& t : ev->summary["top"])
        std::printf("  %-40s %.4f ms\n", t["config"].dump().c_str(), t.value("score_ms", 0.0));
    if (ev->summary.contains("bench"))
      for (const auto& m : ev->summary["bench"])
        std::printf("  %-20s %10.1f GFLOP/s (median %.4f ms, spread %.1f%%, %zu samples)\n",
                    m.value("shape", "").c_str(), m.value("gflops", 0.0), m.value("median_ms", 0.0),
                    100 * m.value("spread", 0.0),
                    m.contains("samples_ms") ? m["samples_ms"].size() : 0);
  }
  return ev->disposition == Disposition::passed ? kOk : kStepFailed;
}

int cmd_log(Options& o) {
  auto ws = open_ws(o);
  if (!ws) return kUsage;
  json j = api::log_json(*ws);
  if (o.json_out) {
    emit_json(j);
    return kOk;
  }
  for (const auto& c : j) {
    auto names = c["refs"].get<std::vector<std::string>>();
    std::printf("%-4lld %s%s  parent %-4s %-16s %s\n", c["id"].get<long long>(),
                names.empty() ? "" : fmt::format("({}) ", join(names, ", ")).c_str(),
                c.value("created_at", "").c_str(),
                c["parent"].is_null() ? "-" : std::to_string(c["parent"].get<long long>()).c_str(),
                c.value("message", "").c_str(), c.value("perf", "").c_str());
  }
  return kOk;
}

int cmd_show(Options& o) {
  auto ws = open_ws(o);
  if (!ws) return kUsage;
  auto id = resolve_or_report(*ws, o.args.empty() ? "HEAD" : o.args[0]);
  if (!id) return kUsage;
  auto c = ws->store().checkpoint(*id);
  auto files = ws->checkpoint_files(*id);
  if (!c || !files) {
    err(!c ? c.error() : files.error());
    return kEnvironment;
  }
  json summary = ws->summary(*c);
  if (o.json_out) {
    emit_json(*api::checkpoint_json(*ws, *id));
    return kOk;
  }
  std::printf("checkpoint %lld  %s  (%s)\nparent: %s  branch: %s\n", static_cast<long long>(c->id),
              c->message.c_str(), c->created_at.c_str(),
              c->parent ? std::to_string(*c->parent).c_str() : "-", c->branch.c_str());
  if (summary.contains("best"))
    std::printf("best configuration: %s\n", summary["best"].value("config_text", "").c_str());
  if (summary.contains("bench"))
    for (const auto& m : summary["bench"])
      std::printf("  %-20s %10.1f GFLOP/s  spread %.1f%%\n", m.value("shape", "").c_str(),
                  m.value("gflops", 0.0), 100 * m.value("spread", 0.0));
  std::printf("\n%s", files->second.c_str());
  return kOk;
}

int cmd_diff(Options& o) {
  auto ws = open_ws(o);
  if (!ws) return kUsage;
  std::string a = o.args.size() > 0 ? o.args[0] : "HEAD~1";
  std::string b = o.args.size() > 1 ? o.args[1] : "HEAD";
  auto d = ws->diff(a, b);
  if (!d) {
    err(d.error());
    return kUsage;
  }
  if (o.json_out)
    emit_json({{"a", a}, {"b", b}, {"diff", *d}});
  else
    std::printf("%s", d->c_str());
  return kOk;
}

int cmd_checkout(Options& o) {
  if (o.args.empty()) {
    err("usage: peak checkout CHECKPOINT|BRANCH|TAG");
    return kUsage;
  }
  auto ws = open_ws(o);
  if (!ws) return kUsage;
  if (auto s = ws->checkout(o.args[0]); !s) {
    err(s.message());
    return kUsage;
  }
  if (!o.quiet) std::printf("HEAD is now at %s\n", o.args[0].c_str());
  return kOk;
}

int cmd_branch(Options& o) {
  auto ws = open_ws(o);
  if (!ws) return kUsage;
  if (o.args.empty()) {
    auto refs = ws->store().refs();
    auto head = ws->store().head();
    if (!refs) {
      err(refs.error());
      return kEnvironment;
    }
    if (o.json_out) {
      emit_json({{"head", head ? *head : ""}, {"branches", *refs}});
      return kOk;
    }
    for (const auto& [n, id] : *refs)
      std::printf("%s %s -> %lld\n", head && *head == n ? "*" : " ", n.c_str(),
                  static_cast<long long>(id));
    return kOk;
  }
  if (auto s = ws->branch(o.args[0], o.args.size() > 1 ? o.args[1] : "HEAD"); !s) {
    err(s.message());
    return kUsage;
  }
  if (!o.quiet) std::printf("switched to a new branch %s\n", o.args[0].c_str());
  return kOk;
}

// Writes `text` to o.output (saying so) or standard output.
int emit(const Options& o, const std::string& text) {
  if (o.output.empty()) {
    std::printf("%s", text.c_str());
    return kOk;
  }
  if (auto s = write_file(o.output, text); !s) {
    err(s.message());
    return kEnvironment;
  }
  if (!o.quiet) std::printf("wrote %s\n", o.output.c_str());
  return kOk;
}

int cmd_report(Options& o) {
  std::string fmt_name = o.json_out ? "json" : o.format;
  if (!o.html.empty()) {
    fmt_name = "html";
    o.output = o.html;
  }
  fs::path where = o.store.empty() ? fs::path(o.workspace) : fs::path(o.store);
  auto text = api::render_report_at(where, o.args.empty() ? "" : o.args[0], fmt_name);
  if (!text) {
    err(text.error());
    return text.error().find("unknown report format") != std::string::npos ? kUsage : kEnvironment;
  }
  return emit(o, *text);
}

int cmd_stats(Options& o) {
  std::vector<std::pair<std::string, Report>> reports;
  if (o.args.empty()) o.args.push_back(o.workspace);
  for (const auto& arg : o.args) {
    auto found = find_stores(arg);
    if (!found) {
      err(found.error());
      return kUsage;
    }
    for (const auto& path : *found) {
      auto store = open_store_for_reading(path);
      if (!store) {
        err(store.error());
        return kUsage;
      }
      auto rep = build_report(**store);
      if (!rep) {
        err(fmt::format("{}: {}", path.string(), rep.error()));
        return kEnvironment;
      }
      reports.emplace_back(path.string(), std::move(*rep));
    }
  }
  Stats st = build_stats(reports);
  std::string fmt_name = o.json_out ? "json" : o.format;
  std::string text;
  if (fmt_name == "json") {
    text = render_stats_json(st).dump(2) + "\n";
  } else if (fmt_name == "csv") {
    text = render_stats_csv(st);
  } else if (fmt_name == "text") {
    text = render_stats_text(st);
  } else if (fmt_name == "html") {
    auto html = render_stats_html(st);
    if (!html) {
      err(html.error());
      return kEnvironment;
    }
    text = std::move(*html);
  } else {
    err(fmt::format("unknown stats format '{}' (text, json, csv, html)", fmt_name));
    return kUsage;
  }
  return emit(o, text);
}

// `peak serve` is the peak-serve program beside peak (it links the HTTP server library, which
// the peak binary itself does without).
int cmd_serve(Options& o) {
  fs::path self = fs::read_symlink("/proc/self/exe");
  fs::path exe = self.parent_path() / "peak-serve";
  std::error_code ec;
  if (!fs::exists(exe, ec)) {
    err(fmt::format("{} is missing: build it (`ninja -C build peak-serve`) next to peak",
                    exe.string()));
    return kEnvironment;
  }
  std::vector<std::string> args = {exe.string(), "-C",     o.workspace,           "--host",
                                   o.host,       "--port", std::to_string(o.port)};
  if (!o.store.empty()) args.insert(args.end(), {"--store", o.store});
  if (o.quiet) args.push_back("-q");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  ::execv(exe.c_str(), argv.data());
  err(fmt::format("cannot run {}: {}", exe.string(), std::strerror(errno)));
  return kEnvironment;
}

int cmd_export_space(Options& o) {
  if (o.output.empty()) {
    err("usage: peak export-space [CHECKPOINT] -o FILE [--run ID]");
    return kUsage;
  }
  auto ws = open_ws(o);
  if (!ws) return kUsage;
  Result<int64_t> run = o.run;
  std::string ref = o.args.empty() ? "HEAD" : o.args[0];
  if (o.run <= 0) {
    auto id = resolve_or_report(*ws, ref);
    if (!id) return kUsage;
    run = latest_tuning_run(ws->store(), *id);
  }
  auto cache = run ? cache_from_store(ws->store(), *run) : Result<TuningCache>(Error{run.error()});
  if (!cache) {
    err(cache.error());
    return kUsage;
  }
  cache->command = o.run > 0 ? fmt::format("peak export-space --run {}", o.run)
                             : fmt::format("peak export-space {}", ref);
  if (auto s = write_cache(o.output, *cache); !s) {
    err(s.message());
    return kEnvironment;
  }
  if (o.json_out)
    emit_json({{"file", o.output}, {"run", *run}, {"configs", cache->entries().size()}});
  else if (!o.quiet)
    std::printf("wrote %s: tuning run %lld, %zu configurations\n", o.output.c_str(),
                static_cast<long long>(*run), cache->entries().size());
  return kOk;
}

int cmd_bench(Options& o) {
  if (o.args.empty() || o.args[0] != "tuning") {
    err("usage: peak bench tuning [CACHE.json ...]  (default: the committed spaces, "
        "results/*/spaces/*.json)");
    return kUsage;
  }
  std::vector<std::string> files(o.args.begin() + 1, o.args.end());
  if (files.empty()) {
    std::error_code ec;
    fs::path results = data_path("results");
    if (fs::is_directory(results, ec))
      for (const auto& d : fs::directory_iterator(results, ec))
        if (fs::is_directory(d.path() / "spaces", ec))
          for (const auto& f : fs::directory_iterator(d.path() / "spaces", ec))
            if (f.path().extension() == ".json") files.push_back(f.path().string());
    std::sort(files.begin(), files.end());
    if (files.empty()) {
      err(fmt::format("no tuning caches under {}/*/spaces/; name some: peak bench tuning FILE...",
                      results.string()));
      return kUsage;
    }
  }
  std::vector<std::pair<std::string, TuningCache>> caches;
  for (const auto& f : files) {
    auto c = read_cache(f);
    if (!c) {
      err(c.error());
      return kUsage;
    }
    caches.emplace_back(f, std::move(*c));
  }
  TuningBenchOptions bo;
  for (const auto& s : split_lines(replace_all(o.strategies, ",", "\n")))
    if (!trim(s).empty()) bo.strategies.push_back(trim(s));
  bo.seeds = std::max(1, o.seeds);
  bo.batch = static_cast<size_t>(std::max(1, o.batch));
  bo.jobs = o.jobs;
  auto rep = bench_tuning(caches, bo);
  if (!rep) {
    err(rep.error());
    return kUsage;
  }
  std::string text = o.json_out ? rep->to_json().dump(2) + "\n" : rep->text();
  if (!o.output.empty()) {
    if (auto s = write_file(o.output, text); !s) {
      err(s.message());
      return kEnvironment;
    }
  } else {
    std::printf("%s", text.c_str());
  }
  return kOk;
}

int cmd_commit(Options& o) {
  auto ws = open_ws(o);
  if (!ws) return kUsage;
  if (!check_strategy(o.strategy, o.strategy_budget)) return kUsage;
  auto r = ws->commit(o.message, eval_options(*ws, o));
  return print_apply(r, o);
}

int cmd_doctor(Options& o) {
  DoctorReport d = run_doctor(o.device);
  if (o.json_out)
    emit_json(d.to_json());
  else
    std::printf("%s", d.text().c_str());
  return d.ok ? kOk : kEnvironment;
}

int cmd_demo(Options& o) {
  DemoOptions d;
  d.backend = o.backend;
  d.dir = o.dir;
  d.device = o.device;
  d.small = o.small;
  d.full = o.full;
  d.quiet = o.quiet;
  d.budget = o.budget;
  d.json_out = o.json_out;
  return run_demo(d);
}

int cmd_mcp(Options& o) {
  return mcp::run(o.workspace, o.mcp_root, o.mcp_http, o.mcp_token_env);
}

struct Command {
  const char* name;
  const char* help;
  std::function<void(CLI::App*, Options&)> setup;
  std::function<int(Options&)> run;
};

std::vector<Command> commands() {
  auto args = [](const char* what) {
    return [what](CLI::App* c, Options& o) { c->add_option("args", o.args, what); };
  };
  return {
      {"init", "create a workspace from a kernel context: peak init CONTEXT [DIR]",
       args("CONTEXT [DIR]"), cmd_init},
      {"transformations", "the library: `transformations list`, `transformations show NAME`",
       args("list | show NAME"), cmd_transformations},
      {"apply", "apply one transformation to HEAD: LLM edit, validate, tune, time, checkpoint",
       [](CLI::App* c, Options& o) {
         c->add_option("args", o.args, "TRANSFORMATION");
         add_llm_options(c, o);
         add_eval_options(c, o);
       },
       cmd_apply},
      {"run", "run a sequence of transformations (resumable)",
       [](CLI::App* c, Options& o) {
         c->add_option("args", o.args, "SEQUENCE (a .toml file or a name under sequences/)");
         c->add_flag("--resume", o.resume,
                     "continue the last interrupted or waiting run of this sequence");
         c->add_option("--from", o.from, "start at step N (0-based)");
         add_llm_options(c, o);
         add_eval_options(c, o);
       },
       cmd_run},
      {"respond", "manual mode: answer a pending prompt: peak respond ID FILE (or --list)",
       [](CLI::App* c, Options& o) {
         c->add_option("args", o.args, "ID FILE");
         c->add_option("--by", o.producer, "who wrote the reply (recorded)");
         c->add_flag("--list", o.list, "list manual prompts");
       },
       cmd_respond},
      {"validate", "validate, tune and time a checkpoint again (default HEAD)",
       [](CLI::App* c, Options& o) {
         c->add_option("args", o.args, "CHECKPOINT");
         add_eval_options(c, o);
       },
       [](Options& o) { return cmd_eval(o, true, "validated"); }},
      {"tune", "tune a checkpoint over its tuning parameters (default HEAD)",
       [](CLI::App* c, Options& o) {
         c->add_option("args", o.args, "CHECKPOINT");
         add_eval_options(c, o);
         c->add_option("--export-space", o.export_space,
                       "write the search's measured space to FILE (a tuning cache)");
       },
       [](Options& o) { return cmd_eval(o, true, "tuned"); }},
      {"export-space", "write a checkpoint's last tuning search as a tuning cache (JSON)",
       [](CLI::App* c, Options& o) {
         c->add_option("args", o.args, "CHECKPOINT (default HEAD)");
         c->add_option("-o,--output", o.output, "the cache file to write");
         c->add_option("--run", o.run, "a tuning run id instead of the checkpoint's last");
       },
       cmd_export_space},
      {"bench", "benchmarks: `bench tuning [CACHE...]` compares the strategies in simulation",
       [](CLI::App* c, Options& o) {
         c->add_option("args", o.args, "tuning [CACHE.json ...]");
         c->add_option("--strategies", o.strategies, "comma-separated (default: all)");
         c->add_option("--seeds", o.seeds, "seeds per strategy and space")->capture_default_str();
         c->add_option("--batch", o.batch, "configurations per batch")->capture_default_str();
         c->add_option("--jobs,-j", o.jobs, "parallel compiles (default: each cache's)");
         c->add_option("-o,--output", o.output, "write the table to FILE");
       },
       cmd_bench},
      {"commit", "checkpoint the working files after a manual edit (validated, tuned, timed)",
       [](CLI::App* c, Options& o) {
         c->add_option("-m,--message", o.message, "what the edit does");
         add_eval_options(c, o);
       },
       cmd_commit},
      {"log", "list checkpoints, newest first", [](CLI::App*, Options&) {}, cmd_log},
      {"show", "show a checkpoint: its numbers and source", args("CHECKPOINT"), cmd_show},
      {"diff", "unified diff between two checkpoints (default HEAD~1 HEAD)", args("A B"), cmd_diff},
      {"checkout", "restore a checkpoint, branch or tag into the working files", args("REF"),
       cmd_checkout},
      {"branch", "list branches, or create one at HEAD (or REF) and switch to it",
       args("[NAME [REF]]"), cmd_branch},
      {"report", "performance along the history: text, markdown, json or html",
       [](CLI::App* c, Options& o) {
         c->add_option("args", o.args, "CHECKPOINT (default HEAD)");
         c->add_option("--format", o.format, "text, markdown, json or html")->capture_default_str();
         c->add_option("-o,--output", o.output, "write to FILE");
         c->add_option("--html", o.html, "write the HTML report to FILE (= --format html -o FILE)");
         c->add_option("--store", o.store,
                       "read this store instead of the workspace: a workspace, its .peak folder "
                       "or a peak.db file");
       },
       cmd_report},
      {"stats", "campaign analytics over stores: success, errors, performance, costs",
       [](CLI::App* c, Options& o) {
         c->add_option("args", o.args,
                       "STORE_OR_WORKSPACE... (workspaces, .peak folders, peak.db files, or "
                       "folders to search; default: the workspace)");
         c->add_option("--format", o.format, "text, json, csv or html")->capture_default_str();
         c->add_option("-o,--output", o.output, "write to FILE");
       },
       cmd_stats},
      {"serve", "a local page with the workspace's report, updated while a run progresses",
       [](CLI::App* c, Options& o) {
         c->add_option("--host", o.host, "address to listen on (default: loopback only)")
             ->capture_default_str();
         c->add_option("--port", o.port, "port (0: any free port)")->capture_default_str();
         c->add_option("--store", o.store, "serve this store instead of the workspace");
       },
       cmd_serve},
      {"mcp", "serve peak's tools to an AI agent (MCP over stdio, or Streamable HTTP)",
       [](CLI::App* c, Options& o) {
         c->add_option("--http", o.mcp_http,
                       "serve Streamable HTTP at HOST:PORT/mcp instead of stdio (default host "
                       "127.0.0.1; port 0 picks a free one)");
         c->add_option("--root", o.mcp_root,
                       "the folder clients may use: workspaces are created and opened only "
                       "inside it (default: the current folder)");
         c->add_option("--token-env", o.mcp_token_env,
                       "HTTP: the environment variable holding the bearer token (default "
                       "PEAK_MCP_TOKEN); required to listen beyond loopback");
       },
       cmd_mcp},
      {"doctor", "check toolchains, devices and what is missing",
       [](CLI::App* c, Options& o) { c->add_option("--device", o.device, "device selector"); },
       cmd_doctor},
      {"demo", "the whole loop on this machine with recorded LLM replies (no API key)",
       [](CLI::App* c, Options& o) {
         c->add_option("--backend", o.backend, "cuda, hlsl or auto")->capture_default_str();
         c->add_option("--dir", o.dir, "workspace folder (default: a new temporary folder)");
         c->add_option("--device", o.device, "device selector");
         c->add_flag("--small", o.small, "small shapes (default on CPU devices)");
         c->add_flag("--full", o.full, "the bench shapes (default on GPUs)");
         c->add_option("--budget", o.budget, "tuning configurations per step at most");
       },
       cmd_demo},
  };
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"peak: a performance-engineering assistant for GPU kernels", "peak"};
  app.set_version_flag("--version", std::string("peak ") + PEAK_VERSION);
  app.require_subcommand(1);
  Options o;
  app.add_option("-C,--workspace", o.workspace, "workspace folder (default: the current one)");
  app.add_flag("--json", o.json_out, "machine-readable output");
  app.add_flag("-q,--quiet", o.quiet, "no progress lines");
  app.footer(
      "Exit codes: 0 ok, 1 a step did not pass, 2 bad arguments or input, 3 waiting for a manual "
      "reply, 4 environment problem.\nDocs: docs/cli.md");
  auto table = commands();
  std::vector<std::pair<CLI::App*, const Command*>> subs;
  for (const auto& c : table) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    c.setup(sub, o);
    subs.emplace_back(sub, &c);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kOk : kUsage;
  }
  for (const auto& [sub, c] : subs)
    if (sub->parsed()) {
      try {
        return c->run(o);
      } catch (const std::exception& e) {
        err(fmt::format("internal error: {}", e.what()));
        return kEnvironment;
      }
    }
  return kUsage;
}

}  // namespace peak::cli
