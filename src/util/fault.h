#pragma once
// Fault injection for tests: named points in the code where a test can make peak fail on
// purpose, through the environment variable PEAK_FAULT (never set in normal use).
//
//   PEAK_FAULT=kill@checkout.files-written   the process kills itself (SIGKILL, as kill -9)
//                                           when it reaches that point
//   PEAK_FAULT=eval.task-timeout             fault_active("eval.task-timeout") is true every
//                                           time it is asked
//   PEAK_FAULT=eval.task-timeout#1           ... only the first time (#N: only the N-th time)
//
// Several entries are separated by commas. The points are listed in docs/store.md (kills) and
// docs/llm.md (harness faults).
#include <string_view>

namespace peak {

// Kills the process with SIGKILL when PEAK_FAULT names kill@<point>.
void fault_point(std::string_view point);
// Whether PEAK_FAULT asks for a fault at `point` on this hit (hits are counted per process).
bool fault_active(std::string_view point);

}  // namespace peak
