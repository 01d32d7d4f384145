// expect: unwritten_output
// Computes nothing and leaves C as it finds it, hoping for the product of the cuBLAS baseline, which the runner runs on the same A, B and C between timed samples: C is poisoned before every run, checked or timed, so it only ever finds poison.
// timed: incorrect
// A kernel that computes only where C does not already hold a number gains nothing either: it finds poison every time and always computes.

// peak:begin macros
#ifndef BLOCK_X
#define BLOCK_X 16
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 16
#endif
// peak:end macros

// peak:begin device
// "The product is already there": rewrites each element of C with its own value.
__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  (void)A;
  (void)B;
  (void)K;
  volatile float* c = C;
  c[row * N + col] = c[row * N + col];
}
// peak:end device

// peak:begin host
launch matmul
  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y))
  block = (BLOCK_X, BLOCK_Y)
  args = (A, B, C, M, N, K)
// peak:end host
