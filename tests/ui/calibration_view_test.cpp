// The cluster calibration in the workbench (issue 18), with real widgets on the offscreen
// platform over a real run store (a temporary SQLite file):
//   - the calibration view lists the store's calibrations newest first; its tables show exactly
//     the stored matmul rates and collective fits (formatted as `meshwork calibrate` prints
//     them); the selector switches; the plot has one line per fit whose values are
//     x / (latency + x / bandwidth) at 4 KiB ... 16 MiB;
//   - the memory panel tags the predicted step time "calibrated" when a stored calibration of
//     the cluster's nodes fed it (and its number is core's estimate with that calibration), and
//     "defaults" on other nodes; View → Calibration… opens the view;
//   - Calibrate in the Cluster view runs a real 2-rank `meshtrain calibrate` on this machine
//     through the launch path, stores the calibration, and the view shows it (integration).
#include <iterator>

#include <QAction>
#include <QComboBox>
#include <QDialog>
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableView>
#include <QTemporaryDir>
#include <QImage>
#include <QTest>
#include <cmath>
#include <unistd.h>

#include "core/calibration.h"
#include "core/parallel_layout.h"
#include "core/store/calibration_store.h"
#include "core/store/run_store.h"
#include "core/time_estimate.h"
#include "test_support.h"
#include "ui/bandwidth_chart.h"
#include "ui/calibrate_controller.h"
#include "ui/calibration_model.h"
#include "ui/calibration_view.h"
#include "ui/cluster_panel.h"
#include "ui/core_bridge.h"
#include "ui/memory_panel.h"
#include "ui/plan_page.h"
#include "ui/plan_state.h"
#include "ui/store_worker.h"

using namespace meshwork;
using namespace meshwork::ui;

namespace {

std::string hostname() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return host;
}

// t = alpha + x / beta exactly at four sizes, x = the ring bytes of the tensor.
void add_collective(std::vector<CollectiveSample>& out, Collective op, LinkKind link, int n, double alpha, double beta) {
  for (double m : {4096.0, 65536.0, 1048576.0, 16777216.0})
    out.push_back({op, link, n, m, alpha + ring_bytes_sent(op, m, n) / beta});
}

// A calibration as build_calibration() fits it from samples (what `meshwork calibrate` stores).
Calibration make_calibration(std::vector<ClusterFingerprint::Node> nodes, const std::string& measured_at,
                             double speed) {
  ClusterFingerprint f;
  f.device = DeviceKind::cpu;
  f.nodes = std::move(nodes);
  f.links = {"intra_node"};
  if (f.nodes.size() > 1) f.links.push_back("inter_node");
  const int rpn = f.nodes.front().devices;
  std::vector<MatmulSample> mm;
  for (Precision p : {Precision::fp32, Precision::bf16})
    for (int split : {1, 2}) {
      MatmulSample s;
      s.precision = p;
      s.threads = 1;
      s.ranks_per_node = rpn;
      s.m = 128, s.n = 256 / split, s.k = 256;
      s.seconds = 2.0 * s.m * s.n * s.k / (speed * (p == Precision::fp32 ? 12.5e9 : 4.25e9) / split);
      s.split = split;
      mm.push_back(s);
    }
  std::vector<CollectiveSample> cs;
  for (Collective op : kCollectives) {
    const int i = static_cast<int>(op);  // each collective its own latency and bandwidth
    add_collective(cs, op, LinkKind::intra_node, rpn, (1 + i) * 45e-6 / speed, (1 + 0.5 * i) * 1.25e9 * speed);
  }
  if (f.nodes.size() > 1) {
    add_collective(cs, Collective::all_reduce, LinkKind::inter_node, static_cast<int>(f.nodes.size()), 180e-6, 0.3e9);
    add_collective(cs, Collective::send_recv, LinkKind::inter_node, static_cast<int>(f.nodes.size()), 90e-6, 0.35e9);
  }
  auto c = build_calibration(f, mm, cs, measured_at);
  if (!c) qFatal("build_calibration: %s", c.error().message().c_str());
  return *c;
}

std::vector<store::StoredCalibration> stored(const QString& db) {
  auto s = store::RunStore::open(db.toStdString());
  if (!s) qFatal("open: %s", s.error().message().c_str());
  auto list = store::list_calibrations(**s);
  if (!list) qFatal("list: %s", list.error().message().c_str());
  return *list;
}

int64_t save(const QString& db, const Calibration& c) {
  auto s = store::RunStore::open(db.toStdString());
  if (!s) qFatal("open: %s", s.error().message().c_str());
  auto id = store::save_calibration(**s, c);
  if (!id) qFatal("save: %s", id.error().message().c_str());
  return *id;
}

