#pragma once
// Kernel context: everything needed to run, check and refine one kernel.
// On disk: kernel.toml (format documented in docs/kernel-context.md) + one source file whose
// regions are marked by comment lines:
//     // peak:begin macros      ...      // peak:end macros
//     // peak:begin device      ...      // peak:end device
//     // peak:begin host        ...      // peak:end host
// Text before, between and after the regions is fixed (peak-owned; the LLM never edits it).
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "expr/expr.h"
#include "util/result.h"

namespace peak {

// The newest kernel.toml format this peak reads and writes. Format 2 is still read (a file
// without `format` is format 2); format 3 adds the shape suite ([suite]), format 4 `supports`,
// format 5 the class rules of the suite (suite.classes).
inline constexpr int kContextFormatVersion = 5;
inline constexpr int kContextFormatOldest = 2;
inline constexpr int kContextFormatSuite = 3;     // the first format with [suite]
inline constexpr int kContextFormatSupports = 4;  // the first format with `supports`
inline constexpr int kContextFormatClasses = 5;   // the first format with suite.classes

// e4m3: 8-bit floats of the OCP FP8 E4M3 format (no infinities, one NaN per sign, largest 448).
enum class DType { f32, f16, bf16, i32, e4m3 };
std::string_view to_string(DType t);
std::optional<DType> dtype_from_string(std::string_view s);
size_t dtype_size(DType t);

enum class Region { macros, device, host };
std::string_view to_string(Region r);
std::optional<Region> region_from_string(std::string_view s);
inline constexpr Region kAllRegions[] = {Region::macros, Region::device, Region::host};

struct Initializer {
  enum class Kind { uniform, normal, ones, zeros, iota };
  Kind kind = Kind::uniform;
  double a = -1.0;           // uniform: low;  normal: mean
  double b = 1.0;            // uniform: high; normal: stddev
  std::string text() const;  // "uniform(-1, 1)", "normal(0, 1)", "ones", ...
  bool operator==(const Initializer&) const = default;
};
Result<Initializer> parse_initializer(std::string_view text);

struct ArraySpec {
  std::string name;
  DType dtype = DType::f32;
  std::string size;  // element count, an expression of the scalars ("M * K")
  Initializer init;
  bool output = false;  // only outputs are compared; outputs are poisoned before each run
  bool operator==(const ArraySpec&) const = default;
};

struct ScalarSpec {
  std::string name;
  DType dtype = DType::i32;
  std::vector<int64_t> values;                         // optional: the values this scalar may take
  int64_t range_lo = 0, range_hi = 0, range_step = 1;  // optional range (hi > lo when given)
  bool has_range() const { return range_hi > range_lo; }
  bool operator==(const ScalarSpec&) const = default;
};

// One instantiation of the scalars ("M=2048, N=2048, K=2048").
struct Shape {
  std::map<std::string, int64_t> values;
  std::string text() const;  // "M=2048 N=2048 K=2048", in insertion-independent sorted order
  bool operator==(const Shape&) const = default;
};

// The class of a suite shape: what it stresses. A fixed set, so that suites of different kernels
// (and reports over many of them) group the same way.
// The first six group matmul shapes; the last four group the shapes of row kernels (softmax,
// RMSNorm, LayerNorm: R rows of N elements), whose paths split by rows and row length instead.
enum class SuiteClass {
  square,
  irregular,
  large_k,
  small_k,
  small_m,
  wide,
  decode,
  short_rows,
  long_rows,
  regular
};
inline constexpr SuiteClass kAllSuiteClasses[] = {
    SuiteClass::square,    SuiteClass::irregular, SuiteClass::large_k, SuiteClass::small_k,
    SuiteClass::small_m,   SuiteClass::wide,      SuiteClass::decode,  SuiteClass::short_rows,
    SuiteClass::long_rows, SuiteClass::regular};
std::string_view to_string(SuiteClass c);  // "square", "irregular", "large-k", "short-rows", ...
std::optional<SuiteClass> suite_class_from_string(std::string_view s);

// One named shape of the shape suite (`peak bench`).
struct SuiteShape {
  std::string name;  // unique within its list ("square-2048")
  SuiteClass cls = SuiteClass::square;
  Shape shape;
  bool operator==(const SuiteShape&) const = default;
};

// A rule of the shape classes: a shape for which `when` (an expression of the scalars) holds is
// of class `cls`. Rules are tried in order and the first that holds decides; an empty `when`
// always holds. Per-class tuning (`peak tune --classes`) and the dispatch of a tuned checkpoint
// classify shapes by them.
struct ClassRule {
  SuiteClass cls = SuiteClass::irregular;
  std::string when;
  bool operator==(const ClassRule&) const = default;
};

struct TuningParam {
  std::string name;
  std::vector<int64_t> values;
  int64_t default_value = 0;
  bool operator==(const TuningParam&) const = default;
};

enum class ReferenceKind { seed, cpu };

struct KernelContext {
  int format = kContextFormatVersion;
  std::string name;
  std::string description;
  std::string backend;      // "hlsl", "cuda", "hip"
  std::string family;       // "matmul" (family/family.h), or "" for generic kernels
  std::string precision;    // free text shown in reports ("fp32", "fp16-in/fp32-acc")
  std::string source_file;  // file name next to kernel.toml

