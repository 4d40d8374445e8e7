// A first-time user's hour with the workbench, one test per thing that stood in the way:
//  - darkThemeChartSeriesAreReadable: every chart series (the first eight run colours, every axis
//    colour, the monitor's lines) has a WCAG contrast of at least 3:1 on the chart card in both
//    themes, also after switching a run already shown to dark; run colours stay clear of the axis
//    colours and are the web view's.
//  - labelsAndCountsSayWhatIsThere: the loss legend names the loss (eval loss only with one), the
//    monitor counts completed steps as Runs does, the runs table has an id column, and the
//    planner's note says when the global batch is why no shape is valid, quoting the tp in use.
//  - noticesWhereTheyBelong: Stop is enabled for a selected running run, Help lists every
//    shortcut and the mesh keys, a browser that fails to start says so.
//  - quittingWithALiveRunSaysItGoesOn: closing the window while a launched run trains leaves a
//    notice that the run goes on, and the run does (stopped on every way out of the test, a
//    failed check included).
//  - layoutHoldsAtRealSizes: an error under Global batch does not squeeze the editor's fields; at
//    1024 x 700 hiding the inspector leaves the window's size alone; tick labels of steps >= 1000
//    and the Compare bar chart's title are not elided.
//  - compareNamesLongRunsInFullAt1024: Compare at 1024 x 700 with long run names: each is whole
//    or a tooltip away wherever it is shown, and the page fits the window.
#include <QAction>
#include <QApplication>
#include <QDockWidget>
#include <QFile>
#include <QFileInfo>
#include <QGraphicsSimpleTextItem>
#include <QGraphicsTextItem>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMessageBox>
#include <QRegularExpression>
#include <QScreen>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStatusBar>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <QValueAxis>
#include <cmath>

#include "core/store/run_store.h"
#include "remote/launch.h"
#include "remote/node.h"
#include "test_support.h"
#include "ui/axis_colors.h"
#include "ui/bar_chart.h"
#include "ui/browser_server.h"
#include "ui/compare_page.h"
#include "ui/launch_controller.h"
#include "ui/mesh_editor.h"
#include "ui/mesh_thumb.h"
#include "ui/metric_chart.h"
#include "ui/monitor_model.h"
#include "ui/monitor_page.h"
#include "ui/plan_page.h"
#include "ui/plan_state.h"
#include "ui/planner_panel.h"
#include "ui/runs_model.h"
#include "ui/runs_page.h"
#include "ui/theme.h"

using namespace meshwork;
using namespace meshwork::ui;

namespace {

const QString kData = QStringLiteral(MESHWORK_UI_TEST_DATA);

// WCAG 2.x relative luminance and contrast ratio.
double channel(double c) { return c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4); }
double luminance(const QColor& c) {
  return 0.2126 * channel(c.redF()) + 0.7152 * channel(c.greenF()) + 0.0722 * channel(c.blueF());
}
double contrast(const QColor& a, const QColor& b) {
  const double la = luminance(a), lb = luminance(b);
  return (std::max(la, lb) + 0.05) / (std::min(la, lb) + 0.05);
}
// CIE L*a*b* distance (D65): how far apart two colours look.
std::array<double, 3> lab(const QColor& c) {
  const double r = channel(c.redF()), g = channel(c.greenF()), b = channel(c.blueF());
  const double x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, y = 0.2126 * r + 0.7152 * g + 0.0722 * b,
               z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883;
  const auto f = [](double t) { return t > 0.008856 ? std::cbrt(t) : 7.787 * t + 16.0 / 116; };
  return {116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))};
}
double distance(const QColor& a, const QColor& b) {
  const auto p = lab(a), q = lab(b);
  return std::hypot(p[0] - q[0], p[1] - q[1], p[2] - q[2]);
}

QAction* action_named(QWidget& w, const QString& text) {
  for (QAction* a : w.findChildren<QAction*>())
    if (a->text() == text) return a;
  return nullptr;
}

qint64 import(RunsPage* page, const QString& path) {
  const int before = page->model()->rowCount();
  page->import_metrics(path, false);
  if (!QTest::qWaitFor([&] { return page->model()->rowCount() > before; }, 20000)) return 0;
  qint64 newest = 0;
  for (const auto& s : page->model()->runs()) newest = std::max<qint64>(newest, s.id);
  return newest;
}

