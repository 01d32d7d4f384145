// Evaluations of a checkpoint (validate, tune, commit), its tuning space (export-space) and
// the benchmarks (bench).
#include "cli/common.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "util/fs.h"

namespace peak::cli {

namespace {

// "12 of 48 (budget 4, strategy basin, stopped: evaluation budget, 6 reused)": a tuning
// search as the evaluation summary records it (EvalSummary::configs).
std::string configs_text(const SummaryConfigs& c) {
  auto count = [](const std::optional<int64_t>& n) {
    return static_cast<size_t>(std::max<int64_t>(0, n.value_or(0)));
  };
  const size_t space = count(c.space), rejected = count(c.rejected_by_constraint);
  const size_t valid = space - std::min(space, rejected);
  std::vector<std::string> how;
  if (std::string b = c.budget.value_or(""); !b.empty()) how.push_back("budget " + b);
  if (std::string st = c.strategy.value_or(""); !st.empty()) how.push_back("strategy " + st);
  if (std::string stop = c.stop.value_or(""); !stop.empty()) how.push_back("stopped: " + stop);
  if (rejected > 0) how.push_back(fmt::format("{} ruled out by tuning_valid", rejected));
  if (size_t n = count(c.reused); n > 0) how.push_back(fmt::format("{} reused", n));
  std::string text = fmt::format("{} of {}", count(c.evaluated), valid);
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

std::string perf_text(const EvalSummary& s) {
  const SummaryBench* m = s.first_bench();
  if (!m || !m->passed()) return "-";
  return fmt::format("{} at {}", headline_rate(*m), m->shape.value_or(""));
}

// The search, the sanitizer's report, the best configurations and the final timing of `s`.
void print_evaluation(const EvalSummary& s) {
  if (s.configs) std::printf("  configurations: %s\n", configs_text(*s.configs).c_str());
  if (s.sanitizer)
    std::printf("  compute-sanitizer (%s):\n%s", s.sanitizer->config.value_or("").c_str(),
                s.sanitizer->report.value_or("").c_str());
  if (s.top)
    for (const auto& t : *s.top)
      std::printf("  %-40s %.2f ms\n", config_line(t.config.value_or(json::object())).c_str(),
                  t.score_ms.value_or(0.0));
  if (s.bench)
    for (const auto& m : *s.bench)
      std::printf("  %-20s %s (median %.4f ms, spread %.1f%%, %zu samples)\n",
                  m.shape.value_or("").c_str(), headline_rate(m, 10).c_str(),
                  m.median_ms.value_or(0.0), 100 * m.spread.value_or(0.0),
                  m.samples_ms ? m.samples_ms->size() : 0);
}

// What the commands that evaluate start with: the user's choices into `choices`, checked before
// anything is probed, and the workspace opened. Null: the command ends with exit code `*code`.
std::unique_ptr<Workspace> open_for_eval(const Options& o, EvalChoices& choices, int* code) {
  auto c = eval_choices(o);
  if (!c) {
    *code = fail(c.status());
    return nullptr;
  }
  choices = std::move(*c);
  return open_ws(o, code);
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
  EvalChoices choices;
  int code = kOk;
  auto ws = open_for_eval(o, choices, &code);
  if (!ws) return code;
  auto t = tune_classes(*ws, o.args.empty() ? "HEAD" : o.args[0], choices, o.only_classes);
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
  EvalChoices choices;
  int code = kOk;
  auto ws = open_for_eval(o, choices, &code);
  if (!ws) return code;
  auto id = ws->resolve(o.args.empty() ? "HEAD" : o.args[0]);
  if (!id) return fail(id.status());
  // --tune names parameters of this checkpoint; checked before the device is probed.
  auto files = ws->checkpoint_files(*id);
  if (!files) return fail(files.status());
  if (auto s = check_tuning_overrides(choices.tuning, tuning_names(files->first),
                                      fmt::format("checkpoint {}", *id));
      !s)
    return fail(s);
  if (auto s = ws->lock(); !s) return fail(s);
  auto e = ws->eval_options(choices);
  if (!e) return fail(e.status());
  auto ev = ws->evaluate_checkpoint(*id, *e, true, kind);
  if (!ev) return fail(ev.status());
  if (!o.export_space.empty()) {
    std::optional<int64_t> run;
    if (EvalSummary s = summary_or_empty(ev->summary); s.configs) run = s.configs->tuning_run;
    std::string command =
        fmt::format("peak tune {}{}{}", *id, o.strategy.empty() ? "" : " --strategy " + o.strategy,
                    o.strategy_budget.empty() ? "" : " --strategy-budget " + o.strategy_budget);
    if (!o.tuning.empty()) {
      command += " --tune";
      for (const auto& t : o.tuning) command += " " + t;
    }
    auto written = export_space(*ws, run, *id, command, o.export_space);
    if (!written) return fail(Status::error(written.error(), ErrorKind::environment));
    if (!o.quiet && !o.json_out)
      std::printf("wrote %s (%zu configurations)\n", o.export_space.c_str(), written->configs);
  }
  if (o.json_out) {
    json j = ev->summary;
    j["standard"] = e->standard;
    emit_json(j);
  } else {
    std::printf("%s checkpoint %lld: %s — %s\n", what, static_cast<long long>(*id),
                std::string(to_string(ev->disposition)).c_str(), ev->message.c_str());
    print_evaluation(summary_or_empty(ev->summary));
    auto c = ws->store().checkpoint(*id);
    if (c)
      std::printf("checkpoint %lld's result: %s%s\n", static_cast<long long>(*id),
                  perf_text(ws->result_summary(*c)).c_str(),
                  e->standard ? ""
                              : " (this evaluation used other options than the default ones: "
                                "kept in the history, `peak show --all` lists it)");
  }
  return ev->disposition == Disposition::passed ? kOk : kStepFailed;
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
  EvalChoices choices;
  int code = kOk;
  auto ws = open_for_eval(o, choices, &code);
  if (!ws) return code;
  auto render = [&](const SuiteResult& s) {
    return o.json_out ? suite_json(s).dump(2) + "\n" : suite_text(s);
  };
  // -o FILE holds the shapes timed so far after each one ("partial": true until the last), so
  // that a benchmark cut by a limit or a signal keeps what it measured.
  bool warned = false;
  SuiteProgress on_shape = [&](const SuiteResult& so_far) {
    if (auto s = write_file_atomic(o.output, render(so_far)); !s && !warned) {
      warned = true;
      err(fmt::format("warning: {} (the benchmark goes on)", s.message()));
    }
  };
  auto r = bench(*ws, o.args.empty() ? "HEAD" : o.args[0], choices, o.single,
                 o.output.empty() ? SuiteProgress{} : on_shape);
  if (!r) return fail(r.status());
  std::string text = render(*r);
  if (int c = emit(o, text); c != kOk) return c;
  bool any = std::any_of(r->rows.begin(), r->rows.end(),
                         [](const SuiteRow& row) { return row.disposition == "passed"; });
  return any ? kOk : kStepFailed;
}

}  // namespace

void setup_validate(CLI::App* c, Options& o) {
  c->add_option("args", o.args, "CHECKPOINT");
  add_eval_options(c, o);
  add_wait_option(c, o);
}

int cmd_validate(Options& o) { return cmd_eval(o, "validate", "validated"); }

void setup_tune(CLI::App* c, Options& o) {
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
}

int cmd_tune(Options& o) { return cmd_eval(o, "tune", "tuned"); }

void setup_export(CLI::App* c, Options& o) {
  c->add_option("args", o.args, "CHECKPOINT (default HEAD)");
  c->add_option("-o,--output", o.output,
                "the folder to write (new or empty; an earlier export's with --force)");
  c->add_flag("--single", o.single,
              "the checkpoint's best configuration alone, not the configurations of its "
              "dispatch table");
  c->add_flag("--force", o.force, "replace the files of an earlier export in the folder");
  c->add_option("--name", o.export_name,
                "entry points peak_NAME (default: the context's name as a C identifier)");
  c->add_option("--arch", o.arch,
                "CUDA architecture of the device code, e.g. sm_90a (default: the device the "
                "configurations were tuned on)");
}

int cmd_export(Options& o) {
  if (o.output.empty() || o.args.size() > 1) {
    err("usage: peak export [CHECKPOINT] -o DIR [--single] [--force] [--name NAME] [--arch SM]");
    return kUsage;
  }
  int code = kOk;
  auto ws = open_ws(o, &code);
  if (!ws) return code;
  ExportOptions eo;
  eo.out = o.output;
  eo.single = o.single;
  eo.force = o.force;
  eo.name = o.export_name;
  eo.arch = o.arch;
  auto r = ws->export_checkpoint(o.args.empty() ? "HEAD" : o.args[0], eo);
  if (!r) return fail(r.status());
  // -o names the export's folder: the summary goes to standard output.
  if (o.json_out)
    emit_json(export_json(*r));
  else
    std::printf("%s", export_text(*r).c_str());
  return kOk;
}

void setup_export_space(CLI::App* c, Options& o) {
  c->add_option("args", o.args, "CHECKPOINT (default HEAD)");
  c->add_option("-o,--output", o.output, "the cache file to write");
  c->add_option("--run", o.run, "a tuning run id instead of the checkpoint's last");
}

int cmd_export_space(Options& o) {
  if (o.output.empty()) {
    err("usage: peak export-space [CHECKPOINT] -o FILE [--run ID]");
    return kUsage;
  }
  int code = kOk;
  auto ws = open_ws(o, &code);
  if (!ws) return code;
  std::optional<int64_t> run;
  int64_t checkpoint = 0;
  std::string ref = o.args.empty() ? "HEAD" : o.args[0];
  if (o.run > 0) {
    run = o.run;
  } else {
    auto id = ws->resolve(ref);
    if (!id) return fail(id.status());
    checkpoint = *id;
  }
  std::string command = o.run > 0 ? fmt::format("peak export-space --run {}", o.run)
                                  : fmt::format("peak export-space {}", ref);
  auto written = export_space(*ws, run, checkpoint, command, o.output);
  if (!written) return fail(written.status());  // no such search: kUsage; not written: kEnvironment
  if (o.json_out)
    emit_json({{"file", o.output}, {"run", written->run}, {"configs", written->configs}});
  else if (!o.quiet)
    std::printf("wrote %s: tuning run %lld, %zu configurations\n", o.output.c_str(),
                static_cast<long long>(written->run), written->configs);
  return kOk;
}

void setup_bench(CLI::App* c, Options& o) {
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
  c->add_option("--strategies", o.strategies, "bench tuning: comma-separated (default: all)");
  c->add_option("--seeds", o.seeds, "bench tuning: seeds per strategy and space")
      ->capture_default_str();
  c->add_option("--batch", o.batch, "bench tuning: configurations per batch")
      ->capture_default_str();
  c->add_option("--jobs,-j", o.jobs, "bench tuning: parallel compiles (default: each cache's)");
  c->add_option("-o,--output", o.output,
                "write the table (or with --json the JSON) to FILE; bench CHECKPOINT rewrites it "
                "after every shape, so that a cut benchmark keeps the shapes it timed");
}

int cmd_bench(Options& o) {
  if (o.args.empty() || o.args[0] != "tuning") return cmd_bench_suite(o);
  if (!o.device.empty() || o.small || o.full || o.no_baseline || o.single) {
    err("--device, --small, --full, --no-baseline and --single belong to `peak bench "
        "[CHECKPOINT]`, not to `peak bench tuning`");
    return kUsage;
  }
  TuningBenchArgs b;
  b.files.assign(o.args.begin() + 1, o.args.end());
  b.strategies = o.strategies;
  b.seeds = o.seeds;
  b.batch = o.batch;
  b.jobs = o.jobs;
  b.json = o.json_out;
  auto text = bench_tuning(b);
  if (!text) return fail(text.status());  // input errors: kUsage
  if (!o.output.empty()) {
    if (auto s = write_file(o.output, *text); !s) {
      err(s.message());
      return kEnvironment;
    }
  } else {
    std::printf("%s", text->c_str());
  }
  return kOk;
}

void setup_commit(CLI::App* c, Options& o) {
  c->add_option("-m,--message", o.message, "what the edit does");
  add_eval_options(c, o);
  add_wait_option(c, o);
}

int cmd_commit(Options& o) {
  if (!o.args.empty()) {
    err("usage: peak commit -m MESSAGE");
    return kUsage;
  }
  EvalChoices choices;
  int code = kOk;
  auto ws = open_for_eval(o, choices, &code);
  if (!ws) return code;
  return print_apply(ws->commit(o.message, choices), o);
}

}  // namespace peak::cli
