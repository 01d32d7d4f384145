#include "validate/validate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "context/inputs.h"
#include "family/family.h"
#include "runner/runner_sandbox.h"
#include "util/fs.h"
#include "util/process.h"
#include "validate/path_shapes.h"
#include "validate/task_timeout.h"

namespace peak {

// The reference outputs of one input set (shape, seed, variant), computed once and kept with the
// shape they were computed at.
struct Validator::RefData {
  BoundShape bound;
  // Per output array: checked indices, reference values, tolerance scale.
  struct Out {
    std::vector<int64_t> indices;
    std::vector<double> values;
    double rms = 0;
    double tol = 0, atol = 0;   // the relative tolerance and the absolute floor (tolerance())
    std::vector<float> vendor;  // every element from the vendor library (large outputs), or empty
    std::string vendor_name;
  };
  std::map<std::string, Out> outputs;
};

Validator::Validator(Backend& backend, DeviceFacts device, RunnerOptions runner,
                     ReferenceSource ref)
    : backend_(backend),
      device_(std::move(device)),
      runner_(std::move(runner)),
      ref_(std::move(ref)) {}

namespace {

std::vector<int64_t> choose_indices(int64_t count, int64_t full_limit, int samples, uint64_t seed,
                                    const std::vector<int64_t>& dims /* rows, cols when known */) {
  std::vector<int64_t> idx;
  if (count <= full_limit) {
    idx.resize(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) idx[static_cast<size_t>(i)] = i;
    return idx;
  }
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  std::uniform_int_distribution<int64_t> d(0, count - 1);
  // Corners and edges of a 2-D output first (tiles at the borders are where kernels break).
  if (dims.size() == 2) {
    int64_t rows = dims[0], cols = dims[1];
    for (int64_t r : {int64_t(0), rows / 2, rows - 1})
      for (int64_t c : {int64_t(0), cols / 2, cols - 1}) idx.push_back(r * cols + c);
    std::uniform_int_distribution<int64_t> dr(0, rows - 1), dc(0, cols - 1);
    for (int i = 0; i < 256; ++i) idx.push_back(dr(rng) * cols + (cols - 1));
    for (int i = 0; i < 256; ++i) idx.push_back((rows - 1) * cols + dc(rng));
  }
  while (static_cast<int>(idx.size()) < samples) idx.push_back(d(rng));
  std::sort(idx.begin(), idx.end());
  idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
  return idx;
}

std::vector<int64_t> output_dims(const KernelContext& ctx, const Shape& shape) {
  return family_of(ctx).output_dims(ctx, shape);
}

}  // namespace

Result<std::shared_ptr<Validator::RefData>> Validator::reference(const KernelContext& ctx,
                                                                 const Shape& shape, uint64_t seed,
                                                                 int variant,
                                                                 const ValidationOptions& opts) {
  std::string key = fmt::format("{}|{}|{}|{}|{}", shape.text(), seed, variant,
                                opts.full_check_limit, opts.sampled_elements);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  auto bound = bind_shape(ctx, shape);
  if (!bound) return Error{bound.error()};
  auto data = std::make_shared<RefData>();
  data->bound = std::move(*bound);
  const auto& sizes = data->bound.sizes;
  std::map<std::string, std::vector<int64_t>> indices;
  for (const auto& a : ctx.arrays) {
    if (!a.output) continue;
    int64_t n = sizes.at(a.name);
    indices[a.name] = choose_indices(n, opts.full_check_limit, opts.sampled_elements, seed + 17,
                                     output_dims(ctx, shape));
  }
  if (ctx.reference == ReferenceKind::cpu) {
    if (!family_of(ctx).has_cpu_reference())
      return make_error(fmt::format(
          "kernel.toml asks for reference = \"cpu\" but family \"{}\" has no CPU reference; use "
          "reference = \"seed\"",
          ctx.family));
    auto inputs = generate_inputs(ctx, data->bound, seed, variant);
    auto ref = cpu_reference(ctx, shape, inputs, indices);
    if (!ref) return Error{ref.error()};
    for (auto& [name, vals] : *ref) {
      RefData::Out o;
      o.indices = indices[name];
      o.values = std::move(vals);
      data->outputs[name] = std::move(o);
    }
  } else {
    // The seed kernel's outputs, computed by a runner that loads only the seed.
    if (ref_.seed_build.artifact.empty())
      return make_error("reference = \"seed\" but the seed kernel has not been built");
    auto plan =
        backend_.plan(ctx, ref_.seed_source, shape, ref_.seed_config, device_, ref_.seed_build);
    if (plan.disposition != Disposition::passed)
      return make_error(
          fmt::format("the seed kernel cannot run shape {}: {}", shape.text(), plan.message));
    auto dir = make_temp_dir("peak-ref-");
    if (!dir) return Error{dir.error()};
    RunnerJob job = RunnerJob::for_context(ctx);
    RunnerTask t = RunnerTask::for_shape(data->bound);
    t.id = "ref";
    t.artifact = ref_.seed_build.artifact.string();
    t.plan = plan.plan;
    t.seed = seed;
    t.variant = variant;
    t.repeat = false;
    t.output_dir = dir->string();
    job.tasks.push_back(t);
    auto res = run_job(job, runner_);
    if (!res) return Error{res.error()};
    const TaskResult& r = res->at(0);
    if (r.disposition != Disposition::passed)
      return make_error(fmt::format("the seed kernel failed on shape {} ({}): {}", shape.text(),
                                    to_string(r.disposition), r.message));
    for (const auto& a : ctx.arrays) {
      if (!a.output) continue;
      auto bytes = read_file(r.outputs.at(a.name));
      if (!bytes) return Error{bytes.error()};
      RefData::Out o;
      o.indices = indices[a.name];
      for (int64_t i : o.indices)
        o.values.push_back(
            element_as_double(a.dtype, reinterpret_cast<const uint8_t*>(bytes->data()), i));
      data->outputs[a.name] = std::move(o);
    }
    std::error_code ec;
    fs::remove_all(*dir, ec);
  }
  // Large outputs: every element against the vendor library on the device, whose own result is
  // checked against the float64 CPU reference on the sampled elements.
  std::string vendor = backend_.baseline(ctx, device_);
  bool large = false;
  for (const auto& a : ctx.arrays)
    if (a.output && sizes.at(a.name) > opts.full_check_limit) large = true;
  if (opts.vendor_reference && large && !vendor.empty() && ctx.reference == ReferenceKind::cpu) {
    auto dir = make_temp_dir("peak-vref-");
    if (!dir) return Error{dir.error()};
    RunnerJob job = RunnerJob::for_context(ctx);
    RunnerTask t = RunnerTask::for_shape(data->bound);
    t.id = "vendor-reference";
    t.seed = seed;
    t.variant = variant;
    t.repeat = false;
    t.baseline = vendor;
    t.baseline_outputs = true;
    t.output_dir = dir->string();
    job.tasks.push_back(t);
    auto res = run_job(job, runner_);
    std::error_code ec;
    // A shape the library does not cover (cublasLt's fp8 GEMM: N and K multiples of 16) is
    // checked as a context without a vendor library is: sampled elements against the CPU
    // reference. A library that ran and failed stops the check.
    const bool not_covered = res && res->at(0).disposition == Disposition::not_run;
    if (!not_covered && (!res || res->at(0).disposition != Disposition::passed)) {
      fs::remove_all(*dir, ec);
      return make_error(fmt::format("the {} reference failed on shape {}: {}", vendor, shape.text(),
                                    res ? res->at(0).message : res.error()));
    }
    for (const auto& a : ctx.arrays) {
      if (not_covered) break;
      if (!a.output || sizes.at(a.name) <= opts.full_check_limit) continue;
      auto bytes = read_file(res->at(0).outputs.at(a.name));
      if (!bytes) {
        fs::remove_all(*dir, ec);
        return Error{bytes.error()};
      }
      auto& o = data->outputs[a.name];
      int64_t n = sizes.at(a.name);
      o.vendor.resize(static_cast<size_t>(n));
      const auto* p = reinterpret_cast<const uint8_t*>(bytes->data());
      for (int64_t i = 0; i < n; ++i)
        o.vendor[static_cast<size_t>(i)] = static_cast<float>(element_as_double(a.dtype, p, i));
      o.vendor_name = vendor;
    }
    fs::remove_all(*dir, ec);
    ++cached_full_;
  }
  for (auto& [name, o] : data->outputs) {
    double ss = 0;
    for (double v : o.values) ss += v * v;
    o.rms = o.values.empty() ? 0 : std::sqrt(ss / static_cast<double>(o.values.size()));
  }
  for (const auto& a : ctx.arrays)
    if (auto it = data->outputs.find(a.name); a.output && it != data->outputs.end())
      std::tie(it->second.tol, it->second.atol) = tolerance(ctx, data->bound, a, it->second.rms);
  if (cache_.size() > 64 || cached_full_ > 6) {
    cache_.clear();
    cached_full_ = 0;
  }
  cache_[key] = data;
  return data;
}

std::pair<double, double> Validator::tolerance(const KernelContext& ctx, const BoundShape& bound,
                                               const ArraySpec& output, double ref_rms) const {
  double tol = ctx.rtol > 0 ? ctx.rtol : family_of(ctx).default_tolerance(ctx, bound.shape, output);
  double atol = ctx.atol > 0 ? ctx.atol : tol * ref_rms;
  return {tol, atol};
}

ShapeCheck Validator::compare_outputs(const KernelContext& ctx, const Shape& shape, uint64_t seed,
                                      int variant,
                                      const std::map<std::string, std::string>& output_files,
                                      const ValidationOptions& opts) {
  ShapeCheck c;
  c.shape = shape;
  c.seed = seed;
  c.variant = variant;
  auto ref = reference(ctx, shape, seed, variant, opts);
  if (!ref) {
    c.disposition = Disposition::not_run;
    c.message = "no reference: " + ref.error();
    return c;
  }
  c.disposition = Disposition::passed;
  for (const auto& a : ctx.arrays) {
    if (!a.output) continue;
    auto fit = output_files.find(a.name);
    if (fit == output_files.end()) {
      c.disposition = Disposition::crashed;
      c.message = fmt::format("the runner returned no output for {}", a.name);
      return c;
    }
    auto bytes = read_file(fit->second);
    const auto& ro = (*ref)->outputs.at(a.name);
    int64_t count = (*ref)->bound.elements(a.name);
    if (!bytes ||
        static_cast<int64_t>(bytes->size()) < count * static_cast<int64_t>(dtype_size(a.dtype))) {
      c.disposition = Disposition::crashed;
      c.message = fmt::format("output {} is missing or short", a.name);
      return c;
    }
    const auto* p = reinterpret_cast<const uint8_t*>(bytes->data());
    // Unwritten elements anywhere in the array (poison is checked on every element).
    int64_t first_unwritten = -1;
    for (int64_t i = 0; i < count; ++i) {
      if (is_poison(a.dtype, p + i * static_cast<int64_t>(dtype_size(a.dtype)))) {
        if (first_unwritten < 0) first_unwritten = i;
        ++c.unwritten;
      }
    }
    const double tol = ro.tol, atol_scale = ro.atol;
    int64_t first_bad = -1;
    double first_bad_out = 0, first_bad_ref = 0;
    for (size_t k = 0; k < ro.indices.size(); ++k) {
      int64_t i = ro.indices[k];
      double out = element_as_double(a.dtype, p, i);
      double ref_v = ro.values[k];
      ++c.checked_elements;
      if (is_poison(a.dtype, p + i * static_cast<int64_t>(dtype_size(a.dtype)))) continue;
      double err = std::fabs(out - ref_v);
      double bound = atol_scale + tol * std::fabs(ref_v);
      bool bad = !(err <= bound);  // NaN never passes
      if (std::isfinite(err)) {
        c.max_abs_err = std::max(c.max_abs_err, err);
        double scale = std::fabs(ref_v) + ro.rms;
        if (scale > 0) c.max_rel_err = std::max(c.max_rel_err, err / scale);
      } else {
        c.max_abs_err = INFINITY;
      }
      if (bad) {
        if (first_bad < 0) {
          first_bad = i;
          first_bad_out = out;
          first_bad_ref = ref_v;
        }
        ++c.bad_elements;
      }
    }
    auto where = [&](int64_t i) {
      auto dims = output_dims(ctx, shape);
      if (dims.size() == 2) return fmt::format("{}[{}][{}]", a.name, i / dims[1], i % dims[1]);
      return fmt::format("{}[{}]", a.name, i);
    };
    // The vendor reference must agree with the float64 one before it judges anything.
    if (!ro.vendor.empty()) {
      for (size_t k = 0; k < ro.indices.size(); ++k) {
        double v = ro.vendor[static_cast<size_t>(ro.indices[k])];
        if (!(std::fabs(v - ro.values[k]) <= 4 * (atol_scale + tol * std::fabs(ro.values[k])))) {
          c.disposition = Disposition::not_run;
          c.message = fmt::format(
              "the {} reference disagrees with the float64 CPU reference at {} "
              "({:.7g} vs {:.7g}); nothing was judged",
              ro.vendor_name, shape.text(), v, ro.values[k]);
          return c;
        }
      }
      int64_t vendor_bad = 0, first_vendor_bad = -1;
      for (int64_t i = 0; i < count; ++i) {
        if (is_poison(a.dtype, p + i * static_cast<int64_t>(dtype_size(a.dtype)))) continue;
        double v = ro.vendor[static_cast<size_t>(i)];
        double err = std::fabs(element_as_double(a.dtype, p, i) - v);
        if (!(err <= 2 * (atol_scale + tol * std::fabs(v)))) {
          if (first_vendor_bad < 0) first_vendor_bad = i;
          ++vendor_bad;
        }
      }
      c.checked_elements += count;
      if (vendor_bad > 0 && c.bad_elements == 0) {
        c.bad_elements = vendor_bad;
        first_bad = first_vendor_bad;
        first_bad_out = element_as_double(a.dtype, p, first_vendor_bad);
        first_bad_ref = ro.vendor[static_cast<size_t>(first_vendor_bad)];
      }
    }
    if (c.unwritten > 0) {
      c.disposition = Disposition::unwritten_output;
      c.message = fmt::format("{} of {} elements of {} were never written (first: {}) at {}",
                              c.unwritten, count, a.name, where(first_unwritten), shape.text());
      return c;
    }
    if (c.bad_elements > 0) {
      c.disposition = Disposition::incorrect;
      c.message = fmt::format(
          "{} of {} checked elements of {} differ from the reference at {} (first: {} = {:.7g}, "
          "expected {:.7g}; tolerance {:.2g} relative)",
          c.bad_elements, ro.vendor.empty() ? static_cast<int64_t>(ro.indices.size()) : count,
          a.name, shape.text(), where(first_bad), first_bad_out, first_bad_ref, tol);
      return c;
    }
  }
  return c;
}

ShapeCheck Validator::compare_runs(const KernelContext& ctx, const Shape& shape, uint64_t seed,
                                   int variant, const std::map<std::string, std::string>& first,
                                   const std::map<std::string, std::string>& second,
                                   const ValidationOptions& opts) {
  // The second run must itself agree with the reference.
  ShapeCheck c = compare_outputs(ctx, shape, seed, variant, second, opts);
  if (c.disposition == Disposition::not_run) return c;
  if (c.disposition != Disposition::passed) {
    c.disposition = Disposition::nondeterministic;
    c.message = fmt::format(
        "two runs on the same inputs wrote different outputs at {} and the second is wrong (a "
        "race?): {}",
        shape.text(), c.message);
    return c;
  }
  auto ref = reference(ctx, shape, seed, variant, opts);
  if (!ref) {
    c.disposition = Disposition::not_run;
    c.message = "no reference: " + ref.error();
    return c;
  }
  int64_t differ = 0, total = 0;
  double max_fraction = 0, max_diff = 0;
  for (const auto& a : ctx.arrays) {
    if (!a.output) continue;
    auto f1 = first.find(a.name), f2 = second.find(a.name);
    auto b1 =
        f1 == first.end() ? Result<std::string>(make_error("missing")) : read_file(f1->second);
    auto b2 =
        f2 == second.end() ? Result<std::string>(make_error("missing")) : read_file(f2->second);
    const int64_t count = (*ref)->bound.elements(a.name);
    const size_t esz = dtype_size(a.dtype);
    if (!b1 || !b2 || static_cast<int64_t>(b1->size()) < count * static_cast<int64_t>(esz) ||
        static_cast<int64_t>(b2->size()) < count * static_cast<int64_t>(esz)) {
      c.disposition = Disposition::crashed;
      c.message = fmt::format(
          "the outputs of both checked runs of {} are needed; one is missing "
          "or short",
          a.name);
      return c;
    }
    const auto* p1 = reinterpret_cast<const uint8_t*>(b1->data());
    const auto* p2 = reinterpret_cast<const uint8_t*>(b2->data());
    const auto& ro = (*ref)->outputs.at(a.name);
    const double tol = ro.tol, atol = ro.atol;
    int64_t beyond = 0, first_beyond = -1;
    double bx = 0, by = 0, ballowed = 0;
    for (int64_t i = 0; i < count; ++i) {
      if (std::memcmp(p1 + i * static_cast<int64_t>(esz), p2 + i * static_cast<int64_t>(esz),
                      esz) == 0)
        continue;
      ++differ;
      double x = element_as_double(a.dtype, p1, i), y = element_as_double(a.dtype, p2, i);
      double d = std::fabs(x - y);
      double allowed = 2 * (atol + tol * std::max(std::fabs(x), std::fabs(y)));
      if (!(d <= allowed)) {  // NaN (poison included) is never within
        if (first_beyond < 0) {
          first_beyond = i;
          bx = x;
          by = y;
          ballowed = allowed;
        }
        ++beyond;
        continue;
      }
      max_diff = std::max(max_diff, d);
      if (allowed > 0) max_fraction = std::max(max_fraction, d / allowed);
    }
    total += count;
    if (beyond > 0) {
      auto dims = output_dims(ctx, shape);
      std::string where =
          dims.size() == 2
              ? fmt::format("{}[{}][{}]", a.name, first_beyond / dims[1], first_beyond % dims[1])
              : fmt::format("{}[{}]", a.name, first_beyond);
      c.disposition = Disposition::nondeterministic;
      c.message = fmt::format(
          "two runs on the same inputs differ beyond the tolerance at {}: {} elements of {} (first "
          "{}: {:.9g} then {:.9g}, at most {:.2g} allowed) — a race",
          shape.text(), beyond, a.name, where, bx, by, ballowed);
      return c;
    }
  }
  c.run_to_run_differences = differ;
  c.run_to_run_max_fraction = max_fraction;
  c.message = fmt::format(
      "the two checked runs differ in {} of {} output elements, by at most {:.3g} ({:.1f}% of the "
      "tolerance): rounding, accepted",
      differ, total, max_diff, 100 * max_fraction);
  return c;
}

namespace {

// Tolerance of an output for a shape, as compare_outputs uses it.
double tolerance_for(const KernelContext& ctx, const BoundShape& bound, const ArraySpec& out) {
  return ctx.rtol > 0 ? ctx.rtol : family_of(ctx).default_tolerance(ctx, bound.shape, out);
}

std::string element_name(const KernelContext& ctx, const Shape& shape, const std::string& array,
                         int64_t i) {
  auto dims = output_dims(ctx, shape);
  if (dims.size() == 2) return fmt::format("{}[{}][{}]", array, i / dims[1], i % dims[1]);
  return fmt::format("{}[{}]", array, i);
}

}  // namespace

// The inputs of a timed launch (seed `seed`) as the reference at `positions` reads them: the
// elements the family says it reads (write_elements into buffers kept from the last check, whose
// elements are zeroed again first), every input whole where it says nothing or where a partial
// array cannot be told apart from the whole (its zero fix).
const ReferenceInputs& Validator::timed_inputs(const KernelContext& ctx, const BoundShape& bound,
                                               uint64_t seed, const ReferenceIndices& positions) {
  TimedInputs& t = timed_inputs_;
  const std::string key = ctx.name + " " + bound.shape.text();
  auto reads = family_of(ctx).reference_reads(ctx, bound.shape, positions);
  if (t.key != key || !reads) {
    t = TimedInputs{};
    if (!reads) {
      t.inputs = generate_inputs(ctx, bound, seed, 0);
      return t.inputs;
    }
    t.key = key;
  }
  for (const ArraySpec& a : ctx.arrays) {
    if (a.output) continue;
    const int64_t n = bound.elements(a.name);
    const uint64_t s = array_seed(seed, a.name);
    std::vector<uint8_t>& buf = t.inputs[a.name];
    auto it = reads->find(a.name);
    auto was = t.written.find(a.name);
    const size_t es = dtype_size(a.dtype);
    if (was != t.written.end() && buf.size() == static_cast<size_t>(n) * es) {
      for (int64_t i : was->second) std::memset(buf.data() + static_cast<size_t>(i) * es, 0, es);
    } else {
      buf.assign(static_cast<size_t>(n) * es, 0);
    }
    t.written.erase(a.name);
    if (it != reads->end() && write_elements(a, n, s, 0, it->second, buf)) {
      t.written[a.name] = std::move(it->second);  // this check's reads are not needed after
      continue;
    }
    buf = generate_array(a, n, s, 0);  // whole; zeroed again in full next time
  }
  return t.inputs;
}

ShapeCheck Validator::check_timed_launch(const KernelContext& ctx, const Shape& shape,
                                         const TimedCheck& check) {
  ShapeCheck c;
  c.shape = shape;
  c.seed = check.seed;
  if (ctx.reference != ReferenceKind::cpu || !family_of(ctx).has_cpu_reference()) {
    c.disposition = Disposition::not_run;
    c.message = "no CPU reference for this family";
    return c;
  }
  auto bound = bind_shape(ctx, shape);
  if (!bound) {
    c.disposition = Disposition::not_run;
    c.message = bound.error();
    return c;
  }
  auto ref = cpu_reference_values(
      ctx, shape, timed_inputs(ctx, *bound, check.seed, check.positions), check.positions);
  if (!ref) {
    c.disposition = Disposition::not_run;
    c.message = ref.error();
    return c;
  }
  c.disposition = Disposition::passed;
  for (const auto& a : ctx.arrays) {
    if (!a.output) continue;
    auto pit = check.positions.find(a.name);
    auto vit = check.values.find(a.name);
    if (pit == check.positions.end() || vit == check.values.end() ||
        vit->second.size() != pit->second.size() || !ref->count(a.name)) {
      c.disposition = Disposition::crashed;
      c.message = fmt::format("the runner read back no elements of {}", a.name);
      return c;
    }
    const ReferenceValues& rv = ref->at(a.name);
    const double tol = tolerance_for(ctx, *bound, a);
    double ss = 0;
    for (double v : rv.value) ss += v * v;
    const double rms = rv.value.empty() ? 0 : std::sqrt(ss / static_cast<double>(rv.value.size()));
    const double atol = ctx.atol > 0 ? ctx.atol : tol * rms;
    for (size_t k = 0; k < pit->second.size(); ++k) {
      const double out = vit->second[k], want = rv.value[k];
      ++c.checked_elements;
      double err = std::fabs(out - want);
      if (std::isnan(out)) {
        ++c.unwritten;
      } else if (!(err <= atol + tol * std::fabs(want))) {
        ++c.bad_elements;
      } else {
        c.max_abs_err = std::max(c.max_abs_err, err);
        continue;
      }
      if (c.message.empty())
        c.message = fmt::format("{} = {:.7g}, expected {:.7g} for this launch's inputs",
                                element_name(ctx, shape, a.name, pit->second[k]), out, want);
    }
  }
  if (c.bad_elements > 0 || c.unwritten > 0) {
    c.disposition = Disposition::incorrect;
    c.message = fmt::format("{} of {} elements read back after the launch are wrong ({})",
                            c.bad_elements + c.unwritten, c.checked_elements, c.message);
  }
  return c;
}

ShapeCheck Validator::compare_with_baseline(const KernelContext& ctx, const Shape& shape,
                                            const FullCheck& check) {
  ShapeCheck c;
  c.shape = shape;
  c.seed = check.seed;
  c.disposition = Disposition::passed;
  auto bound = bind_shape(ctx, shape);
  for (const auto& a : ctx.arrays) {
    if (!a.output) continue;
    auto ci = check.candidate.find(a.name);
    auto bi = check.baseline.find(a.name);
    if (ci == check.candidate.end() || bi == check.baseline.end()) {
      c.disposition = Disposition::not_run;
      c.message = fmt::format("no kept output of {} to compare", a.name);
      return c;
    }
    auto cb = read_file(ci->second), bb = read_file(bi->second);
    const int64_t n = bound ? bound->elements(a.name) : 0;
    const size_t bytes = static_cast<size_t>(n) * dtype_size(a.dtype);
    if (!cb || !bb || cb->size() < bytes || bb->size() < bytes) {
      c.disposition = Disposition::crashed;
      c.message = fmt::format("a kept output of {} is missing or short", a.name);
      return c;
    }
    const auto* cp = reinterpret_cast<const uint8_t*>(cb->data());
    const auto* bp = reinterpret_cast<const uint8_t*>(bb->data());
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) {
      double v = element_as_double(a.dtype, bp, i);
      ss += v * v;
    }
    const double rms = n > 0 ? std::sqrt(ss / static_cast<double>(n)) : 0;
    const double tol = bound ? tolerance_for(ctx, *bound, a) : 0;  // no shape: no elements
    const double atol = ctx.atol > 0 ? ctx.atol : tol * rms;
    int64_t first = -1;
    for (int64_t i = 0; i < n; ++i) {
      ++c.checked_elements;
      if (is_poison(a.dtype, cp + static_cast<size_t>(i) * dtype_size(a.dtype))) {
        ++c.unwritten;
        if (first < 0) first = i;
        continue;
      }
      double x = element_as_double(a.dtype, cp, i), y = element_as_double(a.dtype, bp, i);
      if (!(std::fabs(x - y) <= 2 * (atol + tol * std::fabs(y)))) {
        ++c.bad_elements;
        if (first < 0) first = i;
      }
    }
    if (c.bad_elements + c.unwritten > 0) {
      c.disposition = c.unwritten > 0 ? Disposition::unwritten_output : Disposition::incorrect;
      c.message = fmt::format(
          "{} of {} elements differ from the vendor library's output on the same inputs (first: "
          "{} = {:.7g} vs {:.7g})",
          c.bad_elements + c.unwritten, n, element_name(ctx, shape, a.name, first),
          element_as_double(a.dtype, cp, first), element_as_double(a.dtype, bp, first));
      return c;
    }
  }
  return c;
}

