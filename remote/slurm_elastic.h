// Losing a node of a Slurm job and going on (docs/elastic.md, "Through Slurm"): which job nodes
// were lost (their supervisor left no exit record, or Slurm holds their node out of service), and
// the run's next segment resubmitted with sbatch on the survivors only (--nodes the survivors,
// --exclude the lost Slurm nodes) from the last complete checkpoint. The re-plan itself is the
// SSH path's (remote/elastic.h, core's replan_for_survivors()): only the loss and the launch differ.
#pragma once

#include <filesystem>
#include <string>
#include <variant>
#include <vector>

#include "core/error.h"
#include "remote/elastic.h"
#include "remote/slurm_run.h"

namespace meshwork::remote {

// The nodes a failed Slurm job lost, as the re-plan and sbatch name them.
struct SlurmLoss {
  std::vector<LostNode> lost;          // host: the job node's name in the run config ("debug node 1")
  std::vector<std::string> node_names;  // every job node's name in the run config, by index
  std::vector<std::string> job_nodes;  // the Slurm node that ran each job node (node<i>.host); "" unknown
  std::vector<std::string> exclude;    // the lost job nodes' Slurm nodes, for sbatch --exclude
};

// A job node is lost when its supervisor left no exit record (it was killed with its ranks, as
// when the node goes down: find_lost_nodes() through the login node), or when Slurm holds the
// Slurm node that ran it out of service or cannot reach it (DOWN, NOT_RESPONDING, FAIL, DRAIN).
Result<SlurmLoss> find_lost_slurm_nodes(const std::filesystem::path& db, store::RunId run, const SshOptions& ssh);

// The run's current Slurm job as it was submitted (login, partition, account, ... and the
// sbatch arguments, earlier --exclude included), with `runtime`'s trainer, SSH options, bundle
// and callbacks.
Result<SlurmLaunchRequest> stored_slurm_request(const std::filesystem::path& db, store::RunId run,
                                                const LaunchRequest& runtime);

// The old and the new nodes of `plan` in Slurm's names, for ResumePlan::text().
void name_slurm_nodes(ResumePlan& plan, const SlurmLoss& loss);

// Submits `plan` as the run's next segment: as many nodes as the re-plan kept, every Slurm node
// in `exclude` (and those excluded before) left out, started from the plan's checkpoint.
std::variant<LaunchedRun, LaunchError> launch_slurm_segment(const std::filesystem::path& db, const ResumePlan& plan,
                                                            SlurmLaunchRequest job,
                                                            const std::vector<std::string>& exclude,
                                                            const std::string& cause);

// As follow_elastic() for a Slurm run: follows the job (follow_slurm_run()); when it failed with a
// job node lost, re-plans for the survivors and resubmits at once, at most opt.max_replans times.
// `runtime` gives the trainer, SSH options, bundle and callbacks of the resubmissions.
Result<ElasticOutcome> follow_elastic_slurm(const std::filesystem::path& db, store::RunId run,
                                            const LaunchRequest& runtime, const ElasticOptions& opt);

}  // namespace meshwork::remote
