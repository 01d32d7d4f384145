#include "cli/commands.h"
#include "engine/workspace.h"

int main(int argc, char** argv) {
  // A signal marks the workflows this process runs as interrupted before it ends.
  peak::install_interrupt_handler();
  return peak::cli::run_cli(argc, argv);
}
