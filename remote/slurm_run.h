// Runs on a Slurm cluster, through its login node (an SSH host like any other, or "local" when
// the workbench runs on the login node). The same launch pipeline as an SSH launch
// (launch_pipeline.h): the run config is checked by core, shipped as run_config.json into a run
// directory on the login node's (shared) filesystem, and every node runs meshtrain_command();
// only the start and the stop differ: an sbatch script (slurm_script.h) instead of one SSH
// command per node, scancel instead of signals. The store keeps the run as for SSH plus
// cluster.slurm {job_id, script, login, options}; the follower reads the nodes' files from the
// shared run directory through the login node (one LaunchRecord entry per Slurm node, each naming
// the login host), and Slurm's state (scontrol) says whether the job still runs, why it waits,
// and why it ended.
#pragma once

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "core/error.h"
#include "core/store/run_store.h"
#include "remote/follower.h"
#include "remote/node.h"
#include "remote/run_control.h"
#include "remote/slurm_parsers.h"
#include "remote/slurm_script.h"

namespace meshwork::remote {

// What a Slurm cluster offers, from its login node.
struct SlurmClusterInfo {
  std::string login;  // HostSpec::to_string()
  std::vector<SlurmPartition> partitions;
  const SlurmPartition* default_partition() const;
  const SlurmPartition* find(const std::string& name) const;
};
Result<SlurmClusterInfo> probe_slurm(Node& login);

struct SlurmLaunchRequest {
  std::string login;      // the login node: [user@]host[:port], an ssh_config alias, or "local"
  SlurmJobOptions job;
  // config (its nodes are ignored: Slurm picks them), trainer_path, remote_root (on the shared
  // filesystem), master_port, max_restarts, ssh, on_step, on_deploy as for an SSH launch.
  LaunchRequest base;
};

// Checks, deploys, submits (sbatch) and records. sbatch's refusal (a bad partition, account,
// QOS, time) comes back as the LaunchError with sbatch's own words, and nothing is recorded.
std::variant<LaunchedRun, LaunchError> launch_slurm_run(const std::filesystem::path& db,
                                                        const SlurmLaunchRequest& req);

// The Slurm part of a stored run, or nullopt for an SSH run.
struct SlurmRunInfo {
  std::string job_id;
  std::string login;
  std::string script;
};
Result<std::optional<SlurmRunInfo>> load_slurm_info(const std::filesystem::path& db, store::RunId run);

// Follows a stored Slurm run to its end (RunFollower with Slurm's liveness and stop), then
// records the final state: Slurm's (TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, CANCELLED, PREEMPTED,
// FAILED) together with the failing rank and its log tail. `on_follower` is called with the
// follower once it exists (and with nullptr when it is done), so the caller can stop or detach it.
Result<FollowOutcome> follow_slurm_run(const std::filesystem::path& db, store::RunId run, const SshOptions& ssh,
                                       FollowOptions options = {},
                                       std::function<void(RunFollower*)> on_follower = {});

// scancel (after leaving node<i>.stop for every node) and the run marked stopped.
Status slurm_stop_and_record(const std::filesystem::path& db, store::RunId run, const SshOptions& ssh,
                             const std::string& who);

// The job's current record: from `sacct` where the cluster keeps accounting (it remembers a job
// after scontrol forgot it), else `scontrol show job`, else `squeue --json`; SlurmJob::source
// says which. `try_sacct` (optional, kept by the caller across polls) is cleared once sacct says
// accounting is disabled, so it is not asked again.
Result<SlurmJob> query_slurm_job(Node& login, const std::string& job_id, bool* try_sacct = nullptr);

}  // namespace meshwork::remote
