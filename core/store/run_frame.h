// Everything a run's live page draws, read from the store in ONE call (load_run_frame), so every
// chart of the page is drawn from one consistent read: the workbench's Monitor page (on its store
// worker) and the web view's /api/runs/ID/frame both show this. Qt-free: the one place the page's
// queries live.
#pragma once

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/mesh.h"
#include "core/store/expert_load.h"
#include "core/store/run_segments.h"
#include "core/store/run_store.h"

namespace meshwork::store {

// The series of column k of a breakdown (MonitorFrame::last_breakdown, CompareFrame's means): each
// axis's collective time in kAxes order ("comm_s.tp"), then "compute_s".
inline constexpr int kBreakdownColumns = kAxisCount + 1;
std::string breakdown_key(int k);

// A fingerprint of what a run shows: changes whenever points arrive or its status changes (the
// live pages re-read a run only when it moved).
int64_t run_version(const RunSummary& s);

// The run's throughput: rank 0's tokens/s (one data-parallel replica's) times the replicas.
std::optional<double> run_tokens_per_s(const RunSummary& s);

struct RunFrame {
  store::RunId run = 0;
  std::optional<Error> error;      // the store could not answer
  store::RunSummary summary;
  nlohmann::json config = nlohmann::json::object();
  MeshShape shape;                 // from the summary ("2x2x1x1"); 1s when unknown
  int world = 0;
  std::optional<double> capacity_bytes;  // per rank: GPU memory, or a CPU node's memory / ranks
  int rank = -1;                   // the rank shown in per-rank charts; -1: mean over ranks
  int pixels = 0;                  // the chart width the series were decimated for
  using Points = std::vector<store::Point>;
  Points loss, lr, grad_norm, tokens_per_s, mfu, step_s, compute;
  Points eval_loss;  // validation loss (eval records, docs/metrics.md); empty without --eval-data
  AxisArray<Points> comm;
  Points comm_ep;  // the experts' all-to-all (comm_s.ep); queried when the shape has ep > 1
  // Mixtures of experts: the sparse layers with stored routing (empty: a dense run, and the
  // pages hide their expert-load view) and the heat map of the one chosen (moe_layer).
  std::vector<int> moe_layers;
  std::optional<ExpertLoadMap> expert_load;
  std::vector<Points> mem, mem_peak;  // per rank
  // Per rank at its latest step: seconds in each axis's collectives, then compute.
  std::vector<std::array<double, kBreakdownColumns>> last_breakdown;
  // The slowest and fastest rank at one step (the latest step every rank has reported, else the
  // latest): step time first, then each axis that communicates (store: RunStore::step_extremes).
  struct Straggler {
    std::optional<Axis> axis;  // unset: step time
    store::StepExtremes at;
  };
  int64_t straggler_step = -1;
  std::vector<Straggler> stragglers;
  std::vector<store::Event> problems;  // warning and error events, newest last
  std::string slurm_script;        // a Slurm run's sbatch script as submitted (cluster.slurm.script)
  // A re-planned run's segments in order (run_segments.h): the charts mark where each later one
  // begins. Empty for a run that never changed shape.
  std::vector<store::RunSegment> segments;
  int64_t version = 0;
  int64_t source_points = 0;       // raw points the loss series stands for
  double query_ms = 0;             // time the worker spent on the queries
};

// Loads a frame. `last_version`: the version of the frame shown; when the run has
// not changed since, returns nullptr (nothing to redraw). `moe_layer`: the sparse layer of the
// expert-load heat map (one that has no routing stored, e.g. -1: the run's first sparse layer).
std::shared_ptr<RunFrame> load_run_frame(store::RunStore* store, store::RunId run, int rank,
                                         std::optional<std::pair<double, double>> range,
                                         int pixels, int64_t last_version, int moe_layer = -1);
// The heat map's columns for a chart `pixels` wide: one per 4 pixels at most.
inline int expert_load_columns(int pixels) { return std::max(8, pixels / 4); }

// Fills f.straggler_step / f.stragglers (f.summary, f.world and f.shape set).
void load_stragglers(store::RunStore* store, store::RunId run, RunFrame& f);

// Why a run ended badly, as the pages show it where the eye is: the headline ("failed" or "stopped"
// and the first line of the run's exit reason: which node, which rank, how it exited) and the
// detail (the reason's further lines, else the newest error event's: the rank's stderr tail, at
// most kRootCauseDetailChars of its end). Unset for a run that is running or ended ok.
inline constexpr size_t kRootCauseDetailChars = 1500;
struct RootCause {
  bool failed = false;   // false: stopped by the user with a reason
  std::string reason;    // the exit reason's first line
  std::string detail;    // may be empty
};
std::optional<RootCause> root_cause(const RunSummary& s, const std::vector<Event>& problems);

// Per-rank capacity from the run's stored cluster (probes) and shape: the smallest GPU, or on CPU
// nodes the node's memory divided by its ranks.
std::optional<double> capacity_of(const nlohmann::json& cluster, const nlohmann::json& config, int world);

}  // namespace meshwork::store
