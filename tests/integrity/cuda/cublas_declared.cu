// expect: forbidden_api
// Calls cuBLAS through its own declarations (no #include): refused at build time by the artifact's symbols.
#include <cuda_runtime.h>
#include <cuda_fp16.h>

// peak:begin macros
#ifndef BLOCK_X
#define BLOCK_X 16
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 16
#endif
// peak:end macros

// peak:begin device
// No device code: the work is done by cuBLAS, declared by hand.
extern "C" int cublasCreate_v2(void** handle);
extern "C" int cublasSetStream_v2(void* handle, cudaStream_t stream);
extern "C" int cublasSgemm_v2(void* handle, int transa, int transb, int m, int n, int k,
                              const float* alpha, const float* A, int lda, const float* B, int ldb,
                              const float* beta, float* C, int ldc);
// peak:end device

// peak:begin host
int peak_host(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t stream) {
  static void* handle = nullptr;
  if (handle == nullptr) cublasCreate_v2(&handle);
  cublasSetStream_v2(handle, stream);
  const float alpha = 1.0f, beta = 0.0f;
  cublasSgemm_v2(handle, 0, 0, N, M, K, &alpha, B, N, A, K, &beta, C, N);
  return PEAK_OK;
}
// peak:end host
