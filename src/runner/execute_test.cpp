// execute_task against an in-memory Device whose "kernels" run on the host: the facts the runner
// reports (output bytes, changed inputs, overwritten guards, differing runs, samples) must match
// what the fake kernel did.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>

#include "context/inputs.h"
#include "runner/execute.h"
#include "util/fs.h"

namespace peak {
namespace {

enum class Kernel {
  matmul,            // C = A * B
  overrun_output,    // matmul, then one element past the end of C
  overrun_input,     // matmul, then one element past the end of A
  modify_input,      // matmul, then A[3] = 42
  modify_late,       // matmul; from the 5th launch on also A[0] = -7
  nondeterministic,  // matmul, then C[0] += launch number
  partial,           // only the first half of C
  fail_launch,       // every launch fails
  fail_timed,        // timed launches fail (and the device is lost)
  copy,              // Y = X (any dtype)
  slow,              // matmul, sleeping sleep_ms per launch
  overrun_scratch,   // matmul, then one element past the end of the first scratch buffer
  replay_first,      // writes the first product it computed, whatever the inputs
};

struct FakeBuffer {
  std::vector<uint8_t> bytes;
};

class FakeKernel : public LoadedKernel {
 public:
  json stats = json::object();
  json statistics() const override { return stats; }
};

class FakeDevice : public Device {
 public:
  Kernel kernel = Kernel::matmul;
  std::string load_error_text;  // non-empty: load fails with it
  bool load_throws = false;
  double load_sleep_ms = 0;              // load takes at least this long
  std::vector<double> ms_cycle = {1.0};  // device_ms of timed launches, cyclic
  double sleep_ms = 0;
  bool lost_flag = false;
  json kernel_stats = json::object();  // what the loaded kernel's driver says

  int loads = 0, launches = 0, timed_launches = 0, baselines = 0, timed_baselines = 0;
  int loaded_launches = 0, small_scratch = 0;
  std::vector<uint64_t> input_hashes;  // FNV-1a of A's bytes at every launch
  std::vector<void*> a_handles;        // A's buffer at every launch
  std::vector<uint8_t> first_c;
  size_t scratch_seen = 0;
  int flushes = 0, unpoisoned = 0, live = 0, clock_reads = 0;
  std::string order;  // 'K' candidate / 'B' baseline / 'C' copy, timed launches only
  // The same-traffic copy: the methods, each one's device_ms when timed, a method that copies
  // nothing and one whose timed copies fail.
  std::vector<std::string> copy_names;
  std::map<std::string, double> copy_ms;
  std::string copy_loses, copy_fails_timed;
  int copies = 0;
  size_t copy_len = 0;
  std::vector<uint32_t> copy_sources;  // the source's first word at every timed copy
  // Fresh inputs made by the device (run_generator in place of a generator kernel), and the
  // reads of the timed checks.
  bool generator = false;
  int generated = 0, element_reads = 0, downloads = 0;

