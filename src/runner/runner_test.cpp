// Protocol JSON round trips and validation, and the runner's small helpers.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "runner/execute.h"
#include "runner/nvml.h"
#include "runner/protocol.h"

namespace peak {
namespace {

RunnerJob sample_job() {
  RunnerJob job;
  job.mode = "run";
  job.device = "1";
  job.microbench = true;
  job.family = "matmul";
  ArraySpec a{"A", DType::f32, "M * K", Initializer{Initializer::Kind::normal, 0.5, 2.0}, false};
  ArraySpec b{"B", DType::f16, "K * N", Initializer{Initializer::Kind::iota, -1, 1}, false};
  ArraySpec c{"C", DType::f32, "M * N", Initializer{}, true};
  job.arrays = {a, b, c};
  ScalarSpec m;
  m.name = "M";
  m.values = {16, 32};
  ScalarSpec k;
  k.name = "K";
  k.range_lo = 1;
  k.range_hi = 4096;
  k.range_step = 3;
  job.scalars = {m, k};
  RunnerTask t;
  t.id = "c7/s0/M=16";
  t.artifact = "/tmp/x.spv";
  t.plan = json{{"groups", {4, 2, 1}}};
  t.shape.values = {{"M", 16}, {"N", 8}, {"K", 4}};
  t.sizes = {{"A", 64}, {"B", 32}, {"C", 128}};
  t.seed = 0xFEDCBA9876543210ull;  // above INT64_MAX: must survive as unsigned
  t.variant = 2;
  t.check = false;
  t.repeat = false;
  TimingPolicy p;
  p.warmup = 1;
  p.min_samples = 7;
  p.max_samples = 70;
  p.max_seconds = 0.25;
  p.target_rel_spread = 0.125;
  p.flush_l2 = false;
  t.timing = p;
  t.baseline = "cublas";
  t.output_dir = "/tmp/out";
  RunnerTask t2;
  t2.id = "second";
  t2.sizes = {{"A", 1}, {"B", 1}, {"C", 1}};
  t2.baseline = "cublas";
  t2.baseline_outputs = true;
  job.tasks = {t, t2};
  return job;
}

TEST(Protocol, JobRoundTrip) {
  RunnerJob job = sample_job();
  json j = job.to_json();
  auto back = RunnerJob::from_json(json::parse(j.dump()));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->to_json(), j);
  const RunnerTask& t = back->tasks[0];
  EXPECT_EQ(t.seed, 0xFEDCBA9876543210ull);
  EXPECT_EQ(t.variant, 2);
  EXPECT_FALSE(t.check);
  ASSERT_TRUE(t.timing);
  EXPECT_EQ(t.timing->min_samples, 7);
  EXPECT_DOUBLE_EQ(t.timing->target_rel_spread, 0.125);
  EXPECT_FALSE(t.timing->flush_l2);
  EXPECT_EQ(t.plan["groups"][0], 4);
  EXPECT_EQ(t.shape.values.at("N"), 8);
  EXPECT_FALSE(back->tasks[1].timing);
  EXPECT_TRUE(back->tasks[1].baseline_outputs);
  EXPECT_EQ(back->arrays[1].dtype, DType::f16);
  EXPECT_EQ(back->arrays[0].init.kind, Initializer::Kind::normal);
  EXPECT_DOUBLE_EQ(back->arrays[0].init.a, 0.5);
  EXPECT_DOUBLE_EQ(back->arrays[0].init.b, 2.0);
  EXPECT_TRUE(back->arrays[2].output);
  EXPECT_EQ(back->scalars[0].values, (std::vector<int64_t>{16, 32}));
  EXPECT_TRUE(back->scalars[1].has_range());
  EXPECT_EQ(back->scalars[1].range_step, 3);
  EXPECT_TRUE(back->microbench);
  EXPECT_EQ(back->family, "matmul");
}

TEST(Protocol, ContextTypesRoundTrip) {
  Shape s;
  s.values = {{"M", 1}, {"K", -5}};
  EXPECT_EQ(shape_from_json(shape_to_json(s)).values, s.values);
  Initializer init{Initializer::Kind::uniform, -0.125, 3.5};
  Initializer i2 = initializer_from_json(initializer_to_json(init));
  EXPECT_EQ(i2.kind, init.kind);
  EXPECT_EQ(i2.a, init.a);
  EXPECT_EQ(i2.b, init.b);
  ScalarSpec sc;
  sc.name = "N";
  sc.dtype = DType::i32;
  sc.values = {1, 2, 3};
  ScalarSpec sc2 = scalar_spec_from_json(scalar_spec_to_json(sc));
  EXPECT_EQ(sc2.name, "N");
  EXPECT_EQ(sc2.values, sc.values);
  EXPECT_FALSE(sc2.has_range());
  ArraySpec a{"X", DType::i32, "N + 1", Initializer{Initializer::Kind::ones, 0, 0}, true};
  ArraySpec a2 = array_spec_from_json(array_spec_to_json(a));
  EXPECT_EQ(a2.name, "X");
  EXPECT_EQ(a2.dtype, DType::i32);
  EXPECT_EQ(a2.size, "N + 1");
  EXPECT_EQ(a2.init.kind, Initializer::Kind::ones);
  EXPECT_TRUE(a2.output);
}

TEST(Protocol, FactsAndResultRoundTrip) {
  DeviceFacts f;
  f.backend = "cuda";
  f.name = "NVIDIA H100 80GB HBM3";
  f.vendor = "NVIDIA";
  f.driver = "580.1";
  f.api_version = "13.0";
  f.arch = "sm_90a";
  f.is_cpu = false;
  f.compute_units = 132;
  f.subgroup_size = 32;
  f.shared_memory_per_group = 48 << 10;
  f.shared_memory_per_group_optin = 227 << 10;
  f.max_threads_per_group = 1024;
  f.l2_bytes = 50ll << 20;
  f.memory_bytes = 80ll << 30;
  f.clock_mhz = 1980;
  f.measured_fp32_tflops = 60.5;
  f.extra = {{"ecc", "on"}};
  json fj = f.to_json();
  EXPECT_EQ(DeviceFacts::from_json(json::parse(fj.dump())).to_json(), fj);
  auto strict = parse_device_facts(fj);
  ASSERT_TRUE(strict) << strict.error();
  EXPECT_EQ(strict->memory_bytes, 80ll << 30);

  TaskResult r;
  r.id = "t1";
  r.disposition = Disposition::out_of_bounds;
  r.message = "wrote past C";
  r.nondeterministic = true;
  r.outputs = {{"C", "/tmp/t1.C.bin"}};
  r.timed_outputs = {{"C", "/tmp/t1.timed.C.bin"}};
  r.samples_ms = {1.5, 1.25};
  r.host_ms = {1.75, 1.5};
  r.baseline_samples_ms = {1.0};
  r.baseline_host_ms = {1.125};
  r.clock_mhz_before = 1980;
  r.clock_mhz_after = 1755;
  r.threads_before = 3;
  r.threads_after = 4;
  r.guard_overwritten = true;
  r.seconds = 0.5;
  r.input_ms = 12.5;
  r.load_ms = 3.25;
  r.kernel_statistics = {{"main", {{"Register Count", 72}, {"Binary Size", 9344}}}};
  json rj = r.to_json();
  EXPECT_EQ(rj["disposition"], "out_of_bounds");
  EXPECT_EQ(TaskResult::from_json(json::parse(rj.dump())).to_json(), rj);
  rj["event"] = "result";  // as on the wire: extra keys are ignored
  auto strict_r = parse_task_result(rj);
  ASSERT_TRUE(strict_r) << strict_r.error();
  EXPECT_EQ(strict_r->threads_after, 4);
  EXPECT_EQ(strict_r->load_ms, 3.25);
  EXPECT_EQ(strict_r->baseline_host_ms, std::vector<double>{1.125});
  EXPECT_EQ(strict_r->kernel_statistics["main"]["Register Count"], 72);
}

// The driver's statistics come from the runner process: only numbers and booleans by entry
// point, a bounded number of them; anything else is an error naming it (and left out).
TEST(Protocol, KernelStatisticsAreNumbersByEntryPoint) {
  TaskResult r;
  r.id = "t";
  json rj = r.to_json();
  rj["kernel_statistics"] = {{"main", {{"Register Count", 40}, {"Spills", false}}}};
  auto ok = parse_task_result(rj);
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_EQ(ok->kernel_statistics["main"]["Spills"], false);

  rj["kernel_statistics"] = {{"main", {{"Register Count", "many"}}}};
  auto text = parse_task_result(rj);
  ASSERT_FALSE(text);
  EXPECT_NE(text.error().find("result.kernel_statistics.main.Register Count"), std::string::npos)
      << text.error();
  EXPECT_TRUE(TaskResult::from_json(rj).kernel_statistics["main"].empty());

  rj["kernel_statistics"] = json::array({1, 2});
  EXPECT_FALSE(parse_task_result(rj));

  json many = json::object();
  for (size_t i = 0; i <= kMaxKernelStatistics; ++i) many["s" + std::to_string(i)] = i;
  rj["kernel_statistics"] = {{"main", many}};
  auto capped = parse_task_result(rj);
  ASSERT_FALSE(capped);
  EXPECT_NE(capped.error().find("at most"), std::string::npos) << capped.error();
  EXPECT_EQ(TaskResult::from_json(rj).kernel_statistics["main"].size(), kMaxKernelStatistics);
}

TEST(Protocol, TimingPolicyDefaultsWhenFieldsMissing) {
  TimingPolicy p = TimingPolicy::from_json(json{{"min_samples", 3}});
  EXPECT_EQ(p.min_samples, 3);
  EXPECT_EQ(p.max_samples, TimingPolicy{}.max_samples);
  EXPECT_EQ(p.flush_l2, TimingPolicy{}.flush_l2);
}

TEST(Protocol, RefusesNewerFormat) {
  json j = sample_job().to_json();
  j["format"] = kRunnerProtocolVersion + 1;
  auto r = RunnerJob::from_json(j);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("newer"), std::string::npos) << r.error();
  j.erase("format");
  r = RunnerJob::from_json(j);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("format"), std::string::npos) << r.error();
  r = RunnerJob::from_json(json::array());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("object"), std::string::npos) << r.error();
}

