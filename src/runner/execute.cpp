#include "runner/execute.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <new>
#include <optional>
#include <random>
#include <set>

#include <fmt/format.h>

#include "context/inputs.h"

namespace peak {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

uint8_t word_byte(uint32_t word, size_t offset) {
  return static_cast<uint8_t>(word >> (8 * (offset % 4)));
}

// `n` rounded up to a multiple of `align` (a power of two).
size_t round_up(size_t n, size_t align) { return (n + align - 1) & ~(align - 1); }

double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::infinity();
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// One array (or scratch buffer) of the task on the device.
struct Array {
  const ArraySpec* spec = nullptr;  // scratch buffers: a spec made from the plan, output = true
  int64_t count = 0;
  size_t bytes = 0;        // count * dtype size: the part the kernel owns
  size_t alloc_bytes = 0;  // bytes rounded up to 4, plus the guard
  uint32_t guard_word = 0;
  std::vector<uint8_t> pristine;  // inputs: the bytes uploaded
  // Inputs the device generated: pristine is made on the host from this seed and variant when
  // it is read.
  std::optional<std::pair<uint64_t, int>> pristine_from;
};

class Executor {
 public:
  Executor(Device& d, const RunnerJob& j, const RunnerTask& t) : dev_(d), job_(j), task_(t) {
    r_.id = t.id;
  }
  ~Executor() {
    for (auto* list : {&bufs_.arrays, &bufs_.scratch, &spare_, &copy_bufs_})
      for (auto& b : *list)
        if (b.handle) dev_.free(b);
  }

  TaskResult run() {
    auto t0 = Clock::now();
    if (steps()) r_.disposition = Disposition::passed;
    if (r_.threads_before > 0) r_.threads_after = count_threads();
    r_.seconds = seconds_since(t0);
    return std::move(r_);
  }

 private:
  bool fail(Disposition d, std::string message) {
    r_.disposition = d;
    r_.message = std::move(message);
    return false;
  }
  void note(const std::string& s) { r_.message += (r_.message.empty() ? "" : "; ") + s; }

  bool steps() {
    if (!load()) return false;
    if (!allocate()) return false;
    r_.threads_before = count_threads();
    if (task_.check && !checked_runs()) return false;
    if (task_.timing && !timing(*task_.timing)) return false;
    return true;
  }

  bool reference_mode() const { return task_.baseline_outputs; }

  bool load() {
    if (reference_mode()) return true;  // the baseline stands in for the kernel
    auto plan = LaunchPlan::from_json(task_.plan, job_.arrays.size());
    if (!plan) return fail(Disposition::launch_failed, "the task's launch plan: " + plan.error());
    plan_ = std::move(*plan);
    int64_t before = dev_.memory_in_use();
    auto t0 = Clock::now();
    auto k = dev_.load(task_, job_, plan_);
    r_.load_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    int64_t after = dev_.memory_in_use();
    if (k && before >= 0 && after >= 0) r_.module_bytes = after - before;
    if (!k) {
      auto [d, msg] = load_failure(k.error());
      return fail(d, msg);
    }
    kernel_ = std::move(k.value());
    if (!kernel_) return fail(Disposition::launch_failed, "the device returned no kernel");
    r_.kernel_statistics = kernel_->statistics();
    return true;
  }

  bool allocate() {
    arrays_.resize(job_.arrays.size());
    bufs_.arrays.resize(job_.arrays.size());
    for (size_t i = 0; i < job_.arrays.size(); ++i) {
      const ArraySpec& spec = job_.arrays[i];
      Array& a = arrays_[i];
      a.spec = &spec;
      auto it = task_.sizes.find(spec.name);
      if (it == task_.sizes.end() || it->second < 0)
        return fail(Disposition::launch_failed,
                    fmt::format("the job gives no element count for array '{}'", spec.name));
      a.count = it->second;
      a.bytes = static_cast<size_t>(a.count) * dtype_size(spec.dtype);
      a.alloc_bytes = round_up(a.bytes, 4) + kGuardBytes;
      a.guard_word = spec.output ? poison_u32(spec.dtype) : kGuardWord;
      auto b = dev_.alloc(a.alloc_bytes);
      if (!b)
        return fail(Disposition::launch_failed,
                    fmt::format("cannot allocate {} bytes on the device for array '{}': {}",
                                a.alloc_bytes, spec.name, b.error()));
      bufs_.arrays[i] = b.value();
      if (bufs_.arrays[i].bytes < a.alloc_bytes)
        return fail(Disposition::crashed,
                    fmt::format("the device allocated {} bytes for array '{}', {} were asked",
                                bufs_.arrays[i].bytes, spec.name, a.alloc_bytes));
      if (spec.output) continue;  // poisoned before every launch
      if (!write_inputs(a, bufs_.arrays[i], array_seed(task_.seed, spec.name), task_.variant))
        return false;
    }
    return allocate_scratch();
  }

