#include "ui/compare_model.h"

#include <QColor>
#include <QElapsedTimer>
#include <cmath>
#include <map>
#include <set>

#include "core/metrics.h"
#include "ui/axis_colors.h"
#include "ui/error_text.h"
#include "ui/monitor_model.h"
#include "ui/store_worker.h"
#include "ui/theme.h"

namespace meshwork::ui {

QColor run_color(int index) { return run_color(index, is_dark()); }

CompareModel::CompareModel(StoreWorker* worker, QObject* parent)
    : QObject(parent), worker_(worker), cache_(std::make_shared<CompareCache>()) {
  qRegisterMetaType<std::shared_ptr<const CompareFrame>>();
  // A rename, a delete or a re-import changes what a finished run shows.
  connect(worker_, &StoreWorker::runs_changed, this, [this] {
    cache_->clear();
    prediction_cache_.clear();  // another run finished or went: the fits change
    ++prediction_epoch_;
    update_predictions();
  });
}

void CompareModel::set_query(const CompareQuery& q) {
  query_ = q;
  start();
}

void CompareModel::start() {
  if (!job_.start()) return;
  const CompareQuery q = query_;
  worker_->post<std::shared_ptr<CompareFrame>>(
      this, [q, cache = cache_](store::RunStore* s) { return load_compare_frame(s, q, cache.get()); },
      [this](std::shared_ptr<CompareFrame> f) {
        if (job_.finish()) {  // the query changed meanwhile: this answer is already stale
          start();
          return;
        }
        frame_ = std::move(f);
        ++frames_;
        Q_EMIT frame_ready(frame_);
        update_predictions();
      });
}

void CompareModel::update_predictions() {
  if (!frame_ || frame_->error) return;
  struct Ask {
    store::RunId run;
    int64_t version;
    std::string status;
    int64_t steps;
  };
  std::vector<Ask> stale;
  std::vector<PredictionPtr> current;
  for (const store::RunSummary& s : frame_->runs) {
    const int64_t version = store::run_version(s);
    auto it = prediction_cache_.find(s.id);
    if (it != prediction_cache_.end() && prediction_current(*it->second, version, s.status, s.steps))
      current.push_back(it->second);
    else
      stale.push_back({s.id, version, s.status, s.steps});
  }
  if (stale.empty()) {
    if (current != predictions_) {
      predictions_ = std::move(current);
      Q_EMIT predictions_ready();
    }
    return;
  }
  if (prediction_in_flight_) return;  // its answer looks at the latest frame again
  prediction_in_flight_ = true;
  const quint64 epoch = prediction_epoch_;
  worker_->post<std::vector<PredictionPtr>>(
      this,
      [stale](store::RunStore* s) {
        std::vector<PredictionPtr> out;
        for (const Ask& a : stale) out.push_back(load_prediction(s, a.run, a.version, a.status, a.steps));
        return out;
      },
      [this, epoch](std::vector<PredictionPtr> answers) {
        prediction_in_flight_ = false;
        predictions_loaded_ += static_cast<int64_t>(answers.size());
        if (epoch == prediction_epoch_)
          for (PredictionPtr& p : answers)
            if (p) prediction_cache_[p->run] = std::move(p);
        update_predictions();
      });
}

}  // namespace meshwork::ui
