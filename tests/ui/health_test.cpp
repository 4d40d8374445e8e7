// The Health view with real widgets on the offscreen platform over a real run store: a hang is
// named in the Monitor's banner and drawn on the mesh (the culprit outlined, the waiting ranks
// amber), a straggler is the brightest row of the rank x step heat map, and at 1,024 x 8 every
// rank gets its state.
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <ctime>

#include "core/metrics.h"
#include "core/store/rank_states.h"
#include "core/store/run_store.h"
#include "test_support.h"
#include "ui/health_panel.h"
#include "ui/mesh_view.h"
#include "ui/monitor_page.h"
#include "ui/store_worker.h"
#include "ui/theme.h"

using namespace meshwork;
using namespace meshwork::ui;

namespace {

double now_s() { return static_cast<double>(std::time(nullptr)); }

// A run of `world` ranks (`per_node` a node) with `steps` steps ending `ago` seconds before now;
// rank `slow` computes three times as long and the others wait for it on dp_shard.
store::RunId generate(const QString& db, const MeshShape& shape, int per_node, int steps, double ago, int slow) {
  auto opened = store::RunStore::open(db.toStdString());
  if (!opened) return 0;
  auto& s = *opened;
  nlohmann::json mesh;
  for (Axis a : kAxes) mesh[std::string(axis_name(a))] = shape[a];
  const nlohmann::json config = {{"v", 1}, {"name", "health"}, {"model", "tiny"}, {"mesh", mesh}};
  auto run = s->create_run("health", config, {});
  if (!run) return 0;
  const int world = static_cast<int>(shape.world_size());
  const double t_end = now_s() - ago;
  std::vector<std::string> text(static_cast<size_t>(world));
  std::vector<store::RunStore::ChunkRef> chunks;
  std::vector<std::string> names(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    StartRecord start;
    start.rank = r;
    start.world = world;
    start.node = r / per_node;
    start.host = "host" + std::to_string(r / per_node);
    start.pid = 4000 + r;
    start.time = t_end - steps;
    std::string& t = text[static_cast<size_t>(r)];
    t = to_json_line(start) + "\n";
    for (int step = 0; step < steps; ++step) {
      StepRecord rec;
      rec.rank = r;
      rec.step = step;
      rec.time = t_end - (steps - 1 - step);
      rec.loss = 3.0;
      rec.tokens = 512;
      rec.compute_s = r == slow ? 0.3 : 0.1;
      rec.comm_s[Axis::dp_shard] = r == slow ? 0.01 : 0.21;
      rec.step_s = 0.32;
      t += to_json_line(rec) + "\n";
    }
    names[static_cast<size_t>(r)] = "metrics-rank" + std::to_string(r) + ".jsonl";
    chunks.push_back({*run, names[static_cast<size_t>(r)], 0, t});
  }
  if (!s->ingest_chunks(chunks)) return 0;
  return *run;
}

FlightState waiting_state(int rank, int64_t seq) {
  FlightState f;
  f.rank = rank;
  f.pid = 4000 + rank;
  f.phase = FlightPhase::backward;
  f.layer = 0;
  FlightOp op;
  op.group = FlightGroup{false, GroupKind::dp_shard};
  op.op = FlightOpKind::all_gather;
  op.seq = seq;
  op.bytes = 4096;
  op.enter = now_s() - 100;
  f.current = op;
  f.last_seq = {{op.group, seq}};
  return f;
}

}  // namespace

class HealthTest : public QObject {
  Q_OBJECT
  QTemporaryDir settings_;
  QTemporaryDir dir_;

 private Q_SLOTS:
  void initTestCase() { test::isolate_settings(settings_); }

