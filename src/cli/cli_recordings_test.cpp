// The recorded campaigns on a machine without a GPU: every prompt that today's transformations,
// sequence and prompt builder make for them must be the recorded one, and every recorded reply
// must compile for the recording's device (CUDA: with nvcc for the H100, sm_90a; HIP: with hipcc
// for AMD gfx90a and gfx1030, and with nvcc through the mapping header; HLSL: to SPIR-V). A change
// that breaks a recording (a transformation's text or tuning parameters, a region check, the
// prompt builder) fails here, in CI, rather than on the GPU host. Compiled only, one configuration
// per step (`--strategy-budget 1` bounds the sequences' exhaustive last steps too): nothing is
// timed, so a loaded machine gives the same result.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/testing.h"
#include "util/fs.h"

namespace peak {
namespace {

using json = nlohmann::json;
using namespace peak::testing;

// The fp32 sequence's steps kept on the branch after the seed (split-k is applied, then set
// aside); CUDA and HIP add launch bounds, Stream-K, the small-M path and its loads (and apply the
// Stream-K hybrid and the Stream-K dispatch, then set them aside), and a data-parallel kernel.
std::vector<std::string> kept_steps(bool cuda_or_hip) {
  std::vector<std::string> s = {
      "seed",          "refactor",     "tb-tiling",  "thread-tiling",    "thread-cache",
      "transpose",     "thread-chunk", "pipelining", "register-staging", "offset",
      "block-swizzle", "warp-tiling",  "vectorize",  "fragment-prefetch"};
  if (cuda_or_hip)
    s.insert(s.end(),
             {"launch-bounds", "stream-k", "small-m", "small-m-loads", "data-parallel-kernel"});
  return s;
}

class Recordings : public Cli {
 protected:
  // Replays `recording` through `sequence` in a fresh workspace of `context`, compile-only, and
  // checks that every step passed at its first attempt with every configuration built.
  // `steps_run`: the steps the run makes (0: as many as `expected` lists, the seed counting for
  // the fp32 sequences' split-k, which is applied and set aside).
  void replay_compiled(const std::string& context, const std::string& sequence,
                       const std::string& recording, const std::vector<std::string>& expected,
                       size_t steps_run = 0) {
    const std::string root = PEAK_SOURCE_DIR;
    fs::path ws = tmp_ / recording;
    Out init = peak({"init", root + "/examples/" + context, ws.string()});
    ASSERT_EQ(init.code, 0) << init.err;
    const std::string rec = root + "/recordings/" + recording;
    Out o = peak({"-q", "--json", "run", sequence, "--llm", "replay:" + rec, "--compile-only",
                  "--prompt-device", rec + "/device.json", "--strategy-budget", "1", "--small"},
                 ws);
    ASSERT_EQ(o.code, 0) << o.out << o.err;
    json j = json::parse(o.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << o.out;
    const size_t steps = steps_run > 0 ? steps_run : expected.size();
    EXPECT_EQ(j["steps_done"], steps) << o.out;
    ASSERT_EQ(j["steps"].size(), steps) << o.out;
    for (const auto& s : j["steps"]) {
      EXPECT_EQ(s["disposition"], "passed") << s.dump();
      EXPECT_EQ(s["attempts"], 1) << s.dump();
      EXPECT_NE(s["message"].get<std::string>().find("1 of 1 configurations built"),
                std::string::npos)
          << s.dump();
    }
    Out rep = peak({"report", "--format", "json"}, ws);
    ASSERT_EQ(rep.code, 0) << rep.err;
    json r = json::parse(rep.out, nullptr, false);
    ASSERT_TRUE(r.is_object()) << rep.out;
    std::vector<std::string> kept;
    for (const auto& s : r["steps"]) {
      EXPECT_EQ(s["disposition"], "passed") << s.dump();
      kept.push_back(s["transformation"].get<std::string>());
    }
    EXPECT_EQ(kept, expected);
    EXPECT_TRUE(r["failures"].empty()) << r["failures"].dump();
    EXPECT_TRUE(r["infrastructure_failures"].empty()) << r["infrastructure_failures"].dump();
  }
  // `peak demo --family FAMILY` on lavapipe, one configuration per step at the small shapes:
  // every step passes at its first attempt and is kept; the steps kept, seed first.
  void demo_keeps(const std::string& family, const std::vector<std::string>& steps) {
    Out o = peak({"--json", "demo", "--family", family, "--backend", "hlsl", "--device", "llvmpipe",
                  "--budget", "1", "--dir", (tmp_ / (family + "-demo")).string()});
    ASSERT_EQ(o.code, 0) << o.out << o.err;
    json r = json::parse(o.out, nullptr, false);
    ASSERT_TRUE(r.is_object()) << o.out;
    EXPECT_EQ(r["disposition"], "passed") << r["message"];
    std::vector<std::string> kept;
    for (const auto& s : r["steps"]) {
      EXPECT_EQ(s["disposition"], "passed") << s.dump();
      kept.push_back(s["transformation"].get<std::string>());
    }
    EXPECT_EQ(kept, steps);
    EXPECT_TRUE(r["failures"].empty()) << r["failures"].dump();
  }
  // Skips the test when `peak doctor` finds no `what` toolchain.
  bool has_toolchain(const std::string& what) {
    return peak({"doctor"}).out.find("[ ok ] " + what + " toolchain") != std::string::npos;
  }
};

// The Stream-K hybrid and the Stream-K dispatch are applied and set aside: two steps more than the
// kept ones.
TEST_F(Recordings, TheWholeCudaRecordingCompilesWithNvcc) {
  if (!has_toolchain("cuda")) GTEST_SKIP() << "no CUDA toolkit on this machine";
  replay_compiled("matmul-cuda-fp32", "cuda-fp32", "cuda-fp32-full", kept_steps(true),
                  kept_steps(true).size() + 2);
}

// The tensor-core sequence's whole fp16 recording (up to warpgroup MMA, warp specialization, the
// persistent grid, clusters with TMA multicast, split-K, padded operands, MMAs kept in flight, the
// TMA-store epilogue and the Stream-K tail) built with nvcc for sm_90a; the cluster step is
// applied and set aside by the sequence, so fifteen steps run and split-K builds on the persistent
// kernel.
TEST_F(Recordings, TheWholeCudaFp16RecordingCompilesWithNvcc) {
  if (!has_toolchain("cuda")) GTEST_SKIP() << "no CUDA toolkit on this machine";
  replay_compiled(
      "matmul-cuda-fp16", "cuda-fp16", "cuda-fp16-full",
      {"seed", "refactor", "tb-tiling", "tensor-core", "tensor-tiling", "tensor-pipelining",
       "tma-loads", "wgmma", "warp-specialization", "persistent", "tensor-split-k",
       "padded-operands", "wgmma-overlap", "tma-store-epilogue", "tensor-stream-k"},
      15);
  // padded-operands (checkpoint 13) lifts the alignment the earlier steps required: its kernel
  // supports every shape again, tensor-split-k's (12) did not.
  const fs::path ws = tmp_ / "cuda-fp16-full";
  auto kernel_toml = [&](const std::string& id) {
    Out o = peak({"--json", "show", id}, ws);
    EXPECT_EQ(o.code, 0) << o.err;
    json j = json::parse(o.out, nullptr, false);
    return j.is_object() ? j.value("kernel_toml", std::string()) : std::string();
  };
  EXPECT_NE(kernel_toml("12").find("supports = \"K % 8 == 0 && N % 8 == 0\""), std::string::npos);
  const std::string last = kernel_toml("13");
  EXPECT_NE(last.find("[suite]"), std::string::npos) << last;
  EXPECT_EQ(last.find("supports"), std::string::npos) << last;
  // The steps after it (MMAs in flight, the TMA-store epilogue, the Stream-K tail) keep every
  // shape: none narrows the supported shapes again.
  const std::string stream_k = kernel_toml("16");
  EXPECT_NE(stream_k.find("[suite]"), std::string::npos) << stream_k;
  EXPECT_EQ(stream_k.find("supports"), std::string::npos) << stream_k;
}

// The same fifteen steps spelled in BF16 (the sequence serves both input types).
TEST_F(Recordings, TheWholeCudaBf16RecordingCompilesWithNvcc) {
  if (!has_toolchain("cuda")) GTEST_SKIP() << "no CUDA toolkit on this machine";
  replay_compiled(
      "matmul-cuda-bf16", "cuda-fp16", "cuda-bf16-full",
      {"seed", "refactor", "tb-tiling", "tensor-core", "tensor-tiling", "tensor-pipelining",
       "tma-loads", "wgmma", "warp-specialization", "persistent", "tensor-split-k",
       "padded-operands", "wgmma-overlap", "tma-store-epilogue", "tensor-stream-k"},
      15);
}

// fp8 (e4m3 inputs, B stored K-major, per-tensor scales): refactor, tb-tiling, the fp8 tensor
// cores (mma.sync m16n8k32) and their cp.async pipeline, then Hopper's: TMA and wgmma on e4m3,
// the fp16 sequence's warp specialization and persistent grid (their text serves both), MMAs in
// flight and the TMA-store epilogue, every step kept.
TEST_F(Recordings, TheCudaFp8RecordingCompilesWithNvcc) {
  if (!has_toolchain("cuda")) GTEST_SKIP() << "no CUDA toolkit on this machine";
  replay_compiled(
      "matmul-cuda-fp8", "cuda-fp8", "cuda-fp8",
      {"seed", "refactor", "tb-tiling", "fp8-tensor-core", "fp8-pipelining", "fp8-wgmma",
       "warp-specialization", "persistent", "wgmma-overlap", "tma-store-epilogue"},
      9);
}

// The same sequence as CUDA's, built for AMD (hipcc: gfx90a and gfx1030, with the resource
// report) and, where nvcc is, for the H100 through the mapping header; the Stream-K hybrid and
// the Stream-K dispatch are set aside as in CUDA's.
TEST_F(Recordings, TheWholeHipRecordingCompilesForAmdAndNvidia) {
  if (!has_toolchain("hip")) GTEST_SKIP() << "no HIP toolchain on this machine";
  replay_compiled("matmul-hip-fp32", "hip-fp32", "hip-fp32-full", kept_steps(true),
                  kept_steps(true).size() + 2);
}

// The HIP tensor-core steps (refactor, tb-tiling, tensor-core with its mfma helper) on the HIP
// fp16 context: built for gfx90a (matrix cores), gfx1030 and, where nvcc is, the H100.
TEST_F(Recordings, TheHipTensorCoreRecordingCompilesForAmdAndNvidia) {
  if (!has_toolchain("hip")) GTEST_SKIP() << "no HIP toolchain on this machine";
  replay_compiled("matmul-hip-fp16", "hip-fp16", "hip-fp16",
                  {"seed", "refactor", "tb-tiling", "tensor-core"}, 3);
}

// The recording `peak demo` replays on a CPU device.
TEST_F(Recordings, TheWholeHlslRecordingAnswersEveryPromptAndCompiles) {
  replay_compiled("matmul-hlsl-fp32", "hlsl-fp32", "hlsl-fp32-full", kept_steps(false));
}

// The row-kernel sequence from the one-thread-per-row seed: every step kept.
std::vector<std::string> row_steps(bool softmax) {
  std::vector<std::string> s = {"seed",         "row-per-block",    "warp-reduce",
                                "vector-loads", "row-in-registers", "rows-per-warp",
                                "split-row",    "persistent-rows"};
  if (softmax) s.insert(s.begin() + 5, "online-softmax");
  return s;
}
// The row steps and then aligned-rows, as the HLSL softmax ends.
std::vector<std::string> row_steps_aligned(bool softmax) {
  std::vector<std::string> s = row_steps(softmax);
  s.push_back("aligned-rows");
  return s;
}
// The CUDA sequences then hold long and few rows in a thread-block cluster (sm_90), take the
// rows that fit in registers from the grid again, split the cluster's last barrier, and keep
// several loads in flight per thread in the loops over long rows, compile the register paths for
// each row length they launch and the cluster kernel for each slice length, and let the plan
// choose the cluster's size for each shape.
std::vector<std::string> row_steps_cuda(bool softmax) {
  std::vector<std::string> s = row_steps_aligned(softmax);
  for (const char* step : {"cluster-rows", "grid-rows", "cluster-arrive", "vectors-in-flight",
                           "sized-instances", "sized-cluster", "cluster-blocks"})
    s.push_back(step);
  return s;
}

TEST_F(Recordings, TheCudaSoftmaxRecordingCompilesWithNvcc) {
  if (!has_toolchain("cuda")) GTEST_SKIP() << "no CUDA toolkit on this machine";
  replay_compiled("softmax-cuda-fp32", "softmax-cuda", "softmax-cuda", row_steps_cuda(true),
                  row_steps_cuda(true).size() - 1);
}

TEST_F(Recordings, TheHipSoftmaxRecordingCompilesForAmdAndNvidia) {
  if (!has_toolchain("hip")) GTEST_SKIP() << "no HIP toolchain on this machine";
  replay_compiled("softmax-hip-fp32", "softmax-hip", "softmax-hip", row_steps(true),
                  row_steps(true).size() - 1);
}

// The normalizations: bf16 RMSNorm and fp32 LayerNorm, every step of their sequences (no online
// softmax), built with nvcc for the H100.
TEST_F(Recordings, TheCudaRmsnormRecordingCompilesWithNvcc) {
  if (!has_toolchain("cuda")) GTEST_SKIP() << "no CUDA toolkit on this machine";
  replay_compiled("rmsnorm-cuda-bf16", "rmsnorm-cuda", "rmsnorm-cuda", row_steps_cuda(false),
                  row_steps_cuda(false).size() - 1);
}

TEST_F(Recordings, TheCudaLayernormRecordingCompilesWithNvcc) {
  if (!has_toolchain("cuda")) GTEST_SKIP() << "no CUDA toolkit on this machine";
  replay_compiled("layernorm-cuda-fp32", "layernorm-cuda", "layernorm-cuda", row_steps_cuda(false),
                  row_steps_cuda(false).size() - 1);
}

// Attention from the naive three-kernel seed: the fused kernel with the online softmax, the keys
// of decode rows split over blocks, the tensor-core kernels (mma.sync, a kernel per head_dim) for
// the other shapes, their K and V tiles copied asynchronously, then warpgroup MMA with a producer
// warpgroup (sm_90a), built with nvcc for the H100.
TEST_F(Recordings, TheCudaAttentionRecordingCompilesWithNvcc) {
  if (!has_toolchain("cuda")) GTEST_SKIP() << "no CUDA toolkit on this machine";
  replay_compiled("attention-cuda-fp16", "attention-cuda", "attention-cuda",
                  {"seed", "fused-attention", "split-kv", "tensor-core-attention", "pipelined-kv",
                   "wgmma-attention"},
                  5);
}

// The portable attention steps in HIP: the fused kernel with the online softmax, then the keys of
// decode rows split over blocks (key groups of 8 lanes inside 64- or 32-lane wavefronts), built
// for AMD (hipcc: gfx90a and gfx1030) and, where nvcc is, for the H100 through the mapping header.
TEST_F(Recordings, TheHipAttentionRecordingCompilesForAmdAndNvidia) {
  if (!has_toolchain("hip")) GTEST_SKIP() << "no HIP toolchain on this machine";
  replay_compiled("attention-hip-fp16", "attention-hip", "attention-hip",
                  {"seed", "fused-attention", "split-kv"}, 2);
}

// The fused attention kernel, then the keys of decode rows split over thread groups (partials
// combined by a second kernel), validated against the float64 reference (decode and prefill,
// causal and not, rows with every key masked) and timed.
TEST_F(Recordings, TheHlslAttentionDemoRunsEveryStepOnLavapipe) {
  demo_keeps("attention", {"seed", "fused-attention", "split-kv"});
}

// The HLSL softmax recording validated, tuned and timed; its last step gives the misaligned rows
// of the hidden shapes (N = 4099, 50257, ...) the vector path.
TEST_F(Recordings, TheHlslSoftmaxDemoRunsEveryStepOnLavapipe) {
  demo_keeps("softmax", row_steps_aligned(true));
}

}  // namespace
}  // namespace peak