  // The plan's scratch buffers: poisoned before every launch like outputs, with guard zones.
  bool allocate_scratch() {
    scratch_specs_.clear();
    for (const PlanScratch& ps : plan_.scratch) {
      ArraySpec spec;
      spec.name = ps.name;
      spec.dtype = ps.dtype;
      spec.output = true;
      scratch_specs_.push_back(spec);
    }
    scratch_.resize(plan_.scratch.size());
    bufs_.scratch.resize(plan_.scratch.size());
    for (size_t i = 0; i < plan_.scratch.size(); ++i) {
      Array& a = scratch_[i];
      a.spec = &scratch_specs_[i];
      a.count = plan_.scratch[i].count;
      a.bytes = static_cast<size_t>(plan_.scratch[i].bytes);
      a.alloc_bytes = round_up(a.bytes, 4) + kGuardBytes;
      a.guard_word = poison_u32(a.spec->dtype);
      auto b = dev_.alloc(a.alloc_bytes);
      if (!b)
        return fail(
            Disposition::launch_failed,
            fmt::format("cannot allocate {} bytes on the device for scratch buffer '{}': {}",
                        a.alloc_bytes, a.spec->name, b.error()));
      bufs_.scratch[i] = b.value();
    }
    return true;
  }

  bool poison_outputs() {
    for (size_t i = 0; i < arrays_.size(); ++i) {
      if (!arrays_[i].spec->output) continue;
      if (auto s = dev_.fill_u32(bufs_.arrays[i], poison_u32(arrays_[i].spec->dtype)); !s)
        return fail(Disposition::crashed, fmt::format("cannot poison output array '{}': {}",
                                                      arrays_[i].spec->name, s.message()));
    }
    for (size_t i = 0; i < scratch_.size(); ++i) {
      if (auto s = dev_.fill_u32(bufs_.scratch[i], poison_u32(scratch_[i].spec->dtype)); !s)
        return fail(Disposition::crashed, fmt::format("cannot poison scratch buffer '{}': {}",
                                                      scratch_[i].spec->name, s.message()));
    }
    return true;
  }

  LaunchOutcome launch_main(bool timed) {
    if (reference_mode()) return dev_.baseline(task_.baseline, task_, job_, bufs_.arrays, timed);
    return dev_.launch(*kernel_, task_, job_, plan_, bufs_, timed);
  }

  bool launched(const LaunchOutcome& o, std::string_view when) {
    if (o.disposition == Disposition::passed) return true;
    std::string msg = o.message.empty() ? std::string(describe(o.disposition)) : o.message;
    if (reference_mode() && o.disposition == Disposition::not_run)
      msg =
          fmt::format("the baseline '{}' is not available on this device: {}", task_.baseline, msg);
    return fail(o.disposition, fmt::format("{} ({})", msg, when));
  }

  bool download(size_t i, std::vector<uint8_t>& full) {
    full.assign(arrays_[i].alloc_bytes, 0);
    if (auto s = dev_.download(bufs_.arrays[i], full.data(), full.size()); !s)
      return fail(Disposition::crashed, fmt::format("cannot read back array '{}': {}",
                                                    arrays_[i].spec->name, s.message()));
    return true;
  }

  // The first changed guard byte of array (or scratch buffer) a, or -1.
  static int64_t guard_change(const Array& a, const std::vector<uint8_t>& full) {
    for (size_t o = a.bytes; o < a.alloc_bytes; ++o)
      if (full[o] != word_byte(a.guard_word, o)) return static_cast<int64_t>(o - a.bytes);
    return -1;
  }

