#pragma once
// The launch-plan language of the host region (docs/launch-plan.md): the same for every backend.
// A host region is not compiled; peak parses it, evaluates it for one shape and one tuning
// configuration, and hands the resulting LaunchPlan to a runner. Example:
//
//     // peak:begin host
//     tiles_m = ceil_div(M, BLOCK_TILE_M)
//     require K % 4 == 0
//     scratch partial
//       dtype = f32
//       count = K_SPLITS * M * N
//     launch matmul_partial
//       grid = (ceil_div(N, BLOCK_TILE_N), tiles_m, K_SPLITS)
//       block = (THREADS)
//       shared = SMEM_BYTES
//       args = (A, B, partial, M, N, K)
//     launch reduce_partials
//       grid = (ceil_div(M * N, 256))
//       block = (256)
//       args = (partial, C, M * N, K_SPLITS)
//     // peak:end host
//
// Statements, one per line (comments start with // or #):
//   NAME = EXPR          a named integer, usable below
//   require EXPR         the configuration cannot run this shape unless EXPR holds (invalid_config)
//   scratch NAME         a scratch buffer: dtype = f32|f16|bf16|i32, count = EXPR, zero = 0|1
//   memset NAME          every byte of an array or scratch buffer set to 0 (value = 0..255,
//                        when = EXPR)
//   tensor_map NAME      array = BUFFER, dims = (...), box = (...), element_strides = (...),
//                        global_strides = (...), swizzle = 0|32|64|128
//   launch KERNEL        grid = (x[, y[, z]]), block = (x[, y[, z]]), shared = EXPR,
//                        cluster = (x[, y[, z]]), args = (...), when = EXPR
// A memset or launch with `when = EXPR` runs only where EXPR is nonzero for the shape and
// configuration (e.g. a second kernel for shapes with few rows); a plan none of whose launches
// runs for a shape is an invalid configuration there.
// Attribute lines (`key = value`, indented by convention) belong to the statement above them.
// Expressions are integer expressions (expr/expr.h) over the shape's scalars, `ARRAY.size`, the
// tuning parameters, the integer macros of the macros region, the device facts compute_units,
// max_threads, shared_memory, shared_memory_optin, subgroup_size and l2_bytes, and names defined
// above.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "context/context.h"
#include "expr/expr.h"
#include "plan/launch_plan.h"
#include "util/disposition.h"
#include "util/result.h"

namespace peak {

// The most scratch bytes one buffer may ask for (1 TiB: more than any device has); a larger
// buffer could never be allocated (launch_failed).
inline constexpr int64_t kMaxScratchBytes = int64_t{1} << 40;

// What a backend's plans may use (the API-specific part; everything else is shared).
struct PlanDialect {
  std::string backend;       // "cuda", "hip", "hlsl": shown in messages and prompts
  bool block = true;         // launches give `block` (CUDA/HIP); HLSL: [numthreads] fixes it
  bool args = true;          // launches bind parameters with `args` (HLSL: fixed bindings)
  bool shared = true;        // dynamic shared memory
  bool cluster = false;      // thread-block clusters (CUDA, sm_90)
  bool tensor_maps = false;  // TMA tensor maps (CUDA, sm_90)
  std::string kernel_word = "kernel";  // "kernel" / "entry point"
};

// One parsed statement with its attribute lines.
struct PlanStatement {
  enum class Kind { assign, require, scratch, memset, tensor_map, launch };
  Kind kind = Kind::assign;
  int line = 0;
  std::string name;  // assigned name / buffer / tensor map / kernel
  std::string expr;  // assign and require
  struct Attr {
    std::string key;
    std::string value;
    int line = 0;
  };
  std::vector<Attr> attrs;
};

struct ParsedPlan {
  std::string file;  // for messages
  std::vector<PlanStatement> statements;
  // The kernels the plan launches, in order of first use, without repeats.
  std::vector<std::string> kernels() const;
};

// Parses the host region of `source`; errors read "FILE:LINE: what is wrong".
Result<ParsedPlan> parse_plan(const SourceRegions& source, std::string_view file);
// Parses plan text whose first line is line `first_line` of `file`.
Result<ParsedPlan> parse_plan_text(std::string_view text, int first_line, std::string_view file);

// An object-like `#define NAME VALUE` of the macros region (continuations joined, comments
// removed, integer literal suffixes dropped): the macros a plan may read are those whose value is
// an integer expression.
struct MacroDef {
  std::string name;
  std::string value;
};
std::vector<MacroDef> parse_defines(const std::string& text);

// An attribute's tuple: "(a, min(b, c), d)" -> {"a", "min(b, c)", "d"}; a value without
// parentheses (or whose parentheses do not enclose all of it) is one item.
Result<std::vector<std::string>> split_tuple(const std::string& value);

// The names a plan may read besides its own: scalars (and ARRAY.size), the tuning values, the
// device facts and the integer `#define NAME EXPR` macros of the macros region (evaluated in
// rounds, so macros may use other macros; names already defined keep their value).
expr::Env plan_env(const KernelContext& ctx, const SourceRegions& source, const Shape& shape,
                   const std::map<std::string, int64_t>& config, const expr::Env& device);

struct PlanOutcome {
  Disposition disposition = Disposition::passed;  // passed, invalid_config, compile_failed,
                                                  // workspace_exceeded, launch_failed
  std::string message;
  LaunchPlan plan;
};

// Evaluates a parsed plan for one shape and configuration. compile_failed: the plan is malformed
// for this dialect (an unknown name, a missing `grid`); invalid_config: a `require` does not
// hold, or a size is out of range (a dynamic shared memory size over the device's
// shared_memory_optin); workspace_exceeded: the scratch buffers need more bytes than the context's
// `workspace` grants for this shape; launch_failed: a scratch buffer over kMaxScratchBytes.
PlanOutcome evaluate_plan(const ParsedPlan& plan, const PlanDialect& dialect,
                          const KernelContext& ctx, const expr::Env& env);

// The language as taught in prompts (markdown), for one dialect.
std::string plan_reference(const PlanDialect& dialect);

}  // namespace peak
