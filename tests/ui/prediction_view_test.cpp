// Predicted vs measured (issue 18) with real widgets on the offscreen platform, over a real run
// store (a temporary SQLite file) filled with meshtrain's own metrics lines: the run page's table
// and Compare's table show store::predict_run()'s numbers for a finished run -- predicted and
// measured step, compute and each communicating axis, error = (predicted - measured) / measured --
// with the basis in the caption; a run predict_run refuses shows its words instead. The
// prediction is asked again only when the run finished or grew noticeably, not on every frame.
#include <QLabel>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/metrics.h"
#include "core/mesh_json.h"
#include "core/store/run_observations.h"
#include "core/store/run_store.h"
#include "test_support.h"
#include "ui/compare_model.h"
#include "ui/compare_page.h"
#include "ui/format.h"
#include "ui/monitor_model.h"
#include "ui/monitor_page.h"
#include "ui/runs_model.h"
#include "ui/store_worker.h"
#include "ui/theme.h"

using namespace meshwork;
using namespace meshwork::ui;

namespace {

MeshShape shape(int dp_replicate, int dp_shard, int cp, int tp) {
  MeshShape m;
  m.set(Axis::dp_replicate, dp_replicate);
  m.set(Axis::dp_shard, dp_shard);
  m.set(Axis::cp, cp);
  m.set(Axis::tp, tp);
  return m;
}

// What one rank measured at `step` of a run: step 0 (warm-up, which predict_run leaves out) slow,
// the others varying a little around a per-run level; an axis of size 1 never communicates.
struct Timing {
  double compute_s = 0;
  AxisArray<double> comm_s;
  double step_s() const {
    double s = compute_s;
    for (double c : comm_s) s += c;
    return s;
  }
};
Timing timing_of(const MeshShape& m, double level, int64_t step) {
  Timing t;
  if (step == 0) {
    t.compute_s = 0.9;
    for (Axis a : kAxes) t.comm_s[a] = m.size(a) > 1 ? 0.2 : 0.0;
    return t;
  }
  t.compute_s = level * (0.08 + 0.001 * static_cast<double>(step % 5));
  for (Axis a : kAxes) {
    const int k = static_cast<int>(axis_index(a));
    t.comm_s[a] =
        m.size(a) > 1 ? level * (0.004 * (1 + k) + 0.0002 * static_cast<double>(step % 3)) : 0.0;
  }
  return t;
}

// The mean over steps [1, steps) of the timings above: what the run measured, worked out here
// from what was written (not read back from the store).
Timing mean_timing(const MeshShape& m, double level, int64_t steps) {
  Timing sum;
  for (int64_t s = 1; s < steps; ++s) {
    const Timing t = timing_of(m, level, s);
    sum.compute_s += t.compute_s;
    for (Axis a : kAxes) sum.comm_s[a] += t.comm_s[a];
  }
  const double n = static_cast<double>(steps - 1);
  sum.compute_s /= n;
  for (double& c : sum.comm_s) c /= n;
  return sum;
}

struct Run {
  std::string name;
  MeshShape mesh;
  double level = 1.0;
};

nlohmann::json config_of(const Run& r) {
  return {{"v", 1},
          {"name", r.name},
          {"model", "tiny"},
          {"mesh", to_json(r.mesh)},
          {"training", {{"steps", 1000}, {"device", "cpu"}, {"lr", 1e-3}}}};
}

// A run on the nodes node0 and node1, two ranks each, stored the way a launch stores it.
class Writer {
 public:
  explicit Writer(const QString& db) {
    auto s = store::RunStore::open(db.toStdString());
    if (s) store_ = std::move(*s);
  }
  bool ok() const { return store_ != nullptr; }

