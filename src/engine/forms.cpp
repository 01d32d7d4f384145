#include "engine/forms.h"

#include <fmt/format.h>

#include "util/fs.h"

namespace peak {

json transformation_json(const Transformation& t) {
  json regions = json::array();
  for (const auto& p : t.passes) regions.push_back(std::string(to_string(p.region)));
  json tuning = json::array();
  for (const auto& p : t.tuning) tuning.push_back(p.name);
  json j = {{"name", t.name},         {"version", t.version},      {"title", t.title},
            {"backends", t.backends}, {"passes", t.passes.size()}, {"regions", regions},
            {"tuning", tuning},       {"path", t.path.string()}};
  if (!t.required_arch.empty()) j["requires"] = t.required_arch;
  j["families"] = t.families;  // empty: any family
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
      perf = fmt::format("{} at {}", headline_rate(*b), b->shape.value_or(""));
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

json export_json(const ExportResult& r) {
  json j = {{"dir", r.dir.string()},
            {"entry", r.entry},
            {"checkpoint", r.checkpoint},
            {"configurations", r.configurations},
            {"device", r.device},
            {"files", r.files}};
  j["dispatch_evaluation"] = r.dispatch_evaluation ? json(*r.dispatch_evaluation) : json(nullptr);
  return j;
}

std::string export_text(const ExportResult& r) {
  std::string from =
      r.dispatch_evaluation
          ? fmt::format("the dispatch table of evaluation {} (tuned on {})", *r.dispatch_evaluation,
                        r.device)
          : fmt::format("the checkpoint's best configuration (measured on {})", r.device);
  return fmt::format(
      "exported checkpoint {} to {}: {} ({} configuration{} from {}), {} files\n"
      "build it: cmake -S {} -B {}/build && cmake --build {}/build\n",
      r.checkpoint, r.dir.string(), r.entry, r.configurations, r.configurations == 1 ? "" : "s",
      from, r.files.size(), r.dir.string(), r.dir.string(), r.dir.string());
}

}  // namespace peak
