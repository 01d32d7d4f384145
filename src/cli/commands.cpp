#include "cli/commands.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "campaign/campaign.h"
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
#include "util/sandbox.h"
#include "util/workspace_lock.h"

namespace peak::cli {

namespace {

using json = nlohmann::json;

struct Options {
  // global
  std::string workspace = ".";
  bool json_out = false;
  bool quiet = false;
  std::string command;  // the subcommand, for the workspace lock ("peak apply tb-tiling")
  // shared by several commands
  std::vector<std::string> args;
  std::string llm = "manual";
  std::string record;
  std::string record_note;
  std::string producer;
  std::string key_env;
  std::string instructions;
  int attempts = 3;
  bool attempts_given = false;
  double llm_deadline = 0;
  bool no_feedback = false;
  bool wait = false;
  std::string device;
  std::string devices;  // --devices: several GPUs of one host
  bool small = false;
  bool full = false;
  int budget = 0;
  int jobs = 0;
  bool no_baseline = false;
  bool resume = false;
  int from = 0;
  bool force = false;
  bool detach = false;
  bool all = false;
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
  uint64_t validation_seed = 0;  // the hidden validation shapes of a recorded evaluation
  // tuning search
  std::string strategy;
  std::string strategy_budget;
  std::string export_space;  // tune: write the search's tuning cache here
  bool classes = false;      // tune: one search per shape class of the suite (dispatch table)
  std::vector<std::string> only_classes;  // tune --classes --class NAME: the classes searched
  bool single = false;     // bench: the best configuration alone, not the dispatch table
  int64_t run = 0;         // export-space: a tuning run id
  std::string strategies;  // bench: comma-separated
  int seeds = 20;
  int batch = 8;
  bool reuse = false;
  std::string doctor_llm;
  bool no_sandbox = false;
  std::string html;             // report --html FILE
  std::string store;            // report/serve --store PATH
  std::string cross_reference;  // report --cross-reference PATH
  std::string host = "127.0.0.1";
  int port = 8765;
  // campaign
  std::string campaign_cmd;  // run, status, exec
  std::string executor = "local";
  // mcp
  std::string mcp_http;
  std::string mcp_root;
  std::string mcp_token_env;
};

// Under --json, errors are data: the messages of a command that fails are one JSON object on
// standard output ({"error": {"message", "exit_code"}}) unless the command printed its own JSON
// result, which carries them.
struct ErrorOutput {
  bool json = false;     // --json
  bool emitted = false;  // a JSON result was printed
  std::vector<std::string> messages;
};
ErrorOutput& error_output() {
  static ErrorOutput e;
  return e;
}

// A line for people on standard error (progress, warnings): never part of --json's output.
void note(const std::string& m) { std::fprintf(stderr, "peak: %s\n", m.c_str()); }

// The message of a command that fails.
void err(const std::string& m) {
  if (error_output().json)
    error_output().messages.push_back(m);
  else
    note(m);
}

void emit_json(const json& j) {
  error_output().emitted = true;
  std::cout << j.dump(2) << "\n";
}

// After the command: under --json, its error messages as JSON (or, when it printed its own JSON
// result, on standard error).
int finish(int code) {
  ErrorOutput& e = error_output();
  if (e.messages.empty()) return code;
  if (code == 0 || e.emitted) {
    for (const auto& m : e.messages) note(m);
  } else {
    std::cout << json{{"error", {{"message", join(e.messages, "\n")}, {"exit_code", code}}}}.dump(2)
              << "\n";
  }
  e.messages.clear();
  return code;
}

int exit_code(ErrorKind k) {
  switch (k) {
    case ErrorKind::input:
      return kUsage;
    case ErrorKind::environment:
      return kEnvironment;
    case ErrorKind::failed:
      return kStepFailed;
  }
  return kStepFailed;
}

// Reports a failed status and returns its exit code.
int fail(const Status& s) {
  err(s.message());
  return exit_code(s.kind());
}

// Opens the workspace (the workspace lock is taken by the first change).
std::unique_ptr<Workspace> open_ws(const Options& o, int* code) {
  OpenOptions oo;
  oo.wait = o.wait;
  oo.command = o.command;
  auto ws = Workspace::open(o.workspace, oo);
  if (!ws) {
    *code = fail(ws.status());
    return nullptr;
  }
  (*ws)->progress().set_quiet(o.quiet);
  return std::move(*ws);
}

// --tune NAME=V1,V2,...: a parameter name, then distinct integers; each name once.
Result<std::map<std::string, std::vector<int64_t>>> parse_tuning(
    const std::vector<std::string>& items) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& it : items) {
    auto bad = [&it](const std::string& why) {
      return make_error(fmt::format("--tune '{}': {}; write NAME=V1,V2,... (integers)", it, why),
                        ErrorKind::input);
    };
    auto eq = it.find('=');
    if (eq == std::string::npos) return bad("no '='");
    const std::string name = trim(it.substr(0, eq));
    if (name.empty()) return bad("no parameter name before '='");
    if (out.count(name)) return bad(fmt::format("{} is given twice", name));
    const std::string rest = it.substr(eq + 1);
    if (trim(rest).empty()) return bad("no values after '='");
    std::vector<int64_t> vals;
    for (size_t start = 0;;) {
      const size_t comma = rest.find(',', start);
      const std::string v =
          trim(rest.substr(start, comma == std::string::npos ? comma : comma - start));
      if (v.empty()) return bad("an empty value");
      int64_t value = 0;
      try {
        size_t used = 0;
        value = std::stoll(v, &used);
        if (used != v.size()) throw std::invalid_argument(v);
      } catch (...) {
        return bad(fmt::format("'{}' is not an integer", v));
      }
      if (std::find(vals.begin(), vals.end(), value) != vals.end())
        return bad(fmt::format("the value {} is given twice", value));
      vals.push_back(value);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    out[name] = vals;
  }
  return out;
}

// What the user asked of evaluations; the device decides the rest (nothing is probed here).
Result<EvalChoices> eval_choices(const Options& o) {
  if (o.small && o.full)
    return make_error("--small and --full exclude each other", ErrorKind::input);
  if (o.budget < 0 || o.jobs < 0)
    return make_error("--budget and --jobs take positive numbers", ErrorKind::input);
  auto tuning = parse_tuning(o.tuning);
  if (!tuning) return tuning.status();
  if (!o.device.empty() && !o.devices.empty())
    return make_error(
        "--device and --devices exclude each other: --device picks one device, --devices several "
        "of one model (all, 0,1 or a name substring)",
        ErrorKind::input);
  if (!o.devices.empty() && o.compile_only)
    return make_error(
        "--devices and --compile-only exclude each other: nothing runs with "
        "--compile-only",
        ErrorKind::input);
  if (!o.devices.empty())
    if (auto d = parse_devices_spec(o.devices); !d) return Error{d.error(), d.error_kind()};
  EvalChoices c;
  c.device = o.device;
  c.devices = o.devices;
  if (o.small) c.small = true;
  if (o.full) c.small = false;
  c.budget = static_cast<size_t>(o.budget);
  c.jobs = o.jobs;
  c.baseline = !o.no_baseline;
  c.tuning = *tuning;
  c.compile_only = o.compile_only;
  c.sanitize = o.sanitize;
  c.validation_seed = o.validation_seed;
  api::EvalArgs t;
  t.strategy = o.strategy;
  t.strategy_budget = o.strategy_budget;
  if (auto s = api::check_tuning(t); !s) return make_error(s.message(), ErrorKind::input);
  c.strategy = o.strategy;
  c.strategy_budget = o.strategy_budget;
  c.reuse_measurements = o.reuse;
  return c;
}

// The options that repeat a command's choices, in the form the command line takes them (--llm
// and --attempts apart: the hints give those themselves).
std::vector<std::string> rerun_options(const Options& o) {
  std::vector<std::string> r;
  auto value = [&r](const char* name, const std::string& v) {
    if (!v.empty()) r.insert(r.end(), {name, v});
  };
  auto flag = [&r](const char* name, bool on) {
    if (on) r.push_back(name);
  };
  value("--device", o.device);
  value("--devices", o.devices);
  flag("--small", o.small);
  flag("--full", o.full);
  if (o.budget > 0) value("--budget", std::to_string(o.budget));
  if (o.jobs > 0) value("-j", std::to_string(o.jobs));
  flag("--no-baseline", o.no_baseline);
  for (const auto& t : o.tuning) value("--tune", t);
  value("--strategy", o.strategy);
  value("--strategy-budget", o.strategy_budget);
  flag("--reuse-measurements", o.reuse);
  flag("--compile-only", o.compile_only);
  flag("--sanitize", o.sanitize);
  value("--record", o.record);
  value("--record-note", o.record_note);
  value("--by", o.producer);
  value("--key-env", o.key_env);
  if (o.llm_deadline > 0) value("--llm-deadline", fmt::format("{}", o.llm_deadline));
  value("--instructions", o.instructions);
  flag("--no-feedback", o.no_feedback);
  value("--prompt-device", o.prompt_device);
  return r;
}

DriverOptions driver_options(const Options& o, const fs::path& workspace) {
  DriverOptions d;
  d.workspace = workspace;
  d.manual_wait = o.wait;
  d.producer = o.producer;
  d.key_env = o.key_env;
  if (o.llm_deadline > 0) d.deadline_s = o.llm_deadline;
  return d;
}

// The options of apply/run (checked, nothing probed).
Result<ApplyOptions> apply_options(Workspace& ws, const Options& o) {
  if (o.attempts < 1) return make_error("--attempts takes a number of 1 or more", ErrorKind::input);
  if (o.llm_deadline < 0) return make_error("--llm-deadline takes seconds", ErrorKind::input);
  ApplyOptions a;
  a.llm = o.llm;
  // replay:NAME also finds a recording shipped with peak (recordings/NAME).
  if (starts_with(a.llm, "replay:")) {
    std::string dir = trim(a.llm.substr(7));
    std::error_code ec;
    if (!dir.empty() && !fs::exists(dir, ec) && fs::is_directory(data_path("recordings") / dir, ec))
      a.llm = "replay:" + (data_path("recordings") / dir).string();
  }
  a.driver = driver_options(o, ws.root());
  a.record_dir = o.record;
  a.record_note = o.record_note;
  a.attempts = o.attempts;
  a.extra_instructions = o.instructions;
  a.feedback = !o.no_feedback;
  a.force = o.force;
  a.rerun_options = rerun_options(o);
  auto c = eval_choices(o);
  if (!c) return c.status();
  a.eval = *c;
  if (!o.prompt_device.empty()) {
    auto facts = read_device_facts(o.prompt_device);
    if (!facts) return make_error("--prompt-device: " + facts.error(), ErrorKind::input);
    a.prompt_device = *facts;
  }
  return a;
}

void add_llm_options(CLI::App* c, Options& o) {
  c->add_option(
       "--llm", o.llm,
       "LLM driver: openai:MODEL[@URL], anthropic:MODEL[@URL], command:'PROG', manual, replay:DIR "
       "(or replay:NAME of a recording shipped with peak)")
      ->capture_default_str();
  c->add_option("--record", o.record, "record every LLM exchange into DIR (for replay)");
  c->add_option("--record-note", o.record_note, "a note stored with each recording");
  c->add_option("--by", o.producer, "who produces the replies (manual/command mode; recorded)");
  c->add_option("--key-env", o.key_env, "environment variable holding the API key");
  c->add_option("--attempts", o.attempts,
                "attempts charged to a transformation before it fails (wins over a sequence "
                "file's)")
      ->capture_default_str()
      ->each([&o](const std::string&) { o.attempts_given = true; });
  c->add_option("--llm-deadline", o.llm_deadline,
                "seconds one LLM call may take, every retry and wait included (default 1200)");
  c->add_option("--instructions", o.instructions, "extra text appended to every prompt");
  c->add_flag("--no-feedback", o.no_feedback,
              "do not tell the model why its previous attempt failed");
  c->add_option("--prompt-device", o.prompt_device,
                "JSON device facts shown in prompts instead of this machine's (recording for "
                "another device)");
  c->add_flag("--force", o.force,
              "local changes to the working files: stash them and go on instead of refusing");
}

void add_wait_option(CLI::App* c, Options& o, const char* also = "") {
  c->add_flag("--wait", o.wait,
              fmt::format("wait for another peak that is changing the workspace instead of "
                          "failing{}",
                          also));
}

void add_eval_options(CLI::App* c, Options& o) {
  c->add_option("--device", o.device, "device index or name substring (default: the best one)");
  c->add_option("--devices", o.devices,
                "several GPUs of this host, of one model: all, indices (0,1) or a name substring; "
                "the tuning search spreads over them, the final timing runs on the first");
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
  c->add_option("--tune", o.tuning,
                "override a tuning parameter's values: NAME=V1,V2,... (a parameter of the "
                "checkpoint or of the transformation applied; distinct integers; the evaluation "
                "is then kept in the checkpoint's history but is not its result)");
  c->add_flag("--sanitize", o.sanitize,
              "CUDA: also run compute-sanitizer (memcheck, racecheck) on one small shape");
  c->add_flag("--compile-only", o.compile_only,
              "compile every configuration and check its launch plans against the device facts, "
              "but run nothing (recording without the target device)");
  c->add_option("--validation-seed", o.validation_seed,
                "draw the hidden validation shapes from this seed (an evaluation's recorded "
                "validation_seed) instead of a fresh one");
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
    if (r.stash)
      std::printf("your local changes are stash %lld (`peak stash pop` brings them back)\n",
                  static_cast<long long>(*r.stash));
  } else if (r.input_error || r.environment_error) {
    err(r.message);
  } else {
    err(fmt::format("{}: {}", to_string(r.disposition), r.message));
  }
  if (r.pending) return kWaiting;
  if (r.input_error) return kUsage;
  if (r.environment_error) return kEnvironment;
  return r.disposition == Disposition::passed ? kOk : kStepFailed;
}

