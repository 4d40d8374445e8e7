// End to end over real SSH: the tests/cluster fixture's two network namespaces, each with its own
// sshd, are added on the Cluster page, their unknown host keys accepted as a user would, probed,
// and the plan launched from the Launch action: meshtrain is deployed over SFTP to both nodes (one
// CPU rank each, Gloo across the namespaces), followed into a temporary store and drawn live.
// Skips when the fixture is not up (it needs root; ctest sets it up: fixture cluster_up).
#include <QAction>
#include <QDir>
#include <QFile>
#include <QLabel>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QRegularExpression>
#include <map>
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
#include "ui/runtime_panel.h"

using namespace meshwork;
using namespace meshwork::ui;

class LaunchSshTest : public QObject {
  Q_OBJECT
  QTemporaryDir settings_;
  QTemporaryDir dir_;

  // A shown workbench that probes `a` and `b` of the namespace cluster (host keys accepted from
  // the card, into the known-hosts file `known_hosts`), one rank each.
  void add_two_nodes(MainWindow& w, const char* a, const char* b, const char* known_hosts) {
    w.resize(1400, 900);
    w.show();
    remote::SshOptions o;
    o.ssh_config = MESHWORK_TEST_CLUSTER_DIR "/ssh_config";
    o.identity = MESHWORK_TEST_CLUSTER_DIR "/id_ed25519";
    o.known_hosts = dir_.filePath(known_hosts).toStdString();
    w.prober()->set_ssh_options(o);
    w.cluster_panel()->set_ask_host_keys(false);
    w.cluster()->clear();
    w.cluster_panel()->add_hosts(QString("%1,%2").arg(a, b));
    for (const char* host : {a, b}) {
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
  }

  // The tiny model on dp_shard 2, fp32 on CPU, set in the Plan view.
  void set_tiny_run(MainWindow& w, const char* name, int steps, int warmup) {
    RunConfig c = w.plan()->config();
    c.name = name;
    c.model = "tiny";
    c.mesh = MeshShape{1, 2, 1, 1};
    c.training.steps = steps;
    c.training.seq_len = 64;
    c.training.global_batch = 4;
    c.training.micro_batch = 1;
    c.training.warmup_steps = warmup;
    c.training.precision = Precision::fp32;
    c.training.device = DeviceKind::cpu;
    w.plan()->set_config(c);
    w.set_mode(Mode::plan);
  }

 private Q_SLOTS:
  void initTestCase() {
    test::isolate_settings(settings_);
    if (test::cluster_nodes().size() < 2) QSKIP("no test cluster (run under ctest: fixture cluster_up)");
    qputenv("MESHWORK_DB", dir_.filePath("runs.db").toLocal8Bit());
    qputenv("MESHWORK_MESHTRAIN", QByteArray(MESHWORK_MESHTRAIN_BIN));
    // Run directories in this test's scratch, not the nodes' ~/.cache (the nodes share this filesystem).
    qputenv("MESHWORK_REMOTE_ROOT", dir_.filePath("node-runs").toLocal8Bit());
  }

  void launchOnTwoSshNodesFromTheGui() {
    MainWindow w(false);
    // The two namespace nodes only (not this machine): one rank each.
    add_two_nodes(w, "node0", "node1", "known_hosts");  // empty: every key is unknown
    if (QTest::currentTestFailed()) return;
    const int steps = 5;
    set_tiny_run(w, "gui-ssh-e2e", steps, 2);
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
    // The run directory went under MESHWORK_REMOTE_ROOT (the nodes share this filesystem).
    bool found = false;
    for (const QString& d : QDir(dir_.filePath("node-runs")).entryList(QDir::Dirs | QDir::NoDotAndDotDot))
      found |= QFile::exists(dir_.filePath("node-runs/" + d + "/run_config.json"));
    QVERIFY2(found, qPrintable(dir_.filePath("node-runs")));
  }
  // Issue 17: the runtime bundle chosen in the Cluster mode's Runtime section, launched on the
  // fixture's bare nodes (no torch there: only the bundle runs). The run's page shows each node's
  // bundle upload with its bytes, rate and ETA while it goes, and the run completes.
  void bundleLaunchOnBareNodesShowsPerNodeProgress() {
    const QString bundle = QStringLiteral(MESHWORK_BUNDLE_DIR "/meshtrain-cpu.tar.zst");
    if (!QFile::exists(bundle)) QFAIL("no CPU runtime bundle (build the bundle-cpu target)");
    qunsetenv("MESHWORK_BUNDLE");
    // Each bare node's own bundle directory emptied, so the bundle is uploaded (not skipped).
    for (const char* host : {"bare0", "bare1"}) {
      QProcess ssh;
      ssh.start("ssh", {"-F", MESHWORK_TEST_CLUSTER_DIR "/ssh_config", "-i", MESHWORK_TEST_CLUSTER_DIR "/id_ed25519",
                        "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
                        host, "cd .cache/meshwork/bundles 2>/dev/null && rm -rf -- ./*; echo cleared"});
      QVERIFY(ssh.waitForFinished(30000));
      QVERIFY2(ssh.readAllStandardOutput().contains("cleared"), qPrintable(ssh.readAllStandardError()));
    }
    MainWindow w(false);
    add_two_nodes(w, "bare0", "bare1", "known_hosts_bare");
    if (QTest::currentTestFailed()) return;
    // The Runtime section: a bundle, as the file dialog would set it.
    w.set_mode(Mode::cluster);
    w.runtime_panel()->set_mode(RuntimePanel::Mode::bundle);
    w.runtime_panel()->set_bundle_file(bundle);
    QVERIFY2(w.runtime_panel()->error_text().isEmpty(), qPrintable(w.runtime_panel()->error_text()));

    const int steps = 3;
    set_tiny_run(w, "gui-bundle-e2e", steps, 1);
    QTRY_VERIFY2(w.launch_action()->isEnabled(), qPrintable(w.launch_action()->toolTip()));

    // The page's line for a node while its bundle uploads (read after the page took the update).
    MonitorPage* m = w.runs_page()->monitor();
    std::map<int, QStringList> lines;
    connect(w.launcher(), &LaunchController::deploy_progress, this, [&](const DeployUpdate& u) {
      if (u.stage == "uploading" && u.file.endsWith(".tar.zst") && u.rate > 0) lines[u.node] << m->deploy_text(u.node);
    });
    QSignalSpy launched(w.launcher(), &LaunchController::launched);
    QSignalSpy failed(w.launcher(), &LaunchController::launch_failed);
    QSignalSpy finished(w.launcher(), &LaunchController::finished);
    w.launch_action()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(!launched.isEmpty() || !failed.isEmpty(), 240000);
    QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().at(0).toString() + "\n" +
                                                                   failed.first().at(1).toStringList().join("\n")));
    QCOMPARE(lines.size(), size_t{2});
    const QRegularExpression line(QStringLiteral(
        R"(^uploading meshtrain-cpu-[0-9a-f]{12}\.tar\.zst · [0-9.]+ [KMG]?i?B / [0-9.]+ MiB · [0-9.]+ [KMG]?i?B/s · ETA \d+ s$)"));
    for (const auto& [node, texts] : lines) {
      QVERIFY(!texts.isEmpty());
      for (const QString& t : texts) QVERIFY2(line.match(t).hasMatch(), qPrintable(t));
    }
    QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty(), 300000);
    QCOMPARE(finished.first().at(1).toString(), QStringLiteral("ok"));
    QTRY_COMPARE(m->loss_chart()->point_count(0), steps);
  }
};

QTEST_MAIN(LaunchSshTest)
#include "launch_ssh_test.moc"
