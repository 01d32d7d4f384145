// expect: forbidden_api
// Calls cuBLAS (cublasSgemm) instead of computing: refused at build time by its #include.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cublas_v2.h>

// peak:begin macros
#ifndef BLOCK_X
#define BLOCK_X 16
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 16
#endif
// peak:end macros

// peak:begin device
// No device code: the work is done by cuBLAS.
// peak:end device

// peak:begin host
int peak_host(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t stream) {
  static cublasHandle_t handle = nullptr;
  if (handle == nullptr) cublasCreate(&handle);
  cublasSetStream(handle, stream);
  const float alpha = 1.0f, beta = 0.0f;
  cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, B, N, A, K, &beta, C, N);
  return PEAK_OK;
}
// peak:end host
