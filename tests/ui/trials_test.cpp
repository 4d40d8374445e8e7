// Trials in the workbench: a stored trial group in the Plan mode's Trials tab, ranked by the
// tokens/s its runs measured with the planner's prediction and the measured peak memory beside
// it, and Apply making a row's shape the plan's; and, end to end, "Try the top K" in the planner
// launching the top two shapes for real (local meshtrain ranks) through the workbench's launcher.
#include <QComboBox>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

#include "core/metrics.h"
#include "core/mesh_json.h"
#include "core/store/run_frame.h"
#include "core/store/run_store.h"
#include "core/store/trials.h"
#include "test_support.h"
#include "ui/format.h"
#include "ui/launch_controller.h"
#include "ui/plan_page.h"
#include "ui/plan_state.h"
#include "ui/planner_panel.h"
#include "ui/trials_controller.h"
#include "ui/trials_model.h"
#include "ui/trials_panel.h"

using namespace meshwork;
using namespace meshwork::ui;

namespace {

// A finished 2-rank run of `shape` in the store: rank 0 reports `tokens_per_s` at each step, the
// ranks' peaks as given per step.
store::RunId stored_run(store::RunStore& s, const std::string& name, const MeshShape& shape, double tokens_per_s,
                        const std::vector<std::array<int64_t, 2>>& peaks, const std::string& status) {
  const nlohmann::json config = {{"mesh", to_json(shape)}, {"model", "tiny"}};
  auto id = s.create_run(name, config, nlohmann::json::object());
  for (int rank = 0; rank < 2; ++rank) {
    StartRecord start;
    start.rank = rank;
    start.world = 2;
    start.host = "local";
    start.time = 1000;
    start.config = config;
    std::string text = to_json_line(start) + "\n";
    for (size_t step = 0; step < peaks.size(); ++step) {
      StepRecord r;
      r.rank = rank;
      r.step = static_cast<int64_t>(step);
      r.time = 1001.0 + static_cast<double>(step);
      r.loss = 5;
      r.tokens = 64;
      r.tokens_per_s = tokens_per_s;
      r.step_s = 0.1;
      r.mem_bytes = 1 << 20;
      r.mem_peak_bytes = peaks[step][static_cast<size_t>(rank)];
      text += to_json_line(r) + "\n";
    }
    EndRecord end;
    end.rank = rank;
    end.status = status;
    end.reason = status == "ok" ? "" : "exit 137";
    end.time = 1100;
    text += to_json_line(end) + "\n";
    (void)s.ingest_chunk(*id, "metrics-rank" + std::to_string(rank) + ".jsonl", 0, text);
  }
  return *id;
}

QString cell(TrialsModel* m, int row, int col) { return m->data(m->index(row, col), Qt::DisplayRole).toString(); }

}  // namespace

class TrialsTest : public QObject {
  Q_OBJECT
  QTemporaryDir settings_;
  QTemporaryDir dir_;

 private Q_SLOTS:
  void initTestCase() {
    test::isolate_settings(settings_);
    qputenv("MESHWORK_DB", dir_.filePath("runs.db").toLocal8Bit());
    qputenv("HOME", dir_.path().toLocal8Bit());  // run directories under the temporary directory
#ifdef MESHWORK_MESHTRAIN_BIN
    qputenv("MESHWORK_MESHTRAIN", QByteArray(MESHWORK_MESHTRAIN_BIN));
#endif
  }

