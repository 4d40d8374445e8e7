// The workbench's "Try the top K": the planner's K best fitting shapes launched one after another
// for N steps each through the workbench's own launch path (LaunchController: launch_run on a
// worker thread, then a follower streaming the run into the store — what the Launch action does,
// so each trial shows live in Runs), recorded as a trial group in the store (core/store/trials.h)
// on the store worker. Nothing here blocks the GUI thread or reads the store on it.
//
// `meshwork plan ... --try K` (app/cli_trials.cpp) is the same for the command line.
#pragma once

#include <QObject>
#include <QString>
#include <vector>

#include "core/run_config.h"
#include "core/store/trials.h"
#include "ui/core_bridge.h"

namespace meshwork::ui {

class LaunchController;
class StoreWorker;

class TrialsController : public QObject {
  Q_OBJECT
 public:
  explicit TrialsController(QObject* parent = nullptr);

  // Where runs are launched and the group is stored: the workbench's own (set by whoever owns
  // them). Must be set before start().
  void set_launcher(LaunchController* launcher);
  void set_store(StoreWorker* store);
  LaunchController* launcher() const { return launcher_; }
  StoreWorker* store() const { return store_; }

  // Tries the first `k` rows that fit of `rows` (the planner's, in its order), each as `base` with
  // the row's shape and `steps` steps. False (and failed()) when trials run already or nothing fits.
  bool start(const RunConfig& base, const std::vector<PlanRow>& rows, int k, int steps);
  // Stops the running trial's run (recorded as stopped) and launches no more.
  void stop();
  bool running() const { return running_; }
  store::TrialId trial() const { return trial_; }
  int position() const { return next_ + 1; }  // the shape being tried, 1-based
  int count() const { return static_cast<int>(chosen_.size()); }

 Q_SIGNALS:
  void started(qint64 trial);         // the group is stored; its first shape is launching
  void progress(const QString& text); // "Trial 3 #1/2 (1×2×1×1): launching", ...
  void updated(qint64 trial);         // a run was recorded, failed or ended: read the group again
  void finished(qint64 trial);        // every shape tried (or stopped)
  void failed(const QString& message);  // could not start

 private:
  void launch_next();
  void next_later();
  void done();
  void on_launched(qint64 run);
  void on_launch_failed(const QString& message);
  void on_finished(qint64 run, const QString& state);
  void record(std::function<Status(store::RunStore&)> write);

  LaunchController* launcher_ = nullptr;
  StoreWorker* store_ = nullptr;
  RunConfig base_;
  std::vector<PlanRow> chosen_;
  int steps_ = 0;
  bool running_ = false;
  bool stopping_ = false;
  bool awaiting_launch_ = false;  // our launch() is on its way: the next launched / launch_failed is ours
  store::TrialId trial_ = 0;
  int next_ = 0;                  // index into chosen_
  qint64 current_run_ = 0;        // the run being followed, 0 when none
};

}  // namespace meshwork::ui
