// Scaled dot-product attention forward, BF16 inputs and output with FP32 arithmetic; Q, K, V and
// O in [batch, heads, sequence, head_dim] row-major:
// O[b, h, i, :] = sum over j of P[i, j] * V[b, h, j, :], P[i, :] = softmax over j of
// Q[b, h, i, :] . K[b, h, j, :] / sqrt(D), the keys j > i + SKV - SQ masked when CAUSAL is 1.
// The device region is compiled as device code only; the host region is the launch plan that
// peak evaluates for each shape and configuration (docs/launch-plan.md).

// peak:begin macros
// BLOCK (threads per block) is a tuning parameter: peak defines it when it compiles.
// peak:end macros

// peak:begin device
// The naive three kernels, the scores and probabilities in global memory between them (the
// plan's scratch buffer S, SQ x SKV floats per batch and head).

// The scores: one thread per query row q = (b * H + h) * SQ + i writes
// S[q, j] = Q[q, :] . K[b, h, j, :] / sqrt(D), and -infinity for a key the causal mask hides.
__global__ void scores(const __nv_bfloat16* Q, const __nv_bfloat16* K, float* S, int B, int H,
                       int SQ, int SKV, int D, int CAUSAL) {
  const size_t q = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= (size_t)B * H * SQ) return;
  const size_t bh = q / SQ;
  const int i = (int)(q % SQ);
  const float scale = 1.0f / sqrtf((float)D);
  for (int j = 0; j < SKV; ++j) {
    float s = -INFINITY;
    if (CAUSAL == 0 || j <= i + SKV - SQ) {
      float dot = 0.0f;
      for (int e = 0; e < D; ++e)
        dot += __bfloat162float(Q[q * D + e]) * __bfloat162float(K[(bh * SKV + j) * D + e]);
      s = dot * scale;
    }
    S[q * SKV + j] = s;
  }
}

// The probabilities: one thread per query row turns its scores into softmax in place (the
// maximum, the sum of exponentials, the quotients); a row with every key masked becomes 0.
__global__ void probabilities(float* S, int B, int H, int SQ, int SKV) {
  const size_t q = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= (size_t)B * H * SQ) return;
  float* s = S + q * SKV;
  float m = -INFINITY;
  for (int j = 0; j < SKV; ++j) m = fmaxf(m, s[j]);
  if (m == -INFINITY) {
    for (int j = 0; j < SKV; ++j) s[j] = 0.0f;
    return;
  }
  float sum = 0.0f;
  for (int j = 0; j < SKV; ++j) sum += expf(s[j] - m);
  for (int j = 0; j < SKV; ++j) s[j] = expf(s[j] - m) / sum;
}

// The output: one thread per element, O[q, c] = sum over j of S[q, j] * V[b, h, j, c], rounded to
// BF16 once.
__global__ void weighted_sum(const float* S, const __nv_bfloat16* V, __nv_bfloat16* O, int B,
                             int H, int SQ, int SKV, int D) {
  const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (size_t)B * H * SQ * D) return;
  const size_t q = idx / D;
  const int c = (int)(idx % D);
  const size_t bh = q / SQ;
  float acc = 0.0f;
  for (int j = 0; j < SKV; ++j)
    acc += S[q * SKV + j] * __bfloat162float(V[(bh * SKV + j) * D + c]);
  O[idx] = __float2bfloat16(acc);
}
// peak:end device

// peak:begin host
scratch S
  dtype = f32
  count = B * H * SQ * SKV
launch scores
  grid = (ceil_div(B * H * SQ, BLOCK))
  block = (BLOCK)
  args = (Q, K, S, B, H, SQ, SKV, D, CAUSAL)
launch probabilities
  grid = (ceil_div(B * H * SQ, BLOCK))
  block = (BLOCK)
  args = (S, B, H, SQ, SKV)
launch weighted_sum
  grid = (ceil_div(B * H * SQ * D, BLOCK))
  block = (BLOCK)
  args = (S, V, O, B, H, SQ, SKV, D)
// peak:end host
