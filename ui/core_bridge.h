// The one place the workbench calls core's validation, memory estimate and planner. Plain C++
// values in and out (no Qt objects), so the functions can run on a worker thread; the UI turns
// the results into widgets. Every number and every message comes from core: nothing here
// re-derives mesh math or estimates.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/calibration.h"
#include "core/error.h"
#include "core/memory_estimate.h"
#include "core/mesh.h"
#include "core/model_spec.h"
#include "core/planner.h"
#include "core/routing_imbalance.h"
#include "core/run_fit.h"
#include "core/run_config.h"
#include "core/store/calibration_store.h"
#include "core/time_estimate.h"
#include "core/validation.h"

namespace meshwork::ui {

// What core said about one field of the configuration: core's own Diagnostic (field, value,
// message, level), shown next to the control for `field`.
using meshwork::Diagnostic;
using meshwork::Severity;
inline bool is_error(const Diagnostic& d) { return d.level == Severity::error; }

// The cluster as core sees it: how many ranks, how they sit on nodes, what each rank can hold.
struct ClusterFacts {
  int world_size = 1;
  int ranks_per_node = 1;
  int num_nodes = 1;
  DeviceKind device = DeviceKind::cpu;
  std::string device_name = "CPU";
  double device_memory_bytes = 0;
  std::vector<bool> fast_links;  // per node: GPUs joined by NVLink (tp inside is cheap)
  // A calibration measured on these nodes (`meshwork calibrate`, the Cluster view's Calibrate),
  // read from the store on the store worker (CalibrationModel) and matched by
  // calibration_for_cluster(); the estimates and the planner use it in place of core's hardware
  // defaults where it has the numbers. Null: defaults only. Shared and immutable (copied into
  // the estimate's worker).
  std::shared_ptr<const Calibration> calibration;
  // The time model fitted to the stored runs of these nodes (core/run_fit.h), on the same base as
  // `calibration` (RunFitModel, on the store worker): each term of the step is multiplied by its
  // factor (TimeQuery::fit, EstimateOptions::fit). Null: not fitted (no runs of these nodes).
  std::shared_ptr<const RunFit> fit;
  // Why the stored runs of these nodes were not fitted, in core's words ("" when fitted or when
  // there are none): the planner says so beside its fallback.
  std::string fit_refusal;
  // Mixture of experts: the routing a stored run of the plan's model measured (RoutingModel, on
  // the store worker), which gives each ep shape the imbalance of its own ep
  // (EstimateOptions::routing). The model's data rather than the cluster's, carried here because
  // it replaces a default as the calibration does. Used only when it matches the model being
  // estimated (MeasuredRouting::check_matches). Null: routing taken as balanced.
  std::shared_ptr<const MeasuredRouting> routing;
  // A cluster described by hardware (core/gpu_kinds.h): its peaks and links in place of core's
  // defaults for the device. Unset: the defaults (HardwareModel::for_device).
  std::optional<HardwareModel> hardware;
  // CPU ranks beyond a node's cores ("" when none): named in the editor and the planner.
  std::string oversubscription;
};

// The uncertainty an estimate states: the band of a calibration or of a fit judged out of sample
// when there is one; without either, core's hardware defaults, which are not measured on this
// cluster and can miss a step by a factor of several (docs/estimator.md, "Hardware defaults").
std::string uncertainty_text(const meshwork::TimeEstimate& t);
// The one action that calibrates, as the labels name it.
inline constexpr const char* kCalibrateAction = "Cluster › Calibrate";

// The cluster's nodes as a calibration's fingerprint names them (ClusterFingerprint: device
// kind, per node the host as the launcher reaches it and the ranks it runs): "local" is this
// machine's hostname, which is what meshtrain reports for a node launched without SSH.
ClusterFingerprint cluster_node_set(DeviceKind device, const std::vector<NodeConfig>& nodes);
// The stored calibration of these nodes among `stored` (newest first, as list_calibrations()
// gives them): the newest measured on the same node set (ClusterFingerprint::node_set_id():
// hosts, ranks per node, device), else the newest on the same hosts and device with other rank
// counts (core scales its matmul rates by ranks per node; Calibration::matmul_flops). nullptr
// when none was measured on these hosts.
const store::StoredCalibration* calibration_for_cluster(const std::vector<store::StoredCalibration>& stored,
                                                        DeviceKind device, const std::vector<NodeConfig>& nodes);

// What the memory bar shows for the configuration on this cluster: core's estimates as core
// made them, and what only the view adds (the device's capacity, the verdict, where the step
// time's numbers came from). The bar's parts are memory.peak_terms(), which sum to
// memory.total().
struct MemoryEstimate {
  meshwork::MemoryBreakdown memory;  // core's worst_stage_memory: the stage that needs the most
  meshwork::TimeEstimate time;       // core's estimate_time for the same layout, shown beside the bar
  int stages = 1;                    // pipeline stages (the layout's pp); memory.pp_stage is the worst
  double capacity_bytes = 0;
  bool fits = true;
  std::string breaking_term;  // the part that tips it over capacity (the largest)
  std::string verdict;        // a sentence about it
  // The calibration the step time used (ClusterFacts::calibration): its fingerprint id and date;
  // "" = none (core's hardware defaults). time says which numbers it gave.
  std::string calibration_id;
  std::string calibration_measured_at;
  // The fit of the cluster's stored runs (ClusterFacts::fit) when it corrected a term
  // (time.compute_fitted, time.comm_fitted): the runs it learnt from (0 = no fit used) and how
  // well it agreed with them.
  int fit_runs = 0;
  double fit_median_residual = 0, fit_worst_residual = 0;  // judged on runs the fit did not learn from
  std::string fit_refusal;  // ClusterFacts::fit_refusal
};

// "calibrated" (compute and every communicating axis from the calibration), "partly calibrated"
// or "defaults", with " + fitted to N runs" (or "fitted to N runs" on the defaults) when the fit
// of the cluster's stored runs corrected a term: the tag shown next to the predicted step time.
std::string time_basis(const MemoryEstimate& m);
// One sentence per source: what came from the calibration (named by id and date), what from
// core's defaults, and what the fit of stored runs corrected.
std::string time_basis_detail(const MemoryEstimate& m);

// One of the planner's ranked shapes: core's PlanEntry as make_plan() gave it (shape, fits,
// memory, time with its calibrated/fitted flags and step_band, warnings, accelerate_refusal;
// a shape Accelerate would refuse is kept and marked) and what only the view adds.
struct PlanRow {
  meshwork::PlanEntry entry;
  int fit_runs = 0;   // runs the fit (ClusterFacts::fit) learnt from when it corrected a term; 0 = no fit used
  std::string fit_refusal;  // ClusterFacts::fit_refusal: why the stored runs were not fitted
  std::string note;   // core's warnings and Accelerate's refusal, one per line (the row's tooltip)
};

// The share of the step the axis's collectives hold up (0..1; 0 when the step time is unknown):
// core's exposed share, what hides behind compute left out, so the axes sum to `meshwork plan`'s
// comm column.
inline double comm_share(const meshwork::TimeEstimate& t, Axis a) { return t.exposed_share(a); }

// The same tag for a planner row ("calibrated + fitted to 4 runs", "defaults", ...), and per term
// where its number came from ("compute: calibration × fit of 4 runs; dp_shard: defaults").
std::string time_basis(const PlanRow& r);
std::string time_basis_detail(const PlanRow& r);

// The sizes an axis may take so the product can still reach the world size: the divisors of the
// world size. (Whether the rest of the shape matches is validate()'s job.)
std::vector<int> axis_choices(int world_size);

// Model presets offered in the picker.
std::vector<std::string> model_presets();
// The model a run config names (preset, config.json path or inline object), with core's error.
Result<ModelSpec> model_of(const RunConfig& config);

// Resolves the mesh (one axis may be -1) and validates the whole configuration. Never throws. A
// shape Accelerate would refuse (but meshtrain runs) gets a warning on "mesh" with core's reason.
std::vector<Diagnostic> validate(const RunConfig& config, const ClusterFacts& cluster);
Result<MeshShape> resolved_shape(const RunConfig& config, const ClusterFacts& cluster);

// Per-rank memory of the configuration (shape must resolve).
Result<MemoryEstimate> estimate_memory(const RunConfig& config, const ClusterFacts& cluster);

// Every valid shape for the cluster, ranked best first.
Result<std::vector<PlanRow>> plan_shapes(const RunConfig& config, const ClusterFacts& cluster);

}  // namespace meshwork::ui
