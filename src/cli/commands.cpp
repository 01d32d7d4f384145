#include "cli/commands.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/common.h"
#include "peak/version.h"
#include "util/sandbox.h"

namespace peak::cli {

namespace {

// The subcommands, in the order `peak --help` lists them: each one's setup and handler live in
// the file of its group (cmd_workspace.cpp, cmd_workflow.cpp, cmd_evaluate.cpp, cmd_report.cpp,
// cmd_serve.cpp; common.h names them).
struct Command {
  const char* name;
  const char* help;
  std::function<void(CLI::App*, Options&)> setup;
  std::function<int(Options&)> run;
};

void no_setup(CLI::App*, Options&) {}

std::vector<Command> commands() {
  return {
      {"init",
       "create a workspace from a kernel context: peak init CONTEXT [DIR] (a new or empty "
       "folder)",
       setup_init, cmd_init},
      {"transformations", "the library: `transformations list`, `transformations show NAME`",
       setup_transformations, cmd_transformations},
      {"apply", "apply one transformation to HEAD: LLM edit, validate, tune, time, checkpoint",
       setup_apply, cmd_apply},
      {"run", "run a sequence of transformations (resumable)", setup_run, cmd_run},
      {"respond", "manual mode: answer a pending prompt: peak respond ID FILE (or --list)",
       setup_respond, cmd_respond},
      {"validate", "validate, tune and time a checkpoint again (default HEAD); kept in its history",
       setup_validate, cmd_validate},
      {"tune",
       "tune a checkpoint over its tuning parameters again (default HEAD); kept in its "
       "history",
       setup_tune, cmd_tune},
      {"export-space", "write a checkpoint's last tuning search as a tuning cache (JSON)",
       setup_export_space, cmd_export_space},
      {"export",
       "a checkpoint (default HEAD) as a standalone library: its device code with the "
       "configurations of its dispatch table, host code from its launch plan, a C header and "
       "CMakeLists.txt (-o DIR)",
       setup_export, cmd_export},
      {"bench",
       "benchmarks: `bench [CHECKPOINT]` times a checkpoint (default HEAD) over the shape suite of "
       "kernel.toml against the vendor library and records it; `bench tuning [CACHE...]` "
       "compares the tuning strategies in simulation",
       setup_bench, cmd_bench},
      {"commit", "checkpoint the working files after a manual edit (validated, tuned, timed)",
       setup_commit, cmd_commit},
      {"status", "HEAD, changes to the working files, unfinished workflows, waiting prompts",
       no_setup, cmd_status},
      {"log", "list checkpoints, newest first, with their results and unfinished workflows",
       no_setup, cmd_log},
      {"show", "show a checkpoint: its result and source (--all: every evaluation)", setup_show,
       cmd_show},
      {"diff", "unified diff: HEAD against the working files, A against them, or A against B",
       setup_diff, cmd_diff},
      {"checkout", "switch to a branch, or (--detach) to a checkpoint or tag", setup_checkout,
       cmd_checkout},
      {"branch", "list branches, or create NAME at HEAD (or REF) and switch to it", setup_branch,
       cmd_branch},
      {"tag", "list tags, or tag HEAD (or REF) as NAME", setup_tag, cmd_tag},
      {"stash",
       "set local changes aside: `stash [push] [-m MSG]`, `stash list`, `stash pop "
       "[ID]`, `stash drop [ID]`",
       setup_stash, cmd_stash},
      {"report", "performance along the history: text, markdown, json or html", setup_report,
       cmd_report},
      {"stats", "campaign analytics over stores: success, errors, performance, costs", setup_stats,
       cmd_stats},
      {"serve", "a local page with the workspace's report, updated while a run progresses",
       setup_serve, cmd_serve},
      {"campaign",
       "a matrix of contexts x sequences x LLMs x devices, one workflow each, here or through "
       "Slurm: `campaign run FILE`, `campaign status FILE`",
       setup_campaign, cmd_campaign},
      {"mcp", "serve peak's tools to an AI agent (MCP over stdio, or Streamable HTTP)", setup_mcp,
       cmd_mcp},
      {"doctor", "check toolchains, devices and what is missing; --llm SPEC checks an endpoint",
       setup_doctor, cmd_doctor},
      {"demo", "the whole loop on this machine with recorded LLM replies (no API key)", setup_demo,
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
    if (std::string(argv[i]) == "--json") set_json_errors(true);
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
    if (e.get_exit_code() == 0 || !json_errors()) {
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
