// The sbatch script of a Slurm run. One file, kept in the run directory (job.sbatch) and in the
// store with the run, that does two things:
//
//   sbatch job.sbatch          the batch step (on the allocation's first node): finds the master
//                              address, the first node's NodeAddr from `scontrol show node` (node
//                              names need not resolve), refuses to start without it (never a
//                              silent localhost), then `srun` one task per node: job.sbatch node
//   job.sbatch node            one per node: node rank = $SLURM_NODEID, its own address from its
//                              NodeAddr (for Gloo), torchrun's environment, then the ONE command of
//                              a run, meshtrain_command() (launch.h), with --node-rank and
//                              --master-addr taken from Slurm.
//
// The per-node part writes the same files an SSH launch writes (run_layout.h: node<i>.out/.err,
// node<i>.exit, node<i>.restarts), so the follower streams and diagnoses a Slurm run exactly as
// any other, from the shared run directory through the login node. `srun --kill-on-bad-exit`
// ends every node's task when one fails, as Slurm users expect; with --max-restarts each node
// starts its supervisor again from the latest checkpoint inside the same job, on a fresh port.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "remote/launch.h"

namespace meshwork::remote {

inline constexpr const char* kSlurmScriptFile = "job.sbatch";

// What the user asks of Slurm (meshwork launch --slurm ..., the launch dialog's Slurm fields).
struct SlurmJobOptions {
  std::string partition;            // "" = the cluster's default partition
  int nodes = 1;
  int gpus_per_node = 0;            // --gpus-per-node; 0 = none asked (CPU nodes)
  int nproc_per_node = 0;           // ranks per node; 0 = gpus_per_node (or 1)
  std::string account, qos, time;   // "" = Slurm's defaults
  std::vector<std::string> sbatch_args;  // more #SBATCH options, e.g. "--exclusive", "--mem=0"
  std::string job_name;             // "" = "meshwork-<run name>"
  int ranks_per_node() const { return nproc_per_node > 0 ? nproc_per_node : (gpus_per_node > 0 ? gpus_per_node : 1); }
};

// The options checked before anything is submitted: every value is a single word of the
// characters Slurm's names and times use (an #SBATCH line is split on spaces, not shell-parsed).
Status check_slurm_options(const SlurmJobOptions& opt);

// The script for `rec` (its nodes: one entry per Slurm node, all with the shared run directory;
// master_addr is ignored: the job finds it) and `opt`.
std::string slurm_batch_script(const LaunchRecord& rec, const SlurmJobOptions& opt);

}  // namespace meshwork::remote
