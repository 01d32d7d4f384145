#include "family/attention/attention.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "context/inputs.h"
#include "family/reference_support.h"

namespace peak::attention {

namespace {

constexpr const char* kConvention =
    "family \"attention\" needs inputs Q (size B * H * SQ * D), K and V (size B * H * SKV * D) "
    "and output O (size B * H * SQ * D), [batch, heads, sequence, head_dim] row-major, of f32, "
    "f16 or bf16, and scalars B, H, SQ, SKV, D and CAUSAL: O[b, h, i, :] = sum over j of "
    "softmax over j of (Q[b, h, i, :] . K[b, h, j, :]) / sqrt(D) times V[b, h, j, :], the keys "
    "j > i + SKV - SQ masked when CAUSAL is nonzero";
constexpr const char* kScalars[] = {"B", "H", "SQ", "SKV", "D", "CAUSAL"};

struct Dims {
  int64_t B = 0, H = 0, SQ = 0, SKV = 0, D = 0;
  bool causal = false;
  int64_t query_rows() const { return B * H * SQ; }
  // The keys query row i attends: 0 .. keys(i) - 1.
  int64_t keys(int64_t i) const {
    return causal ? std::clamp<int64_t>(i + SKV - SQ + 1, 0, SKV) : SKV;
  }
};

Result<Dims> dims_of(const Shape& shape) {
  int64_t v[6];
  for (int k = 0; k < 6; ++k) {
    auto x = reference_scalar(shape, kScalars[k]);
    if (!x) return Error{x.error()};
    v[k] = *x;
  }
  return Dims{v[0], v[1], v[2], v[3], v[4], v[5] != 0};
}

std::vector<std::pair<std::string, int64_t>> expected_sizes(const Dims& d) {
  const int64_t kv = d.B * d.H * d.SKV * d.D;
  return {{"Q", d.query_rows() * d.D}, {"K", kv}, {"V", kv}, {"O", d.query_rows() * d.D}};
}

Status check_sizes(const KernelContext& ctx, const Shape& shape, const Dims& d) {
  auto sizes = array_sizes(ctx, shape);
  if (!sizes) return Status::error(sizes.error());
  for (const auto& [name, n] : expected_sizes(d)) {
    const int64_t got = sizes->at(name);
    if (got != n)
      return Status::error(fmt::format("array {} has size \"{}\" = {} at {}, not {}; {}", name,
                                       find_array(ctx, name)->size, got, shape.text(), n,
                                       kConvention));
  }
  return Status::ok();
}

Status check_arrays(const KernelContext& ctx) {
  for (const char* name : {"Q", "K", "V", "O"}) {
    const ArraySpec* a = find_array(ctx, name);
    if (!a) return Status::error(fmt::format("no array {}; {}", name, kConvention));
    const bool out = std::string_view(name) == "O";
    if (out != a->output)
      return Status::error(
          fmt::format("array {} must {}be an output; {}", name, out ? "" : "not ", kConvention));
    if (!is_floating(a->dtype))
      return Status::error(
          fmt::format("array {} is {}; {}", name, to_string(a->dtype), kConvention));
  }
  for (const auto& a : ctx.arrays)
    if (a.output && a.name != "O")
      return Status::error(
          fmt::format("array {} is an output, but the attention reference computes only O; {}",
                      a.name, kConvention));
  return Status::ok();
}

Status check_inputs(const KernelContext& ctx, const ReferenceInputs& inputs, const Dims& d) {
  auto counts = expected_sizes(d);
  counts.pop_back();  // O
  return check_reference_inputs(ctx, inputs, counts);
}

// The query rows of O asked for (row (b * H + h) * SQ + i), in ascending order, each with its
// columns.
Result<std::vector<RowRequest>> requested_rows(const std::vector<int64_t>& indices, const Dims& d) {
  return group_by_row(indices, d.query_rows(), d.D,
                      fmt::format("output O of {} elements (B={} H={} SQ={} D={})",
                                  d.query_rows() * d.D, d.B, d.H, d.SQ, d.D));
}

// Typed input bytes read as float64.
struct Typed {
  DType t;
  const uint8_t* p;
  double at(int64_t i) const { return element_as_double(t, p, i); }
};

// One query row: its scores against the keys it attends (exact float64 dot products of the
// stored values), softmax, then each requested column of P V and its magnitude.
void compute_row(const Dims& d, const Typed& q, const Typed& k, const Typed& v, const RowRequest& r,
                 ReferenceValues& out) {
  const int64_t bh = r.row / d.SQ, i = r.row % d.SQ, keys = d.keys(i);
  if (keys == 0) {  // every key masked: the row is 0
    for (const auto& [c, pos] : r.cols) out.value[pos] = out.abs[pos] = 0;
    return;
  }
  std::vector<double> qrow(static_cast<size_t>(d.D));
  for (int64_t e = 0; e < d.D; ++e) qrow[e] = q.at(r.row * d.D + e);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d.D));
  std::vector<double> p(static_cast<size_t>(keys));
  double max = -INFINITY;
  for (int64_t j = 0; j < keys; ++j) {
    const int64_t base = (bh * d.SKV + j) * d.D;
    double s = 0;
    for (int64_t e = 0; e < d.D; ++e) s += qrow[e] * k.at(base + e);
    p[j] = s * scale;
    max = std::max(max, p[j]);
  }
  double sum = 0;
  for (double& x : p) sum += (x = std::exp(x - max));
  for (const auto& [c, pos] : r.cols) {
    double acc = 0, mag = 0;
    for (int64_t j = 0; j < keys; ++j) {
      const double x = v.at((bh * d.SKV + j) * d.D + c);
      acc += p[j] * x;
      mag += p[j] * std::abs(x);
    }
    out.value[pos] = acc / sum;
    out.abs[pos] = mag / sum;
  }
}

}  // namespace