  DeviceFacts facts() override {
    DeviceFacts f;
    f.backend = "fake";
    f.name = "fake device";
    return f;
  }
  double measure_fp32_tflops() override { return 1.0; }
  Result<DeviceBuffer> alloc(size_t bytes) override {
    auto* b = new FakeBuffer{std::vector<uint8_t>(bytes, 0xEE)};
    ++live;
    return DeviceBuffer{b, bytes};
  }
  void free(DeviceBuffer& b) override {
    delete static_cast<FakeBuffer*>(b.handle);
    b.handle = nullptr;
    --live;
  }
  Status upload(DeviceBuffer& b, const void* data, size_t bytes) override {
    auto& v = buf(b);
    if (bytes > v.size()) return Status::error("upload too large");
    std::memcpy(v.data(), data, bytes);
    return Status::ok();
  }
  bool generates() override { return generator; }
  Status generate(DeviceBuffer& b, const InputGenerator& g, int64_t count,
                  const std::vector<uint8_t>& tail) override {
    ++generated;
    auto bytes = run_generator(g, count);
    bytes.insert(bytes.end(), tail.begin(), tail.end());
    return upload(b, bytes.data(), bytes.size());
  }
  Status read_elements(const DeviceBuffer& b, size_t element_bytes,
                       const std::vector<int64_t>& positions, std::vector<uint8_t>& out) override {
    ++element_reads;
    return Device::read_elements(b, element_bytes, positions, out);
  }
  Status download(const DeviceBuffer& b, void* data, size_t bytes) override {
    ++downloads;
    auto& v = static_cast<FakeBuffer*>(b.handle)->bytes;
    if (bytes > v.size()) return Status::error("download too large");
    std::memcpy(data, v.data(), bytes);
    return Status::ok();
  }
  Status fill_u32(DeviceBuffer& b, uint32_t word) override {
    auto& v = buf(b);
    for (size_t o = 0; o + 4 <= v.size(); o += 4) std::memcpy(&v[o], &word, 4);
    return Status::ok();
  }
  Result<std::unique_ptr<LoadedKernel>> load(const RunnerTask&, const RunnerJob&,
                                             const LaunchPlan& plan) override {
    ++loads;
    loaded_launches = plan.launches();
    if (load_throws) throw std::runtime_error("loader exploded");
    if (load_sleep_ms > 0)
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(load_sleep_ms));
    if (!load_error_text.empty()) return make_error(load_error_text);
    auto k = std::make_unique<FakeKernel>();
    k->stats = kernel_stats;
    return std::unique_ptr<LoadedKernel>(std::move(k));
  }
  LaunchOutcome launch(LoadedKernel&, const RunnerTask& task, const RunnerJob& job,
                       const LaunchPlan& plan, TaskBuffers& buffers, bool timed) override {
    ++launches;
    std::vector<DeviceBuffer>& arrays = buffers.arrays;
    check_poisoned(job, arrays);
    {
      uint64_t h = 0xCBF29CE484222325ull;
      for (uint8_t byte : buf(arrays[0])) h = (h ^ byte) * 0x100000001B3ull;
      input_hashes.push_back(h);
      a_handles.push_back(arrays[0].handle);
    }
    scratch_seen = buffers.scratch.size();
    for (size_t i = 0; i < buffers.scratch.size(); ++i) {
      if (buffers.scratch[i].bytes < static_cast<size_t>(plan.scratch[i].bytes)) ++small_scratch;
      uint32_t p = poison_u32(plan.scratch[i].dtype);
      auto& v = buf(buffers.scratch[i]);
      for (size_t o = 0; o + 4 <= v.size(); o += 4)
        if (std::memcmp(&v[o], &p, 4) != 0) {
          ++unpoisoned;
          break;
        }
      // The kernel leaves something behind: the next launch must find poison again.
      if (!v.empty()) v[0] = 0x11;
    }
    if (kernel == Kernel::overrun_scratch && !buffers.scratch.empty()) {
      auto& v = buf(buffers.scratch[0]);
      size_t end = static_cast<size_t>(plan.scratch[0].bytes);
      if (end + 4 <= v.size()) v[end] ^= 0xFF;
    }
    LaunchOutcome o;
    if (kernel == Kernel::fail_launch) {
      o.disposition = Disposition::launch_failed;
      o.message = "bad grid (0, 1, 1)";
      return o;
    }
    if (kernel == Kernel::fail_timed && timed) {
      lost_flag = true;
      o.disposition = Disposition::crashed;
      o.message = "illegal address";
      return o;
    }
    if (sleep_ms > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int>(sleep_ms * 1000)));
    run_kernel(task, arrays);
    if (timed) {
      order += 'K';
      o.device_ms = ms_cycle[static_cast<size_t>(timed_launches) % ms_cycle.size()];
      o.host_ms = o.device_ms + 0.01;
      ++timed_launches;
    }
    return o;
  }
  LaunchOutcome baseline(const std::string& name, const RunnerTask& task, const RunnerJob& job,
                         std::vector<DeviceBuffer>& arrays, bool timed) override {
    LaunchOutcome o;
    if (name != "fakeblas") {
      o.disposition = Disposition::not_run;
      o.message = "no such library";
      return o;
    }
    ++baselines;
    check_poisoned(job, arrays);
    matmul(task, arrays);
    if (timed) {
      order += 'B';
      ++timed_baselines;
      o.device_ms = 0.5;
      o.host_ms = 0.51;
    }
    return o;
  }
  std::vector<std::string> copy_methods() override { return copy_names; }
  LaunchOutcome copy(const std::string& method, const DeviceBuffer& src, DeviceBuffer& dst,
                     size_t bytes, bool timed) override {
    if (std::find(copy_names.begin(), copy_names.end(), method) == copy_names.end())
      return Device::copy(method, src, dst, bytes, timed);
    ++copies;
    copy_len = bytes;
    LaunchOutcome o;
    if (bytes > src.bytes || bytes > dst.bytes || bytes % 16 != 0) {
      o.disposition = Disposition::launch_failed;
      o.message = "bad copy length";
      return o;
    }
    if (timed && method == copy_fails_timed) {
      o.disposition = Disposition::launch_failed;
      o.message = "copy engine on strike";
      return o;
    }
    auto& from = static_cast<FakeBuffer*>(src.handle)->bytes;
    if (method != copy_loses) std::memcpy(buf(dst).data(), from.data(), bytes);
    if (timed) {
      order += 'C';
      uint32_t first = 0;
      std::memcpy(&first, from.data(), 4);
      copy_sources.push_back(first);
      o.device_ms = copy_ms[method];
      o.host_ms = o.device_ms + 0.01;
    }
    return o;
  }
  void flush_caches() override { ++flushes; }
  double clock_mhz() override { return 1000 + 10 * clock_reads++; }
  bool lost() override { return lost_flag; }

 private:
  static std::vector<uint8_t>& buf(DeviceBuffer& b) {
    return static_cast<FakeBuffer*>(b.handle)->bytes;
  }
  static float* f32(DeviceBuffer& b) { return reinterpret_cast<float*>(buf(b).data()); }

  void check_poisoned(const RunnerJob& job, std::vector<DeviceBuffer>& arrays) {
    for (size_t i = 0; i < job.arrays.size(); ++i) {
      if (!job.arrays[i].output) continue;
      uint32_t p = poison_u32(job.arrays[i].dtype);
      auto& v = buf(arrays[i]);
      for (size_t o = 0; o + 4 <= v.size(); o += 4)
        if (std::memcmp(&v[o], &p, 4) != 0) {
          ++unpoisoned;
          return;
        }
    }
  }

