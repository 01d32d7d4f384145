// expect: forbidden_api
// Allocates memory of its own with malloc() in device code, a heap the runner neither poisons nor guards and that outlives the launch: hipcc builds it for AMD, but the NVIDIA build (the one that runs) needs `malloc` from the driver, and the build refuses it.

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

// A heap buffer that survives from one launch to the next.
__device__ float* g_heap;

// One thread per element of C; the first launch allocates the heap buffer.
__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row == 0 && col == 0 && g_heap == nullptr)
    g_heap = static_cast<float*>(malloc(sizeof(float) * (size_t)M * N));
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
  C[row * N + col] = acc;
}

// Never launched: gives the heap back.
__global__ void release() {
  free(g_heap);
  g_heap = nullptr;
}
// peak:end device

// peak:begin host
launch matmul
  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y))
  block = (BLOCK_X, BLOCK_Y)
  args = (A, B, C, M, N, K)
// peak:end host
