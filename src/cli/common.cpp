#include "cli/common.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include <fmt/format.h>

#include "util/fs.h"

namespace peak::cli {

namespace {

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
  value("--budget", o.budget_text);
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

}  // namespace

void set_json_errors(bool on) { error_output().json = on; }
bool json_errors() { return error_output().json; }

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

// What the user asked of evaluations; the device decides the rest (nothing is probed here).
Result<EvalChoices> eval_choices(const Options& o) {
  if (o.small && o.full)
    return make_error("--small and --full exclude each other", ErrorKind::input);
  if (o.jobs < 0) return make_error("--jobs takes a positive number", ErrorKind::input);
  auto tuning = parse_tuning(o.tuning);
  if (!tuning) return tuning.status();
  EvalChoices c;
  c.device = o.device;
  c.devices = o.devices;
  if (o.small) c.small = true;
  if (o.full) c.small = false;
  if (auto s = read_budget_option(o.budget_text, c); !s) return s;
  c.jobs = o.jobs;
  c.baseline = !o.no_baseline;
  c.tuning = *tuning;
  c.compile_only = o.compile_only;
  c.sanitize = o.sanitize;
  c.validation_seed = o.validation_seed;
  c.strategy = o.strategy;
  c.reuse_measurements = o.reuse;
  if (auto s = check_eval_choices(c, o.strategy_budget); !s) return s;
  return c;
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
  // replay:NAME also finds a recording shipped with peak (recordings/NAME).
  a.llm = resolve_llm_spec(o.llm, data_path("recordings"));
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

void add_wait_option(CLI::App* c, Options& o, const char* also) {
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
  c->add_option("--budget", o.budget_text,
                "tuning configurations at most (N), or a time for the search (10m, 600s, 1h), "
                "or both (24,10m); default on a GPU: 48 or 15% of the space, at most 10 min");
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
    emit_json(apply_json(r));
  } else if (r.pending) {
    std::printf("%s\n", r.message.c_str());
  } else if (r.disposition == Disposition::passed) {
    std::printf("passed: checkpoint %lld — %s\n", static_cast<long long>(r.checkpoint.value_or(0)),
                r.message.c_str());
    if (EvalSummary s = summary_or_empty(r.summary); s.bench)
      for (const auto& m : *s.bench)
        std::printf("  %-20s %s  x%.2f vs parent  x%.2f vs seed%s\n", m.shape.value_or("").c_str(),
                    headline_rate(m, 10).c_str(), m.speedup_vs_parent.value_or(0.0),
                    m.speedup_vs_seed.value_or(0.0),
                    m.pct_of_baseline ? fmt::format("  {:.1f}% of {}", *m.pct_of_baseline,
                                                    m.baseline.value_or(""))
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

}  // namespace peak::cli