  // Downloads every array; checks input bytes and every guard; returns output bytes (without
  // the guard) in `outputs` (indexed like the arrays; empty for inputs).
  bool read_and_check(std::string_view when, std::vector<std::vector<uint8_t>>& outputs) {
    outputs.assign(arrays_.size(), {});
    std::vector<std::string> modified, overrun;
    std::vector<uint8_t> full;
    for (size_t i = 0; i < arrays_.size(); ++i) {
      const Array& a = arrays_[i];
      if (!download(i, full)) return false;
      if (int64_t g = guard_change(a, full); g >= 0)
        overrun.push_back(fmt::format("array '{}' (guard byte {} past its {} elements changed)",
                                      a.spec->name, g, a.count));
      if (a.spec->output) {
        outputs[i].assign(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(a.bytes));
        continue;
      }
      if (auto from = arrays_[i].pristine_from) {
        arrays_[i].pristine = generate_array(*a.spec, a.count, from->first, from->second);
        arrays_[i].pristine_from.reset();
      }
      if (std::memcmp(full.data(), a.pristine.data(), a.bytes) == 0) continue;
      size_t esz = dtype_size(a.spec->dtype);
      size_t first = 0;
      while (first < a.bytes && full[first] == a.pristine[first]) ++first;
      int64_t e = static_cast<int64_t>(first / esz);
      modified.push_back(fmt::format("input array '{}' changed at element {} of {} ({:g} -> {:g})",
                                     a.spec->name, e, a.count,
                                     element_as_double(a.spec->dtype, a.pristine.data(), e),
                                     element_as_double(a.spec->dtype, full.data(), e)));
    }
    for (size_t i = 0; i < scratch_.size(); ++i) {
      const Array& a = scratch_[i];
      full.assign(a.alloc_bytes, 0);
      if (auto s = dev_.download(bufs_.scratch[i], full.data(), full.size()); !s)
        return fail(Disposition::crashed, fmt::format("cannot read back scratch buffer '{}': {}",
                                                      a.spec->name, s.message()));
      if (int64_t g = guard_change(a, full); g >= 0)
        overrun.push_back(
            fmt::format("scratch buffer '{}' (guard byte {} past its {} elements "
                        "changed)",
                        a.spec->name, g, a.count));
    }
    if (!overrun.empty()) r_.guard_overwritten = true;
    std::string msg;
    for (const auto& m : modified) msg += (msg.empty() ? "" : "; ") + m;
    if (!overrun.empty()) {
      std::string o = "the kernel wrote past the end of ";
      for (size_t k = 0; k < overrun.size(); ++k) o += (k ? ", " : "") + overrun[k];
      msg += (msg.empty() ? "" : "; ") + o;
    }
    if (!modified.empty())
      return fail(Disposition::inputs_modified, fmt::format("{} ({})", msg, when));
    if (!overrun.empty())
      return fail(Disposition::out_of_bounds, fmt::format("{} ({})", msg, when));
    return true;
  }

  bool write_outputs(const std::vector<std::vector<uint8_t>>& outputs, const std::string& tag,
                     std::map<std::string, std::string>& files) {
    if (task_.output_dir.empty()) return true;
    std::error_code ec;
    std::filesystem::create_directories(task_.output_dir, ec);
    for (size_t i = 0; i < arrays_.size(); ++i) {
      if (!arrays_[i].spec->output || outputs.size() <= i || outputs[i].size() != arrays_[i].bytes)
        continue;
      std::string path = output_path(task_.output_dir, task_.id, tag, arrays_[i].spec->name);
      std::ofstream f(path, std::ios::binary | std::ios::trunc);
      f.write(reinterpret_cast<const char*>(outputs[i].data()),
              static_cast<std::streamsize>(outputs[i].size()));
      f.close();
      if (!f)
        return fail(Disposition::crashed,
                    fmt::format("cannot write output file {}: {}", path, std::strerror(errno)));
      files[arrays_[i].spec->name] = path;
    }
    return true;
  }

