// The one launch pipeline behind launch_run() (SSH nodes, run_control.h) and launch_slurm_run()
// (an sbatch job, slurm_run.h):
//
//   prepare_launch()  request -> plan: the request's checks, the runtime (meshtrain or a bundle),
//                     the nodes reached and probed, the layout checked against them (the shape
//                     resolved), the bundle's flavour and the devices checked
//   stage_launch()    plan -> run directory: the data placed, meshtrain (moved to the nodes'
//                     torch, or a deployed bundle) and run_config.json deployed
//   record_launch()   the launch record (master port chosen) and the run in the store
//   start             the target's: one supervisor per node over SSH, or the sbatch job
//
// launch_through() runs them in that order. A LaunchTarget is what differs: how the nodes are
// reached and checked, and how the run starts. Local temporary files (the run config, a moved
// meshtrain) are owned by a TempPath, so every way out of a stage removes them.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/run_config.h"
#include "core/store/run_store.h"
#include "remote/bundle.h"
#include "remote/host_spec.h"
#include "remote/launch.h"
#include "remote/node.h"
#include "remote/probe.h"
#include "remote/run_control.h"

namespace meshwork::remote {

using LaunchStepFn = std::function<void(const std::string& text)>;

// The error kinds of a launch (core/error.h): what the user gave is invalid input; what went
// wrong on the way keeps its own kind (I/O), else it is the nodes'.
LaunchError launch_invalid(Error e);
LaunchError launch_failed(Error e);
// Several errors (one per node), all of `kind`; the first is the headline.
LaunchError launch_errors(std::vector<Error> errors, ErrorKind kind);

// A local temporary file or directory, removed (recursively) when its owner goes away.
class TempPath {
 public:
  explicit TempPath(std::filesystem::path path) : path_(std::move(path)) {}
  ~TempPath();
  TempPath(const TempPath&) = delete;
  TempPath& operator=(const TempPath&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// What the files go to, once reached: every node of an SSH launch, the login node of a Slurm one
// (its run directory is on the filesystem the job's nodes share).
struct LaunchSite {
  std::vector<HostSpec> hosts;
  std::vector<std::unique_ptr<Node>> nodes;  // connected, in the order of hosts
  std::vector<NodeInfo> probes;              // in the same order
};

// The launch as checked, before anything is deployed.
struct LaunchPlan {
  RunConfig config;                      // as the ranks run it: its nodes, the resolved shape
  std::optional<BundleManifest> bundle;  // the runtime bundle, or none: the request's meshtrain
  int nproc_per_node = 1;
};

// What stage_launch() left on the site.
struct StagedRun {
  std::string run_name;               // the run directory's name (new_run_dir_name())
  std::vector<std::string> run_dirs;  // absolute, one per site node
  std::vector<BundleNodeResult> bundle;
  std::string trainer = "meshtrain";  // its name in the run directory
};

// Where a launch goes and how it starts: the part that differs between SSH and Slurm.
class LaunchTarget {
 public:
  virtual ~LaunchTarget() = default;
  // The request's own fields (hosts and slots; the job's options), before anything is reached.
  // Returns the ranks per node.
  virtual std::variant<int, LaunchError> check_request(const LaunchRequest& req) = 0;
  // Connects to and probes the site.
  virtual std::optional<LaunchError> reach(const LaunchRequest& req, const LaunchStepFn& step) = 0;
  // The run config's nodes as the ranks see them (the layout is checked over these) and their
  // source.
  virtual void place(RunConfig& config, int nproc_per_node) const = 0;
  // What the checked plan needs of the nodes' devices (GPUs per node, a bundle's CUDA driver).
  virtual std::optional<LaunchError> check_devices(const LaunchPlan& plan, const LaunchStepFn& step) = 0;
  // The launch record's nodes and master address.
  virtual void describe(const LaunchRequest& req, const LaunchPlan& plan, const StagedRun& staged,
                        LaunchRecord& rec) const = 0;
  // What must happen before the run is recorded (an sbatch submission: its refusal leaves
  // nothing recorded); returns the target's part of the stored cluster record ({} for none).
  virtual std::variant<nlohmann::json, LaunchError> submit(const LaunchPlan& plan, const StagedRun& staged,
                                                           const LaunchRecord& rec, const LaunchStepFn& step) = 0;
  // Undoes submit() when the run could not be recorded.
  virtual void withdraw() {}
  // Starts the recorded run (or notes the submitted job) and adds the store's events.
  virtual std::optional<LaunchError> start(store::RunStore& store, store::RunId id, const LaunchPlan& plan,
                                           const StagedRun& staged, const LaunchRecord& rec,
                                           const LaunchStepFn& step) = 0;

  LaunchSite site;
};

// The runtime the request names: a loaded bundle, or none when the request's meshtrain exists.
std::variant<std::optional<BundleManifest>, LaunchError> choose_runtime(const LaunchRequest& req);

// The layout of `config` (its nodes set) checked by core; the config with the resolved shape.
std::variant<RunConfig, LaunchError> check_launch_layout(RunConfig config);

// A --device cuda run from a bundle needs the cuda flavour.
std::optional<LaunchError> check_bundle_flavour(const LaunchPlan& plan);

std::variant<LaunchPlan, LaunchError> prepare_launch(const LaunchRequest& req, LaunchTarget& target,
                                                     const LaunchStepFn& step);

std::variant<StagedRun, LaunchError> stage_launch(const LaunchRequest& req, LaunchPlan& plan, LaunchSite& site,
                                                  const LaunchStepFn& step);

// The request's port, or one chosen in [29500, 31500).
int choose_master_port(int requested);

// The run in the store: its config, and the cluster record {"launch", "probes"} with the
// target's part merged in.
struct RecordedRun {
  std::unique_ptr<store::RunStore> store;
  store::RunId id = 0;
};
std::variant<RecordedRun, LaunchError> record_launch(const std::filesystem::path& db, const LaunchPlan& plan,
                                                     const LaunchRecord& rec, const std::vector<NodeInfo>& probes,
                                                     const nlohmann::json& target_record);

// A resumed segment in the store (req.segment_of): the run's next segment begun, its cluster
// record replaced by this launch's (the last one kept under "earlier"), an event with the cause.
std::variant<RecordedRun, LaunchError> record_segment(const std::filesystem::path& db, const LaunchPlan& plan,
                                                      const LaunchRecord& rec, const std::vector<NodeInfo>& probes,
                                                      const nlohmann::json& target_record, const SegmentOf& segment);
// The index the next segment of `run` gets (1 for a run that never re-planned).
Result<int> next_segment_index(const std::filesystem::path& db, store::RunId run);

// The whole pipeline: prepare, stage, record (the target submits first), start.
std::variant<LaunchedRun, LaunchError> launch_through(const std::filesystem::path& db, const LaunchRequest& req,
                                                      LaunchTarget& target);

}  // namespace meshwork::remote