// Every visible text item of a chart's scene (axis titles, tick labels, the title).
QStringList scene_texts(QGraphicsView* view) {
  QStringList out;
  for (QGraphicsItem* item : view->scene()->items()) {
    if (!item->isVisible()) continue;
    if (auto* t = dynamic_cast<QGraphicsSimpleTextItem*>(item)) out << t->text();
    if (auto* t = dynamic_cast<QGraphicsTextItem*>(item)) out << t->toPlainText();
  }
  return out;
}

// Stops, when it goes out of scope, every run of the store `db` that was launched (its launch
// record names the nodes and run directories): a test that launches a run and fails partway
// (a QVERIFY returns) must not leave meshtrain ranks training. stop_node() is safe on a node
// that has already ended, so it runs whether or not the test stopped the run itself.
struct StopLaunchedRunsOnExit {
  QString db;
  ~StopLaunchedRunsOnExit() {
    auto store = store::RunStore::open(db.toStdString());
    if (!store.ok()) return;
    auto runs = (*store)->list_runs();
    if (!runs.ok()) return;
    const auto node = remote::make_local_node();
    for (const store::RunSummary& s : *runs) {
      auto info = (*store)->get_run(s.id);
      if (!info.ok() || !info->cluster.contains("launch")) continue;
      auto rec = remote::launch_record_from_json(info->cluster.at("launch"));
      if (!rec.ok()) continue;
      for (size_t i = 0; i < rec->nodes.size(); ++i)
        if (Status stopped = remote::stop_node(*node, *rec, i); !stopped.ok())
          qWarning("could not stop run %lld node %zu: %s", static_cast<long long>(s.id), i, stopped.error().message().c_str());
    }
  }
};

}  // namespace

class FirstHourTest : public QObject {
  Q_OBJECT
  QTemporaryDir settings_;
  QTemporaryDir dir_;
  int db_n_ = 0;

  QString fresh_db() {
    const QString db = dir_.filePath(QStringLiteral("runs-%1.db").arg(++db_n_));
    qputenv("MESHWORK_DB", db.toLocal8Bit());
    return db;
  }

 private Q_SLOTS:
  void initTestCase() {
    test::isolate_settings(settings_);
    qputenv("MESHWORK_MESHTRAIN", QByteArray(MESHWORK_MESHTRAIN_BIN));
    qputenv("HOME", dir_.path().toLocal8Bit());  // run directories under the temporary directory
    QVERIFY2(QFile::exists(kData + "/fsdp-1x2.jsonl"), qPrintable(kData));
  }