TEST(Protocol, ValidationNamesTheField) {
  json j = sample_job().to_json();
  j["tasks"][0]["seed"] = "abc";
  auto r = RunnerJob::from_json(j);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("tasks[0].seed: expected an integer, got string"), std::string::npos)
      << r.error();

  j = sample_job().to_json();
  j["tasks"][1]["sizes"].erase("B");
  r = RunnerJob::from_json(j);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("tasks[1].sizes: no element count for array \"B\""), std::string::npos)
      << r.error();

  j = sample_job().to_json();
  j["tasks"][1]["id"] = j["tasks"][0]["id"];
  r = RunnerJob::from_json(j);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("used twice"), std::string::npos) << r.error();

  j = sample_job().to_json();
  j["arrays"][0]["dtype"] = "f64";
  r = RunnerJob::from_json(j);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("arrays[0].dtype: unknown dtype \"f64\""), std::string::npos)
      << r.error();

  j = sample_job().to_json();
  j["mode"] = "bench";
  j["tasks"][0]["timing"]["max_samples"] = 2;
  r = RunnerJob::from_json(j);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("mode"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("tasks[0].timing.max_samples"), std::string::npos) << r.error();

  j = sample_job().to_json();
  j["tasks"][1]["baseline"] = "";
  r = RunnerJob::from_json(j);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("baseline_outputs"), std::string::npos) << r.error();
}

