// expect: nondeterministic|incorrect
// A 32x32 tiled kernel without __syncthreads(): warps read tiles other warps have not written yet (or have overwritten).

// peak:begin macros
#ifndef TILE
#define TILE 32
#endif
// peak:end macros

// peak:begin device
#include <hip/hip_runtime.h>

// Shared-memory tiles without barriers between the loads and the reads.
__global__ void matmul_tiled(const float* __restrict__ A, const float* __restrict__ B,
                             float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE + ty;
  int col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int t = 0; t < K; t += TILE) {
    As[ty][tx] = (row < M && t + tx < K) ? A[row * K + t + tx] : 0.0f;
    Bs[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * N + col] : 0.0f;
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
// peak:end device

// peak:begin host
launch matmul_tiled
  grid = (ceil_div(N, TILE), ceil_div(M, TILE))
  block = (TILE, TILE)
  args = (A, B, C, M, N, K)
// peak:end host
