// What the screenshot renderers (screenshots*.cpp) share: pumping the event
// loop until results arrive, grabbing a window to a PNG, and a workbench window in Plan mode.
#pragma once

#include <QElapsedTimer>
#include <QString>
#include <functional>
#include <memory>
#include <optional>

#include "core/mesh.h"
#include "core/run_config.h"
#include "ui/theme.h"

class QApplication;
class QWidget;

namespace meshwork::ui {

class MainWindow;

// Lets queued results (estimates, planner, probes, store answers) arrive and the widgets repaint.
void pump_events(int ms);

// Pumps events until done() or `ms` have passed; false on timeout.
template <class F>
bool wait_for(F done, int ms) {
  QElapsedTimer t;
  t.start();
  while (!done()) {
    if (t.elapsed() > ms) return false;
    pump_events(50);
  }
  return true;
}

// Pumps for `settle_ms`, then writes w->grab() to `path` and says so on stdout.
bool save_grab(QWidget* w, const QString& path, int settle_ms);

// A workbench window (no local probe) in `theme`, at the screenshots' size, shown.
std::unique_ptr<MainWindow> open_window(QApplication& app, Theme theme);

// Puts `w` in Plan mode with edit() applied to its current config, the groups of `kind` coloured
// and `rank` selected (-1: none), then waits `settle_ms` for the estimate and the planner.
void show_plan(MainWindow& w, const std::function<void(RunConfig&)>& edit, std::optional<GroupKind> kind = {},
               int rank = -1, int settle_ms = 800);

// Makes this machine the window's only node (online, its cores, `slots` CPU ranks) and puts the
// tiny model on its CPUs (fp32, sequences of 128) into the plan, with edit() applied on top.
void plan_tiny_on_this_machine(MainWindow& w, const std::function<void(RunConfig&)>& edit, int slots = 2);

}  // namespace meshwork::ui
