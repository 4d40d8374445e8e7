#include "ui/monitor_model.h"

#include <QElapsedTimer>
#include <algorithm>
#include <cmath>
#include <functional>

#include "core/metrics.h"
#include "ui/error_text.h"
#include "ui/format.h"
#include "ui/store_worker.h"

namespace meshwork::ui {

namespace {
bool finished(const std::string& status) {
  return status == store::kStatusOk || status == store::kStatusFailed || status == store::kStatusStopped;
}
}  // namespace

PredictionPtr load_prediction(store::RunStore* store, store::RunId run, int64_t version, const std::string& status,
                              int64_t steps) {
  auto out = std::make_shared<PredictionResult>();
  out->run = run;
  out->version = version;
  out->status = status;
  out->steps = steps;
  if (!store) {
    out->refusal = store_unavailable();
    return out;
  }
  auto p = store::predict_run(store, run);
  if (p)
    out->prediction = std::move(*p);
  else
    out->refusal = p.error();
  return out;
}

bool prediction_current(const PredictionResult& cached, int64_t version, const std::string& status, int64_t steps) {
  if (cached.version == version) return true;
  if (cached.status != status || finished(status)) return false;  // it finished since: ask once more
  // Still running: ask again only once it has grown noticeably.
  const int64_t grown = std::max<int64_t>(kPredictionMinSteps,
                                          static_cast<int64_t>(std::ceil(kPredictionStepGrowth * cached.steps)));
  return steps < cached.steps + grown;
}

std::vector<Axis> communicating_axes(const store::RunPrediction& p) {
  std::vector<Axis> axes;
  for (Axis a : kAxes) {
    if (p.check.predicted_comm_s[a] > 0 || p.check.measured_comm_s[a] > 0) axes.push_back(a);
  }
  return axes;
}

std::vector<PredictionRow> prediction_rows(const store::RunPrediction& p) {
  const PredictionCheck& c = p.check;
  auto row = [](QString what, std::optional<Axis> axis, double pred, double meas) {
    PredictionRow r;
    r.what = std::move(what);
    r.axis = axis;
    r.predicted_s = pred;
    r.measured_s = meas;
    r.error = meas > 0 ? PredictionCheck::error(pred, meas) : std::nan("");
    return r;
  };
  std::vector<PredictionRow> rows;
  rows.push_back(row(QObject::tr("step"), std::nullopt, c.predicted_step_s, c.measured_step_s));
  rows.push_back(row(QObject::tr("compute"), std::nullopt, c.predicted_compute_s, c.measured_compute_s));
  for (Axis a : communicating_axes(p)) {
    rows.push_back(row(axis_label(a), a, c.predicted_comm_s[a], c.measured_comm_s[a]));
  }
  return rows;
}

QString format_ms(double seconds) {
  if (!std::isfinite(seconds)) return QStringLiteral("—");
  const double ms = seconds * 1000.0;
  const double a = std::abs(ms);
  if (a == 0) return QStringLiteral("0");  // the axis does not communicate in this run
  return QString::number(ms, 'f', a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3);
}

QString format_error_percent(double error) {
  if (!std::isfinite(error)) return QStringLiteral("—");
  const double pct = error * 100.0;
  const QString digits = QString::number(std::abs(pct), 'f', 1);
  // "-0.0" reads as a sign error: a rounding to zero is shown unsigned.
  if (digits == QStringLiteral("0.0")) return QStringLiteral("0.0 %");
  return QStringLiteral("%1%2 %").arg(pct < 0 ? QStringLiteral("-") : QStringLiteral("+"), digits);
}

QString prediction_caption(const store::RunPrediction& p) {
  return QObject::tr("predicted from %1 · measured: mean of %n step(s)", nullptr, static_cast<int>(p.measured.steps))
      .arg(QString::fromStdString(p.basis()));
}

MonitorModel::MonitorModel(StoreWorker* worker, QObject* parent) : QObject(parent), worker_(worker) {
  qRegisterMetaType<std::shared_ptr<const MonitorFrame>>();
  qRegisterMetaType<std::shared_ptr<const PredictionResult>>();
  timer_.setInterval(40);  // at most 25 frames a second
  connect(&timer_, &QTimer::timeout, this, &MonitorModel::tick);
  // Another run finished, was imported or deleted: every prediction's fit may change.
  connect(worker_, &StoreWorker::runs_changed, this, [this] {
    predictions_.clear();
    ++prediction_epoch_;  // an answer in flight was made before the change: not kept
    update_prediction();
  });
}

void MonitorModel::set_run(store::RunId run) {
  if (run == run_) return;
  run_ = run;
  frame_.reset();
  prediction_.reset();
  range_.reset();
  moe_layer_ = -1;  // another model: its first sparse layer
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

void MonitorModel::set_moe_layer(int layer) {
  if (layer == moe_layer_) return;
  moe_layer_ = layer;
  dirty_ = true;
  request(true);
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
  const int moe_layer = moe_layer_;
  const int64_t last = (was_dirty || !frame_) ? 0 : frame_->version;
  const quint64 gen = generation_;
  worker_->post<std::shared_ptr<MonitorFrame>>(
      this,
      [=](store::RunStore* s) { return store::load_run_frame(s, run, rank, range, pixels, last, moe_layer); },
      [this, gen](std::shared_ptr<MonitorFrame> f) {
        in_flight_ = false;
        if (gen != generation_ || !f) return;  // another run since, or nothing new
        frame_ = std::move(f);
        ++frames_;
        Q_EMIT frame_ready(frame_);
        update_prediction();
        const std::string& st = frame_->summary.status;
        // A finished run does not change any more: stop polling (a refresh() still works).
        if (st == store::kStatusOk || st == store::kStatusFailed || st == store::kStatusStopped)
          if (!live_) timer_.stop();
      });
}

void MonitorModel::update_prediction() {
  if (run_ == 0 || !frame_ || frame_->error || frame_->run != run_) return;
  const store::RunSummary& s = frame_->summary;
  const int64_t version = frame_->version;
  auto it = predictions_.find(run_);
  if (it != predictions_.end() && prediction_current(*it->second, version, s.status, s.steps)) {
    if (prediction_ != it->second) {
      prediction_ = it->second;
      Q_EMIT prediction_ready(prediction_);
    }
    return;
  }
  if (prediction_in_flight_) return;  // its answer checks the latest frame again
  prediction_in_flight_ = true;
  const store::RunId run = run_;
  const std::string status = s.status;
  const int64_t steps = s.steps;
  const quint64 epoch = prediction_epoch_;
  worker_->post<PredictionPtr>(
      this, [=](store::RunStore* st) { return load_prediction(st, run, version, status, steps); },
      [this, epoch](PredictionPtr p) {
        prediction_in_flight_ = false;
        ++predictions_loaded_;
        if (p && epoch == prediction_epoch_) predictions_[p->run] = p;
        // Another run, or a newer frame, since it was asked: answer from the cache or ask again.
        update_prediction();
      });
}

}  // namespace meshwork::ui
