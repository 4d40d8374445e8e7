#include <iostream>
#include "app/commands.h"
namespace meshwork::cli {
// Placeholder until the workbench lands (issue 7); says so plainly.
int gui_main(int, char**) { std::cerr << "meshwork: the workbench GUI is not built yet\n"; return kExitError; }
}  // namespace meshwork::cli
