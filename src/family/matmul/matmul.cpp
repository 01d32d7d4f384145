#include "family/matmul/matmul.h"

#include <set>

#include "family/matmul/reference.h"

namespace peak::matmul {

Status MatmulFamily::check_cpu_reference(const KernelContext& ctx) const {
  return check_convention(ctx);
}

Result<std::map<std::string, ReferenceValues>> MatmulFamily::cpu_reference(
    const KernelContext& ctx, const Shape& shape, const ReferenceInputs& inputs,
    const ReferenceIndices& indices) const {
  return reference_values(ctx, shape, inputs, indices);
}

std::optional<ReferenceIndices> MatmulFamily::reference_reads(
    const KernelContext& ctx, const Shape& shape, const ReferenceIndices& indices) const {
  auto m = shape.values.find("M"), n = shape.values.find("N"), k = shape.values.find("K");
  auto c = indices.find("C");
  if (m == shape.values.end() || n == shape.values.end() || k == shape.values.end() ||
      c == indices.end() || n->second <= 0)
    return std::nullopt;
  const int64_t N = n->second, K = k->second;
  std::set<int64_t> rows, cols;
  for (int64_t x : c->second) {
    rows.insert(x / N);
    cols.insert(x % N);
  }
  ReferenceIndices reads;
  auto& a = reads["A"];
  for (int64_t r : rows)
    for (int64_t kk = 0; kk < K; ++kk) a.push_back(r * K + kk);
  if (find_array(ctx, "Bt")) {  // K-major: column j of B is row j of Bt
    auto& b = reads["Bt"];
    for (int64_t j : cols)
      for (int64_t kk = 0; kk < K; ++kk) b.push_back(j * K + kk);
  } else {
    auto& b = reads["B"];
    for (int64_t kk = 0; kk < K; ++kk)
      for (int64_t j : cols) b.push_back(kk * N + j);
  }
  return reads;  // the scales, left out, are read whole
}

std::vector<int64_t> MatmulFamily::output_dims(const KernelContext&, const Shape& shape) const {
  auto m = shape.values.find("M"), n = shape.values.find("N");
  if (m != shape.values.end() && n != shape.values.end()) return {m->second, n->second};
  return {};
}

std::string MatmulFamily::baseline_name(std::string_view backend) const {
  return backend == "cuda" || backend == "hip" ? "cublas" : "";
}

bool MatmulFamily::has_baseline(std::string_view name, std::string_view backend) const {
  return name == baseline_name(backend) || (backend == "cuda" && name == "cublaslt");
}

std::string MatmulFamily::baseline(const KernelContext& ctx, std::string_view backend) const {
  const ArraySpec* a = find_array(ctx, "A");
  const ArraySpec* bt = find_array(ctx, "Bt");
  const ArraySpec* c = find_array(ctx, "C");
  // fp8: e4m3 A and K-major B, per-tensor scales, a bf16 or f32 output: cublasLt's fp8 GEMM.
  if (a && bt && c && c->output && a->dtype == DType::e4m3 && bt->dtype == DType::e4m3 &&
      find_array(ctx, "A_scale") && (c->dtype == DType::bf16 || c->dtype == DType::f32))
    return backend == "cuda" ? "cublaslt" : "";
  const ArraySpec* b = find_array(ctx, "B");
  if (!a || !b || !c || !c->output || a->dtype != b->dtype) return "";
  if (a->dtype != DType::f32 && a->dtype != DType::f16 && a->dtype != DType::bf16) return "";
  if (c->dtype == DType::i32) return "";
  return baseline_name(backend);
}

std::vector<ClassRule> MatmulFamily::default_class_rules(const KernelContext& ctx) const {
  if (!has_scalar(ctx, "M") || !has_scalar(ctx, "N") || !has_scalar(ctx, "K")) return {};
  // A long reduction over a small output first (256 x 256 x 131072, and 16 x 16 x 8192 too),
  // then few rows (decode), a short reduction, the LLM layers' wide outputs, the cube.
  return {{SuiteClass::large_k, "K >= 8 * M && K >= 8 * N"},
          {SuiteClass::small_m, "M <= 32"},
          {SuiteClass::small_k, "K <= 64"},
          {SuiteClass::wide, "N >= 2 * M && N >= 2 * K"},
          {SuiteClass::square, "M == N && N == K"},
          {SuiteClass::irregular, ""}};
}

std::optional<TileWork> MatmulFamily::tile_work(const KernelContext& ctx,
                                                const Shape& shape) const {
  const auto& v = shape.values;
  if (!v.count("M") || !v.count("N") || !v.count("K")) return std::nullopt;
  TileWork w;
  w.m = static_cast<double>(v.at("M"));
  w.n = static_cast<double>(v.at("N"));
  w.k = static_cast<double>(v.at("K"));
  for (const auto& a : ctx.arrays)
    if (!a.output) {
      w.element_bytes = static_cast<double>(dtype_size(a.dtype));
      break;
    }
  return w;
}

const Family& family() {
  static const MatmulFamily f;
  return f;
}

}  // namespace peak::matmul