// "12 of 48 (budget 4, strategy basin, stopped: evaluation budget, 6 reused)": a tuning
// search as the evaluation summary records it (summary["configs"]).
std::string configs_text(const json& c) {
  if (!c.is_object()) return "-";
  auto count = [&c](const char* key) {
    return c.contains(key) && c[key].is_number_integer()
               ? static_cast<size_t>(std::max<int64_t>(0, c[key].get<int64_t>()))
               : size_t{0};
  };
  const size_t valid = count("space") - std::min(count("space"), count("rejected_by_constraint"));
  std::vector<std::string> how;
  if (std::string b = c.value("budget", ""); !b.empty()) how.push_back("budget " + b);
  if (std::string st = c.value("strategy", ""); !st.empty()) how.push_back("strategy " + st);
  if (std::string stop = c.value("stop", ""); !stop.empty()) how.push_back("stopped: " + stop);
  if (size_t n = count("rejected_by_constraint"); n > 0)
    how.push_back(fmt::format("{} ruled out by tuning_valid", n));
  if (size_t n = count("reused"); n > 0) how.push_back(fmt::format("{} reused", n));
  std::string text = fmt::format("{} of {}", count("evaluated"), valid);
  return how.empty() ? text : fmt::format("{} ({})", text, join(how, ", "));
}

