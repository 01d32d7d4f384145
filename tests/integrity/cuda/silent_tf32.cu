// expect: incorrect
// Rounds A and B to TF32 (cvt.rna.tf32.f32, 10-bit mantissa) before multiplying: silently lowered precision in an FP32 kernel.

// peak:begin macros
#ifndef BLOCK_X
#define BLOCK_X 16
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 16
#endif
// peak:end macros

// peak:begin device
// Rounds to TF32 as the tensor cores would.
__device__ __forceinline__ float to_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}

// One thread per element of C.
__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += to_tf32(A[row * K + k]) * to_tf32(B[k * N + col]);
  C[row * N + col] = acc;
}
// peak:end device

// peak:begin host
launch matmul
  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y))
  block = (BLOCK_X, BLOCK_Y)
  args = (A, B, C, M, N, K)
// peak:end host
