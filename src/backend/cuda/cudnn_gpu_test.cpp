// GPU tests of the cuDNN baselines of the row families and attention (label gpu: they need an
// NVIDIA GPU and cuDNN 9). peak-runner-cuda runs the baseline in reference mode
// (RunnerTask::baseline_outputs, as the validator's vendor reference does): its checked outputs are
// compared with a float64 CPU computation of the same inputs, and its timed samples are the
// baseline's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <tuple>

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

// `t` as a task of the baseline in reference mode: its outputs written under `out`, timed.
RunnerTask reference_task(RunnerTask t, uint64_t seed, const fs::path& out) {
  t.seed = seed;
  t.repeat = false;
  t.baseline = "cudnn";
  t.baseline_outputs = true;
  t.output_dir = out.string();
  t.timing = TimingPolicy{.warmup = 2, .min_samples = 10, .max_samples = 20, .max_seconds = 3};
  return t;
}

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
  job.tasks.push_back(reference_task(t, 5, out));
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

// What a baseline run is checked and reported as: the output `output` as `rows` rows of `cols`,
// and the work per run (`work` in `unit`s, e.g. bytes as "GB/s") that its rate is printed in.
struct Checked {
  std::string what;  // "softmax R=4096 N=4096"
  DType dtype = DType::f32;
  std::string output;
  int64_t rows = 0, cols = 0;
  double work = 0;
  const char* unit = "GB/s";
};

// Runs the baseline of `job` and compares every output element with `reference` within `rtol`
// of max(|ref|, `floor` x the row's rms); skips (with cuDNN's words) where cuDNN refuses the
// problem and `may_refuse`. Prints the baseline's rate.
void check_cudnn(const RunnerJob& job, const Checked& c, const RowReference& reference, double rtol,
                 double floor, bool may_refuse) {
  const std::string cudnn = cudnn_fact();
  if (cudnn.rfind("none", 0) == 0) GTEST_SKIP() << "cuDNN is " << cudnn;
  RunnerOptions o;
  o.executable = cuda_gpu().backend->runner();
  o.start_timeout_s = 30;
  auto res = run_job(job, o);
  ASSERT_TRUE(res) << res.error();
  const TaskResult& r = res->front();
  if (may_refuse && r.disposition == Disposition::not_run)
    GTEST_SKIP() << "cuDNN " << cudnn << " refuses " << c.what << ": " << r.message;
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  ASSERT_FALSE(r.samples_ms.empty());
  for (double ms : r.samples_ms) EXPECT_GT(ms, 0);
  auto bytes = read_file(r.outputs.at(c.output));
  ASSERT_TRUE(bytes) << bytes.error();
  const auto* out = reinterpret_cast<const uint8_t*>(bytes->data());
  auto in = inputs_of(job);
  std::vector<double> ref(static_cast<size_t>(c.cols));
  int64_t bad = 0;
  for (int64_t row = 0; row < c.rows; ++row) {
    reference(in, row, c.cols, ref);
    double ss = 0;
    for (double v : ref) ss += v * v;
    const double rms = std::sqrt(ss / static_cast<double>(c.cols));
    for (int64_t col = 0; col < c.cols; ++col) {
      double y = element_as_double(c.dtype, out, row * c.cols + col);
      if (std::abs(y - ref[col]) > rtol * std::max(std::abs(ref[col]), floor * rms) && bad++ < 5)
        ADD_FAILURE() << c.what << " " << c.output << "[" << row << "][" << col << "] = " << y
                      << ", expected " << ref[col];
    }
  }
  EXPECT_EQ(bad, 0);
  SampleStats st = compute_stats(r.samples_ms);
  std::cout << "[ measured ] cudnn " << cudnn << " " << c.what << ": "
            << c.work / (st.median * 1e-3) / 1e9 << " " << c.unit << " (median " << st.median
            << " ms)\n";
}

void check_cudnn(const Rows& p, const RowReference& reference, double rtol, double floor,
                 bool may_refuse) {
  auto dir = make_temp_dir("peak-cudnn-gpu-test-");
  ASSERT_TRUE(dir) << dir.error();
  Checked c{p.family + " R=" + std::to_string(p.R) + " N=" + std::to_string(p.N), p.dtype, "Y", p.R,
            p.N};
  c.work = static_cast<double>((2 * p.R + static_cast<int64_t>(p.columns.size())) * p.N *
                               static_cast<int64_t>(dtype_size(p.dtype)));
  check_cudnn(cudnn_job(p, *dir), c, reference, rtol, floor, may_refuse);
  std::error_code ec;
  fs::remove_all(*dir, ec);
}

