#pragma once
// Reply parsing and region splicing.
#include <string>

#include "context/context.h"
#include "util/disposition.h"

namespace peak {

struct SpliceOutcome {
  Disposition disposition = Disposition::passed;  // passed, no_code or region_violation
  std::string message;                            // why, for the attempt record and feedback
  SourceRegions source;                           // the new source when passed
};

// Extracts the single fenced code block of `reply` (``` or ~~~ fences, any info string).
// Zero blocks or more than one is no_code. Replaces region `target` of `current` with the block.
// A block that holds region markers, that repeats three or more consecutive non-blank lines of
// another region, or (for the macros region) that holds anything but preprocessor lines and
// comments, is a region_violation.
SpliceOutcome splice_reply(const std::string& reply, const SourceRegions& current, Region target);

// Inserts the transformation's helper snippets for `backend` (those with no backend or this one)
// at the end of their regions, each after a comment line "// peak helper: NAME", unless that
// line is already there. peak does this before the first pass: the model calls the helpers, it
// never writes them.
SourceRegions insert_helpers(const struct Transformation& t, const std::string& backend,
                             SourceRegions source);

}  // namespace peak
