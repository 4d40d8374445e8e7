// Learning the time model from past runs ("learn from runs").
//
// The estimator (core/time_estimate.h) predicts a step as terms, each from a formula:
//   compute                 FLOPs / (matmul rate x step efficiency)
//   tp                      sequence-parallel all-gathers / reduce-scatters (tp axis)
//   cp ring                 ring attention's send/recv of k, v blocks (cp axis)
//   fsdp                    FSDP's all-gathers / reduce-scatters over dp_shard x cp
//   dp_replicate            the gradient all-reduce over replicas
//   ep, expert_fsdp         a mixture of experts' all-to-alls (ep > 1) and its experts' own
//                           FSDP collectives over efsdp
// A stored run measured its compute_s and its comm_s per axis (docs/metrics.md). fit_runs()
// finds, for every term and the conditions it ran under (FitKey: the link, the group size, the
// way matmuls were split), the factor theta that makes the formula agree with what the runs
// measured, in the least-squares sense of relative errors:
//
//   minimise  sum over runs, sum over equations  ((sum_u (theta_u b_u + delta_u) - m) / m)^2
//
// where b_u is the formula's value of term u for that run (the "base": the calibration when the
// cluster has one, else HardwareModel's defaults) and m the measured seconds. delta_u is the
// term's per-step seconds (TermCorrection::per_step_s): an unknown only for a term whose
// observations have formula values at least kSeparableSpread apart (the calibration's split
// steps at 1 micro-batch and at the run's accumulation, 2 to 8), so that theta and delta are not one number twice; elsewhere 0.
// A delta that comes out negative, or that leaves theta <= 0, is dropped and the system solved
// again. One equation per measured quantity (each term plus its delta where fitted):
// compute_s = theta_c b_c; comm_s.tp = theta_tp b_tp; comm_s.dp_replicate = theta_r b_r; and,
// because meshtrain charges FSDP traffic over dp_shard x cp to both axes,
// comm_s.dp_shard + comm_s.cp = theta_fsdp b_fsdp + theta_expert_fsdp b_expert_fsdp + theta_ring b_ring
// (comm_s.ep = theta_ep b_ep for the all-to-alls). Dividing by m weighs every
// run alike whatever its length (a 10 ms term counts as much as a 1 s one). Derivation of the
// normal equations: docs/estimator.md, "Fitted from runs".
//
// estimate_time() multiplies each term by its factor (TimeQuery::fit), so the fit keeps the
// formulas' scaling in model size, sequence length, batch and group size, and corrects what they
// miss on this cluster (Gloo's real cost of many small collectives between compute, ring
// attention's per-block work, the step's non-matmul work at each split).
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/calibration.h"
#include "core/error.h"
#include "core/fit_key.h"
#include "core/mesh.h"
#include "core/model_spec.h"
#include "core/run_config.h"

namespace meshwork {

struct TimeQuery;
struct TimeEstimate;

// Mean seconds per optimizer step that a run measured (its warm-up step left out).
struct RunMeasurement {
  double compute_s = 0;
  AxisArray<double> comm_s;
  double comm_ep_s = 0;                     // the experts' all-to-alls ("comm_s.ep"; 0 without ep)
  int64_t steps = 0;                        // steps averaged
  double step_s() const {
    double s = compute_s + comm_ep_s;
    for (double c : comm_s) s += c;
    return s;
  }
};

// One stored run as the fit sees it: what it ran (a TimeQuery, which holds its own model; its
// calibration and fit unset, the fit sets the base) and what it measured.
struct RunObservation {
  int64_t run = 0;
  std::string name;                          // for messages
  std::shared_ptr<const TimeQuery> query;
  RunMeasurement measured;
};

struct RunFit {
  std::string cluster;         // the node set the runs ran on (ClusterFingerprint::node_set_id)
  std::string base;            // "defaults", or "calibration <fingerprint id>"
  int runs = 0;                // observations used
  std::vector<FitFactor> factors;  // sorted by key
  double worst_residual = 0;   // max |fitted - measured| / measured over the equations
  double median_residual = 0;
  int unknowns = 0;            // factors and per-step seconds solved for
  // Judged out of sample (fit_runs_out_of_sample): worst_residual and median_residual are then
  // the step errors of each run predicted by the fit of the OTHER runs (leave-one-out), and the
  // residuals on the runs it learnt from are kept here.
  bool out_of_sample = false;
  int judged_runs = 0;  // runs predicted by the fit of the others
  double in_sample_worst_residual = 0, in_sample_median_residual = 0;

  // The correction for `key` (core/fit_key.h, lookup_factor with any link): that key's; else
  // the medians over keys of the same term on the same link, then on any link; unset when no
  // run had the term at all.
  std::optional<TermCorrection> factor(const FitKey& key) const;
};
nlohmann::json to_json(const RunFit& fit);

// Fits the observations: the base prediction of each (estimate_time with `base` as the
// calibration, no fit) against what it measured. Observations with no positive measurement are
// skipped. An Error when nothing is left to fit.
Result<RunFit> fit_runs(const std::vector<RunObservation>& runs, const std::optional<Calibration>& base);

// The fit a planner may use: fit_runs() of all the runs, judged on runs it did not learn from.
// An Error, in words a planner shows beside its fallback (the calibration or the defaults),
// when there are fewer runs than the fit has unknowns plus one (so that each run can be left out
// and predicted by a fit of the others) or no run could be predicted that way. On success
// median_residual and worst_residual are the leave-one-out step errors (RunFit::out_of_sample).
Result<RunFit> fit_runs_out_of_sample(const std::vector<RunObservation>& runs, const std::optional<Calibration>& base);

// Predicted against measured for one run, term by term (the run page and Compare show this).
struct PredictionCheck {
  double predicted_step_s = 0, measured_step_s = 0;
  double predicted_compute_s = 0, measured_compute_s = 0;
  AxisArray<double> predicted_comm_s, measured_comm_s;
  static double error(double predicted, double measured) {  // relative; 0 when nothing measured
    return measured > 0 ? (predicted - measured) / measured : 0.0;
  }
};
PredictionCheck check_prediction(const TimeEstimate& predicted, const RunMeasurement& measured);

}  // namespace meshwork