  bool checked_runs() {
    std::vector<std::vector<uint8_t>> first, second;
    if (!poison_outputs()) return false;
    if (!launched(launch_main(false), "checked run")) return false;
    if (!read_and_check("checked run", first)) {
      write_outputs(first, "", r_.outputs);  // kept for diagnosis
      return false;
    }
    if (!write_outputs(first, "", r_.outputs)) return false;
    if (!task_.repeat) return true;
    if (!poison_outputs()) return false;
    if (!launched(launch_main(false), "second checked run")) return false;
    if (!read_and_check("second checked run", second)) return false;
    std::vector<std::string> differ;
    for (size_t i = 0; i < arrays_.size(); ++i) {
      if (!arrays_[i].spec->output || first[i] == second[i]) continue;
      size_t esz = dtype_size(arrays_[i].spec->dtype);
      int64_t n = 0;
      for (size_t o = 0; o < first[i].size(); o += esz)
        if (std::memcmp(&first[i][o], &second[i][o], esz) != 0) ++n;
      differ.push_back(
          fmt::format("'{}' ({} of {} elements)", arrays_[i].spec->name, n, arrays_[i].count));
    }
    if (!differ.empty()) {
      // Both runs' bytes go to the parent, which judges the difference against the tolerance.
      if (!write_outputs(second, "repeat.", r_.repeat_outputs)) return false;
      r_.nondeterministic = true;
      std::string list;
      for (const auto& d : differ) list += (list.empty() ? "" : ", ") + d;
      note("two checked runs wrote different bytes to " + list);
    }
    return true;
  }

  // Poison and (optionally) flush: the untimed preparation of every sample.
  bool prepare(const TimingPolicy& p) {
    if (!poison_outputs()) return false;
    if (p.flush_l2) dev_.flush_caches();
    return true;
  }

  bool stop_sampling(const TimingPolicy& p, double elapsed) const {
    int n = static_cast<int>(r_.samples_ms.size());
    if (n >= p.max_samples) return true;
    if (elapsed > p.max_seconds && (n >= p.min_samples || elapsed > 10 * p.max_seconds))
      return true;
    if (n < p.min_samples) return false;
    bool device_times =
        std::any_of(r_.samples_ms.begin(), r_.samples_ms.end(), [](double x) { return x > 0; });
    return relative_iqr(device_times ? r_.samples_ms : r_.host_ms) < p.target_rel_spread;
  }

  // The baseline failed: the candidate's timing goes on without it; the message says why.
  void baseline_unavailable(const LaunchOutcome& b) {
    std::string what = b.disposition == Disposition::not_run
                           ? "is not available"
                           : fmt::format("failed ({})", to_string(b.disposition));
    note(fmt::format("baseline '{}' {}: {}", task_.baseline, what,
                     b.message.empty() ? std::string(describe(b.disposition)) : b.message));
    with_baseline_ = false;
  }

  // One interleaved baseline sample; false (with a note) when the baseline cannot run.
  bool baseline_sample(const TimingPolicy& p) {
    if (!prepare(p)) return false;
    LaunchOutcome b = dev_.baseline(task_.baseline, task_, job_, bufs_.arrays, true);
    if (b.disposition != Disposition::passed) {
      baseline_unavailable(b);
      r_.baseline_samples_ms.clear();
      r_.baseline_host_ms.clear();
      return true;
    }
    r_.baseline_samples_ms.push_back(b.device_ms);
    r_.baseline_host_ms.push_back(b.host_ms);
    return true;
  }

  // The seed of the inputs of timed launch number `n` (warm-ups first): a new stream per launch.
  uint64_t launch_seed(int n) const {
    return task_.seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(n + 1)) ^ 0x7157ull;
  }

  // Fresh inputs for the next timed launch: generated from a new seed into the spare buffers,
  // which then change places with the current ones (so the addresses change too).
  bool fresh_inputs(int n) {
    auto t0 = Clock::now();
    const uint64_t seed = launch_seed(n);
    if (spare_.empty()) {
      spare_.resize(arrays_.size());
      for (size_t i = 0; i < arrays_.size(); ++i) {
        if (arrays_[i].spec->output) continue;
        auto b = dev_.alloc(arrays_[i].alloc_bytes);
        if (!b)
          return fail(Disposition::launch_failed,
                      fmt::format("cannot allocate a second buffer of {} bytes for array '{}': {}",
                                  arrays_[i].alloc_bytes, arrays_[i].spec->name, b.error()));
        spare_[i] = b.value();
      }
    }
    for (size_t i = 0; i < arrays_.size(); ++i) {
      Array& a = arrays_[i];
      if (a.spec->output) continue;
      std::swap(bufs_.arrays[i], spare_[i]);
      if (!write_inputs(a, bufs_.arrays[i], array_seed(seed, a.spec->name), 0)) return false;
    }
    current_seed_ = seed;
    r_.input_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    return true;
  }

