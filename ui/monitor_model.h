// The data behind a run's live page. One frame = everything the page draws (every chart's
// decimated series, the run's status, its root cause when it failed), loaded in ONE job on the
// store worker, so the page redraws all charts together from one consistent read.
//
// Coalescing: a 40 ms timer (<= 25 frames/s) asks the worker for a frame only when none is in
// flight; the job first compares the run's version (points stored, status) with the last frame's
// and answers "unchanged" without querying when nothing arrived. A burst of 2k points/s therefore
// costs at most 25 queries and 25 redraws per second, however the points arrive.
#pragma once

#include <QObject>
#include <QTimer>
#include <array>
#include <memory>
#include <optional>
#include <vector>

#include "core/mesh.h"
#include "core/store/run_store.h"

namespace meshwork::ui {

class StoreWorker;

// The series of column k of a breakdown (MonitorFrame::last_breakdown, CompareFrame's means): each
// axis's collective time in kAxes order ("comm_s.tp"), then "compute_s".
inline constexpr int kBreakdownColumns = kAxisCount + 1;
std::string breakdown_key(int k);

struct MonitorFrame {
  store::RunId run = 0;
  QString error;                   // the store could not answer
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
  std::array<Points, kAxisCount> comm;  // indexed by Axis
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
  QString slurm_script;            // a Slurm run's sbatch script as submitted (cluster.slurm.script)
  int64_t version = 0;
  int64_t source_points = 0;       // raw points the loss series stands for
  double query_ms = 0;             // time the worker spent on the queries
};

class MonitorModel : public QObject {
  Q_OBJECT
 public:
  MonitorModel(StoreWorker* worker, QObject* parent = nullptr);

  void set_run(store::RunId run);  // 0: none
  store::RunId run() const { return run_; }
  void set_rank(int rank);         // -1: mean over ranks
  int rank() const { return rank_; }
  int pixels() const { return pixels_; }
  // Visible x range (step) after a zoom; nullopt: the whole run. Re-queries at full resolution.
  void set_range(std::optional<std::pair<double, double>> range);
  void set_pixels(int pixels);     // chart width in pixel columns
  void set_live(bool live);        // poll while the run may still change (default on)
  void refresh();                  // ask for a frame now (coalesced)

  const std::shared_ptr<const MonitorFrame>& frame() const { return frame_; }
  int64_t frames_applied() const { return frames_; }

 Q_SIGNALS:
  void frame_ready(std::shared_ptr<const meshwork::ui::MonitorFrame> frame);

 private:
  void tick();
  void request(bool force);

  StoreWorker* worker_;
  QTimer timer_;
  store::RunId run_ = 0;
  int rank_ = -1;
  std::optional<std::pair<double, double>> range_;
  int pixels_ = 800;
  bool live_ = true;
  bool in_flight_ = false;
  bool dirty_ = true;  // parameters changed since the last frame: query even if the run did not
  quint64 generation_ = 0;
  std::shared_ptr<const MonitorFrame> frame_;
  int64_t frames_ = 0;
};

// Loads a frame (worker thread). `last_version`: the version of the frame shown; when the run has
// not changed since, returns nullptr (nothing to redraw).
std::shared_ptr<MonitorFrame> load_monitor_frame(store::RunStore* store, store::RunId run, int rank,
                                                 std::optional<std::pair<double, double>> range,
                                                 int pixels, int64_t last_version);

// Fills f.straggler_step / f.stragglers (worker thread; f.summary, f.world and f.shape set).
void load_stragglers(store::RunStore* store, store::RunId run, MonitorFrame& f);

// Per-rank capacity from the run's stored cluster (probes) and shape: the smallest GPU, or on CPU
// nodes the node's memory divided by its ranks.
std::optional<double> capacity_of(const nlohmann::json& cluster, const nlohmann::json& config, int world);

}  // namespace meshwork::ui

Q_DECLARE_METATYPE(std::shared_ptr<const meshwork::ui::MonitorFrame>)
