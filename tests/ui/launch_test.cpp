// End to end from the workbench's Launch action on the local cluster (no SSH): real meshtrain
// ranks (CPU, Gloo) deployed into a run directory, followed into a temporary store, drawn live.
// Asserts the run completes and every chart of its page holds one point per step.
#include <QAction>
#include <QFile>
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <memory>

#include "test_support.h"
#include "ui/bar_chart.h"
#include "ui/launch_controller.h"
#include "ui/metric_chart.h"
#include "ui/monitor_model.h"
#include "ui/monitor_page.h"
#include "ui/plan_state.h"
#include "ui/runs_model.h"
#include "ui/runs_page.h"
#include "core/store/run_store.h"

#include <signal.h>

using namespace meshwork;
using namespace meshwork::ui;

class LaunchTest : public QObject {
  Q_OBJECT
  QTemporaryDir settings_;
  QTemporaryDir dir_;

  RunConfig tiny_config(const MainWindow& w, int steps, MeshShape shape) {
    RunConfig c = w.plan()->config();
    c.name = "gui-e2e";
    c.model = "tiny";
    c.mesh = shape;
    c.training.steps = steps;
    c.training.seq_len = 64;
    c.training.global_batch = 4;
    c.training.micro_batch = 1;
    c.training.warmup_steps = 2;
    c.training.precision = Precision::fp32;
    c.training.device = DeviceKind::cpu;
    return c;
  }

 private Q_SLOTS:
  void initTestCase() {
    test::isolate_settings(settings_);
    qputenv("MESHWORK_DB", dir_.filePath("runs.db").toLocal8Bit());
    qputenv("MESHWORK_MESHTRAIN", QByteArray(MESHWORK_MESHTRAIN_BIN));
    // Run directories under the temporary directory, not the user's ~/.cache.
    qputenv("HOME", dir_.path().toLocal8Bit());
  }