  // One input array's bytes from `seed` and `variant` (generate_array's), with its guard after
  // them: made by the device where it can, else generated here and uploaded.
  bool write_inputs(Array& a, DeviceBuffer& buf, uint64_t seed, int variant) {
    std::vector<uint8_t> tail(a.alloc_bytes - a.bytes);
    for (size_t o = a.bytes; o < a.alloc_bytes; ++o) tail[o - a.bytes] = word_byte(a.guard_word, o);
    std::optional<InputGenerator> g;
    if (dev_.generates()) g = input_generator(*a.spec, a.count, seed, variant);
    if (g && dev_.can_generate(*g, a.alloc_bytes)) {
      if (auto st = dev_.generate(buf, *g, a.count, tail); !st)
        return fail(Disposition::crashed,
                    fmt::format("cannot generate inputs for '{}': {}", a.spec->name, st.message()));
      a.pristine.clear();
      a.pristine_from = {seed, variant};
      return true;
    }
    a.pristine = generate_array(*a.spec, a.count, seed, variant);
    a.pristine_from.reset();
    if (a.pristine.size() != a.bytes)
      return fail(Disposition::crashed,
                  fmt::format("input generation gave {} bytes for array '{}', {} expected",
                              a.pristine.size(), a.spec->name, a.bytes));
    std::vector<uint8_t> image(a.alloc_bytes);
    std::memcpy(image.data(), a.pristine.data(), a.bytes);
    std::memcpy(image.data() + a.bytes, tail.data(), tail.size());
    if (auto st = dev_.upload(buf, image.data(), image.size()); !st)
      return fail(Disposition::crashed,
                  fmt::format("cannot upload inputs for '{}': {}", a.spec->name, st.message()));
    return true;
  }

  // Positions of an output array to read back after a timed launch, chosen now: the first and
  // last element, the corners, last row and last column of a matrix output (M x N), and
  // random positions.
  std::vector<int64_t> check_positions(const Array& a, int random_count) {
    std::set<int64_t> pos;
    const int64_t n = a.count;
    if (n <= 0) return {};
    pos.insert(0);
    pos.insert(n - 1);
    auto m_it = task_.shape.values.find("M");
    auto n_it = task_.shape.values.find("N");
    if (m_it != task_.shape.values.end() && n_it != task_.shape.values.end() &&
        m_it->second * n_it->second == n && m_it->second > 0 && n_it->second > 0) {
      const int64_t rows = m_it->second, cols = n_it->second;
      pos.insert(cols - 1);
      pos.insert((rows - 1) * cols);
      for (int k = 0; k < 2; ++k) {
        pos.insert((rows - 1) * cols + static_cast<int64_t>(rng_() % static_cast<uint64_t>(cols)));
        pos.insert(static_cast<int64_t>(rng_() % static_cast<uint64_t>(rows)) * cols + cols - 1);
      }
    }
    for (int k = 0; k < random_count; ++k)
      pos.insert(static_cast<int64_t>(rng_() % static_cast<uint64_t>(n)));
    return {pos.begin(), pos.end()};
  }

  // Reads the outputs of timed sample `sample` back at positions chosen now; with `keep`, also
  // writes them whole to files for the comparison with the baseline.
  bool check_timed_outputs(const TimingPolicy& p, int sample, bool keep) {
    TimedCheck check;
    check.sample = sample;
    check.seed = current_seed_;
    std::vector<uint8_t> full;
    std::vector<std::vector<uint8_t>> whole(arrays_.size());
    for (size_t i = 0; i < arrays_.size(); ++i) {
      const Array& a = arrays_[i];
      if (!a.spec->output) continue;
      std::vector<int64_t> positions = check_positions(a, p.check_elements);
      const size_t es = dtype_size(a.spec->dtype);
      // The elements alone, unless the whole output is kept for the comparison with the
      // baseline.
      std::vector<uint8_t> elements;
      if (keep) {
        if (!download(i, full)) return false;
        for (int64_t x : positions)
          elements.insert(elements.end(), full.begin() + static_cast<std::ptrdiff_t>(x * es),
                          full.begin() + static_cast<std::ptrdiff_t>((x + 1) * es));
      } else if (auto st = dev_.read_elements(bufs_.arrays[i], es, positions, elements);
                 !st || elements.size() != positions.size() * es) {
        return fail(Disposition::crashed,
                    fmt::format("cannot read back elements of array '{}': {}", a.spec->name,
                                st ? "the device gave the wrong number of bytes" : st.message()));
      }
      std::vector<double> values;
      for (size_t k = 0; k < positions.size(); ++k) {
        const uint8_t* e = elements.data() + k * es;
        values.push_back(
            is_poison(a.spec->dtype, e)
                ? std::numeric_limits<double>::quiet_NaN()
                : element_as_double(a.spec->dtype, elements.data(), static_cast<int64_t>(k)));
      }
      check.positions[a.spec->name] = std::move(positions);
      check.values[a.spec->name] = std::move(values);
      if (keep) whole[i].assign(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(a.bytes));
    }
    r_.timed_checks.push_back(std::move(check));
    if (keep) {
      FullCheck fc;
      fc.sample = sample;
      fc.seed = current_seed_;
      if (!write_outputs(whole, fmt::format("full{}.", sample), fc.candidate)) return false;
      r_.full_checks.push_back(std::move(fc));
    }
    return true;
  }

