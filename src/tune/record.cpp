#include "tune/record.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "peak/version.h"

namespace peak {

using json = nlohmann::json;

StoreRecorder::StoreRecorder(Store& store, RecordTarget target)
    : store_(store), target_(std::move(target)) {}

void StoreRecorder::on_start(const TuningSpace& space, const std::string& strategy, size_t limit) {
  TuningRunRecord run;
  run.attempt_id = target_.attempt_id;
  run.checkpoint_id = target_.checkpoint_id;
  run.source_hash = target_.source_hash;
  run.strategy = strategy;
  json options = target_.options;
  options["limit"] = limit;
  options["jobs"] = target_.jobs;
  run.options_json = options.dump();
  json sp = space.definition();
  sp["kernel"] = target_.kernel;
  sp["shape"] = target_.shape;
  sp["work"] = work_to_json(target_.work);
  sp["toolchain"] = target_.toolchain;
  sp["device"] = target_.device.to_json();
  // The configurations the validity expression ruled out: how many, per false conjunct, and
  // whether each has its own row.
  const auto& pruned = space.pruned();
  json reasons = json::object();
  for (const auto& p : pruned) {
    std::string conjunct = p.reason.substr(0, p.reason.rfind(" ("));
    reasons[conjunct] = reasons.value(conjunct, int64_t{0}) + 1;
  }
  sp["validity_pruned"] = {{"count", pruned.size()},
                           {"rows", pruned.size() <= kValidityRowLimit},
                           {"by_reason", reasons}};
  run.space_json = sp.dump();
  auto id = store_.add_tuning_run(run);
  if (!id) {
    error_ = id.error();
    return;
  }
  run_id_ = *id;
  if (pruned.size() > kValidityRowLimit) return;
  std::vector<TuningConfigRecord> rows;
  for (const auto& p : pruned) {
    TuningConfigRecord r;
    r.run_id = *run_id_;
    r.position = -1;
    r.config_json = config_json(p.config).dump();
    r.stage = std::string(to_string(Stage::validity));
    r.disposition = std::string(to_string(Disposition::invalid_config));
    r.reason = p.reason;
    r.resources_json = "{}";
    r.launch_json = "{}";
    rows.push_back(std::move(r));
  }
  if (auto s = store_.add_tuning_configs(rows); !s && error_.empty()) error_ = s.message();
}

void StoreRecorder::on_batch(const std::vector<size_t>&, const std::vector<ConfigOutcome>& outcomes,
                             double) {
  if (!run_id_) return;
  std::vector<TuningConfigRecord> rows;
  for (const auto& o : outcomes) {
    TuningConfigRecord r;
    r.run_id = *run_id_;
    r.position = position_++;
    r.config_json = config_json(o.config).dump();
    r.stage = std::string(to_string(o.stage));
    r.disposition = std::string(to_string(o.disposition));
    if (o.disposition != Disposition::passed) r.reason = o.message;
    r.score_ms = o.disposition == Disposition::passed ? o.score_ms : std::nan("");
    r.compile_s = o.compile_seconds;
    r.validate_s = o.validate_seconds;
    r.time_s = o.time_seconds;
    r.resources_json = o.build.resources.dump();
    r.launch_json = o.launch.dump();
    rows.push_back(std::move(r));
  }
  if (auto s = store_.add_tuning_configs(rows); !s && error_.empty()) error_ = s.message();
}

namespace {
// A measurement row of `m`, timed on the device that `device_json` describes.
MeasurementRecord measurement_row(const Measurement& m, std::optional<int64_t> attempt_id,
                                  std::optional<int64_t> checkpoint_id, const std::string& what,
                                  const json& device_json) {
  MeasurementRecord mr;
  mr.attempt_id = attempt_id;
  mr.checkpoint_id = checkpoint_id;
  mr.config_json = config_json(m.config).dump();
  mr.shape = m.shape.text();
  mr.what = what;
  mr.samples_json = json(m.samples_ms).dump();
  mr.median_ms = m.stats.median;
  mr.spread = m.stats.rel_spread;
  mr.gflops = m.gflops;
  mr.disposition = std::string(to_string(m.disposition));
  json dj = device_json;
  dj["clock_mhz_before"] = m.clock_mhz_before;
  dj["clock_mhz_after"] = m.clock_mhz_after;
  mr.device_json = dj.dump();
  return mr;
}
}  // namespace

// On the thread of the device that timed it.
void StoreRecorder::on_screened(const ConfigOutcome& o) {
  for (const auto& m : o.measurements) {
    MeasurementRecord mr =
        measurement_row(m, target_.attempt_id, target_.checkpoint_id,
                        target_.what_prefix + "screening", target_.devices.at(o.device));
    mr.config_json = config_json(o.config).dump();
    (void)store_.add_measurement(mr);
  }
}

void StoreRecorder::on_evaluated(const ConfigOutcome& o) {
  if (!target_.build_rows) return;
  Store& store = store_;
  BuildRecord br;
  br.attempt_id = target_.attempt_id;
  br.source_hash = target_.source_hash;
  br.config_json = config_json(o.config).dump();
  br.command = o.build.command;
  br.exit_code = o.build.disposition == Disposition::passed ? 0 : 1;
  if (!o.build.log.empty()) {
    auto lb = store.put_blob(o.build.log);
    if (lb) br.log_blob = *lb;
  }
  br.seconds = o.build.seconds;
  br.disposition = std::string(to_string(o.build.disposition));
  br.resources_json = o.build.resources.dump();
  br.toolchain = o.build.toolchain;
  br.cached = o.build.cached;
  (void)store.add_build(br);
  for (const auto& c : o.validation.checks) {
    ValidationRecord vr;
    vr.attempt_id = target_.attempt_id;
    vr.checkpoint_id = target_.checkpoint_id;
    vr.config_json = br.config_json;
    vr.shape = c.shape.text();
    vr.hidden = c.hidden;
    vr.seed = static_cast<int64_t>(c.seed);
    vr.max_abs_err = std::isfinite(c.max_abs_err) ? c.max_abs_err : -1;
    vr.max_rel_err = c.max_rel_err;
    vr.disposition = std::string(to_string(c.disposition));
    vr.message = c.message;
    (void)store.add_validation(vr);
  }
}

void StoreRecorder::on_final(const Measurement& m) {
  const json& device_json = target_.devices.front();  // the final timing's device
  MeasurementRecord mr = measurement_row(m, target_.attempt_id, target_.checkpoint_id,
                                         target_.what_prefix + "candidate", device_json);
  (void)store_.add_measurement(mr);
  if (m.baseline_samples_ms.empty()) return;
  mr.what = target_.what_prefix + "baseline:" + m.baseline;
  mr.samples_json = json(m.baseline_samples_ms).dump();
  mr.median_ms = m.baseline_stats.median;
  mr.spread = m.baseline_stats.rel_spread;
  mr.gflops = m.baseline_gflops;
  (void)store_.add_measurement(mr);
}

namespace {
json parse_object(const std::string& text) {
  json j = json::parse(text.empty() ? "{}" : text, nullptr, false);
  return j.is_object() ? j : json::object();
}
double finite_or_zero(double v) { return std::isfinite(v) ? v : 0; }
}  // namespace

Result<TuningCache> cache_from_store(const Store& store, int64_t run_id,
                                     bool with_validity_pruned) {
  auto runs = store.tuning_runs();
  if (!runs) return Error{runs.error()};
  auto run = std::find_if(runs->begin(), runs->end(),
                          [&](const TuningRunRecord& r) { return r.id == run_id; });
  if (run == runs->end()) return make_error(fmt::format("no tuning run {} in the store", run_id));
  auto rows = store.tuning_configs(run_id);
  if (!rows) return Error{rows.error()};
  json space = parse_object(run->space_json);
  json options = parse_object(run->options_json);
  TuningCache c;
  c.produced_by = std::string("peak ") + PEAK_VERSION;
  c.kernel = space.value("kernel", "");
  c.shape = space.value("shape", "");
  c.work = work_from_json(space.value("work", json::object()));
  c.toolchain = space.value("toolchain", "");
  c.source_hash = run->source_hash;
  c.strategy = run->strategy;
  c.jobs = options.value("jobs", 1);
  auto dev = parse_device_facts(space.value("device", json::object()));
  if (!dev) return make_error(fmt::format("tuning run {}: device: {}", run_id, dev.error()));
  c.device = *dev;
  c.valid = space.value("valid", "");
  try {
    for (const auto& p : space.value("parameters", json::array()))
      c.params.push_back({p.at("name").get<std::string>(),
                          p.at("values").get<std::vector<int64_t>>(),
                          p.value("default", int64_t{0})});
  } catch (const json::exception& e) {
    return make_error(fmt::format("tuning run {}: malformed parameters: {}", run_id, e.what()));
  }
  // The step: the checkpoint's transformation, or the attempt's.
  if (run->checkpoint_id) {
    if (auto cp = store.checkpoint(*run->checkpoint_id)) c.transformation = cp->transformation;
  } else if (run->attempt_id) {
    if (auto attempts = store.attempts())
      for (const auto& a : *attempts)
        if (a.id == *run->attempt_id) c.transformation = a.transformation;
  }
  for (const auto& r : *rows) {
    CacheEntry e;
    json cj = parse_object(r.config_json);
    for (const auto& [k, v] : cj.items())
      if (v.is_number_integer()) e.config[k] = v.get<int64_t>();
    auto d = disposition_from_string(r.disposition);
    auto s = stage_from_string(r.stage);
    if (!d || !s)
      return make_error(
          fmt::format("tuning run {}: row {} has an unknown disposition or stage", run_id, r.id));
    e.disposition = *d;
    e.stage = *s;
    e.reason = r.reason;
    e.score_ms = e.disposition == Disposition::passed ? r.score_ms : 0;
    e.compile_s = finite_or_zero(r.compile_s);
    e.validate_s = finite_or_zero(r.validate_s);
    e.time_s = finite_or_zero(r.time_s);
    e.resources = parse_object(r.resources_json);
    e.launch = parse_object(r.launch_json);
    c.add(std::move(e));
  }
  // A large set of configurations ruled out by the validity expression has no rows: rebuilt
  // from the space's definition and the device, with the same reasons.
  const json vp = space.value("validity_pruned", json::object());
  if (with_validity_pruned && !vp.value("rows", true)) {
    auto sp = c.space();
    if (!sp)
      return make_error(
          fmt::format("tuning run {}: cannot rebuild its space: {}", run_id, sp.error()));
    for (const auto& p : sp->pruned()) {
      CacheEntry e;
      e.config = p.config;
      e.disposition = Disposition::invalid_config;
      e.stage = Stage::validity;
      e.reason = p.reason;
      c.add(std::move(e));
    }
  }
  return c;
}

Result<TuningCache> recorded_outcomes(const Store& store, const std::string& source_hash,
                                      const std::string& shape, const std::string& device) {
  TuningCache known;
  auto runs = store.tuning_runs();
  if (!runs) return Error{runs.error()};
  for (const auto& r : *runs) {
    if (r.source_hash != source_hash) continue;
    json space = parse_object(r.space_json);
    if (space.value("shape", "") != shape ||
        space.value("device", json::object()).value("name", "") != device)
      continue;
    auto c = cache_from_store(store, r.id, false);
    if (!c) return Error{c.error()};
    for (const auto& e : c->entries())
      if (e.stage != Stage::validity) known.add(e);
  }
  return known;
}

Result<int64_t> latest_tuning_run(const Store& store, int64_t checkpoint_id) {
  auto runs = store.tuning_runs();
  if (!runs) return Error{runs.error()};
  auto attempts = store.checkpoint_attempts(checkpoint_id);
  std::vector<int64_t> linked = attempts ? *attempts : std::vector<int64_t>{};
  std::optional<int64_t> last;
  for (const auto& r : *runs) {
    bool mine =
        (r.checkpoint_id && *r.checkpoint_id == checkpoint_id) ||
        (r.attempt_id && std::find(linked.begin(), linked.end(), *r.attempt_id) != linked.end());
    // A class's search of `peak tune --classes` timed other shapes: exported only by its id.
    if (mine && parse_object(r.options_json).value("per_class", false)) continue;
    if (mine) last = r.id;
  }
  if (!last)
    return make_error(fmt::format(
        "checkpoint {} has no recorded tuning search; run `peak tune {} --strategy exhaustive` "
        "first",
        checkpoint_id, checkpoint_id));
  return *last;
}

}  // namespace peak
