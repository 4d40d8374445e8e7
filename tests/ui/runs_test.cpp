// Runs, live monitor and Compare with real widgets on the offscreen platform, over a real run
// store (a temporary SQLite file) filled from metrics files that meshtrain recorded
// (tests/ui/data/, see README there): the table lists an imported run; the live monitor draws
// lines appended to a followed file; Compare overlays N runs and its config diff lists exactly
// the fields that differ.
#include <QApplication>
#include <QDir>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QMimeData>
#include <QUrl>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QStatusBar>
#include <QTest>
#include <QValueAxis>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>

#include "core/metrics.h"
#include "core/store/run_segments.h"
#include "ui/format.h"
#include "ui/theme.h"
#include "test_support.h"
#include "ui/bar_chart.h"
#include "ui/compare_model.h"
#include "ui/browser_server.h"
#include "ui/compare_page.h"
#include "ui/metric_chart.h"
#include "ui/monitor_model.h"
#include "ui/monitor_page.h"
#include "ui/runs_model.h"
#include "ui/runs_page.h"
#include "ui/store_worker.h"

using namespace meshwork;
using namespace meshwork::ui;

namespace {
const QString kData = QStringLiteral(MESHWORK_UI_TEST_DATA);

QStringList read_lines(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  QStringList lines = QString::fromUtf8(f.readAll()).split('\n', Qt::SkipEmptyParts);
  return lines;
}
void write_lines(const QString& path, const QStringList& lines, bool append) {
  std::ofstream out(path.toStdString(), append ? std::ios::app : std::ios::trunc);
  for (const QString& l : lines) out << l.toStdString() << "\n";
}
int count_steps(const QStringList& lines, int rank) {
  int n = 0;
  for (const QString& l : lines)
    if (l.contains("\"type\":\"step\"") && l.contains(QStringLiteral("\"rank\":%1,").arg(rank))) ++n;
  return n;
}
}  // namespace

class RunsTest : public QObject {
  Q_OBJECT
  QTemporaryDir settings_;
  QTemporaryDir dir_;
  QString db_;
  int db_n_ = 0;

  // A fresh database per test, used by every MainWindow/StoreWorker the test makes.
  void fresh_db() {
    db_ = dir_.filePath(QStringLiteral("runs-%1.db").arg(++db_n_));
    qputenv("MESHWORK_DB", db_.toLocal8Bit());
  }
  // Imports a file through the Runs page as the user's button would, waits for the row.
  qint64 import(RunsPage* page, const QString& path, bool follow) {
    const int before = page->model()->rowCount();
    page->import_metrics(path, follow);
    if (!QTest::qWaitFor([&] { return page->model()->rowCount() > before; }, 20000)) return 0;
    qint64 newest = 0;
    for (const auto& s : page->model()->runs()) newest = std::max<qint64>(newest, s.id);
    return newest;
  }

 private Q_SLOTS:
  void initTestCase() {
    test::isolate_settings(settings_);
    QVERIFY2(QFile::exists(kData + "/fsdp-1x2.jsonl"), qPrintable(kData));
  }

  void importedRunAppearsInRunsTable() {
    fresh_db();
    MainWindow w(false);
    w.resize(1300, 850);
    w.show();
    w.set_mode(Mode::runs);
    RunsPage* page = w.runs_page();
    const qint64 id = import(page, kData + "/fsdp-1x2.jsonl", false);
    QVERIFY(id > 0);
    const int row = page->model()->row_of(id);
    QVERIFY(row >= 0);
    auto cell = [&](int col) { return page->model()->index(row, col).data().toString(); };
    const QStringList lines = read_lines(kData + "/fsdp-1x2.jsonl");
    QCOMPARE(cell(RunsModel::kName), QStringLiteral("fsdp-1x2"));
    QCOMPARE(cell(RunsModel::kShape), QStringLiteral("1×2×1×1"));
    QCOMPARE(cell(RunsModel::kModel), QStringLiteral("tiny"));
    QCOMPARE(cell(RunsModel::kStatus), QStringLiteral("ok"));
    QCOMPARE(cell(RunsModel::kSteps).toInt(), count_steps(lines, 0));
    QVERIFY(!cell(RunsModel::kLoss).isEmpty());
    QVERIFY(cell(RunsModel::kTokens).contains("tokens/s"));
    // The table view shows it, and the filter hides it when it does not match.
    QTableView* table = page->table();
    QCOMPARE(table->model()->rowCount(), 1);
    page->filter()->setText("no-such-run");
    QCOMPARE(table->model()->rowCount(), 0);
    page->filter()->setText("1×2");
    QCOMPARE(table->model()->rowCount(), 1);
  }