  bool keep_baseline_outputs(int sample) {
    std::vector<std::vector<uint8_t>> whole(arrays_.size());
    std::vector<uint8_t> full;
    for (size_t i = 0; i < arrays_.size(); ++i) {
      if (!arrays_[i].spec->output) continue;
      if (!download(i, full)) return false;
      whole[i].assign(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(arrays_[i].bytes));
    }
    return write_outputs(whole, fmt::format("full{}.baseline.", sample),
                         r_.full_checks.back().baseline);
  }

  // ---- The same-traffic copy (RunnerTask::copy_bytes) ----
  // A copy of copy_bytes / 2 bytes (rounded up to 16) from one device buffer to another, with
  // every copy method of the device, interleaved with the candidate sample for sample under the
  // same protocol: the same warm-ups, a source written anew before each timed copy when the
  // candidate gets fresh inputs, and the same flush. The fastest method (lowest median) is
  // reported with its samples. The copy never fails the task: a method that cannot run, or
  // copies wrong bytes, is left out with a note.

  // Leaves method `i` out, with a note saying why; false.
  bool copy_dropped(size_t i, const std::string& why) {
    note(fmt::format("same-traffic copy '{}' left out: {}", copies_[i].method, why));
    copies_.erase(copies_.begin() + static_cast<std::ptrdiff_t>(i));
    return false;
  }

  static std::string outcome_text(const LaunchOutcome& o) {
    return fmt::format("{} ({})",
                       o.message.empty() ? std::string(describe(o.disposition)) : o.message,
                       to_string(o.disposition));
  }

  uint32_t next_copy_word() { return 0x9E3779B9u * ++copy_round_ + 0x7F4A7C15u; }

  // The copy's two buffers (once per task) and the device's methods, each checked by an
  // untimed copy into a poisoned destination that must arrive whole.
  void setup_copy() {
    if (task_.copy_bytes <= 0) return;
    for (const std::string& m : dev_.copy_methods()) copies_.push_back({m, {}});
    if (copies_.empty()) return note("no same-traffic copy: the device has no copy method");
    copy_len_ = round_up(std::max<size_t>(1, static_cast<size_t>(task_.copy_bytes) / 2), 16);
    copy_bufs_.resize(2);
    for (DeviceBuffer& b : copy_bufs_) {
      auto a = dev_.alloc(copy_len_);
      if (a) b = a.value();
      if (!a || b.bytes < copy_len_) {
        copies_.clear();
        return note(fmt::format("no same-traffic copy: cannot allocate {} bytes on the device{}",
                                copy_len_, a ? "" : ": " + a.error()));
      }
    }
    for (size_t i = 0; i < copies_.size();)
      if (copy_arrives(i)) ++i;
  }