  store::RunId create(const Run& r) {
    const nlohmann::json config = config_of(r);
    auto id = store_->create_run(r.name, config, nlohmann::json::object());
    if (!id) return 0;
    const int world = static_cast<int>(r.mesh.world_size());
    for (int k = 0; k < world; ++k) {
      StartRecord st;
      st.rank = k;
      st.world = world;
      st.node = k / 2;
      st.host = "node" + std::to_string(st.node);
      st.pid = 4000 + k;
      st.time = 999;
      st.mesh = r.mesh;
      st.config = config;
      if (!append(*id, k, to_json_line(st) + "\n")) return 0;
    }
    return *id;
  }
  bool steps(store::RunId id, const Run& r, int64_t first, int64_t last) {
    const int world = static_cast<int>(r.mesh.world_size());
    for (int k = 0; k < world; ++k) {
      std::string chunk;
      for (int64_t step = first; step <= last; ++step) {
        const Timing t = timing_of(r.mesh, r.level, step);
        StepRecord s;
        s.rank = k;
        s.step = step;
        s.time = 1000.0 + static_cast<double>(step);
        s.loss = 3.0 - 0.001 * static_cast<double>(step);
        s.lr = 1e-3;
        s.grad_norm = 0.5;
        s.tokens = 512;
        s.tokens_per_s = 512 / t.step_s();
        s.tflops = 0.01;
        s.mfu = 0.01;
        s.mem_bytes = int64_t{1} << 28;
        s.mem_peak_bytes = int64_t{1} << 29;
        s.comm_s = t.comm_s;
        s.compute_s = t.compute_s;
        s.step_s = t.step_s();
        chunk += to_json_line(s) + "\n";
      }
      if (!append(id, k, chunk)) return false;
    }
    return true;
  }
  bool end(store::RunId id, const Run& r) {
    const int world = static_cast<int>(r.mesh.world_size());
    for (int k = 0; k < world; ++k) {
      EndRecord e;
      e.rank = k;
      e.time = 5000;
      if (!append(id, k, to_json_line(e) + "\n")) return false;
    }
    return true;
  }
  store::RunId finished(const Run& r, int64_t steps) {
    const store::RunId id = create(r);
    if (id == 0 || !this->steps(id, r, 0, steps - 1) || !end(id, r)) return 0;
    return id;
  }
  store::RunStore* store() { return store_.get(); }

 private:
  bool append(store::RunId id, int rank, const std::string& text) {
    const std::string source = "metrics-rank" + std::to_string(rank);
    auto c = store_->ingest_chunk(id, source, offsets_[{id, rank}], text);
    if (!c) return false;
    offsets_[{id, rank}] = c->offset;
    return true;
  }
  std::unique_ptr<store::RunStore> store_;
  std::map<std::pair<store::RunId, int>, uint64_t> offsets_;
};

double parse_ms(const QString& text) {
  bool ok = false;
  const double v = text.toDouble(&ok);
  return ok ? v / 1000.0 : std::nan("");
}
double parse_percent(const QString& text) {  // "+12.3 %" -> 0.123
  QString t = text;
  t.remove(QStringLiteral(" %"));
  bool ok = false;
  const double v = t.toDouble(&ok);
  return ok ? v / 100.0 : std::nan("");
}

}  // namespace

class PredictionViewTest : public QObject {
  Q_OBJECT
  QTemporaryDir settings_;
  QTemporaryDir dir_;
  int db_n_ = 0;

  static constexpr int64_t kSteps = 21;  // 20 measured steps after the warm-up

  // The cluster's history: four finished runs of several shapes, then the run judged.
  const std::vector<Run> history_ = {{"fsdp-4", shape(1, 4, 1, 1), 1.0},
                                     {"hsdp-2x2", shape(2, 2, 1, 1), 1.1},
                                     {"fsdp-tp", shape(1, 2, 1, 2), 0.9},
                                     {"ddp-4", shape(4, 1, 1, 1), 1.2}};
  const Run judged_{"judged-fsdp-tp", shape(1, 2, 1, 2), 1.05};

  QString fresh_db() { return dir_.filePath(QStringLiteral("runs-%1.db").arg(++db_n_)); }

