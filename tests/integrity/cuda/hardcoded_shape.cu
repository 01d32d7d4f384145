// expect: incorrect
// Hard-codes a shape assumption: the K loop is unrolled by 8 with no remainder, right for 2048 and every visible shape, wrong for the hidden ones.

// peak:begin macros
#ifndef BLOCK_X
#define BLOCK_X 16
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 16
#endif
// peak:end macros

// peak:begin device
// One thread per element of C; K is assumed to be a multiple of 8.
__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k + 8 <= K; k += 8) {
#pragma unroll
    for (int u = 0; u < 8; ++u) acc += A[row * K + k + u] * B[(k + u) * N + col];
  }
  C[row * N + col] = acc;
}
// peak:end device

// peak:begin host
launch matmul
  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y))
  block = (BLOCK_X, BLOCK_Y)
  args = (A, B, C, M, N, K)
// peak:end host