  bool copy_arrives(size_t i) {
    const uint32_t word = next_copy_word();
    Status s = dev_.fill_u32(copy_bufs_[1], ~word);
    if (s) s = dev_.fill_u32(copy_bufs_[0], word);
    if (!s) return copy_dropped(i, "cannot fill its buffers: " + s.message());
    LaunchOutcome o = dev_.copy(copies_[i].method, copy_bufs_[0], copy_bufs_[1], copy_len_, false);
    if (o.disposition != Disposition::passed) return copy_dropped(i, outcome_text(o));
    std::vector<uint8_t> got(copy_len_);
    if (Status d = dev_.download(copy_bufs_[1], got.data(), got.size()); !d)
      return copy_dropped(i, "cannot read back its destination: " + d.message());
    std::vector<uint8_t> want(std::min<size_t>(copy_len_, 1 << 16));  // a whole number of words
    for (size_t b = 0; b < want.size(); ++b) want[b] = word_byte(word, b);
    for (size_t at = 0; at < copy_len_; at += want.size()) {
      const size_t n = std::min(want.size(), copy_len_ - at);
      if (std::memcmp(got.data() + at, want.data(), n) == 0) continue;
      size_t b = 0;
      while (got[at + b] == want[b]) ++b;
      return copy_dropped(i, fmt::format("byte {} of {} did not arrive", at + b, copy_len_));
    }
    return true;
  }

  // One copy with method `i`: untimed (a warm-up), or timed (a sample) after the flush.
  bool copy_once(size_t i, const TimingPolicy& p, bool fresh, bool timed) {
    if (fresh) {
      if (Status s = dev_.fill_u32(copy_bufs_[0], next_copy_word()); !s)
        return copy_dropped(i, "cannot write its source: " + s.message());
    }
    if (timed && p.flush_l2) dev_.flush_caches();
    LaunchOutcome o = dev_.copy(copies_[i].method, copy_bufs_[0], copy_bufs_[1], copy_len_, timed);
    if (o.disposition != Disposition::passed) return copy_dropped(i, outcome_text(o));
    if (timed) copies_[i].samples_ms.push_back(o.device_ms);
    return true;
  }

  void copy_round(const TimingPolicy& p, bool fresh, bool timed) {
    for (size_t i = 0; i < copies_.size();)
      if (copy_once(i, p, fresh, timed)) ++i;
  }

  void finish_copy() {
    const CopyTimes* best = nullptr;
    double best_median = 0;
    for (const CopyTimes& c : copies_) {
      if (c.samples_ms.empty()) continue;
      const double m = median(c.samples_ms);
      if (!best || m < best_median) {
        best = &c;
        best_median = m;
      }
    }
    if (!best) return;
    r_.copy_method = best->method;
    r_.copy_samples_ms = best->samples_ms;
  }

  bool timing(const TimingPolicy& p) {
    with_baseline_ = !task_.baseline.empty() && !reference_mode();
    const bool fresh = p.fresh_inputs && !reference_mode();
    int launch_no = 0;
    auto next_inputs = [&]() { return !fresh || fresh_inputs(launch_no++); };
    setup_copy();
    for (int w = 0; w < p.warmup; ++w) {
      if (!next_inputs()) return false;
      if (!poison_outputs()) return false;
      if (!launched(launch_main(false), "warm-up")) return false;
      if (with_baseline_) {
        if (!poison_outputs()) return false;
        LaunchOutcome b = dev_.baseline(task_.baseline, task_, job_, bufs_.arrays, false);
        if (b.disposition != Disposition::passed) baseline_unavailable(b);
      }
      copy_round(p, fresh, false);
    }
    // Samples whose whole output is compared with the baseline's: chosen here, where the
    // candidate cannot see them.
    std::set<int> keep;
    if (fresh && with_baseline_ && p.full_checks > 0) {
      const int span = std::max(1, std::min(p.min_samples, p.max_samples));
      while (static_cast<int>(keep.size()) < std::min(p.full_checks, span))
        keep.insert(static_cast<int>(rng_() % static_cast<uint64_t>(span)));
    }
    const int64_t memory_before = dev_.memory_in_use();
    r_.clock_mhz_before = dev_.clock_mhz();
    auto t0 = Clock::now();
    for (;;) {
      if (!next_inputs()) return false;
      if (!prepare(p)) return false;
      const int sample = static_cast<int>(r_.samples_ms.size());
      LaunchOutcome o = launch_main(true);
      if (!launched(o, fmt::format("timed sample {}", sample + 1))) return false;
      r_.samples_ms.push_back(o.device_ms);
      r_.host_ms.push_back(o.host_ms);
      if (o.outlived) r_.outlived = true;
      bool last = stop_sampling(p, seconds_since(t0));
      const bool kept = keep.count(sample) > 0;
      if (fresh && !check_timed_outputs(p, sample, kept)) return false;
      if (last) {
        // The outputs of the last timed launch, before the baseline overwrites them.
        std::vector<std::vector<uint8_t>> outs;
        bool checked = read_and_check("timed runs", outs);
        write_outputs(outs, "timed.", r_.timed_outputs);
        if (!checked) return false;
      }
      if (with_baseline_ && !baseline_sample(p)) return false;
      if (kept && with_baseline_ && !keep_baseline_outputs(sample)) return false;
      copy_round(p, fresh, true);
      if (last) break;
    }
    finish_copy();
    r_.clock_mhz_after = dev_.clock_mhz();
    const int64_t memory_after = dev_.memory_in_use();
    if (memory_before >= 0 && memory_after >= 0)
      r_.memory_growth_bytes = memory_after - memory_before;
    return true;
  }

