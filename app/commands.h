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

namespace meshwork {
struct PlanQuery;
struct Plan;
}  // namespace meshwork

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
int attach_main(const Args& args);  // cli_attach_stop.cpp
int stop_main(const Args& args);    // cli_attach_stop.cpp
int resume_main(const Args& args);  // cli_elastic.cpp: a run again on the hosts left, re-planned
int data_main(const Args& args);    // cli_data.cpp: data prepare|info
int calibrate_main(const Args& args);  // cli_calibrate.cpp
int serve_main(const Args& args);      // cli_serve.cpp: the run store for browsers
int diagnose_main(const Args& args);   // cli_diagnose.cpp: where a run hangs or slows

// `meshwork launch` with meshtrain's `subcommand` ("" trains): the one path from flags to a
// launched, followed run (cli_remote.cpp). `after` (optional) runs once the run was followed to
// its end, with follow's exit code, and returns the command's.
using AfterFollow = std::function<int(const std::filesystem::path& db, int64_t run,
                                      const remote::LaunchRecord& record, int follow_rc)>;
int launch_command(const Args& args, const std::string& subcommand, const AfterFollow& after);
int gui_main(int argc, char** argv);  // gui_main.cpp (the workbench)

// `meshwork plan ... --try K --steps N <launch flags>` (cli_trials.cpp): the plan's K best fitting
// shapes launched one after another through launch_command, stored as a trial group
// (core/store/trials.h) and ranked by what they measured.
struct TrialFlags {
  int k = 0;        // 0: no --try, plan as usual
  // --steps: optimizer steps of each trial run. 20: the tokens/s a run reports is the mean of
  // its last 10 steps, which then leaves the first (warm-up) step out.
  int steps = 20;
  bool json = false;
  Args launch;      // the launch's own flags as given: nodes, ranks, --db, SSH, runtime, training
};
// Takes --try, its --steps and the launch flags out of `args` when --try is given (else returns
// `args` unchanged and k = 0); the rest is the plan's.
Result<std::pair<Args, TrialFlags>> split_trial_flags(const Args& args);
// `model`: the --model value the plan was made for (what meshtrain is given).
int run_trials(const PlanQuery& query, const Plan& plan, const std::string& model, const TrialFlags& flags);

}  // namespace meshwork::cli
