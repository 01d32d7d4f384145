#pragma once
// What the command groups of the CLI share (cmd_*.cpp): the parsed options, how results and
// errors are printed (--json included), the evaluation and LLM options several commands take,
// and the setup and handler of every command, which the table in commands.cpp lists.
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "engine/front.h"
#include "util/fs.h"

namespace peak::cli {

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
  int budget = 0;           // demo: configurations per step
  std::string budget_text;  // evaluations: --budget N or a time (10m)
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
  std::string family = "matmul";  // demo: the kernel family of the replayed campaign
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
  std::string export_name;  // export: entry points peak_<name>
  std::string arch;         // export: the CUDA architecture
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

// ---- output --------------------------------------------------------------------------------

// Under --json, the command's error messages are collected and printed by `finish`.
void set_json_errors(bool on);
bool json_errors();
// A line for people on standard error (progress, warnings): never part of --json's output.
void note(const std::string& m);
// The message of a command that fails.
void err(const std::string& m);
// A command's JSON result on standard output.
void emit_json(const json& j);
// After the command: under --json, its error messages as JSON (or, when it printed its own JSON
// result, on standard error). Returns `code`.
int finish(int code);
// Reports a failed status and returns its exit code.
int fail(const Status& s);
// Writes `text` to o.output (saying so) or standard output.
int emit(const Options& o, const std::string& text);

// ---- options several commands share --------------------------------------------------------

// Opens the workspace (the workspace lock is taken by the first change).
std::unique_ptr<Workspace> open_ws(const Options& o, int* code);
// What the user asked of evaluations; the device decides the rest (nothing is probed here).
Result<EvalChoices> eval_choices(const Options& o);
DriverOptions driver_options(const Options& o, const fs::path& workspace);
// The options of apply/run (checked, nothing probed).
Result<ApplyOptions> apply_options(Workspace& ws, const Options& o);
void add_llm_options(CLI::App* c, Options& o);
void add_wait_option(CLI::App* c, Options& o, const char* also = "");
void add_eval_options(CLI::App* c, Options& o);
// Prints the outcome of a step (apply, commit) and returns its exit code.
int print_apply(const ApplyResult& r, const Options& o);

// ---- the commands: setup_X adds X's arguments, cmd_X runs it --------------------------------

// cmd_workspace.cpp: the workspace and its history.
void setup_init(CLI::App* c, Options& o);
int cmd_init(Options& o);
void setup_transformations(CLI::App* c, Options& o);
int cmd_transformations(Options& o);
int cmd_status(Options& o);
int cmd_log(Options& o);
void setup_show(CLI::App* c, Options& o);
int cmd_show(Options& o);
void setup_diff(CLI::App* c, Options& o);
int cmd_diff(Options& o);
void setup_checkout(CLI::App* c, Options& o);
int cmd_checkout(Options& o);
void setup_branch(CLI::App* c, Options& o);
int cmd_branch(Options& o);
void setup_tag(CLI::App* c, Options& o);
int cmd_tag(Options& o);
void setup_stash(CLI::App* c, Options& o);
int cmd_stash(Options& o);

// cmd_workflow.cpp: the LLM steps (apply, run, the manual replies) and campaigns of them.
void setup_apply(CLI::App* c, Options& o);
int cmd_apply(Options& o);
void setup_run(CLI::App* c, Options& o);
int cmd_run(Options& o);
void setup_respond(CLI::App* c, Options& o);
int cmd_respond(Options& o);
void setup_campaign(CLI::App* c, Options& o);
int cmd_campaign(Options& o);

// cmd_evaluate.cpp: evaluations of a checkpoint and the benchmarks.
void setup_validate(CLI::App* c, Options& o);
int cmd_validate(Options& o);
void setup_tune(CLI::App* c, Options& o);
int cmd_tune(Options& o);
void setup_export_space(CLI::App* c, Options& o);
int cmd_export_space(Options& o);
void setup_export(CLI::App* c, Options& o);
int cmd_export(Options& o);
void setup_bench(CLI::App* c, Options& o);
int cmd_bench(Options& o);
void setup_commit(CLI::App* c, Options& o);
int cmd_commit(Options& o);

// cmd_report.cpp: reports and statistics.
void setup_report(CLI::App* c, Options& o);
int cmd_report(Options& o);
void setup_stats(CLI::App* c, Options& o);
int cmd_stats(Options& o);

// cmd_serve.cpp: the programs peak starts (serve, mcp), the checks of this machine, the demo.
void setup_serve(CLI::App* c, Options& o);
int cmd_serve(Options& o);
void setup_mcp(CLI::App* c, Options& o);
int cmd_mcp(Options& o);
void setup_doctor(CLI::App* c, Options& o);
int cmd_doctor(Options& o);
void setup_demo(CLI::App* c, Options& o);
int cmd_demo(Options& o);

}  // namespace peak::cli
