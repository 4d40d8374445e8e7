#include "ui/screenshot_support.h"

#include <QApplication>
#include <QSysInfo>
#include <QThread>
#include <iostream>

#include "ui/cluster_model.h"
#include "ui/main_window.h"
#include "ui/mesh_view.h"
#include "ui/plan_page.h"
#include "ui/plan_state.h"

namespace meshwork::ui {

void pump_events(int ms) {
  QElapsedTimer t;
  t.start();
  while (t.elapsed() < ms) {
    QApplication::processEvents(QEventLoop::AllEvents, 50);
    // processEvents() leaves deleteLater()'s deletions to the event loop, which a screenshot run
    // never returns to: Qt Charts' old axes and series would stay in the scene and be drawn.
    QCoreApplication::sendPostedEvents(nullptr, QEvent::DeferredDelete);
    QThread::msleep(10);
  }
}

bool save_grab(QWidget* w, const QString& path, int settle_ms) {
  pump_events(settle_ms);
  const bool ok = w->grab().save(path);
  std::cout << (ok ? "wrote " : "FAILED ") << path.toStdString() << "\n";
  return ok;
}

std::unique_ptr<MainWindow> open_window(QApplication& app, Theme theme) {
  apply_theme(app, theme);
  auto w = std::make_unique<MainWindow>(false);
  w->resize(1500, 920);
  w->show();
  return w;
}

void show_plan(MainWindow& w, const std::function<void(RunConfig&)>& edit, std::optional<GroupKind> kind, int rank,
               int settle_ms) {
  RunConfig c = w.plan()->config();
  edit(c);
  w.plan()->set_config(c);
  w.set_mode(Mode::plan);
  if (kind) w.plan_page()->view()->set_group_kind(*kind);
  if (rank >= 0) w.plan_page()->view()->set_selected_rank(rank);
  pump_events(settle_ms);
}

void plan_tiny_on_this_machine(MainWindow& w, const std::function<void(RunConfig&)>& edit, int slots) {
  w.cluster()->clear();
  NodeInfo local;
  local.host = "local";
  local.hostname = QSysInfo::machineHostName();
  local.state = NodeInfo::State::online;
  local.cpu_cores = QThread::idealThreadCount();
  local.memory_bytes = 8.0 * (1 << 30);
  local.slots = slots;
  w.cluster()->add_node(local);
  RunConfig c = w.plan()->config();
  c.model = "tiny";
  c.training.seq_len = 128;
  c.training.precision = Precision::fp32;
  c.training.device = DeviceKind::cpu;
  edit(c);
  w.plan()->set_config(c);
}

}  // namespace meshwork::ui
