// Losing a node and going on (docs/elastic.md): which nodes of a failed run are lost, the run's
// last complete checkpoint, the shape for the survivors (core/replan.h: the planner's choice,
// global batch kept) and a new segment of the SAME run launched from that checkpoint. The CLI's
// `meshwork resume` and `meshwork launch --elastic` (app/cli_elastic.cpp) and the workbench call
// these; none of them decides a shape or a lost node on its own.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/error.h"
#include "core/replan.h"
#include "core/store/run_store.h"
#include "remote/follower.h"
#include "remote/launch.h"
#include "remote/run_control.h"

namespace meshwork::remote {

struct LostNode {
  size_t index = 0;
  std::string host;
  std::string why;  // "its supervisor and ranks were killed (no exit record)", "unreachable: ..."
};

// The nodes of an ended run that are lost: unreachable, or whose supervisor left no exit record
// (core/exit_record.h): it was killed with its ranks, as when the node goes down. A node where
// only a rank failed has its supervisor's record and is not lost (--max-restarts is for that).
std::vector<LostNode> find_lost_nodes(const LaunchRecord& rec, const NodeConnector& connect);

// The hosts of rec that answer a connection now, in order.
std::vector<std::string> reachable_hosts(const LaunchRecord& rec, const NodeConnector& connect);

// Where the segment of `rec` keeps its checkpoints: rec.checkpoint_dir (a resumed segment's own,
// launch_pipeline.cpp), else the first node's <run_dir>/checkpoints (meshtrain's default), which
// the survivors must reach too.
std::string checkpoint_dir_of(const LaunchRecord& rec);

// The step of the newest complete checkpoint in `dir` (step-<k>/COMPLETE, trainer/checkpoint.h);
// 0 when there is none.
Result<int64_t> last_complete_checkpoint(Node& node, const std::string& dir);

// One rank's memory for the re-plan: `given` when > 0, else the GPU memory the launch probed,
// else (a CPU run) the smallest probed node memory shared among its ranks.
int64_t memory_per_rank(const nlohmann::json& cluster, int slots, int64_t given);

struct ResumeInput {
  std::filesystem::path db;
  store::RunId run = 0;
  std::vector<std::string> lost_hosts;  // hosts of the run's current segment to leave out
  int64_t memory_per_rank = 0;          // 0: from the launch's probes
};

struct ResumePlan {
  store::RunId run = 0;
  LaunchRecord record;          // the current (lost) segment's launch
  Replan replan;                // the survivors' run config and shape
  int64_t checkpoint_step = 0;  // 0: no complete checkpoint, the segment trains from step 1
  std::string checkpoint_dir;
  int64_t memory_per_rank = 0;
  // The nodes before and after as the text names them; empty: the hosts of the record and of
  // the re-planned config (a Slurm job names its Slurm nodes, which the record does not hold).
  std::string old_nodes, new_nodes;
  std::string text() const;  // the old and the new shape side by side, and from where
};

// The run's current segment (its config and launch), its last complete checkpoint (read through
// a surviving node) and the re-plan for the survivors. lost_hosts are hosts of the segment's run
// config: for an SSH run the hosts themselves, for a Slurm run its job-node names
// ("debug node 1", core/cluster_source.h). Errors: does_not_fit when no shape fits
// (the message names what would), invalid_input for hosts the run does not have.
Result<ResumePlan> plan_resume(const ResumeInput& in, const NodeConnector& connect);

// Launches `plan` as the run's next segment (SegmentOf): `base` gives the runtime, SSH options and
// progress callbacks; its config, nodes and port are the plan's.
std::variant<LaunchedRun, LaunchError> launch_segment(const std::filesystem::path& db, const ResumePlan& plan,
                                                      LaunchRequest base, const std::string& cause);

// `base` made the request of `plan`'s segment: the re-planned config, a run directory beside the
// last segment's, a fresh rendezvous, the record's restarts and subcommand, and SegmentOf (the
// checkpoint it resumes from, `cause`). Shared by launch_segment() and the Slurm resubmission.
void make_segment_request(LaunchRequest& base, const ResumePlan& plan, const std::string& cause);

struct ElasticOptions {
  int max_replans = 3;
  int64_t memory_per_rank = 0;  // 0: from the probes
  // follow.lost_after for each segment's follower: a node whose link is cut while its processes
  // go on is declared lost after this long, so the segment ends and is re-planned without it
  // (FollowOptions::lost_after; 0: never). SSH nodes only: Slurm says which of a job's are lost.
  std::chrono::milliseconds lost_after{std::chrono::seconds(60)};
  FollowOptions follow;
  // The follower of the segment being followed (nullptr once it ended), to detach or stop it.
  std::function<void(RunFollower*)> on_follower;
  // The failure, the lost nodes, the re-plan (old and new shape) and what happens next.
  std::function<void(const std::string& level, const std::string& text)> on_notice;
};

struct ElasticOutcome {
  FollowOutcome last;          // how the last segment ended
  int replans = 0;             // segments launched after the first
  std::optional<Error> refused;  // the re-plan found nothing that fits: nothing was launched
};

// After a segment failed with `lost` nodes (none: nothing to re-plan): says so through
// opt.on_notice, keeps --max-replans and re-plans with plan_resume(). nullopt: the run stays
// failed, `out` says why (refused when nothing fits). `cause` gets the segment's cause in words.
Result<std::optional<ResumePlan>> replan_after_loss(const std::filesystem::path& db, store::RunId run,
                                                    const std::vector<LostNode>& lost, const NodeConnector& connect,
                                                    const ElasticOptions& opt, ElasticOutcome& out, std::string& cause);

// Follows the run; when a segment fails with a node lost, re-plans for the survivors and
// resumes at once from the last complete checkpoint, at most opt.max_replans times.
Result<ElasticOutcome> follow_elastic(const std::filesystem::path& db, store::RunId run, LaunchRecord rec,
                                      const LaunchRequest& base, const ElasticOptions& opt);

}  // namespace meshwork::remote