  void renameDeleteAndExport() {
    fresh_db();
    MainWindow w(false);
    w.show();
    RunsPage* page = w.runs_page();
    const qint64 a = import(page, kData + "/fsdp-1x2.jsonl", false);
    const qint64 b = import(page, kData + "/ddp-2x1.jsonl", false);
    QVERIFY(a > 0 && b > 0);
    // Rename in place (the table's editor writes through setData).
    const QModelIndex name = page->model()->index(page->model()->row_of(a), RunsModel::kName);
    QVERIFY(page->model()->setData(name, "renamed run", Qt::EditRole));
    QTRY_COMPARE(QString::fromStdString(page->model()->find(a)->name), QStringLiteral("renamed run"));
    // Export the selected run as CSV: every point, header first.
    page->select_runs({a});
    const QString csv = dir_.filePath("a.csv");
    page->export_selected(csv);
    QTRY_VERIFY(QFile::exists(csv) && QFileInfo(csv).size() > 0);
    QFile f(csv);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(QString::fromUtf8(f.readLine()).trimmed(), QStringLiteral("run,rank,step,time,tokens,key,value"));
    // Sort by final loss, then delete one (the confirmation is the dialog's; answered here).
    page->table()->sortByColumn(RunsModel::kLoss, Qt::AscendingOrder);
    page->select_runs({b});
    page->delete_selected(false);
    QTRY_COMPARE(page->model()->rowCount(), 1);
    QVERIFY(page->model()->find(b) == nullptr);
  }

  void liveMonitorShowsAppendedPoints() {
    fresh_db();
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    w.set_mode(Mode::runs);
    RunsPage* page = w.runs_page();
    // A run still writing its file: the first half of a recorded run, then the rest appended.
    const QStringList lines = read_lines(kData + "/fsdp-1x2.jsonl");
    QStringList head, tail;
    int steps_seen = 0;
    for (const QString& l : lines) {
      if (l.contains("\"type\":\"step\"") && l.contains("\"rank\":0,")) ++steps_seen;
      (steps_seen <= 3 && !l.contains("\"type\":\"end\"") ? head : tail) << l;
    }
    QVERIFY(!tail.isEmpty());
    const QString live = dir_.filePath("live.jsonl");
    write_lines(live, head, false);
    const qint64 id = import(page, live, true);
    QVERIFY(id > 0);
    page->open_run(id);
    MonitorPage* m = page->monitor();
    QTRY_VERIFY(m->model()->frame() != nullptr);
    QTRY_COMPARE(m->loss_chart()->point_count(0), 3);
    const int64_t frames_before = m->model()->frames_applied();
    // Half a line first: nothing may be drawn from it until its newline arrives.
    {
      std::ofstream out(live.toStdString(), std::ios::app);
      out << tail.front().left(20).toStdString();
    }
    QTest::qWait(700);
    QCOMPARE(m->loss_chart()->point_count(0), 3);
    {
      std::ofstream out(live.toStdString(), std::ios::app);
      out << tail.front().mid(20).toStdString() << "\n";
    }
    write_lines(live, tail.mid(1), true);
    const int total = count_steps(lines, 0);
    QTRY_COMPARE_WITH_TIMEOUT(m->loss_chart()->point_count(0), total, 10000);
    QVERIFY(m->model()->frames_applied() > frames_before);
    // Every chart got its points; memory has one line per rank (+ its peak); the status follows.
    QCOMPARE(m->lr_chart()->point_count(0), total);
    QCOMPARE(m->grad_chart()->point_count(0), total);
    QCOMPARE(m->throughput_chart()->point_count(0), total);
    QCOMPARE(m->memory_chart()->line_count(), 4);
    QCOMPARE(m->memory_chart()->point_count(0), total);
    QVERIFY(m->comm_chart()->point_count(0) == total);  // dp_shard layer
    QTRY_COMPARE(m->status_label()->text(), QStringLiteral("ok"));
    QVERIFY(m->breakdown_chart()->bar_count() == 2 * 2);  // 2 ranks x (dp_shard, compute)
    page->model()->unfollow_files();
  }

