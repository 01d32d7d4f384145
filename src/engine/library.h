#pragma once
// Where peak finds its inputs: kernel contexts and sequences (by path or by name under the data
// folder) and the transformation library (the shared one plus a workspace's own).
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "transform/transformation.h"
#include "util/result.h"

namespace peak {

class Workspace;

// A kernel context folder: `arg` as a path, else a name under <data>/examples.
Result<std::filesystem::path> find_context(const std::string& arg);
// A sequence file: `arg` as a path, else <data>/sequences/arg or <data>/sequences/arg.toml.
Result<std::filesystem::path> find_sequence(const std::string& arg);
// The sequence `arg` names (find_sequence), loaded. Errors are input errors.
Result<Sequence> open_sequence(const std::string& arg);

// The folder of the shared library ($PEAK_LIBRARY or <data>/transformations).
std::filesystem::path shared_library_dir();
// A workspace's own transformations, written by `write_transformation`.
std::filesystem::path workspace_library_dir(const std::filesystem::path& workspace);
// The shared library plus the workspace's own transformations (`workspace` may be empty). A
// workspace transformation may not reuse a shared name. With `problems`, a file that cannot be
// read is named there and skipped instead of failing the whole library.
Result<std::vector<Transformation>> load_library_for(const std::filesystem::path& workspace,
                                                     std::vector<std::string>* problems = nullptr);
// What a listing of the library shows: in a workspace the transformations written for its
// context's family (KernelContext::family; the generic family "" sees those that name no family),
// else every one.
struct LibraryListing {
  std::vector<Transformation> shown;
  std::optional<std::string> family;  // the family the listing is for; nullopt: every one shown
  size_t others = 0;                  // transformations left out, written for other families
};
// `lib` as seen from a context of `family` (nullopt or `all`: every transformation).
LibraryListing filter_library(std::vector<Transformation> lib,
                              const std::optional<std::string>& family, bool all);
// The library of `ws` (null: outside a workspace, the shared library) filtered for the family of
// its HEAD context unless `all`.
Result<LibraryListing> list_library(const Workspace* ws, bool all,
                                    std::vector<std::string>* problems = nullptr);
// "3 more transformations are written for other families; --all lists them", or "".
std::string others_line(const LibraryListing& l);
// The family of the kernel at the HEAD of `ws` ("" for the generic family).
Result<std::string> context_family(const Workspace& ws);

// Checks `text` as a transformation file (docs/transformations.md) and writes it to the
// workspace's library as <name>.md, where <name> is the name in its front matter. Refused: a
// malformed file (the parser's message says what is wrong), a name the shared library holds.
Result<Transformation> write_transformation(const std::filesystem::path& workspace,
                                            const std::string& text);

}  // namespace peak
