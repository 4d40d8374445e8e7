#include "ui/store_worker.h"

#include <QSemaphore>

#include "core/store/paths.h"
#include "ui/error_text.h"

namespace meshwork::ui {

QString default_store_path() {
  const QByteArray env = qgetenv("MESHWORK_DB");
  if (!env.isEmpty()) return QString::fromLocal8Bit(env);
  return QString::fromStdString(store::default_db_path().string());
}

StoreWorker::StoreWorker(const QString& db, QObject* parent) : QObject(parent), db_(db), exec_(new QObject) {
  thread_.setObjectName("StoreWorker");
  exec_->moveToThread(&thread_);
  thread_.start();
}

StoreWorker::~StoreWorker() {
  stopping_ = true;  // jobs still queued return at once
  // The connection closes on the thread that used it, after the jobs already queued.
  QSemaphore closed;
  QMetaObject::invokeMethod(exec_, handed_over([this, &closed] {
    store_.reset();
    handover_sent(&closed);  // QSemaphore is not seen by TSan
    closed.release();
  }), Qt::QueuedConnection);
  closed.acquire();
  handover_received(&closed);
  thread_.quit();
  thread_.wait();
  delete exec_;  // its thread has finished: nothing runs on it any more
}

store::RunStore* StoreWorker::store() {
  if (!store_ && open_error_.isEmpty()) {
    auto s = store::RunStore::open(db_.toStdString());
    if (s) {
      store_ = std::move(*s);
    } else {
      open_error_ = error_text(s.error());
    }
  }
  return store_.get();
}

QString StoreWorker::open_error() const {
  // Read only after a drain(): written on the worker thread before the job that drain waits on.
  return open_error_;
}

void StoreWorker::drain() {
  if (QThread::currentThread() == &thread_) return;
  QSemaphore done;
  QMetaObject::invokeMethod(exec_, handed_over([&done] {
    handover_sent(&done);  // the jobs before this one are done; QSemaphore is not seen by TSan
    done.release();
  }), Qt::QueuedConnection);
  done.acquire();
  handover_received(&done);
}

}  // namespace meshwork::ui
