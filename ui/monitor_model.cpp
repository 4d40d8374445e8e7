#include "ui/monitor_model.h"

#include <QElapsedTimer>
#include <functional>

#include "core/metrics.h"
#include "ui/error_text.h"
#include "ui/store_worker.h"

namespace meshwork::ui {

MonitorModel::MonitorModel(StoreWorker* worker, QObject* parent) : QObject(parent), worker_(worker) {
  qRegisterMetaType<std::shared_ptr<const MonitorFrame>>();
  timer_.setInterval(40);  // at most 25 frames a second
  connect(&timer_, &QTimer::timeout, this, &MonitorModel::tick);
}

void MonitorModel::set_run(store::RunId run) {
  if (run == run_) return;
  run_ = run;
  frame_.reset();
  range_.reset();
  ++generation_;
  dirty_ = true;
  if (run_ != 0) {
    timer_.start();
    request(true);
  } else {
    timer_.stop();
  }
}

void MonitorModel::set_rank(int rank) {
  if (rank == rank_) return;
  rank_ = rank;
  dirty_ = true;
  request(true);
}

void MonitorModel::set_range(std::optional<std::pair<double, double>> range) {
  range_ = range;
  dirty_ = true;
  request(true);
}

void MonitorModel::set_pixels(int pixels) {
  pixels = std::clamp(pixels, 16, 8192);
  if (std::abs(pixels - pixels_) < 8) return;  // a few pixels of resize do not need a re-query
  pixels_ = pixels;
  dirty_ = true;
}

void MonitorModel::set_live(bool live) {
  live_ = live;
  if (live_ && run_ != 0) timer_.start();
}

void MonitorModel::refresh() {
  dirty_ = true;
  request(true);
}

void MonitorModel::tick() {
  if (run_ == 0) return;
  if (!live_ && !dirty_) return;
  request(dirty_);
}

void MonitorModel::request(bool force) {
  if (run_ == 0 || in_flight_) return;  // the answer in flight is followed by the next tick
  in_flight_ = true;
  const bool was_dirty = dirty_ || force;
  dirty_ = false;
  const store::RunId run = run_;
  const int rank = rank_;
  const auto range = range_;
  const int pixels = pixels_;
  const int64_t last = (was_dirty || !frame_) ? 0 : frame_->version;
  const quint64 gen = generation_;
  worker_->post<std::shared_ptr<MonitorFrame>>(
      this,
      [=](store::RunStore* s) { return store::load_run_frame(s, run, rank, range, pixels, last); },
      [this, gen](std::shared_ptr<MonitorFrame> f) {
        in_flight_ = false;
        if (gen != generation_ || !f) return;  // another run since, or nothing new
        frame_ = std::move(f);
        ++frames_;
        Q_EMIT frame_ready(frame_);
        const std::string& st = frame_->summary.status;
        // A finished run does not change any more: stop polling (a refresh() still works).
        if (st == store::kStatusOk || st == store::kStatusFailed || st == store::kStatusStopped)
          if (!live_) timer_.stop();
      });
}

}  // namespace meshwork::ui