// "BLOCK_X=16 BLOCK_Y=8": a configuration as JSON ({"BLOCK_X": 16, ...}).
std::string config_line(const json& config) {
  std::vector<std::string> parts;
  if (config.is_object())
    for (const auto& [k, v] : config.items())
      parts.push_back(k + "=" + (v.is_string() ? v.get<std::string>() : v.dump()));
  return parts.empty() ? "(defaults)" : join(parts, " ");
}

std::string perf_text(const json& s) {
  if (!s.is_object() || !s.contains("bench") || !s["bench"].is_array() || s["bench"].empty())
    return "-";
  const json& m = s["bench"][0];
  if (m.value("disposition", "") != "passed") return "-";
  return fmt::format("{:.1f} GFLOP/s at {}", m.value("gflops", 0.0), m.value("shape", ""));
}

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

// ---- handlers --------------------------------------------------------------------------------

int cmd_init(Options& o) {
  if (o.args.empty()) {
    err("usage: peak init CONTEXT [DIR] [--force]  (CONTEXT: a folder with kernel.toml, e.g. "
        "examples/matmul-hlsl-fp32, or just its name; DIR: a new or empty folder)");
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

int cmd_transformations(Options& o) {
  std::vector<std::string> problems;
  // The workspace's own transformations join the shared library inside a workspace.
  auto ws = Workspace::open(o.workspace);
  auto l = ws ? (*ws)->library(&problems) : api::load_library_for("", &problems);
  if (!l) return fail(l.status());
  for (const auto& p : problems)
    note(fmt::format("warning: skipped a transformation file that cannot be read: {}", p));
  const auto& lib = *l;
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
  auto p = api::find_sequence(o.args[0]);
  if (!p) return fail(Status::error(p.error(), ErrorKind::input));
  auto seq = load_sequence(*p);
  if (!seq) {
    err(seq.error());
    return kUsage;
  }
  auto ao = apply_options(*ws, o);
  if (!ao) return fail(ao.status());
  RunOptions ro;
  ro.apply = *ao;
  ro.resume = o.resume;
  ro.from_step = o.from;
  if (o.attempts_given) ro.attempts = o.attempts;
  auto r = ws->run(*seq, ro);
  if (o.json_out) {
    emit_json(api::run_json(r));
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

// `peak tune --classes [CHECKPOINT]`: one search per shape class, the dispatch table recorded.
int cmd_tune_classes(Options& o) {
  if (o.args.size() > 1) {
    err("usage: peak tune --classes [CHECKPOINT]");
    return kUsage;
  }
  if (!o.export_space.empty() || o.compile_only) {
    err("--classes tunes and times every class of the shape suite; it takes neither "
        "--export-space (export each class's search with `peak export-space --run N`) nor "
        "--compile-only");
    return kUsage;
  }
  auto choices = eval_choices(o);
  if (!choices) return fail(choices.status());
  int code = kOk;
  auto ws = open_ws(o, &code);
  if (!ws) return code;
  auto t = api::tune_classes(*ws, o.args.empty() ? "HEAD" : o.args[0], *choices, o.only_classes);
  if (!t) return fail(t.status());
  if (o.json_out)
    emit_json(dispatch_json(*t));
  else
    std::printf(
        "%s`peak bench` now runs each shape of the suite with the configuration of its "
        "class (--single: the best configuration alone)\n",
        dispatch_text(*t).c_str());
  return kOk;
}

int cmd_eval(Options& o, const char* kind, const char* what) {
  if (o.classes) return cmd_tune_classes(o);
  if (!o.only_classes.empty()) {
    err("--class names the classes `peak tune --classes` searches; add --classes");
    return kUsage;
  }
  if (o.args.size() > 1) {
    err(fmt::format("usage: peak {} [CHECKPOINT]", kind));
    return kUsage;
  }
  auto choices = eval_choices(o);
  if (!choices) return fail(choices.status());
  int code = kOk;
  auto ws = open_ws(o, &code);
  if (!ws) return code;
  auto id = ws->resolve(o.args.empty() ? "HEAD" : o.args[0]);
  if (!id) return fail(id.status());
  // --tune names parameters of this checkpoint; checked before the device is probed.
  auto files = ws->checkpoint_files(*id);
  if (!files) return fail(files.status());
  if (auto s = check_tuning_overrides(choices->tuning, tuning_names(files->first),
                                      fmt::format("checkpoint {}", *id));
      !s)
    return fail(s);
  if (auto s = ws->lock(); !s) return fail(s);
  auto e = ws->eval_options(*choices);
  if (!e) return fail(e.status());
  auto ev = ws->evaluate_checkpoint(*id, *e, true, kind);
  if (!ev) return fail(ev.status());
  if (!o.export_space.empty()) {
    auto run = ev->summary.contains("configs") && ev->summary["configs"].contains("tuning_run")
                   ? Result<int64_t>(ev->summary["configs"]["tuning_run"].get<int64_t>())
                   : latest_tuning_run(ws->store(), *id);
    auto cache =
        run ? cache_from_store(ws->store(), *run) : Result<TuningCache>(Error{run.error()});
    if (!cache) return fail(Status::error(cache.error(), ErrorKind::environment));
    cache->command =
        fmt::format("peak tune {}{}{}", *id, o.strategy.empty() ? "" : " --strategy " + o.strategy,
                    o.strategy_budget.empty() ? "" : " --strategy-budget " + o.strategy_budget);
    if (!o.tuning.empty()) {
      cache->command += " --tune";
      for (const auto& t : o.tuning) cache->command += " " + t;
    }
    if (auto s = write_cache(o.export_space, *cache); !s)
      return fail(Status::error(s.message(), ErrorKind::environment));
    if (!o.quiet && !o.json_out)
      std::printf("wrote %s (%zu configurations)\n", o.export_space.c_str(),
                  cache->entries().size());
  }
  if (o.json_out) {
    json j = ev->summary;
    j["standard"] = e->standard;
    emit_json(j);
  } else {
    std::printf("%s checkpoint %lld: %s — %s\n", what, static_cast<long long>(*id),
                std::string(to_string(ev->disposition)).c_str(), ev->message.c_str());
    if (ev->summary.contains("configs"))
      std::printf("  configurations: %s\n", configs_text(ev->summary["configs"]).c_str());
    if (ev->summary.contains("sanitizer"))
      std::printf("  compute-sanitizer (%s):\n%s",
                  ev->summary["sanitizer"].value("config", "").c_str(),
                  ev->summary["sanitizer"].value("report", "").c_str());
    if (ev->summary.contains("top"))
      for (const auto& t : ev->summary["top"])
        std::printf("  %-40s %.2f ms\n", config_line(t.value("config", json::object())).c_str(),
                    t.value("score_ms", 0.0));
    if (ev->summary.contains("bench"))
      for (const auto& m : ev->summary["bench"])
        std::printf("  %-20s %10.1f GFLOP/s (median %.4f ms, spread %.1f%%, %zu samples)\n",
                    m.value("shape", "").c_str(), m.value("gflops", 0.0), m.value("median_ms", 0.0),
                    100 * m.value("spread", 0.0),
                    m.contains("samples_ms") ? m["samples_ms"].size() : 0);
    auto c = ws->store().checkpoint(*id);
    if (c)
      std::printf("checkpoint %lld's result: %s%s\n", static_cast<long long>(*id),
                  perf_text(ws->summary(*c)).c_str(),
                  e->standard ? ""
                              : " (this evaluation used other options than the default ones: "
                                "kept in the history, `peak show --all` lists it)");
  }
  return ev->disposition == Disposition::passed ? kOk : kStepFailed;
}

int cmd_log(Options& o) {
  int code = kOk;
  auto ws = open_ws(o, &code);
  if (!ws) return code;
  json j = api::log_json(*ws);  // each checkpoint's result (the rule of docs/store.md)
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
  json summary = ws->summary(*c);
  auto evaluations = ws->evaluations(*id);
  if (o.json_out) {
    auto cj = api::checkpoint_json(*ws, *id);
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
  if (summary.contains("best"))
    std::printf("best configuration: %s\n", summary["best"].value("config_text", "").c_str());
  if (summary.contains("bench"))
    for (const auto& m : summary["bench"])
      std::printf("  %-20s %10.1f GFLOP/s  spread %.1f%%\n", m.value("shape", "").c_str(),
                  m.value("gflops", 0.0), 100 * m.value("spread", 0.0));
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
  if (o.args.size() > 1) {
    err("usage: peak report [CHECKPOINT] [--format text|markdown|json|html] [-o FILE]");
    return kUsage;
  }
  std::string fmt_name = o.json_out ? "json" : o.format;
  if (!o.html.empty()) {
    fmt_name = "html";
    o.output = o.html;
  }
  fs::path where = o.store.empty() ? fs::path(o.workspace) : fs::path(o.store);
  auto text =
      api::render_report_at(where, o.args.empty() ? "" : o.args[0], fmt_name, o.cross_reference);
  if (!text) {
    err(text.error());
    return text.error().find("unknown report format") != std::string::npos ||
                   text.error_kind() == ErrorKind::input
               ? kUsage
               : kEnvironment;
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
  fs::path exe = self_executable().parent_path() / "peak-serve";
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
  int code = kOk;
  auto ws = open_ws(o, &code);
  if (!ws) return code;
  Result<int64_t> run = o.run;
  std::string ref = o.args.empty() ? "HEAD" : o.args[0];
  if (o.run <= 0) {
    auto id = ws->resolve(ref);
    if (!id) return fail(id.status());
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

constexpr const char* kBenchUsage =
    "usage: peak bench [CHECKPOINT]  (the shape suite of kernel.toml against the vendor library), "
    "or peak bench tuning [CACHE.json ...]  (the tuning strategies in simulation)";

// `peak bench [CHECKPOINT]`: the checkpoint's best configuration over the shape suite.
int cmd_bench_suite(Options& o) {
  if (o.args.size() > 1) {
    err(fmt::format("{}; '{}' is one argument too many", kBenchUsage, o.args[1]));
    return kUsage;
  }
  if (!o.strategies.empty()) {
    err(fmt::format("--strategies belongs to `peak bench tuning`; {}", kBenchUsage));
    return kUsage;
  }
  auto choices = eval_choices(o);
  if (!choices) return fail(choices.status());
  int code = kOk;
  auto ws = open_ws(o, &code);
  if (!ws) return code;
  auto r = api::bench(*ws, o.args.empty() ? "HEAD" : o.args[0], *choices, o.single);
  if (!r) return fail(r.status());
  std::string text = o.json_out ? suite_json(*r).dump(2) + "\n" : suite_text(*r);
  if (int c = emit(o, text); c != kOk) return c;
  bool any = std::any_of(r->rows.begin(), r->rows.end(),
                         [](const SuiteRow& row) { return row.disposition == "passed"; });
  return any ? kOk : kStepFailed;
}

int cmd_bench(Options& o) {
  if (o.args.empty() || o.args[0] != "tuning") return cmd_bench_suite(o);
  if (!o.device.empty() || o.small || o.full || o.no_baseline || o.single) {
    err("--device, --small, --full, --no-baseline and --single belong to `peak bench "
        "[CHECKPOINT]`, not to `peak bench tuning`");
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
  if (!o.args.empty()) {
    err("usage: peak commit -m MESSAGE");
    return kUsage;
  }
  auto choices = eval_choices(o);
  if (!choices) return fail(choices.status());
  int code = kOk;
  auto ws = open_ws(o, &code);
  if (!ws) return code;
  return print_apply(ws->commit(o.message, *choices), o);
}

int cmd_doctor(Options& o) {
  if (!o.doctor_llm.empty()) {
    if (o.llm_deadline < 0) {
      err("--llm-deadline takes seconds");
      return kUsage;
    }
    auto ws = Workspace::open(o.workspace);
    DriverOptions d = driver_options(o, ws ? (*ws)->root() : fs::path());
    std::string spec = o.doctor_llm;
    if (starts_with(spec, "replay:")) {
      std::string dir = trim(spec.substr(7));
      std::error_code ec;
      if (!dir.empty() && !fs::exists(dir, ec) &&
          fs::is_directory(data_path("recordings") / dir, ec))
        spec = "replay:" + (data_path("recordings") / dir).string();
    }
    DoctorReport r = run_llm_doctor(spec, d);
    if (o.json_out)
      emit_json(r.to_json());
    else
      std::printf("%s", r.text().c_str());
    return r.ok ? kOk : r.bad_input ? kUsage : kEnvironment;
  }
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
  d.devices = o.devices;
  d.small = o.small;
  d.full = o.full;
  d.quiet = o.quiet;
  d.budget = o.budget;
  d.json_out = o.json_out;
  return run_demo(d);
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

int cmd_mcp(Options& o) { return mcp::run(o.workspace, o.mcp_root, o.mcp_http, o.mcp_token_env); }

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
      {"init",
       "create a workspace from a kernel context: peak init CONTEXT [DIR] (a new or empty "
       "folder)",
       [](CLI::App* c, Options& o) {
         c->add_option("args", o.args, "CONTEXT [DIR]");
         c->add_flag("--force", o.force,
                     "init into a folder that is not empty; files it replaces are stashed");
       },
       cmd_init},
      {"transformations", "the library: `transformations list`, `transformations show NAME`",
       args("list | show NAME"), cmd_transformations},
      {"apply", "apply one transformation to HEAD: LLM edit, validate, tune, time, checkpoint",
       [](CLI::App* c, Options& o) {
         c->add_option("args", o.args, "TRANSFORMATION");
         add_llm_options(c, o);
         add_eval_options(c, o);
         add_wait_option(c, o, "; manual mode: wait for the reply file instead of exiting");
       },
       cmd_apply},
      {"run", "run a sequence of transformations (resumable)",
       [](CLI::App* c, Options& o) {
         c->add_option("args", o.args, "SEQUENCE (a .toml file or a name under sequences/)");
         c->add_flag("--resume", o.resume,
                     "continue the last unfinished run of this sequence (waiting, failed or "
                     "interrupted, also when its process was killed)");
         c->add_option("--from", o.from, "start at step N (0-based; with --resume too)");
         add_llm_options(c, o);
         add_eval_options(c, o);
         add_wait_option(c, o, "; manual mode: wait for the reply file instead of exiting");
       },
       cmd_run},
      {"respond", "manual mode: answer a pending prompt: peak respond ID FILE (or --list)",
       [](CLI::App* c, Options& o) {
         c->add_option("args", o.args, "ID FILE");
         c->add_option("--by", o.producer, "who wrote the reply (recorded)");
         c->add_flag("--list", o.list, "list manual prompts");
       },
       cmd_respond},
      {"validate", "validate, tune and time a checkpoint again (default HEAD); kept in its history",
       [](CLI::App* c, Options& o) {
         c->add_option("args", o.args, "CHECKPOINT");
         add_eval_options(c, o);
         add_wait_option(c, o);
       },
       [](Options& o) { return cmd_eval(o, "validate", "validated"); }},
      {"tune",
       "tune a checkpoint over its tuning parameters again (default HEAD); kept in its "
       "history",
       [](CLI::App* c, Options& o) {
         c->add_option("args", o.args, "CHECKPOINT");
         add_eval_options(c, o);
         c->add_option("--export-space", o.export_space,
                       "write the search's measured space to FILE (a tuning cache)");
         c->add_flag("--classes", o.classes,
                     "one search per shape class of the suite (kernel.toml [suite], classified by "
                     "its class rules), on that class's shapes; the configurations found are the "
                     "checkpoint's dispatch table, which `peak bench` runs");
         c->add_option("--class", o.only_classes,
                       "with --classes: search only this class (repeat for several); the other "
                       "classes keep the newest table's configuration for them, else run the "
                       "checkpoint's best");
         add_wait_option(c, o);
       },
       [](Options& o) { return cmd_eval(o, "tune", "tuned"); }},
      {"export-space", "write a checkpoint's last tuning search as a tuning cache (JSON)",
       [](CLI::App* c, Options& o) {
         c->add_option("args", o.args, "CHECKPOINT (default HEAD)");
         c->add_option("-o,--output", o.output, "the cache file to write");
         c->add_option("--run", o.run, "a tuning run id instead of the checkpoint's last");
       },
       cmd_export_space},
      {"bench",
       "benchmarks: `bench [CHECKPOINT]` times a checkpoint (default HEAD) over the shape suite of "
       "kernel.toml against the vendor library and records it; `bench tuning [CACHE...]` "
       "compares the tuning strategies in simulation",
       [](CLI::App* c, Options& o) {
         c->add_option("args", o.args, "[CHECKPOINT] | tuning [CACHE.json ...]");
         c->add_option("--device", o.device,
                       "bench CHECKPOINT: device index or name substring (default: the best one)");
         c->add_flag("--small", o.small,
                     "bench CHECKPOINT: the suite's small variant (default on CPU devices)");
         c->add_flag("--full", o.full, "bench CHECKPOINT: the full suite even on a CPU device");
         c->add_flag("--no-baseline", o.no_baseline,
                     "bench CHECKPOINT: do not time the vendor library (ratios of the peak)");
         c->add_flag("--single", o.single,
                     "bench CHECKPOINT: the best configuration at every shape, even where `peak "
                     "tune --classes` recorded a configuration per class");
         add_wait_option(c, o);
         c->add_option("--strategies", o.strategies,
                       "bench tuning: comma-separated (default: all)");
         c->add_option("--seeds", o.seeds, "bench tuning: seeds per strategy and space")
             ->capture_default_str();
         c->add_option("--batch", o.batch, "bench tuning: configurations per batch")
             ->capture_default_str();
         c->add_option("--jobs,-j", o.jobs,
                       "bench tuning: parallel compiles (default: each cache's)");
         c->add_option("-o,--output", o.output,
                       "write the table (or with --json the JSON) to FILE");
       },
       cmd_bench},
      {"commit", "checkpoint the working files after a manual edit (validated, tuned, timed)",
       [](CLI::App* c, Options& o) {
         c->add_option("-m,--message", o.message, "what the edit does");
         add_eval_options(c, o);
         add_wait_option(c, o);
       },
       cmd_commit},
      {"status", "HEAD, changes to the working files, unfinished workflows, waiting prompts",
       [](CLI::App*, Options&) {}, cmd_status},
      {"log", "list checkpoints, newest first, with their results and unfinished workflows",
       [](CLI::App*, Options&) {}, cmd_log},
      {"show", "show a checkpoint: its result and source (--all: every evaluation)",
       [](CLI::App* c, Options& o) {
         c->add_option("args", o.args, "CHECKPOINT");
         c->add_flag("--all", o.all, "list every evaluation of the checkpoint");
       },
       cmd_show},
      {"diff", "unified diff: HEAD against the working files, A against them, or A against B",
       args("[A [B]]"), cmd_diff},
      {"checkout", "switch to a branch, or (--detach) to a checkpoint or tag",
       [](CLI::App* c, Options& o) {
         c->add_option("args", o.args, "REF");
         c->add_flag("--detach", o.detach,
                     "check out a checkpoint number, HEAD~N or tag with a detached HEAD");
         c->add_flag("--force", o.force,
                     "replace local changes to the working files (they are stashed first)");
         add_wait_option(c, o);
       },
       cmd_checkout},
      {"branch", "list branches, or create NAME at HEAD (or REF) and switch to it",
       [](CLI::App* c, Options& o) {
         c->add_option("args", o.args, "[NAME [REF]]");
         c->add_flag("--force", o.force,
                     "replace local changes to the working files (they are stashed first)");
         add_wait_option(c, o);
       },
       cmd_branch},
      {"tag", "list tags, or tag HEAD (or REF) as NAME",
       [](CLI::App* c, Options& o) {
         c->add_option("args", o.args, "[NAME [REF]]");
         add_wait_option(c, o);
       },
       cmd_tag},
      {"stash",
       "set local changes aside: `stash [push] [-m MSG]`, `stash list`, `stash pop "
       "[ID]`, `stash drop [ID]`",
       [](CLI::App* c, Options& o) {
         c->add_option("args", o.args, "push | list | pop [ID] | drop [ID]");
         c->add_option("-m,--message", o.message, "what the changes are (push)");
         c->add_flag("--force", o.force,
                     "pop: replace local changes to the working files (they are stashed first)");
         add_wait_option(c, o);
       },
       cmd_stash},
      {"report", "performance along the history: text, markdown, json or html",
       [](CLI::App* c, Options& o) {
         c->add_option("args", o.args, "CHECKPOINT (default HEAD)");
         c->add_option("--format", o.format, "text, markdown, json or html")->capture_default_str();
         c->add_option("-o,--output", o.output, "write to FILE");
         c->add_option("--html", o.html, "write the HTML report to FILE (= --format html -o FILE)");
         c->add_option("--store", o.store,
                       "read this store instead of the workspace: a workspace, its .peak folder "
                       "or a peak.db file");
         c->add_option("--cross-reference", o.cross_reference,
                       "another store (workspace, .peak folder or peak.db) whose vendor-library "
                       "rates on the same GPU model are shown beside the peak (e.g. a CUDA "
                       "campaign's cuBLAS for an HLSL report)");
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
      {"campaign",
       "a matrix of contexts x sequences x LLMs x devices, one workflow each, here or through "
       "Slurm: `campaign run FILE`, `campaign status FILE`",
       [](CLI::App* c, Options& o) {
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
       },
       cmd_campaign},
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
      {"doctor", "check toolchains, devices and what is missing; --llm SPEC checks an endpoint",
       [](CLI::App* c, Options& o) {
         c->add_option("--device", o.device, "device selector");
         c->add_option("--llm", o.doctor_llm,
                       "check this LLM driver instead: reachable, authenticated, model offered, "
                       "one tiny completion and its reply format");
         c->add_option("--key-env", o.key_env, "environment variable holding the API key");
         c->add_option("--llm-deadline", o.llm_deadline,
                       "seconds the tiny completion may take, retries included");
       },
       cmd_doctor},
      {"demo", "the whole loop on this machine with recorded LLM replies (no API key)",
       [](CLI::App* c, Options& o) {
         c->add_option("--backend", o.backend, "cuda, hip, hlsl or auto")->capture_default_str();
         c->add_option("--dir", o.dir, "workspace folder (default: a new temporary folder)");
         c->add_option("--device", o.device, "device selector");
         c->add_option("--devices", o.devices,
                       "several GPUs of this host, of one model: all, indices (0,1) or a name "
                       "substring");
         c->add_flag("--small", o.small, "small shapes (default on CPU devices)");
         c->add_flag("--full", o.full,
                     "the whole sequence where its recording exists "
                     "(recordings/BACKEND-fp32-full) at the bench shapes; without --full a GPU "
                     "replays the first three steps, a CPU device the whole sequence at the "
                     "small shapes");
         c->add_option("--budget", o.budget,
                       "tuning configurations per step at most (on a CPU device, where the "
                       "whole sequence runs at the small shapes, 2 unless given)");
       },
       cmd_demo},
  };
}

// The number of single-character edits (insert, delete, replace, swap two neighbours) between
// two words.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// The first word of the command line that is not an option (or an option's value): the
// subcommand the user meant.
std::string first_command_word(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-C" || a == "--workspace") {
      ++i;
      continue;
    }
    if (starts_with(a, "-")) continue;
    return a;
  }
  return "";
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"peak: a performance-engineering assistant for GPU kernels", "peak"};
  app.set_version_flag("--version", std::string("peak ") + PEAK_VERSION);
  app.require_subcommand(1);
  // Global options are accepted after the subcommand too (`peak log --json`).
  app.fallthrough();
  Options o;
  app.add_option("-C,--workspace", o.workspace, "workspace folder (default: the current one)");
  app.add_flag("--json", o.json_out,
               "machine-readable output (an error too: one JSON object on standard output)");
  app.add_flag("-q,--quiet", o.quiet, "no progress lines");
  app.add_flag("--no-sandbox", o.no_sandbox,
               "run compilers and runners without the sandbox (also PEAK_NO_SANDBOX=1; "
               "docs/sandbox.md)");
  app.footer(
      "Exit codes: 0 ok, 1 a step did not pass, 2 bad arguments, input or local changes in the "
      "way, 3 waiting for a manual reply, 4 environment problem (device, toolchain, LLM "
      "endpoint or key, busy or read-only workspace).\nDocs: docs/cli.md");
  auto table = commands();
  std::vector<std::pair<CLI::App*, const Command*>> subs;
  for (const auto& c : table) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    c.setup(sub, o);
    subs.emplace_back(sub, &c);
  }
  // --json is known before the command line is parsed: its parse errors are JSON too.
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--json") error_output().json = true;
  // A word that is no subcommand gets the nearest one suggested.
  std::string word = first_command_word(argc, argv);
  bool known = word.empty();
  for (const auto& c : table) known |= word == c.name;
  if (!known) {
    std::string best;
    size_t best_d = 0;
    for (const auto& c : table) {
      size_t d = edit_distance(word, c.name);
      if (best.empty() || d < best_d) {
        best = c.name;
        best_d = d;
      }
    }
    if (best_d <= std::max<size_t>(1, word.size() / 4))
      err(
          fmt::format("'{}' is not a peak command; did you mean '{}'? (`peak --help` lists the "
                      "commands)",
                      word, best));
    else
      err(fmt::format("'{}' is not a peak command; `peak --help` lists the commands", word));
    return finish(kUsage);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0 || !error_output().json) {
      int rc = app.exit(e);
      return rc == 0 ? kOk : kUsage;
    }
    err(fmt::format("{}; `peak --help` lists the options", e.what()));
    return finish(kUsage);
  }
  if (o.no_sandbox) set_sandbox_enabled(false);
  for (const auto& [sub, c] : subs)
    if (sub->parsed()) {
      o.command = "peak " + std::string(c->name);
      for (const auto& a : o.args) o.command += " " + a;
      try {
        return finish(c->run(o));
      } catch (const std::exception& e) {
        err(fmt::format("internal error: {}", e.what()));
        return finish(kEnvironment);
      }
    }
  return kUsage;
}

}  // namespace peak::cli
