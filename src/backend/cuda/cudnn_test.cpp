// cuDNN loaded at run time (cudnn_loader.h), the row baselines' refusals (cudnn_baseline.h) and
// the host's choice of the baseline, without a GPU: an absent library, a library that is not
// cuDNN, the cuDNN of this machine when it has one, and the baseline's answers before any cuDNN
// call.
#include "backend/cuda/cudnn_loader.h"

#include <gtest/gtest.h>

#include <regex>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cudnn_baseline.h"
#include "family/family.h"

namespace peak {
namespace {

TEST(CudnnLoader, AnAbsentLibraryIsNoneWithTheReason) {
  CudnnApi api = load_cudnn("libpeak-no-such-cudnn.so.9");
  EXPECT_FALSE(api.ready());
  EXPECT_EQ(api.GetVersion, nullptr);
  EXPECT_EQ(api.describe().rfind("none: ", 0), 0u) << api.describe();
  EXPECT_NE(api.describe().find("libpeak-no-such-cudnn.so.9 cannot be loaded"), std::string::npos)
      << api.describe();
}

TEST(CudnnLoader, ALibraryThatIsNotCudnnIsNoneNamingWhatItLacks) {
  CudnnApi api = load_cudnn("libm.so.6");
  EXPECT_FALSE(api.ready());
  EXPECT_EQ(api.SoftmaxForward, nullptr);  // nothing half-resolved is left to call
  EXPECT_NE(api.describe().find("none: libm.so.6 lacks cudnnGetVersion"), std::string::npos)
      << api.describe();
}

TEST(CudnnLoader, TheCudnnOfThisMachineIsVersionNine) {
  CudnnApi api = load_cudnn();
  if (!api.ready()) GTEST_SKIP() << "no cuDNN 9 on this machine: " << api.describe();
  EXPECT_TRUE(std::regex_match(api.version, std::regex(R"(9\.\d+\.\d+)"))) << api.version;
  EXPECT_EQ(api.describe(), api.version);
  EXPECT_NE(api.SoftmaxForward, nullptr);
  EXPECT_NE(api.BackendExecute, nullptr);
  // A status names itself (cudnnGetErrorString) whether or not cuDNN has a message to add.
  EXPECT_EQ(api.status_text(cudnn::kSuccess).rfind("CUDNN_STATUS_SUCCESS", 0), 0u);
  EXPECT_EQ(process_cudnn().describe(), api.describe());
}

TEST(CudnnLoader, VersionNumbersReadAsCudnnWritesThem) {
  EXPECT_EQ(cudnn_version_text(91400), "9.14.0");
  EXPECT_EQ(cudnn_version_text(91901), "9.19.1");
  EXPECT_EQ(cudnn_version_text(90100), "9.1.0");
  EXPECT_EQ(cudnn_version_text(8907), "8.9.7");  // cuDNN 8 counted majors in thousands
}

// The baseline's answers before cuDNN is called: the timer must never run.
struct BaselineProbe {
  CudnnApi api;
  int timed = 0;
  std::vector<DeviceBuffer> arrays{2};
  LaunchOutcome run(const std::string& family, Shape shape) {
    CudnnBaselines b(api, CudnnMemory{});
    b.open(family, nullptr);
    RunnerJob job;
    job.family = family;
    job.arrays = {ArraySpec{"X", DType::f32, "R * N", {}, false},
                  ArraySpec{"Y", DType::f32, "R * N", {}, true}};
    RunnerTask task;
    task.shape = std::move(shape);
    return b.run(task, job, arrays, [&](const std::function<void()>&, std::string_view) {
      ++timed;
      return LaunchOutcome{};
    });
  }
};

const Shape kRows{{{"R", 64}, {"N", 128}}};

TEST(CudnnBaseline, CoversTheRowFamiliesAndAttentionOnly) {
  EXPECT_TRUE(cudnn_covers("softmax"));
  EXPECT_TRUE(cudnn_covers("rmsnorm"));
  EXPECT_TRUE(cudnn_covers("layernorm"));
  EXPECT_TRUE(cudnn_covers("attention"));
  EXPECT_FALSE(cudnn_covers("matmul"));
  EXPECT_FALSE(cudnn_covers(""));
  BaselineProbe p{load_cudnn("libpeak-no-such-cudnn.so.9")};
  LaunchOutcome o = p.run("matmul", kRows);
  EXPECT_EQ(o.disposition, Disposition::not_run);
  EXPECT_NE(o.message.find("only for families softmax, rmsnorm, layernorm and attention, not "
                           "'matmul'"),
            std::string::npos)
      << o.message;
  EXPECT_EQ(p.timed, 0);
}

TEST(CudnnBaseline, WithoutCudnnTheBaselineIsNotRunAndSaysWhy) {
  BaselineProbe p{load_cudnn("libpeak-no-such-cudnn.so.9")};
  for (const char* family : {"softmax", "rmsnorm", "layernorm"}) {
    LaunchOutcome o = p.run(family, kRows);
    EXPECT_EQ(o.disposition, Disposition::not_run) << family;
    EXPECT_NE(o.message.find("cuDNN is not available: libpeak-no-such-cudnn.so.9 cannot be loaded"),
              std::string::npos)
        << o.message;
  }
  EXPECT_EQ(p.timed, 0);
}

TEST(CudnnBaseline, WithoutADeviceTheHandleIsRefusedAndNothingIsTimed) {
  CudnnApi api = load_cudnn();
  if (!api.ready()) GTEST_SKIP() << "no cuDNN 9 on this machine: " << api.describe();
  BaselineProbe p{api};
  LaunchOutcome o = p.run("softmax", kRows);
  if (o.disposition == Disposition::passed) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_EQ(o.disposition, Disposition::not_run);
  EXPECT_EQ(o.message.rfind("cudnnCreate failed: CUDNN_STATUS_", 0), 0u) << o.message;
  EXPECT_EQ(p.timed, 0);
}

// The normalization graphs the runner plans, as this machine's cuDNN checks them without a
// device: the attributes, their types and the mirrored enumeration values are what cuDNN takes,
// and a data type it does not normalize is refused with its words.
TEST(CudnnBaseline, TheNormalizationGraphsFinalizeInThisMachinesCudnn) {
  CudnnApi api = load_cudnn();
  if (!api.ready()) GTEST_SKIP() << "no cuDNN 9 on this machine: " << api.describe();
  const int bf16 = cudnn::kDataBfloat16, f32 = cudnn::kDataFloat, i32 = 4;  // CUDNN_DATA_INT32
  Status rms = check_cudnn_norm_graph(api, "rmsnorm", 4096, 4096, {bf16, bf16, bf16});
  EXPECT_TRUE(rms) << rms.message();
  Status ln = check_cudnn_norm_graph(api, "layernorm", 4096, 4096, {f32, f32, f32, f32});
  EXPECT_TRUE(ln) << ln.message();
  Status ints = check_cudnn_norm_graph(api, "layernorm", 64, 128, {i32, i32, i32, i32});
  EXPECT_FALSE(ints);
  EXPECT_NE(ints.message().find("the operation graph: CUDNN_STATUS_NOT_SUPPORTED"),
            std::string::npos)
      << ints.message();
  Status none = check_cudnn_norm_graph(load_cudnn("libpeak-no-such-cudnn.so.9"), "rmsnorm", 64, 128,
                                       {bf16, bf16, bf16});
  EXPECT_EQ(none.message().rfind("cuDNN is not available: ", 0), 0u) << none.message();
}

Shape attention_shape(int64_t b, int64_t h, int64_t sq, int64_t skv, int64_t d, int64_t causal) {
  return Shape{{{"B", b}, {"H", h}, {"SQ", sq}, {"SKV", skv}, {"D", d}, {"CAUSAL", causal}}};
}

// The fused attention graphs the runner plans, as this machine's cuDNN checks them without a
// device: plain, causal on the diagonal (SQ = SKV) and one query row (where the family's mask
// keeps every key); the problems cuDNN's graph does not state as the family does are refused
// saying why.
TEST(CudnnBaseline, TheAttentionGraphsFinalizeInThisMachinesCudnn) {
  CudnnApi api = load_cudnn();
  if (!api.ready()) GTEST_SKIP() << "no cuDNN 9 on this machine: " << api.describe();
  const int f16 = cudnn::kDataHalf, bf16 = cudnn::kDataBfloat16;
  for (const Shape& s :
       {attention_shape(16, 16, 512, 512, 128, 0), attention_shape(4, 16, 2048, 2048, 128, 1),
        attention_shape(8, 32, 1, 16384, 128, 1)})
    for (int dtype : {f16, bf16}) {
      Status st = check_cudnn_attention_graph(api, s.values, dtype);
      EXPECT_TRUE(st) << s.text() << " " << dtype << ": " << st.message();
    }
  Status f32 = check_cudnn_attention_graph(api, attention_shape(1, 1, 64, 64, 64, 0).values,
                                           cudnn::kDataFloat);
  EXPECT_NE(f32.message().find("fp16 and bf16"), std::string::npos) << f32.message();
  for (const Shape& shifted :
       {attention_shape(1, 3, 17, 9, 64, 1), attention_shape(1, 2, 33, 47, 64, 1)}) {
    Status st = check_cudnn_attention_graph(api, shifted.values, f16);
    EXPECT_NE(st.message().find("SQ != SKV is not built for cuDNN"), std::string::npos)
        << st.message();
  }
  Status missing = check_cudnn_attention_graph(api, kRows.values, f16);
  EXPECT_NE(missing.message().find("needs scalars B, H, SQ, SKV, D and CAUSAL"), std::string::npos)
      << missing.message();
}

// A family whose CUDA baseline is cuDNN (the row families' convention), under a name of its own.
class CudnnRowsFamily final : public Family {
 public:
  std::string_view name() const override { return "cudnn-test-rows"; }
  std::string baseline_name(std::string_view backend) const override {
    return backend == "cuda" ? "cudnn" : "";
  }
};

TEST(CudnnBaseline, TheHostNamesCudnnUnlessTheDeviceSaysItIsNone) {
  static const CudnnRowsFamily family;
  register_family(family);
  KernelContext ctx;
  ctx.family = "cudnn-test-rows";
  auto backend = make_cuda_backend();
  DeviceFacts dev;
  EXPECT_EQ(backend->baseline(ctx, dev), "cudnn");  // facts that say nothing: the runner tells
  dev.extra["cudnn"] = "9.14.0";
  EXPECT_EQ(backend->baseline(ctx, dev), "cudnn");
  dev.extra["cudnn"] = "none: libcudnn.so.9 cannot be loaded (no such file)";
  EXPECT_EQ(backend->baseline(ctx, dev), "");
  // cuBLAS is named as before, whatever its entry says (the runner reports it not run).
  ctx.family = "matmul";
  ctx.arrays = {ArraySpec{"A", DType::f32, "M * K", {}, false},
                ArraySpec{"B", DType::f32, "K * N", {}, false},
                ArraySpec{"C", DType::f32, "M * N", {}, true}};
  dev.extra["cublas"] = "cublasCreate failed: CUBLAS_STATUS_NOT_INITIALIZED";
  EXPECT_EQ(backend->baseline(ctx, dev), "cublas");
}

}  // namespace
}  // namespace peak
