#include "backend/cuda/cublaslt_device.h"

#include <tuple>

#include <fmt/format.h>

#include "backend/cuda/dl_library.h"

namespace peak::cuda {

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;

// The entry points peak calls, resolved from the library loaded at run time.
struct LtApi {
  decltype(&::cublasLtCreate) Create = nullptr;
  decltype(&::cublasLtDestroy) Destroy = nullptr;
  decltype(&::cublasLtMatmulDescCreate) DescCreate = nullptr;
  decltype(&::cublasLtMatmulDescDestroy) DescDestroy = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) DescSet = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) LayoutCreate = nullptr;
  decltype(&::cublasLtMatrixLayoutDestroy) LayoutDestroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceCreate) PrefCreate = nullptr;
  decltype(&::cublasLtMatmulPreferenceDestroy) PrefDestroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) PrefSet = nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) Heuristic = nullptr;
  decltype(&::cublasLtMatmul) Matmul = nullptr;
  decltype(&::cublasLtGetStatusString) StatusString = nullptr;
  cuda::DlLibrary lib;

  Status load() {
    return lib.load(fmt::format("libcublasLt.so.{}", CUBLAS_VER_MAJOR), [&](auto get) {
      get(Create, "cublasLtCreate");
      get(Destroy, "cublasLtDestroy");
      get(DescCreate, "cublasLtMatmulDescCreate");
      get(DescDestroy, "cublasLtMatmulDescDestroy");
      get(DescSet, "cublasLtMatmulDescSetAttribute");
      get(LayoutCreate, "cublasLtMatrixLayoutCreate");
      get(LayoutDestroy, "cublasLtMatrixLayoutDestroy");
      get(PrefCreate, "cublasLtMatmulPreferenceCreate");
      get(PrefDestroy, "cublasLtMatmulPreferenceDestroy");
      get(PrefSet, "cublasLtMatmulPreferenceSetAttribute");
      get(Heuristic, "cublasLtMatmulAlgoGetHeuristic");
      get(Matmul, "cublasLtMatmul");
      get(StatusString, "cublasLtGetStatusString");
    });
  }

  std::string text(cublasStatus_t s) const {
    const char* t = StatusString ? StatusString(s) : nullptr;
    return t ? t : fmt::format("cublasStatus_t {}", static_cast<int>(s));
  }
};

LtApi g_lt;

}  // namespace

struct CublasLtFp8::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  const float* a_scale = nullptr;  // the scale pointers the descriptor holds
  const float* b_scale = nullptr;
  ~Plan() {
    if (desc) g_lt.DescDestroy(desc);
    for (auto* l : {a, b, c})
      if (l) g_lt.LayoutDestroy(l);
  }
  // Points the descriptor at g's scales, where it does not already. cublasLt's A is Bt and its B
  // is A (plan()), so its A scale is B_scale and its B scale A_scale.
  Status set_scales(const Fp8Gemm& g) {
    for (auto [attr, want, have] :
         {std::tuple{CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, g.b_scale, &b_scale},
          std::tuple{CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, g.a_scale, &a_scale}}) {
      if (*have == want) continue;
      if (cublasStatus_t s = g_lt.DescSet(desc, attr, &want, sizeof want);
          s != CUBLAS_STATUS_SUCCESS)
        return Status::error(fmt::format("setting a scale pointer failed: {}", g_lt.text(s)));
      *have = want;
    }
    return Status::ok();
  }
};

CublasLtFp8::CublasLtFp8() = default;

CublasLtFp8::~CublasLtFp8() {
  plans_.clear();  // before the handle
  if (workspace_) cudaFree(workspace_);
  if (handle_) g_lt.Destroy(handle_);
}

Status CublasLtFp8::open() {
  if (handle_) return Status::ok();
  error_.clear();
  if (Status st = g_lt.load(); !st) {
    error_ = st.message();
    return st;
  }
  if (cublasStatus_t s = g_lt.Create(&handle_); s != CUBLAS_STATUS_SUCCESS) {
    handle_ = nullptr;
    error_ = fmt::format("cublasLtCreate failed: {}", g_lt.text(s));
    return Status::error(error_);
  }
  if (cudaMalloc(&workspace_, kWorkspaceBytes) != cudaSuccess) {
    (void)cudaGetLastError();
    workspace_ = nullptr;
  }
  return Status::ok();
}