  std::vector<ArraySpec> arrays;
  std::vector<ScalarSpec> scalars;
  std::string valid;  // validity of a shape, e.g. "M > 0 && N > 0 && K > 0"
  // The shapes the kernel supports, narrowed by transformations that need aligned shapes ("" =
  // every valid shape), e.g. "K % 8 == 0 && N % 8 == 0" for 16-byte TMA strides. The listed
  // shapes need only satisfy `valid`; those outside `supports` are not run for this kernel.
  std::string supports;

  std::vector<Shape> bench_shapes;       // timed; shown to the LLM
  std::vector<Shape> validation_shapes;  // checked; shown to the LLM
  std::vector<Shape> hidden_shapes;      // checked; never shown to the LLM
  std::vector<Shape> small_shapes;       // used by `peak demo --small` and CPU-device runs
  // The shape suite `peak bench` times against the vendor library; never shown to the LLM.
  // `suite_small` is its variant for CPU devices (chosen as `small` is chosen over `bench`).
  std::vector<SuiteShape> suite;
  std::vector<SuiteShape> suite_small;
  // suite.classes: how a shape's class is decided (format 5); empty: the family's default rules.
  std::vector<ClassRule> classes;

  std::vector<TuningParam> tuning;
  std::string tuning_valid;  // constraint over tuning params and device limits ("" = always)

  std::string flops;  // "2 * M * N * K"
  std::string bytes;  // "4 * (M * K + K * N + M * N)"
  ReferenceKind reference = ReferenceKind::seed;
  // Tolerances; 0 means "use the dtype default" (validate module).
  double rtol = 0, atol = 0;
  std::string reduction;  // expression for the reduction length used to scale tolerance ("K")
  // Bytes of scratch memory a launch plan may declare for a shape (an expression of the scalars;
  // "" = none). Transformations that need scratch (split-K) raise it.
  std::string workspace;

  std::filesystem::path dir;  // where kernel.toml was loaded from (not serialized)
  bool operator==(const KernelContext&) const = default;
};

// Loads `path` (a directory holding kernel.toml, or the kernel.toml itself). Errors name
// file:line:column and what was expected.
Result<KernelContext> load_context(const std::filesystem::path& path);
// Parses kernel.toml text; `filename` is used in error messages; `dir` is stored in the result.
Result<KernelContext> parse_context(std::string_view toml_text, std::string_view filename,
                                    const std::filesystem::path& dir = {});
// Serializes back to kernel.toml text (stable order; round-trips through parse_context).
std::string to_toml(const KernelContext& ctx);

// Environment for expressions of one shape: scalars, plus "<array>.size" for every array.
Result<expr::Env> shape_env(const KernelContext& ctx, const Shape& shape);
// Element count of each array for a shape (evaluates the size expressions).
Result<std::map<std::string, int64_t>> array_sizes(const KernelContext& ctx, const Shape& shape);
// True when the shape satisfies `valid`.
// Whether the kernel runs this shape: `valid` and `supports` both hold.
Result<bool> shape_is_valid(const KernelContext& ctx, const Shape& shape);
// Whether the shape belongs to the problem at all (`valid` alone): what the listed shapes of
// kernel.toml must satisfy.
Result<bool> shape_in_problem(const KernelContext& ctx, const Shape& shape);
// `count` extra shapes drawn deterministically (from `seed`) from the scalars' values/ranges,
// each satisfying `valid`; used as additional hidden validation shapes. Empty when the scalars
// declare neither values nor ranges. A scalar with neither draws from the values the declared
// shapes give it. Shapes already declared and repeats are skipped, so fewer than `count` may come
// back when the space is small.
std::vector<Shape> sample_shapes(const KernelContext& ctx, int count, uint64_t seed);
// The suite `peak bench` runs: the small variant when `small` and the context has one, else the
// full suite (which may be empty: the context has no suite).
const std::vector<SuiteShape>& suite_for(const KernelContext& ctx, bool small);
// The class of a shape by `rules` (tried in order, the first that holds decides); nullopt when
// no rule holds or there are none. The rules of a context, its own or its family's defaults,
// are family/family.h's class_rules.
Result<std::optional<SuiteClass>> classify_shape(const std::vector<ClassRule>& rules,
                                                 const KernelContext& ctx, const Shape& shape);
// FLOPs of one run (0 when no expression is given).
Result<double> shape_flops(const KernelContext& ctx, const Shape& shape);
Result<double> shape_bytes(const KernelContext& ctx, const Shape& shape);

// ---- Source regions ----
// The fixed parts hold the marker lines themselves (with their own spacing and line ends):
// `before` ends with the "// peak:begin macros" line, `between_macros_device` runs from the
// "// peak:end macros" line through the "// peak:begin device" line, and so on; `after` starts
// with the "// peak:end host" line. Region texts are whole lines (empty, or ending in '\n').
// A marker line may carry leading and trailing blanks and a '\r'.
struct SourceRegions {
  std::string before;  // fixed text before the macros region
  std::string macros;
  std::string between_macros_device;
  std::string device;
  std::string between_device_host;
  std::string host;
  std::string after;
  std::string& get(Region r);
  const std::string& get(Region r) const;
};
// Fails with "FILE:LINE: ..." when a marker is missing, duplicated or out of order.
Result<SourceRegions> split_regions(std::string_view source, std::string_view filename);
// Inverse of split_regions (byte-identical round trip). A non-empty region whose last line
// lacks its '\n' gets one, so the end marker after it stays on its own line.
std::string join_regions(const SourceRegions& regions);
// The marker lines themselves, e.g. "// peak:begin device".
std::string begin_marker(Region r);
std::string end_marker(Region r);

}  // namespace peak
