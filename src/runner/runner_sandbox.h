#pragma once
// The sandbox a runner process gets (util/sandbox.h, docs/sandbox.md): it reads its executable
// and the job's artifacts, writes only the job's output folders, reaches the GPUs through their
// device nodes, starts no other process, and sees none of peak's environment beyond what GPU
// drivers read.
#include "runner/client.h"
#include "util/sandbox.h"

namespace peak {

SandboxPolicy runner_sandbox(const RunnerOptions& opts, const RunnerJob& job);

}  // namespace peak
