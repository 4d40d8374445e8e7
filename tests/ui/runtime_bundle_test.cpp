// The Cluster mode's Runtime choice (issue 17): this machine's LibTorch, a runtime bundle chosen as
// a file, or the node's own torch. The choice is what the LaunchController's request carries, it
// is remembered across sessions, $MESHWORK_BUNDLE still wins, a file that is not a bundle is
// refused next to the control (remote::load_bundle's words) and launches nothing, and a bundle's
// per-node upload shows bytes, rate and ETA on the run's page.
#include <QAction>
#include <QComboBox>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "test_support.h"
#include "ui/launch_controller.h"
#include "ui/monitor_page.h"
#include "ui/plan_state.h"
#include "ui/runs_page.h"
#include "ui/runtime_panel.h"

using namespace meshwork;
using namespace meshwork::ui;

class RuntimeBundleTest : public QObject {
  Q_OBJECT
  QTemporaryDir settings_;
  QTemporaryDir dir_;

  // A bundle as scripts/bundle lays it out: the archive and its manifest beside it.
  QString fake_bundle(const QString& name, qint64 size) {
    const QString archive = dir_.filePath(name + ".tar.zst");
    QFile a(archive);
    if (!a.open(QIODevice::WriteOnly)) return {};
    a.write(QByteArray(size, 'x'));
    a.close();
    QFile m(dir_.filePath(name + ".json"));
    if (!m.open(QIODevice::WriteOnly)) return {};
    m.write(QStringLiteral(R"({"archive": "%1.tar.zst", "sha256": "%2", "archive_size": %3, "flavour": "cpu",)"
                           R"( "torch_version": "2.9.0", "trainer": "meshtrain"})")
                .arg(name, QString(64, 'a'))
                .arg(size)
                .toUtf8());
    return archive;
  }

  RunConfig tiny_config(const MainWindow& w) {
    RunConfig c = w.plan()->config();
    c.name = "runtime";
    c.model = "tiny";
    c.mesh = MeshShape{1, 2, 1, 1};
    c.training.steps = 2;
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
    qputenv("MESHWORK_DB", dir_.filePath("runs.db").toLocal8Bit());
    qputenv("HOME", dir_.path().toLocal8Bit());
    qunsetenv("MESHWORK_BUNDLE");
  }

  void runtimeChoiceSetsTheLaunchRequestAndIsRemembered() {
    QSettings().clear();
    const QString bundle = fake_bundle("meshtrain-cpu-0123456789ab", 4096);
    QVERIFY(!bundle.isEmpty());
    {
      MainWindow w(false);
      RuntimePanel* p = w.runtime_panel();
      QVERIFY(p);
      RunConfig c = w.plan()->config();
      // The default: this machine's LibTorch, no bundle, no node torch.
      QCOMPARE(p->mode(), RuntimePanel::Mode::local_torch);
      auto req = w.launcher()->request(c);
      QCOMPARE(QString::fromStdString(req.bundle_path), QString());
      QCOMPARE(QString::fromStdString(req.node_torch), QString());

      // A bundle: the combo, then the file (as the file dialog sets it).
      p->findChild<QComboBox*>("RuntimeMode")->setCurrentIndex(1);
      p->set_bundle_file(bundle);
      QVERIFY2(p->error_text().isEmpty(), qPrintable(p->error_text()));
      QVERIFY2(p->status_text().contains("cpu bundle"), qPrintable(p->status_text()));
      req = w.launcher()->request(c);
      QCOMPARE(QString::fromStdString(req.bundle_path), bundle);
      QCOMPARE(QString::fromStdString(req.node_torch), QString());

      // The node's own torch: typed into its field.
      p->findChild<QComboBox*>("RuntimeMode")->setCurrentIndex(2);
      auto* torch = p->findChild<QLineEdit*>("RuntimeNodeTorch");
      torch->setText("/opt/venv/lib/python3.11/site-packages");
      Q_EMIT torch->editingFinished();
      QVERIFY2(p->error_text().isEmpty(), qPrintable(p->error_text()));
      req = w.launcher()->request(c);
      QCOMPARE(QString::fromStdString(req.bundle_path), QString());
      QCOMPARE(QString::fromStdString(req.node_torch), QStringLiteral("/opt/venv/lib/python3.11/site-packages"));

      // Back to the bundle, then closed: the choice is saved.
      p->set_mode(RuntimePanel::Mode::bundle);
      QCOMPARE(QString::fromStdString(w.launcher()->request(c).bundle_path), bundle);
      QVERIFY(w.close());
    }
    {
      MainWindow w(false);
      QCOMPARE(w.runtime_panel()->mode(), RuntimePanel::Mode::bundle);
      QCOMPARE(w.runtime_panel()->bundle_file(), bundle);
      QCOMPARE(w.runtime_panel()->node_torch_dir(), QStringLiteral("/opt/venv/lib/python3.11/site-packages"));
      auto req = w.launcher()->request(w.plan()->config());
      QCOMPARE(QString::fromStdString(req.bundle_path), bundle);
      QCOMPARE(QString::fromStdString(req.node_torch), QString());

      // $MESHWORK_BUNDLE wins over the choice (and the panel says so).
      const QString env = fake_bundle("meshtrain-cpu-env000000000", 100);
      qputenv("MESHWORK_BUNDLE", env.toLocal8Bit());
      QCOMPARE(QString::fromStdString(w.launcher()->request(w.plan()->config()).bundle_path), env);
      qunsetenv("MESHWORK_BUNDLE");
      QCOMPARE(QString::fromStdString(w.launcher()->request(w.plan()->config()).bundle_path), bundle);
      w.runtime_panel()->set_mode(RuntimePanel::Mode::local_torch);
      QCOMPARE(QString::fromStdString(w.launcher()->request(w.plan()->config()).bundle_path), QString());
    }
  }

