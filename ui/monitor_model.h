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
#include "core/store/run_frame.h"
#include "core/store/run_store.h"

namespace meshwork::ui {

class StoreWorker;

using MonitorFrame = store::RunFrame;
using store::kBreakdownColumns;

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

}  // namespace meshwork::ui

Q_DECLARE_METATYPE(std::shared_ptr<const meshwork::ui::MonitorFrame>)
