// End to end over real SSH: the tests/cluster fixture's two network namespaces, each with its own
// sshd, are added on the Cluster page, their unknown host keys accepted as a user would, probed,
// and the plan launched from the Launch action: meshtrain is deployed over SFTP to both nodes (one
// CPU rank each, Gloo across the namespaces), followed into a temporary store and drawn live.
// Skips when the fixture is not up (it needs root; ctest sets it up: fixture cluster_up).
#include <QAction>
#include <QFile>
#include <QLabel>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <set>

#include "test_support.h"
#include "ui/cluster_panel.h"
#include "ui/launch_controller.h"
#include "ui/metric_chart.h"
#include "ui/monitor_model.h"
#include "ui/monitor_page.h"
#include "ui/node_prober.h"
#include "ui/plan_state.h"
#include "ui/runs_model.h"
#include "ui/runs_page.h"

using namespace meshwork;
using namespace meshwork::ui;

class LaunchSshTest : public QObject {
  Q_OBJECT
  QTemporaryDir settings_;
  QTemporaryDir dir_;

 private Q_SLOTS:
  void initTestCase() {
    test::isolate_settings(settings_);
    if (test::cluster_nodes().size() < 2) QSKIP("no test cluster (run under ctest: fixture cluster_up)");
    qputenv("MESHWORK_DB", dir_.filePath("runs.db").toLocal8Bit());
    qputenv("MESHWORK_MESHTRAIN", QByteArray(MESHWORK_MESHTRAIN_BIN));
  }

  void launchOnTwoSshNodesFromTheGui() {
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    remote::SshOptions o;
    o.ssh_config = MESHWORK_TEST_CLUSTER_DIR "/ssh_config";
    o.identity = MESHWORK_TEST_CLUSTER_DIR "/id_ed25519";
    o.known_hosts = dir_.filePath("known_hosts").toStdString();  // empty: every key is unknown
    w.prober()->set_ssh_options(o);
    w.cluster_panel()->set_ask_host_keys(false);
    // The two namespace nodes only (not this machine): one rank each.
    w.cluster()->clear();
    w.cluster_panel()->add_hosts("node0,node1");
    for (const char* host : {"node0", "node1"}) {
      const int row = w.cluster()->find(host);
      QVERIFY(row >= 0);
      QTRY_COMPARE_WITH_TIMEOUT(w.cluster()->node(row).state, NodeInfo::State::awaiting_key, 30000);
      w.cluster_panel()->accept_host_key(host);
      QTRY_COMPARE_WITH_TIMEOUT(w.cluster()->node(row).state, NodeInfo::State::online, 30000);
      NodeInfo n = w.cluster()->node(row);
      n.slots = 1;
      w.cluster()->update_node(row, n);
    }
    QCOMPARE(w.cluster()->rowCount(), 2);

    RunConfig c = w.plan()->config();
    c.name = "gui-ssh-e2e";
    c.model = "tiny";
    c.mesh = MeshShape{1, 2, 1, 1};
    const int steps = 5;
    c.training.steps = steps;
    c.training.seq_len = 64;
    c.training.global_batch = 4;
    c.training.micro_batch = 1;
    c.training.warmup_steps = 2;
    c.training.precision = Precision::fp32;
    c.training.device = DeviceKind::cpu;
    w.plan()->set_config(c);
    w.set_mode(Mode::plan);
    QTRY_VERIFY2(w.launch_action()->isEnabled(), qPrintable(w.launch_action()->toolTip()));

    QSignalSpy launched(w.launcher(), &LaunchController::launched);
    QSignalSpy failed(w.launcher(), &LaunchController::launch_failed);
    QSignalSpy finished(w.launcher(), &LaunchController::finished);
    QSignalSpy deploy(w.launcher(), &LaunchController::deploy_progress);
    w.launch_action()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(!launched.isEmpty() || !failed.isEmpty(), 180000);
    QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().at(0).toString() + "\n" +
                                                                   failed.first().at(1).toStringList().join("\n")));
    // Deploy progress came from both nodes and ended for each: uploaded (the trainer binary with
    // its megabytes, the run config with its few hundred bytes) or skipped (deploy is
    // content-addressed: an earlier run left the same file there). Which files upload depends on
    // what earlier tests left, so each file is checked against its own size, not one threshold.
    std::set<int> nodes, ended;
    for (const auto& args : deploy) {
      const auto u = args.at(0).value<DeployUpdate>();
      nodes.insert(u.node);
      if (u.stage == "done" || u.stage == "skipped") ended.insert(u.node);
      if (u.stage != "uploading") continue;
      if (u.file == QStringLiteral("meshtrain")) QVERIFY2(u.bytes_total > 1e5, qPrintable(u.file));
      else QVERIFY2(u.file == QStringLiteral("run_config.json") && u.bytes_total > 100, qPrintable(u.file));
    }
    QCOMPARE(nodes, (std::set<int>{0, 1}));
    QCOMPARE(ended, (std::set<int>{0, 1}));
    const qint64 run = launched.first().at(0).toLongLong();
    MonitorPage* m = w.runs_page()->monitor();
    QCOMPARE(m->run(), run);
    QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty(), 300000);
    QCOMPARE(finished.first().at(1).toString(), QStringLiteral("ok"));
    QTRY_COMPARE_WITH_TIMEOUT(m->status_label()->text(), QStringLiteral("ok"), 10000);
    QTRY_COMPARE(m->loss_chart()->point_count(0), steps);
    QCOMPARE(m->memory_chart()->line_count(), 4);  // 2 ranks x (current, peak)
    for (int i = 0; i < 4; ++i) QCOMPARE(m->memory_chart()->point_count(i), steps);
    QCOMPARE(m->comm_chart()->point_count(0), steps);  // dp_shard layer
    RunsModel* runs = w.runs_page()->model();
    QTRY_VERIFY(runs->find(run) && runs->find(run)->final_loss.has_value());
    QCOMPARE(runs->find(run)->world, 2);
  }
};

QTEST_MAIN(LaunchSshTest)
#include "launch_ssh_test.moc"
