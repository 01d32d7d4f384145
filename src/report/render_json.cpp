// The report as JSON (format kReportFormatVersion; docs/report.md lists the fields).
#include "report/report.h"

namespace peak {

using json = nlohmann::json;

namespace {

json config_json_of(const ConfigRow& c) {
  return {{"config", c.config},
          {"disposition", c.disposition},
          {"message", c.message},
          {"compile_s", c.compile_s},
          {"cached", c.cached},
          {"resources", c.resources},
          {"checks", c.checks},
          {"failed_checks", c.failed_checks},
          {"shape", c.shape},
          {"score_ms", c.score_ms},
          {"score_gflops", c.score_gflops},
          {"spread", c.spread},
          {"gpu_s", c.gpu_s},
          {"top", c.top},
          {"best", c.best}};
}

json configs_json(const std::vector<ConfigRow>& v) {
  json a = json::array();
  for (const auto& c : v) a.push_back(config_json_of(c));
  return a;
}

json cross_reference_json(const std::vector<CrossReference>& v) {
  json cr = json::array();
  for (const auto& c : v)
    cr.push_back({{"source", c.source},
                  {"kernel", c.kernel},
                  {"baseline", c.baseline},
                  {"shape", c.shape},
                  {"gflops", c.gflops},
                  {"checkpoint", c.checkpoint},
                  {"measured_at", c.measured_at}});
  return cr;
}

json provenance_json(const Provenance& p) {
  json prov = {{"device", p.device},
               {"backend", p.backend},
               {"driver", p.driver},
               {"api", p.api},
               {"arch", p.arch},
               {"toolchain", p.toolchain},
               {"clock_mhz_min", p.clock_mhz_min},
               {"clock_mhz_max", p.clock_mhz_max},
               {"throttled", p.throttled},
               {"peak_versions", p.peak_versions},
               {"report_version", p.report_version},
               {"store_schema", p.store_schema},
               {"recordings", p.recordings}};
  prov["llm"] = json::array();
  for (const auto& u : p.llm)
    prov["llm"].push_back(
        {{"driver", u.driver}, {"model", u.model}, {"producer", u.producer}, {"calls", u.calls}});
  prov["workflows"] = json::array();
  for (const auto& w : p.workflows)
    prov["workflows"].push_back({{"id", w.id},
                                 {"kind", w.kind},
                                 {"status", w.status},
                                 {"started_at", w.started_at},
                                 {"finished_at", w.finished_at},
                                 {"args", w.args}});
  return prov;
}

// The memory-bound measures of a row, where they were measured (absent otherwise).
void add_memory_measures(const BenchRow& b, json& j) {
  if (b.bytes_headline) j["headline"] = "bytes";
  if (b.bytes <= 0) return;
  j.update({{"bytes", b.bytes},
            {"gbs", b.gbs},
            {"gbs_low", b.gbs_low},
            {"gbs_high", b.gbs_high},
            {"pct_of_bandwidth", b.pct_of_bandwidth}});
  if (b.intensity > 0) j["intensity"] = b.intensity;
  if (b.copy_method.empty()) return;
  j.update({{"copy_method", b.copy_method},
            {"copy_median_ms", b.copy_median_ms},
            {"copy_gbs", b.copy_gbs},
            {"pct_of_copy", b.pct_of_copy}});
}

json bench_json(const BenchRow& b) {
  json j = {{"shape", b.shape},
            {"disposition", b.disposition},
            {"median_ms", b.median_ms},
            {"p25_ms", b.p25_ms},
            {"p75_ms", b.p75_ms},
            {"spread", b.spread},
            {"gflops", b.gflops},
            {"gflops_low", b.gflops_low},
            {"gflops_high", b.gflops_high},
            {"pct_of_peak", b.pct_of_peak},
            {"baseline", b.baseline},
            {"baseline_gflops", b.baseline_gflops},
            {"baseline_median_ms", b.baseline_median_ms},
            {"baseline_spread", b.baseline_spread},
            {"baseline_gflops_low", b.baseline_gflops_low},
            {"baseline_gflops_high", b.baseline_gflops_high},
            {"pct_of_baseline", b.pct_of_baseline},
            {"speedup_vs_seed", b.speedup_vs_seed},
            {"speedup_vs_parent", b.speedup_vs_parent},
            {"samples", b.samples},
            {"samples_ms", b.samples_ms},
            {"baseline_samples_ms", b.baseline_samples_ms},
            {"clock_mhz_before", b.clock_mhz_before},
            {"clock_mhz_after", b.clock_mhz_after},
            {"throttled", b.throttled}};
  add_memory_measures(b, j);
  return j;
}

json attempt_json(const AttemptRow& a) {
  return {{"id", a.id},
          {"workflow", a.workflow},
          {"attempt", a.attempt},
          {"pass", a.pass},
          {"region", a.region},
          {"driver", a.driver},
          {"model", a.model},
          {"producer", a.producer},
          {"prompt_tokens", a.prompt_tokens},
          {"completion_tokens", a.completion_tokens},
          {"latency_s", a.latency_s},
          {"disposition", a.disposition},
          {"error", a.error},
          {"infrastructure", a.infrastructure},
          {"created_at", a.created_at}};
}

json costs_json(const PhaseCosts& c) {
  return {{"llm_s", c.llm_s},
          {"llm_calls", c.llm_calls},
          {"prompt_tokens", c.prompt_tokens},
          {"completion_tokens", c.completion_tokens},
          {"compile_s", c.compile_s},
          {"compile_cpu_s", c.compile_cpu_s},
          {"validate_s", c.validate_s},
          {"tune_s", c.tune_s},
          {"bench_s", c.bench_s},
          {"gpu_s", c.gpu_s},
          {"recorded", c.recorded}};
}

json step_json(const StepRow& s) {
  json sj{{"checkpoint", s.checkpoint},
          {"transformation", s.transformation},
          {"message", s.message},
          {"branch", s.branch},
          {"disposition", s.disposition},
          {"created_at", s.created_at},
          {"attempts", s.attempts},
          {"failed_attempts", s.failed_attempts},
          {"best_config", s.best_config},
          {"resources", s.resources},
          {"resources_raw", s.resources_raw},
          {"config_dispositions", s.config_dispositions},
          {"space", s.space},
          {"pruned", s.pruned},
          {"sampled", s.sampled},
          {"source_file", s.source_file},
          {"diff", s.diff},
          {"diff_note", s.diff_note}};
  sj["parent"] = s.parent ? json(*s.parent) : json();
  // Only a step whose best build has an instruction mix (CUDA, cuobjdump found) has these.
  if (!s.instruction_mix.empty()) {
    sj["instruction_mix"] = s.instruction_mix;
    sj["sass"] = s.sass;
  }
  sj["bench"] = json::array();
  for (const auto& b : s.bench) sj["bench"].push_back(bench_json(b));
  if (s.suite) sj["suite"] = suite_json(*s.suite);  // only where `peak bench` ran
  sj["configs"] = configs_json(s.configs);
  sj["attempt_rows"] = json::array();
  for (const auto& a : s.attempt_rows) sj["attempt_rows"].push_back(attempt_json(a));
  sj["costs"] = costs_json(s.costs);
  return sj;
}

json live_json(const LiveState& l) {
  return {{"running", l.running},
          {"workflow", l.workflow},
          {"kind", l.kind},
          {"line", l.line},
          {"status", l.status},
          {"updated_unix", l.updated_unix},
          {"process_gone", l.process_gone},
          {"transformation", l.transformation},
          {"attempt", l.attempt},
          {"phase", l.phase},
          {"configs", configs_json(l.configs)}};
}

}  // namespace

json render_json(const Report& r) {
  const Provenance& p = r.provenance;
  json j;
  j["format"] = kReportFormatVersion;
  j["kind"] = "peak-report";
  j["source"] = r.source;
  j["kernel"] = r.kernel;
  j["tip"] = r.tip;
  j["device"] = p.device;
  j["backend"] = p.backend;
  j["peak_tflops"] = p.peak_tflops;
  j["peak_source"] = p.peak_source;
  if (p.memory_gbs > 0) j["memory_gbs"] = p.memory_gbs;
  j["measured_fp32_tflops"] = p.measured_fp32_tflops;
  j["notes"] = r.notes;
  if (!r.cross_reference.empty()) j["cross_reference"] = cross_reference_json(r.cross_reference);
  j["provenance"] = provenance_json(p);
  j["steps"] = json::array();
  for (const auto& s : r.steps) j["steps"].push_back(step_json(s));
  j["failures"] = json::array();
  j["infrastructure_failures"] = json::array();  // not charged to the transformations
  for (const auto& f : r.failures)
    j[f.infrastructure ? "infrastructure_failures" : "failures"].push_back(
        {{"transformation", f.transformation},
         {"pass", f.pass_index},
         {"attempt", f.attempt},
         {"disposition", f.disposition},
         {"error", f.error}});
  j["live"] = live_json(r.live);
  return j;
}

}  // namespace peak
