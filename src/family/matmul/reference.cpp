#include "family/matmul/reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "context/inputs.h"

namespace peak::matmul {

namespace {

constexpr std::string_view kMatmulConvention =
    "family \"matmul\" needs arrays A (size M * K), B (size K * N) or Bt (size N * K: B stored "
    "K-major) and output C (size M * N), row-major, optionally the per-tensor scales A_scale and "
    "B_scale (size 1 each), and scalars M, N, K";

// The B operand's array: "Bt" (K-major) when the context has it, else "B".
std::string_view b_name(const KernelContext& ctx) { return find_array(ctx, "Bt") ? "Bt" : "B"; }

bool has_scales(const KernelContext& ctx) { return find_array(ctx, "A_scale") != nullptr; }

// The arrays of the convention with their element counts at M, N, K: the inputs (A, B or Bt,
// the scales when the context has them), then the output C when `with_output`.
std::vector<std::pair<std::string, int64_t>> operands(const KernelContext& ctx, int64_t M,
                                                      int64_t N, int64_t K, bool with_output) {
  std::vector<std::pair<std::string, int64_t>> out = {{"A", M * K},
                                                      {std::string(b_name(ctx)), K * N}};
  if (has_scales(ctx)) out.insert(out.end(), {{"A_scale", 1}, {"B_scale", 1}});
  if (with_output) out.emplace_back("C", M * N);
  return out;
}

// Checks the sizes of A, B (or Bt), C and the scales for one shape.
Status check_matmul_sizes(const KernelContext& ctx, const Shape& shape, int64_t M, int64_t N,
                          int64_t K) {
  auto sizes = array_sizes(ctx, shape);
  if (!sizes) return Status::error(sizes.error());
  for (const auto& [name, n] : operands(ctx, M, N, K, true)) {
    int64_t got = sizes->at(name);
    if (got != n) {
      const ArraySpec* a = find_array(ctx, name);
      return Status::error(
          fmt::format("array {} has size \"{}\" = {} for M={} N={} K={}, not {}; {}", name, a->size,
                      got, M, N, K, n, kMatmulConvention));
    }
  }
  return Status::ok();
}

template <DType T>
double load(const uint8_t* p, int64_t i) {
  if constexpr (T == DType::f32) {
    float f;
    std::memcpy(&f, p + i * 4, 4);
    return f;
  } else if constexpr (T == DType::f16) {
    uint16_t h;
    std::memcpy(&h, p + i * 2, 2);
    return half_to_float(h);
  } else if constexpr (T == DType::bf16) {
    uint16_t h;
    std::memcpy(&h, p + i * 2, 2);
    return bf16_to_float(h);
  } else if constexpr (T == DType::e4m3) {
    return e4m3_to_float(p[i]);
  } else {
    int32_t x;
    std::memcpy(&x, p + i * 4, 4);
    return x;
  }
}

struct Matmul {
  int64_t M = 0, N = 0, K = 0;
  const uint8_t* a = nullptr;
  const uint8_t* b = nullptr;
  DType ta = DType::f32, tb = DType::f32;
  bool b_k_major = false;  // b is Bt: element (k, j) at j * K + k
  double scale = 1;        // A_scale * B_scale
};

// One output row with the requested columns (positions into the result vectors).
struct RowWork {
  int64_t row = 0;
  std::vector<std::pair<int64_t, size_t>> cols;  // (column, result position)
};

template <DType TA, DType TB>
void compute_rows(const Matmul& mm, const std::vector<RowWork>& rows, size_t first, size_t last,
                  ReferenceValues& out) {
  std::vector<double> arow(static_cast<size_t>(mm.K));
  std::vector<double> acc, acc_abs;
  for (size_t r = first; r < last; ++r) {
    const RowWork& w = rows[r];
    for (int64_t k = 0; k < mm.K; ++k) arow[k] = load<TA>(mm.a, w.row * mm.K + k);
    // Many columns of this row: accumulate the whole row with contiguous reads of B.
    // Few columns, or B K-major: one dot product each. Both sum over k in ascending order.
    const int64_t b_k = mm.b_k_major ? 1 : mm.N, b_j = mm.b_k_major ? mm.K : 1;
    if (!mm.b_k_major && static_cast<int64_t>(w.cols.size()) * 8 >= mm.N) {
      acc.assign(static_cast<size_t>(mm.N), 0.0);
      acc_abs.assign(static_cast<size_t>(mm.N), 0.0);
      for (int64_t k = 0; k < mm.K; ++k) {
        const double a = arow[k];
        const int64_t base = k * mm.N;
        for (int64_t j = 0; j < mm.N; ++j) {
          const double p = a * load<TB>(mm.b, base + j);
          acc[j] += p;
          acc_abs[j] += std::fabs(p);
        }
      }
      for (const auto& [j, pos] : w.cols) {
        out.value[pos] = acc[j];
        out.abs[pos] = acc_abs[j];
      }
    } else {
      for (const auto& [j, pos] : w.cols) {
        double s = 0, s_abs = 0;
        for (int64_t k = 0; k < mm.K; ++k) {
          const double p = arow[k] * load<TB>(mm.b, k * b_k + j * b_j);
          s += p;
          s_abs += std::fabs(p);
        }
        out.value[pos] = s;
        out.abs[pos] = s_abs;
      }
    }
  }
}

using RowsFn = void (*)(const Matmul&, const std::vector<RowWork>&, size_t, size_t,
                        ReferenceValues&);

template <DType TA>
RowsFn rows_fn_b(DType tb) {
  switch (tb) {
    case DType::f32:
      return &compute_rows<TA, DType::f32>;
    case DType::f16:
      return &compute_rows<TA, DType::f16>;
    case DType::bf16:
      return &compute_rows<TA, DType::bf16>;
    case DType::i32:
      return &compute_rows<TA, DType::i32>;
    case DType::e4m3:
      return &compute_rows<TA, DType::e4m3>;
  }
  return &compute_rows<TA, DType::f32>;
}

RowsFn rows_fn(DType ta, DType tb) {
  switch (ta) {
    case DType::f32:
      return rows_fn_b<DType::f32>(tb);
    case DType::f16:
      return rows_fn_b<DType::f16>(tb);
    case DType::bf16:
      return rows_fn_b<DType::bf16>(tb);
    case DType::i32:
      return rows_fn_b<DType::i32>(tb);
    case DType::e4m3:
      return rows_fn_b<DType::e4m3>(tb);
  }
  return rows_fn_b<DType::f32>(tb);
}

Result<ReferenceValues> matmul_values(const Matmul& mm, const std::vector<int64_t>& indices) {
  ReferenceValues out;
  out.value.assign(indices.size(), 0.0);
  out.abs.assign(indices.size(), 0.0);
  const int64_t total = mm.M * mm.N;
  std::vector<std::pair<int64_t, size_t>> order;  // (flat index, position), sorted by index
  order.reserve(indices.size());
  for (size_t p = 0; p < indices.size(); ++p) {
    int64_t idx = indices[p];
    if (idx < 0 || idx >= total) {
      return make_error(
          fmt::format("reference: index {} is outside output C of {} elements "
                      "(M={} x N={})",
                      idx, total, mm.M, mm.N));
    }
    order.emplace_back(idx, p);
  }
  std::sort(order.begin(), order.end());
  std::vector<RowWork> rows;
  for (const auto& [idx, pos] : order) {
    int64_t i = idx / mm.N, j = idx % mm.N;
    if (rows.empty() || rows.back().row != i) rows.push_back(RowWork{i, {}});
    rows.back().cols.emplace_back(j, pos);
  }
  if (rows.empty()) return out;

  RowsFn fn = rows_fn(mm.ta, mm.tb);
  // Work in multiply-adds; threads only when it pays (each row writes disjoint positions).
  double work = 0;
  for (const auto& w : rows) {
    work += static_cast<double>(mm.K) *
            (static_cast<int64_t>(w.cols.size()) * 8 >= mm.N ? mm.N : w.cols.size());
  }
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  size_t nthreads = std::min<size_t>({hw, 32, rows.size(), static_cast<size_t>(work / 4e6) + 1});
  if (nthreads <= 1) {
    fn(mm, rows, 0, rows.size(), out);
  } else {
    std::vector<std::thread> threads;
    for (size_t t = 0; t < nthreads; ++t) {
      size_t first = rows.size() * t / nthreads, last = rows.size() * (t + 1) / nthreads;
      threads.emplace_back([&, first, last] { fn(mm, rows, first, last, out); });
    }
    for (auto& th : threads) th.join();
  }
  if (mm.scale != 1) {
    for (double& v : out.value) v *= mm.scale;
    for (double& v : out.abs) v *= std::fabs(mm.scale);
  }
  return out;
}

}  // namespace

Status check_convention(const KernelContext& ctx) {
  for (std::string_view s : {"M", "N", "K"}) {
    if (!has_scalar(ctx, s)) {
      return Status::error(fmt::format("no scalar {}; {}", s, kMatmulConvention));
    }
  }
  if (find_array(ctx, "B") && find_array(ctx, "Bt"))
    return Status::error(
        fmt::format("arrays B and Bt are both given: one holds B; {}", kMatmulConvention));
  if (has_scales(ctx) != (find_array(ctx, "B_scale") != nullptr))
    return Status::error(
        fmt::format("A_scale and B_scale come together or not at all; {}", kMatmulConvention));
  for (const auto& [name, n] : operands(ctx, 1, 1, 1, true)) {
    const ArraySpec* a = find_array(ctx, name);
    if (!a) return Status::error(fmt::format("no array {}; {}", name, kMatmulConvention));
    if ((name == "C") != a->output) {
      return Status::error(fmt::format("array {} must {}be an output; {}", name,
                                       name == "C" ? "" : "not ", kMatmulConvention));
    }
  }
  for (const auto& a : ctx.arrays) {
    if (a.output && a.name != "C") {
      return Status::error(
          fmt::format("array {} is an output, but the matmul reference computes "
                      "only C; {}",
                      a.name, kMatmulConvention));
    }
  }
  // Sizes are expressions; compare them on two probe shapes of distinct primes (other scalars 1).
  const int64_t probes[2][3] = {{3, 5, 7}, {11, 13, 17}};
  for (const auto& p : probes) {
    Shape shape;
    for (const auto& s : ctx.scalars) shape.values[s.name] = 1;
    shape.values["M"] = p[0];
    shape.values["N"] = p[1];
    shape.values["K"] = p[2];
    if (Status s = check_matmul_sizes(ctx, shape, p[0], p[1], p[2]); !s) return s;
  }
  return Status::ok();
}

Result<std::map<std::string, ReferenceValues>> reference_values(const KernelContext& ctx,
                                                                const Shape& shape,
                                                                const ReferenceInputs& inputs,
                                                                const ReferenceIndices& indices) {
  if (Status s = check_convention(ctx); !s) {
    return make_error(fmt::format("context '{}': {}", ctx.name, s.message()));
  }
  Matmul mm;
  for (auto [name, field] : {std::pair{"M", &mm.M}, std::pair{"N", &mm.N}, std::pair{"K", &mm.K}}) {
    auto it = shape.values.find(name);
    if (it == shape.values.end()) {
      return make_error(
          fmt::format("reference: shape '{}' gives no value to {}", shape.text(), name));
    }
    if (it->second < 0) {
      return make_error(fmt::format("reference: {} = {} is negative", name, it->second));
    }
    *field = it->second;
  }
  if (Status s = check_matmul_sizes(ctx, shape, mm.M, mm.N, mm.K); !s) {
    return make_error("reference: " + s.message());
  }
  const std::string bn(b_name(ctx));
  for (const auto& [name, count] : operands(ctx, mm.M, mm.N, mm.K, false)) {
    const ArraySpec* spec = find_array(ctx, name);
    auto it = inputs.find(name);
    if (it == inputs.end()) return make_error(fmt::format("reference: input {} is missing", name));
    const size_t want = static_cast<size_t>(count) * dtype_size(spec->dtype);
    if (it->second.size() != want) {
      return make_error(fmt::format("reference: input {} has {} bytes; {} elements of {} need {}",
                                    name, it->second.size(), count, to_string(spec->dtype), want));
    }
  }
  mm.a = inputs.at("A").data();
  mm.b = inputs.at(bn).data();
  mm.ta = find_array(ctx, "A")->dtype;
  mm.tb = find_array(ctx, bn)->dtype;
  mm.b_k_major = bn == "Bt";
  if (has_scales(ctx)) {
    mm.scale =
        element_as_double(find_array(ctx, "A_scale")->dtype, inputs.at("A_scale").data(), 0) *
        element_as_double(find_array(ctx, "B_scale")->dtype, inputs.at("B_scale").data(), 0);
  }

  std::map<std::string, ReferenceValues> out;
  for (const auto& [name, idx] : indices) {
    if (name != "C") {
      return make_error(
          fmt::format("reference: '{}' is not the output of this matmul (only C is)", name));
    }
    auto r = matmul_values(mm, idx);
    if (!r) return Error{r.error()};
    out[name] = std::move(*r);
  }
  return out;
}

}  // namespace peak::matmul
