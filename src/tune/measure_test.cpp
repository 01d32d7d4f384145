#include "tune/measure.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tune/testing.h"
#include "util/temp_dir_testing.h"

namespace peak {
namespace {

TEST(Stats, MedianQuartilesSpread) {
  auto s = compute_stats({5, 1, 3, 2, 4});
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.p25, 2);
  EXPECT_DOUBLE_EQ(s.p75, 4);
  EXPECT_DOUBLE_EQ(s.rel_spread, 2.0 / 3.0);
  EXPECT_EQ(s.n, 5u);
  EXPECT_EQ(compute_stats({}).n, 0u);
}

// The documented memory bandwidth of an H100 SXM (backend/backend.cpp's table).
double h100_gbs() {
  auto p = documented_peaks("NVIDIA H100 80GB HBM3");
  EXPECT_TRUE(p);
  return p ? p->memory_gbs : 0;
}

// A passed measurement whose median time is `ms`.
Measurement timed(double ms) {
  Measurement m;
  m.disposition = Disposition::passed;
  m.stats = compute_stats({ms, ms, ms});
  return m;
}

TEST(MemoryRates, GbsOfTheContextsBytesAndSharesOfBandwidthAndCopy) {
  Measurement m = timed(0.002);  // 2 us for 4 MB: 2000 GB/s
  read_memory_rates(4e6, {0.0016, 0.0016, 0.0018}, "memcpy", 4000, m);
  EXPECT_DOUBLE_EQ(m.bytes, 4e6);
  EXPECT_NEAR(m.gbs, 2000, 1e-9);
  EXPECT_NEAR(m.pct_of_bandwidth, 50, 1e-9);
  EXPECT_EQ(m.copy_method, "memcpy");
  EXPECT_NEAR(m.copy_stats.median, 0.0016, 1e-15);
  EXPECT_NEAR(m.copy_gbs, 2500, 1e-9);
  EXPECT_NEAR(m.pct_of_copy, 80, 1e-9);  // 100 * copy median / candidate median
}

TEST(MemoryRates, NoCopySamplesMeansNoCopyNumbers) {
  Measurement m = timed(0.002);
  read_memory_rates(4e6, {}, "", 0, m);
  EXPECT_NEAR(m.gbs, 2000, 1e-9);
  EXPECT_EQ(m.pct_of_bandwidth, 0);  // no documented bandwidth
  EXPECT_TRUE(m.copy_samples_ms.empty());
  EXPECT_EQ(m.copy_gbs, 0);
  EXPECT_EQ(m.pct_of_copy, 0);
  Measurement none = timed(0.002);
  read_memory_rates(0, {0.001}, "memcpy", 4000, none);  // a context without bytes
  EXPECT_EQ(none.gbs, 0);
  EXPECT_EQ(none.pct_of_copy, 0);
}

TEST(BytesGate, ARateAboveTheDocumentedBandwidthIsFasterThanPeak) {
  MeasureOptions o;
  o.memory_gbs = 3350;
  Measurement within = timed(1.0);
  within.gbs = 3350 * 1.019;  // inside the 2 % margin of a rounded datasheet number
  reject_impossible(within.stats, o, within);
  EXPECT_EQ(within.disposition, Disposition::passed) << within.message;

  Measurement over = timed(1.0);
  over.gbs = 4000;
  reject_impossible(over.stats, o, over);
  EXPECT_EQ(over.disposition, Disposition::faster_than_peak);
  EXPECT_EQ(over.message,
            "4000 GB/s exceeds the device's documented memory bandwidth of 3350 GB/s: rejected");

  Measurement unknown = timed(1.0);  // no documented bandwidth: no gate
  unknown.gbs = 1e6;
  reject_impossible(unknown.stats, MeasureOptions{}, unknown);
  EXPECT_EQ(unknown.disposition, Disposition::passed);
}

TEST(BytesGate, TheFlopsGateStillAppliesAndSpeaksFirst) {
  MeasureOptions o;
  o.peak_tflops = 1;
  o.memory_gbs = 100;
  Measurement m = timed(1.0);
  m.gflops = 2000;
  m.gbs = 200;
  reject_impossible(m.stats, o, m);
  EXPECT_EQ(m.disposition, Disposition::faster_than_peak);
  EXPECT_EQ(m.message, "2000 GFLOP/s exceeds the device's peak of 1000 GFLOP/s: rejected");
}

// The memory-bound context timed by peak-hostile-runner (runner/hostile_device_main.cpp), whose
// "kernel" does nothing and reports the time PEAK_HOSTILE_TARGET names, on an H100 SXM's
// documented bandwidth.
class HostileTiming : public testing::TempDirTest {
 protected:
  HostileTiming() : TempDirTest("peak-measure-") {}
  std::vector<Measurement> time(const std::string& ms) {
    // A copy of N floats whose kernel.toml gives `bytes` (8 * N) and no flops.
    ctx_.name = "copy";
    ctx_.bytes = "8 * N";
    ctx_.arrays = {ArraySpec{"X", DType::f32, "N", Initializer{}, false},
                   ArraySpec{"Y", DType::f32, "N", Initializer{}, true}};
    ctx_.scalars.emplace_back();
    ctx_.scalars.back().name = "N";
    ctx_.bench_shapes = {Shape{{{"N", 262144}}}};
    dev_.name = "NVIDIA H100 80GB HBM3";
    runner_.executable = fs::path(PEAK_BINARY_DIR) / "peak-hostile-runner";
    runner_.env = {{"PEAK_HOSTILE_ATTACK", "fast"}, {"PEAK_HOSTILE_TARGET", ms}};
    source_.host = "launch attack\n  grid = (1)\n  block = (1)\n";
    build_.disposition = Disposition::passed;
    build_.artifact = temp_dir() / "attack.bin";
    std::ofstream(build_.artifact) << "the hostile device loads nothing";
    MeasureOptions o;
    o.policy.warmup = 1;
    o.policy.min_samples = o.policy.max_samples = 3;
    o.policy.flush_l2 = false;
    o.policy.fresh_inputs = false;
    o.memory_gbs = h100_gbs();
    o.with_baseline = false;
    Validator v(be_, dev_, runner_, ReferenceSource{});
    return measure(be_, dev_, runner_, v, ctx_, source_, build_, {}, ctx_.bench_shapes, o);
  }