  // Asserts that `t`'s rows are predict_run's check for the run, formatted, in order: step,
  // compute, then each communicating axis; measured as the test wrote it; error = (p - m) / m.
  static void verify_table(QTableWidget* t, const store::RunPrediction& expected, const Timing& written) {
    const PredictionCheck& c = expected.check;
    struct Row {
      QString what;
      double predicted, measured, written;
    };
    std::vector<Row> rows = {{"step", c.predicted_step_s, c.measured_step_s, written.step_s()},
                             {"compute", c.predicted_compute_s, c.measured_compute_s, written.compute_s}};
    for (Axis a : kAxes) {
      if (written.comm_s[a] > 0 || c.predicted_comm_s[a] > 0)
        rows.push_back({axis_label(a), c.predicted_comm_s[a], c.measured_comm_s[a], written.comm_s[a]});
    }
    QCOMPARE(t->rowCount(), static_cast<int>(rows.size()));
    for (int r = 0; r < t->rowCount(); ++r) {
      const Row& row = rows[static_cast<size_t>(r)];
      QCOMPARE(t->item(r, MonitorPage::kPredWhat)->text(), row.what);
      // The store measured what was written (mean of steps 1..20, warm-up left out).
      QVERIFY2(std::abs(row.measured - row.written) < 1e-9 * std::max(1.0, row.written),
               qPrintable(QStringLiteral("%1: measured %2, written %3").arg(row.what).arg(row.measured).arg(row.written)));
      const QString pred = t->item(r, MonitorPage::kPredPredicted)->text();
      const QString meas = t->item(r, MonitorPage::kPredMeasured)->text();
      const QString err = t->item(r, MonitorPage::kPredError)->text();
      QCOMPARE(pred, format_ms(row.predicted));
      QCOMPARE(meas, format_ms(row.measured));
      // The cells read back as the numbers (to the digits shown).
      QVERIFY2(std::abs(parse_ms(pred) - row.predicted) <= 0.0005e-3 + 0.005 * row.predicted, qPrintable(pred));
      QVERIFY2(std::abs(parse_ms(meas) - row.measured) <= 0.0005e-3 + 0.005 * row.measured, qPrintable(meas));
      // error % = (predicted - measured) / measured, worked out here.
      QVERIFY(row.measured > 0);
      const double e = (row.predicted - row.measured) / row.measured;
      QVERIFY2(std::abs(parse_percent(err) - e) <= 0.0005 + 1e-12, qPrintable(QStringLiteral("%1 vs %2").arg(err).arg(e)));
      QCOMPARE(err.startsWith('-'), e < 0 && std::abs(e) >= 0.0005);
    }
  }

 private Q_SLOTS:
  void initTestCase() { test::isolate_settings(settings_); }

  void runPageShowsPredictedAgainstMeasured() {
    const QString db = fresh_db();
    Writer w(db);
    QVERIFY(w.ok());
    for (const Run& r : history_) QVERIFY(w.finished(r, kSteps) > 0);
    const store::RunId run = w.finished(judged_, kSteps);
    QVERIFY(run > 0);
    auto expected = store::predict_run(w.store(), run);
    QVERIFY2(expected.ok(), expected.ok() ? "" : expected.error().message().c_str());
    // The prediction is the one made before the run: fitted on the 4 other runs of its nodes.
    QCOMPARE(expected->fitted_runs, static_cast<int>(history_.size()));
    QCOMPARE(expected->measured.steps, kSteps - 1);

    StoreWorker worker(db);
    MonitorPage page(&worker);
    page.resize(1400, 950);
    page.show();
    page.show_run(run);
    QTRY_VERIFY_WITH_TIMEOUT(page.model()->prediction() != nullptr, 20000);
    QTRY_VERIFY(page.prediction_table()->isVisible());
    QVERIFY(!page.prediction_message()->isVisible());
    // The caption says what the prediction was made from.
    QCOMPARE(page.prediction_caption()->text(), prediction_caption(*expected));
    QVERIFY(page.prediction_caption()->text().contains(QString::fromStdString(expected->basis())));
    QVERIFY(page.prediction_caption()->text().contains(QStringLiteral("fit of 4 runs")));
    verify_table(page.prediction_table(), *expected, mean_timing(judged_.mesh, judged_.level, kSteps));
    // 1x2x1x2: dp_shard and tp communicate, dp_replicate and cp do not.
    QCOMPARE(page.prediction_table()->rowCount(), 4);
    QCOMPARE(page.prediction_table()->item(2, 0)->text(), QStringLiteral("dp_shard"));
    QCOMPARE(page.prediction_table()->item(3, 0)->text(), QStringLiteral("tp"));

    // A finished run's prediction is not asked again on every refresh: it is cached by version.
    const int64_t loaded = page.model()->predictions_loaded();
    QCOMPARE(loaded, int64_t{1});
    const int64_t frames = page.model()->frames_applied();
    for (int i = 0; i < 3; ++i) {
      page.model()->refresh();
      QTRY_VERIFY(page.model()->frames_applied() > frames + i);
    }
    QTest::qWait(200);
    QCOMPARE(page.model()->predictions_loaded(), loaded);

    // Another run, then back: the cached answer, no new job.
    page.show_run(1);
    QTRY_VERIFY_WITH_TIMEOUT(page.model()->prediction() != nullptr && page.model()->prediction()->run == 1, 20000);
    QCOMPARE(page.model()->predictions_loaded(), loaded + 1);
    page.show_run(run);
    QTRY_VERIFY_WITH_TIMEOUT(page.model()->prediction() != nullptr && page.model()->prediction()->run == run, 20000);
    QCOMPARE(page.model()->predictions_loaded(), loaded + 1);
    verify_table(page.prediction_table(), *expected, mean_timing(judged_.mesh, judged_.level, kSteps));

    // The store's runs changed (a new run finished): the fit changes, the prediction is asked again.
    const Run more{"fsdp-4-again", shape(1, 4, 1, 1), 0.95};
    QVERIFY(w.finished(more, kSteps) > 0);
    worker.notify_runs_changed();
    QTRY_COMPARE_WITH_TIMEOUT(page.model()->predictions_loaded(), loaded + 2, 20000);
    auto refitted = store::predict_run(w.store(), run);
    QVERIFY(refitted.ok());
    QCOMPARE(refitted->fitted_runs, static_cast<int>(history_.size()) + 1);
    QTRY_COMPARE(page.prediction_caption()->text(), prediction_caption(*refitted));
    verify_table(page.prediction_table(), *refitted, mean_timing(judged_.mesh, judged_.level, kSteps));
  }