  // A run recorded with --eval-data: its eval records are the loss chart's "eval loss" line
  // (one point per evaluation, at the step it follows) and the eval_loss metric of Compare.
  void evalLossIsDrawnInLossChartAndCompare() {
    fresh_db();
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    w.set_mode(Mode::runs);
    RunsPage* page = w.runs_page();
    const qint64 id = import(page, kData + "/fsdp-1x2-eval.jsonl", false);
    QVERIFY(id > 0);
    const qint64 plain = import(page, kData + "/fsdp-1x2.jsonl", false);
    QVERIFY(plain > 0);
    page->open_run(id);
    MonitorPage* m = page->monitor();
    QTRY_VERIFY(m->model()->frame() != nullptr);
    QTRY_COMPARE(m->loss_chart()->point_count(1), 8);
    QCOMPARE(m->loss_chart()->line_count(), 3);
    QCOMPARE(m->loss_chart()->point_count(2), 2);  // evaluations after steps 3 and 7
    const auto& eval = m->model()->frame()->eval_loss;
    QCOMPARE(eval.size(), size_t{2});
    QCOMPARE(eval[0].x, 3.0);
    QCOMPARE(eval[1].x, 7.0);
    QVERIFY(eval[1].y > 4 && eval[1].y < eval[0].y);  // byte-level tiny model, learning
    // Drawn where Qt Charts maps the point, inside the plot.
    const QPointF at = m->loss_chart()->map_to_widget(QPointF(eval[1].x, eval[1].y), 2);
    QVERIFY(m->loss_chart()->rect().contains(at.toPoint()));
    // A run without --eval-data has no eval line points.
    page->open_run(plain);
    QTRY_VERIFY(m->model()->frame() && m->model()->frame()->run == plain);
    QTRY_COMPARE(m->loss_chart()->point_count(1), 8);
    QCOMPARE(m->loss_chart()->point_count(2), 0);

    page->select_runs({static_cast<store::RunId>(id), static_cast<store::RunId>(plain)});
    Q_EMIT page->compare_requested(page->selected_runs());
    QCOMPARE(w.mode(), Mode::compare);
    ComparePage* c = w.compare_page();
    QTRY_COMPARE(c->series_count(), 2);
    c->set_smoothing(0);
    c->set_metric(QString::fromLatin1(meshwork::kEvalLossKey));
    QTRY_COMPARE(c->model()->query().key, std::string(meshwork::kEvalLossKey));
    auto points_of = [&](qint64 run) -> int {
      const auto& f = c->model()->frame();
      if (!f) return -1;
      for (const auto& series : f->series)
        if (series.run == run) return static_cast<int>(series.points.size());
      return -1;
    };
    QTRY_COMPARE(points_of(id), 2);
    QCOMPARE(points_of(plain), 0);  // the run without evaluations
    int drawn = 0;
    for (int i = 0; i < c->chart()->line_count(); ++i) drawn += c->chart()->point_count(i);
    QCOMPARE(drawn, 2);
  }