  Device& dev_;
  const RunnerJob& job_;
  const RunnerTask& task_;
  TaskResult r_;
  std::unique_ptr<LoadedKernel> kernel_;
  std::vector<Array> arrays_;
  std::vector<Array> scratch_;
  std::vector<ArraySpec> scratch_specs_;
  LaunchPlan plan_;
  TaskBuffers bufs_;
  std::vector<DeviceBuffer> spare_;  // the other allocation of each input (fresh inputs)
  uint64_t current_seed_ = 0;
  std::mt19937_64 rng_{std::random_device{}()};
  bool with_baseline_ = false;
  struct CopyTimes {
    std::string method;
    std::vector<double> samples_ms;
  };
  std::vector<CopyTimes> copies_;        // the copy methods still in the running
  std::vector<DeviceBuffer> copy_bufs_;  // the copy's source and destination
  size_t copy_len_ = 0;
  uint32_t copy_round_ = 0;
};

bool safe_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

std::string safe_name(std::string s) {
  for (char& c : s)
    if (!safe_char(c)) c = '_';
  if (s.empty() || s == "." || s == "..") s = "_" + s;
  return s;
}

}  // namespace

Error load_error(Disposition d, std::string_view message) {
  return Error{fmt::format("{}: {}", to_string(d), message)};
}

std::pair<Disposition, std::string> load_failure(const std::string& message) {
  auto colon = message.find(':');
  if (colon != std::string::npos) {
    if (auto d = disposition_from_string(std::string_view(message).substr(0, colon))) {
      size_t rest = colon + 1;
      while (rest < message.size() && message[rest] == ' ') ++rest;
      return {*d, message.substr(rest)};
    }
  }
  return {Disposition::launch_failed, message};
}

double relative_iqr(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::infinity();
  std::sort(v.begin(), v.end());
  auto q = [&](double p) {
    double pos = p * static_cast<double>(v.size() - 1);
    size_t lo = static_cast<size_t>(pos);
    size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
  };
  double median = q(0.5);
  if (!(median > 0)) return std::numeric_limits<double>::infinity();
  return (q(0.75) - q(0.25)) / median;
}

int count_threads() {
  std::error_code ec;
  int n = 0;
  for (std::filesystem::directory_iterator it("/proc/self/task", ec), end; !ec && it != end;
       it.increment(ec))
    ++n;
  return ec ? 0 : n;
}

std::string output_path(const std::string& dir, const std::string& id, const std::string& tag,
                        const std::string& array) {
  return (std::filesystem::path(dir) / (safe_name(id) + "." + tag + safe_name(array) + ".bin"))
      .string();
}

TaskResult execute_task(Device& device, const RunnerJob& job, const RunnerTask& task) {
  TaskResult r;
  try {
    Executor e(device, job, task);
    r = e.run();
  } catch (const std::bad_alloc&) {
    r = TaskResult{};
    r.disposition = Disposition::crashed;
    r.message = "the runner ran out of host memory";
  } catch (const std::exception& ex) {
    r = TaskResult{};
    r.disposition = Disposition::crashed;
    r.message = fmt::format("runner internal error: {}", ex.what());
  } catch (...) {
    r = TaskResult{};
    r.disposition = Disposition::crashed;
    r.message = "runner internal error: an unknown exception";
  }
  r.id = task.id;
  bool lost = false;
  try {
    lost = device.lost();
  } catch (...) {
    lost = true;
  }
  if (lost) {
    if (r.disposition == Disposition::passed) r.disposition = Disposition::crashed;
    std::string m = "the device was lost (sticky error); the runner restarts";
    r.message = r.message.empty() ? m : r.message + "; " + m;
  }
  return r;
}

}  // namespace peak
