// The Cluster view's Calibrate action: `meshtrain calibrate` on the cluster's nodes through the
// workbench's launch path, exactly as `meshwork calibrate` runs it (app/cli_calibrate.cpp):
//   remote::launch_run() with LaunchRequest::subcommand = "calibrate" (the request built by
//   LaunchController::request(): the same meshtrain or runtime bundle, SSH options and reviewed
//   host keys as a Launch), then a RunFollower streaming the ranks' records into the store, then
//   the run's calibration records fitted (calibration_from_records) and saved by fingerprint
//   (save_calibration).
// All of it on one worker thread; progress and the end come back to the GUI thread as queued
// signals. Nothing here touches SQLite on the GUI thread.
#pragma once

#include <QObject>
#include <QString>
#include <memory>
#include <thread>

#include "core/run_config.h"

namespace meshwork::ui {

class LaunchController;

class CalibrateController : public QObject {
  Q_OBJECT
 public:
  // `db`: the store the run and the calibration go to (the workbench's). `launcher` builds the
  // launch request (trainer, runtime bundle, SSH options).
  CalibrateController(QString db, LaunchController* launcher, QObject* parent = nullptr);
  ~CalibrateController() override;  // stops following a running calibration (its run goes on)

  // The run config to calibrate with: config.nodes (empty: this machine), the model's shapes
  // (model, seq_len, micro_batch) and the device; the mesh is any valid shape of the world
  // (meshtrain calibrate builds its own groups), the batch a valid one. The same as
  // `meshwork calibrate --config` would run.
  static RunConfig calibration_config(RunConfig config);
  // Starts calibrating; false (and failed() says why) when one is already running.
  bool calibrate(const RunConfig& config);
  bool running() const { return running_; }
  // Stops the ranks of the running calibration (SIGTERM, then SIGKILL); it ends as failed.
  void stop();

 Q_SIGNALS:
  void progress(const QString& line);  // "probing 1 node(s)", "deploy local: done", a follow event
  void started(qint64 run);            // the run is recorded in the store and its ranks run
  // The calibration is stored: its row id in the store, and a one-line summary.
  void calibrated(qint64 calibration, const QString& summary);
  void failed(const QString& message);
  void finished();  // after calibrated() or failed(); running() is false again

 private:
  struct Shared;
  QString db_;
  LaunchController* launcher_;
  bool running_ = false;
  std::shared_ptr<Shared> shared_;
  std::thread thread_;
};

}  // namespace meshwork::ui
