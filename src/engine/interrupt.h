#pragma once
// Interruptions (engine/interrupt.cpp): a signal marks the workflows this process runs as
// interrupted before the process ends, and is passed on to the child processes registered here.
#include <sys/types.h>

namespace peak {

// install_interrupt_handler() (engine/workspace.h) sends the signal on to the children
// registered here before it marks this process's workflows interrupted.

// A child process that runs work of its own (`peak campaign run` starts one `peak campaign exec`
// per workflow): a signal that ends this process is sent on to it, so that it marks its own
// workflows interrupted and ends too instead of running on unattended. Ctrl-C reaches the whole
// process group anyway; `kill PID` and a scheduler's SIGTERM reach this process alone.
void forward_interrupts_to(pid_t child);
// The child has ended (reaped): nothing is sent to its pid any more.
void stop_forwarding_to(pid_t child);

}  // namespace peak
