#pragma once
// cublasLt's fp8 GEMM, the baseline of matmul contexts with e4m3 inputs (family/matmul: A M x K
// row-major, Bt N x K row-major, per-tensor scales A_scale and B_scale, C M x N in bf16 or f32).
// libcublasLt is loaded at run time, by the jobs that time it, as cuBLAS is.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "context/context.h"
#include "util/result.h"

namespace peak::cuda {

// The operands of one fp8 GEMM, device pointers all.
struct Fp8Gemm {
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;         // e4m3, M x K row-major
  const void* bt = nullptr;        // e4m3, N x K row-major (B K-major)
  const float* a_scale = nullptr;  // one float each
  const float* b_scale = nullptr;
  void* c = nullptr;  // M x N row-major
  DType c_type = DType::bf16;
};

class CublasLtFp8 {
 public:
  CublasLtFp8();
  CublasLtFp8(const CublasLtFp8&) = delete;
  CublasLtFp8& operator=(const CublasLtFp8&) = delete;
  ~CublasLtFp8();

  // Loads the library, makes the handle and a workspace; an error says why it is not ready.
  Status open();
  bool ready() const { return handle_ != nullptr; }
  const std::string& error() const { return error_; }

  // Enqueues C = A_scale * B_scale * A B on `stream` with the heuristic's first algorithm for
  // the shape (chosen once per shape, outside any timed window: prepare() does it). Fast
  // accumulation is on: the tensor cores' own fp8 accumulation, as a hand-written WGMMA kernel
  // has it.
  Status prepare(const Fp8Gemm& g);
  Status enqueue(const Fp8Gemm& g, cudaStream_t stream);

 private:
  struct Plan;  // descriptors and the chosen algorithm of one shape
  using Key = std::tuple<int64_t, int64_t, int64_t, int>;
  Result<Plan*> plan(const Fp8Gemm& g);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  std::string error_ = "cublasLt is not loaded for this job (no task has its baseline)";
};

}  // namespace peak::cuda