  KernelContext ctx_;
  DeviceFacts dev_;
  RunnerOptions runner_;
  SourceRegions source_;
  BuildResult build_;
  testing::StubBackend be_;
};

// 2 MiB of traffic (N = 262144 floats read and written) in 0.1 us would be 20972 GB/s.
TEST_F(HostileTiming, AKernelTooFastForItsBytesIsRejectedWithBothRates) {
  auto ms = time("0.0001");
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].disposition, Disposition::faster_than_peak) << ms[0].message;
  EXPECT_EQ(ms[0].message,
            "20972 GB/s exceeds the device's documented memory bandwidth of 3350 GB/s: rejected");
  EXPECT_TRUE(ms[0].bytes_headline);
}

// The same traffic in 10 us: 210 GB/s, 6.3 % of the documented bandwidth.
TEST_F(HostileTiming, APlausibleTimePassesWithItsMemoryRates) {
  auto ms = time("0.01");
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].disposition, Disposition::passed) << ms[0].message;
  EXPECT_DOUBLE_EQ(ms[0].bytes, 8.0 * 262144);
  EXPECT_NEAR(ms[0].gbs, 209.7152, 1e-6);
  EXPECT_NEAR(ms[0].pct_of_bandwidth, 100 * 209.7152 / 3350, 1e-6);
  EXPECT_EQ(ms[0].gflops, 0);  // the context gives no flops
}

}  // namespace
}  // namespace peak
