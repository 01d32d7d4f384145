#pragma once
// Natural transformations and sequences (formats in docs/transformations.md).
//
// A transformation file (transformations/<family>/<name>.md) is TOML front matter between
// "+++" lines, then Markdown: a description, then one "## Pass N: <region>" section per pass
// whose body is that pass's instruction text. Example:
//
//   +++
//   format = 1
//   name = "tb-tiling"
//   version = 1
//   title = "Thread-block tiling through shared memory"
//   backends = ["hlsl", "cuda", "hip"]
//   families = ["matmul"]  # format 2, optional: the kernel families it is written for
//   requires = "sm_90a"    # optional: the minimum device architecture (CUDA only)
//   [[tuning]]
//   name = "TILE_K"
//   values = [8, 16, 32]
//   default = 16
//   [translations.hlsl]
//   "shared memory" = "groupshared"
//   [devices."H100"]
//   note = "..."
//   [[helpers]]            # optional snippets peak may insert (not the LLM)
//   name = "..."
//   region = "device"
//   backend = "cuda"
//   code = "..."
//   [[helpers]]            # or the same helper of another transformation, by name
//   name = "tma"
//   from = "tma-loads"
//   +++
//   Description paragraph(s).
//
//   ## Pass 1: macros
//   Instruction text ...
//
//   ## Pass 2: device
//   Instruction text ...
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "context/context.h"
#include "util/result.h"

namespace peak {

// Format 2 added `families`; format 1 files are read as before (written for any family).
inline constexpr int kTransformationFormatVersion = 2;
// Format 2 added per-step `keep` and the tuning `budget` keys.
inline constexpr int kSequenceFormatVersion = 2;

struct Pass {
  int index = 0;  // 1-based
  Region region = Region::device;
  std::string instruction;
};

struct HelperSnippet {
  std::string name;
  Region region = Region::device;
  std::string backend;  // "" = every backend
  std::string code;
  // The transformation whose helper of the same name this one is (`from`): its region, backend
  // and code are filled in when the library is loaded (resolve_helper_sources), so that one
  // snippet serves every transformation that inserts it.
  std::string from;
};

struct Transformation {
  int format = kTransformationFormatVersion;
  std::string name;  // kebab-case id, unique in the library
  int version = 1;
  std::string title;
  std::string description;
  std::vector<std::string> backends;  // empty = all
  // The kernel families (KernelContext::family) it is written for; empty = any family, the
  // generic one ("") included.
  std::vector<std::string> families;
  std::vector<Pass> passes;
  std::vector<TuningParam> tuning;  // parameters this transformation introduces
  // Scratch bytes its launch plans may need for a shape (an expression of the scalars and
  // tuning parameters; "" = none); joins the context's workspace.
  std::string workspace;
  // Which tuning configurations the transformed kernel can run (an expression of the tuning
  // parameters and device limits, like kernel.toml's tuning_valid; "" = all); joins the
  // context's tuning_valid with &&, so configurations it rules out are pruned before compiling.
  std::string tuning_valid;
  // Shapes the transformed kernel supports (an expression of the scalars, "" = all): it narrows
  // the context's validity expression, e.g. "K % 8 == 0 && N % 8 == 0" for 16-byte TMA strides.
  // Validation then checks hidden shapes that satisfy it, and the report states it.
  std::string valid;
  // A condition of `valid` an earlier transformation narrowed the kernel to, which this one lifts
  // (`lifts`: the transformed kernel handles those shapes again, e.g. through padded copies);
  // "" = none. It is taken out of the context's `supports`, so validation runs the hidden shapes
  // it excluded and the prompt no longer states it.
  std::string lifts;
  // The minimum device architecture (`requires` in the front matter; "" = any device): a CUDA
  // architecture "sm_XY" (compute capability X.Y or newer) or "sm_XYa" (the architecture-specific
  // features of exactly X.Y, such as Hopper's wgmma on sm_90a). Only the cuda backend applies it.
  std::string required_arch;
  // Tuning parameters the transformed kernel no longer uses (`retires`): a transformation that
  // replaces what they shaped (a warp layout by a warpgroup one) keeps them at one value, their
  // default, so that the search does not spend configurations on them.
  std::vector<std::string> retires;
  // Backend -> (phrase -> backend spelling), merged with the backend's own table in prompts.
  std::map<std::string, std::map<std::string, std::string>> translations;
  // Device-name substring -> extra instruction text added when the device name contains it.
  std::map<std::string, std::string> device_notes;
  std::vector<HelperSnippet> helpers;
  std::filesystem::path path;  // where it was loaded from

