#include <iostream>
#include "app/commands.h"
namespace meshwork::cli {
// Placeholder until the planner lands (issue 2); says so plainly.
int plan_main(const Args&) { std::cerr << "meshwork: plan: not built yet\n"; return kExitError; }
}  // namespace meshwork::cli
