#include "ui/compare_model.h"

#include <QColor>
#include <QElapsedTimer>
#include <cmath>
#include <map>
#include <set>

#include "core/metrics.h"
#include "ui/error_text.h"
#include "ui/monitor_model.h"
#include "ui/store_worker.h"

namespace meshwork::ui {

QColor run_color(int index) {
  static const char* k[] = {"#4E79A7", "#F28E2B", "#E15759", "#76B7B2", "#59A14F",
                            "#EDC948", "#B07AA1", "#FF9DA7", "#9C755F", "#BAB0AC"};
  return QColor(k[((index % 10) + 10) % 10]);
}

CompareModel::CompareModel(StoreWorker* worker, QObject* parent)
    : QObject(parent), worker_(worker), cache_(std::make_shared<CompareCache>()) {
  qRegisterMetaType<std::shared_ptr<const CompareFrame>>();
  // A rename, a delete or a re-import changes what a finished run shows.
  connect(worker_, &StoreWorker::runs_changed, this, [this] { cache_->clear(); });
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
      });
}

}  // namespace meshwork::ui
