// Scaled dot-product attention forward for FP32, [batch, heads, sequence, head_dim] row-major:
// O[b, h, i, :] = sum over j of P[i, j] * V[b, h, j, :], P[i, :] = softmax over j of
// Q[b, h, i, :] . K[b, h, j, :] / sqrt(D), the keys j > i + SKV - SQ masked when CAUSAL is 1.
// Bindings follow the array order of kernel.toml; the scalars share one cbuffer after them.
[[vk::binding(0, 0)]] StructuredBuffer<float> Q;
[[vk::binding(1, 0)]] StructuredBuffer<float> K;
[[vk::binding(2, 0)]] StructuredBuffer<float> V;
[[vk::binding(3, 0)]] RWStructuredBuffer<float> O;
[[vk::binding(4, 0)]] cbuffer Scalars { int B; int H; int SQ; int SKV; int D; int CAUSAL; };

// peak:begin macros
// BLOCK (threads per group) is a tuning parameter: peak defines it when it compiles.
// peak:end macros

// peak:begin device
// The naive three kernels, the scores and probabilities in global memory between them: the
// plan's scratch buffer S (SQ x SKV per batch and head), bound after the scalars' cbuffer.
[[vk::binding(5, 0)]] RWStructuredBuffer<float> S;

// The scores: one thread per query row q = (b * H + h) * SQ + i writes
// S[q, j] = Q[q, :] . K[b, h, j, :] / sqrt(D), and -infinity for a key the causal mask hides.
[numthreads(BLOCK, 1, 1)]
void scores(uint3 tid : SV_DispatchThreadID) {
  int q = (int)tid.x;
  if (q >= B * H * SQ) return;
  int bh = q / SQ;
  int i = q % SQ;
  float scale = 1.0f / sqrt((float)D);
  for (int j = 0; j < SKV; ++j) {
    float s = asfloat(0xff800000u);  // -infinity
    if (CAUSAL == 0 || j <= i + SKV - SQ) {
      float dot = 0.0f;
      for (int e = 0; e < D; ++e) dot += Q[q * D + e] * K[(bh * SKV + j) * D + e];
      s = dot * scale;
    }
    S[q * SKV + j] = s;
  }
}

// The probabilities: one thread per query row turns its scores into softmax in place (the
// maximum, the sum of exponentials, the quotients); a row with every key masked becomes 0.
[numthreads(BLOCK, 1, 1)]
void probabilities(uint3 tid : SV_DispatchThreadID) {
  int q = (int)tid.x;
  if (q >= B * H * SQ) return;
  int base = q * SKV;
  float m = asfloat(0xff800000u);
  for (int j = 0; j < SKV; ++j) m = max(m, S[base + j]);
  if (m == asfloat(0xff800000u)) {
    for (int k = 0; k < SKV; ++k) S[base + k] = 0.0f;
    return;
  }
  float sum = 0.0f;
  for (int j = 0; j < SKV; ++j) sum += exp(S[base + j] - m);
  for (int j = 0; j < SKV; ++j) S[base + j] = exp(S[base + j] - m) / sum;
}

// The output: one thread per element, O[q, c] = sum over j of S[q, j] * V[b, h, j, c].
[numthreads(BLOCK, 1, 1)]
void weighted_sum(uint3 tid : SV_DispatchThreadID) {
  int idx = (int)tid.x;
  if (idx >= B * H * SQ * D) return;
  int q = idx / D;
  int c = idx % D;
  int bh = q / SQ;
  float acc = 0.0f;
  for (int j = 0; j < SKV; ++j) acc += S[q * SKV + j] * V[(bh * SKV + j) * D + c];
  O[idx] = acc;
}
// peak:end device

// peak:begin host
// The launch plan, evaluated by peak (docs/launch-plan.md): thread groups of [numthreads].
scratch S
  dtype = f32
  count = B * H * SQ * SKV
launch scores
  grid = (ceil_div(B * H * SQ, BLOCK))
launch probabilities
  grid = (ceil_div(B * H * SQ, BLOCK))
launch weighted_sum
  grid = (ceil_div(B * H * SQ * D, BLOCK))
// peak:end host
