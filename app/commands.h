// Subcommands of the `meshwork` executable. Each lives in its own file (cli_*.cpp) and takes the
// arguments after the subcommand name. Exit codes (DESIGN.md): 0 success, 2 invalid input,
// 3 valid but does not fit / run failed, 1 other errors. Errors go to stderr as
//   meshwork: <field>: <value>: <what is allowed>
#pragma once

#include <string>
#include <vector>

namespace meshwork::cli {

using Args = std::vector<std::string>;

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitInvalid = 2;
inline constexpr int kExitNoFit = 3;

int plan_main(const Args& args);    // cli_plan.cpp
int runs_main(const Args& args);    // cli_runs.cpp: runs list|import|export|delete
int probe_main(const Args& args);   // cli_remote.cpp
int launch_main(const Args& args);  // cli_remote.cpp
int attach_main(const Args& args);  // cli_remote.cpp
int stop_main(const Args& args);    // cli_remote.cpp
int gui_main(int argc, char** argv);  // gui_main.cpp (the workbench)

}  // namespace meshwork::cli
