// The workbench on a real Slurm (tests/cluster/slurm.sh on the namespace cluster): add the Slurm
// cluster by its login node (node0, over SSH), see its partitions, plan for the partition's nodes,
// launch (sbatch), watch the metrics arrive, read the job's sbatch script from the run's page,
// stop (scancel). A bad partition or a denied account shows sbatch's refusal in the run page's
// banner and records nothing. With MESHWORK_SCREENSHOT_DIR set, the Cluster page is saved as
// slurm-cluster.png there (docs/screenshots/ in the README).
#include <QAction>
#include <QCheckBox>
#include <QComboBox>
#include <QDialog>
#include <QFile>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QDir>
#include <QLabel>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>

#include "core/store/run_store.h"
#include "remote/launch.h"
#include "test_support.h"
#include "ui/cluster_model.h"
#include "ui/cluster_panel.h"
#include "ui/launch_controller.h"
#include "ui/mesh_editor.h"
#include "ui/metric_chart.h"
#include "ui/plan_page.h"
#include "ui/monitor_page.h"
#include "ui/node_prober.h"
#include "ui/plan_state.h"
#include "ui/runs_page.h"
#include "ui/slurm_panel.h"

using namespace meshwork;
using namespace meshwork::ui;

class LaunchSlurmTest : public QObject {
  Q_OBJECT
  QTemporaryDir settings_;
  QTemporaryDir dir_;

  void setup(MainWindow& w) {
    remote::SshOptions o;
    o.ssh_config = MESHWORK_TEST_CLUSTER_DIR "/ssh_config";
    o.identity = MESHWORK_TEST_CLUSTER_DIR "/id_ed25519";
    o.known_hosts = dir_.filePath("known_hosts").toStdString();
    w.prober()->set_ssh_options(o);
    w.cluster_panel()->set_ask_host_keys(false);
    // The login node's host key is reviewed on its card, as for any node.
    w.cluster()->clear();
    w.cluster_panel()->add_hosts("node0");
    const int row = w.cluster()->find("node0");
    QTRY_COMPARE_WITH_TIMEOUT(w.cluster()->node(row).state, NodeInfo::State::awaiting_key, 30000);
    w.cluster_panel()->accept_host_key("node0");
    QTRY_COMPARE_WITH_TIMEOUT(w.cluster()->node(row).state, NodeInfo::State::online, 30000);
    // Add the Slurm cluster by its login node and read its partitions.
    w.set_mode(Mode::cluster);
    w.slurm_panel()->set_login("node0");
    w.slurm_panel()->request_probe();
    QTableWidget* t = w.slurm_panel()->partitions_table();
    QTRY_VERIFY2_WITH_TIMEOUT(t->rowCount() == 3, qPrintable(w.slurm_panel()->error_text()), 30000);
    QCOMPARE(t->item(0, 0)->text(), QStringLiteral("debug *"));
    QCOMPARE(t->item(0, 1)->text(), QStringLiteral("2"));
    QCOMPARE(t->item(0, 3)->text(), QStringLiteral("none"));  // CPU nodes
    QCOMPARE(t->item(1, 0)->text(), QStringLiteral("tiny"));
    QCOMPARE(t->item(2, 0)->text(), QStringLiteral("bare"));
  }

  void plan(MainWindow& w, const QString& name, int steps) {
    RunConfig c = w.plan()->config();
    c.name = name.toStdString();
    c.model = "tiny";
    c.mesh = MeshShape{1, 2, 1, 2};  // dp_shard 2 x tp 2
    c.training.steps = steps;
    c.training.seq_len = 64;
    c.training.global_batch = 4;
    c.training.micro_batch = 1;
    c.training.warmup_steps = 2;
    c.training.precision = Precision::fp32;
    c.training.device = DeviceKind::cpu;
    w.plan()->set_config(c);
    // The plan is made for the partition's nodes: 2 nodes x 2 ranks.
    w.slurm_panel()->set_nodes(2);
    w.slurm_panel()->set_ranks_per_node(2);
    w.slurm_panel()->set_enabled_for_launch(true);
    QCOMPARE(w.cluster()->rowCount(), 2);
    QCOMPARE(w.cluster()->summary().world_size, 4);
    w.set_mode(Mode::plan);
    QTRY_VERIFY2(w.launch_action()->isEnabled(), qPrintable(w.launch_action()->toolTip()));
  }

