// The whole path of a run, for the CLI and the GUI alike. app/ and ui/ build a RunConfig and
// call launch_run(): connect to every node of config.nodes in parallel, probe, check the layout
// against what was found (core/parallel_layout.h), deploy meshtrain and the run config
// (run_config.json), record the run in the store, start one supervisor per node with
// meshtrain_command() (launch.h); then follow (follower.h), attach again later, or
// stop_and_record(). launch_run() and launch_slurm_run() (slurm_run.h) are one pipeline with two
// starters (launch_pipeline.h). No Qt here; the GUI calls these from worker threads and gets progress
// through the callbacks.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/run_config.h"
#include "core/store/run_store.h"
#include "remote/bundle.h"
#include "remote/deploy.h"
#include "remote/follower.h"
#include "remote/host_spec.h"
#include "remote/launch.h"
#include "remote/probe.h"

namespace meshwork::remote {

// A new segment of a stored run (remote/elastic.h): the run keeps its id and its store rows; the
// launch starts from the run's latest complete checkpoint and is recorded as the run's next
// segment, its launch record replacing the last one's (which is kept under "earlier").
struct SegmentOf {
  store::RunId run = 0;
  // The last segment's checkpoints (absolute; on a filesystem every node reaches): the new
  // segment's own directory starts with the checkpoint of from_step - 1 from there.
  std::string checkpoint_dir;
  int64_t from_step = 1;       // the first step the segment trains (the checkpoint's + 1)
  std::string cause;           // why: "node 1 (node1) lost: ..."
};

struct LaunchRequest {
  // What to run and where: config.nodes (node 0 first; host "local" = this machine without SSH;
  // every node the same slots, torchrun style); no nodes = this machine with the mesh's world
  // size. config.name names the run ("run" when empty). Shipped as run_config.json, stored with
  // the run, and run by meshtrain as it is (with its hosts written as HostSpec::to_string()).
  RunConfig config;
  std::string trainer_path;              // the local meshtrain binary to deploy (no bundle)
  // A runtime bundle (scripts/bundle; bundle.h) to run instead of trainer_path: deployed once per
  // node or shared filesystem under bundle_root, and linked into the run directory as meshtrain.
  // A CUDA run checks every node's driver against the bundle's CUDA version first.
  std::string bundle_path;
  std::string bundle_root = ".cache/meshwork/bundles";  // relative to the login directory, or absolute
  // Nodes that have the same torch wheel at another path: their site-packages (absolute); the
  // deployed meshtrain's run path is moved there (node_torch.h). Not with a bundle.
  std::string node_torch;
  std::string remote_root = ".cache/meshwork/runs";  // relative to the login directory, or absolute
  std::string master_addr;               // empty: node 0's address as the others see it
  int master_port = 0;                   // 0: chosen
  int max_restarts = 0;                  // restarts of all ranks from the latest checkpoint (launch.h)
  std::string subcommand;                // meshtrain's: "" trains, "calibrate" measures (LaunchRecord)
  std::optional<SegmentOf> segment_of;   // set: a resumed segment of that run, not a new run
  SshOptions ssh;
  ProbeProgressFn on_probe;
  DeployProgressFn on_deploy;
  std::function<void(const std::string& text)> on_step;  // "probing", "validating", ...
};

// Thrown away after launch; error.kind says which exit code a CLI should use.
struct LaunchError {
  Error error;
  std::vector<Error> more;  // further diagnostics (one per node or rule)
};

struct LaunchedRun {
  store::RunId id = 0;
  LaunchRecord record;
  std::vector<NodeInfo> probes;
  std::vector<BundleNodeResult> bundle;  // per node, when launched from a bundle
};

std::variant<LaunchedRun, LaunchError> launch_run(const std::filesystem::path& db, const LaunchRequest& request);

// Opens connections for a follower (fresh ones on every call: used after a lost link).
NodeConnector make_connector(const LaunchRecord& record, SshOptions ssh);

// The launch record of a stored run.
Result<LaunchRecord> load_launch_record(const std::filesystem::path& db, store::RunId run);

// Stops every node of the run in parallel (SIGTERM to process groups, SIGKILL after `grace`).
Status stop_all(const LaunchRecord& record, const SshOptions& ssh,
                std::chrono::milliseconds grace = std::chrono::seconds(5));

// Stops a stored run and records it: stop_all() from its launch record, then the run marked
// stopped with an event naming `who` ("`meshwork stop`", "the workbench"). What the CLI and the
// workbench both call when they do not follow the run themselves.
Status stop_and_record(const std::filesystem::path& db, store::RunId run, const SshOptions& ssh,
                       const std::string& who, std::chrono::milliseconds grace = std::chrono::seconds(5));

}  // namespace meshwork::remote