QString cell(QTableView* t, int row, int col) { return t->model()->index(row, col).data().toString(); }

// The rows a table should show, formatted here as `meshwork calibrate` prints them (%.1f).
void check_tables(CalibrationView& v, const Calibration& c) {
  QTableView* mm = v.matmul_table();
  QCOMPARE(mm->model()->rowCount(), static_cast<int>(c.matmul.size()));
  for (size_t i = 0; i < c.matmul.size(); ++i) {
    const MatmulRate& r = c.matmul[i];
    const int row = static_cast<int>(i);
    QCOMPARE(cell(mm, row, 0), QString::fromStdString(std::string(to_string(r.precision))));
    QCOMPARE(cell(mm, row, 1), QString::number(r.split));
    QCOMPARE(cell(mm, row, 2), QString::asprintf("%.1f", r.flops_per_s / 1e9));
    QCOMPARE(cell(mm, row, 3), QString::number(r.ranks_per_node));
    QCOMPARE(cell(mm, row, 4), QString::number(r.threads));
  }
  QTableView* co = v.collective_table();
  QCOMPARE(co->model()->rowCount(), static_cast<int>(c.collectives.size()));
  for (size_t i = 0; i < c.collectives.size(); ++i) {
    const CollectiveFit& f = c.collectives[i];
    const int row = static_cast<int>(i);
    QCOMPARE(cell(co, row, 0), QString::fromStdString(std::string(to_string(f.link))));
    QCOMPARE(cell(co, row, 1), QString::fromStdString(std::string(to_string(f.op))));
    QCOMPARE(cell(co, row, 2), QString::number(f.group_size));
    QCOMPARE(cell(co, row, 3), QString::asprintf("%.1f", f.fit.latency_s * 1e6));
    QCOMPARE(cell(co, row, 4), QString::asprintf("%.1f", f.fit.bytes_per_s / 1e6));
    QCOMPARE(cell(co, row, 5), QString::number(f.samples));
    QCOMPARE(cell(co, row, 6), QString::asprintf("%.0f %%", 100 * f.worst_residual));
  }
}

// One line per fit; at 4 KiB, 8 KiB, ..., 16 MiB its value is x / (latency + x / bandwidth).
void check_plot(CalibrationView& v, const Calibration& c) {
  BandwidthChart* chart = v.chart();
  QCOMPARE(chart->series_count(), static_cast<int>(c.collectives.size()));
  QCOMPARE(chart->legend_names().size(), static_cast<int>(c.collectives.size()));
  const double unit = chart->unit_scale();
  for (size_t i = 0; i < c.collectives.size(); ++i) {
    const CollectiveFit& f = c.collectives[i];
    QVERIFY(chart->legend_names()[int(i)].contains(QString::fromStdString(std::string(to_string(f.op)))));
    const std::vector<QPointF>& pts = chart->plot().series()[i].points;
    QCOMPARE(static_cast<int>(pts.size()), 13);
    for (int k = 0; k < 13; ++k) {
      const double x = std::ldexp(1.0, 12 + k);
      const double expected = x / (f.fit.latency_s + x / f.fit.bytes_per_s);
      QCOMPARE(pts[k].x(), std::log2(x));
      QVERIFY2(std::abs(pts[k].y() * unit - expected) <= 1e-9 * expected,
               qPrintable(QStringLiteral("fit %1 at %2 bytes: %3, expected %4")
                              .arg(i).arg(x).arg(pts[k].y() * unit).arg(expected)));
    }
    // Bandwidth grows with the message size towards the fit's bandwidth, never above it.
    QVERIFY(pts.front().y() < pts.back().y());
    QVERIFY(pts.back().y() * unit <= f.fit.bytes_per_s * (1 + 1e-12));
  }
  // The x axis is logarithmic on screen: 1 MiB sits 8/12 of the way from 4 KiB to 16 MiB.
  const double x0 = chart->map_to_widget(4096, 0).x(), x1 = chart->map_to_widget(16 << 20, 0).x();
  QVERIFY(x1 - x0 > 100);
  QVERIFY(std::abs((chart->map_to_widget(1 << 20, 0).x() - x0) / (x1 - x0) - 8.0 / 12) < 1e-9);
  // The fastest line's end is drawn, in its colour, where the axes put it.
  size_t fastest = 0;
  for (size_t i = 0; i < c.collectives.size(); ++i)
    if (c.collectives[i].fit.bytes_per_s > c.collectives[fastest].fit.bytes_per_s) fastest = i;
  const double x = 16 << 20;
  const QPoint p = chart->map_to_widget(x, x / c.collectives[fastest].fit.seconds(x)).toPoint();
  const QImage img = chart->grab().toImage();
  const QColor pen = chart->plot().series()[fastest].pen.color();
  bool drawn = false;
  for (int dx = -2; dx <= 2 && !drawn; ++dx)
    for (int dy = -2; dy <= 2 && !drawn; ++dy) {
      const QColor got = img.pixelColor(p + QPoint(dx, dy));
      drawn = std::abs(got.red() - pen.red()) + std::abs(got.green() - pen.green()) + std::abs(got.blue() - pen.blue()) < 60;
    }
  QVERIFY2(drawn, qPrintable(QStringLiteral("no pixel of %1 near (%2, %3)").arg(pen.name()).arg(p.x()).arg(p.y())));
}

}  // namespace

