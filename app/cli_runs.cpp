#include <iostream>
#include "app/commands.h"
namespace meshwork::cli {
// Placeholder until the run store lands (issue 5); says so plainly.
int runs_main(const Args&) { std::cerr << "meshwork: runs: not built yet\n"; return kExitError; }
}  // namespace meshwork::cli
