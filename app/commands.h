// Subcommands of the `meshwork` executable. Each lives in its own file (cli_*.cpp) and takes the
// arguments after the subcommand name. Exit codes are core's (core/error.h: kExitOk, kExitInvalid,
// kExitNoFit, kExitError; exit_code(ErrorKind)). Errors go to stderr as
//   meshwork: <field>: <value>: <what is allowed>
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "remote/launch.h"

namespace meshwork::cli {

using Args = std::vector<std::string>;

// The one place an Error becomes an exit code: prints `meshwork: <message>` to stderr and returns
// exit_code(e.kind) (main.cpp).
int fail(const Error& e);

int plan_main(const Args& args);    // cli_plan.cpp
int runs_main(const Args& args);    // cli_runs.cpp: runs list|import|export|delete
int probe_main(const Args& args);   // cli_remote.cpp
int launch_main(const Args& args);  // cli_remote.cpp
int deploy_main(const Args& args);  // cli_remote.cpp: a runtime bundle onto nodes ahead of a launch
int attach_main(const Args& args);  // cli_remote.cpp
int stop_main(const Args& args);    // cli_remote.cpp
int data_main(const Args& args);    // cli_data.cpp: data prepare|info
int calibrate_main(const Args& args);  // cli_calibrate.cpp
int serve_main(const Args& args);      // cli_serve.cpp: the run store for browsers

// `meshwork launch` with meshtrain's `subcommand` ("" trains): the one path from flags to a
// launched, followed run (cli_remote.cpp). `after` (optional) runs once the run was followed to
// its end, with follow's exit code, and returns the command's.
using AfterFollow = std::function<int(const std::filesystem::path& db, int64_t run,
                                      const remote::LaunchRecord& record, int follow_rc)>;
int launch_command(const Args& args, const std::string& subcommand, const AfterFollow& after);
int gui_main(int argc, char** argv);  // gui_main.cpp (the workbench)

}  // namespace meshwork::cli
