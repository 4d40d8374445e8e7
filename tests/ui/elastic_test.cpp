// Elastic runs in the workbench: the Launch form's Elastic box reaches the launch (a real tiny run
// on this machine, followed by remote::follow_elastic), and the run page's resume panel for a
// failed run that lost a node, over a real store whose rows are written through core/store: the
// old shape beside the one the re-plan chose (remote::plan_resume, what `meshwork resume
// --dry-run` prints), "Resume at <shape>" enabled; and when nothing fits the survivors, the
// re-plan's words naming what would, with the button disabled.
#include <QAction>
#include <QCheckBox>
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>
#include <fstream>

#include "core/exit_record.h"
#include "core/run_config.h"
#include "core/store/run_store.h"
#include "remote/elastic.h"
#include "remote/launch.h"
#include "test_support.h"
#include "ui/format.h"
#include "ui/launch_controller.h"
#include "ui/mesh_editor.h"
#include "ui/monitor_model.h"
#include "ui/monitor_page.h"
#include "ui/plan_page.h"
#include "ui/plan_state.h"
#include "ui/resume_panel.h"
#include "ui/runs_page.h"

using namespace meshwork;
using namespace meshwork::ui;

namespace {

RunConfig tiny_config(RunConfig c, int steps, MeshShape shape) {
  c.name = "elastic-gui";
  c.model = "tiny";
  c.mesh = shape;
  c.training.steps = steps;
  c.training.seq_len = 64;
  c.training.global_batch = 4;
  c.training.micro_batch = 1;
  c.training.warmup_steps = 2;
  c.training.checkpoint_every = 2;
  c.training.precision = Precision::fp32;
  c.training.device = DeviceKind::cpu;
  return c;
}

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

}  // namespace

class ElasticTest : public QObject {
  Q_OBJECT
  QTemporaryDir settings_;
  QTemporaryDir dir_;
  QString db_;
  int db_n_ = 0;

  void fresh_db() {
    db_ = dir_.filePath(QStringLiteral("runs-%1.db").arg(++db_n_));
    qputenv("MESHWORK_DB", db_.toLocal8Bit());
  }

  // A failed run of 2 nodes x 2 ranks at dp_replicate 2 x dp_shard 2, as the launcher records it:
  // node 0 is this machine (its supervisor's exit record and two complete checkpoints in its run
  // directory), node 1 a host that refuses every connection (lost: unreachable). One rank's
  // memory is what the launch probed: a node's memory over its 2 ranks.
  qint64 failed_run_that_lost_a_node(int64_t node_memory_bytes, remote::LaunchRecord* record_out = nullptr) {
    const std::filesystem::path root = dir_.filePath(QStringLiteral("runs-of-%1").arg(db_n_)).toStdString();
    const std::filesystem::path run_dir = root / "run0";
    write_file(run_dir / exit_record_file(0), "{}\n");
    for (int step : {2, 4}) write_file(run_dir / "checkpoints" / ("step-" + std::to_string(step)) / "COMPLETE", "");
    remote::LaunchRecord rec;
    rec.nodes = {{"local", 2, run_dir.string(), "local"}, {"127.0.0.1:1", 2, run_dir.string(), "127.0.0.1"}};
    rec.master_addr = "127.0.0.1";
    rec.master_port = 29500;
    if (record_out) *record_out = rec;
    RunConfig c = tiny_config(RunConfig{}, 8, MeshShape{2, 2, 1, 1});
    c.nodes = {NodeConfig{"local", 2, {}}, NodeConfig{"127.0.0.1:1", 2, {}}};
    nlohmann::json probes = nlohmann::json::array();
    for (int i = 0; i < 2; ++i) probes.push_back({{"mem_total_bytes", node_memory_bytes}});
    auto store = store::RunStore::open(db_.toStdString());
    if (!store) return 0;
    auto id = (*store)->create_run(c.name, to_json(c), {{"launch", remote::to_json(rec)}, {"probes", probes}});
    if (!id) return 0;
    if (!(*store)->set_status(*id, store::kStatusFailed, "node 1 lost")) return 0;
    return *id;
  }

 private Q_SLOTS:
  void initTestCase() {
    test::isolate_settings(settings_);
    qputenv("MESHWORK_MESHTRAIN", QByteArray(MESHWORK_MESHTRAIN_BIN));
    qputenv("HOME", dir_.path().toLocal8Bit());  // run directories under the temporary directory
  }

