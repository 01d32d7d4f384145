// expect: invalid_config
// Asks the plan for 300 KiB of dynamic shared memory, more than any NVIDIA GPU lets one block opt in to: refused when the plan is checked against the device, before anything runs.

// peak:begin macros
#ifndef BLOCK_X
#define BLOCK_X 16
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 16
#endif
#define STAGING_BYTES (300 * 1024)
// peak:end macros

// peak:begin device
// One thread per element of C, staging its result through dynamic shared memory.
__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  extern __shared__ float staging[];
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int t = threadIdx.y * blockDim.x + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
  staging[t] = acc;
  C[row * N + col] = staging[t];
}
// peak:end device

// peak:begin host
launch matmul
  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y))
  block = (BLOCK_X, BLOCK_Y)
  shared = STAGING_BYTES
  args = (A, B, C, M, N, K)
// peak:end host
