#include "family/family.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "context/reference_rules.h"
#include "expr/expr.h"
#include "family/attention/attention.h"
#include "family/layernorm/layernorm.h"
#include "family/matmul/matmul.h"
#include "family/reference_support.h"
#include "family/rmsnorm/rmsnorm.h"
#include "family/softmax/softmax.h"

namespace peak {

std::string_view to_string(Headline h) { return h == Headline::flops ? "FLOP/s" : "bytes/s"; }

// ---- The defaults of a family: those of the generic family ----

Status Family::check_cpu_reference(const KernelContext& ctx) const {
  return Status::error(
      fmt::format("family '{}' has no CPU reference (matmul, softmax, rmsnorm, layernorm and "
                  "attention have); use "
                  "reference = \"seed\"",
                  ctx.family));
}

Result<std::map<std::string, ReferenceValues>> Family::cpu_reference(
    const KernelContext& ctx, const Shape&, const ReferenceInputs&, const ReferenceIndices&) const {
  return make_error(fmt::format("context '{}': {}", ctx.name, check_cpu_reference(ctx).message()));
}

std::optional<ReferenceIndices> Family::reference_reads(const KernelContext&, const Shape&,
                                                        const ReferenceIndices&) const {
  return std::nullopt;
}

std::vector<int64_t> Family::output_dims(const KernelContext&, const Shape&) const { return {}; }

double Family::default_tolerance(const KernelContext& ctx, const Shape& shape,
                                 const ArraySpec& output) const {
  DType in_type = DType::f32;
  for (const auto& a : ctx.arrays)
    if (!a.output) {
      in_type = a.dtype;
      break;
    }
  return peak::default_tolerance(in_type, output.dtype, reduction_length(ctx, shape));
}

std::string Family::baseline_name(std::string_view) const { return ""; }

bool Family::has_baseline(std::string_view name, std::string_view backend) const {
  return !name.empty() && name == baseline_name(backend);
}

std::string Family::baseline(const KernelContext&, std::string_view backend) const {
  return baseline_name(backend);
}

Headline Family::headline(const KernelContext& ctx) const {
  return ctx.flops.empty() ? Headline::bytes : Headline::flops;
}

std::vector<ClassRule> Family::default_class_rules(const KernelContext&) const { return {}; }

std::optional<TileWork> Family::tile_work(const KernelContext&, const Shape&) const {
  return std::nullopt;
}

// ---- The registry ----

namespace {

class GenericFamily final : public Family {
 public:
  std::string_view name() const override { return ""; }
};

std::vector<const Family*>& members() {
  static std::vector<const Family*> m{&matmul::family(), &softmax::family(), &rmsnorm::family(),
                                      &layernorm::family(), &attention::family()};
  return m;
}

bool named_has_cpu_reference(const std::string& family) {
  return find_family(family).has_cpu_reference();
}

// Parsing (context/) asks the registry through these rules: installed before main, in every
// program this file is linked into.
struct InstallReferenceRules {
  InstallReferenceRules() {
    install_reference_rules({&named_has_cpu_reference, &peak::check_cpu_reference});
  }
} const install_reference_rules_at_start;

}  // namespace

// The symbol every program linking context/ asks the linker for (CMakeLists.txt), so that this
// object, with the initializer above, is part of it.
extern "C" {
extern const int peak_family_registry_anchor;
const int peak_family_registry_anchor = 0;
}

const Family& find_family(std::string_view name) {
  static const GenericFamily generic;
  if (name.empty()) return generic;
  const auto& m = members();
  auto it = std::find_if(m.rbegin(), m.rend(), [&](const Family* f) { return f->name() == name; });
  return it == m.rend() ? generic : **it;
}

const Family& family_of(const KernelContext& ctx) { return find_family(ctx.family); }

void register_family(const Family& family) { members().push_back(&family); }

// ---- What the callers use ----

double default_tolerance(DType input, DType output, int64_t reduction) {
  // e4m3: the tensor cores' fp8 accumulation keeps fewer bits than fp32 (about 14 on Hopper).
  double c = input == DType::e4m3                            ? 1e-4
             : (input == DType::f16 || input == DType::bf16) ? 1e-5
                                                             : 1e-6;
  double r = std::sqrt(static_cast<double>(std::max<int64_t>(reduction, 1)));
  if (input == DType::i32 && output == DType::i32) return 0;
  return c * r + 2 * dtype_epsilon(output);
}

int64_t reduction_length(const KernelContext& ctx, const Shape& shape) {
  int64_t reduction = 1;
  if (!ctx.reduction.empty()) {
    if (auto env = shape_env(ctx, shape)) {
      if (auto r = expr::evaluate(ctx.reduction, *env)) reduction = *r;
    }
  }
  return reduction;
}

bool has_cpu_reference(const std::string& family) { return named_has_cpu_reference(family); }

Status check_cpu_reference(const KernelContext& ctx) {
  return family_of(ctx).check_cpu_reference(ctx);
}

Result<std::map<std::string, ReferenceValues>> cpu_reference_values(
    const KernelContext& ctx, const Shape& shape, const ReferenceInputs& inputs,
    const ReferenceIndices& indices) {
  return family_of(ctx).cpu_reference(ctx, shape, inputs, indices);
}

namespace {

// One part of each output's reference values: the values or their magnitudes.
Result<std::map<std::string, std::vector<double>>> reference_part(
    const KernelContext& ctx, const Shape& shape, const ReferenceInputs& inputs,
    const ReferenceIndices& indices, std::vector<double> ReferenceValues::*part) {
  auto r = cpu_reference_values(ctx, shape, inputs, indices);
  if (!r) return Error{r.error()};
  std::map<std::string, std::vector<double>> out;
  for (auto& [name, v] : *r) out[name] = std::move(v.*part);
  return out;
}

}  // namespace

Result<std::map<std::string, std::vector<double>>> cpu_reference(const KernelContext& ctx,
                                                                 const Shape& shape,
                                                                 const ReferenceInputs& inputs,
                                                                 const ReferenceIndices& indices) {
  return reference_part(ctx, shape, inputs, indices, &ReferenceValues::value);
}

Result<std::map<std::string, std::vector<double>>> cpu_reference_abs(
    const KernelContext& ctx, const Shape& shape, const ReferenceInputs& inputs,
    const ReferenceIndices& indices) {
  return reference_part(ctx, shape, inputs, indices, &ReferenceValues::abs);
}

std::vector<ClassRule> class_rules(const KernelContext& ctx) {
  if (!ctx.classes.empty()) return ctx.classes;
  return family_of(ctx).default_class_rules(ctx);
}

Result<std::optional<SuiteClass>> classify_shape(const KernelContext& ctx, const Shape& shape) {
  return classify_shape(class_rules(ctx), ctx, shape);
}

const ArraySpec* find_array(const KernelContext& ctx, std::string_view name) {
  for (const auto& a : ctx.arrays)
    if (a.name == name) return &a;
  return nullptr;
}

bool has_scalar(const KernelContext& ctx, std::string_view name) {
  return std::any_of(ctx.scalars.begin(), ctx.scalars.end(),
                     [&](const ScalarSpec& s) { return s.name == name; });
}

}  // namespace peak