  void hangIsNamedInTheBannerAndOnTheMesh() {
    const QString db = dir_.filePath("hang.db");
    // dp_shard 2 x tp 2 on two nodes; the last step 120 s ago (T = 60 s by default).
    const store::RunId run = generate(db, MeshShape(1, 2, 1, 2), 2, 6, 120, -1);
    QVERIFY(run > 0);
    {
      auto s = store::RunStore::open(db.toStdString());
      QVERIFY(s.ok());
      // Rank 3 stopped in backward layer 1; rank 1 waits for it on dp_shard ({1, 3}).
      FlightState stopped;
      stopped.rank = 3;
      stopped.pid = 4003;
      stopped.phase = FlightPhase::backward;
      stopped.layer = 1;
      stopped.last_seq = {{FlightGroup{false, GroupKind::dp_shard}, 11}};
      QVERIFY(store::put_rank_states(**s, run,
                                     {{1, 0, true, "running", waiting_state(1, 12)}, {3, 0, true, "stopped", stopped}},
                                     now_s())
                  .ok());
    }
    StoreWorker worker(db);
    MonitorPage page(&worker);
    page.resize(1400, 900);
    page.show();
    page.show_run(run);
    QTRY_VERIFY_WITH_TIMEOUT(page.health_banner()->isVisible(), 20000);
    const QString banner = page.health_banner()->text();
    QVERIFY2(banner.contains("hung for 2 min"), qPrintable(banner));
    QVERIFY2(banner.contains("rank 1 waits in all_gather on dp_shard #12"), qPrintable(banner));
    QVERIFY2(banner.contains("rank 3 (node1 host1, pid 4003) never entered it: stopped, last in backward layer 1"),
             qPrintable(banner));

    page.show_health();
    HealthPanel* panel = page.health_panel();
    QTRY_VERIFY_WITH_TIMEOUT(panel->mesh_view()->showing_health(), 20000);
    MeshView* mesh = panel->mesh_view();
    QCOMPARE(mesh->world_size(), 4);
    QCOMPARE(mesh->rank_health(3), RankHealth::culprit);
    QCOMPARE(mesh->rank_health(1), RankHealth::waiting);
    QCOMPARE(mesh->rank_health(0), RankHealth::computing);
    QCOMPARE(mesh->cell_fill(3), rank_health_color(RankHealth::culprit, is_dark()));
    QVERIFY(mesh->cell_fill(3) != mesh->cell_fill(1));
    // The hover text of the culprit says what it does.
    const QString tip = mesh->tooltip_at(mesh->cell_rect(3).center());
    QVERIFY2(tip.contains("never entered the collective: stopped, last in backward layer 1"), qPrintable(tip));
    QCOMPARE(panel->culprits()->rowCount(), 1);
    QCOMPARE(panel->culprits()->item(0, 0)->text(), QStringLiteral("3"));
    QCOMPARE(panel->culprits()->item(0, 2)->text(), QStringLiteral("4003"));
    QCOMPARE(panel->culprits()->item(0, 3)->text(), QStringLiteral("stopped"));
    QCOMPARE(panel->culprits()->item(0, 4)->text(), QStringLiteral("backward layer 1"));
    QVERIFY(panel->fetch_button()->isEnabled());

    // The rank moves again: its report says so, the banner clears.
    {
      auto s = store::RunStore::open(db.toStdString());
      QVERIFY(s.ok());
      QVERIFY(store::put_rank_states(**s, run, {{1, 0, false, "running", std::nullopt}, {3, 0, false, "running", std::nullopt}},
                                     now_s())
                  .ok());
      StepRecord rec;
      rec.step = 6;
      rec.time = now_s();
      rec.compute_s = 0.1;
      rec.step_s = 0.32;
      std::string lines;
      for (int r = 0; r < 4; ++r) {
        rec.rank = r;
        lines += to_json_line(rec) + "\n";
      }
      QVERIFY((*s)->ingest_chunk(run, "late.jsonl", 0, lines).ok());
    }
    page.health_model()->refresh();
    QTRY_VERIFY_WITH_TIMEOUT(!page.health_banner()->isVisible(), 20000);
    QTRY_COMPARE_WITH_TIMEOUT(mesh->rank_health(3), RankHealth::computing, 20000);
  }

  void stragglerIsTheBrightestRowOfTheHeatMap() {
    const QString db = dir_.filePath("slow.db");
    const store::RunId run = generate(db, MeshShape(1, 8, 1, 1), 4, 12, 0.5, 5);
    QVERIFY(run > 0);
    StoreWorker worker(db);
    HealthModel model(&worker);
    HealthPanel panel;
    panel.resize(1100, 760);
    panel.show();
    connect(&model, &HealthModel::report_ready, &panel, &HealthPanel::show_report);
    model.set_run(run);
    QTRY_VERIFY_WITH_TIMEOUT(model.report() != nullptr, 20000);
    const HealthReport& r = *model.report();
    QCOMPARE(r.diagnosis.state, HealthState::straggler);
    QVERIFY2(panel.summary()->text().contains("rank 5 (node1 host1) is slow in compute"), qPrintable(panel.summary()->text()));
    QCOMPARE(panel.mesh_view()->rank_health(5), RankHealth::slow);
    QCOMPARE(panel.heat_map()->heat().rows, 8);
    QCOMPARE(panel.heat_map()->heat().steps, 12);
    // Step times are equal (the others wait for rank 5): on step time no row stands out...
    // ...but waiting in collectives, rank 5 is the one row that does NOT wait.
    panel.heat_map()->set_value(StepHeatMap::Value::wait);
    QVERIFY(panel.heat_map()->brightest_row() != 5);
    const store::StepHeat& h = panel.heat_map()->heat();
    QCOMPARE(h.wait_s[5 * 12 + 11], 0.01);
    QCOMPARE(h.wait_s[0 * 12 + 11], 0.21);
  }

  void everyRankOfA1024x8MeshGetsItsState() {
    // 8,192 ranks: every rank but 5000 waits in the world's all-reduce; 5000 is stopped.
    Diagnosis d;
    d.state = HealthState::hang;
    WaitingGroup g;
    g.axis = "world";
    g.op = "all_reduce";
    g.seq = 201;
    for (int r = 0; r < 8192; ++r)
      if (r != 5000) g.ranks.push_back(r);
    g.missing = {5000};
    d.waiting.push_back(g);
    Culprit c;
    c.rank = 5000;
    c.node = 625;
    c.process = "stopped";
    c.phase = "data";
    c.waited_by = {0};
    d.culprits.push_back(c);
    auto report = std::make_shared<HealthReport>();
    report->live = true;
    report->diagnosis = d;
    report->shape = MeshShape(16, 64, 1, 8);
    report->ranks_per_node = 8;
    for (int n = 0; n < 1024; ++n) report->node_names << QStringLiteral("n%1").arg(n);
    rank_states_from(d, 8192, report->states, report->notes);
    HealthPanel panel;
    panel.resize(1400, 900);
    panel.show();
    panel.show_report(report);
    MeshView* mesh = panel.mesh_view();
    QCOMPARE(mesh->world_size(), 8192);
    QCOMPARE(mesh->rank_health(5000), RankHealth::culprit);
    QCOMPARE(mesh->rank_health(8191), RankHealth::waiting);
    QCOMPARE(report->notes[7], QStringLiteral("waiting in world all_reduce #201"));
    const QImage shot = panel.grab().toImage();  // paints every node at this zoom
    QVERIFY(!shot.isNull());
    QVERIFY(mesh->painted_items() > 0);
  }
};

QTEST_MAIN(HealthTest)
#include "health_test.moc"