Result<CublasLtFp8::Plan*> CublasLtFp8::plan(const Fp8Gemm& g) {
  const Key key{g.m, g.n, g.k, static_cast<int>(g.c_type)};
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  auto p = std::make_unique<Plan>();
  std::string failed;
  auto check = [&](cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS && failed.empty())
      failed = fmt::format("{} failed: {}", what, g_lt.text(s));
  };
  // Row-major C[M,N] = A[M,K] B[K,N] is column-major C^T[N,M] = Bt^T A^T: cublasLt's A is Bt (a
  // K x N column-major matrix, transposed), its B is A (K x M column-major): the "TN" layout its
  // fp8 GEMM asks for. Its A scale is therefore B_scale, and its B scale A_scale.
  const cudaDataType out = g.c_type == DType::f32 ? CUDA_R_32F : CUDA_R_16BF;
  check(g_lt.DescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
  const int8_t fast = 1;
  if (failed.empty()) {
    check(g_lt.DescSet(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t), "TRANSA");
    check(g_lt.DescSet(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof n), "TRANSB");
    check(g_lt.DescSet(p->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast), "FAST_ACCUM");
  }
  // The heuristic sees scaled operands, as the calls have them.
  if (failed.empty())
    if (Status st = p->set_scales(g); !st) failed = st.message();
  const uint64_t M = static_cast<uint64_t>(g.m), N = static_cast<uint64_t>(g.n),
                 K = static_cast<uint64_t>(g.k);
  check(g_lt.LayoutCreate(&p->a, CUDA_R_8F_E4M3, K, N, static_cast<int64_t>(K)), "layout of Bt");
  check(g_lt.LayoutCreate(&p->b, CUDA_R_8F_E4M3, K, M, static_cast<int64_t>(K)), "layout of A");
  check(g_lt.LayoutCreate(&p->c, out, N, M, static_cast<int64_t>(N)), "layout of C");
  if (failed.empty()) {
    cublasLtMatmulPreference_t pref = nullptr;
    check(g_lt.PrefCreate(&pref), "cublasLtMatmulPreferenceCreate");
    const size_t ws = workspace_ ? kWorkspaceBytes : 0;
    if (pref)
      check(g_lt.PrefSet(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
            "MAX_WORKSPACE_BYTES");
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (failed.empty())
      check(g_lt.Heuristic(handle_, p->desc, p->a, p->b, p->c, p->c, pref, 1, &result, &found),
            "cublasLtMatmulAlgoGetHeuristic");
    if (pref) g_lt.PrefDestroy(pref);
    if (failed.empty() && found == 0)
      failed = fmt::format("cublasLt has no fp8 algorithm for M={} N={} K={}", g.m, g.n, g.k);
    p->algo = result.algo;
  }
  if (!failed.empty()) return make_error(failed);
  return (plans_[key] = std::move(p)).get();
}

Status CublasLtFp8::prepare(const Fp8Gemm& g) {
  if (!handle_) return Status::error(error_);
  auto p = plan(g);
  return p ? Status::ok() : Status::error(p.error());
}

Status CublasLtFp8::enqueue(const Fp8Gemm& g, cudaStream_t stream) {
  if (!handle_) return Status::error(error_);
  auto p = plan(g);
  if (!p) return Status::error(p.error());
  Plan& pl = **p;
  if (Status st = pl.set_scales(g); !st) return st;  // new buffers only: a timed loop keeps them
  const float alpha = 1.0f, beta = 0.0f;
  cublasStatus_t s =
      g_lt.Matmul(handle_, pl.desc, &alpha, g.bt, pl.a, g.a, pl.b, &beta, g.c, pl.c, g.c, pl.c,
                  &pl.algo, workspace_, workspace_ ? kWorkspaceBytes : 0, stream);
  if (s != CUBLAS_STATUS_SUCCESS)
    return Status::error(fmt::format("cublasLtMatmul failed: {}", g_lt.text(s)));
  return Status::ok();
}

}  // namespace peak::cuda
