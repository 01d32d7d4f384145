#pragma once
// Per-class tuning and dispatch (`peak tune --classes`): one checkpoint, one configuration per
// shape class of its suite. Each class's configuration was found by a tuning search over the
// suite's shapes of that class (classified by the context's class rules, context/context.h);
// a shape is then run with the configuration of its class, the kernel built once per distinct
// configuration, as a vendor library's heuristics choose a kernel per shape. The table is stored
// as an evaluation of kind "dispatch" of the checkpoint (never its result, docs/store.md) and
// used by `peak bench` for that checkpoint on the same device.
#include <cstdint>
#include <optional>
#include <string>

#include "results/dispatch.h"
#include "store/store.h"

namespace peak {

// The newest dispatch table recorded for a checkpoint (an evaluation of kind "dispatch").
std::optional<DispatchTable> latest_dispatch(const Store& store, int64_t checkpoint);

// The table as text for a terminal: class, rule, shapes, configuration, evaluations, seconds,
// GFLOP/s and the vendor's at the class's first shape.
std::string dispatch_text(const DispatchTable& t);

}  // namespace peak