  bool supports(std::string_view backend) const;
  // Whether it is written for kernels of `family` (every family when it names none).
  bool suits_family(std::string_view family) const;
};

// "matmul", "softmax, rmsnorm", or "any family" when `t` names none.
std::string families_text(const Transformation& t);
// Why `t` cannot be applied to a kernel of `family` ("" for the generic family): it is written
// for other families. "" when it can.
std::string family_problem(const Transformation& t, std::string_view family);

// The context after `t`: its tuning parameters join the context's (a name already there keeps
// the context's value set), its tuning_valid joins with &&, its valid narrows the shapes the
// kernel supports, the workspace becomes the larger of the two, and the parameters it retires keep
// only their default value. The source is the caller's
// business.
KernelContext transformed_context(const Transformation& t, const KernelContext& ctx);

// Whether a device of architecture `device_arch` ("sm_90a") meets `required` ("sm_80": compute
// capability 8.0 or newer; "sm_90a": 9.0 with its architecture-specific features, which newer
// architectures do not have). An unreadable device architecture meets nothing but "".
bool arch_meets(std::string_view device_arch, std::string_view required);
// Why `t` cannot be applied to a kernel of `backend` on the device (`device_name`, `device_arch`):
// its `requires` names an architecture the device lacks, or a backend other than cuda. "" when it
// can, and when the device's architecture is unknown (empty).
std::string requirement_problem(const Transformation& t, std::string_view backend,
                                std::string_view device_name, std::string_view device_arch);

Result<Transformation> parse_transformation(std::string_view text, std::string_view filename);
Result<Transformation> load_transformation(const std::filesystem::path& path);
// Every *.md under `dir` (recursively), sorted by name; a duplicate name is an error. Helpers
// borrowed from another transformation (`from`) are resolved against this library and then
// `outer` (the shared library, for a workspace's own). With `problems`, a file that cannot be
// loaded (or a duplicate, or a helper that cannot be resolved) is skipped and described there
// instead, so that one broken file does not disable the library.
Result<std::vector<Transformation>> load_library(
    const std::filesystem::path& dir, std::vector<std::string>* problems = nullptr,
    const std::vector<Transformation>* outer = nullptr);
// Fills in every helper of `t` that names its source (`from`) with the region, backend and code
// of the helper of the same name in that transformation, looked up in `lib` and then `outer`.
// The source's helper must hold its own code (borrowing is one level deep).
Status resolve_helper_sources(Transformation& t, const std::vector<Transformation>& lib,
                              const std::vector<Transformation>* outer = nullptr);
// Finds by name; the error lists the closest names ("did you mean tb-tiling?").
Result<Transformation> find_transformation(const std::vector<Transformation>& library,
                                           std::string_view name);

// sequences/<name>.toml:
//   format = 2
//   name = "hlsl-fp32"
//   description = "..."
//   attempts = 3                 # default per step
//   budget = 24                  # format 2: tuning configurations per step at most (optional)
//   [tuning]                     # format 2: value sets for every step that has the parameter
//   TRD_Y_DIM = [4, 8, 16]
//   [[step]]
//   transformation = "refactor"
//   attempts = 2                 # optional override
//   budget = 16                  # format 2: optional override of the sequence's budget
//   keep = false                 # format 2: the next step builds on this step's parent
//   instructions = "..."         # optional extra text appended to every pass's prompt
//   strategy = "exhaustive"      # optional tuning strategy of this step (docs/tuning.md)
//   strategy_budget = "15%,600s" # optional budget of that strategy
//   [step.tuning]                # optional overrides of tuning values
//   TILE_K = [16, 32]
struct SequenceStep {
  std::string transformation;
  int attempts = 0;  // 0 = sequence default
  int budget = 0;    // 0 = the sequence's budget
  // false: the step is applied, validated, tuned and checkpointed as usual, but the sequence
  // goes on from the checkpoint it started from (its result made the kernel slower).
  bool keep = true;
  std::string instructions;
  std::map<std::string, std::vector<int64_t>> tuning;
  std::string strategy;         // "" = the run's
  std::string strategy_budget;  // "" = the run's
};

struct Sequence {
  int format = kSequenceFormatVersion;
  std::string name;
  std::string description;
  int attempts = 3;
  int budget = 0;  // tuning configurations per step at most (0 = the caller's budget)
  // Format 2 [tuning]: value sets used by every step whose context has the parameter (a step's
  // own [step.tuning] wins), for parameters whose useful values a later step widens or narrows.
  std::map<std::string, std::vector<int64_t>> tuning;
  std::vector<SequenceStep> steps;
  std::filesystem::path path;
};

Result<Sequence> parse_sequence(std::string_view text, std::string_view filename);
// Why `seq` cannot run on a kernel of `family`: its first step whose transformation (found in
// `library`) is written for other families, as "step 2 (thread-tiling): <family_problem>". ""
// when every step suits; a step naming no transformation of `library` is left to the checks
// that look names up.
std::string sequence_family_problem(const Sequence& seq, const std::vector<Transformation>& library,
                                    std::string_view family);
Result<Sequence> load_sequence(const std::filesystem::path& path);

}  // namespace peak