  void darkThemeChartSeriesAreReadable() {
    fresh_db();
    MainWindow w(false);
    w.resize(1300, 850);
    w.show();
    QAction* dark = action_named(w, QStringLiteral("&Dark theme"));
    QVERIFY(dark);
    dark->setChecked(false);
    // A run shown in the light theme, then the theme switched: what a user does.
    const qint64 id = import(w.runs_page(), kData + "/fsdp-1x2.jsonl");
    QVERIFY(id > 0);
    w.set_mode(Mode::runs);
    w.runs_page()->open_run(id);
    MonitorPage* m = w.runs_page()->monitor();
    QTRY_VERIFY(m->model()->frame() && m->loss_chart()->point_count(1) > 0);
    for (bool to_dark : {true, false, true}) {
      dark->setChecked(to_dark);
      QCOMPARE(is_dark(), to_dark);
      QTRY_VERIFY(m->loss_chart()->point_count(1) > 0);
      const QColor card = card_color();
      const char* theme = to_dark ? "dark" : "light";
      // The palettes: the first eight run colours, every axis (group) colour, the monitor's lines.
      for (int i = 0; i < 8; ++i)
        QVERIFY2(contrast(run_color(i, to_dark), card) >= 3.0,
                 qPrintable(QStringLiteral("%1: run %2 %3 on %4: %5").arg(theme).arg(i).arg(run_color(i, to_dark).name(), card.name()).arg(contrast(run_color(i, to_dark), card))));
      for (GroupKind g : kGroupKinds)
        QVERIFY2(contrast(group_color(g, to_dark), card) >= 3.0,
                 qPrintable(QStringLiteral("%1: axis %2 %3 on %4").arg(theme, group_label(g), group_color(g, to_dark).name(), card.name())));
      for (MetricSeries s : {MetricSeries::ink, MetricSeries::lr, MetricSeries::grad_norm, MetricSeries::mfu, MetricSeries::compute})
        QVERIFY2(contrast(metric_color(s, to_dark), card) >= 3.0, qPrintable(metric_color(s, to_dark).name()));
      for (int r = 0; r < 8; ++r) QVERIFY(contrast(rank_color(r, 8, to_dark), card) >= 3.0);
      // What the charts of the run shown draw now: every series' colour (its opacity aside:
      // the raw loss behind the smoothed one is faint on purpose) on the chart's own card.
      for (MetricChart* c : {m->loss_chart(), m->lr_chart(), m->grad_chart(), m->throughput_chart(), m->memory_chart(), m->comm_chart()}) {
        const QColor background = c->chart()->backgroundBrush().color();
        QCOMPARE(background, card);
        int i = 0;
        for (const PlotSeries& s : c->plot().series()) {
          QColor color = s.area ? s.brush.color() : s.pen.color();
          color.setAlphaF(1.0);
          QVERIFY2(contrast(color, background) >= 3.0,
                   qPrintable(QStringLiteral("%1: %2 series %3: %4 on %5 = %6").arg(theme, c->chart()->title()).arg(i).arg(color.name(), background.name()).arg(contrast(color, background))));
          ++i;
        }
      }
    }
    // Run colours never read as an axis: each of the first eight is far from every axis colour.
    for (bool d : {false, true})
      for (int i = 0; i < 8; ++i)
        for (GroupKind g : kGroupKinds)
          QVERIFY2(distance(run_color(i, d), group_color(g, d)) >= 15,
                   qPrintable(QStringLiteral("run %1 %2 vs %3 %4").arg(i).arg(run_color(i, d).name(), group_label(g), group_color(g, d).name())));
    // The web view draws runs and axes in the workbench's dark colours.
    QFile app(QStringLiteral(MESHWORK_SOURCE_DIR "/resources/web/app.js"));
    QVERIFY(app.open(QIODevice::ReadOnly));
    const QString js = QString::fromUtf8(app.readAll());
    const auto list = QRegularExpression(QStringLiteral("MW\\.COLORS = \\[([^\\]]*)\\]")).match(js);
    QVERIFY(list.hasMatch());
    QStringList web;
    for (const auto& m2 : QRegularExpression(QStringLiteral("'(#[0-9A-Fa-f]{6})'")).globalMatch(list.captured(1)))
      web << m2.captured(1).toLower();
    QCOMPARE(web.size(), kRunColorCount);
    for (int i = 0; i < kRunColorCount; ++i) QCOMPARE(web[i], run_color(i, true).name());
    for (Axis a : {Axis::dp_replicate, Axis::dp_shard, Axis::cp, Axis::tp}) {
      const auto axis = QRegularExpression(QStringLiteral("%1: '(#[0-9A-Fa-f]{6})'").arg(QString::fromUtf8(axis_name(a).data()))).match(js);
      QVERIFY(axis.hasMatch());
      QCOMPARE(axis.captured(1).toLower(), axis_color(a, true).name());
    }
  }

