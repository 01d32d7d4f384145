// C = A * B with FP16 inputs and FP32 accumulation: A (M x K) and B (K x N) are row-major __half,
// C (M x N) is row-major float. The host function takes the arrays of kernel.toml in order, then
// its scalars, then the stream to launch on; it returns PEAK_OK, or PEAK_INVALID_CONFIG when the
// configuration cannot run on this device (docs/backend-cuda.md).
#include <cuda_runtime.h>
#include <cuda_fp16.h>

// peak:begin macros
// BLOCK_X and BLOCK_Y are tuning parameters: peak defines them when it compiles.
// peak:end macros

// peak:begin device
// One thread per element of C; products and sums in FP32.
__global__ void matmul(const __half* A, const __half* B, float* C, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += __half2float(A[row * K + k]) * __half2float(B[k * N + col]);
  C[row * N + col] = acc;
}
// peak:end device

// peak:begin host
int peak_host(const __half* A, const __half* B, float* C, int M, int N, int K,
              cudaStream_t stream) {
  dim3 block(BLOCK_X, BLOCK_Y);
  dim3 grid((N + BLOCK_X - 1) / BLOCK_X, (M + BLOCK_Y - 1) / BLOCK_Y);
  matmul<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
  return PEAK_OK;
}
// peak:end host