  std::unique_ptr<store::RunStore> open_store() {
    auto s = store::RunStore::open(dir_.filePath("runs.db").toStdString());
    if (!s) qFatal("store: %s", s.error().message().c_str());
    return std::move(*s);
  }

  // Launch, expect sbatch's refusal: its words in the run page's banner and in launch_failed,
  // and no run in the store (so none shows as running).
  void expect_refused(MainWindow& w, const QString& run_name, const QStringList& words) {
    QSignalSpy launched(w.launcher(), &LaunchController::launched);
    QSignalSpy failed(w.launcher(), &LaunchController::launch_failed);
    w.launch_action()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(!launched.isEmpty() || !failed.isEmpty(), 180000);
    QVERIFY(launched.isEmpty());
    const QString message = failed.first().at(0).toString();
    QLabel* banner = w.runs_page()->monitor()->failure_label();
    QVERIFY(!banner->isHidden());
    for (const QString& word : words) {
      QVERIFY2(message.contains(word), qPrintable(message));
      QVERIFY2(banner->text().contains(word.toHtmlEscaped()), qPrintable(banner->text()));
    }
    QCOMPARE(w.runs_page()->monitor()->status_label()->text(), QStringLiteral("not started"));
    auto s = open_store();
    auto runs = s->list_runs();
    QVERIFY(runs.ok());
    for (const auto& r : *runs) {
      QVERIFY2(r.name != run_name.toStdString(), "a refused launch was recorded");
      QVERIFY2(r.status != store::kStatusRunning, r.name.c_str());
    }
  }

 private Q_SLOTS:
  void initTestCase() {
    test::isolate_settings(settings_);
    if (test::cluster_nodes().size() < 2) QSKIP("no test cluster (run under ctest: fixture cluster_up)");
    if (!QFile::exists(MESHWORK_TEST_CLUSTER_DIR "/slurm/slurm.conf")) QSKIP("no test Slurm (fixture slurm_up)");
    qputenv("MESHWORK_DB", dir_.filePath("runs.db").toLocal8Bit());
    qputenv("MESHWORK_MESHTRAIN", QByteArray(MESHWORK_MESHTRAIN_BIN));
    // Run directories in this test's scratch, not the nodes' ~/.cache (the nodes share this filesystem).
    qputenv("MESHWORK_REMOTE_ROOT", dir_.filePath("node-runs").toLocal8Bit());
  }