  void labelsAndCountsSayWhatIsThere() {
    fresh_db();
    MainWindow w(false);
    w.resize(1300, 850);
    w.show();
    const qint64 plain = import(w.runs_page(), kData + "/fsdp-1x2.jsonl");
    const qint64 with_eval = import(w.runs_page(), kData + "/fsdp-1x2-eval.jsonl");
    QVERIFY(plain > 0 && with_eval > 0);
    w.set_mode(Mode::runs);
    RunsPage* page = w.runs_page();
    // The runs table: an id column, and the steps a run completed.
    QCOMPARE(page->model()->headerData(RunsModel::kId, Qt::Horizontal, Qt::DisplayRole).toString(), QStringLiteral("Id"));
    const int row = page->model()->row_of(plain);
    QCOMPARE(page->model()->index(row, RunsModel::kId).data().toString(), QString::number(plain));
    const QString steps = page->model()->index(row, RunsModel::kSteps).data().toString();
    QCOMPARE(steps, QStringLiteral("8"));  // 8 steps recorded, of a config of 8
    // The monitor: the same count, of the config's steps; the loss in the legend.
    page->open_run(plain);
    MonitorPage* m = page->monitor();
    QTRY_VERIFY(m->model()->frame() && m->model()->run() == plain && m->loss_chart()->point_count(1) > 0);
    auto* facts = m->findChild<QLabel*>(QStringLiteral("run_facts"));
    QVERIFY(facts);
    QTRY_VERIFY2(facts->text().contains(QStringLiteral("step 8 / 8")), qPrintable(facts->text()));
    QCOMPARE(m->loss_chart()->legend_names(), QStringList{QStringLiteral("loss")});
    // A run with an evaluation: "eval loss" joins the legend.
    page->open_run(with_eval);
    QTRY_VERIFY(m->model()->frame() && m->model()->run() == with_eval && m->loss_chart()->point_count(2) > 0);
    QTRY_COMPARE(m->loss_chart()->legend_names(), (QStringList{QStringLiteral("loss"), QStringLiteral("eval loss")}));

    // The planner on 6 ranks with global batch 8: no shape takes it. The note says so, names a
    // batch that works and quotes the editor's tp (2), not the first shape core tried (tp 6).
    test::set_gpu_cluster(w, 1, 6);
    RunConfig c = w.plan()->config();
    c.model = "tiny";
    c.mesh = MeshShape{1, -1, 1, 2};  // dp_shard auto (3), tp 2
    c.training.seq_len = 256;
    c.training.micro_batch = 1;
    c.training.global_batch = 8;
    w.plan()->set_config(c);
    w.set_mode(Mode::plan);
    QTRY_VERIFY(!w.plan()->busy() && w.plan()->plan_error().find("6 ranks") != std::string::npos);
    const QString note = QString::fromStdString(w.plan()->plan_error());
    auto* status = w.plan_page()->planner()->findChild<QLabel*>(QStringLiteral("planner_status"));
    QVERIFY(status);
    QTRY_COMPARE(status->text(), note);
    QVERIFY2(note.contains(QStringLiteral("no shape of 6 ranks is valid with global batch 8: the global batch is why")), qPrintable(note));
    QVERIFY2(note.contains(QStringLiteral("global batch 9 lets 4 shapes run")), qPrintable(note));
    QVERIFY2(note.contains(QStringLiteral("tp 2")), qPrintable(note));
    QVERIFY2(!note.contains(QStringLiteral("tp=6")), qPrintable(note));
    // With the batch it names, the plan has those rows.
    c.training.global_batch = 9;
    w.plan()->set_config(c);
    QTRY_VERIFY(!w.plan()->busy() && w.plan()->plan_error().empty() && w.plan()->plan().size() == 4);
  }

  void noticesWhereTheyBelong() {
    const QString db = fresh_db();
    // A run the store says is running (launched elsewhere) and a finished one.
    qint64 live = 0, done = 0;
    {
      auto store = store::RunStore::open(db.toStdString());
      QVERIFY(store.ok());
      auto id = (*store)->create_run("still-training", nlohmann::json::object(), nlohmann::json::object());
      QVERIFY(id.ok());
      QVERIFY((*store)->set_status(*id, store::kStatusRunning).ok());
      live = *id;
      auto finished = (*store)->create_run("finished", nlohmann::json::object(), nlohmann::json::object());
      QVERIFY(finished.ok());
      QVERIFY((*store)->set_status(*finished, store::kStatusOk).ok());
      done = *finished;
    }
    MainWindow w(false);
    w.resize(1300, 850);
    w.show();
    w.set_mode(Mode::runs);
    RunsPage* page = w.runs_page();
    QTRY_VERIFY(page->model()->find(live) != nullptr);
    QTRY_VERIFY(page->model()->find(done) != nullptr);
    // Stop in the toolbar follows the selection: enabled for the running run, not the finished one.
    page->select_runs({done});
    QVERIFY(!w.stop_action()->isEnabled());
    page->select_runs({live});
    QTRY_VERIFY(w.stop_action()->isEnabled());
    QCOMPARE(page->stoppable_run(), live);
    page->select_runs({live, done});
    QVERIFY(!w.stop_action()->isEnabled());

    // Help's shortcuts: every action's keys, Ctrl+Shift+S and Ctrl+E among them, and the mesh keys.
    QAction* help = action_named(w, QStringLiteral("&Keyboard shortcuts"));
    QVERIFY(help);
    QString shown;
    QTimer::singleShot(0, this, [&] {
      if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
        shown = box->text();
        box->accept();
      }
    });
    help->trigger();
    QVERIFY(!shown.isEmpty());
    for (const char* keys : {"Ctrl+Shift+S", "Ctrl+E", "Ctrl+S", "Ctrl+O", "Ctrl+I", "Ctrl+Shift+D", "Ctrl+M", "F5", "PgUp", "Esc"})
      QVERIFY2(shown.contains(QLatin1String(keys)), qPrintable(QStringLiteral("%1 not in %2").arg(keys, shown)));
    for (QAction* a : w.findChildren<QAction*>())
      for (const QKeySequence& k : a->shortcuts())
        QVERIFY2(shown.contains(k.toString(QKeySequence::NativeText).toHtmlEscaped()), qPrintable(a->text()));

