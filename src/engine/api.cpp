#include "engine/api.h"

#include <cstdlib>

#include <fmt/format.h>

#include "engine/paths.h"
#include "util/fs.h"

namespace peak::api {

namespace {

bool path_exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

}  // namespace

Result<fs::path> find_context(const std::string& arg) {
  if (arg.empty()) return make_error("no kernel context given (a folder with kernel.toml)");
  fs::path p = arg;
  if (!path_exists(p) && path_exists(data_path("examples") / p)) p = data_path("examples") / p;
  if (!path_exists(p / "kernel.toml"))
    return make_error(fmt::format(
        "{} is not a kernel context (a folder with kernel.toml); the examples are under {}", arg,
        data_path("examples").string()));
  return p;
}

Result<fs::path> find_sequence(const std::string& arg) {
  if (arg.empty()) return make_error("no sequence given (a .toml file or a name under sequences/)");
  fs::path p = arg;
  if (!path_exists(p) && path_exists(data_path("sequences") / p)) p = data_path("sequences") / p;
  if (!path_exists(p) && path_exists(data_path("sequences") / (arg + ".toml")))
    p = data_path("sequences") / (arg + ".toml");
  if (!path_exists(p))
    return make_error(fmt::format("no sequence '{}' (a .toml file, or a name under {})", arg,
                                  data_path("sequences").string()));
  return p;
}

fs::path shared_library_dir() {
  if (const char* env = std::getenv("PEAK_LIBRARY"); env && *env) return env;
  return data_path("transformations");
}

fs::path workspace_library_dir(const fs::path& workspace) { return workspace / "transformations"; }

Result<std::vector<Transformation>> load_library_for(const fs::path& workspace,
                                                     std::vector<std::string>* problems) {
  auto lib = load_library(shared_library_dir(), problems);
  if (!lib) return lib;
  std::error_code ec;
  fs::path own = workspace.empty() ? fs::path() : workspace_library_dir(workspace);
  if (own.empty() || !fs::is_directory(own, ec)) return lib;
  auto extra = load_library(own, problems);
  if (!extra) return Error{extra.error(), extra.error_kind()};
  for (auto& t : *extra) {
    for (const auto& s : *lib)
      if (s.name == t.name)
        return make_error(
            fmt::format("{} reuses the name '{}' of the shared transformation {}; rename it",
                        t.path.string(), t.name, s.path.string()),
            ErrorKind::input);
    lib->push_back(std::move(t));
  }
  return lib;
}

Result<Transformation> write_transformation(const fs::path& workspace, const std::string& text) {
  auto t = parse_transformation(text, "the new transformation");
  if (!t) return t;
  auto shared = load_library(shared_library_dir());
  if (shared)
    for (const auto& s : *shared)
      if (s.name == t->name)
        return make_error(fmt::format(
            "the shared library already has a transformation named '{}' ({}); choose another "
            "name in the front matter",
            t->name, s.path.string()));
  fs::path dest = workspace_library_dir(workspace) / (t->name + ".md");
  if (auto s = write_file_atomic(dest, text); !s) return Error{s.message()};
  t->path = dest;
  return t;
}

json transformation_json(const Transformation& t) {
  json regions = json::array();
  for (const auto& p : t.passes) regions.push_back(std::string(to_string(p.region)));
  json tuning = json::array();
  for (const auto& p : t.tuning) tuning.push_back(p.name);
  json j = {{"name", t.name},         {"version", t.version},      {"title", t.title},
            {"backends", t.backends}, {"passes", t.passes.size()}, {"regions", regions},
            {"tuning", tuning},       {"path", t.path.string()}};
  if (!t.required_arch.empty()) j["requires"] = t.required_arch;
  return j;
}

json sequence_json(const Sequence& s) {
  json steps = json::array();
  for (const auto& st : s.steps) {
    json j{{"transformation", st.transformation}};
    if (st.attempts > 0) j["attempts"] = st.attempts;
    if (!st.instructions.empty()) j["instructions"] = st.instructions;
    if (!st.tuning.empty()) j["tuning"] = st.tuning;
    steps.push_back(j);
  }
  return {{"name", s.name},
          {"description", s.description},
          {"attempts", s.attempts},
          {"path", s.path.string()},
          {"steps", steps}};
}

json log_json(Workspace& ws) {
  json out = json::array();
  auto cps = ws.store().checkpoints();
  if (!cps) return out;
  auto refs = ws.store().refs();
  auto tags = ws.store().tags();
  auto head = ws.store().head();
  auto head_id = ws.store().head_checkpoint();
  for (auto it = cps->rbegin(); it != cps->rend(); ++it) {
    const auto& c = *it;
    std::vector<std::string> names;
    if (refs)
      for (const auto& [n, id] : *refs)
        if (id == c.id) names.push_back(head && *head == n ? "HEAD -> " + n : n);
    if (tags)
      for (const auto& [n, id] : *tags)
        if (id == c.id) names.push_back("tag: " + n);
    if (head && starts_with(*head, "#") && head_id && *head_id && **head_id == c.id)
      names.push_back("HEAD");
    // The checkpoint's result (Workspace::summary: the same rule as show and report).
    EvalSummary s = ws.result_summary(c);
    std::string perf;
    if (const SummaryBench* b = s.first_bench(); b && b->disposition.value_or("passed") == "passed")
      perf = fmt::format("{:.1f} GFLOP/s at {}", b->gflops.value_or(0.0), b->shape.value_or(""));
    out.push_back({{"id", c.id},
                   {"parent", c.parent ? json(*c.parent) : json(nullptr)},
                   {"branch", c.branch},
                   {"transformation", c.transformation},
                   {"message", c.message},
                   {"refs", names},
                   {"created_at", c.created_at},
                   {"perf", perf}});
  }
  return out;
}

Result<json> checkpoint_json(Workspace& ws, int64_t id) {
  auto c = ws.store().checkpoint(id);
  if (!c) return Error{c.error()};
  auto files = ws.checkpoint_files(id);
  if (!files) return Error{files.error()};
  EvalSummary result = ws.result_summary(*c);
  json summary = to_json(result);
  json resources = result.best && result.best->resources ? *result.best->resources : json::object();
  return json{{"id", c->id},
              {"parent", c->parent ? json(*c->parent) : json(nullptr)},
              {"branch", c->branch},
              {"message", c->message},
              {"transformation", c->transformation},
              {"created_at", c->created_at},
              {"summary", summary},
              {"resources", resources},
              {"source_file", files->first.source_file},
              {"source", files->second},
              {"kernel_toml", to_toml(files->first)}};
}

// The waiting prompt, set on `j` only when one waits (its schema is an object, never null).
static void add_prompt(json& j, const std::string& id, const std::string& path) {
  if (!id.empty()) j["prompt"] = {{"id", id}, {"path", path}};
}

json apply_json(const ApplyResult& r) {
  json j{{"disposition", std::string(to_string(r.disposition))},
         {"message", r.message},
         {"pending", r.pending},
         {"attempts", r.attempts},
         {"workflow", r.workflow_id},
         {"summary", r.summary}};
  add_prompt(j, r.prompt_id, r.prompt_path);
  if (r.checkpoint) j["checkpoint"] = *r.checkpoint;
  if (r.stash) j["stash"] = *r.stash;
  if (r.cancelled) j["cancelled"] = true;
  return j;
}

json run_json(const RunResult& r) {
  json steps = json::array();
  for (const auto& s : r.steps)
    steps.push_back({{"disposition", std::string(to_string(s.disposition))},
                     {"message", s.message},
                     {"checkpoint", s.checkpoint ? json(*s.checkpoint) : json(nullptr)},
                     {"attempts", s.attempts}});
  json j{{"disposition", std::string(to_string(r.disposition))},
         {"message", r.message},
         {"pending", r.pending},
         {"steps_done", r.steps_done},
         {"workflow", r.workflow_id},
         {"steps", steps}};
  add_prompt(j, r.prompt_id, r.prompt_path);
  if (r.cancelled) j["cancelled"] = true;
  return j;
}

const std::vector<std::string>& report_formats() {
  static const std::vector<std::string> formats = {"text", "markdown", "json", "html"};
  return formats;
}

namespace {

Result<std::string> render(const Report& rep, const std::string& format) {
  if (format == "json") return render_json(rep).dump(2) + "\n";
  if (format == "markdown" || format == "md") return render_markdown(rep);
  if (format == "text" || format == "txt") return render_text(rep);
  if (format == "html") return render_html(rep);
  return make_error(
      fmt::format("unknown report format '{}' ({})", format, join(report_formats(), ", ")));
}

}  // namespace

Result<std::string> render_report(Workspace& ws, const std::string& ref,
                                  const std::string& format) {
  auto id = ws.resolve(ref.empty() ? "HEAD" : ref);
  if (!id) return Error{id.error()};
  auto files = ws.checkpoint_files(*id);
  auto rep = ws.report(*id, files ? files->first.name : "");
  if (!rep) return Error{rep.error()};
  return render(*rep, format);
}

Result<std::string> render_report_at(const std::filesystem::path& where, const std::string& ref,
                                     const std::string& format,
                                     const std::filesystem::path& cross_reference) {
  auto store = open_store_for_reading(where);
  if (!store) return store.status();
  ReportOptions ro;
  if (!ref.empty()) {
    auto id = resolve_checkpoint(**store, ref);
    if (!id) return id.status();  // an unknown reference is a bad argument, as for `peak show`
    ro.tip = *id;
  }
  auto rep = build_report(**store, ro);
  if (!rep) return rep.status();
  if ((*store)->dir().filename() == ".peak") rep->source = (*store)->dir().parent_path().string();
  if (!cross_reference.empty()) {
    auto other_store = open_store_for_reading(cross_reference);
    if (!other_store) return Error{other_store.error()};
    auto other = build_report(**other_store);
    if (!other) return Error{other.error()};
    other->source = cross_reference.string();
    if (auto st = add_cross_reference(*rep, *other); !st) return Error{st.message(), st.kind()};
  }
  return render(*rep, format);
}

Status tag(Workspace& ws, const std::string& name, const std::string& ref) {
  if (name.empty() || name.find_first_of(" \t#~") != std::string::npos || name == "HEAD")
    return Status::error(fmt::format("'{}' is not a valid tag name", name));
  auto id = ws.resolve(ref.empty() ? "HEAD" : ref);
  if (!id) return Status::error(id.error());
  return ws.store().tag(name, *id);
}

Status check_tuning(const EvalArgs& a) {
  if (!a.device.empty() && !a.devices.empty())
    return Status::error(
        "device and devices exclude each other: device picks one device, devices several of "
        "one model (all, 0,1 or a name substring)",
        ErrorKind::input);
  if (!a.devices.empty() && a.compile_only)
    return Status::error(
        "devices and compile_only exclude each other: nothing runs when "
        "compiling only",
        ErrorKind::input);
  if (!a.devices.empty())
    if (auto d = parse_devices_spec(a.devices); !d) return Status::error(d.error(), d.error_kind());
  if (!a.strategy.empty())
    if (auto s = make_strategy(a.strategy); !s) return Status::error(s.error());
  if (!a.strategy_budget.empty())
    if (auto b = Budget::parse(a.strategy_budget); !b) return Status::error(b.error());
  return Status::ok();
}

EvalChoices eval_choices(const EvalArgs& a) {
  EvalChoices c;
  c.device = a.device;
  c.devices = a.devices;
  if (a.small) c.small = true;
  if (a.full) c.small = false;
  if (a.budget > 0) c.budget = static_cast<size_t>(a.budget);
  if (a.jobs > 0) c.jobs = a.jobs;
  c.baseline = !a.no_baseline;
  c.compile_only = a.compile_only;
  c.sanitize = a.sanitize;
  c.strategy = a.strategy;
  c.strategy_budget = a.strategy_budget;
  c.reuse_measurements = a.reuse_measurements;
  return c;
}

EvalOptions eval_options(Workspace& ws, const EvalChoices& c) {
  if (auto e = ws.eval_options(c)) return *e;
  return eval_options_for(c, false);  // no device: the evaluation itself will say so
}

EvalOptions eval_options(Workspace& ws, const EvalArgs& a) {
  return eval_options(ws, eval_choices(a));
}

Result<SuiteResult> bench(Workspace& ws, const std::string& ref, const EvalChoices& choices,
                          bool single) {
  auto id = ws.resolve(ref.empty() ? "HEAD" : ref);
  if (!id) return id.status();
  return ws.bench_suite(*id, choices, single);
}

Result<DispatchTable> tune_classes(Workspace& ws, const std::string& ref,
                                   const EvalChoices& choices,
                                   const std::vector<std::string>& only) {
  auto id = ws.resolve(ref.empty() ? "HEAD" : ref);
  if (!id) return id.status();
  return ws.tune_classes(*id, choices, only);
}

}  // namespace peak::api