  void fileThatIsNotABundleShowsTheErrorAndLaunchesNothing() {
    QSettings().clear();
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    test::set_local_cluster(w, 2);
    w.plan()->set_config(tiny_config(w));
    w.set_mode(Mode::plan);
    QTRY_VERIFY2(w.launch_action()->isEnabled(), qPrintable(w.launch_action()->toolTip()));

    // Any file named like a bundle, without the manifest scripts/bundle writes beside it.
    const QString junk = dir_.filePath("junk.tar.zst");
    {
      QFile f(junk);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write("not a bundle");
    }
    RuntimePanel* p = w.runtime_panel();
    p->set_mode(RuntimePanel::Mode::bundle);
    p->set_bundle_file(junk);
    // The error, in load_bundle's words, under the control.
    QVERIFY2(p->error_text().contains("Not a runtime bundle") && p->error_text().contains("manifest"),
             qPrintable(p->error_text()));
    auto* status = p->findChild<QLabel*>("RuntimeStatus");
    QCOMPARE(status->text(), p->error_text());
    QVERIFY(status->isVisibleTo(p));
    QVERIFY(!w.launch_action()->isEnabled());
    QVERIFY2(w.launch_action()->toolTip().contains("Not a runtime bundle"), qPrintable(w.launch_action()->toolTip()));

    QSignalSpy step(w.launcher(), &LaunchController::launch_step);
    QSignalSpy launched(w.launcher(), &LaunchController::launched);
    QSignalSpy failed(w.launcher(), &LaunchController::launch_failed);
    w.launch_action()->trigger();
    w.launch_from_plan();
    QTest::qWait(1500);
    QVERIFY(!w.launcher()->launching());
    QCOMPARE(step.count(), 0);
    QCOMPARE(launched.count(), 0);
    QCOMPARE(failed.count(), 0);

    // A manifest that names an archive of another size is refused too.
    const QString bad = fake_bundle("meshtrain-cpu-badsize00000", 10);
    QFile::resize(bad, 5);
    p->set_bundle_file(bad);
    QVERIFY2(p->error_text().contains("manifest's size"), qPrintable(p->error_text()));
    QVERIFY(!w.launch_action()->isEnabled());

    // A real bundle (as far as the manifest goes) makes Launch available again.
    p->set_bundle_file(fake_bundle("meshtrain-cpu-good00000000", 64));
    QVERIFY2(p->error_text().isEmpty(), qPrintable(p->error_text()));
    QTRY_VERIFY2(w.launch_action()->isEnabled(), qPrintable(w.launch_action()->toolTip()));
  }

  // The launcher's bundle progress (remote's rate and ETA) on the run's page, one line per node.
  void bundleProgressShowsBytesRateAndEtaPerNode() {
    QSettings().clear();
    MainWindow w(false);
    MonitorPage* m = w.runs_page()->monitor();
    m->begin_launch("bundle", 2);
    const double mib = 1024.0 * 1024.0;
    Q_EMIT w.launcher()->deploy_progress(DeployUpdate{0, "node1", "uploading", "", 45 * mib, 130 * mib, "", 20 * mib, 4.25});
    Q_EMIT w.launcher()->deploy_progress(DeployUpdate{1, "node2", "uploading", "", 13 * mib, 130 * mib, "", 10 * mib, 11.7});
    const QString a = m->deploy_text(0), b = m->deploy_text(1);
    QVERIFY2(a.contains("45.0 MiB / 130 MiB") && a.contains("20.0 MiB/s") && a.contains("ETA 4 s"), qPrintable(a));
    QVERIFY2(b.contains("13.0 MiB / 130 MiB") && b.contains("10.0 MiB/s") && b.contains("ETA 12 s"), qPrintable(b));
  }
};

QTEST_MAIN(RuntimeBundleTest)
#include "runtime_bundle_test.moc"
