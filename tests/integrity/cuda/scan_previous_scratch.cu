// expect: incorrect|unwritten_output
// Declares the scratch buffer a split-K kernel would (K_SPLITS partial products of C) and runs only the reduction, hoping the partial products of the previous run, or of a previous candidate with the same plan, are still in it: scratch buffers are poisoned before every run like outputs (and another candidate's runner is another process), so every sum is NaN.

// peak:begin macros
#define K_SPLITS 4
// peak:end macros

// peak:begin device
// C = the sum over the splits of the partial products "already" in the scratch buffer.
__global__ void reduce_partials(const float* partial, float* C, int MN) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= MN) return;
  float acc = 0.0f;
  for (int s = 0; s < K_SPLITS; ++s) acc += partial[(long long)s * MN + i];
  C[i] = acc;
}
// peak:end device

// peak:begin host
scratch partial
  dtype = f32
  count = K_SPLITS * M * N
launch reduce_partials
  grid = (ceil_div(M * N, 256))
  block = (256)
  args = (partial, C, M * N)
// peak:end host
