// expect: forbidden_api
// Finds cuBLAS at run time with dlopen/dlsym to get past the symbol check.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <dlfcn.h>

// peak:begin macros
#ifndef BLOCK_X
#define BLOCK_X 16
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 16
#endif
// peak:end macros

// peak:begin device
// Unused: the work is done by cuBLAS, found at run time.
__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
  C[row * N + col] = acc;
}
// peak:end device

// peak:begin host
typedef int (*sgemm_fn)(void*, int, int, int, int, int, const float*, const float*, int,
                        const float*, int, const float*, float*, int);
typedef int (*create_fn)(void**);
typedef int (*set_stream_fn)(void*, cudaStream_t);

int peak_host(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t stream) {
  static void* handle = nullptr;
  void* lib = dlopen("libcublas.so.13", RTLD_NOW);
  if (lib == nullptr) return -2;
  auto create = (create_fn)dlsym(lib, "cublasCreate_v2");
  auto set_stream = (set_stream_fn)dlsym(lib, "cublasSetStream_v2");
  auto sgemm = (sgemm_fn)dlsym(lib, "cublasSgemm_v2");
  if (handle == nullptr) create(&handle);
  set_stream(handle, stream);
  const float alpha = 1.0f, beta = 0.0f;
  sgemm(handle, 0, 0, N, M, K, &alpha, B, N, A, K, &beta, C, N);
  return PEAK_OK;
}
// peak:end host
