#include "cli/commands.h"

int main(int argc, char** argv) { return peak::cli::run_cli(argc, argv); }
