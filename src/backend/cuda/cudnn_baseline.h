#pragma once
// The cuDNN baselines of the row families on the CUDA runner (RunnerTask::baseline "cudnn"):
//   softmax    cudnnSoftmaxForward (accurate, instance mode) over an R x N x 1 x 1 NCHW tensor;
//   rmsnorm    the graph API's normalization forward (RMS norm, inference): X, scale W -> Y;
//   layernorm  likewise (layer norm, inference): X, scale W, bias B -> Y;
//   attention  the graph API's fused scaled dot-product attention (inference): Q K^T scaled by
//              1/sqrt(D), the causal mask, the softmax along the keys and the product with V in
//              one graph, which cuDNN runs with its flash-attention engines.
// Descriptors and execution plans are built once per shape and dtypes, outside the timed window;
// only the library's execute call is timed, with the device's own events (CudaDevice::run).
// Where cuDNN refuses a shape or a dtype the baseline is not_run with cuDNN's message. No CUDA
// or cuDNN header is needed: cuDNN comes through cudnn_loader.h, memory through the runner's
// Device.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/cuda/cudnn_loader.h"
#include "runner/device.h"

namespace peak {

// Whether cuDNN is the baseline the CUDA runner implements for `family`.
bool cudnn_covers(std::string_view family);
// The operation graph of the normalization forward of `family` (rmsnorm, layernorm) over `rows`
// x `cols`, cuDNN's `dtypes` of its arrays in the order X, W, [B], Y, made and finalized without
// a handle or a device (cuDNN checks the attributes and the data types there): an error with
// cuDNN's message where it refuses them. The runner's plans start from this graph.
Status check_cudnn_norm_graph(const CudnnApi& api, std::string_view family, int64_t rows,
                              int64_t cols, const std::vector<int>& dtypes);

// The operation graph of the attention forward at the shape `values` (B, H, SQ, SKV, D, CAUSAL)
// with cuDNN's `dtype` of Q, K, V and O, made and finalized without a handle or a device: an
// error with cuDNN's message (or the reason the family's problem has no such graph) otherwise.
Status check_cudnn_attention_graph(const CudnnApi& api,
                                   const std::map<std::string, int64_t>& values, int dtype);

// Runs `enqueue` (which puts the library's work on the runner's stream) once: untimed, or timed
// the way the device times candidates.
using CudnnTimer =
    std::function<LaunchOutcome(const std::function<void()>& enqueue, std::string_view what)>;

// Device memory for the plans' workspaces (the runner's Device::alloc and Device::free).
struct CudnnMemory {
  std::function<Result<DeviceBuffer>(size_t bytes)> alloc;
  std::function<void(DeviceBuffer&)> free;
};

class CudnnBaselines {
 public:
  CudnnBaselines(const CudnnApi& api, CudnnMemory memory);
  ~CudnnBaselines();
  CudnnBaselines(const CudnnBaselines&) = delete;
  CudnnBaselines& operator=(const CudnnBaselines&) = delete;

  // Creates the cuDNN handle on `stream` (a cudaStream_t) when cuDNN covers `family`; what went
  // wrong is kept and said by run().
  void open(std::string_view family, cudnn::Stream stream);
  // One run of the baseline of the job's family on `arrays`; disposition not_run (with the
  // reason) where cuDNN is absent, does not cover the family, or refuses the shape or dtypes.
  LaunchOutcome run(const RunnerTask& task, const RunnerJob& job, std::vector<DeviceBuffer>& arrays,
                    const CudnnTimer& timer);

  struct Plan;  // cudnn_baseline.cpp

 private:
  // The plan of `family` at the shape `values` with cuDNN's `dtypes` of its arrays, built on first
  // use (outside any timed window) and kept for the life of this object.
  Plan& plan_for(const std::string& family, const std::vector<int>& dtypes,
                 const std::map<std::string, int64_t>& values);
  LaunchOutcome execute(Plan& plan, const std::vector<void*>& pointers, const CudnnTimer& timer);

  const CudnnApi& api_;
  CudnnMemory memory_;
  cudnn::Handle handle_ = nullptr;
  std::string error_;                                   // why there is no handle
  std::map<std::string, std::unique_ptr<Plan>> plans_;  // by family, shape and dtypes
};

}  // namespace peak
