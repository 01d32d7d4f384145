// GPU tests of the cuDNN baseline of the row families (label gpu: they need an NVIDIA GPU and
// cuDNN 9). peak-runner-cuda runs the baseline in reference mode (RunnerTask::baseline_outputs,
// as the validator's vendor reference does): its checked outputs are compared with a float64
// CPU computation of the same inputs, and its timed samples are the baseline's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>

#include "backend/cuda/gpu_testing.h"
#include "context/inputs.h"
#include "runner/client.h"
#include "tune/measure.h"
#include "util/fs.h"

namespace peak {
namespace {

using testing::cuda_gpu;

// What the runner's facts say of cuDNN: its version, or "none: <why>".
std::string cudnn_fact() {
  auto it = cuda_gpu().facts.extra.find("cudnn");
  return it == cuda_gpu().facts.extra.end() ? "" : it->second;
}

// One row problem: family, dtype of every array, the per-column arrays (W, B) besides X and Y.
struct Rows {
  std::string family;
  DType dtype = DType::f32;
  std::vector<std::string> columns;
  int64_t R = 4096, N = 4096;
};

RunnerJob cudnn_job(const Rows& p, const fs::path& out) {
  RunnerJob job;
  job.family = p.family;
  job.scalars = {ScalarSpec{"R", DType::i32, {}, 0, 0, 1},
                 ScalarSpec{"N", DType::i32, {}, 0, 0, 1}};
  RunnerTask t;
  t.id = "cudnn-" + p.family;
  t.shape = Shape{{{"R", p.R}, {"N", p.N}}};
  job.arrays.push_back(ArraySpec{"X", p.dtype, "R * N", {}, false});
  t.sizes["X"] = p.R * p.N;
  for (const std::string& c : p.columns) {
    job.arrays.push_back(ArraySpec{c, p.dtype, "N", {}, false});
    t.sizes[c] = p.N;
  }
  job.arrays.push_back(ArraySpec{"Y", p.dtype, "R * N", {}, true});
  t.sizes["Y"] = p.R * p.N;
  t.seed = 5;
  t.repeat = false;
  t.baseline = "cudnn";
  t.baseline_outputs = true;
  t.output_dir = out.string();
  t.timing = TimingPolicy{.warmup = 2, .min_samples = 10, .max_samples = 20, .max_seconds = 3};
  job.tasks.push_back(t);
  return job;
}

// The inputs of the job's task as float64, by array name.
std::map<std::string, std::vector<double>> inputs_of(const RunnerJob& job) {
  std::map<std::string, std::vector<double>> in;
  const RunnerTask& t = job.tasks.front();
  for (const ArraySpec& a : job.arrays) {
    if (a.output) continue;
    int64_t n = t.sizes.at(a.name);
    std::vector<uint8_t> bytes = generate_array(a, n, array_seed(t.seed, a.name), t.variant);
    for (int64_t i = 0; i < n; ++i)
      in[a.name].push_back(element_as_double(a.dtype, bytes.data(), i));
  }
  return in;
}

// Row r of the reference output into `y` (cols elements), in float64.
using RowReference = std::function<void(const std::map<std::string, std::vector<double>>& in,
                                        int64_t r, int64_t cols, std::vector<double>& y)>;

void softmax_row(const std::map<std::string, std::vector<double>>& in, int64_t r, int64_t n,
                 std::vector<double>& y) {
  const double* x = in.at("X").data() + r * n;
  double max = x[0], sum = 0;
  for (int64_t c = 0; c < n; ++c) max = std::max(max, x[c]);
  for (int64_t c = 0; c < n; ++c) sum += y[c] = std::exp(x[c] - max);
  for (int64_t c = 0; c < n; ++c) y[c] /= sum;
}

void rmsnorm_row(const std::map<std::string, std::vector<double>>& in, int64_t r, int64_t n,
                 std::vector<double>& y) {
  const double* x = in.at("X").data() + r * n;
  double ss = 0;
  for (int64_t c = 0; c < n; ++c) ss += x[c] * x[c];
  const double scale = 1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-6);
  for (int64_t c = 0; c < n; ++c) y[c] = x[c] * scale * in.at("W")[c];
}

void layernorm_row(const std::map<std::string, std::vector<double>>& in, int64_t r, int64_t n,
                   std::vector<double>& y) {
  const double* x = in.at("X").data() + r * n;
  double mean = 0, var = 0;
  for (int64_t c = 0; c < n; ++c) mean += x[c];
  mean /= static_cast<double>(n);
  for (int64_t c = 0; c < n; ++c) var += (x[c] - mean) * (x[c] - mean);
  const double scale = 1.0 / std::sqrt(var / static_cast<double>(n) + 1e-5);
  for (int64_t c = 0; c < n; ++c) y[c] = (x[c] - mean) * scale * in.at("W")[c] + in.at("B")[c];
}

// Runs the baseline of `p` and compares every output element with `reference` within `rtol` of
// max(|ref|, `floor` x the row's rms); skips (with cuDNN's words) where cuDNN refuses the problem
// and `may_refuse`. Prints the baseline's rate.
void check_cudnn(const Rows& p, const RowReference& reference, double rtol, double floor,
                 bool may_refuse) {
  const std::string cudnn = cudnn_fact();
  if (cudnn.rfind("none", 0) == 0) GTEST_SKIP() << "cuDNN is " << cudnn;
  auto dir = make_temp_dir("peak-cudnn-gpu-test-");
  ASSERT_TRUE(dir) << dir.error();
  RunnerJob job = cudnn_job(p, *dir);
  RunnerOptions o;
  o.executable = cuda_gpu().backend->runner();
  o.start_timeout_s = 30;
  auto res = run_job(job, o);
  ASSERT_TRUE(res) << res.error();
  const TaskResult& r = res->front();
  if (may_refuse && r.disposition == Disposition::not_run)
    GTEST_SKIP() << "cuDNN " << cudnn << " refuses " << p.family << ": " << r.message;
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  ASSERT_FALSE(r.samples_ms.empty());
  for (double ms : r.samples_ms) EXPECT_GT(ms, 0);
  auto bytes = read_file(r.outputs.at("Y"));
  ASSERT_TRUE(bytes) << bytes.error();
  const auto* out = reinterpret_cast<const uint8_t*>(bytes->data());
  auto in = inputs_of(job);
  std::vector<double> ref(static_cast<size_t>(p.N));
  int64_t bad = 0;
  for (int64_t row = 0; row < p.R; ++row) {
    reference(in, row, p.N, ref);
    double ss = 0;
    for (double v : ref) ss += v * v;
    const double rms = std::sqrt(ss / static_cast<double>(p.N));
    for (int64_t c = 0; c < p.N; ++c) {
      double y = element_as_double(p.dtype, out, row * p.N + c);
      if (std::abs(y - ref[c]) > rtol * std::max(std::abs(ref[c]), floor * rms) && bad++ < 5)
        ADD_FAILURE() << p.family << " Y[" << row << "][" << c << "] = " << y << ", expected "
                      << ref[c];
    }
  }
  EXPECT_EQ(bad, 0);
  double traffic = static_cast<double>((2 * p.R + static_cast<int64_t>(p.columns.size())) * p.N *
                                       static_cast<int64_t>(dtype_size(p.dtype)));
  SampleStats st = compute_stats(r.samples_ms);
  std::cout << "[ measured ] cudnn " << cudnn << " " << p.family << " R=" << p.R << " N=" << p.N
            << ": " << traffic / (st.median * 1e-3) / 1e9 << " GB/s (median " << st.median
            << " ms)\n";
  std::error_code ec;
  fs::remove_all(*dir, ec);
}

class CudnnGpuTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cuda_gpu().error.empty()) << cuda_gpu().error; }
};