namespace {

struct PlannedShape {
  Shape shape;
  bool hidden;
};

// The shapes a validation checks: those asked for, else kernel.toml's validation shapes and, with
// include_hidden, its hidden shapes and a sample of shapes along the plan's paths (drawn with
// `shape_seed`, set here).
std::vector<PlannedShape> shapes_to_validate(const Backend& backend, const DeviceFacts& device,
                                             const KernelContext& ctx, const SourceRegions& source,
                                             const Config& config, const ValidationOptions& opts,
                                             uint64_t& shape_seed) {
  std::vector<PlannedShape> shapes;
  if (!opts.shapes.empty()) {
    for (const auto& s : opts.shapes) shapes.push_back({s, false});
    return shapes;
  }
  for (const auto& s : ctx.validation_shapes) shapes.push_back({s, false});
  if (opts.include_hidden) {
    for (const auto& s : ctx.hidden_shapes) shapes.push_back({s, true});
    shape_seed = opts.shape_seed != 0 ? opts.shape_seed : random_validation_seed();
    for (const auto& s :
         hidden_validation_shapes(ctx, source, config, backend.plan_dialect(),
                                  device_plan_env(device), opts.sampled_hidden_shapes, shape_seed))
      shapes.push_back({s, true});
  }
  return shapes;
}

// The check of one task's outputs: against the reference, then the threads it left and whether
// its two runs on the same inputs agree. Counts in `within_tolerance` the checks whose two runs
// differed within the tolerance.
ShapeCheck check_task(Validator& validator, const KernelContext& ctx, const Shape& shape,
                      const PreparedValidation::Task& info, const TaskResult& r,
                      const ValidationOptions& opts, int& within_tolerance) {
  ShapeCheck c;
  if (r.disposition != Disposition::passed) {
    c.shape = shape;
    c.seed = info.seed;
    c.variant = info.variant;
    c.disposition = r.disposition;
    c.message = r.message;
    return c;
  }
  c = validator.compare_outputs(ctx, shape, info.seed, info.variant, r.outputs, opts);
  if (r.threads_after > r.threads_before && c.disposition == Disposition::passed) {
    c.disposition = Disposition::forbidden_api;
    c.message = fmt::format("the candidate left {} thread(s) running in the runner",
                            r.threads_after - r.threads_before);
  } else if (r.nondeterministic && c.disposition == Disposition::passed &&
             !r.repeat_outputs.empty()) {
    // Different bytes from the two runs: rounding when both stay within the tolerance.
    ShapeCheck runs = validator.compare_runs(ctx, shape, info.seed, info.variant, r.outputs,
                                             r.repeat_outputs, opts);
    c.disposition = runs.disposition;
    c.message = runs.message;
    c.run_to_run_differences = runs.run_to_run_differences;
    c.run_to_run_max_fraction = runs.run_to_run_max_fraction;
    c.max_abs_err = std::max(c.max_abs_err, runs.max_abs_err);
    c.max_rel_err = std::max(c.max_rel_err, runs.max_rel_err);
    if (c.disposition == Disposition::passed) ++within_tolerance;
  } else if (r.nondeterministic &&
             (c.disposition == Disposition::passed || c.disposition == Disposition::incorrect)) {
    c.disposition = Disposition::nondeterministic;
    c.message = fmt::format("two runs on the same inputs wrote different outputs at {} (a race?)",
                            c.shape.text()) +
                (c.message.empty() ? "" : "; " + c.message);
  }
  return c;
}

// compute-sanitizer on the job's first task, run once.
SanitizerOutcome sanitize_first_task(const RunnerOptions& runner, const RunnerJob& job,
                                     const ValidationOptions& opts) {
  RunnerJob one = job;
  one.tasks = {job.tasks.front()};
  auto sdir = make_temp_dir("peak-sanitize-out-");
  if (sdir) one.tasks[0].output_dir = sdir->string();
  one.tasks[0].repeat = false;
  SanitizerOutcome so = run_sanitizer(runner, one, opts.task_timeout_s * 10);
  std::error_code ec;
  if (sdir) fs::remove_all(*sdir, ec);
  return so;
}

// The outcome of a validation at its end: its disposition and message, and its seconds since t0.
ValidationOutcome ended(ValidationOutcome out, Disposition d, std::string msg,
                        std::chrono::steady_clock::time_point t0) {
  out.disposition = d;
  out.message = std::move(msg);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace

PreparedValidation Validator::prepare(const KernelContext& ctx, const SourceRegions& source,
                                      const BuildResult& build, const Config& config,
                                      const ValidationOptions& opts) {
  PreparedValidation p;
  p.t0 = std::chrono::steady_clock::now();
  auto end = [&](Disposition d, std::string msg) {
    p.ended = ended({}, d, std::move(msg), p.t0);
    p.ended->shape_seed = p.shape_seed;
    p.tasks.clear();
    p.infos.clear();
    return std::move(p);
  };
  if (build.disposition != Disposition::passed)
    return end(build.disposition, "the candidate was not built");
  // What the build says about the device's limits and the candidate's memory comes first.
  if (PlanResult r = backend_.check_resources(build, device_); r.disposition != Disposition::passed)
    return end(r.disposition, r.message);

  std::vector<PlannedShape> shapes =
      shapes_to_validate(backend_, device_, ctx, source, config, opts, p.shape_seed);
  if (shapes.empty()) return end(Disposition::not_run, "kernel.toml lists no validation shapes");
  for (const auto& s : shapes) {
    p.shapes.push_back(s.shape);
    p.hidden.push_back(s.hidden ? 1 : 0);
  }
  for (size_t si = 0; si < shapes.size(); ++si) {
    const Shape& shape = shapes[si].shape;
    auto bound = bind_shape(ctx, shape);
    if (!bound || !bound->runs) continue;
    auto plan = backend_.plan(ctx, source, shape, config, device_, build);
    if (plan.disposition != Disposition::passed) return end(plan.disposition, plan.message);
    for (int s = 0; s < opts.seeds; ++s) {
      RunnerTask t = RunnerTask::for_shape(*bound);
      t.id = fmt::format("s{}-seed{}", si, s);
      t.artifact = build.artifact.string();
      t.plan = plan.plan;
      t.seed = opts.base_seed + 7919 * si + 104729 * static_cast<uint64_t>(s);
      t.variant = s % 2;
      t.repeat = true;
      p.tasks.push_back(t);
      p.infos.push_back({si, t.seed, t.variant});
    }
  }
  auto dir = make_temp_dir("peak-val-");
  if (!dir) return end(Disposition::crashed, dir.error());
  p.dir = *dir;
  for (RunnerTask& t : p.tasks) t.output_dir = p.dir.string();
  return p;
}

ValidationOutcome Validator::finish(const KernelContext& ctx, PreparedValidation& p,
                                    const Result<std::vector<TaskResult>>& results,
                                    const ValidationOptions& opts) {
  if (p.ended) return *p.ended;
  auto check_start = std::chrono::steady_clock::now();
  ValidationOutcome out;
  out.shape_seed = p.shape_seed;
  auto finish = [&](Disposition d, std::string msg) {
    std::error_code ec;
    if (!p.dir.empty()) fs::remove_all(p.dir, ec);
    check_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - check_start).count();
    return ended(std::move(out), d, std::move(msg), p.t0);
  };
  if (!results) return finish(Disposition::crashed, results.error());
  Disposition first = Disposition::passed;
  std::string first_msg;
  int within_tolerance = 0;  // checks whose two runs differed, within the tolerance
  for (size_t i = 0; i < p.infos.size() && i < results->size(); ++i) {
    const auto& info = p.infos[i];
    ShapeCheck c =
        check_task(*this, ctx, p.shapes[info.shape], info, (*results)[i], opts, within_tolerance);
    c.seconds = (*results)[i].seconds;
    c.hidden = p.hidden[info.shape] != 0;
    // A hang is charged first: the tasks it left were not run.
    if (c.disposition != Disposition::passed &&
        (first == Disposition::passed ||
         (c.disposition == Disposition::timeout && first != Disposition::timeout))) {
      first = c.disposition;
      first_msg = c.message;
      if (c.hidden) first_msg += " [hidden shape]";
    }
    out.checks.push_back(std::move(c));
  }
  if (first != Disposition::passed) return finish(first, first_msg);
  if (opts.sanitize && backend_.name() == "cuda" && !p.tasks.empty()) {
    RunnerJob job = RunnerJob::for_context(ctx);
    job.tasks = p.tasks;
    SanitizerOutcome so = sanitize_first_task(runner_, job, opts);
    out.sanitizer = so.report;
    if (so.disposition != Disposition::passed && so.disposition != Disposition::not_run)
      return finish(so.disposition, "compute-sanitizer: " + so.report);
  }
  return finish(Disposition::passed,
                fmt::format("{} checks on {} shapes passed{}", out.checks.size(), p.shapes.size(),
                            within_tolerance == 0
                                ? ""
                                : fmt::format("; in {} the two runs differed within the tolerance "
                                              "(rounding)",
                                              within_tolerance)));
}

ValidationOutcome Validator::validate(const KernelContext& ctx, const SourceRegions& source,
                                      const BuildResult& build, const Config& config,
                                      const ValidationOptions& opts) {
  PreparedValidation p = prepare(ctx, source, build, config, opts);
  if (p.ended) return *p.ended;
  RunnerJob job = RunnerJob::for_context(ctx);
  job.tasks = p.tasks;
  auto results = run_job_retrying_timeouts(
      job, runner_, TaskBudget{opts.task_timeout_s, opts.reference_task_s, opts.timeout_basis});
  return finish(ctx, p, results, opts);
}

namespace {
fs::path find_compute_sanitizer() {
  return find_tool({"compute-sanitizer",
                    "PEAK_COMPUTE_SANITIZER",
                    {"CUDA_HOME", "CUDA_PATH"},
                    {"/usr/local/cuda/bin/compute-sanitizer"}});
}
}  // namespace

SanitizerOutcome run_sanitizer(const RunnerOptions& runner, const RunnerJob& job,
                               double timeout_s) {
  SanitizerOutcome out;
  fs::path tool = find_compute_sanitizer();
  if (tool.empty()) {
    out.report =
        "compute-sanitizer not found (set PEAK_COMPUTE_SANITIZER or install the CUDA toolkit)";
    return out;
  }
  out.disposition = Disposition::passed;
  for (const std::string t : {"memcheck", "racecheck"}) {
    auto dir = make_temp_dir("peak-sanitize-");
    if (!dir) {
      out.disposition = Disposition::not_run;
      out.report += dir.error();
      return out;
    }
    fs::path log = *dir / "sanitizer.log";
    ProcessOptions po;
    po.argv = {tool.string(),
               "--tool",
               t,
               "--error-exitcode",
               "99",
               "--log-file",
               log.string(),
               runner.executable.string()};
    RunnerJob on_device = job;
    if (on_device.device.empty()) on_device.device = runner.device;
    po.stdin_data = on_device.to_json().dump();
    po.env = runner.env;
    po.timeout_s = timeout_s;
    // The runner's sandbox, but compute-sanitizer starts the runner as its child and writes a log.
    po.sandbox = runner_sandbox(runner, job);
    po.sandbox.allow_fork = true;
    po.sandbox.readable.push_back(tool.parent_path().parent_path());
    po.sandbox.writable.push_back(*dir);
    auto r = run_process(po);
    std::string text = read_file(log).is_ok() ? *read_file(log) : "";
    std::string summary;
    for (const auto& line : split_lines(text))
      if (line.find("ERROR SUMMARY") != std::string::npos ||
          line.find("RACECHECK SUMMARY") != std::string::npos)
        summary = trim(line.substr(line.find("=========") == 0 ? 10 : 0));
    std::error_code ec;
    fs::remove_all(*dir, ec);
    if (!r) {
      out.disposition = Disposition::not_run;
      out.report += fmt::format("{}: {}\n", t, r.error());
      continue;
    }
    bool findings = r->exit_code == 99;
    out.report += fmt::format("{}: {}\n", t, summary.empty() ? r->describe() : summary);
    if (findings) {
      // The first reported problem, for the record.
      auto lines = split_lines(text);
      int shown = 0;
      for (const auto& line : lines) {
        if (line.find("=========") == std::string::npos || trim(line).size() <= 10) continue;
        out.report += "  " + trim(line) + "\n";
        if (++shown == 8) break;
      }
      if (out.disposition == Disposition::passed)
        out.disposition =
            t == "memcheck" ? Disposition::out_of_bounds : Disposition::nondeterministic;
    }
  }
  return out;
}

}  // namespace peak
