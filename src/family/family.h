#pragma once
// Kernel families: what peak knows of a kind of kernel beyond its kernel.toml. A context names
// its family (`family = "matmul"`); the family says whether a float64 CPU reference exists and
// computes it, how tolerances scale, which vendor library a backend's runner times as the
// baseline, whether the headline rate is FLOP/s or bytes/s, the default shape classes of the
// suite, and the output-tile model tuning estimates with. A context that names no family, or one
// peak does not know, gets the generic family: none of these, headline FLOP/s when the context
// gives flops. docs/families.md describes the members and how to add one.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "context/context.h"

namespace peak {

// The rate a family's results are headlined with.
enum class Headline { flops, bytes };  // FLOP/s (`flops` of kernel.toml) or bytes/s (`bytes`)
std::string_view to_string(Headline h);

// CPU reference values of one output at requested elements (aligned with the indices asked).
struct ReferenceValues {
  std::vector<double> value;  // the float64 result
  std::vector<double> abs;    // the scale of the rounding error (matmul: sum_k |a_ik * b_kj|)
};
using ReferenceInputs = std::map<std::string, std::vector<uint8_t>>;   // input array -> bytes
using ReferenceIndices = std::map<std::string, std::vector<int64_t>>;  // output -> flat indices

// The output tile the tuning model reasons about (tune/prune.h): an M x N output, each element
// reduced over K, inputs of `element_bytes`.
struct TileWork {
  double m = 0, n = 0, k = 0, element_bytes = 4;
};

class Family {
 public:
  virtual ~Family() = default;
  // "matmul"; "" for the generic family.
  virtual std::string_view name() const = 0;

  // ---- CPU reference ----
  virtual bool has_cpu_reference() const { return false; }
  // Checks that `ctx` follows the convention of this family's CPU reference; an error says what
  // differs (or that the family has none).
  virtual Status check_cpu_reference(const KernelContext& ctx) const;
  // Values at `indices` of each output named there, in float64 from the typed input bytes;
  // fails when the context breaks the convention, an input is missing or an index is outside.
  virtual Result<std::map<std::string, ReferenceValues>> cpu_reference(
      const KernelContext& ctx, const Shape& shape, const ReferenceInputs& inputs,
      const ReferenceIndices& indices) const;
  // The input elements (flat indices per input array) that cpu_reference reads for the outputs
  // at `indices`: the timed checks generate those alone. An array left out is read whole; none
  // (the default): every input whole.
  virtual std::optional<ReferenceIndices> reference_reads(const KernelContext& ctx,
                                                          const Shape& shape,
                                                          const ReferenceIndices& indices) const;
  // The rows and columns of the output at `shape` when it is a matrix (validation samples its
  // corners and edges and names elements [row][col]); empty otherwise.
  virtual std::vector<int64_t> output_dims(const KernelContext& ctx, const Shape& shape) const;

  // ---- Tolerance ----
  // The relative tolerance of `output` at `shape` when kernel.toml sets no rtol: by default the
  // dtype rule scaled by the square root of the context's `reduction` (default_tolerance below).
  virtual double default_tolerance(const KernelContext& ctx, const Shape& shape,
                                   const ArraySpec& output) const;

  // ---- Vendor baseline ----
  // The baseline the runner of `backend` ("cuda", "hip", "hlsl") implements for this family
  // ("cublas"), "" for none.
  virtual std::string baseline_name(std::string_view backend) const;
  // Whether the runner of `backend` may time `name` for this family: baseline_name, and any
  // other the family's contexts choose (matmul's fp8 contexts: "cublaslt").
  virtual bool has_baseline(std::string_view name, std::string_view backend) const;
  // The baseline for this context: baseline_name when the context's arrays suit it, else "".
  virtual std::string baseline(const KernelContext& ctx, std::string_view backend) const;

  // ---- Headline, suite classes, tuning model ----
  virtual Headline headline(const KernelContext& ctx) const;
  // The class rules of the suite when kernel.toml gives none (suite.classes).
  virtual std::vector<ClassRule> default_class_rules(const KernelContext& ctx) const;
  // The output tile of one launch at `shape` for the tuning model; nullopt when the family has
  // no such model (the model then knows only DRAM intensity).
  virtual std::optional<TileWork> tile_work(const KernelContext& ctx, const Shape& shape) const;
};

// ---- The registry ----
// The family a context names; the generic family when it names none or one not registered.
const Family& family_of(const KernelContext& ctx);
const Family& find_family(std::string_view name);
// Adds a member (kept by the caller for the life of the program); a later member of the same
// name replaces the earlier. The built-in members (matmul) are registered from the start.
void register_family(const Family& family);

// ---- What the callers use ----
// The dtype rule of tolerances (docs/validation.md):
//   |out - ref| <= tol * (|ref| + rms_abs)   with tol = c(dtype) * sqrt(reduction)
// c = 1e-6 for fp32 inputs, 1e-5 for fp16/bf16 inputs, 1e-4 for e4m3 inputs; plus 2 ulp of the
// output dtype.
double default_tolerance(DType input, DType output, int64_t reduction);
// The reduction length of `ctx` at `shape` (its `reduction` expression; 1 when none).
int64_t reduction_length(const KernelContext& ctx, const Shape& shape);

// Whether the family named `family` has a CPU reference, and the context's check against it.
bool has_cpu_reference(const std::string& family);
Status check_cpu_reference(const KernelContext& ctx);
// The CPU reference of the context's family: values and magnitudes from one pass
// (cpu_reference_values), or one of the two.
Result<std::map<std::string, ReferenceValues>> cpu_reference_values(
    const KernelContext& ctx, const Shape& shape, const ReferenceInputs& inputs,
    const ReferenceIndices& indices);
Result<std::map<std::string, std::vector<double>>> cpu_reference(const KernelContext& ctx,
                                                                 const Shape& shape,
                                                                 const ReferenceInputs& inputs,
                                                                 const ReferenceIndices& indices);
Result<std::map<std::string, std::vector<double>>> cpu_reference_abs(
    const KernelContext& ctx, const Shape& shape, const ReferenceInputs& inputs,
    const ReferenceIndices& indices);

// The class rules of a context: its own (suite.classes), else its family's defaults (matmul over
// scalars M, N and K: large-k, small-m, small-k, wide, square, then irregular), else none.
std::vector<ClassRule> class_rules(const KernelContext& ctx);
// The class of a shape by those rules; nullopt when no rule holds or there are none.
Result<std::optional<SuiteClass>> classify_shape(const KernelContext& ctx, const Shape& shape);

// ---- What the members use ----
// The array of the context named `name`; null when it has none.
const ArraySpec* find_array(const KernelContext& ctx, std::string_view name);
// Whether the context has a scalar named `name`.
bool has_scalar(const KernelContext& ctx, std::string_view name);

}  // namespace peak
