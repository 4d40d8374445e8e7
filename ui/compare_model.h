// The data behind Compare mode: 2-10 runs, one metric overlaid (x = step, tokens or wall time),
// each run's config and shape, and its mean time per step in each axis's collectives. Loaded in
// one job on the store worker; config_diff() is a pure function (tested on its own).
//
// Predicted vs measured: once a frame is in, each compared run's store::predict_run()
// (monitor_model.h: PredictionResult) is loaded on the same worker, in one job for the runs whose
// cached answer is stale (per run id and version; cleared when the store's runs change).
#pragma once

#include <QObject>
#include <QStringList>
#include <array>
#include <cmath>
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <vector>

#include "core/mesh.h"
#include "core/store/run_store.h"
#include "core/store/compare_frame.h"
#include "ui/monitor_model.h"
#include "ui/store_worker.h"

namespace meshwork::ui {

using store::CommStats;
using store::CompareCache;
using store::CompareFrame;
using store::CompareQuery;
using store::DiffRow;
using store::config_diff;
using store::kCommSampleSteps;
using store::kCommWindows;
using store::load_compare_frame;

class CompareModel : public QObject {
  Q_OBJECT
 public:
  explicit CompareModel(StoreWorker* worker, QObject* parent = nullptr);
  void set_query(const CompareQuery& q);  // loads (coalesced: one job in flight at a time)
  const CompareQuery& query() const { return query_; }
  const std::shared_ptr<const CompareFrame>& frame() const { return frame_; }
  int64_t frames() const { return frames_; }
  // One per run of frame(), in its order; empty until they are in for the frame's runs.
  const std::vector<PredictionPtr>& predictions() const { return predictions_; }
  int64_t predictions_loaded() const { return predictions_loaded_; }  // predict_run calls answered

 Q_SIGNALS:
  void frame_ready(std::shared_ptr<const meshwork::ui::CompareFrame> frame);
  void predictions_ready();

 private:
  void start();
  void update_predictions();
  StoreWorker* worker_;
  CompareQuery query_;
  OneInFlight job_;
  std::shared_ptr<const CompareFrame> frame_;
  int64_t frames_ = 0;
  std::shared_ptr<CompareCache> cache_;
  std::map<store::RunId, PredictionPtr> prediction_cache_;
  std::vector<PredictionPtr> predictions_;
  bool prediction_in_flight_ = false;
  quint64 prediction_epoch_ = 0;
  int64_t predictions_loaded_ = 0;
};

// The colour of run `index` in Compare in the current theme (axis_colors.h run_color).
QColor run_color(int index);

}  // namespace meshwork::ui

Q_DECLARE_METATYPE(std::shared_ptr<const meshwork::ui::CompareFrame>)
