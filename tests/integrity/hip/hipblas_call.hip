// expect: compile_failed
// Calls hipBLAS for the product instead of computing it (the vendor library posing as the candidate): the library is not among the headers a candidate gets, and its calls are host functions, so the build fails.

// peak:begin macros
#ifndef BLOCK_X
#define BLOCK_X 16
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 16
#endif
// peak:end macros

// peak:begin device
#include <hip/hip_runtime.h>
#include <hipblas.h>

// Hands the whole product to the library from the first thread.
__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  if (blockIdx.x != 0 || blockIdx.y != 0 || threadIdx.x != 0 || threadIdx.y != 0) return;
  hipblasHandle_t handle;
  hipblasCreate(&handle);
  const float one = 1.0f, zero = 0.0f;
  hipblasSgemm(handle, HIPBLAS_OP_N, HIPBLAS_OP_N, N, M, K, &one, B, N, A, K, &zero, C, N);
}
// peak:end device

// peak:begin host
launch matmul
  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y))
  block = (BLOCK_X, BLOCK_Y)
  args = (A, B, C, M, N, K)
// peak:end host
