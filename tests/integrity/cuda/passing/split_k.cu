// expect: passed
// Split-K: the first launch writes K_SPLITS partial products of C (each over one slice of K) into a scratch buffer, the second sums them into C. Two launches and a scratch buffer within the context's workspace.

// peak:begin macros
#ifndef TILE
#define TILE 16
#endif
#define K_SPLITS 4
// peak:end macros

// peak:begin device
// Block (x, y, z): one TILE x TILE tile of C over the z-th slice of K, staged through shared
// memory. Every element of the tile's partial product is written, even for an empty slice.
__global__ void matmul_partial(const float* __restrict__ A, const float* __restrict__ B,
                               float* __restrict__ partial, int M, int N, int K) {
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
  if (row < M && col < N) partial[(long long)blockIdx.z * M * N + row * N + col] = acc;
}

// C = the sum of the partial products, in a fixed order (deterministic).
__global__ void reduce_partials(const float* __restrict__ partial, float* __restrict__ C, int MN) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= MN) return;
  float acc = 0.0f;
#pragma unroll
  for (int s = 0; s < K_SPLITS; ++s) acc += partial[(long long)s * MN + i];
  C[i] = acc;
}
// peak:end device

// peak:begin host
scratch partial
  dtype = f32
  count = K_SPLITS * M * N
launch matmul_partial
  grid = (ceil_div(N, TILE), ceil_div(M, TILE), K_SPLITS)
  block = (TILE, TILE)
  args = (A, B, partial, M, N, K)
launch reduce_partials
  grid = (ceil_div(M * N, 256))
  block = (256)
  args = (partial, C, M * N)
// peak:end host
