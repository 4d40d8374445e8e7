// From `meshtrain calibrate`'s metrics records (type "calibration", docs/metrics.md) to a
// Calibration: the one reader the CLI, the bench and the tests share.
#pragma once

#include <istream>
#include <string>
#include <vector>

#include "core/calibration.h"
#include "core/metrics.h"
#include "core/run_fit.h"

namespace meshwork {

// One rank's timed forward + backward of the model cut to a few layers ("step" records): its
// model FLOPs per second against the rank's matmul rate is the step efficiency.
struct StepSample {
  Precision precision = Precision::fp32;
  int ranks_per_node = 1;
  double flops = 0;    // model FLOPs of one forward + backward
  double seconds = 0;  // median time of one
  // Of those FLOPs, a mixture of experts' expert blocks' (0: a dense model): the step's
  // efficiency is then of the rest, once the expert blocks' calibrated time is taken out.
  double expert_flops = 0;
};

// One split's short training run ("split_step" records): what ran (a run config whose model is
// the cut model inline, on `world` ranks, `ranks_per_node` per node) and what it measured per
// step, the mean over the ranks that reported it.
// The largest world a split step may claim (1,024 nodes x 8 GPUs, with room).
inline constexpr int64_t kMaxCalibrationWorld = int64_t{1} << 20;

struct SplitStepSample {
  RunConfig config;
  int64_t world = 0;
  int ranks_per_node = 0;
  RunMeasurement measured;
  int ranks = 0;  // ranks whose records were averaged
  // The noise of this cluster as the split showed it, the mean over its ranks: its steps'
  // interquartile range over their median ("spread"), and, for the splits the drift check
  // measured first and last, again / first - 1 ("again_step_s" over "first_step_s", or over
  // "step_s" in calibrations that timed one pass; drift_ranks of the ranks reported one).
  double spread = 0;
  double drift = 0;
  int drift_ranks = 0;
};

struct CalibrationSamples {
  ClusterFingerprint fingerprint;  // from the "node" records, in node order
  std::vector<MatmulSample> matmuls;
  std::vector<StepSample> steps;
  std::vector<CollectiveSample> collectives;
  std::vector<SplitStepSample> split_steps;
  double last_time = 0;            // unix seconds of the latest record (the calibration's date)
  std::vector<std::string> errors;  // records that were skipped, in core's words
};

// The calibration records of one metrics JSON-lines stream (a rank's metrics-rank<r>.jsonl),
// appended to `out`; other records, and lines that do not parse, are skipped.
void read_calibration_records(std::istream& jsonl, std::vector<CalibrationRecord>& out);

// "node" records give the fingerprint (device: cuda unless every node's device_name is "cpu";
// links: intra_node, plus inter_node with more than one node). `hosts`, when not empty, names
// the nodes as the launcher reached them (LaunchRecord) instead of the hostname each node
// reported: namespaces and containers often share one hostname. A collective sample is the
// slowest rank's time for its (op, link, group size, bytes): a collective ends for the group
// when its last member is done.
CalibrationSamples samples_from_records(const std::vector<CalibrationRecord>& records,
                                        const std::vector<std::string>& hosts = {});

// The splits `meshtrain calibrate` trains a few steps of (docs/estimator.md, "Split steps"), for
// `world` ranks, `ranks_per_node` (R) per node. With d the ranks of one split (d dividing R, and
// on several nodes d = 2R, or the world when smaller): tp x cp for every tp dividing d as
// (W/d) x 1 x (d/tp) x tp; FSDP over d as (W/d) x d x 1 x 1 (d >= 2); and across nodes FSDP with
// tp inside each node, (W/d) x (d/tp) x 1 x tp for every tp >= 2 dividing R; and for a mixture
// of `num_experts` experts (0: a dense model), for every d >= 2 that divides the experts, every
// tp x cp split again with ep = d inside a node (d <= R) (the compute of attention split tp x cp with experts over ep)
// and the same FSDP with ep = d (the ep term's factor: an all-to-all inside a step against the
// same one timed alone), and with ep = d / 2 for every even d >= 4 where d / 2 divides them
// (efsdp 2: the expert_fsdp term's factor, the experts' own FSDP collectives). In order of d.
std::vector<MeshShape> split_step_shapes(int world, int ranks_per_node, int num_experts = 0);

// The micro-batches per dp rank a split step is measured at, in order: 1, then what a run of
// `run`'s global batch accumulates on the split's dp ranks (global_batch / (micro_batch x dp)),
// at least 2 and at most kMaxSplitStepMicroBatches; 2 when the run's global batch is not set or
// does not divide. The slope between the two is what a run accumulating more pays per
// micro-batch: measured up to the run's own count it is read, not extrapolated (an error e in
// the second step moved an 8-micro-batch prediction by 7e from 1 and 2; docs/estimator.md).
inline constexpr int64_t kMaxSplitStepMicroBatches = 8;
std::vector<int64_t> split_step_micro_batches(const RunConfig& run, const MeshShape& split);

// The split steps as the fit sees stored runs (skipped: a config core cannot read or refuses).
std::vector<RunObservation> split_step_observations(const std::vector<SplitStepSample>& samples);

// samples_from_records() then build_calibration(), dated by the latest record; the step
// efficiency is the median over "step" records of (flops / seconds) / the calibrated matmul rate
// at that precision and ranks per node (split 1), at most 1; 0 (not measured) without one. The
// split steps are then fitted (fit_runs, core/run_fit.h) on that calibration as the base, as
// stored runs would be: Calibration::step_factors. Calibration::step_spread is the median of the
// splits' spreads, step_drift the largest |drift| of the splits measured twice.
Result<Calibration> calibration_from_records(const std::vector<CalibrationRecord>& records,
                                             const std::vector<std::string>& hosts = {});

}  // namespace meshwork
