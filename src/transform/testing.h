#pragma once
// Fixtures shared by the transform tests: a small CUDA matmul context and its source.
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "context/context.h"
#include "util/fs.h"

namespace peak::testing {

inline constexpr const char* kMatmulSource =
    "#include <cuda_runtime.h>\n"
    "// peak:begin macros\n"
    "// peak:end macros\n"
    "// peak:begin device\n"
    "__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {\n"
    "  int row = blockIdx.y * blockDim.y + threadIdx.y;\n"
    "  int col = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (row < M && col < N) {\n"
    "    float acc = 0.0f;\n"
    "    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];\n"
    "    C[row * N + col] = acc;\n"
    "  }\n"
    "}\n"
    "// peak:end device\n"
    "// peak:begin host\n"
    "launch matmul\n"
    "  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y))\n"
    "  block = (BLOCK_X, BLOCK_Y)\n"
    "  args = (A, B, C, M, N, K)\n"
    "// peak:end host\n";

inline Shape shape(int64_t m, int64_t n, int64_t k) {
  return Shape{{{"M", m}, {"N", n}, {"K", k}}};
}

inline KernelContext matmul_context() {
  KernelContext ctx;
  ctx.name = "matmul-cuda-fp32";
  ctx.description = "C = A x B, row-major";
  ctx.backend = "cuda";
  ctx.family = "matmul";
  ctx.precision = "fp32";
  ctx.source_file = "matmul.cu";
  ctx.arrays = {
      {"A", DType::f32, "M * K", {}, false},
      {"B", DType::f32, "K * N", {}, false},
      {"C", DType::f32, "M * N", {}, true},
  };
  ctx.scalars = {{"M", DType::i32, {}, 1, 8192, 1},
                 {"N", DType::i32, {}, 1, 8192, 1},
                 {"K", DType::i32, {}, 1, 8192, 1}};
  ctx.valid = "M > 0 && N > 0 && K > 0";
  ctx.bench_shapes = {shape(2048, 2048, 2048), shape(4096, 4096, 4096)};
  ctx.validation_shapes = {shape(1000, 1200, 300), shape(2048, 2048, 2048)};
  ctx.hidden_shapes = {shape(777, 555, 333), shape(1023, 3001, 4097)};
  ctx.small_shapes = {shape(61, 67, 71)};
  ctx.tuning = {{"BLOCK_X", {8, 16, 32}, 16}, {"BLOCK_Y", {8, 16, 32}, 16}};
  ctx.tuning_valid = "BLOCK_X * BLOCK_Y <= 1024";
  ctx.flops = "2 * M * N * K";
  return ctx;
}

inline SourceRegions matmul_source() {
  auto r = split_regions(kMatmulSource, "matmul.cu");
  EXPECT_TRUE(r.is_ok()) << r.error();
  return r.is_ok() ? *r : SourceRegions{};
}

// The naive softmax seed of the row families: one thread per row, three passes over it.
inline constexpr const char* kSoftmaxSource =
    "#include <cuda_runtime.h>\n"
    "// peak:begin macros\n"
    "// peak:end macros\n"
    "// peak:begin device\n"
    "__global__ void softmax(const float* X, float* Y, int R, int N) {\n"
    "  int r = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (r >= R) return;\n"
    "  const float* x = X + (size_t)r * N;\n"
    "  float m = x[0];\n"
    "  for (int c = 1; c < N; ++c) m = fmaxf(m, x[c]);\n"
    "  float s = 0.0f;\n"
    "  for (int c = 0; c < N; ++c) s += expf(x[c] - m);\n"
    "  for (int c = 0; c < N; ++c) Y[(size_t)r * N + c] = expf(x[c] - m) / s;\n"
    "}\n"
    "// peak:end device\n"
    "// peak:begin host\n"
    "launch softmax\n"
    "  grid = (ceil_div(R, BLOCK))\n"
    "  block = (BLOCK)\n"
    "  args = (X, Y, R, N)\n"
    "// peak:end host\n";

// The softmax context of the row families' prompts, as kernel.toml text.
inline constexpr const char* kSoftmaxToml = R"TOML(format = 3
name = "softmax-cuda-fp32"
description = "Y = softmax(X) along each row, row-major R x N"
backend = "cuda"
family = "softmax"
precision = "fp32"
source = "softmax.cu"
reference = "seed"
bytes = "4 * 2 * R * N"
valid = "R > 0 && N > 0"
arrays = [{ name = "X", dtype = "f32", size = "R * N" },
          { name = "Y", dtype = "f32", size = "R * N", output = true }]
scalars = [{ name = "R", dtype = "i32" }, { name = "N", dtype = "i32" }]
tuning = [{ name = "BLOCK", values = [64, 128, 256], default = 128 }]

[shapes]
bench = [{ R = 4096, N = 4096 }, { R = 1, N = 128256 }]
validation = [{ R = 100, N = 1000 }, { R = 3, N = 40000 }]
hidden = [{ R = 77, N = 555 }]
small = [{ R = 61, N = 67 }]
)TOML";

inline KernelContext softmax_context() {
  auto ctx = parse_context(kSoftmaxToml, "kernel.toml");
  EXPECT_TRUE(ctx.is_ok()) << ctx.error();
  return ctx.is_ok() ? *ctx : KernelContext{};
}

inline SourceRegions softmax_source() {
  auto r = split_regions(kSoftmaxSource, "softmax.cu");
  EXPECT_TRUE(r.is_ok()) << r.error();
  return r.is_ok() ? *r : SourceRegions{};
}

// Compares `actual` with the golden file src/transform/testdata/<name>; PEAK_UPDATE_GOLDEN=1
// rewrites the file instead.
inline void expect_golden(const std::string& name, const std::string& actual) {
  const std::string path = std::string(PEAK_SOURCE_DIR) + "/src/transform/testdata/" + name;
  const char* update = std::getenv("PEAK_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    ASSERT_TRUE(write_file(path, actual).is_ok()) << path;
    return;
  }
  auto expected = read_file(path);
  ASSERT_TRUE(expected.is_ok()) << expected.error()
                                << " (run with PEAK_UPDATE_GOLDEN=1 to create it)";
  if (*expected == actual) return;
  // Point at the first differing line.
  auto a = split_lines(actual), e = split_lines(*expected);
  size_t i = 0;
  while (i < a.size() && i < e.size() && a[i] == e[i]) ++i;
  ADD_FAILURE() << "output differs from " << path << " at line " << i + 1
                << "\n  expected: " << (i < e.size() ? e[i] : "<end>")
                << "\n  actual:   " << (i < a.size() ? a[i] : "<end>")
                << "\n(run with PEAK_UPDATE_GOLDEN=1 to accept the new output)";
}

}  // namespace peak::testing