TEST_F(CudnnGpuTest, TheFactsSayWhichCudnn) {
  const std::string cudnn = cudnn_fact();
  EXPECT_TRUE(cudnn.rfind("9.", 0) == 0 || cudnn.rfind("none: ", 0) == 0) << "'" << cudnn << "'";
  // The toolchain recorded with every evaluation says it too.
  auto tc = cuda_gpu().backend->toolchain();
  EXPECT_NE(std::find(tc.begin(), tc.end(), std::make_pair(std::string("cudnn"), cudnn)), tc.end());
}

TEST_F(CudnnGpuTest, SoftmaxMatchesTheCpuAndIsTimed) {
  check_cudnn(Rows{"softmax", DType::f32, {}, 4096, 4096}, softmax_row, 1e-5, 0, false);
}

TEST_F(CudnnGpuTest, RmsnormMatchesTheCpuAndIsTimed) {
  // bf16 output: half an ulp is 2^-9 of the value; the floor keeps values near zero fair.
  check_cudnn(Rows{"rmsnorm", DType::bf16, {"W"}, 4096, 4096}, rmsnorm_row, 1.0 / 128, 1e-2, true);
}

TEST_F(CudnnGpuTest, LayernormMatchesTheCpuAndIsTimed) {
  check_cudnn(Rows{"layernorm", DType::f32, {"W", "B"}, 4096, 4096}, layernorm_row, 1e-4, 1e-2,
              true);
}

}  // namespace
}  // namespace peak