  void launchFromGuiCompletesAndFillsCharts() {
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    test::set_local_cluster(w, 2);
    const int steps = 6;
    w.plan()->set_config(tiny_config(w, steps, MeshShape{1, 2, 1, 1}));
    w.set_mode(Mode::plan);
    QTRY_VERIFY2(w.launch_action()->isEnabled(), qPrintable(w.launch_action()->toolTip()));
    QSignalSpy launched(w.launcher(), &LaunchController::launched);
    QSignalSpy failed(w.launcher(), &LaunchController::launch_failed);
    QSignalSpy finished(w.launcher(), &LaunchController::finished);
    QSignalSpy deploy(w.launcher(), &LaunchController::deploy_progress);
    w.launch_action()->trigger();
    QCOMPARE(w.mode(), Mode::runs);
    QTRY_VERIFY_WITH_TIMEOUT(!launched.isEmpty() || !failed.isEmpty(), 120000);
    QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().at(0).toString()));
    QVERIFY(!deploy.isEmpty());  // per-node deploy progress reached the page
    const qint64 run = launched.first().at(0).toLongLong();
    MonitorPage* m = w.runs_page()->monitor();
    QCOMPARE(m->run(), run);
    QVERIFY(w.runs_page()->showing_run());
    QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty(), 240000);
    QCOMPARE(finished.first().at(1).toString(), QStringLiteral("ok"));
    QTRY_COMPARE_WITH_TIMEOUT(m->status_label()->text(), QStringLiteral("ok"), 10000);
    // Every chart is filled: one point per step.
    QTRY_COMPARE(m->loss_chart()->point_count(0), steps);
    QCOMPARE(m->loss_chart()->point_count(1), steps);  // smoothed
    QCOMPARE(m->lr_chart()->point_count(0), steps);
    QCOMPARE(m->grad_chart()->point_count(0), steps);
    QCOMPARE(m->throughput_chart()->point_count(0), steps);
    QCOMPARE(m->throughput_chart()->point_count(1), steps);
    QCOMPARE(m->memory_chart()->line_count(), 4);  // 2 ranks x (current, peak)
    for (int i = 0; i < 4; ++i) QCOMPARE(m->memory_chart()->point_count(i), steps);
    QCOMPARE(m->comm_chart()->point_count(0), steps);  // dp_shard layer
    QCOMPARE(m->breakdown_chart()->bar_count(), 4);
    QVERIFY(!m->stop_button()->isEnabled());
    // It is in the runs table with its final loss.
    RunsModel* runs = w.runs_page()->model();
    QTRY_VERIFY(runs->find(run) && runs->find(run)->final_loss.has_value());
    // The table reloads on its own poll: the last step can be in before the end record.
    QTRY_COMPARE_WITH_TIMEOUT(QString::fromStdString(runs->find(run)->status), QStringLiteral("ok"), 10000);
  }

  void stopButtonStopsALiveRun() {
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    test::set_local_cluster(w, 2);
    const int steps = 100000;  // far more than it can do before the click
    w.plan()->set_config(tiny_config(w, steps, MeshShape{2, 1, 1, 1}));
    w.set_mode(Mode::plan);
    QTRY_VERIFY(w.launch_action()->isEnabled());
    QSignalSpy launched(w.launcher(), &LaunchController::launched);
    QSignalSpy finished(w.launcher(), &LaunchController::finished);
    w.launch_action()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(!launched.isEmpty(), 120000);
    MonitorPage* m = w.runs_page()->monitor();
    // Wait for the first steps, then press Stop.
    QTRY_VERIFY_WITH_TIMEOUT(m->loss_chart()->point_count(0) >= 2, 120000);
    QTRY_VERIFY(m->stop_button()->isEnabled());
    QTest::mouseClick(m->stop_button(), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty(), 60000);
    QCOMPARE(finished.first().at(1).toString(), QStringLiteral("stopped"));
    QTRY_COMPARE_WITH_TIMEOUT(m->status_label()->text(), QStringLiteral("stopped"), 10000);
    const qint64 run = launched.first().at(0).toLongLong();
    RunsModel* runs = w.runs_page()->model();
    QTRY_VERIFY(runs->find(run) && runs->find(run)->status == "stopped");
    QVERIFY(runs->find(run)->steps >= 1 && runs->find(run)->steps < steps - 1);
    QVERIFY(!m->stop_button()->isEnabled());
  }

  void launchErrorIsShownOnThePage() {
    // A launch that cannot start (no trainer binary to deploy): remote's words, on the page.
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    test::set_local_cluster(w, 2);
    w.plan()->set_config(tiny_config(w, 4, MeshShape{1, 2, 1, 1}));
    w.set_mode(Mode::plan);
    QTRY_VERIFY(w.launch_action()->isEnabled());
    const QByteArray missing = dir_.filePath("no-such-meshtrain").toLocal8Bit();
    qputenv("MESHWORK_MESHTRAIN", missing);
    QSignalSpy failed(w.launcher(), &LaunchController::launch_failed);
    w.launch_action()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(!failed.isEmpty(), 60000);
    qputenv("MESHWORK_MESHTRAIN", QByteArray(MESHWORK_MESHTRAIN_BIN));
    MonitorPage* m = w.runs_page()->monitor();
    QVERIFY(m->failure_label()->isVisible());
    const QString text = m->failure_label()->text();
    QVERIFY2(text.contains("--meshtrain") && text.contains("no-such-meshtrain"), qPrintable(text));
    QCOMPARE(m->status_label()->text(), QStringLiteral("not started"));
    // Launch is offered again once the failed attempt is over.
    w.set_mode(Mode::plan);
    QTRY_VERIFY(w.launch_action()->isEnabled());
  }

  void killedRankShowsRootCause() {
    // A rank killed mid-run: the page names the node, the rank and how it died, prominently.
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    test::set_local_cluster(w, 2);
    w.plan()->set_config(tiny_config(w, 500, MeshShape{1, 2, 1, 1}));
    w.set_mode(Mode::plan);
    QTRY_VERIFY(w.launch_action()->isEnabled());
    QSignalSpy launched(w.launcher(), &LaunchController::launched);
    QSignalSpy finished(w.launcher(), &LaunchController::finished);
    w.launch_action()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(!launched.isEmpty(), 120000);
    const qint64 run = launched.first().at(0).toLongLong();
    MonitorPage* m = w.runs_page()->monitor();
    QTRY_VERIFY_WITH_TIMEOUT(m->loss_chart()->point_count(0) >= 2, 120000);
    // The run directory from the launch record the store kept; rank 1's pid from the trainer.
    auto st = store::RunStore::open(qgetenv("MESHWORK_DB").toStdString());
    QVERIFY(bool(st));
    auto info = (*st)->get_run(run);
    QVERIFY(bool(info));
    const QString run_dir = QString::fromStdString(info->cluster["launch"]["nodes"][0]["run_dir"].get<std::string>());
    QFile pid_file(run_dir + "/rank1.pid");
    QVERIFY2(pid_file.open(QIODevice::ReadOnly), qPrintable(pid_file.fileName()));
    const int pid = QString::fromUtf8(pid_file.readAll()).trimmed().toInt();
    QVERIFY(pid > 0);
    QCOMPARE(::kill(pid, SIGKILL), 0);
    QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty(), 60000);
    QCOMPARE(finished.first().at(1).toString(), QStringLiteral("failed"));
    QTRY_COMPARE_WITH_TIMEOUT(m->status_label()->text(), QStringLiteral("failed"), 10000);
    QVERIFY(m->failure_label()->isVisible());
    // The store may first hold rank 0's own end record (its peer vanished: a Gloo read error);
    // the follower's root cause replaces it when the run ends, and the page shows it on its next
    // refresh.
    auto names_root_cause = [m] {
      const QString t = m->failure_label()->text();
      return t.contains("rank 1") && t.contains("node 0") && t.contains("signal");
    };
    QTRY_VERIFY2_WITH_TIMEOUT(names_root_cause(), qPrintable(m->failure_label()->text()), 10000);
    QVERIFY(!m->stop_button()->isEnabled());
  }

  void reopenedWorkbenchReattaches() {
    // The run outlives the window: close it mid-run, open a new one, and it follows the run to
    // the end from the offsets the store kept (nothing lost, nothing twice). Long enough (~5 s
    // of `tiny` steps at ~17 ms) that it is still running when the second window attaches.
    const int steps = 300;
    qint64 run = 0;
    {
      auto w = std::make_unique<MainWindow>(false);
      w->show();
      test::set_local_cluster(*w, 2);
      w->plan()->set_config(tiny_config(*w, steps, MeshShape{1, 2, 1, 1}));
      w->set_mode(Mode::plan);
      QTRY_VERIFY(w->launch_action()->isEnabled());
      QSignalSpy launched(w->launcher(), &LaunchController::launched);
      w->launch_action()->trigger();
      QTRY_VERIFY_WITH_TIMEOUT(!launched.isEmpty(), 120000);
      run = launched.first().at(0).toLongLong();
      QTRY_VERIFY_WITH_TIMEOUT(w->runs_page()->monitor()->loss_chart()->point_count(0) >= 2, 120000);
      w->close();  // detaches: the ranks keep training
    }
    MainWindow w2(false);
    w2.resize(1400, 900);
    w2.show();
    QSignalSpy finished(w2.launcher(), &LaunchController::finished);
    w2.attach_running();
    QTRY_VERIFY(w2.launcher()->following(run));
    w2.runs_page()->open_run(run);
    QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty(), 240000);
    QCOMPARE(finished.first().at(0).toLongLong(), run);
    QCOMPARE(finished.first().at(1).toString(), QStringLiteral("ok"));
    MonitorPage* m = w2.runs_page()->monitor();
    QTRY_COMPARE_WITH_TIMEOUT(m->status_label()->text(), QStringLiteral("ok"), 10000);
    QTRY_COMPARE(m->loss_chart()->point_count(0), steps);
    QCOMPARE(m->memory_chart()->point_count(2), steps);  // rank 1's line too
  }
};

QTEST_MAIN(LaunchTest)
#include "launch_test.moc"
