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

}  // namespace peak