  void storedGroupIsRankedByMeasuredTokensPerSecondAndApplySetsTheMesh() {
    const std::string db = dir_.filePath("stored.db").toStdString();
    qputenv("MESHWORK_DB", QByteArray::fromStdString(db));
    const std::vector<store::TrialPrediction> predicted = {
        {MeshShape{2, 1, 1, 1}, 9000, 0.01, 3 << 20},
        {MeshShape{1, 2, 1, 1}, 8000, 0.02, 2 << 20},
        {MeshShape{1, 1, 1, 2}, 7000, 0.03, 1 << 20},
    };
    store::TrialId trial = 0;
    store::RunId fastest = 0;
    {
      auto s = store::RunStore::open(db);
      QVERIFY(s.ok());
      auto id = store::create_trial(**s, {{"planned_by", "test"}, {"steps", 2}});
      QVERIFY(id.ok());
      trial = *id;
      for (size_t i = 0; i < predicted.size(); ++i)
        QVERIFY(store::add_trial_entry(**s, trial, static_cast<int>(i) + 1, predicted[i]));
      // Measured, the other way round: #3 fastest (x1 replica), #2 next (x2), #1 slowest (x2).
      const store::RunId r1 = stored_run(**s, "t #1", predicted[0].shape, 1000, {{{4 << 20, 5 << 20}}, {{1, 1}}}, "ok");
      const store::RunId r2 = stored_run(**s, "t #2", predicted[1].shape, 2000, {{{3 << 20, 1 << 20}}}, "ok");
      fastest = stored_run(**s, "t #3", predicted[2].shape, 6000, {{{1 << 20, 1 << 20}}}, "ok");
      QVERIFY(store::set_trial_run(**s, trial, 1, r1));
      QVERIFY(store::set_trial_run(**s, trial, 2, r2));
      QVERIFY(store::set_trial_run(**s, trial, 3, fastest));
    }

    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    test::set_local_cluster(w, 2);
    w.set_mode(Mode::plan);
    PlanPage* page = w.plan_page();
    page->show_trials();
    QCOMPARE(page->lower_tabs()->currentWidget(), page->trials());
    TrialsPanel* panel = page->trials();
    TrialsModel* m = panel->model();
    QTRY_COMPARE(m->rowCount(), 3);
    QCOMPARE(panel->shown_trial(), trial);
    QCOMPARE(panel->groups()->count(), 1);
    // Ranked by measured tokens/s: 6000 (#3), 4000 (#2), 2000 (#1); the planner's rank beside it.
    QCOMPARE(cell(m, 0, TrialsModel::Position), QStringLiteral("#3"));
    QCOMPARE(cell(m, 1, TrialsModel::Position), QStringLiteral("#2"));
    QCOMPARE(cell(m, 2, TrialsModel::Position), QStringLiteral("#1"));
    QCOMPARE(cell(m, 0, TrialsModel::Rank), QStringLiteral("1"));
    QCOMPARE(cell(m, 0, TrialsModel::Measured), format_tokens_per_s(6000));
    QCOMPARE(cell(m, 1, TrialsModel::Measured), format_tokens_per_s(4000));
    QCOMPARE(cell(m, 2, TrialsModel::Measured), format_tokens_per_s(2000));
    QCOMPARE(cell(m, 0, TrialsModel::Predicted), format_tokens_per_s(7000));
    QCOMPARE(cell(m, 2, TrialsModel::Predicted), format_tokens_per_s(9000));
    QCOMPARE(cell(m, 2, TrialsModel::Error), QStringLiteral("-77.8 %"));  // 2000 vs 9000
    // Memory: the highest peak of any rank at any step, beside the estimate.
    QCOMPARE(cell(m, 2, TrialsModel::PeakMemory), format_bytes(5 << 20));
    QCOMPARE(cell(m, 2, TrialsModel::EstimatedMemory), format_bytes(3 << 20));
    QCOMPARE(cell(m, 0, TrialsModel::Run), QString::number(fastest));
    QVERIFY(cell(m, 0, TrialsModel::Shape).contains(QStringLiteral("winner")));
    QCOMPARE(cell(m, 0, TrialsModel::Status), QStringLiteral("ok"));
    QVERIFY(panel->apply_button()->isEnabled());

    // Apply on the second row: the plan's mesh becomes its shape, as a planner row click does.
    QCOMPARE(w.plan()->config().mesh, (MeshShape{1, -1, 1, 1}));
    panel->table()->selectRow(1);
    QTest::mouseClick(panel->apply_button(), Qt::LeftButton);
    QCOMPARE(w.plan()->config().mesh, predicted[1].shape);
    QTRY_VERIFY(w.plan()->mesh().has_value());
    QCOMPARE(w.plan()->mesh()->shape(), predicted[1].shape);
    // Double-clicking the winner applies it too.
    const QRect r = panel->table()->visualRect(m->index(0, TrialsModel::Shape));
    QVERIFY(!r.isEmpty());
    QTest::mouseClick(panel->table()->viewport(), Qt::LeftButton, {}, r.center());  // the press a double-click follows
    QTest::mouseDClick(panel->table()->viewport(), Qt::LeftButton, {}, r.center());
    QCOMPARE(w.plan()->config().mesh, predicted[2].shape);
    qputenv("MESHWORK_DB", dir_.filePath("runs.db").toLocal8Bit());
  }