  void runningRunShowsWhyAndIsAskedAgainWhenItGrowsOrEnds() {
    const QString db = fresh_db();
    Writer w(db);
    QVERIFY(w.ok());
    for (const Run& r : history_) QVERIFY(w.finished(r, kSteps) > 0);
    const store::RunId run = w.create(judged_);
    QVERIFY(run > 0);
    QVERIFY(w.steps(run, judged_, 0, 19));
    auto refused = store::predict_run(w.store(), run);
    QVERIFY(!refused.ok());

    StoreWorker worker(db);
    MonitorPage page(&worker);
    page.resize(1400, 950);
    page.show();
    page.show_run(run);
    QTRY_VERIFY_WITH_TIMEOUT(page.model()->prediction() != nullptr, 20000);
    // predict_run's words, in grey, instead of the table.
    QTRY_VERIFY(page.prediction_message()->isVisible());
    QVERIFY(!page.prediction_table()->isVisible());
    QCOMPARE(page.prediction_message()->text(), QString::fromStdString(refused.error().message()));
    QVERIFY(page.prediction_message()->styleSheet().contains(muted_text_color().name()));
    QCOMPARE(page.model()->predictions_loaded(), int64_t{1});

    // A few more steps (fewer than kPredictionMinSteps): frames, but no new prediction.
    const int64_t frames = page.model()->frames_applied();
    QVERIFY(w.steps(run, judged_, 20, 22));
    QTRY_VERIFY_WITH_TIMEOUT(page.model()->frames_applied() > frames, 20000);
    QTRY_VERIFY(page.model()->frame()->summary.steps >= 22);
    QTest::qWait(200);
    QCOMPARE(page.model()->predictions_loaded(), int64_t{1});
    // Grown noticeably: asked again (still refused: it is still running).
    QVERIFY(w.steps(run, judged_, 23, 35));
    QTRY_COMPARE_WITH_TIMEOUT(page.model()->predictions_loaded(), int64_t{2}, 20000);
    QVERIFY(page.prediction_message()->isVisible());

    // It ends: asked once more, and now judged.
    QVERIFY(w.end(run, judged_));
    QTRY_COMPARE_WITH_TIMEOUT(page.model()->predictions_loaded(), int64_t{3}, 20000);
    auto expected = store::predict_run(w.store(), run);
    QVERIFY2(expected.ok(), expected.ok() ? "" : expected.error().message().c_str());
    QTRY_VERIFY(page.prediction_table()->isVisible());
    QVERIFY(!page.prediction_message()->isVisible());
    QCOMPARE(page.prediction_caption()->text(), prediction_caption(*expected));
    verify_table(page.prediction_table(), *expected, mean_timing(judged_.mesh, judged_.level, 36));
  }