    // Serve in the browser with a browser that refuses to start: the error is shown.
    QFile script(dir_.filePath(QStringLiteral("refusing-browser")));
    QVERIFY(script.open(QIODevice::WriteOnly));
    script.write("#!/bin/sh\necho 'Running as root without --no-sandbox is not supported.' >&2\nexit 1\n");
    script.close();
    script.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
    qputenv("BROWSER", script.fileName().toLocal8Bit());
    w.set_open_browser(true);
    QAction* serve = action_named(w, QStringLiteral("Serve in the &browser…"));
    QVERIFY(serve);
    serve->trigger();
    QVERIFY(QTest::qWaitFor([&] { return w.browser_server() && w.browser_server()->serving(); }, 30000));
    QMessageBox* failed = nullptr;
    QVERIFY(QTest::qWaitFor([&] { return (failed = w.findChild<QMessageBox*>(QStringLiteral("browser_failed"))) != nullptr; }, 20000));
    QVERIFY(failed->isVisible());
    QVERIFY2(failed->text().contains(QStringLiteral("Running as root without --no-sandbox is not supported.")), qPrintable(failed->text()));
    QVERIFY2(failed->text().contains(w.browser_server()->url().toString()), qPrintable(failed->text()));
    failed->close();
    qunsetenv("BROWSER");
  }

  void quittingWithALiveRunSaysItGoesOn() {
    const QString db = fresh_db();
    // Declared before the window, so it runs after the window has closed, on every way out.
    const StopLaunchedRunsOnExit stop_on_exit{db};
    MainWindow w(false);
    w.resize(1300, 850);
    w.show();
    test::set_local_cluster(w, 2);
    RunConfig c = w.plan()->config();
    c.name = "goes-on";
    c.model = "tiny";
    c.mesh = MeshShape{1, 2, 1, 1};
    c.training.steps = 100000;  // far more than it does before the window closes
    c.training.seq_len = 64;
    c.training.global_batch = 4;
    c.training.micro_batch = 1;
    c.training.warmup_steps = 2;
    w.plan()->set_config(c);
    w.set_mode(Mode::plan);
    QTRY_VERIFY2(w.launch_action()->isEnabled(), qPrintable(w.launch_action()->toolTip()));
    QSignalSpy launched(w.launcher(), &LaunchController::launched);
    QSignalSpy failed(w.launcher(), &LaunchController::launch_failed);
    w.launch_action()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(!launched.isEmpty() || !failed.isEmpty(), 120000);
    QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().at(0).toString()));
    const qint64 run = launched.first().at(0).toLongLong();
    QTRY_VERIFY_WITH_TIMEOUT(w.runs_page()->monitor()->model()->frame() &&
                                 w.runs_page()->monitor()->model()->frame()->summary.steps >= 1, 60000);
    // Quit: the window closes at once; a notice that outlives it says the run goes on.
    QVERIFY(w.close());
    QVERIFY(!w.isVisible());
    QMessageBox* notice = nullptr;
    for (QWidget* top : QApplication::topLevelWidgets())
      if (top->objectName() == QLatin1String("runs_go_on") && top->isVisible()) notice = qobject_cast<QMessageBox*>(top);
    QVERIFY(notice);
    QVERIFY2(notice->text().contains(QStringLiteral("Run %1 goes on without the workbench").arg(run)), qPrintable(notice->text()));
    QVERIFY(notice->text().contains(QStringLiteral("meshwork stop %1").arg(run)));
    notice->close();
    // It does go on: nothing follows it, and its ranks keep writing their metrics on the node.
    QTRY_VERIFY(!w.launcher()->following(run));
    QString metrics;
    {
      auto store = store::RunStore::open(db.toStdString());
      QVERIFY(store.ok());
      auto info = (*store)->get_run(run);
      QVERIFY(info.ok());
      auto rec = remote::launch_record_from_json(info->cluster.at("launch"));
      QVERIFY(rec.ok());
      metrics = QString::fromStdString(rec->nodes[0].run_dir + "/metrics-rank0.jsonl");
    }
    const qint64 size_at_close = QFileInfo(metrics).size();
    QTRY_VERIFY_WITH_TIMEOUT(QFileInfo(metrics).size() > size_at_close, 60000);
    // Stop it (the workbench stops a run it does not follow straight from the store's record).
    QSignalSpy finished(w.launcher(), &LaunchController::finished);
    w.launcher()->stop(run);
    QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty(), 60000);
    QCOMPARE(finished.first().at(1).toString(), QStringLiteral("stopped"));
  }

  void layoutHoldsAtRealSizes() {
    const QString db = fresh_db();
    // A run of 1,200 steps: meshtrain's recorded lines of a real 8-step run, its steps repeated
    // with their numbers and times moved on (the store and the charts read them as any run).
    const QString long_run = dir_.filePath(QStringLiteral("long-1x2.jsonl"));
    {
      QFile in(kData + "/fsdp-1x2.jsonl"), out(long_run);
      QVERIFY(in.open(QIODevice::ReadOnly) && out.open(QIODevice::WriteOnly));
      std::vector<nlohmann::json> starts, steps, ends;
      for (const QByteArray& line : in.readAll().split('\n')) {
        if (line.trimmed().isEmpty()) continue;
        auto j = nlohmann::json::parse(line.toStdString());
        const std::string type = j.value("type", "");
        (type == "start" ? starts : type == "step" ? steps : ends).push_back(j);
      }
      QVERIFY(!starts.empty() && steps.size() == 16 && !ends.empty());
      for (auto& st : starts) {
        st["config"]["training"]["steps"] = 1200;
        out.write(QByteArray::fromStdString(st.dump() + "\n"));
      }
      for (int step = 0; step < 1200; ++step)
        for (int r = 0; r < 2; ++r) {
          nlohmann::json j = steps[static_cast<size_t>(2 * (step % 8) + r)];
          j["step"] = step;
          j["time"] = j["time"].get<double>() + step * 0.25;
          out.write(QByteArray::fromStdString(j.dump() + "\n"));
        }
      for (auto& e : ends) {
        e["time"] = e["time"].get<double>() + 1200 * 0.25;
        out.write(QByteArray::fromStdString(e.dump() + "\n"));
      }
    }
    const QString grab_dir = qEnvironmentVariable("MESHWORK_TEST_GRABS");  // PNGs to look at, when set
    const auto grab = [&](QWidget* widget, const QString& name) {
      if (!grab_dir.isEmpty()) widget->grab().save(grab_dir + "/" + name + ".png");
    };

    MainWindow w(false);
    w.show();
    w.resize(1024, 700);
    QTest::qWait(50);
    const qint64 a = import(w.runs_page(), long_run);
    const qint64 b = import(w.runs_page(), kData + "/ddp-2x1.jsonl");
    QVERIFY(a > 0 && b > 0);

    // Plan: an error under Global batch leaves the field its full height (arrows and text).
    w.set_mode(Mode::plan);
    test::set_gpu_cluster(w, 1, 6);
    RunConfig c = w.plan()->config();
    c.model = "tiny";
    c.mesh = MeshShape{1, -1, 1, 2};
    c.training.seq_len = 256;
    c.training.micro_batch = 1;
    c.training.global_batch = 8;
    w.plan()->set_config(c);
    MeshEditor* editor = w.plan_page()->editor();
    QTRY_VERIFY(!editor->message_for("global_batch").isEmpty());
    QTest::qWait(100);
    grab(&w, "plan-1024x700");
    auto* gb = editor->control("global_batch");
    QVERIFY2(gb->height() >= gb->sizeHint().height(),
             qPrintable(QStringLiteral("global batch field %1 px high, needs %2").arg(gb->height()).arg(gb->sizeHint().height())));
    auto* gb_message = editor->findChild<QLabel*>(QStringLiteral("message_global_batch"));
    QVERIFY(gb_message && gb_message->isVisible());
    QVERIFY2(gb_message->height() >= gb_message->heightForWidth(gb_message->width()),
             qPrintable(QStringLiteral("message %1 px high, its text needs %2").arg(gb_message->height()).arg(gb_message->heightForWidth(gb_message->width()))));
    for (QSpinBox* spin : editor->findChildren<QSpinBox*>())
      if (spin->isVisible()) QVERIFY2(spin->height() >= spin->sizeHint().height(), qPrintable(spin->objectName()));

    // 1024 x 700: hiding the inspector leaves the window as it was.
    QAction* inspector = nullptr;
    for (QDockWidget* d : w.findChildren<QDockWidget*>()) inspector = d->toggleViewAction();
    QVERIFY(inspector);
    const QSize before = w.size();
    QCOMPARE(before, QSize(1024, 700));
    inspector->trigger();
    QTest::qWait(200);
    QCOMPARE(w.size(), before);
    inspector->trigger();
    QTest::qWait(200);
    QCOMPARE(w.size(), before);

    // The monitor and Compare at the sizes users have: no label elided.
    for (const QSize size : {QSize(1024, 700), QSize(1440, 900), QSize(1600, 1000)}) {
      w.resize(size);
      w.set_mode(Mode::runs);
      w.runs_page()->open_run(a);
      MonitorPage* m = w.runs_page()->monitor();
      QTRY_VERIFY(m->model()->frame() && m->model()->run() == a && m->loss_chart()->point_count(1) > 0);
      QTest::qWait(200);
      const QString tag = QStringLiteral("%1x%2").arg(size.width()).arg(size.height());
      grab(&w, "monitor-" + tag);
      for (MetricChart* chart : {m->loss_chart(), m->lr_chart(), m->grad_chart(), m->throughput_chart(), m->memory_chart(), m->comm_chart()}) {
        const QStringList texts = scene_texts(chart);
        QVERIFY2(texts.contains(QStringLiteral("1000")) || texts.contains(QStringLiteral("1200")) || chart->isHidden(),
                 qPrintable(tag + ": " + chart->chart()->title() + ": " + texts.join(" | ")));
        for (const QString& t : texts)
          QVERIFY2(!t.contains(QChar(0x2026)) && !t.contains(QStringLiteral("...")), qPrintable(tag + ": " + chart->chart()->title() + ": " + t));
      }
      for (const QString& t : scene_texts(m->breakdown_chart()))
        QVERIFY2(!t.contains(QChar(0x2026)) && !t.contains(QStringLiteral("...")), qPrintable(tag + ": latest step: " + t));
      w.set_mode(Mode::compare);
      w.compare_page()->set_runs({a, b});
      QTRY_VERIFY(w.compare_page()->comm_chart()->bar_count() > 0);
      QTest::qWait(200);
      grab(&w, "compare-" + tag);
      for (const QString& t : scene_texts(w.compare_page()->chart()))
        QVERIFY2(!t.contains(QChar(0x2026)) && !t.contains(QStringLiteral("...")), qPrintable(tag + ": " + t));
      // The bar chart's title and its value axis' title whole (the run names under the bars may
      // be shortened in a narrow column: the thumbnails beside it name the runs).
      const QStringList bars = scene_texts(w.compare_page()->comm_chart());
      QVERIFY2(bars.join("|").contains(QStringLiteral("Comm per step, by axis")), qPrintable(tag + ": " + bars.join(" | ")));
      QVERIFY2(bars.contains(QStringLiteral("ms per step")), qPrintable(tag + ": " + bars.join(" | ")));
    }
  }

  // Compare at 1024 x 700 with the long run names users give their runs: every place that names a
  // run (the picker, the thumbnails, the bars' categories, the config diff's and the prediction
  // table's columns, the chart's legend) either shows the whole name or, where it is shortened,
  // gives the whole name as its tooltip, and nothing is wider than the page.
  void compareNamesLongRunsInFullAt1024() {
    fresh_db();
    MainWindow w(false);
    w.show();
    w.resize(1024, 700);
    const qint64 a = import(w.runs_page(), kData + "/fsdp-1x2.jsonl");
    const qint64 b = import(w.runs_page(), kData + "/ddp-2x1.jsonl");
    QVERIFY(a > 0 && b > 0);
    const QString long_a = QStringLiteral("llama-tiny-fsdp-seq64-lr3e-4-warmup2-sweep-baseline");
    const QString long_b = QStringLiteral("llama-tiny-ddp-seq64-lr3e-4-warmup2-sweep-candidate");
    bool renamed_a = false, renamed_b = false;
    w.runs_page()->model()->rename(a, long_a, [&](const QString&) { renamed_a = true; });
    w.runs_page()->model()->rename(b, long_b, [&](const QString&) { renamed_b = true; });
    QTRY_VERIFY(renamed_a && renamed_b);
    w.runs_page()->model()->refresh();
    QTRY_VERIFY(std::any_of(w.runs_page()->model()->runs().begin(), w.runs_page()->model()->runs().end(),
                            [&](const auto& s) { return QString::fromStdString(s.name) == long_b; }));
    w.set_mode(Mode::compare);
    ComparePage* page = w.compare_page();
    page->set_runs({a, b});
    QTRY_VERIFY(page->comm_chart()->bar_count() > 0);
    QTRY_VERIFY(page->prediction_table()->rowCount() == 2);
    QTest::qWait(300);
    QCOMPARE(w.size(), QSize(1024, 700));
    if (const QString grabs = qEnvironmentVariable("MESHWORK_TEST_GRABS"); !grabs.isEmpty())
      w.grab().save(grabs + "/compare-long-names-1024x700.png");
    const QString full_a = QStringLiteral("%1 #%2").arg(long_a).arg(a), full_b = QStringLiteral("%1 #%2").arg(long_b).arg(b);

    // The page fits the window: no part of it is cut by the window's edge.
    QVERIFY2(page->width() <= w.width() && page->minimumSizeHint().width() <= page->width(),
             qPrintable(QStringLiteral("page %1 px (needs %2) in a %3 px window").arg(page->width())
                            .arg(page->minimumSizeHint().width()).arg(w.width())));
    // The bars, their note and the prediction table each get their height: none is laid over
    // another when the window is short.
    auto* note = page->findChild<QWidget*>(QStringLiteral("CompareCommNote"));
    QVERIFY(note && note->isVisible());
    QVERIFY2(page->comm_chart()->height() >= page->comm_chart()->minimumHeight(),
             qPrintable(QStringLiteral("bars %1 px high, need %2").arg(page->comm_chart()->height()).arg(page->comm_chart()->minimumHeight())));
    QVERIFY2(!page->comm_chart()->geometry().intersects(note->geometry()) &&
                 !note->geometry().intersects(page->prediction_table()->geometry()),
             qPrintable(QStringLiteral("bars %1,%2 %3x%4, note at y %5 (%6 px), table at y %7")
                            .arg(page->comm_chart()->x()).arg(page->comm_chart()->y()).arg(page->comm_chart()->width())
                            .arg(page->comm_chart()->height()).arg(note->y()).arg(note->height()).arg(page->prediction_table()->y())));
    // Shown whole, or shortened with the whole name a tooltip away.
    const auto reachable = [](const QString& shown, const QString& tip, const QString& full) {
      return shown.contains(full) || tip.contains(full);
    };
    // The picker: its rows are as wide as the list shows, the whole name in the tooltip.
    auto* picker = page->findChild<QListWidget*>(QStringLiteral("ComparePicker"));
    QVERIFY(picker);
    for (int i = 0; i < picker->count(); ++i) {
      QListWidgetItem* item = picker->item(i);
      const QString full = item->data(Qt::UserRole).toLongLong() == a ? full_a : full_b;
      const QString name = full.section(QStringLiteral(" #"), 0, 0);
      const int text_width = QFontMetrics(picker->font()).horizontalAdvance(item->text().section('\n', 0, 0));
      QVERIFY2(reachable(item->text(), item->toolTip(), name), qPrintable(item->text() + " / " + item->toolTip()));
      QVERIFY2(text_width <= picker->viewport()->width() || item->toolTip().contains(name),
               qPrintable(QStringLiteral("%1: %2 px in a %3 px list, no tooltip").arg(item->text()).arg(text_width)
                              .arg(picker->viewport()->width())));
    }
    // The thumbnails: each names its run, whole in the tooltip when its caption is shortened.
    const auto thumbs = page->findChildren<MeshThumb*>();
    QCOMPARE(thumbs.size(), 2);
    for (MeshThumb* t : thumbs) {
      const QString full = t->toolTip().contains(full_a) ? full_a : full_b;
      QVERIFY2(t->toolTip().contains(full), qPrintable(t->toolTip()));
    }
    // The config diff's and the prediction table's columns: their header's tooltip is the name.
    for (QTableWidget* table : {page->diff_table(), page->prediction_table()}) {
      QStringList names;
      for (int c = 0; c < table->columnCount(); ++c)
        if (QTableWidgetItem* h = table->horizontalHeaderItem(c)) names << h->text() + " / " + h->toolTip();
      for (int r = 0; r < table->rowCount(); ++r)
        if (QTableWidgetItem* it = table->item(r, 0)) names << it->text() + " / " + it->toolTip();
      QVERIFY2(names.join('\n').contains(full_a) && names.join('\n').contains(full_b), qPrintable(names.join('\n')));
    }
    // The bars: a shortened category keeps the whole name as the bar chart's tooltip.
    QVERIFY2(reachable(scene_texts(page->comm_chart()).join('\n'), page->comm_chart()->toolTip(), full_a) &&
                 reachable(scene_texts(page->comm_chart()).join('\n'), page->comm_chart()->toolTip(), full_b),
             qPrintable(scene_texts(page->comm_chart()).join(" | ") + " / " + page->comm_chart()->toolTip()));
  }
};

QTEST_MAIN(FirstHourTest)
#include "first_hour_test.moc"