class CalibrationViewTest : public QObject {
  Q_OBJECT
  QTemporaryDir settings_;
  QTemporaryDir dir_;
  int db_count_ = 0;

  QString fresh_db() {
    const QString db = dir_.filePath(QStringLiteral("runs-%1.db").arg(++db_count_));
    qputenv("MESHWORK_DB", db.toLocal8Bit());
    return db;
  }

  RunConfig tiny_config(const RunConfig& base, MeshShape shape) {
    RunConfig c = base;
    c.name = "calibration-test";
    c.model = "tiny";
    c.mesh = shape;
    c.training.steps = 4;
    c.training.seq_len = 64;
    c.training.global_batch = 4;
    c.training.micro_batch = 1;
    c.training.precision = Precision::fp32;
    c.training.device = DeviceKind::cpu;
    return c;
  }

 private Q_SLOTS:
  void initTestCase() {
    test::isolate_settings(settings_);
#ifdef MESHWORK_MESHTRAIN_BIN
    qputenv("MESHWORK_MESHTRAIN", QByteArray(MESHWORK_MESHTRAIN_BIN));
#endif
    // Run directories under the temporary directory, not the user's ~/.cache.
    qputenv("HOME", dir_.path().toLocal8Bit());
  }

  void viewShowsStoredCalibrationsNewestFirstAndPlotsEachFit() {
    const QString db = fresh_db();
    const Calibration older = make_calibration({{"box-a", 2, "cpu", 2}}, "2026-01-02T03:04:05Z", 1.0);
    Calibration newer =
        make_calibration({{"node-1", 2, "cpu", 4}, {"node-2", 2, "cpu", 4}}, "2026-03-04T05:06:07Z", 2.0);
    newer.step_drift = 0.06;  // the cluster's own noise, which the older one did not measure
    newer.step_spread = 0.11;
    const int64_t older_id = save(db, older);
    const int64_t newer_id = save(db, newer);
    const std::vector<store::StoredCalibration> in_store = stored(db);  // what the store kept
    QCOMPARE(in_store.size(), size_t(2));

    StoreWorker worker(db);
    CalibrationModel model(&worker);
    CalibrationView view(&model);
    view.resize(1100, 760);
    view.show();
    model.refresh();
    QTRY_VERIFY(model.loads() >= 1);
    QVERIFY2(model.error().isEmpty(), qPrintable(model.error()));

    // Newest first: fingerprint id, date, node count.
    QComboBox* sel = view.selector();
    QCOMPARE(sel->count(), 2);
    QCOMPARE(sel->itemText(0), QStringLiteral("%1 · 2026-03-04 05:06 UTC · 2 nodes · cpu")
                                   .arg(QString::fromStdString(newer.fingerprint.id()).left(8)));
    QCOMPARE(sel->itemText(1), QStringLiteral("%1 · 2026-01-02 03:04 UTC · 1 node · cpu")
                                   .arg(QString::fromStdString(older.fingerprint.id()).left(8)));
    QCOMPARE(sel->currentIndex(), 0);
    QCOMPARE(model.selected()->id, newer_id);
    QVERIFY(view.details()->text().contains(QString::fromStdString(newer.fingerprint.id())));
    QVERIFY(view.details()->text().contains(QStringLiteral("node-2")));
    QVERIFY2(view.details()->text().contains(QStringLiteral("its own noise: drift 6 %, spread 11 % (predictions ± 11 %)")),
             qPrintable(view.details()->text()));
    // Every collective inside a node in both; two inter-node fits in the newer.
    QVERIFY(newer.collectives.size() == std::size(kCollectives) + 2 && older.collectives.size() == std::size(kCollectives));
    check_tables(view, in_store[0].calibration);
    check_plot(view, in_store[0].calibration);

    // The selector switches tables and plot to the older calibration.
    sel->setCurrentIndex(1);
    QCOMPARE(model.selected()->id, older_id);
    QVERIFY(!view.details()->text().contains(QStringLiteral("noise")));
    check_tables(view, in_store[1].calibration);
    check_plot(view, in_store[1].calibration);

    // A refresh keeps the selection; a new calibration selected by id shows at once.
    model.refresh();
    const int64_t loads = model.loads();
    QTRY_VERIFY(model.loads() > loads);
    QCOMPARE(model.selected()->id, older_id);
    QCOMPARE(sel->currentIndex(), 1);
    const Calibration third = make_calibration({{"box-c", 4, "cpu", 8}}, "2026-05-06T07:08:09Z", 3.0);
    const int64_t third_id = save(db, third);
    model.refresh(third_id);
    QTRY_COMPARE(sel->count(), 3);
    QCOMPARE(model.selected()->id, third_id);
    QCOMPARE(sel->currentIndex(), 0);
    check_tables(view, stored(db)[0].calibration);
  }

