#pragma once
// One task of a runner job, carried out on a Device: inputs, guard zones, poisoning, the checked
// run(s), integrity checks and the timing loop. runner/main.cpp is a thin loop around this; tests
// drive it with an in-memory Device.
//
// The runner reports facts only: output bytes (in files), whether inputs or guard bytes changed,
// whether two checked runs wrote different bytes, and raw timing samples. Comparison with a
// reference and every statistic shown to a user are the parent's.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runner/device.h"
#include "runner/protocol.h"

namespace peak {

// Every buffer is allocated this much longer than its array; the tail ("guard") is filled with a
// known word and checked after the runs: a change means the kernel wrote past the end.
inline constexpr size_t kGuardBytes = 64 << 10;
// The guard word of input buffers. Output buffers are poisoned whole (array and guard) with
// poison_u32(dtype) before every launch, so their guard holds the poison word.
inline constexpr uint32_t kGuardWord = 0xA5C3E1F7u;

// Runs one task. Never throws: an unexpected exception becomes disposition `crashed`. When the
// device reports lost() afterwards, a task that had passed is reported as `crashed`.
TaskResult execute_task(Device& device, const RunnerJob& job, const RunnerTask& task);

// Convention for Device::load failures: an error message that starts with a disposition name and
// a colon ("invalid_config: needs 80 KiB of shared memory") gives that disposition; any other
// message gives launch_failed. load_error() writes such a message.
Error load_error(Disposition d, std::string_view message);
// Splits a load error message into its disposition and the rest (see load_error).
std::pair<Disposition, std::string> load_failure(const std::string& message);

// The stopping rule's spread: (p75 - p25) / median with linear interpolation between order
// statistics; infinity when the median is not positive or there are no samples.
double relative_iqr(std::vector<double> samples);
// Entries of /proc/self/task (threads of this process); 0 when it cannot be read.
int count_threads();
// "<dir>/<id>.<tag><array>.bin" with characters outside [A-Za-z0-9._-] of id and array as '_'.
std::string output_path(const std::string& dir, const std::string& id, const std::string& tag,
                        const std::string& array);

}  // namespace peak