// One attention problem ([batch, heads, sequence, head_dim] arrays of `dtype`).
struct Attention {
  int64_t B, H, SQ, SKV, D, CAUSAL;
  DType dtype = DType::f16;
  std::string text() const {
    return "attention B=" + std::to_string(B) + " H=" + std::to_string(H) +
           " SQ=" + std::to_string(SQ) + " SKV=" + std::to_string(SKV) + " D=" + std::to_string(D) +
           " CAUSAL=" + std::to_string(CAUSAL);
  }
};

RunnerJob attention_job(const Attention& p, const fs::path& out) {
  RunnerJob job;
  job.family = "attention";
  RunnerTask t;
  t.id = "cudnn-attention";
  for (const char* s : {"B", "H", "SQ", "SKV", "D", "CAUSAL"})
    job.scalars.push_back(ScalarSpec{s, DType::i32, {}, 0, 0, 1});
  t.shape = Shape{
      {{"B", p.B}, {"H", p.H}, {"SQ", p.SQ}, {"SKV", p.SKV}, {"D", p.D}, {"CAUSAL", p.CAUSAL}}};
  const int64_t q = p.B * p.H * p.SQ * p.D, kv = p.B * p.H * p.SKV * p.D;
  const char* q_size = "B * H * SQ * D";
  const char* kv_size = "B * H * SKV * D";
  for (const auto& [name, size, n, output] :
       {std::tuple{"Q", q_size, q, false}, std::tuple{"K", kv_size, kv, false},
        std::tuple{"V", kv_size, kv, false}, std::tuple{"O", q_size, q, true}}) {
    job.arrays.push_back(ArraySpec{name, p.dtype, size, {}, output});
    t.sizes[name] = n;
  }
  job.tasks.push_back(reference_task(t, 7, out));
  return job;
}

// Query row r (of B x H x SQ) of the attention output in float64, the family's convention: the
// keys j <= i + SKV - SQ when causal, a row with every key masked 0.
RowReference attention_rows(const Attention& p) {
  return [p](const std::map<std::string, std::vector<double>>& in, int64_t r, int64_t d,
             std::vector<double>& y) {
    const int64_t bh = r / p.SQ, i = r % p.SQ;
    const double* q = in.at("Q").data() + r * d;
    const double* k = in.at("K").data() + bh * p.SKV * d;
    const double* v = in.at("V").data() + bh * p.SKV * d;
    const int64_t keys =
        p.CAUSAL ? std::min(p.SKV, std::max<int64_t>(0, i + p.SKV - p.SQ + 1)) : p.SKV;
    std::vector<double> s(static_cast<size_t>(keys));
    double max = -INFINITY, sum = 0;
    for (int64_t j = 0; j < keys; ++j) {
      double dot = 0;
      for (int64_t e = 0; e < d; ++e) dot += q[e] * k[j * d + e];
      s[j] = dot / std::sqrt(static_cast<double>(d));
      max = std::max(max, s[j]);
    }
    std::fill(y.begin(), y.end(), 0.0);
    for (int64_t j = 0; j < keys; ++j) sum += s[j] = std::exp(s[j] - max);
    for (int64_t j = 0; j < keys; ++j)
      for (int64_t e = 0; e < d; ++e) y[e] += s[j] / sum * v[j * d + e];
  };
}

void check_cudnn(const Attention& p) {
  auto dir = make_temp_dir("peak-cudnn-gpu-test-");
  ASSERT_TRUE(dir) << dir.error();
  Checked c{p.text(), p.dtype, "O", p.B * p.H * p.SQ, p.D};
  c.work = (p.CAUSAL ? 2.0 : 4.0) * static_cast<double>(p.B * p.H * p.SQ * p.SKV * p.D);
  c.unit = "GFLOP/s";
  // The probabilities and the output rounded to the arrays' type: a few of its ulps (2^-11 for
  // fp16, 2^-8 for bf16) of the row's scale.
  const bool bf16 = p.dtype == DType::bf16;
  check_cudnn(attention_job(p, *dir), c, attention_rows(p), bf16 ? 4e-2 : 1e-2, bf16 ? 0.5 : 0.1,
              false);
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

// cuDNN's fused attention against the family's float64 convention: the plain graph, the causal
// mask on the diagonal (SQ = SKV) and absent (one query row, where the family's mask keeps every
// key), head_dim 64 and 128, fp16 and bf16.
TEST_F(CudnnGpuTest, AttentionMatchesTheCpuAndIsTimed) {
  for (const Attention& p :
       {Attention{2, 4, 128, 128, 64, 0}, Attention{1, 4, 256, 256, 128, 1},
        Attention{2, 8, 1, 1024, 128, 1}, Attention{1, 4, 128, 128, 128, 1, DType::bf16}}) {
    SCOPED_TRACE(p.text());
    check_cudnn(p);
  }
}

}  // namespace
}  // namespace peak