Status AttentionFamily::check_cpu_reference(const KernelContext& ctx) const {
  for (const char* s : kScalars)
    if (!has_scalar(ctx, s)) return Status::error(fmt::format("no scalar {}; {}", s, kConvention));
  if (Status s = check_arrays(ctx); !s) return s;
  // Sizes are expressions: compare them on two probe shapes of distinct primes.
  for (const Dims& d : {Dims{2, 3, 5, 7, 11, false}, Dims{13, 17, 19, 23, 29, true}}) {
    Shape shape;
    for (const auto& s : ctx.scalars) shape.values[s.name] = 1;
    shape.values["B"] = d.B;
    shape.values["H"] = d.H;
    shape.values["SQ"] = d.SQ;
    shape.values["SKV"] = d.SKV;
    shape.values["D"] = d.D;
    shape.values["CAUSAL"] = d.causal ? 1 : 0;
    if (Status s = check_sizes(ctx, shape, d); !s) return s;
  }
  return Status::ok();
}

Result<std::map<std::string, ReferenceValues>> AttentionFamily::cpu_reference(
    const KernelContext& ctx, const Shape& shape, const ReferenceInputs& inputs,
    const ReferenceIndices& indices) const {
  if (Status s = check_cpu_reference(ctx); !s)
    return make_error(fmt::format("context '{}': {}", ctx.name, s.message()));
  auto d = dims_of(shape);
  if (!d) return Error{d.error()};
  if (Status s = check_sizes(ctx, shape, *d); !s) return make_error("reference: " + s.message());
  if (Status s = check_inputs(ctx, inputs, *d); !s) return make_error(s.message());
  const Typed q{find_array(ctx, "Q")->dtype, inputs.at("Q").data()};
  const Typed k{find_array(ctx, "K")->dtype, inputs.at("K").data()};
  const Typed v{find_array(ctx, "V")->dtype, inputs.at("V").data()};
  std::map<std::string, ReferenceValues> out;
  for (const auto& [name, idx] : indices) {
    if (name != "O")
      return make_error(
          fmt::format("reference: '{}' is not the output of attention (only O is)", name));
    auto rows = requested_rows(idx, *d);
    if (!rows) return Error{rows.error()};
    ReferenceValues& res = out[name];
    res.value.assign(idx.size(), 0.0);
    res.abs.assign(idx.size(), 0.0);
    auto work = [&](size_t first, size_t last) {
      for (size_t r = first; r < last; ++r) compute_row(*d, q, k, v, (*rows)[r], res);
    };
    // Each query row writes positions of its own.
    for_rows(
        rows->size(),
        static_cast<double>(rows->size()) * static_cast<double>(d->SKV) * static_cast<double>(d->D),
        work);
  }
  return out;
}

std::optional<ReferenceIndices> AttentionFamily::reference_reads(
    const KernelContext&, const Shape& shape, const ReferenceIndices& indices) const {
  auto d = dims_of(shape);
  auto o = indices.find("O");
  if (!d || o == indices.end()) return std::nullopt;
  auto rows = requested_rows(o->second, *d);  // a bad index: every input whole, for the reference
  if (!rows) return std::nullopt;
  ReferenceIndices reads;
  auto& q = reads["Q"];
  std::set<int64_t> pairs;  // b * H + h
  for (const RowRequest& r : *rows) {
    for (int64_t e = 0; e < d->D; ++e) q.push_back(r.row * d->D + e);
    pairs.insert(r.row / d->SQ);
  }
  // K and V of every (batch, head) pair asked for; read whole when that is half of them or more.
  if (2 * static_cast<int64_t>(pairs.size()) < d->B * d->H) {
    const int64_t slice = d->SKV * d->D;  // elements of one pair's K (or V)
    auto& k = reads["K"];
    k.resize(pairs.size() * static_cast<size_t>(slice));
    auto at = k.begin();
    for (int64_t bh : pairs) {
      std::iota(at, at + slice, bh * slice);
      at += slice;
    }
    reads["V"] = k;
  }
  return reads;
}

std::vector<int64_t> AttentionFamily::output_dims(const KernelContext&, const Shape& shape) const {
  auto d = dims_of(shape);
  if (!d) return {};
  return {d->query_rows(), d->D};
}

double AttentionFamily::default_tolerance(const KernelContext& ctx, const Shape& shape,
                                          const ArraySpec& output) const {
  const ArraySpec* q = find_array(ctx, "Q");
  auto skv = shape.values.find("SKV");
  if (!q || skv == shape.values.end()) return Family::default_tolerance(ctx, shape, output);
  return peak::default_tolerance(q->dtype, output.dtype, skv->second) + dtype_epsilon(q->dtype);
}

std::string AttentionFamily::baseline_name(std::string_view backend) const {
  return backend == "cuda" ? "cudnn" : "";
}

std::string AttentionFamily::baseline(const KernelContext& ctx, std::string_view backend) const {
  const ArraySpec* q = find_array(ctx, "Q");
  if (!q || (q->dtype != DType::f16 && q->dtype != DType::bf16)) return "";
  for (const char* name : {"K", "V", "O"}) {
    const ArraySpec* a = find_array(ctx, name);
    if (!a || a->dtype != q->dtype) return "";
  }
  return baseline_name(backend);
}

std::vector<ClassRule> AttentionFamily::default_class_rules(const KernelContext& ctx) const {
  if (!has_scalar(ctx, "SQ")) return {};
  return {{SuiteClass::decode, "SQ <= 16"}, {SuiteClass::regular, ""}};
}

const Family& family() {
  static const AttentionFamily f;
  return f;
}

}  // namespace peak::attention