  // A re-planned run (two segments in the store): every chart over steps marks where the new
  // shape began, in the warning colour, and the header lists the shapes with the cause.
  void replannedRunIsMarkedWhereItsShapeChanged() {
    fresh_db();
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    w.set_mode(Mode::runs);
    RunsPage* page = w.runs_page();
    const qint64 id = import(page, kData + "/fsdp-1x2.jsonl", false);
    QVERIFY(id > 0);
    const MeshShape survivors{1, 1, 1, 1};
    {
      auto store = store::RunStore::open(db_.toStdString());
      QVERIFY(store.ok());
      auto seg = store::begin_segment(**store, id, 4, survivors, {"node-a"}, "node node-b lost: its ranks exited 137", 1.0);
      QVERIFY2(seg.ok(), seg.ok() ? "" : seg.error().message().c_str());
      QCOMPARE(seg->segment, 1);
    }
    page->open_run(id);
    MonitorPage* m = page->monitor();
    QTRY_VERIFY(m->model()->frame() && m->model()->run() == id && m->loss_chart()->point_count(1) == 8);
    QCOMPARE(m->model()->frame()->segments.size(), size_t{2});
    for (MetricChart* chart : {m->loss_chart(), m->lr_chart(), m->grad_chart(), m->throughput_chart(), m->comm_chart()}) {
      QCOMPARE(chart->marks().size(), size_t{1});
      QCOMPARE(chart->marks()[0].x, 4.0);
      QCOMPARE(chart->marks()[0].label, QStringLiteral("→ %1").arg(format_shape(survivors)));
    }
    auto* facts = m->findChild<QLabel*>(QStringLiteral("run_facts"));
    QVERIFY(facts);
    QVERIFY2(facts->text().contains(QStringLiteral("2 shapes: %1 → %2").arg(format_shape(MeshShape{1, 2, 1, 1}), format_shape(survivors))),
             qPrintable(facts->text()));
    QVERIFY2(facts->toolTip().contains(QStringLiteral("step 4:")) && facts->toolTip().contains(QStringLiteral("node node-b lost")),
             qPrintable(facts->toolTip()));
    // Drawn: the column of step 4 in the loss chart holds the mark's colour from top to bottom.
    MetricChart* loss = m->loss_chart();
    QTest::qWait(100);
    const QImage img = loss->grab().toImage();
    if (const QString grabs = qEnvironmentVariable("MESHWORK_TEST_GRABS"); !grabs.isEmpty())  // PNGs to look at
      w.grab().save(grabs + "/replanned-run.png");
    const QPointF at = loss->map_to_widget(QPointF(4, m->model()->frame()->loss[4].y), 1);
    const QColor mark = warning_color();
    int hits = 0;
    for (int y = 0; y < img.height(); ++y)
      for (int dx = -1; dx <= 1; ++dx) {
        const QColor c = img.pixelColor(static_cast<int>(at.x()) + dx, y);
        hits += std::hypot(c.red() - mark.red(), c.green() - mark.green(), c.blue() - mark.blue()) < 60;
      }
    QVERIFY2(hits > 20, qPrintable(QStringLiteral("%1 pixels of the mark's colour at x %2").arg(hits).arg(at.x())));
    // A run that never re-planned has no marks.
    const qint64 plain = import(page, kData + "/ddp-2x1.jsonl", false);
    page->open_run(plain);
    QTRY_VERIFY(m->model()->frame() && m->model()->run() == plain);
    QVERIFY(m->loss_chart()->marks().empty());
    QVERIFY(facts->toolTip().isEmpty());
  }

  void compareShowsSeriesAndExactConfigDiff() {
    fresh_db();
    MainWindow w(false);
    w.resize(1500, 950);
    w.show();
    RunsPage* page = w.runs_page();
    std::vector<store::RunId> ids;
    for (const char* f : {"fsdp-1x2.jsonl", "ddp-2x1.jsonl", "fsdp-1x2-lr1e-3.jsonl"}) {
      ids.push_back(import(page, kData + "/" + f, false));
      QVERIFY(ids.back() > 0);
    }
    page->select_runs(ids);
    QSignalSpy compare_spy(page, &RunsPage::compare_requested);
    Q_EMIT page->compare_requested(page->selected_runs());
    QCOMPARE(w.mode(), Mode::compare);
    ComparePage* c = w.compare_page();
    QTRY_COMPARE(c->series_count(), 3);
    // With smoothing each run has its raw line (faint) and its smoothed line.
    QCOMPARE(c->chart()->line_count(), 6);
    for (int i = 0; i < 6; ++i) QVERIFY(c->chart()->point_count(i) > 0);
    c->set_smoothing(0);
    QCOMPARE(c->chart()->line_count(), 3);
    // The diff: exactly the fields that differ, and all fields when asked.
    QTableWidget* diff = c->diff_table();
    std::set<QString> keys;
    for (int r = 0; r < diff->rowCount(); ++r) keys.insert(diff->item(r, 0)->text());
    QCOMPARE(keys, (std::set<QString>{"mesh.dp_replicate", "mesh.dp_shard", "training.lr"}));
    QCOMPARE(diff->columnCount(), 4);
    c->set_only_differences(false);
    QVERIFY(diff->rowCount() > 10);
    // x = tokens and wall time re-query; per-axis comm bars are grouped per run.
    c->set_x_axis(store::XAxis::tokens);
    QTRY_COMPARE(c->model()->frame()->series.size(), size_t{3});
    QVERIFY(c->comm_chart()->bar_count() == 2 * 3);  // dp_replicate, dp_shard x 3 runs
    const QString png = dir_.filePath("compare.png");
    QVERIFY(c->export_chart_png(png));
    QVERIFY(QImage(png).width() > 400);
  }