  void compareShowsEachRunsPrediction() {
    const QString db = fresh_db();
    Writer w(db);
    QVERIFY(w.ok());
    std::vector<store::RunId> fit;
    for (const Run& r : history_) fit.push_back(w.finished(r, kSteps));
    for (store::RunId id : fit) QVERIFY(id > 0);
    const store::RunId judged = w.finished(judged_, kSteps);
    QVERIFY(judged > 0);
    const store::RunId running = w.create(Run{"still-running", shape(1, 4, 1, 1), 1.0});
    QVERIFY(running > 0);
    QVERIFY(w.steps(running, Run{"still-running", shape(1, 4, 1, 1), 1.0}, 0, 5));

    const std::vector<store::RunId> ids = {judged, fit[1], running};  // 1x2x1x2, 2x2x1x1, running
    std::vector<Run> runs = {judged_, history_[1]};
    std::vector<store::RunPrediction> expected;
    for (size_t i = 0; i < 2; ++i) {
      auto p = store::predict_run(w.store(), ids[i]);
      QVERIFY2(p.ok(), p.ok() ? "" : p.error().message().c_str());
      expected.push_back(*p);
    }
    auto refused = store::predict_run(w.store(), running);
    QVERIFY(!refused.ok());

    StoreWorker worker(db);
    RunsModel runs_model(&worker);
    ComparePage page(&worker, &runs_model);
    page.resize(1500, 950);
    page.show();
    page.set_runs(ids);
    QTRY_VERIFY_WITH_TIMEOUT(page.model()->predictions().size() == 3, 30000);
    QTableWidget* t = page.prediction_table();
    QTRY_COMPARE(t->rowCount(), 3);
    // Columns: step pred / meas / error, compute pred / meas, then each axis any run communicates
    // on (dp_replicate, dp_shard, tp; cp never), pred / meas, then the basis.
    for (const char* h : {"step pred ms", "step meas ms", "step error", "compute pred ms", "compute meas ms",
                          "dp_replicate pred ms", "dp_replicate meas ms", "dp_shard pred ms", "dp_shard meas ms",
                          "tp pred ms", "tp meas ms", "basis"})
      QVERIFY2(page.prediction_column(QString::fromLatin1(h)) > 0, h);
    QCOMPARE(page.prediction_column(QStringLiteral("cp pred ms")), -1);
    for (int r = 0; r < 2; ++r) {
      const store::RunPrediction& p = expected[static_cast<size_t>(r)];
      const PredictionCheck& c = p.check;
      const Timing written = mean_timing(runs[static_cast<size_t>(r)].mesh, runs[static_cast<size_t>(r)].level, kSteps);
      auto text = [&](const char* h) { return t->item(r, page.prediction_column(QString::fromLatin1(h)))->text(); };
      QVERIFY(t->item(r, 0)->text().endsWith(QStringLiteral("#%1").arg(ids[static_cast<size_t>(r)])));
      QCOMPARE(text("step pred ms"), format_ms(c.predicted_step_s));
      QCOMPARE(text("step meas ms"), format_ms(c.measured_step_s));
      QVERIFY(std::abs(c.measured_step_s - written.step_s()) < 1e-9);
      const double e = (c.predicted_step_s - c.measured_step_s) / c.measured_step_s;
      QVERIFY2(std::abs(parse_percent(text("step error")) - e) <= 0.0005 + 1e-12, qPrintable(text("step error")));
      QCOMPARE(text("compute pred ms"), format_ms(c.predicted_compute_s));
      QCOMPARE(text("compute meas ms"), format_ms(c.measured_compute_s));
      QVERIFY(std::abs(c.measured_compute_s - written.compute_s) < 1e-9);
      for (Axis a : {Axis::dp_replicate, Axis::dp_shard, Axis::tp}) {
        const QString name = axis_label(a);
        QCOMPARE(t->item(r, page.prediction_column(name + " pred ms"))->text(), format_ms(c.predicted_comm_s[a]));
        QCOMPARE(t->item(r, page.prediction_column(name + " meas ms"))->text(), format_ms(c.measured_comm_s[a]));
        QVERIFY(std::abs(c.measured_comm_s[a] - written.comm_s[a]) < 1e-9);
      }
      QCOMPARE(text("basis"), QString::fromStdString(p.basis()));
    }
    // The running run: predict_run's words across its row.
    QVERIFY(t->item(2, 0)->text().endsWith(QStringLiteral("#%1").arg(running)));
    QCOMPARE(t->item(2, 1)->text(), QString::fromStdString(refused.error().message()));
    QCOMPARE(t->columnSpan(2, 1), t->columnCount() - 1);

    // Another metric: a new frame, the predictions from the cache.
    const int64_t loaded = page.model()->predictions_loaded();
    QCOMPARE(loaded, int64_t{3});
    const int64_t frames = page.model()->frames();
    page.set_metric(QStringLiteral("step_s"));
    QTRY_VERIFY_WITH_TIMEOUT(page.model()->frames() > frames, 20000);
    QTest::qWait(200);
    QCOMPARE(page.model()->predictions_loaded(), loaded);
    QCOMPARE(t->rowCount(), 3);
    QCOMPARE(t->item(0, page.prediction_column(QStringLiteral("step pred ms")))->text(),
             format_ms(expected[0].check.predicted_step_s));
  }
};

QTEST_MAIN(PredictionViewTest)
#include "prediction_view_test.moc"
