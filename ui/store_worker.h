// The workbench's one door to the run store. A StoreWorker owns a RunStore connection on its own
// QThread; models post jobs (a function of the RunStore) and get the result back as a queued call
// on their own thread. Views never see SQLite: they talk to models, models post jobs here.
//
// Jobs run in order, one at a time. WAL mode lets this connection read while a follower's writer
// ingests (remote/follower.h), so queries never wait on a running ingest.
#pragma once

#include <QObject>
#include <QPointer>
#include <QString>
#include <QThread>
#include <atomic>
#include <functional>
#include <memory>
#include <utility>

#include "core/handover.h"
#include "core/store/run_store.h"

namespace meshwork::ui {

// One job of a kind in flight on the worker at a time (the runs list, a Compare frame): a request
// made while one runs is remembered and made once the answer is in, as that answer is stale.
class OneInFlight {
 public:
  // True: start the job now. False: one is running, and will be asked again (see finish()).
  bool start() {
    if (busy_) {
      again_ = true;
      return false;
    }
    busy_ = true;
    return true;
  }
  // On the answer: true when a request came meanwhile (start the job again).
  bool finish() {
    busy_ = false;
    return std::exchange(again_, false);
  }

 private:
  bool busy_ = false;
  bool again_ = false;
};

class StoreWorker : public QObject {
  Q_OBJECT
 public:
  // Opens `db` (created if needed) on the worker thread. Errors come back from every job.
  explicit StoreWorker(const QString& db, QObject* parent = nullptr);
  ~StoreWorker() override;  // waits for the running job, drops the queued ones

  const QString& db_path() const { return db_; }

  // Runs `job(store)` on the worker thread, then `done(result)` on `context`'s thread (skipped
  // when context was destroyed meanwhile). `job` gets nullptr when the store could not be opened.
  template <class R>
  void post(QObject* context, std::function<R(store::RunStore*)> job, std::function<void(R)> done) {
    QPointer<QObject> ctx(context);
    auto task = [this, ctx, job = std::move(job), done = std::move(done)]() mutable {
      if (stopping_) return;
      R r = job(store());
      if (!ctx) return;
      QMetaObject::invokeMethod(
          ctx.data(), handed_over([ctx, done = std::move(done), r = std::move(r)]() mutable {
            if (ctx) done(std::move(r));
          }),
          Qt::QueuedConnection);
    };
    QMetaObject::invokeMethod(exec_, handed_over(std::move(task)), Qt::QueuedConnection);
  }

  // Blocks until every job posted before this call has run (tests, shutdown).
  void drain();

  // The store's error when it could not be opened (empty when it is fine).
  QString open_error() const;

 Q_SIGNALS:
  // Something changed the store's runs (a new run, a rename, a delete, a launch): run lists
  // refresh themselves on this.
  void runs_changed();

 public:
  void notify_runs_changed() { Q_EMIT runs_changed(); }

 private:
  store::RunStore* store();  // worker thread only; opens lazily

  QString db_;
  QThread thread_;
  QObject* exec_;  // lives on thread_: posted jobs run in its event loop
  std::unique_ptr<store::RunStore> store_;
  QString open_error_;
  std::atomic<bool> stopping_{false};
};

// The database the workbench uses: $MESHWORK_DB when set, else the XDG default
// (core/store/paths.h), the same one the CLI uses.
QString default_store_path();

}  // namespace meshwork::ui