  void addSlurmClusterLaunchWatchStop() {
    MainWindow w(false);
    w.resize(1400, 1000);
    w.show();
    setup(w);
    plan(w, "gui-slurm", 1000000);
    if (const QByteArray shots = qgetenv("MESHWORK_SCREENSHOT_DIR"); !shots.isEmpty()) {
      w.set_mode(Mode::cluster);
      QDir().mkpath(QString::fromLocal8Bit(shots));
      QVERIFY(w.grab().save(QDir(QString::fromLocal8Bit(shots)).filePath("slurm-cluster.png")));
      w.set_mode(Mode::plan);
    }
    // Elastic, as `launch --slurm --elastic`: the job is followed by follow_elastic_slurm (a lost
    // job node resubmitted without it: tests/remote/slurm_elastic_test.cpp loses one).
    MeshEditor* editor = w.plan_page()->editor();
    editor->elastic_box()->click();
    editor->max_replans_box()->setValue(2);
    QSignalSpy launched(w.launcher(), &LaunchController::launched);
    QSignalSpy failed(w.launcher(), &LaunchController::launch_failed);
    QSignalSpy finished(w.launcher(), &LaunchController::finished);
    QSignalSpy events(w.launcher(), &LaunchController::follow_event);
    ElasticChoice followed;
    connect(w.launcher(), &LaunchController::launched, this, [&](qint64 id) { followed = w.launcher()->elastic_of(id); });
    w.launch_action()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(!launched.isEmpty() || !failed.isEmpty(), 180000);
    QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().at(0).toString()));
    const qint64 run = launched.first().at(0).toLongLong();
    QCOMPARE(followed, (ElasticChoice{true, 2}));
    MonitorPage* m = w.runs_page()->monitor();
    QCOMPARE(m->run(), run);
    // Watch: the job runs and points arrive.
    QTRY_VERIFY_WITH_TIMEOUT(m->loss_chart()->point_count(0) >= 2, 180000);
    bool saw_slurm = false;
    for (const auto& e : events) saw_slurm = saw_slurm || e.at(2).toString().contains("Slurm job");
    QVERIFY(saw_slurm);
    // The job's sbatch script, from the run's page: a read-only viewer with exactly the script
    // the store keeps and the job ran (job.sbatch in the shared run directory).
    QTRY_VERIFY(!m->script_button()->isHidden());
    m->script_button()->click();
    auto* viewer = m->findChild<QDialog*>("SbatchScriptViewer");
    QVERIFY(viewer);
    auto* text = viewer->findChild<QPlainTextEdit*>("SbatchScriptText");
    QVERIFY(text);
    QVERIFY(text->isReadOnly());
    {
      auto s = open_store();
      auto info = s->get_run(run);
      QVERIFY(info.ok());
      const std::string script = info->cluster["slurm"]["script"].get<std::string>();
      QVERIFY(script.find("#SBATCH --partition=debug") != std::string::npos);
      QCOMPARE(text->toPlainText(), QString::fromStdString(script));
      auto rec = remote::launch_record_from_json(info->cluster["launch"]);
      QVERIFY(rec.ok());
      // The run directory is under MESHWORK_REMOTE_ROOT, as --remote-root puts it for the CLI.
      QVERIFY2(QString::fromStdString(rec->nodes[0].run_dir).startsWith(dir_.filePath("node-runs") + "/"),
               rec->nodes[0].run_dir.c_str());
      QFile file(QString::fromStdString(rec->nodes[0].run_dir + "/job.sbatch"));
      QVERIFY(file.open(QIODevice::ReadOnly));
      QCOMPARE(QString::fromUtf8(file.readAll()), text->toPlainText());
    }
    viewer->close();
    // Stop: scancel; the run is marked stopped.
    QTRY_VERIFY(w.stop_action()->isEnabled());
    w.stop_action()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty(), 60000);
    QCOMPARE(finished.first().at(1).toString(), QStringLiteral("stopped"));
    QTRY_COMPARE_WITH_TIMEOUT(m->status_label()->text(), QStringLiteral("stopped"), 10000);
  }

  void badPartitionShowsSbatchsRefusal() {
    MainWindow w(false);
    w.resize(1400, 1000);
    w.show();
    setup(w);
    plan(w, "gui-slurm-refused", 4);
    // A partition this cluster does not have (typed as a user might, after a reconfiguration).
    SlurmPanel* p = w.slurm_panel();
    auto* combo = p->findChild<QComboBox*>();
    QVERIFY(combo);
    combo->setEditable(true);
    combo->setEditText("nope");
    expect_refused(w, "gui-slurm-refused",
                   {"invalid partition specified: nope", "sbatch: refused the job (partition nope)",
                    "[partitions on this cluster: debug, tiny, bare]"});
  }

  // tests/cluster/slurm.sh: partition debug denies account "bogus" at submission.
  void badAccountShowsSbatchsRefusal() {
    MainWindow w(false);
    w.resize(1400, 1000);
    w.show();
    setup(w);
    plan(w, "gui-slurm-bad-account", 4);
    w.slurm_panel()->set_account("bogus");
    expect_refused(w, "gui-slurm-bad-account",
                   {"sbatch: refused the job (partition debug, account bogus)",
                    "Batch job submission failed: Requested partition configuration not available now"});
  }
};

QTEST_MAIN(LaunchSlurmTest)
#include "launch_slurm_test.moc"
