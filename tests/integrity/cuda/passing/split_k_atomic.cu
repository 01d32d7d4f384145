// expect: passed
// Split-K with float atomics: C is zeroed by the plan, then each of K_SPLITS blocks per tile adds its slice's partial product into C with atomicAdd. The order of the additions changes from run to run, so the two checked runs may differ in the last bits: rounding within the tolerance, accepted and recorded, not `nondeterministic`.

// peak:begin macros
#ifndef TILE
#define TILE 16
#endif
#define K_SPLITS 8
// peak:end macros

// peak:begin device
// Block (x, y, z): one TILE x TILE tile of C over the z-th slice of K, staged through shared
// memory, added into C.
__global__ void matmul_split_atomic(const float* __restrict__ A, const float* __restrict__ B,
                                    float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE + ty;
  int col = blockIdx.x * TILE + tx;
  int slice = (K + K_SPLITS - 1) / K_SPLITS;
  int k_begin = blockIdx.z * slice;
  int k_end = min(K, k_begin + slice);
  float acc = 0.0f;
  for (int t = k_begin; t < k_end; t += TILE) {
    As[ty][tx] = (row < M && t + tx < k_end) ? A[row * K + t + tx] : 0.0f;
    Bs[ty][tx] = (t + ty < k_end && col < N) ? B[(t + ty) * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) atomicAdd(&C[row * N + col], acc);
}
// peak:end device

// peak:begin host
memset C
launch matmul_split_atomic
  grid = (ceil_div(N, TILE), ceil_div(M, TILE), K_SPLITS)
  block = (TILE, TILE)
  args = (A, B, C, M, N, K)
// peak:end host
