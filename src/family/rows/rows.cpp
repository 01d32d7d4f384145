#include "family/rows/rows.h"

#include <algorithm>

#include <fmt/format.h>

#include "context/inputs.h"
#include "family/reference_support.h"

namespace peak::rows {

namespace {

// "family "rmsnorm" needs input X (size R * N), input W (size N), output Y (size R * N), ...".
std::string convention(const RowFamily& f) {
  std::string inputs = "input X (size R * N)";
  for (std::string_view c : f.column_inputs()) inputs += fmt::format(", input {} (size N)", c);
  return fmt::format(
      "family \"{}\" needs {}, output Y (size R * N), row-major, of f32, f16 or bf16, and "
      "scalars R (rows) and N (row length): {}",
      f.name(), inputs, f.formula());
}

// Each array of the convention with its element count at R x N.
std::vector<std::pair<std::string, int64_t>> expected_sizes(const RowFamily& f, int64_t R,
                                                            int64_t N) {
  std::vector<std::pair<std::string, int64_t>> out{{"X", R * N}};
  for (std::string_view c : f.column_inputs()) out.emplace_back(std::string(c), N);
  out.emplace_back("Y", R * N);
  return out;
}

Status check_sizes(const RowFamily& f, const KernelContext& ctx, const Shape& shape, int64_t R,
                   int64_t N) {
  auto sizes = array_sizes(ctx, shape);
  if (!sizes) return Status::error(sizes.error());
  for (const auto& [name, n] : expected_sizes(f, R, N)) {
    int64_t got = sizes->at(name);
    if (got != n)
      return Status::error(fmt::format("array {} has size \"{}\" = {} for R={} N={}, not {}; {}",
                                       name, find_array(ctx, name)->size, got, R, N, n,
                                       convention(f)));
  }
  return Status::ok();
}

// The roles of the arrays: each present, an output exactly when it is Y, floating.
Status check_arrays(const RowFamily& f, const KernelContext& ctx) {
  for (const auto& [name, n] : expected_sizes(f, 1, 1)) {
    const ArraySpec* a = find_array(ctx, name);
    if (!a) return Status::error(fmt::format("no array {}; {}", name, convention(f)));
    if ((name == "Y") != a->output)
      return Status::error(fmt::format("array {} must {}be an output; {}", name,
                                       name == "Y" ? "" : "not ", convention(f)));
    if (!is_floating(a->dtype))
      return Status::error(
          fmt::format("array {} is {}; {}", name, to_string(a->dtype), convention(f)));
  }
  for (const auto& a : ctx.arrays)
    if (a.output && a.name != "Y")
      return Status::error(
          fmt::format("array {} is an output, but the {} reference computes only Y; {}", a.name,
                      f.name(), convention(f)));
  return Status::ok();
}

// The rows of Y asked for, in ascending order, each with its columns.
Result<std::vector<RowRequest>> rows_of_y(const std::vector<int64_t>& indices, int64_t R,
                                          int64_t N) {
  return group_by_row(indices, R, N,
                      fmt::format("output Y of {} elements (R={} x N={})", R * N, R, N));
}

std::vector<double> as_doubles(DType t, const uint8_t* p, int64_t first, int64_t count) {
  std::vector<double> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[i] = element_as_double(t, p, first + i);
  return v;
}

// The input bytes of each array of the convention but Y, checked against its count.
Status check_inputs(const RowFamily& f, const KernelContext& ctx, const ReferenceInputs& inputs,
                    int64_t R, int64_t N) {
  auto counts = expected_sizes(f, R, N);
  counts.pop_back();  // Y
  return check_reference_inputs(ctx, inputs, counts);
}

}  // namespace

Status RowFamily::check_cpu_reference(const KernelContext& ctx) const {
  for (std::string_view s : {"R", "N"})
    if (!has_scalar(ctx, s))
      return Status::error(fmt::format("no scalar {}; {}", s, convention(*this)));
  if (Status s = check_arrays(*this, ctx); !s) return s;
  // Sizes are expressions: compare them on two probe shapes of distinct primes (other scalars 1).
  for (auto [r, n] : {std::pair<int64_t, int64_t>{3, 5}, {11, 13}}) {
    Shape shape;
    for (const auto& s : ctx.scalars) shape.values[s.name] = 1;
    shape.values["R"] = r;
    shape.values["N"] = n;
    if (Status s = check_sizes(*this, ctx, shape, r, n); !s) return s;
  }
  return Status::ok();
}

Result<std::map<std::string, ReferenceValues>> RowFamily::cpu_reference(
    const KernelContext& ctx, const Shape& shape, const ReferenceInputs& inputs,
    const ReferenceIndices& indices) const {
  if (Status s = check_cpu_reference(ctx); !s)
    return make_error(fmt::format("context '{}': {}", ctx.name, s.message()));
  auto R = reference_scalar(shape, "R"), N = reference_scalar(shape, "N");
  if (!R) return Error{R.error()};
  if (!N) return Error{N.error()};
  if (Status s = check_sizes(*this, ctx, shape, *R, *N); !s)
    return make_error("reference: " + s.message());
  if (Status s = check_inputs(*this, ctx, inputs, *R, *N); !s) return make_error(s.message());
  const ArraySpec* x_spec = find_array(ctx, "X");
  std::vector<std::vector<double>> columns;
  for (std::string_view c : column_inputs())
    columns.push_back(
        as_doubles(find_array(ctx, c)->dtype, inputs.at(std::string(c)).data(), 0, *N));
  std::map<std::string, ReferenceValues> out;
  for (const auto& [name, idx] : indices) {
    if (name != "Y")
      return make_error(fmt::format("reference: '{}' is not the output of this {} (only Y is)",
                                    name, this->name()));
    auto rows = rows_of_y(idx, *R, *N);
    if (!rows) return Error{rows.error()};
    ReferenceValues& v = out[name];
    v.value.assign(idx.size(), 0.0);
    v.abs.assign(idx.size(), 0.0);
    auto work = [&](size_t first, size_t last) {
      for (size_t r = first; r < last; ++r) {
        const RowRequest& q = (*rows)[r];
        auto x = as_doubles(x_spec->dtype, inputs.at("X").data(), q.row * *N, *N);
        compute_row(x, columns, q, v);
      }
    };
    // Each row writes positions of its own.
    for_rows(rows->size(), static_cast<double>(rows->size()) * static_cast<double>(*N), work);
  }
  return out;
}

std::optional<ReferenceIndices> RowFamily::reference_reads(const KernelContext&, const Shape& shape,
                                                           const ReferenceIndices& indices) const {
  auto R = reference_scalar(shape, "R"), N = reference_scalar(shape, "N");
  auto y = indices.find("Y");
  if (!R || !N || y == indices.end()) return std::nullopt;
  // The rows cpu_reference reads, as it groups them (a bad index: every input whole, and the
  // reference says what is wrong).
  auto rows = rows_of_y(y->second, *R, *N);
  if (!rows) return std::nullopt;
  ReferenceIndices reads;
  auto& x = reads["X"];
  x.reserve(rows->size() * static_cast<size_t>(*N));
  for (const RowRequest& q : *rows)
    for (int64_t c = 0; c < *N; ++c) x.push_back(q.row * *N + c);
  return reads;
}

std::vector<int64_t> RowFamily::output_dims(const KernelContext&, const Shape& shape) const {
  auto r = shape.values.find("R"), n = shape.values.find("N");
  if (r != shape.values.end() && n != shape.values.end()) return {r->second, n->second};
  return {};
}

double RowFamily::default_tolerance(const KernelContext& ctx, const Shape& shape,
                                    const ArraySpec& output) const {
  const ArraySpec* x = find_array(ctx, "X");
  auto n = shape.values.find("N");
  if (!x || n == shape.values.end()) return Family::default_tolerance(ctx, shape, output);
  return peak::default_tolerance(x->dtype, output.dtype, n->second);
}

std::string RowFamily::baseline_name(std::string_view backend) const {
  return backend == "cuda" ? "cudnn" : "";
}

std::string RowFamily::baseline(const KernelContext& ctx, std::string_view backend) const {
  const ArraySpec* x = find_array(ctx, "X");
  const ArraySpec* y = find_array(ctx, "Y");
  if (!x || !y || !y->output || x->dtype != y->dtype || !is_floating(x->dtype)) return "";
  for (std::string_view c : column_inputs()) {
    const ArraySpec* a = find_array(ctx, c);
    if (!a || (a->dtype != x->dtype && a->dtype != DType::f32)) return "";
  }
  return baseline_name(backend);
}

std::vector<ClassRule> RowFamily::default_class_rules(const KernelContext& ctx) const {
  if (!has_scalar(ctx, "R") || !has_scalar(ctx, "N")) return {};
  // The paths a row kernel dispatches between. Few rows (LLM decode) leave most of the GPU idle
  // with a row per warp or block: the fast path splits each row over a block or several. Rows of
  // up to 1024 elements fit a warp's registers (32 lanes x 32): a warp or less per row, no
  // shared memory, no block barrier. Vocabulary-sized rows (32000 and up: logits) do not fit a
  // block's registers: they are streamed in passes or online, or split across blocks. The rest
  // is a block per row with the row held between the reduction and the write.
  return {{SuiteClass::decode, "R <= 16"},
          {SuiteClass::short_rows, "N <= 1024"},
          {SuiteClass::long_rows, "N >= 32000"},
          {SuiteClass::regular, ""}};
}

}  // namespace peak::rows
