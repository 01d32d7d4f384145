#pragma once
// A small kernel context that engine and CLI tests share: a one-dimensional HLSL kernel
// (Y = 2 X) with one tuning parameter, a one-pass transformation and the device region that
// answers it bit for bit, and a helper that replaces one region of a source.
#include <string>

namespace peak::testing {

// A one-dimensional kernel: Y = 2 X.
inline constexpr const char* kScaleToml = R"TOML(format = 2
name = "scale"
backend = "hlsl"
precision = "fp32"
source = "kernel.hlsl"
reference = "seed"
flops = "N"
bytes = "8 * N"
valid = "N > 0"

[[arrays]]
name = "X"
dtype = "f32"
size = "N"
init = "uniform(-1, 1)"

[[arrays]]
name = "Y"
dtype = "f32"
size = "N"
init = "zeros"
output = true

[[scalars]]
name = "N"
dtype = "i32"

[shapes]
bench = [{ N = 4096 }]
validation = [{ N = 100 }]

[[tuning]]
name = "BLOCK"
values = [32, 64]
default = 64
)TOML";

inline constexpr const char* kScaleSource = R"SRC([[vk::binding(0, 0)]] RWStructuredBuffer<float> X;
[[vk::binding(1, 0)]] RWStructuredBuffer<float> Y;
[[vk::binding(2, 0)]] cbuffer Scalars { int N; };
// peak:begin macros
// peak:end macros
// peak:begin device
[numthreads(BLOCK, 1, 1)]
void main(uint3 id : SV_DispatchThreadID) { if ((int)id.x < N) Y[id.x] = 2.0f * X[id.x]; }
// peak:end device
// peak:begin host
launch main
  grid = (ceil_div(N, BLOCK))
// peak:end host
)SRC";

// One pass over the device region; the answer below keeps the results bit for bit.
inline constexpr const char* kAddTwice = R"MD(+++
format = 1
name = "add-twice"
version = 1
title = "Double by adding instead of multiplying"
backends = ["hlsl"]
+++
The same result, another way.

## Pass 1: device
Compute 2 * x as x + x.
)MD";

// The device region a model would write for "add-twice" (exactly the seed's results).
inline constexpr const char* kAddedDevice =
    "[numthreads(BLOCK, 1, 1)]\n"
    "void main(uint3 id : SV_DispatchThreadID) { if ((int)id.x < N) Y[id.x] = X[id.x] + X[id.x]; "
    "}\n";

inline std::string replace_region(const std::string& source, const std::string& region,
                                  const std::string& text) {
  std::string begin = "// peak:begin " + region + "\n";
  auto b = source.find(begin);
  auto e = source.find("// peak:end " + region);
  return source.substr(0, b + begin.size()) + text + source.substr(e);
}

}  // namespace peak::testing