  void zoomRequeriesFullResolution() {
    fresh_db();
    // A long run: 20k steps on one rank, written as the trainer would.
    const QString path = dir_.filePath("long.jsonl");
    {
      std::ofstream out(path.toStdString());
      out << R"({"v":1,"type":"start","rank":0,"time":1000,"host":"h","pid":1,"node":0,"world":1,)"
          << R"("mesh":{"dp_replicate":1,"dp_shard":1,"cp":1,"tp":1},"config":{"model":"tiny"}})" << "\n";
      for (int s = 0; s < 20000; ++s)
        out << R"({"v":1,"type":"step","step":)" << s << R"(,"rank":0,"time":)" << 1000 + s * 0.01
            << R"(,"loss":)" << 5.0 / (1 + s * 0.001) + (s % 97 == 0 ? 1.0 : 0.0)
            << R"(,"lr":0.0003,"grad_norm":1.0,"tokens":512,"tokens_per_s":1000,"tflops":0.001,"mfu":0.01,)"
            << R"("mem_bytes":1000000,"mem_peak_bytes":2000000,"comm_s":{"dp_replicate":0,"dp_shard":0,"cp":0,"tp":0},)"
            << R"("compute_s":0.01,"step_s":0.01})" << "\n";
    }
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    RunsPage* page = w.runs_page();
    const qint64 id = import(page, path, false);
    QVERIFY(id > 0);
    page->open_run(id);
    w.set_mode(Mode::runs);
    MonitorPage* m = page->monitor();
    QTRY_VERIFY(m->model()->frame() && m->model()->frame()->source_points == 20000);
    // Once laid out, the page asks for as many pixel columns as the chart is wide.
    QTRY_VERIFY(std::abs(m->model()->frame()->pixels - m->loss_chart()->width()) < 8);
    const int whole = m->loss_chart()->point_count(0);
    QVERIFY2(whole < 20000 / 4, qPrintable(QString::number(whole)));  // decimated
    // Zoom to 200 steps: every point of the range is drawn.
    Q_EMIT m->loss_chart()->x_range_requested(1000, 1199);
    QTRY_COMPARE(m->loss_chart()->point_count(0), 200);
    QVERIFY(m->lr_chart()->zoomed());  // every chart follows
    Q_EMIT m->loss_chart()->zoom_reset();
    QTRY_COMPARE(m->loss_chart()->point_count(0), whole);
  }

  // A live run's charts start from one point (a zero-width x range) and then grow: the x axis
  // must keep a handful of round ticks at every size. (A 2e-301 tick interval left over from the
  // one-point range once met the 5-step range: Qt laid out 10^301 ticks until the OOM killer came.)
  void chartGrowsFromOnePointWithRoundTicks() {
    MetricChart c(QStringLiteral("Loss"));
    c.resize(600, 300);
    c.show();
    const int line = c.add_line(QStringLiteral("loss"), MetricChart::LineStyle{Qt::blue});
    auto* x = qobject_cast<QValueAxis*>(c.chart()->axes(Qt::Horizontal).value(0));
    QVERIFY(x);
    for (int n : {1, 2, 5, 37, 1000, 123456}) {
      std::vector<store::Point> pts;
      for (int i = 0; i < n; ++i) pts.push_back({static_cast<double>(i), 10.0 / (i + 1)});  // from step 0
      c.set_points(line, pts);
      c.rescale();
      QCoreApplication::processEvents();
      const double span = x->max() - x->min();
      QVERIFY2(span >= 1 && x->max() >= n - 1, qPrintable(QStringLiteral("n=%1: [%2, %3]").arg(n).arg(x->min()).arg(x->max())));
      const double ticks = span / x->tickInterval();
      QVERIFY2(ticks >= 2 && ticks <= 12, qPrintable(QStringLiteral("n=%1: %2 ticks").arg(n).arg(ticks)));
      const double mantissa = x->tickInterval() / std::pow(10.0, std::floor(std::log10(x->tickInterval())));
      QVERIFY2(std::abs(mantissa - 1) < 1e-9 || std::abs(mantissa - 2) < 1e-9 || std::abs(mantissa - 5) < 1e-9,
               qPrintable(QString::number(x->tickInterval())));
    }
    QVERIFY(!c.grab().isNull());
  }