TEST(Protocol, StrictResultRefusesUnknownDisposition) {
  auto r = parse_task_result(json{{"id", "x"}, {"disposition", "exploded"}});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("unknown disposition \"exploded\""), std::string::npos) << r.error();
  r = parse_task_result(json{{"id", "x"}, {"samples_ms", {1, "two"}}});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("samples_ms"), std::string::npos) << r.error();
  // The lenient form keeps the default.
  EXPECT_EQ(TaskResult::from_json(json{{"disposition", "exploded"}}).disposition,
            Disposition::not_run);
}

TEST(RunnerHelpers, RelativeIqr) {
  EXPECT_DOUBLE_EQ(relative_iqr({5, 1, 4, 2, 3}), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(relative_iqr({2, 2, 2}), 0.0);
  EXPECT_DOUBLE_EQ(relative_iqr({7}), 0.0);
  EXPECT_TRUE(std::isinf(relative_iqr({})));
  EXPECT_TRUE(std::isinf(relative_iqr({0, 0, 0})));
  // Interpolated quartiles of {1,2,3,4}: p25 = 1.75, p50 = 2.5, p75 = 3.25.
  EXPECT_DOUBLE_EQ(relative_iqr({4, 3, 2, 1}), 1.5 / 2.5);
}

TEST(RunnerHelpers, LoadFailureConvention) {
  auto [d, m] = load_failure(load_error(Disposition::invalid_config, "needs 80 KiB").message);
  EXPECT_EQ(d, Disposition::invalid_config);
  EXPECT_EQ(m, "needs 80 KiB");
  auto [d2, m2] = load_failure("dlopen: libfoo.so: cannot open");
  EXPECT_EQ(d2, Disposition::launch_failed);
  EXPECT_EQ(m2, "dlopen: libfoo.so: cannot open");
  EXPECT_EQ(load_failure("forbidden_api:cublasSgemm").first, Disposition::forbidden_api);
}

TEST(RunnerHelpers, OutputPathIsSanitized) {
  EXPECT_EQ(output_path("/o", "c3/s1 M=16", "timed.", "C"), "/o/c3_s1_M_16.timed.C.bin");
  EXPECT_EQ(output_path("/o", "..", "", "C"), "/o/_...C.bin");
}

TEST(RunnerHelpers, CountThreadsSeesANewThread) {
  int before = count_threads();
  ASSERT_GT(before, 0);
  std::mutex mu;
  std::condition_variable cv;
  bool go = false;
  std::thread t([&] {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return go; });
  });
  EXPECT_EQ(count_threads(), before + 1);
  {
    std::lock_guard lock(mu);
    go = true;
  }
  cv.notify_one();
  t.join();
}

TEST(Nvml, AbsentOrSane) {
  if (!nvml_available()) {
    EXPECT_EQ(nvml_sm_clock_mhz(0), 0);
    EXPECT_EQ(nvml_throttle_reasons(0), 0u);
    EXPECT_EQ(nvml_sm_clock_mhz_pci("0000:00:00.0"), 0);
    return;
  }
  double mhz = nvml_sm_clock_mhz(0);
  EXPECT_GT(mhz, 0);
  EXPECT_LT(mhz, 10000);
  EXPECT_EQ(nvml_sm_clock_mhz(-1), 0);
}

}  // namespace
}  // namespace peak
