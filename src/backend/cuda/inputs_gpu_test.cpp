// GPU tests of the runner's fresh inputs (label gpu): made on the device by peak's generator
// kernel (generate_ptx.h), they must be the bytes generate_array gives on the host. A kernel that
// copies X to Y is timed through peak-runner-cuda with fresh inputs; the output of the last timed
// launch (written whole) and every timed check are compared with generate_array for that launch's
// seed, for each element type and initializer the generator covers, the zero fix included.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "backend/cuda/gpu_testing.h"
#include "context/inputs.h"
#include "runner/client.h"
#include "util/fs.h"

namespace peak {
namespace {

const fs::path kSource = PEAK_SOURCE_DIR;

// Y = X, element by element, for elements of `bytes` bytes.
std::string copy_source(int bytes) {
  const char* t = bytes == 1 ? "unsigned char" : bytes == 2 ? "unsigned short" : "unsigned int";
  return fmt::format(R"(// peak:begin macros
// peak:end macros

// peak:begin device
__global__ void copy(const {0}* X, {0}* Y, int R, int N) {{
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < (size_t)R * N) Y[i] = X[i];
}}
// peak:end device

// peak:begin host
launch copy
  grid = (ceil_div(R * N, BLOCK))
  block = (BLOCK)
  args = (X, Y, R, N)
// peak:end host
)",
                     t);
}

struct Case {
  DType dtype;
  std::string init;
  int64_t rows, cols;
};

class CudaGpuInputs : public ::testing::TestWithParam<Case> {};

TEST_P(CudaGpuInputs, FreshInputsMadeOnTheDeviceAreTheHostsBytes) {
  auto& gpu = testing::cuda_gpu();
  ASSERT_TRUE(gpu.error.empty()) << gpu.error;
  const Case& c = GetParam();
  const std::string& arch = gpu.facts.arch;  // "sm_90a"
  if (c.dtype == DType::e4m3 && (arch.size() < 5 || std::stoi(arch.substr(3)) < 89))
    GTEST_SKIP() << "the e4m3 generator needs sm_89 or newer, not " << arch;
  auto loaded = load_context(kSource / "examples" / "softmax-cuda-fp32");
  ASSERT_TRUE(loaded) << loaded.error();
  KernelContext ctx = *loaded;
  ctx.arrays[0].dtype = ctx.arrays[1].dtype = c.dtype;
  auto init = parse_initializer(c.init);
  ASSERT_TRUE(init) << init.error();
  ctx.arrays[0].init = *init;
  ASSERT_TRUE(input_generator(ctx.arrays[0], c.rows * c.cols, 1, 0).has_value()) << c.init;

  const std::string text = copy_source(static_cast<int>(dtype_size(c.dtype)));
  auto regions = split_regions(text, "kernel.cu");
  ASSERT_TRUE(regions) << regions.error();
  const Config config = {{"BLOCK", 256}};
  BuildRequest req;
  req.context = &ctx;
  req.source = text;
  req.defines = config;
  req.device = gpu.facts;
  req.cache_dir = gpu.cache;
  BuildResult b = gpu.backend->build(req);
  ASSERT_EQ(b.disposition, Disposition::passed) << b.log;
  Shape shape;
  shape.values = {{"R", c.rows}, {"N", c.cols}};
  PlanResult plan = gpu.backend->plan(ctx, *regions, shape, config, gpu.facts, b);
  ASSERT_EQ(plan.disposition, Disposition::passed) << plan.message;
  auto sizes = array_sizes(ctx, shape);
  ASSERT_TRUE(sizes) << sizes.error();

  auto out = make_temp_dir("peak-inputs-gpu-");
  ASSERT_TRUE(out) << out.error();
  RunnerJob job = RunnerJob::for_context(ctx);
  RunnerTask t;
  t.id = "copy";
  t.artifact = b.artifact.string();
  t.plan = plan.plan;
  t.shape = shape;
  t.sizes = *sizes;
  t.seed = 0x5eed;
  t.repeat = false;
  TimingPolicy p;
  p.warmup = 1;
  p.min_samples = p.max_samples = 4;
  p.check_elements = 64;
  p.full_checks = 0;
  t.timing = p;
  t.output_dir = out->string();
  job.tasks.push_back(t);
  RunnerOptions ro;
  ro.executable = gpu.backend->runner();
  ro.task_timeout_s = 60;
  ro.start_timeout_s = 30;
  auto results = run_job(job, ro);
  ASSERT_TRUE(results) << results.error();
  ASSERT_EQ(results->size(), 1u);
  const TaskResult& r = results->front();
  ASSERT_EQ(r.disposition, Disposition::passed) << r.message;
  ASSERT_EQ(r.timed_checks.size(), 4u);

  const int64_t n = c.rows * c.cols;
  for (const TimedCheck& check : r.timed_checks) {
    const auto want = generate_array(ctx.arrays[0], n, array_seed(check.seed, "X"), 0);
    const auto& pos = check.positions.at("Y");
    const auto& val = check.values.at("Y");
    ASSERT_EQ(pos.size(), val.size());
    for (size_t k = 0; k < pos.size(); ++k)
      EXPECT_EQ(val[k], element_as_double(c.dtype, want.data(), pos[k]))
          << "sample " << check.sample << " element " << pos[k];
  }
  auto last = read_file(r.timed_outputs.at("Y"));
  ASSERT_TRUE(last) << last.error();
  const auto want =
      generate_array(ctx.arrays[0], n, array_seed(r.timed_checks.back().seed, "X"), 0);
  ASSERT_EQ(last->size(), want.size());
  size_t differ = 0, first = want.size();
  for (size_t i = 0; i < want.size(); ++i)
    if (static_cast<uint8_t>((*last)[i]) != want[i]) {
      ++differ;
      first = std::min(first, i);
    }
  EXPECT_EQ(differ, 0u) << "bytes differ from byte " << first << " of " << want.size();
  fs::remove_all(*out);
}

INSTANTIATE_TEST_SUITE_P(
    Generator, CudaGpuInputs,
    ::testing::Values(Case{DType::f32, "uniform(-1, 1)", 1024, 4099},
                      Case{DType::f32, "uniform(-8, 8)", 4096, 8191},
                      Case{DType::f16, "uniform(-1, 1)", 1000, 4097},
                      Case{DType::f16, "uniform(0.9, 1.1)", 7, 333},
                      Case{DType::bf16, "uniform(-2, 2)", 513, 2049},
                      Case{DType::i32, "uniform(-100, 100)", 64, 1025},
                      Case{DType::f32, "iota", 4096, 4097}, Case{DType::f16, "iota", 5, 4099},
                      Case{DType::bf16, "ones", 9, 9}, Case{DType::f32, "zeros", 17, 31},
                      Case{DType::f16, "uniform(0, 1e-9)", 3, 5},  // all zero: the zero fix
                      Case{DType::i32, "uniform(0.2, 0.8)", 2, 3},
                      Case{DType::e4m3, "uniform(-4, 4)", 1000, 4097},
                      Case{DType::e4m3, "uniform(-600, 600)", 33, 65},  // saturated at 448
                      Case{DType::e4m3, "uniform(0, 0.004)", 64, 63},   // subnormals
                      Case{DType::e4m3, "iota", 3, 40}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string s = fmt::format("{}_{}", to_string(info.param.dtype), info.index);
      return s;
    });

}  // namespace
}  // namespace peak
