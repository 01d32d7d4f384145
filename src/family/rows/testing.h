#pragma once
// What the tests of the row families share: a context of the family's convention, typed input
// bytes, a shape of R rows of N, and the reference of every element.
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "context/inputs.h"
#include "family/family.h"

namespace peak::rows::testing {

// A context of `family` with input X, the per-column inputs `columns` (N each) and output Y, all
// of `dtype` unless `column_dtype` is given, and scalars R and N.
inline KernelContext row_context(std::string_view family, std::vector<std::string> columns,
                                 std::string_view dtype = "f32",
                                 std::string_view column_dtype = "") {
  if (column_dtype.empty()) column_dtype = dtype;
  std::string t = fmt::format(
      "name = \"{0}\"\nbackend = \"cuda\"\nfamily = \"{0}\"\nsource = \"k.cu\"\n"
      "[[arrays]]\nname = \"X\"\ndtype = \"{1}\"\nsize = \"R * N\"\n",
      family, dtype);
  for (const auto& c : columns)
    t += fmt::format("[[arrays]]\nname = \"{}\"\ndtype = \"{}\"\nsize = \"N\"\n", c, column_dtype);
  t += fmt::format("[[arrays]]\nname = \"Y\"\ndtype = \"{}\"\nsize = \"R * N\"\noutput = true\n",
                   dtype);
  t += "[[scalars]]\nname = \"R\"\n[[scalars]]\nname = \"N\"\n";
  auto r = parse_context(t, "kernel.toml");
  EXPECT_TRUE(r.is_ok()) << (r ? "" : r.error());
  return r ? *r : KernelContext{};
}

inline Shape rn(int64_t r, int64_t n) { return Shape{{{"R", r}, {"N", n}}}; }

// The values as stored in `dtype` (rounded), and their bytes.
inline std::vector<uint8_t> typed_bytes(DType dtype, const std::vector<double>& v) {
  std::vector<uint8_t> b(v.size() * dtype_size(dtype));
  for (size_t i = 0; i < v.size(); ++i) {
    const float f = static_cast<float>(v[i]);
    if (dtype == DType::f32) {
      std::memcpy(&b[i * 4], &f, 4);
    } else {
      uint16_t h = dtype == DType::f16 ? float_to_half(f) : float_to_bf16(f);
      std::memcpy(&b[i * 2], &h, 2);
    }
  }
  return b;
}

// Deterministic values in [lo, hi) that are not all alike.
inline std::vector<double> some_values(size_t n, double lo, double hi, uint32_t seed = 1) {
  std::vector<double> v(n);
  uint32_t s = seed * 2654435761u + 12345u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = lo + (hi - lo) * (s >> 8) / double(1u << 24);
  }
  return v;
}

// Every element of Y at R x N.
inline Result<ReferenceValues> all_of_y(const KernelContext& ctx, int64_t R, int64_t N,
                                        const ReferenceInputs& in) {
  std::vector<int64_t> idx(static_cast<size_t>(R * N));
  for (int64_t i = 0; i < R * N; ++i) idx[i] = i;
  auto r = family_of(ctx).cpu_reference(ctx, rn(R, N), in, {{"Y", idx}});
  if (!r) return Error{r.error()};
  return r->at("Y");
}

// The message of a failed reference call, "" when it succeeded.
inline std::string reference_error(const KernelContext& ctx, const Shape& shape,
                                   const ReferenceInputs& in, const ReferenceIndices& idx) {
  auto r = family_of(ctx).cpu_reference(ctx, shape, in, idx);
  return r ? "" : r.error();
}

}  // namespace peak::rows::testing
