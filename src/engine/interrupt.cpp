// Interruptions: a signal marks the workflows this process runs as interrupted before the
// process ends (docs/store.md, "Workflows").
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <mutex>
#include <set>
#include <thread>

#include "engine/interrupt.h"
#include "engine/workspace.h"

namespace peak {

void interrupt_workspaces();  // workspace.cpp

namespace {

int g_pipe[2] = {-1, -1};
std::mutex g_children_mu;
std::set<pid_t> g_children;  // forward_interrupts_to()

// Async-signal-safe: hands the signal number to the watcher thread.
void on_signal(int sig) {
  unsigned char c = static_cast<unsigned char>(sig);
  ssize_t n = ::write(g_pipe[1], &c, 1);
  (void)n;
}

}  // namespace

void install_interrupt_handler() {
  if (g_pipe[0] >= 0) return;
  if (::pipe2(g_pipe, O_CLOEXEC) != 0) return;
  std::thread([] {
    unsigned char c = 0;
    while (::read(g_pipe[0], &c, 1) != 1) {
    }
    int sig = c;
    {
      std::lock_guard<std::mutex> lock(g_children_mu);
      for (pid_t child : g_children) ::kill(child, sig);
    }
    interrupt_workspaces();
    // Ends the process the way the signal would have (exit status 128 + sig for a shell).
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  }).detach();
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
}

void forward_interrupts_to(pid_t child) {
  std::lock_guard<std::mutex> lock(g_children_mu);
  g_children.insert(child);
}

void stop_forwarding_to(pid_t child) {
  std::lock_guard<std::mutex> lock(g_children_mu);
  g_children.erase(child);
}

}  // namespace peak