  // The Elastic box and its re-plan budget reach the launch: the run is followed elastic, with
  // that budget, and (no node lost) ends ok.
  void elasticCheckboxReachesTheLaunch() {
    fresh_db();
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    test::set_local_cluster(w, 2);
    w.plan()->set_config(tiny_config(w.plan()->config(), 4, MeshShape{1, 2, 1, 1}));
    MeshEditor* editor = w.plan_page()->editor();
    QCOMPARE(static_cast<QSpinBox*>(editor->control("checkpoint_every"))->value(), 2);
    QVERIFY(!editor->max_replans_box()->isEnabled());  // only with Elastic
    editor->elastic_box()->click();
    QVERIFY(editor->max_replans_box()->isEnabled());
    editor->max_replans_box()->setValue(2);
    w.set_mode(Mode::plan);
    QTRY_VERIFY2(w.launch_action()->isEnabled(), qPrintable(w.launch_action()->toolTip()));
    QSignalSpy launched(w.launcher(), &LaunchController::launched);
    QSignalSpy failed(w.launcher(), &LaunchController::launch_failed);
    QSignalSpy finished(w.launcher(), &LaunchController::finished);
    // How the launcher follows the run, asked when it says the run started.
    ElasticChoice followed;
    connect(w.launcher(), &LaunchController::launched, this, [&](qint64 id) { followed = w.launcher()->elastic_of(id); });
    w.launch_action()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(!launched.isEmpty() || !failed.isEmpty(), 120000);
    QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().at(0).toString()));
    const qint64 run = launched.first().at(0).toLongLong();
    QCOMPARE(followed, (ElasticChoice{true, 2}));
    QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty(), 240000);
    QCOMPARE(finished.first().at(1).toString(), QStringLiteral("ok"));
    QCOMPARE(w.launcher()->elastic_of(run), ElasticChoice{});  // no longer followed
    QVERIFY(!w.runs_page()->monitor()->resume_panel()->isVisible());
  }

  void resumePanelShowsOldAndNewShapes() {
    fresh_db();
    remote::LaunchRecord rec;
    const qint64 id = failed_run_that_lost_a_node(int64_t{8} << 30, &rec);
    QVERIFY(id > 0);
    // What `meshwork resume RUN --hosts local --dry-run` prints for this run.
    auto expected = remote::plan_resume(remote::ResumeInput{db_.toStdString(), id, {"127.0.0.1:1"}, 0},
                                        remote::make_connector(rec, {}));
    QVERIFY2(expected.ok(), expected.ok() ? "" : expected.error().message().c_str());
    QCOMPARE(expected->checkpoint_step, int64_t{4});

    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    w.set_mode(Mode::runs);
    QSignalSpy offered(w.launcher(), &LaunchController::resume_offered);
    w.runs_page()->open_run(id);
    ResumePanel* panel = w.runs_page()->monitor()->resume_panel();
    QTRY_VERIFY_WITH_TIMEOUT(panel->isVisible(), 20000);
    QCOMPARE(offered.size(), 1);
    QVERIFY2(panel->lost_label()->text().contains(QStringLiteral("node 1 (127.0.0.1:1) lost: unreachable")),
             qPrintable(panel->lost_label()->text()));
    QVERIFY2(panel->old_shape_label()->text().contains(format_shape(MeshShape{2, 2, 1, 1})),
             qPrintable(panel->old_shape_label()->text()));
    QVERIFY(panel->old_shape_label()->text().contains(QStringLiteral("4 ranks")));
    const QString now = format_shape(expected->replan.new_shape);
    QVERIFY2(panel->new_shape_label()->text().contains(now), qPrintable(panel->new_shape_label()->text()));
    QCOMPARE(expected->replan.new_shape.world_size(), 2);
    QVERIFY(panel->new_shape_label()->text().contains(QStringLiteral("2 ranks")));
    QCOMPARE(panel->plan_text()->text(), QString::fromStdString(expected->text()));
    QVERIFY(panel->plan_text()->text().contains(QStringLiteral("from the checkpoint of step 4")));
    QCOMPARE(panel->resume_button()->text(), QStringLiteral("Resume at %1").arg(now));
    QVERIFY(panel->resume_button()->isEnabled());
    QVERIFY(!panel->message_label()->isVisible());
    if (const QString grabs = qEnvironmentVariable("MESHWORK_TEST_GRABS"); !grabs.isEmpty())  // PNGs to look at
      w.grab().save(grabs + "/resume-panel.png");
  }

  void resumeButtonIsDisabledWhenNothingFits() {
    fresh_db();
    const qint64 id = failed_run_that_lost_a_node(int64_t{2} << 20);  // 1 MiB per rank: nothing fits
    QVERIFY(id > 0);
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    w.set_mode(Mode::runs);
    w.runs_page()->open_run(id);
    ResumePanel* panel = w.runs_page()->monitor()->resume_panel();
    QTRY_VERIFY_WITH_TIMEOUT(panel->isVisible(), 20000);
    const QString message = panel->message_label()->text();
    QVERIFY2(message.contains(QStringLiteral("no valid shape fits")) && message.contains(QStringLiteral("needs")),
             qPrintable(message));
    QVERIFY(panel->message_label()->isVisible());
    QVERIFY(panel->new_shape_label()->text().contains(QStringLiteral("nothing fits")));
    QVERIFY(panel->old_shape_label()->text().contains(format_shape(MeshShape{2, 2, 1, 1})));
    QVERIFY(!panel->resume_button()->isEnabled());
    if (const QString grabs = qEnvironmentVariable("MESHWORK_TEST_GRABS"); !grabs.isEmpty())
      w.grab().save(grabs + "/resume-nothing-fits.png");
    // Clicking the disabled button launches nothing.
    QSignalSpy launched(w.launcher(), &LaunchController::launched);
    QTest::mouseClick(panel->resume_button(), Qt::LeftButton);
    QTest::qWait(200);
    QVERIFY(launched.isEmpty());
    QVERIFY(!w.launcher()->launching());
  }
};

QTEST_MAIN(ElasticTest)
#include "elastic_test.moc"
