// Screenshot of the cluster calibration from real measurements: the Cluster view's
// Calibrate runs `meshtrain calibrate` on this machine (2 CPU ranks, through the launch path),
// then the calibration view opened on what it stored. Skipped without a meshtrain binary.
#include <QApplication>
#include <QFileInfo>
#include <iostream>

#include "ui/calibrate_controller.h"
#include "ui/calibration_model.h"
#include "ui/calibration_view.h"
#include "ui/cluster_model.h"
#include "ui/cluster_panel.h"
#include "ui/launch_controller.h"
#include "ui/main_window.h"
#include "ui/plan_state.h"
#include "ui/screenshot_support.h"
#include "ui/screenshots.h"

namespace meshwork::ui {

int render_calibration_screenshot(const QString& dir) {
  if (!QFileInfo(LaunchController::trainer_path()).isExecutable()) {
    std::cout << "meshwork: screenshots: no meshtrain at " << LaunchController::trainer_path().toStdString()
              << ": calibration.png skipped\n";
    return 0;
  }
  auto* app = qobject_cast<QApplication*>(QCoreApplication::instance());
  const auto window = open_window(*app, Theme::light);
  MainWindow& w = *window;
  plan_tiny_on_this_machine(w, [](RunConfig& c) { c.training.micro_batch = 1; });
  w.set_mode(Mode::cluster);
  ClusterPanel* panel = w.cluster_panel();
  wait_for([&] { return panel->calibrations() && panel->calibrations()->loads() >= 1; }, 10000);
  bool done = false, ok = false;
  QString failure;
  QObject::connect(panel->calibrator(), &CalibrateController::calibrated, panel, [&] { ok = true; });
  QObject::connect(panel->calibrator(), &CalibrateController::failed, panel, [&](const QString& m) { failure = m; });
  QObject::connect(panel->calibrator(), &CalibrateController::finished, panel, [&] { done = true; });
  if (!panel->calibrate()) {
    std::cerr << "meshwork: screenshots: calibrate: " << panel->calibration_progress().toStdString() << "\n";
    return 1;
  }
  if (!wait_for([&] { return done; }, 300000) || !ok) {
    std::cerr << "meshwork: screenshots: calibrate: " << (done ? failure.toStdString() : std::string("timed out")) << "\n";
    return 1;
  }
  CalibrationView* view = panel->calibration_view();
  if (!view) return 1;
  QWidget* dialog = view->window();
  dialog->resize(1180, 800);
  wait_for([&] { return panel->calibrations()->selected() != nullptr; }, 10000);
  return save_grab(dialog, dir + "/calibration.png", 600) ? 0 : 1;
}

}  // namespace meshwork::ui