  void memoryPanelSaysCalibratedOnCalibratedNodesAndDefaultsElsewhere() {
    const QString db = fresh_db();
    // This machine with 2 ranks, as `meshwork calibrate --local --nproc-per-node 2` names it.
    const Calibration local = make_calibration({{hostname(), 2, "cpu", 2}}, "2026-02-03T04:05:06Z", 1.0);
    save(db, local);
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    test::set_local_cluster(w, 2);
    const RunConfig config = tiny_config(w.plan()->config(), MeshShape{1, 2, 1, 1});
    w.plan()->set_config(config);
    w.set_mode(Mode::plan);
    MemoryPanel* panel = w.plan_page()->memory();
    QTRY_COMPARE_WITH_TIMEOUT(panel->time_basis(), QStringLiteral("calibrated"), 20000);
    const ui::MemoryEstimate& m = *w.plan()->memory();
    QCOMPARE(QString::fromStdString(m.calibration_id), QString::fromStdString(local.fingerprint.id()));
    QVERIFY(m.time.compute_calibrated);
    QVERIFY(m.time.communicates(Axis::dp_shard));
    QVERIFY(m.time.comm_calibrated[Axis::dp_shard]);
    QVERIFY(panel->time_basis_detail().contains(QString::fromStdString(local.fingerprint.id()).left(8)));
    QVERIFY(panel->time_basis_detail().contains(QStringLiteral("dp_shard communication")));
    // The number is core's estimate with the calibration (and differs from the defaults').
    const ModelSpec tiny = *load_model_spec("tiny");
    Placement placement;
    placement.world_size = 2;
    placement.ranks_per_node = 2;
    const LayoutCheck checked = ParallelLayout::check(w.plan()->config(), &tiny, placement);
    QVERIFY(checked.ok());
    TimeQuery tq = checked.layout->time_query(tiny, HardwareModel::for_device(DeviceKind::cpu));
    const double defaults_s = estimate_time(tq).step_s;
    tq.calibration = local;
    const TimeEstimate calibrated = estimate_time(tq);
    QVERIFY(calibrated.compute_calibrated);
    QCOMPARE(m.time.step_s, calibrated.step_s);
    QVERIFY(std::abs(m.time.step_s - defaults_s) > 1e-6 * defaults_s);
    // The Cluster view says so too.
    QVERIFY2(w.cluster_panel()->calibration_status().contains(QStringLiteral("Calibrated")),
             qPrintable(w.cluster_panel()->calibration_status()));
    QVERIFY(w.cluster_panel()->calibration_status().contains(QString::fromStdString(local.fingerprint.id()).left(8)));

    // View → Calibration… opens the view on that calibration.
    QAction* open = nullptr;
    for (QAction* a : w.findChildren<QAction*>())
      if (a->text() == QStringLiteral("C&alibration…")) open = a;
    QVERIFY(open);
    open->trigger();
    QVERIFY(w.cluster_panel()->calibration_view());
    QTRY_VERIFY(w.cluster_panel()->calibration_view()->isVisible());
    QTRY_COMPARE(w.cluster_panel()->calibration_view()->selector()->count(), 1);
    check_tables(*w.cluster_panel()->calibration_view(), local);

    // Other nodes: no calibration of theirs is stored, so the defaults.
    test::set_gpu_cluster(w, 2, 8);
    RunConfig gpu = config;
    gpu.mesh = MeshShape{1, -1, 1, 1};
    gpu.training.device = DeviceKind::cuda;
    gpu.training.global_batch = 16;
    w.plan()->set_config(gpu);
    QTRY_COMPARE_WITH_TIMEOUT(panel->time_basis(), QStringLiteral("uncalibrated estimate"), 20000);
    QVERIFY(w.plan()->memory()->calibration_id.empty());
    QVERIFY(!w.plan()->memory()->time.compute_calibrated);
    QVERIFY(panel->time_basis_detail().contains(QStringLiteral("no stored calibration")));
    QVERIFY(w.cluster_panel()->calibration_status().contains(QStringLiteral("Not calibrated")));
  }

