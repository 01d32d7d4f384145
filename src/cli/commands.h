#pragma once
// The peak command line: one table of subcommands {name, help, setup, handler}.
#include <string>
#include <vector>

namespace peak::cli {

// Exit codes (docs/cli.md).
enum ExitCode {
  kOk = 0,
  kStepFailed = 1,   // a transformation, validation or evaluation did not pass
  kUsage = 2,        // bad arguments or input files
  kWaiting = 3,      // manual mode: a prompt waits for `peak respond`
  kEnvironment = 4,  // no device, missing toolchain, store problem
};

// Runs the CLI with argv; returns the exit code.
int run_cli(int argc, char** argv);

}  // namespace peak::cli
