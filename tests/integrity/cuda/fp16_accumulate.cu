// expect: incorrect
// Converts to __half and accumulates in __half: silently lowered precision in an FP32 kernel.

// peak:begin macros
#ifndef BLOCK_X
#define BLOCK_X 16
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 16
#endif
// peak:end macros

// peak:begin device
// One thread per element of C, in half precision.
__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  __half acc = __float2half(0.0f);
  for (int k = 0; k < K; ++k)
    acc = __hfma(__float2half(A[row * K + k]), __float2half(B[k * N + col]), acc);
  C[row * N + col] = __half2float(acc);
}
// peak:end device

// peak:begin host
launch matmul
  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y))
  block = (BLOCK_X, BLOCK_Y)
  args = (A, B, C, M, N, K)
// peak:end host