  void matmul(const RunnerTask& task, std::vector<DeviceBuffer>& arrays, int64_t rows = -1) {
    int64_t M = task.shape.values.at("M"), N = task.shape.values.at("N"),
            K = task.shape.values.at("K");
    if (rows < 0) rows = M;
    const float* A = f32(arrays[0]);
    const float* B = f32(arrays[1]);
    float* C = f32(arrays[2]);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < N; ++j) {
        float s = 0;
        for (int64_t k = 0; k < K; ++k) s += A[i * K + k] * B[k * N + j];
        C[i * N + j] = s;
      }
  }

  void run_kernel(const RunnerTask& task, std::vector<DeviceBuffer>& arrays) {
    int64_t M = task.shape.values.count("M") ? task.shape.values.at("M") : 0;
    int64_t N = task.shape.values.count("N") ? task.shape.values.at("N") : 0;
    int64_t K = task.shape.values.count("K") ? task.shape.values.at("K") : 0;
    switch (kernel) {
      case Kernel::copy:  // f16 X -> Y
        std::memcpy(buf(arrays[1]).data(), buf(arrays[0]).data(), task.sizes.at("X") * 2);
        return;
      case Kernel::partial:
        matmul(task, arrays, M / 2);
        return;
      case Kernel::replay_first:
        if (first_c.empty()) {
          matmul(task, arrays);
          first_c.assign(buf(arrays[2]).begin(), buf(arrays[2]).begin() + M * N * 4);
        } else {
          std::memcpy(buf(arrays[2]).data(), first_c.data(), first_c.size());
        }
        return;
      default:
        matmul(task, arrays);
    }
    switch (kernel) {
      case Kernel::overrun_output:
        f32(arrays[2])[M * N] = 1.0f;
        break;
      case Kernel::overrun_input:
        f32(arrays[0])[M * K] = 1.0f;
        break;
      case Kernel::modify_input:
        f32(arrays[0])[3] = 42.0f;
        break;
      case Kernel::modify_late:
        if (launches >= 5) f32(arrays[0])[0] = -7.0f;
        break;
      case Kernel::nondeterministic:
        f32(arrays[2])[0] += static_cast<float>(launches);
        break;
      default:
        break;
    }
  }
};

class ExecuteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = make_temp_dir("peak-execute-test");
    ASSERT_TRUE(d) << d.error();
    dir_ = d.value();
    job_.arrays = {ArraySpec{"A", DType::f32, "M * K", Initializer{}, false},
                   ArraySpec{"B", DType::f32, "K * N", Initializer{}, false},
                   ArraySpec{"C", DType::f32, "M * N", Initializer{}, true}};
    task_.id = "t/1";
    task_.shape.values = {{"M", 6}, {"N", 5}, {"K", 7}};
    task_.sizes = {{"A", 42}, {"B", 35}, {"C", 30}};
    task_.seed = 99;
    task_.variant = 1;
    LaunchPlan plan;
    PlanStep st;
    st.kernel = "fake";
    st.symbol = "fake";
    plan.steps.push_back(st);
    task_.plan = plan.to_json();
    task_.output_dir = (dir_ / "out").string();
  }
  void TearDown() override {
    EXPECT_EQ(dev_.live, 0) << "device buffers leaked";
    std::filesystem::remove_all(dir_);
  }

  TaskResult run() { return execute_task(dev_, job_, task_); }

  std::vector<uint8_t> file_bytes(const std::string& path) {
    auto s = read_file(path);
    EXPECT_TRUE(s) << s.error();
    return s ? std::vector<uint8_t>(s->begin(), s->end()) : std::vector<uint8_t>{};
  }

  // C for the inputs of `seed` (variant 0), as bytes.
  std::vector<uint8_t> product_bytes(uint64_t seed) {
    auto a = generate_array(job_.arrays[0], 42, array_seed(seed, "A"), 0);
    auto b = generate_array(job_.arrays[1], 35, array_seed(seed, "B"), 0);
    const float* A = reinterpret_cast<const float*>(a.data());
    const float* B = reinterpret_cast<const float*>(b.data());
    std::vector<uint8_t> out(30 * 4);
    float* c = reinterpret_cast<float*>(out.data());
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 5; ++j) {
        float s = 0;
        for (int k = 0; k < 7; ++k) s += A[i * 7 + k] * B[k * 5 + j];
        c[i * 5 + j] = s;
      }
    return out;
  }

  // The expected C, computed here from independently generated inputs.
  std::vector<float> expected_c() {
    auto a = generate_array(job_.arrays[0], 42, array_seed(task_.seed, "A"), task_.variant);
    auto b = generate_array(job_.arrays[1], 35, array_seed(task_.seed, "B"), task_.variant);
    const float* A = reinterpret_cast<const float*>(a.data());
    const float* B = reinterpret_cast<const float*>(b.data());
    std::vector<float> c(30);
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 5; ++j) {
        float s = 0;
        for (int k = 0; k < 7; ++k) s += A[i * 7 + k] * B[k * 5 + j];
        c[i * 5 + j] = s;
      }
    return c;
  }

  std::filesystem::path dir_;
  FakeDevice dev_;
  RunnerJob job_;
  RunnerTask task_;
};

