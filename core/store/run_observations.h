// Stored runs as the time model's fit sees them (core/run_fit.h), and a run's prediction next to
// what it measured: `meshwork plan --fit-runs`, bench/shapes.sh, the workbench's run page and
// Compare view and the web view all read them here. Qt-free.
//
// A run's cluster is its node set: the hosts its ranks ran on, node by node, with the ranks each
// node ran and the device kind (ClusterFingerprint::node_set_id). Calibrations are matched to runs
// by the same id, so a calibration measured on the nodes a run used is that run's base.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/calibration.h"
#include "core/error.h"
#include "core/run_fit.h"
#include "core/store/calibration_store.h"
#include "core/store/run_store.h"
#include "core/time_estimate.h"

namespace meshwork::store {

// The run's node set (hosts by node, ranks per node, device); empty when the run stored no ranks.
Result<ClusterFingerprint> run_node_set(RunStore* store, RunId run, const RunInfo& info);

// What the run ran and measured. An Error (naming the run) when it cannot be judged: not
// finished ok, fewer than 2 steps, no per-axis communication recorded (another tool's run), or
// a config whose model or shape core cannot read.
Result<RunObservation> load_observation(RunStore* store, RunId run);

struct ObservationSet {
  std::string cluster;                 // node_set_id() of the runs
  std::vector<RunObservation> runs;    // newest first
  std::vector<std::string> skipped;    // "run 12: why", for runs of the cluster left out
};
// Finished runs of the cluster `node_set_id` (all clusters' runs grouped when empty: the node set
// with the most runs wins), newest first, at most `limit`, `exclude` left out.
Result<ObservationSet> load_observations(RunStore* store, const std::string& node_set_id, int limit = 256,
                                         std::optional<RunId> exclude = std::nullopt);

// The fit a planner may use for a cluster's stored runs: load_observations(), then
// fit_runs_out_of_sample() on `base` (the CLI's plan --fit-runs and the workbench's planner both
// take it from here, so both judge it the same way). No runs: fit null, refusal empty. Runs but
// too few to judge a fit on runs it did not learn from: fit null and `refusal` says why in words a
// planner shows beside its fallback ("1 run: a fit of 2 unknowns needs 3 runs or more: ...").
struct StoredRunFit {
  std::string cluster;                 // node_set_id() of the runs
  std::shared_ptr<const RunFit> fit;   // judged out of sample (RunFit::out_of_sample)
  std::string refusal;
  int stored_runs = 0;                 // observations loaded
  std::vector<std::string> skipped;    // "run 12: why", for runs of the cluster left out
};
Result<StoredRunFit> fit_stored_runs(RunStore* store, const std::string& node_set_id,
                                     const std::optional<Calibration>& base);

// The newest stored calibration measured on `node_set_id`'s nodes, if any.
Result<std::optional<Calibration>> calibration_for_node_set(RunStore* store, const std::string& node_set_id);

// A run's prediction made the way the planner would make it before the run (the calibration
// of its nodes when stored, fitted on the cluster's OTHER runs when there are any), next to what
// it measured.
struct RunPrediction {
  TimeEstimate predicted;
  RunMeasurement measured;
  PredictionCheck check;
  bool calibrated = false;   // the calibration of the run's nodes was the base
  int fitted_runs = 0;       // other runs the fit learnt from (0: not fitted)
  std::string basis() const;  // "calibration + fit of 9 runs", "defaults", ...
};
Result<RunPrediction> predict_run(RunStore* store, RunId run);

}  // namespace meshwork::store