  void calibrateFromTheClusterViewStoresAndShowsTheNewCalibration() {
#ifndef MESHWORK_MESHTRAIN_BIN
    QSKIP("meshtrain is not built");
#else
    const QString db = fresh_db();
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    test::set_local_cluster(w, 2);
    w.plan()->set_config(tiny_config(w.plan()->config(), MeshShape{1, 2, 1, 1}));
    w.set_mode(Mode::cluster);
    ClusterPanel* panel = w.cluster_panel();
    QTRY_VERIFY(panel->calibrations()->loads() >= 1);
    QVERIFY(panel->calibration_status().contains(QStringLiteral("Not calibrated")));
    QTRY_COMPARE(w.plan_page()->memory()->time_basis(), QStringLiteral("uncalibrated estimate"));
    QPushButton* button = panel->calibrate_button();
    QVERIFY2(button->isEnabled(), qPrintable(button->toolTip()));
    QSignalSpy progress(panel->calibrator(), &CalibrateController::progress);
    QSignalSpy started(panel->calibrator(), &CalibrateController::started);
    QSignalSpy calibrated(panel->calibrator(), &CalibrateController::calibrated);
    QSignalSpy failed(panel->calibrator(), &CalibrateController::failed);
    QTest::mouseClick(button, Qt::LeftButton);
    QVERIFY(panel->calibrator()->running());
    QVERIFY(!button->isEnabled());  // one at a time
    QTRY_VERIFY_WITH_TIMEOUT(!calibrated.isEmpty() || !failed.isEmpty(), 300000);
    QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().at(0).toString()));
    QCOMPARE(started.size(), 1);
    QVERIFY(progress.size() >= 3);  // probe, deploy, run, follow, fit ...
    QVERIFY2(panel->calibration_progress().startsWith(QStringLiteral("Stored calibration")),
             qPrintable(panel->calibration_progress()));
    QVERIFY(button->isEnabled());

    // Stored with the run that measured it, which ended ok; named as the workbench's cluster.
    const std::vector<store::StoredCalibration> in_store = stored(db);
    QCOMPARE(in_store.size(), size_t(1));
    const store::StoredCalibration& s = in_store[0];
    QCOMPARE(qint64(s.id), calibrated.first().at(0).toLongLong());
    QVERIFY(s.run.has_value());
    QCOMPARE(qint64(*s.run), started.first().at(0).toLongLong());
    {
      auto st = store::RunStore::open(db.toStdString());
      QVERIFY(st.ok());
      QCOMPARE(QString::fromStdString((*st)->get_run(*s.run)->summary.status), QStringLiteral("ok"));
    }
    QCOMPARE(s.calibration.fingerprint.nodes.size(), size_t(1));
    QCOMPARE(QString::fromStdString(s.calibration.fingerprint.nodes[0].host), QString::fromStdString(hostname()));
    QCOMPARE(s.calibration.fingerprint.nodes[0].devices, 2);
    for (Collective op : kCollectives) QVERIFY(s.calibration.collective(LinkKind::intra_node, op, 2).has_value());

    // The view opened on it, refreshed.
    CalibrationView* view = panel->calibration_view();
    QVERIFY(view);
    QTRY_VERIFY(view->isVisible());
    QTRY_COMPARE(view->selector()->count(), 1);
    QCOMPARE(panel->calibrations()->selected()->id, s.id);
    QVERIFY(view->selector()->currentText().startsWith(QString::fromStdString(s.calibration.fingerprint.id()).left(8)));
    check_tables(*view, s.calibration);
    check_plot(*view, s.calibration);
    QVERIFY(view->progress_label()->text().startsWith(QStringLiteral("Stored calibration")));

    // The estimates use it now.
    QTRY_VERIFY(panel->calibration_status().contains(QStringLiteral("Calibrated")));
    QTRY_COMPARE_WITH_TIMEOUT(w.plan_page()->memory()->time_basis(), QStringLiteral("calibrated"), 20000);
    QCOMPARE(w.plan()->memory()->calibration_id, s.calibration.fingerprint.id());
#endif
  }
};

QTEST_MAIN(CalibrationViewTest)
#include "calibration_view_test.moc"