TEST_F(ExecuteTest, CheckedRunsWriteOutputsAndFindNothingWrong) {
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_EQ(r.id, "t/1");
  EXPECT_FALSE(r.nondeterministic);
  EXPECT_FALSE(r.guard_overwritten);
  EXPECT_EQ(dev_.loads, 1);
  EXPECT_EQ(dev_.launches, 2);  // checked + repeat
  EXPECT_EQ(dev_.unpoisoned, 0);
  ASSERT_EQ(r.outputs.count("C"), 1u);
  EXPECT_EQ(r.outputs["C"], (dir_ / "out" / "t_1.C.bin").string());
  auto bytes = file_bytes(r.outputs["C"]);
  auto want = expected_c();
  ASSERT_EQ(bytes.size(), want.size() * 4);
  EXPECT_EQ(std::memcmp(bytes.data(), want.data(), bytes.size()), 0);
  EXPECT_TRUE(r.samples_ms.empty());
  EXPECT_TRUE(r.timed_outputs.empty());
  EXPECT_GT(r.threads_before, 0);
  EXPECT_GT(r.threads_after, 0);
}

TEST_F(ExecuteTest, TheDriversStatisticsOfTheLoadedKernelAreReported) {
  TaskResult none = run();
  ASSERT_EQ(none.disposition, Disposition::passed) << none.message;
  EXPECT_TRUE(none.kernel_statistics.empty());
  dev_.kernel_stats = {{"main", {{"Register Count", 96}}}};
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_EQ(r.kernel_statistics, dev_.kernel_stats);
}

TEST_F(ExecuteTest, TheTimeLoadingTheKernelIsReported) {
  dev_.load_sleep_ms = 20;
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_GE(r.load_ms, 20.0);
  EXPECT_LE(r.load_ms, r.seconds * 1000);
}

TEST_F(ExecuteTest, ScratchBuffersAreAllocatedPoisonedAndGuarded) {
  LaunchPlan plan = *LaunchPlan::from_json(task_.plan, 3);
  plan.scratch.push_back({"partial", DType::f32, 40, 160});
  plan.scratch.push_back({"counts", DType::i32, 3, 12});
  task_.plan = plan.to_json();
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_EQ(dev_.scratch_seen, 2u);
  EXPECT_EQ(dev_.small_scratch, 0);
  EXPECT_EQ(dev_.unpoisoned, 0);  // poisoned again before the second checked run
  EXPECT_EQ(dev_.loaded_launches, 1);

  dev_.kernel = Kernel::overrun_scratch;
  r = run();
  EXPECT_EQ(r.disposition, Disposition::out_of_bounds);
  EXPECT_NE(r.message.find("scratch buffer 'partial'"), std::string::npos) << r.message;
}

TEST_F(ExecuteTest, AMalformedPlanIsALaunchFailure) {
  task_.plan = json{{"format", 1}, {"steps", json::array()}};
  TaskResult r = run();
  EXPECT_EQ(r.disposition, Disposition::launch_failed);
  EXPECT_NE(r.message.find("launch plan"), std::string::npos) << r.message;
  EXPECT_EQ(dev_.loads, 0);
}

TEST_F(ExecuteTest, NoRepeatMeansOneLaunch) {
  task_.repeat = false;
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_EQ(dev_.launches, 1);
}

TEST_F(ExecuteTest, TimingInterleavesTheBaselineAndStopsOnLowSpread) {
  TimingPolicy p;
  p.warmup = 2;
  p.min_samples = 5;
  p.max_samples = 50;
  p.target_rel_spread = 0.02;
  task_.timing = p;
  task_.baseline = "fakeblas";
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_EQ(r.samples_ms.size(), 5u);  // constant times: spread 0 at min_samples
  EXPECT_EQ(r.host_ms.size(), 5u);
  EXPECT_EQ(r.baseline_samples_ms, std::vector<double>(5, 0.5));
  EXPECT_EQ(r.baseline_host_ms.size(), 5u);
  EXPECT_EQ(dev_.order, "KBKBKBKBKB");
  EXPECT_EQ(dev_.launches, 2 + 2 + 5);  // checked, repeat, warm-up, samples
  EXPECT_EQ(dev_.baselines, 2 + 5);     // warm-up, samples
  EXPECT_EQ(dev_.flushes, 10);          // before every timed sample
  EXPECT_EQ(dev_.unpoisoned, 0);        // poisoned before every launch
  EXPECT_LT(r.clock_mhz_before, r.clock_mhz_after);
  ASSERT_EQ(r.timed_outputs.count("C"), 1u);
  // Fresh inputs: the last timed launch computed another product than the checked run.
  EXPECT_NE(file_bytes(r.timed_outputs["C"]), file_bytes(r.outputs["C"]));
  ASSERT_EQ(r.timed_checks.size(), 5u);
  EXPECT_EQ(file_bytes(r.timed_outputs["C"]), product_bytes(r.timed_checks.back().seed));
}

