// elastic-replan.png: the Monitor of a REAL re-planned run. The run comes from a store an elastic
// launch wrote on the namespace cluster ($MESHWORK_SCREENSHOT_ELASTIC_DB, e.g. the one
// `ctest -R ClusterElastic` keeps with $MESHWORK_TEST_KEEP_STORE): a copy is opened as the
// throw-away store, and the newest run with more than one segment is shown, its loss chart
// marked where the shape changed.
#include <QApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <iostream>

#include "core/store/run_segments.h"
#include "core/store/run_store.h"
#include "ui/main_window.h"
#include "ui/metric_chart.h"
#include "ui/monitor_model.h"
#include "ui/monitor_page.h"
#include "ui/runs_page.h"
#include "ui/screenshot_support.h"
#include "ui/screenshots.h"

namespace meshwork::ui {

int render_elastic_screenshot(const QString& dir) {
  const QString source = qEnvironmentVariable("MESHWORK_SCREENSHOT_ELASTIC_DB");
  if (source.isEmpty() || !QFileInfo::exists(source)) {
    std::cerr << "meshwork: screenshots: elastic-replan.png needs $MESHWORK_SCREENSHOT_ELASTIC_DB, a store with a "
                 "re-planned run (ctest -R ClusterElastic with $MESHWORK_TEST_KEEP_STORE)\n";
    return 1;
  }
  const QString db = qEnvironmentVariable("MESHWORK_DB");  // render_screenshots' throw-away store
  QFile::remove(db);
  if (!QFile::copy(source, db)) {
    std::cerr << "meshwork: screenshots: cannot copy " << source.toStdString() << " to " << db.toStdString() << "\n";
    return 1;
  }
  store::RunId run = 0;
  {
    auto s = store::RunStore::open(db.toStdString());
    if (!s) {
      std::cerr << "meshwork: screenshots: " << s.error().message() << "\n";
      return 1;
    }
    auto runs = (*s)->list_runs();
    for (const auto& r : runs ? *runs : std::vector<store::RunSummary>{}) {
      auto segments = store::run_segments(**s, r.id);
      if (segments && segments->size() > 1) run = std::max(run, r.id);
    }
  }
  if (run == 0) {
    std::cerr << "meshwork: screenshots: no re-planned run in " << source.toStdString() << "\n";
    return 1;
  }
  auto* app = qobject_cast<QApplication*>(QCoreApplication::instance());
  const auto window = open_window(*app, Theme::light);
  MainWindow& w = *window;
  w.set_mode(Mode::runs);
  w.runs_page()->open_run(run);
  MonitorPage* m = w.runs_page()->monitor();
  wait_for([&] { return m->model()->frame() && m->model()->run() == run && !m->loss_chart()->marks().empty(); }, 30000);
  return save_grab(&w, dir + "/elastic-replan.png", 1500) ? 0 : 1;
}

}  // namespace meshwork::ui
