// Screenshots of part 2 (runs, live monitor, compare), from real data: a real meshtrain run
// launched on this machine from the Launch action (grabbed mid-run), and metrics files meshtrain
// recorded (tests/ui/data, given by scripts/screenshots) imported as runs.
#include <QAction>
#include <QApplication>
#include <QDir>
#include <QFileInfo>
#include <algorithm>
#include <iostream>

#include "ui/cluster_model.h"
#include "ui/compare_page.h"
#include "ui/launch_controller.h"
#include "ui/main_window.h"
#include "ui/mesh_editor.h"
#include "ui/plan_page.h"
#include "ui/metric_chart.h"
#include "ui/monitor_model.h"
#include "ui/monitor_page.h"
#include "ui/plan_state.h"
#include "ui/runs_model.h"
#include "ui/runs_page.h"
#include "ui/screenshot_support.h"
#include "ui/screenshots.h"
#include "ui/theme.h"

namespace meshwork::ui {

int render_run_screenshots(const QString& dir, const QString& runs_data) {
  auto* app = qobject_cast<QApplication*>(QCoreApplication::instance());
  bool ok = true;
  const auto window = open_window(*app, Theme::light);
  MainWindow& w = *window;
  RunsPage* page = w.runs_page();

  // 1. A real run from the Launch action on this machine: 2 CPU ranks, FSDP.
  if (QFileInfo(LaunchController::trainer_path()).isExecutable()) {
    plan_tiny_on_this_machine(w, [](RunConfig& c) {
      c.name = "tiny-fsdp-live";
      c.mesh = MeshShape{1, 2, 1, 1};
      c.training.steps = 400;
      c.training.global_batch = 8;
      c.training.micro_batch = 2;
      c.training.warmup_steps = 10;
    });
    w.set_mode(Mode::plan);
    pump_events(800);
    // The editor's Run box (name, steps, learning rate, warmup) with the run's basics set.
    ok &= save_grab(w.plan_page()->editor(), dir + "/run-basics.png", 300);
    qint64 run = 0;
    QString failure;
    QObject::connect(w.launcher(), &LaunchController::launched, &w, [&](qint64 id) { run = id; });
    QObject::connect(w.launcher(), &LaunchController::launch_failed, &w, [&](const QString& m, const QStringList&) { failure = m; });
    w.launch_from_plan();
    wait_for([&] { return run != 0 || !failure.isEmpty(); }, 180000);
    if (run != 0) {
      MonitorPage* m = page->monitor();
      // Mid-run: enough steps for the curves to have a shape.
      wait_for([&] { return m->loss_chart()->point_count(0) >= 40; }, 300000);
      ok &= save_grab(&w, dir + "/monitor-live.png", 500);
      // The same live run in the dark theme, switched as a user switches it (View → Dark theme).
      QAction* dark = nullptr;
      for (QAction* a : w.findChildren<QAction*>())
        if (a->text() == QObject::tr("&Dark theme")) dark = a;
      if (dark) {
        dark->setChecked(true);
        ok &= save_grab(&w, dir + "/monitor-live-dark.png", 1500);
        dark->setChecked(false);
      } else {
        std::cerr << "meshwork: screenshots: no View → Dark theme action: monitor-live-dark.png skipped\n";
        ok = false;
      }
      w.launcher()->stop(run);
      wait_for([&] { return !w.launcher()->following(run); }, 60000);
    } else {
      std::cerr << "meshwork: screenshots: launch failed: " << failure.toStdString() << "\n";
      ok = false;
    }
  } else {
    std::cerr << "meshwork: screenshots: no meshtrain at " << LaunchController::trainer_path().toStdString()
              << ": monitor-live.png skipped\n";
  }

  // 2. Recorded runs imported, the runs table, and Compare on them.
  std::vector<store::RunId> ids;
  if (!runs_data.isEmpty()) {
    for (const QFileInfo& f : QDir(runs_data).entryInfoList({"*.jsonl"}, QDir::Files, QDir::Name)) {
      const int before = page->model()->rowCount();
      page->import_metrics(f.absoluteFilePath(), false);
      wait_for([&] { return page->model()->rowCount() > before; }, 30000);
    }
    for (const auto& s : page->model()->runs())
      if (!s.origin.empty()) ids.push_back(s.id);
  }
  w.set_mode(Mode::runs);
  page->show_list();
  wait_for([&] { return page->model()->loads() > 0; }, 10000);
  if (!ids.empty()) page->select_runs({ids.front()});
  ok &= save_grab(&w, dir + "/runs.png", 500);
  if (ids.size() >= 2) {
    page->select_runs(ids);
    Q_EMIT page->compare_requested(page->selected_runs());
    ComparePage* c = w.compare_page();
    wait_for([&] { return c->series_count() == static_cast<int>(ids.size()); }, 30000);
    ok &= save_grab(&w, dir + "/compare.png", 500);
  }
  // 3. Another tool's run (a TensorBoard event file: MESHWORK_SCREENSHOT_FOREIGN, written by
  // scripts/screenshots with SummaryWriter) imported and compared with a meshtrain run.
  const QString foreign = qEnvironmentVariable("MESHWORK_SCREENSHOT_FOREIGN");
  if (!foreign.isEmpty() && !ids.empty()) {
    const QFileInfoList events = QDir(foreign).entryInfoList({"events.out.tfevents.*"}, QDir::Files);
    if (!events.isEmpty()) {
      const int before = page->model()->rowCount();
      page->import_metrics(events.front().absoluteFilePath(), false);
      wait_for([&] { return page->model()->rowCount() > before; }, 30000);
      store::RunId newest = 0;
      for (const auto& s : page->model()->runs()) newest = std::max(newest, s.id);
      page->select_runs({ids.front(), newest});
      Q_EMIT page->compare_requested(page->selected_runs());
      ComparePage* c = w.compare_page();
      wait_for([&] { return c->series_count() == 2; }, 30000);
      ok &= save_grab(&w, dir + "/compare-tensorboard.png", 500);
    }
  }
  return ok ? 0 : 1;
}

}  // namespace meshwork::ui