  // View -> Serve in the browser: `meshwork serve` on the workbench's store, its URL in the
  // status bar, the runs it shows those of the Runs page; closing the workbench stops it.
  void servedInTheBrowserFromTheViewMenu() {
    fresh_db();
    QUrl url;
    {
      MainWindow w(false);
      w.set_open_browser(false);
      w.show();
      const qint64 id = import(w.runs_page(), kData + "/fsdp-1x2.jsonl", false);
      QVERIFY(id > 0);
      QAction* serve = nullptr;
      for (QAction* a : w.findChildren<QAction*>())
        if (a->text() == QStringLiteral("Serve in the &browser…")) serve = a;
      QVERIFY(serve);
      serve->trigger();
      QVERIFY(QTest::qWaitFor([&] { return w.browser_server() && w.browser_server()->serving(); }, 30000));
      url = w.browser_server()->url();
      QCOMPARE(url.host(), QStringLiteral("127.0.0.1"));
      QVERIFY(w.statusBar()->currentMessage().contains(url.toString()));
      const auto get = [](const QUrl& u, int* status) {
        QNetworkAccessManager nam;
        QNetworkReply* r = nam.get(QNetworkRequest(u));
        if (!QTest::qWaitFor([&] { return r->isFinished(); }, 20000)) qWarning("no reply in 20 s: %s", qPrintable(u.toString()));
        *status = r->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
        const QByteArray body = r->readAll();
        delete r;
        return body;
      };
      int status = 0;
      const auto runs = nlohmann::json::parse(get(url.resolved(QUrl("api/runs")), &status).toStdString());
      QCOMPARE(status, 200);
      QCOMPARE(runs["runs"].size(), size_t{1});
      QCOMPARE(runs["runs"][0]["name"].get<std::string>(), std::string("fsdp-1x2"));
      QCOMPARE(runs["runs"][0]["id"].get<qint64>(), id);
      get(url, &status);
      QCOMPARE(status, 200);
    }
    // The workbench closed: so did its server.
    QNetworkAccessManager nam;
    QNetworkReply* r = nam.get(QNetworkRequest(url.resolved(QUrl("api/runs"))));
    QVERIFY(QTest::qWaitFor([&] { return r->isFinished(); }, 20000));
    QCOMPARE(r->error(), QNetworkReply::ConnectionRefusedError);
    delete r;
  }

  void configDiffAndSmoothingRules() {
    const nlohmann::json a = {{"name", "a"}, {"mesh", {{"dp_shard", 2}, {"tp", 1}}}, {"training", {{"lr", 0.001}}}};
    const nlohmann::json b = {{"name", "b"}, {"mesh", {{"dp_shard", 2}, {"tp", 2}}}, {"training", {{"lr", 0.001}}}, {"data", "x.bin"}};
    const auto rows = config_diff({a, b});
    std::set<QString> differ, same;
    for (const auto& r : rows) (r.differs ? differ : same).insert(QString::fromStdString(r.key));
    QCOMPARE(differ, (std::set<QString>{"mesh.tp", "data"}));
    QCOMPARE(same, (std::set<QString>{"mesh.dp_shard", "training.lr"}));
    // Debiased EMA: a constant stays constant from the first point; weight 0 is the identity.
    std::vector<store::Point> pts;
    for (int i = 0; i < 10; ++i) pts.push_back({double(i), 3.0});
    for (const auto& p : smooth(pts, 0.9)) QVERIFY(std::abs(p.y - 3.0) < 1e-12);
    pts[5].y = 13;
    QCOMPARE(smooth(pts, 0.0)[5].y, 13.0);
    QVERIFY(smooth(pts, 0.9)[5].y < 13.0 && smooth(pts, 0.9)[5].y > 3.0);
    // Stacked layers share one grid: a step function of the last point at or before x.
    const auto r = resample({{0, 1}, {2, 5}}, {0, 1, 2, 3});
    QCOMPARE(r, (std::vector<double>{1, 1, 5, 5}));
  }
};

QTEST_MAIN(RunsTest)
#include "runs_test.moc"
