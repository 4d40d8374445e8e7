// What the remote subcommands share (cli_remote.cpp defines it): the parsed flags, the output
// lock and error printing, SSH options, the store path, deploy progress, the run config a launch
// runs, and the follower Ctrl-C detaches. cli_slurm.cpp holds the Slurm forms of probe, launch
// and attach on top of it.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "app/commands.h"
#include "core/cli_args.h"
#include "core/error.h"
#include "core/run_config.h"
#include "core/run_config_flags.h"
#include "core/store/run_store.h"
#include "remote/deploy.h"
#include "remote/follower.h"
#include "remote/run_control.h"
#include "remote/ssh_session.h"

namespace meshwork::cli::remote_cli {

struct Parsed {
  std::map<std::string, std::string> values;
  std::set<std::string> switches;  // includes "--help" when --help or -h was given
  std::vector<std::string> positional;
  // Run config flags (core/run_config_flags.h, meshtrain's own), in the order given.
  std::vector<std::pair<const RunConfigFlag*, std::string>> run_flags;
  std::map<std::string, std::vector<std::string>> every_value;  // flags that may repeat (--sbatch-arg)
};

// Progress lines come from several threads: every write to the terminal takes this lock.
extern std::mutex g_out_mu;
extern const char* const kSshHelp;  // the SSH options, for every remote command's usage
// The follower a Ctrl-C detaches (on_sigint).
extern std::atomic<remote::RunFollower*> g_follower;
void on_sigint(int);

// Prints an error; refuse() also returns its exit code (from its kind).
void say_error(const Error& e);
int refuse(const Error& e);

// core's parser over the command's flags, the SSH flags and (run_config) the run config flags.
Result<Parsed> parse(const Args& args, std::vector<FlagSpec> flags, std::string_view program, bool run_config = false);
Result<store::RunId> resolve(const std::filesystem::path& db, const std::string& run);
remote::SshOptions ssh_options(const Parsed& p);
std::filesystem::path db_path(const Parsed& p);
// The directory of this executable (meshtrain is installed beside it).
std::string self_dir();
void print_deploy_progress(const remote::DeployProgress& d);
// A whole-number flag within [min, max]; absent: `out` unchanged.
Status int_value(const Parsed& p, const std::string& flag, int min, int max, int& out);
// The run config `meshwork launch` runs (--config, the run config flags, the nodes, --name).
Result<RunConfig> launch_config(const Parsed& p);

// Following in the terminal: events printed under the lock; Ctrl-C detaches (on) or ends (off);
// the exit code and lines for how the follow ended (`what`: "run" or "job"; `failure` gives the
// root cause's words when it failed).
remote::FollowOptions terminal_follow_options();
void detach_on_sigint(bool on);
int exit_after_follow(const Result<remote::FollowOutcome>& outcome, store::RunId id, const std::string& what,
                      const std::function<std::string()>& failure);
// Follows a run over SSH to its end (`launch`, `attach`); the exit code says how it ended.
int follow(const std::filesystem::path& db, store::RunId id, const remote::LaunchRecord& rec,
           const remote::SshOptions& ssh);

// cli_slurm.cpp: `probe --slurm`, `launch --slurm`, and following a Slurm run to its end.
// `meshwork launch --elastic` (cli_elastic.cpp): follows the launched run, re-planning and
// resuming it on the survivors when a node is lost; the exit code says how it ended.
int follow_elastic_cli(const Parsed& p, const std::filesystem::path& db, store::RunId id,
                       const remote::LaunchRecord& record, const remote::LaunchRequest& request);
// The same for a Slurm run (`meshwork launch --slurm --elastic`): a lost node's job is resubmitted
// on the survivors; `runtime` gives the trainer, SSH options and bundle of the resubmissions.
int follow_elastic_slurm_cli(const Parsed& p, const std::filesystem::path& db, store::RunId id,
                             const remote::LaunchRequest& runtime);
// --elastic's flags: --max-replans, --memory-per-rank and --lost-after only with it and with valid
// values, and not with --detach (checked before anything is launched).
Status check_elastic_flags(const Parsed& p, const std::string& subcommand);
// The runtime part of a launch request from the flags (--meshtrain, --bundle, ...), for launch and resume.
Status fill_runtime(const Parsed& p, remote::LaunchRequest& req);

int probe_slurm_main(const Parsed& p);
// `subcommand`: meshtrain's ("" trains, "calibrate" measures); `after` runs when the job was
// followed to its end (not with --detach), as launch_command's does.
int launch_slurm_main(const Parsed& p, const std::string& subcommand = "", const AfterFollow& after = nullptr);
int follow_slurm(const std::filesystem::path& db, store::RunId id, const remote::SshOptions& ssh);

}  // namespace meshwork::cli::remote_cli