  void tryTopTwoFromThePlannerRunsThemForRealAndRanksThem() {
#ifndef MESHWORK_MESHTRAIN_BIN
    QSKIP("meshtrain is not part of this build");
#else
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    test::set_local_cluster(w, 2);
    RunConfig c = w.plan()->config();
    c.model = "tiny";
    c.training.seq_len = 64;
    c.training.global_batch = 2;
    c.training.micro_batch = 1;
    c.training.warmup_steps = 1;
    c.training.precision = Precision::fp32;
    c.training.device = DeviceKind::cpu;
    w.plan()->set_config(c);
    w.set_mode(Mode::plan);
    PlannerPanel* planner = w.plan_page()->planner();
    QTRY_VERIFY_WITH_TIMEOUT(planner->try_button()->isEnabled(), 20000);
    const std::vector<PlanRow> rows = w.plan()->plan();
    std::vector<PlanRow> best;
    for (const PlanRow& r : rows)
      if (r.entry.fits && best.size() < 2) best.push_back(r);
    QCOMPARE(best.size(), size_t{2});

    planner->trial_count()->setValue(2);
    planner->trial_steps()->setValue(2);
    QCOMPARE(planner->try_button()->text(), QStringLiteral("Try the top 2"));
    TrialsPanel* panel = w.plan_page()->trials();
    TrialsController* trials = panel->controller();
    QSignalSpy launched(w.launcher(), &LaunchController::launched);
    QSignalSpy finished(trials, &TrialsController::finished);
    QTest::mouseClick(planner->try_button(), Qt::LeftButton);
    QCOMPARE(w.plan_page()->lower_tabs()->currentWidget(), panel);
    QVERIFY(trials->running());
    QVERIFY(!planner->try_button()->isEnabled());  // one group at a time
    // Through the workbench's own launcher: each trial is a launch like the Launch action's.
    QCOMPARE(trials->launcher(), w.launcher());
    QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty(), 300000);
    QCOMPARE(launched.count(), 2);
    QVERIFY(!trials->running());
    QTRY_VERIFY(planner->try_button()->isEnabled());

    // The table: both shapes measured, ranked by measured tokens/s, the planner's rows beside them.
    TrialsModel* m = panel->model();
    QTRY_VERIFY_WITH_TIMEOUT(m->rowCount() == 2 && m->result_at(0).measured() && m->result_at(1).measured() &&
                                 m->result_at(0).status == "ok" && m->result_at(1).status == "ok",
                             20000);
    QCOMPARE(panel->shown_trial(), trials->trial());
    QVERIFY(*m->result_at(0).tokens_per_s >= *m->result_at(1).tokens_per_s);
    for (int row = 0; row < 2; ++row) {
      const store::TrialResult& r = m->result_at(row);
      const PlanRow& planned = best.at(static_cast<size_t>(r.position - 1));
      QCOMPARE(r.predicted.shape, planned.entry.shape);
      QCOMPARE(r.predicted.tokens_per_s, planned.entry.time.tokens_per_s);
      QCOMPARE(r.predicted.step_s, planned.entry.time.step_s);
      QCOMPARE(r.predicted.peak_bytes, planned.entry.memory.total());
      QVERIFY(r.peak_bytes && *r.peak_bytes > 0);
      QVERIFY(r.run.has_value());
    }
    // In the store: the group's runs are the ones launched, with the trials' names and steps.
    auto s = store::RunStore::open(qgetenv("MESHWORK_DB").toStdString());
    QVERIFY(s.ok());
    auto t = store::load_trial(**s, trials->trial());
    QVERIFY(t.ok());
    QCOMPARE(t->results.size(), size_t{2});
    for (const store::TrialResult& r : t->results) {
      auto info = (*s)->get_run(*r.run);
      QVERIFY(info.ok());
      QCOMPARE(QString::fromStdString(info->summary.name),
               QStringLiteral("trial %1 #%2 %3").arg(t->id).arg(r.position).arg(QString::fromStdString(r.predicted.shape.compact())));
      QCOMPARE(info->config["training"]["steps"].get<int>(), 2);
      QCOMPARE(r.tokens_per_s, store::run_tokens_per_s(info->summary));
    }
    // Apply the winner.
    panel->table()->selectRow(0);
    QTest::mouseClick(panel->apply_button(), Qt::LeftButton);
    QCOMPARE(w.plan()->config().mesh, m->result_at(0).predicted.shape);
#endif
  }
};

QTEST_MAIN(TrialsTest)
#include "trials_test.moc"