TEST_F(ExecuteTest, TheCopyIsTimedSampleForSampleAndTheFastestMethodIsReported) {
  dev_.copy_names = {"slow-copy", "fast-copy"};
  dev_.copy_ms = {{"slow-copy", 2.0}, {"fast-copy", 0.75}};
  task_.timing = TimingPolicy{2, 5, 50};  // warm-ups, min and max samples
  task_.baseline = "fakeblas";
  task_.copy_bytes = 1000;  // 500 bytes each way, rounded up to 512
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_TRUE(r.message.empty()) << r.message;
  EXPECT_EQ(dev_.copy_len, 512u);
  EXPECT_EQ(r.copy_method, "fast-copy");
  EXPECT_EQ(r.copy_samples_ms, std::vector<double>(5, 0.75));
  // What is timed for the candidate and the baseline is unchanged.
  EXPECT_EQ(r.samples_ms, std::vector<double>(5, 1.0));
  EXPECT_EQ(r.baseline_samples_ms, std::vector<double>(5, 0.5));
  EXPECT_EQ(dev_.order, "KBCCKBCCKBCCKBCCKBCC");
  EXPECT_EQ(dev_.copies, 2 + 2 * 2 + 2 * 5);  // the check of each method, warm-ups, samples
  EXPECT_EQ(dev_.flushes, 5 * 4);             // before every timed sample, copies included
  // The source is written anew before every timed copy, as the candidate's inputs are.
  std::set<uint32_t> sources(dev_.copy_sources.begin(), dev_.copy_sources.end());
  EXPECT_EQ(sources.size(), dev_.copy_sources.size());
}

TEST_F(ExecuteTest, TheCopyFollowsTheFlushAndFreshInputPolicy) {
  dev_.copy_names = {"copy"};
  task_.copy_bytes = 64;
  TimingPolicy p{1, 3, 3};
  for (bool on : {true, false}) {
    p.flush_l2 = p.fresh_inputs = on;
    task_.timing = p;
    dev_.flushes = 0;
    dev_.copy_sources.clear();
    TaskResult r = run();
    ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
    EXPECT_EQ(r.copy_method, "copy");
    EXPECT_EQ(r.copy_samples_ms.size(), 3u);
    EXPECT_EQ(dev_.flushes, on ? 3 + 3 : 0) << on;  // the candidate's and the copy's
    std::set<uint32_t> sources(dev_.copy_sources.begin(), dev_.copy_sources.end());
    EXPECT_EQ(sources.size(), on ? 3u : 1u) << on;
  }
}

TEST_F(ExecuteTest, NoCopyWithoutCopyBytesOrACopyMethod) {
  task_.timing = TimingPolicy{1, 3};
  dev_.copy_names = {"copy"};
  TaskResult r = run();  // copy_bytes = 0
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_EQ(dev_.copies, 0);
  EXPECT_TRUE(r.copy_samples_ms.empty());
  EXPECT_TRUE(r.copy_method.empty());

  dev_.copy_names.clear();
  task_.copy_bytes = 4096;
  r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_EQ(r.samples_ms.size(), 3u);
  EXPECT_TRUE(r.copy_samples_ms.empty());
  EXPECT_TRUE(r.copy_method.empty());
  EXPECT_NE(r.message.find("no same-traffic copy"), std::string::npos) << r.message;
  EXPECT_EQ(dev_.flushes, 3 + 3);  // the candidate's alone
}

TEST_F(ExecuteTest, ACopyMethodThatLosesBytesOrFailsIsLeftOut) {
  dev_.copy_names = {"lossy", "striking", "good"};
  dev_.copy_ms = {{"lossy", 0.1}, {"striking", 0.2}, {"good", 3.0}};
  dev_.copy_loses = "lossy";
  dev_.copy_fails_timed = "striking";
  task_.timing = TimingPolicy{1, 4, 4};
  task_.copy_bytes = 4096;
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_EQ(r.samples_ms.size(), 4u);
  EXPECT_EQ(r.copy_method, "good");
  EXPECT_EQ(r.copy_samples_ms, std::vector<double>(4, 3.0));
  EXPECT_NE(r.message.find("'lossy' left out: byte 0 of 2048 did not arrive"), std::string::npos)
      << r.message;
  EXPECT_NE(r.message.find("'striking' left out: copy engine on strike"), std::string::npos)
      << r.message;

  dev_.copy_names = {"lossy"};
  r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_TRUE(r.copy_samples_ms.empty());
  EXPECT_TRUE(r.copy_method.empty());
}

TEST_F(ExecuteTest, WithoutFreshInputsEveryLaunchSeesTheSameInputs) {
  TimingPolicy p;
  p.warmup = 1;
  p.min_samples = 3;
  p.fresh_inputs = false;
  task_.timing = p;
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_EQ(file_bytes(r.timed_outputs["C"]), file_bytes(r.outputs["C"]));
  EXPECT_TRUE(r.timed_checks.empty());
  std::set<uint64_t> inputs(dev_.input_hashes.begin(), dev_.input_hashes.end());
  EXPECT_EQ(inputs.size(), 1u);
}

TEST_F(ExecuteTest, EveryTimedLaunchSeesNewInputsInOtherBuffers) {
  TimingPolicy p;
  p.warmup = 2;
  p.min_samples = 6;
  p.max_samples = 6;
  task_.timing = p;
  task_.baseline = "fakeblas";
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  // Checked run and repeat share their inputs; every warm-up and timed launch has its own.
  ASSERT_EQ(dev_.input_hashes.size(), 2u + 2u + 6u);
  std::set<uint64_t> timed(dev_.input_hashes.begin() + 2, dev_.input_hashes.end());
  EXPECT_EQ(timed.size(), 8u);
  EXPECT_EQ(timed.count(dev_.input_hashes[0]), 0u);
  // Consecutive timed launches get A at different addresses.
  for (size_t i = 3; i < dev_.a_handles.size(); ++i)
    EXPECT_NE(dev_.a_handles[i], dev_.a_handles[i - 1]) << i;
  EXPECT_GT(r.input_ms, 0.0);
}

