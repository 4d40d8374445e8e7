// The whole path of a run, for the CLI and the GUI alike: connect to every node in parallel,
// probe, validate the shape against what was found (core/validation.h), deploy, record the run in
// the store, start one supervisor per node; then follow (follower.h), attach again later, or stop.
// No Qt here; the GUI calls these from worker threads and gets progress through the callbacks.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/run_config.h"
#include "core/store/run_store.h"
#include "remote/deploy.h"
#include "remote/follower.h"
#include "remote/host_spec.h"
#include "remote/launch.h"
#include "remote/probe.h"

namespace meshwork::remote {

struct LaunchRequest {
  std::vector<HostEntry> hosts;          // node 0 first; "local" = this machine without SSH
  int nproc_per_node = 0;                // ranks per node (a hostfile's slots= must agree)
  RunConfig config;                      // shape + training, as stored with the run
  std::vector<std::string> trainer_args; // the same as meshtrain flags, passed through
  std::string name;                      // run name (any text)
  std::string trainer_path;              // the local meshtrain binary to deploy
  std::string remote_root = ".cache/meshwork/runs";  // relative to the login directory, or absolute
  std::string master_addr;               // empty: node 0's address as the others see it
  int master_port = 0;                   // 0: chosen
  int max_restarts = 0;                  // restarts of all ranks from the latest checkpoint (launch.h)
  SshOptions ssh;
  ProbeProgressFn on_probe;
  DeployProgressFn on_deploy;
  std::function<void(const std::string& text)> on_step;  // "probing", "validating", ...
};

// Thrown away after launch; kind says which exit code a CLI should use.
struct LaunchError {
  enum class Kind { invalid, unreachable, failed } kind = Kind::failed;
  Error error;
  std::vector<Error> more;  // further diagnostics (one per node or rule)
};

struct LaunchedRun {
  store::RunId id = 0;
  LaunchRecord record;
  std::vector<NodeInfo> probes;
};

std::variant<LaunchedRun, LaunchError> launch_run(const std::filesystem::path& db, const LaunchRequest& request);

// Opens connections for a follower (fresh ones on every call: used after a lost link).
NodeConnector make_connector(const LaunchRecord& record, SshOptions ssh);

// The launch record of a stored run.
Result<LaunchRecord> load_launch_record(const std::filesystem::path& db, store::RunId run);

// Stops every node of the run in parallel (SIGTERM to process groups, SIGKILL after `grace`).
Status stop_all(const LaunchRecord& record, const SshOptions& ssh,
                std::chrono::milliseconds grace = std::chrono::seconds(5));

}  // namespace meshwork::remote
