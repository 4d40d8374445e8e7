#include <iostream>
#include "app/commands.h"
namespace meshwork::cli {
// Placeholders until remote lands (issue 6); they say so plainly.
int probe_main(const Args&) { std::cerr << "meshwork: probe: not built yet\n"; return kExitError; }
int launch_main(const Args&) { std::cerr << "meshwork: launch: not built yet\n"; return kExitError; }
int attach_main(const Args&) { std::cerr << "meshwork: attach: not built yet\n"; return kExitError; }
int stop_main(const Args&) { std::cerr << "meshwork: stop: not built yet\n"; return kExitError; }
}  // namespace meshwork::cli