TEST_F(ExecuteTest, TheDevicesGeneratorGivesEveryLaunchTheInputsTheHostWouldUpload) {
  TimingPolicy p;
  p.warmup = 2;
  p.min_samples = 6;
  p.max_samples = 6;
  task_.timing = p;
  TaskResult host = run();
  ASSERT_EQ(host.disposition, Disposition::passed) << host.message;
  const std::vector<uint64_t> uploaded = dev_.input_hashes;
  dev_.input_hashes.clear();
  dev_.generator = true;
  TaskResult made = run();
  ASSERT_EQ(made.disposition, Disposition::passed) << made.message;
  EXPECT_EQ(dev_.input_hashes, uploaded);
  EXPECT_EQ(dev_.generated, 2 * (2 + 6));  // A and B of every warm-up and timed launch
}

TEST_F(ExecuteTest, InputsChangedWhileTimedAreCaughtWhenTheDeviceMadeThem) {
  dev_.generator = true;
  dev_.kernel = Kernel::modify_late;
  TimingPolicy p;
  p.warmup = 1;
  p.min_samples = 5;
  task_.timing = p;
  TaskResult r = run();
  EXPECT_EQ(r.disposition, Disposition::inputs_modified) << r.message;
  EXPECT_NE(r.message.find("timed runs"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("changed at element 0"), std::string::npos) << r.message;
  EXPECT_GT(dev_.generated, 0);
}

TEST_F(ExecuteTest, TimedChecksReadTheirElementsNotTheWholeOutput) {
  TimingPolicy p;
  p.warmup = 0;
  p.min_samples = 4;
  p.max_samples = 4;
  task_.timing = p;
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_EQ(dev_.element_reads, 4);
  ASSERT_EQ(r.timed_checks.size(), 4u);
}

TEST_F(ExecuteTest, EveryTimedLaunchIsReadBackAtPositionsChosenAfterIt) {
  TimingPolicy p;
  p.warmup = 0;
  p.min_samples = 4;
  p.max_samples = 4;
  p.check_elements = 5;
  task_.timing = p;
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  ASSERT_EQ(r.timed_checks.size(), 4u);
  std::set<uint64_t> seeds;
  for (const TimedCheck& c : r.timed_checks) {
    seeds.insert(c.seed);
    const auto& pos = c.positions.at("C");
    const auto& val = c.values.at("C");
    ASSERT_EQ(pos.size(), val.size());
    // First and last element, the corners of the 6 x 5 matrix, and random positions.
    for (int64_t corner : {0, 4, 25, 29})
      EXPECT_TRUE(std::find(pos.begin(), pos.end(), corner) != pos.end()) << corner;
    std::vector<uint8_t> want = product_bytes(c.seed);
    for (size_t k = 0; k < pos.size(); ++k)
      EXPECT_EQ(val[k], reinterpret_cast<const float*>(want.data())[pos[k]]) << pos[k];
  }
  EXPECT_EQ(seeds.size(), 4u);
}

TEST_F(ExecuteTest, KeptSamplesHaveTheWholeOutputAndTheBaselinesOnTheSameInputs) {
  TimingPolicy p;
  p.warmup = 0;
  p.min_samples = 3;
  p.max_samples = 3;
  p.full_checks = 2;
  task_.timing = p;
  task_.baseline = "fakeblas";
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  ASSERT_EQ(r.full_checks.size(), 2u);
  for (const FullCheck& f : r.full_checks) {
    EXPECT_EQ(file_bytes(f.candidate.at("C")), product_bytes(f.seed));
    EXPECT_EQ(file_bytes(f.baseline.at("C")), product_bytes(f.seed));
  }
  EXPECT_NE(r.full_checks[0].seed, r.full_checks[1].seed);
}

TEST_F(ExecuteTest, AKernelThatRepeatsAnEarlierResultIsReadBackAsSuch) {
  // A kernel that answers from memory: the first product it computed, for every later launch.
  dev_.kernel = Kernel::replay_first;
  TimingPolicy p;
  p.warmup = 1;
  p.min_samples = 3;
  p.max_samples = 3;
  task_.timing = p;
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;  // judged by the parent
  ASSERT_EQ(r.timed_checks.size(), 3u);
  for (const TimedCheck& c : r.timed_checks) {
    std::vector<uint8_t> want = product_bytes(c.seed);
    EXPECT_NE(c.values.at("C")[0], reinterpret_cast<const float*>(want.data())[0]);
  }
}

TEST_F(ExecuteTest, NoFlushWhenThePolicySaysSo) {
  TimingPolicy p;
  p.warmup = 0;
  p.min_samples = 3;
  p.flush_l2 = false;
  task_.timing = p;
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_EQ(r.samples_ms.size(), 3u);
  EXPECT_EQ(dev_.flushes, 0);
  EXPECT_TRUE(r.baseline_samples_ms.empty());
}

TEST_F(ExecuteTest, NoisySamplesRunToMaxSamples) {
  dev_.ms_cycle = {1, 2, 3, 4};
  TimingPolicy p;
  p.warmup = 0;
  p.min_samples = 3;
  p.max_samples = 12;
  task_.timing = p;
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_EQ(r.samples_ms.size(), 12u);
  EXPECT_EQ(r.samples_ms[3], 4);
}

TEST_F(ExecuteTest, TimeCapStillHonoursMinSamples) {
  dev_.ms_cycle = {1, 3};
  dev_.kernel = Kernel::slow;
  dev_.sleep_ms = 12;
  TimingPolicy p;
  p.warmup = 0;
  p.min_samples = 4;
  p.max_samples = 1000;
  p.max_seconds = 0.02;  // exceeded after two samples, but not tenfold before the fourth
  task_.check = false;
  task_.timing = p;
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_EQ(r.samples_ms.size(), 4u);
  EXPECT_EQ(dev_.launches, 4);  // check = false: no checked run
}

TEST_F(ExecuteTest, TimeCapTenfoldOverrunsMinSamples) {
  dev_.kernel = Kernel::slow;
  dev_.sleep_ms = 2;
  TimingPolicy p;
  p.warmup = 0;
  p.min_samples = 1000;
  p.max_samples = 1000;
  p.max_seconds = 0.004;
  task_.check = false;
  task_.timing = p;
  auto t0 = std::chrono::steady_clock::now();
  TaskResult r = run();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_GE(r.samples_ms.size(), 2u);
  EXPECT_LT(r.samples_ms.size(), 100u);
  EXPECT_LT(s, 1.0);
}

TEST_F(ExecuteTest, WritingPastAnOutputIsOutOfBounds) {
  dev_.kernel = Kernel::overrun_output;
  TaskResult r = run();
  EXPECT_EQ(r.disposition, Disposition::out_of_bounds);
  EXPECT_TRUE(r.guard_overwritten);
  EXPECT_NE(r.message.find("'C'"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("guard byte 0"), std::string::npos) << r.message;
  EXPECT_EQ(r.outputs.count("C"), 1u);  // kept for diagnosis
}

TEST_F(ExecuteTest, WritingPastAnInputIsOutOfBounds) {
  dev_.kernel = Kernel::overrun_input;
  TaskResult r = run();
  EXPECT_EQ(r.disposition, Disposition::out_of_bounds);
  EXPECT_TRUE(r.guard_overwritten);
  EXPECT_NE(r.message.find("'A'"), std::string::npos) << r.message;
}

TEST_F(ExecuteTest, ChangedInputIsReportedWithItsElement) {
  dev_.kernel = Kernel::modify_input;
  TaskResult r = run();
  EXPECT_EQ(r.disposition, Disposition::inputs_modified);
  EXPECT_FALSE(r.guard_overwritten);
  EXPECT_NE(r.message.find("'A'"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("element 3 "), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("-> 42"), std::string::npos) << r.message;
}

// The checked runs' inputs (variant 0) come from the device's generator too: the outputs are the
// product of generate_array's inputs, and a changed input is still named with its element.
TEST_F(ExecuteTest, CheckedRunsOnInputsTheDeviceMadeAreCheckedTheSameWay) {
  dev_.generator = true;
  task_.variant = 0;
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_EQ(dev_.generated, 2);  // A and B
  auto bytes = file_bytes(r.outputs["C"]);
  auto want = expected_c();
  ASSERT_EQ(bytes.size(), want.size() * 4);
  EXPECT_EQ(std::memcmp(bytes.data(), want.data(), bytes.size()), 0);

  dev_.kernel = Kernel::modify_input;
  TaskResult changed = run();
  EXPECT_EQ(changed.disposition, Disposition::inputs_modified);
  EXPECT_NE(changed.message.find("element 3 "), std::string::npos) << changed.message;
  EXPECT_NE(changed.message.find("-> 42"), std::string::npos) << changed.message;
}

TEST_F(ExecuteTest, InputsChangedOnlyWhileTimedAreCaught) {
  dev_.kernel = Kernel::modify_late;
  TimingPolicy p;
  p.warmup = 1;
  p.min_samples = 5;
  task_.timing = p;
  TaskResult r = run();
  EXPECT_EQ(r.disposition, Disposition::inputs_modified) << r.message;
  EXPECT_NE(r.message.find("timed runs"), std::string::npos) << r.message;
  EXPECT_EQ(r.outputs.count("C"), 1u);  // the checked runs were clean
}

TEST_F(ExecuteTest, DifferingRunsAreReportedNotJudged) {
  dev_.kernel = Kernel::nondeterministic;
  TaskResult r = run();
  EXPECT_EQ(r.disposition, Disposition::passed);
  EXPECT_TRUE(r.nondeterministic);
  EXPECT_NE(r.message.find("'C' (1 of 30 elements)"), std::string::npos) << r.message;
  // Both runs' bytes go to the parent, which judges the difference against the tolerance.
  ASSERT_EQ(r.repeat_outputs.count("C"), 1u);
  EXPECT_EQ(r.repeat_outputs["C"], (dir_ / "out" / "t_1.repeat.C.bin").string());
  auto first = file_bytes(r.outputs["C"]), second = file_bytes(r.repeat_outputs["C"]);
  ASSERT_EQ(first.size(), 120u);
  ASSERT_EQ(second.size(), 120u);
  float a, b;
  std::memcpy(&a, first.data(), 4);
  std::memcpy(&b, second.data(), 4);
  EXPECT_EQ(b, a + 1.0f);  // launch 2 adds 2 where launch 1 added 1
  EXPECT_EQ(std::memcmp(first.data() + 4, second.data() + 4, 116), 0);
}

TEST_F(ExecuteTest, AgreeingRunsWriteOneSetOfOutputs) {
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_FALSE(r.nondeterministic);
  EXPECT_TRUE(r.repeat_outputs.empty());
  EXPECT_FALSE(fs::exists(dir_ / "out" / "t_1.repeat.C.bin"));
}

TEST_F(ExecuteTest, UnwrittenOutputsKeepThePoison) {
  dev_.kernel = Kernel::partial;
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;  // the parent judges
  EXPECT_FALSE(r.nondeterministic);
  auto bytes = file_bytes(r.outputs["C"]);
  ASSERT_EQ(bytes.size(), 120u);
  EXPECT_FALSE(is_poison(DType::f32, &bytes[0]));
  EXPECT_FALSE(is_poison(DType::f32, &bytes[14 * 4]));
  for (int e = 15; e < 30; ++e) EXPECT_TRUE(is_poison(DType::f32, &bytes[e * 4])) << e;
}

TEST_F(ExecuteTest, LoadFailureCarriesItsDisposition) {
  dev_.load_error_text = "invalid_config: needs 96 KiB of shared memory";
  TaskResult r = run();
  EXPECT_EQ(r.disposition, Disposition::invalid_config);
  EXPECT_EQ(r.message, "needs 96 KiB of shared memory");
  EXPECT_EQ(dev_.launches, 0);
  dev_.load_error_text = "cannot open module";
  r = run();
  EXPECT_EQ(r.disposition, Disposition::launch_failed);
  EXPECT_EQ(r.message, "cannot open module");
}

TEST_F(ExecuteTest, LaunchFailureEndsTheTask) {
  dev_.kernel = Kernel::fail_launch;
  TaskResult r = run();
  EXPECT_EQ(r.disposition, Disposition::launch_failed);
  EXPECT_NE(r.message.find("bad grid"), std::string::npos) << r.message;
  EXPECT_EQ(dev_.launches, 1);
  EXPECT_TRUE(r.outputs.empty());
}

TEST_F(ExecuteTest, LostDeviceDuringTimingIsACrash) {
  dev_.kernel = Kernel::fail_timed;
  TimingPolicy p;
  p.warmup = 1;
  task_.timing = p;
  TaskResult r = run();
  EXPECT_EQ(r.disposition, Disposition::crashed);
  EXPECT_NE(r.message.find("illegal address"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("timed sample 1"), std::string::npos) << r.message;
}

TEST_F(ExecuteTest, LostDeviceTurnsAPassIntoACrash) {
  dev_.lost_flag = true;
  TaskResult r = run();
  EXPECT_EQ(r.disposition, Disposition::crashed);
  EXPECT_NE(r.message.find("lost"), std::string::npos) << r.message;
}

TEST_F(ExecuteTest, ReferenceModeRunsTheBaselineWithoutLoading) {
  task_.artifact = "";
  task_.baseline = "fakeblas";
  task_.baseline_outputs = true;
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_EQ(dev_.loads, 0);
  EXPECT_EQ(dev_.launches, 0);
  EXPECT_EQ(dev_.baselines, 2);
  auto bytes = file_bytes(r.outputs["C"]);
  auto want = expected_c();
  ASSERT_EQ(bytes.size(), 120u);
  EXPECT_EQ(std::memcmp(bytes.data(), want.data(), 120), 0);
}

TEST_F(ExecuteTest, ReferenceModeWithAnUnknownBaseline) {
  task_.baseline = "nope";
  task_.baseline_outputs = true;
  TaskResult r = run();
  EXPECT_EQ(r.disposition, Disposition::not_run);
  EXPECT_NE(r.message.find("'nope' is not available"), std::string::npos) << r.message;
}

TEST_F(ExecuteTest, UnavailableBaselineLeavesTheCandidateTimed) {
  TimingPolicy p;
  p.warmup = 1;
  p.min_samples = 3;
  task_.timing = p;
  task_.baseline = "nope";
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_EQ(r.samples_ms.size(), 3u);
  EXPECT_TRUE(r.baseline_samples_ms.empty());
  EXPECT_NE(r.message.find("baseline 'nope' is not available"), std::string::npos) << r.message;
}

TEST_F(ExecuteTest, UnexpectedExceptionIsACrash) {
  dev_.load_throws = true;
  TaskResult r = run();
  EXPECT_EQ(r.disposition, Disposition::crashed);
  EXPECT_NE(r.message.find("loader exploded"), std::string::npos) << r.message;
  EXPECT_EQ(r.id, "t/1");
}

TEST_F(ExecuteTest, HalfArraysOfOddLengthKeepTheirGuard) {
  dev_.kernel = Kernel::copy;
  job_.arrays = {ArraySpec{"X", DType::f16, "7", Initializer{}, false},
                 ArraySpec{"Y", DType::f16, "7", Initializer{}, true}};
  task_.shape.values = {};
  task_.sizes = {{"X", 7}, {"Y", 7}};
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  auto y = file_bytes(r.outputs["Y"]);
  auto x = generate_array(job_.arrays[0], 7, array_seed(task_.seed, "X"), task_.variant);
  EXPECT_EQ(y, x);
}

TEST_F(ExecuteTest, NoOutputDirMeansNoFiles) {
  task_.output_dir = "";
  TaskResult r = run();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  EXPECT_TRUE(r.outputs.empty());
}

}  // namespace
}  // namespace peak
