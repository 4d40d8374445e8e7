// Finding the straggler at 8,192 ranks (issue 26), with real widgets on the offscreen platform
// over a real run store: the monitor's rank picker reaches rank 8191, and the straggler table
// shows the slowest and fastest ranks the store keeps per step (min / max over ranks), for the
// step time and each communicating axis.
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>

#include "core/metrics.h"
#include "core/store/run_store.h"
#include "test_support.h"
#include "ui/monitor_model.h"
#include "ui/monitor_page.h"
#include "ui/store_worker.h"
#include "ui/straggler_table.h"

using namespace meshwork;
using namespace meshwork::ui;

class StragglerTest : public QObject {
  Q_OBJECT
  QTemporaryDir settings_;
  QTemporaryDir dir_;

  static constexpr int kWorld = 8192;  // 1,024 nodes x 8 GPUs
  static constexpr int kSteps = 3;

  // A generated run: every rank 0.25 s a step, except a slow rank 5000 and a fast rank 17 at
  // step 2; tp collectives slowest on rank 8191, fastest on rank 3.
  store::RunId generate(const QString& db) {
    auto opened = store::RunStore::open(db.toStdString());
    if (!opened) return 0;
    auto& s = *opened;
    const nlohmann::json config = {{"v", 1}, {"name", "llama-1024x8"}, {"model", "tiny"},
                                   {"mesh", {{"dp_replicate", 8}, {"dp_shard", 128}, {"cp", 1}, {"tp", 8}}}};
    auto run = s->create_run("llama-1024x8", config, {});
    if (!run) return 0;
    std::vector<std::string> text(kWorld);
    for (int r = 0; r < kWorld; ++r) {
      StartRecord start;
      start.rank = r;
      start.world = kWorld;
      start.node = r / 8;
      start.host = "node" + std::to_string(r / 8);
      start.time = 1000;
      text[r] = to_json_line(start) + "\n";
      for (int step = 0; step < kSteps; ++step) {
        StepRecord rec;
        rec.rank = r;
        rec.step = step;
        rec.time = 1000 + step;
        rec.loss = 3.0;
        rec.tokens = 8192;
        rec.step_s = 0.25 + 1e-6 * (r % 100);
        if (step == 2 && r == 5000) rec.step_s = 0.9;
        if (step == 2 && r == 17) rec.step_s = 0.1;
        rec.comm_s = AxisArray<double>::of(0.01, 0.02, 0.0, 0.03 + 1e-7 * r);  // tp: slowest 8191, fastest 0 ...
        if (r == 3) rec.comm_s[Axis::tp] = 0.001;                 // ... except rank 3
        rec.compute_s = 0.2;
        text[r] += to_json_line(rec) + "\n";
      }
    }
    std::vector<store::RunStore::ChunkRef> chunks;
    std::vector<std::string> names(kWorld);
    for (int r = 0; r < kWorld; ++r) {
      names[r] = "node" + std::to_string(r / 8) + "/metrics-rank" + std::to_string(r) + ".jsonl";
      chunks.push_back({*run, names[r], 0, text[r]});
    }
    auto done = s->ingest_chunks(chunks);
    if (!done) return 0;
    return *run;
  }

 private Q_SLOTS:
  void initTestCase() { test::isolate_settings(settings_); }

  void rankPickerReachesEveryRankAndStragglersAreShown() {
    const QString db = dir_.filePath("runs.db");
    const store::RunId run = generate(db);
    QVERIFY(run > 0);
    StoreWorker worker(db);
    MonitorPage page(&worker);
    page.resize(1400, 900);
    page.show();
    page.show_run(run);
    QTRY_VERIFY_WITH_TIMEOUT(page.model()->frame() != nullptr, 20000);
    QSpinBox* picker = page.rank_picker();
    QTRY_COMPARE(picker->maximum(), kWorld - 1);
    QCOMPARE(picker->minimum(), -1);
    QCOMPARE(picker->value(), -1);
    QCOMPARE(picker->text(), QStringLiteral("mean over ranks"));

    // The straggler table: step 2, step time then the communicating axes (dp_replicate,
    // dp_shard, tp: cp has size 1).
    StragglerTable* t = page.straggler_table();
    QTRY_COMPARE(t->rowCount(), 4);
    QCOMPARE(t->step(), int64_t{2});
    auto cell = [&](int row, int col) { return t->item(row, col)->text(); };
    QCOMPARE(cell(0, StragglerTable::kWhat), QStringLiteral("step time"));
    QCOMPARE(cell(0, StragglerTable::kSlowestRank), QStringLiteral("rank 5000"));
    QCOMPARE(cell(0, StragglerTable::kFastestRank), QStringLiteral("rank 17"));
    QCOMPARE(cell(0, StragglerTable::kSlowest), QStringLiteral("900 ms"));
    QVERIFY(cell(0, StragglerTable::kMean).contains("8192 ranks"));
    QCOMPARE(cell(3, StragglerTable::kWhat), QStringLiteral("tp collectives"));
    QCOMPARE(cell(3, StragglerTable::kSlowestRank), QStringLiteral("rank 8191"));
    QCOMPARE(cell(3, StragglerTable::kFastestRank), QStringLiteral("rank 3"));
    // dp_replicate: every rank the same 10 ms: the lowest rank stands for both.
    QCOMPARE(cell(1, StragglerTable::kSlowestRank), QStringLiteral("rank 0"));

    // Typing the last rank shows its own series.
    picker->setFocus();
    picker->selectAll();
    QTest::keyClicks(picker, "8191");
    QTest::keyClick(picker, Qt::Key_Return);
    QCOMPARE(picker->value(), kWorld - 1);
    QCOMPARE(page.model()->rank(), kWorld - 1);
    QTRY_VERIFY_WITH_TIMEOUT(page.model()->frame() && page.model()->frame()->rank == kWorld - 1, 20000);
    const auto& f = *page.model()->frame();
    QCOMPARE(f.step_s.size(), size_t{kSteps});
    QCOMPARE(f.step_s.back().y, 0.25 + 1e-6 * (8191 % 100));
    QCOMPARE(f.comm[Axis::tp].back().y, 0.03 + 1e-7 * 8191);
    // And back to the mean: the mean over 8,192 ranks of step 2's step time.
    picker->setValue(-1);
    QTRY_VERIFY_WITH_TIMEOUT(page.model()->frame() && page.model()->frame()->rank == -1, 20000);
    double sum = 0;
    for (int r = 0; r < kWorld; ++r)
      sum += r == 5000 ? 0.9 : r == 17 ? 0.1 : 0.25 + 1e-6 * (r % 100);
    QVERIFY(std::abs(page.model()->frame()->step_s.back().y - sum / kWorld) < 1e-12);
  }
};

QTEST_MAIN(StragglerTest)
#include "straggler_test.moc"
