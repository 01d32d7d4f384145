// expect: incorrect|unwritten_output|crashed
// Computes nothing: fills C with what lies past the end of its own allocation (beyond the 64 KiB guard zone), hoping the allocator put a product made elsewhere there, an earlier task's C or the baseline's. What it finds depends on the allocator, and none of it is this task's product (every seed has fresh inputs, and the reference is computed in the parent): leftovers of other inputs or never-written memory (incorrect), stale poison (unwritten_output), or unmapped memory (crashed, an illegal address).

// peak:begin macros
#ifndef BLOCK_X
#define BLOCK_X 16
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 16
#endif
// peak:end macros

// peak:begin device
// The runner's guard zone after every buffer: 64 KiB.
#define GUARD_FLOATS (65536 / 4)

// One thread per element of C, reading the memory after C's allocation instead of A and B.
__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  (void)A;
  (void)B;
  (void)K;
  const volatile float* next = C + (long long)M * N + GUARD_FLOATS;
  C[row * N + col] = next[(long long)row * N + col];
}
// peak:end device

// peak:begin host
launch matmul
  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y))
  block = (BLOCK_X, BLOCK_Y)
  args = (A, B, C, M, N, K)
// peak:end host
