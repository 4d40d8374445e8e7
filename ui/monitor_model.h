// The data behind a run's live page. One frame = everything the page draws (every chart's
// decimated series, the run's status, its root cause when it failed), loaded in ONE job on the
// store worker, so the page redraws all charts together from one consistent read.
//
// Coalescing: a 40 ms timer (<= 25 frames/s) asks the worker for a frame only when none is in
// flight; the job first compares the run's version (points stored, status) with the last frame's
// and answers "unchanged" without querying when nothing arrived. A burst of 2k points/s therefore
// costs at most 25 queries and 25 redraws per second, however the points arrive.
//
// Predicted vs measured: beside the frame, the model loads store::predict_run() for
// the run -- the step time, compute and each axis's communication the planner would have
// predicted before the run, next to what the run measured -- on the same worker, in a job of its
// own posted after a frame arrived. predict_run reads the cluster's other runs, so it is not
// asked on every frame: only when the run finished, or its step count grew noticeably since the
// last answer (kPredictionStepGrowth), with the answers cached per run id and version, cleared
// when the store's runs change (another run finished: a new fit).
#pragma once

#include <QObject>
#include <QString>
#include <QTimer>
#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/mesh.h"
#include "core/store/run_frame.h"
#include "core/store/run_observations.h"
#include "core/store/run_store.h"

namespace meshwork::ui {

class StoreWorker;

using MonitorFrame = store::RunFrame;
using store::kBreakdownColumns;

// A run's prediction next to its measurement (store::predict_run), or predict_run's reason for
// not judging the run (still running, too few steps, another tool's run without comm_s, ...).
struct PredictionResult {
  store::RunId run = 0;
  int64_t version = 0;   // store::run_version of the run when it was asked
  std::string status;    // the run's status then
  int64_t steps = 0;     // and its step count
  std::optional<store::RunPrediction> prediction;
  std::optional<Error> refusal;  // set when prediction is not
};
using PredictionPtr = std::shared_ptr<const PredictionResult>;

// The prediction of `run` as the worker job makes it (store thread only).
PredictionPtr load_prediction(store::RunStore* store, store::RunId run, int64_t version, const std::string& status,
                              int64_t steps);

// A run that grew by at least this fraction of its steps (and kPredictionMinSteps) since the
// last prediction is asked again; a finished run once per version.
inline constexpr double kPredictionStepGrowth = 0.1;
inline constexpr int64_t kPredictionMinSteps = 10;
// Whether `cached` still stands for a run now at (version, status, steps).
bool prediction_current(const PredictionResult& cached, int64_t version, const std::string& status, int64_t steps);

// One row of a "Predicted vs measured" table: the step, compute, then each axis that
// communicates (predicted or measured above zero), in kAxes order. From PredictionCheck.
struct PredictionRow {
  QString what;               // "step", "compute", axis_label(axis)
  std::optional<Axis> axis;
  double predicted_s = 0;
  double measured_s = 0;
  double error = 0;           // (predicted - measured) / measured; NaN when nothing was measured
};
std::vector<PredictionRow> prediction_rows(const store::RunPrediction& p);
// Axes that communicate in `p` (predicted or measured > 0), kAxes order.
std::vector<Axis> communicating_axes(const store::RunPrediction& p);
// Milliseconds as the tables show them, without the unit: 0.1234 s -> "123", 0.01234 -> "12.3",
// 0.001234 -> "1.23", below 1 ms three decimals; 0 -> "0".
QString format_ms(double seconds);
// A relative error as a signed percentage: 0.123 -> "+12.3 %", -0.04 -> "-4.0 %"; "—" for NaN.
QString format_error_percent(double error);
// "predicted from <basis> · measured: mean of N steps" (the table's caption).
QString prediction_caption(const store::RunPrediction& p);

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
  // The sparse layer of the expert-load heat map (mixtures of experts); -1: the run's first.
  void set_moe_layer(int layer);
  int moe_layer() const { return moe_layer_; }
  void set_live(bool live);        // poll while the run may still change (default on)
  void refresh();                  // ask for a frame now (coalesced)

  const std::shared_ptr<const MonitorFrame>& frame() const { return frame_; }
  int64_t frames_applied() const { return frames_; }
  // The shown run's prediction (null until the first answer for this run).
  const PredictionPtr& prediction() const { return prediction_; }
  int64_t predictions_loaded() const { return predictions_loaded_; }  // predict_run jobs answered

 Q_SIGNALS:
  void frame_ready(std::shared_ptr<const meshwork::ui::MonitorFrame> frame);
  void prediction_ready(std::shared_ptr<const meshwork::ui::PredictionResult> prediction);

 private:
  void tick();
  void request(bool force);
  void update_prediction();  // after a frame: the cached answer, or a job when it is stale

  StoreWorker* worker_;
  QTimer timer_;
  store::RunId run_ = 0;
  int rank_ = -1;
  std::optional<std::pair<double, double>> range_;
  int pixels_ = 800;
  int moe_layer_ = -1;
  bool live_ = true;
  bool in_flight_ = false;
  bool dirty_ = true;  // parameters changed since the last frame: query even if the run did not
  quint64 generation_ = 0;
  std::shared_ptr<const MonitorFrame> frame_;
  int64_t frames_ = 0;
  std::map<store::RunId, PredictionPtr> predictions_;  // per run, the latest answer
  PredictionPtr prediction_;
  bool prediction_in_flight_ = false;
  quint64 prediction_epoch_ = 0;  // bumped when the cache is cleared
  int64_t predictions_loaded_ = 0;
};

}  // namespace meshwork::ui

Q_DECLARE_METATYPE(std::shared_ptr<const meshwork::ui::MonitorFrame>)
Q_DECLARE_METATYPE(std::shared_ptr<const meshwork::ui::PredictionResult>)
