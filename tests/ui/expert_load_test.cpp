// The Monitor's expert load (mixtures of experts), with real widgets on the offscreen platform over
// a real run store holding a real meshtrain run (tests/store/data/moe-run-rank{0,1}.jsonl: a
// Qwen3-MoE of 8 experts, sparse layers 0, 2 and 3, 30 steps at dp_shard 2): the heat map's
// cells are the stored counts over each step's mean, the layer picker switches the layer (a new
// query on the store worker), the max/mean and the aux loss are readable, and a dense run shows
// no such view.
#include <QComboBox>
#include <QLabel>
#include <QTemporaryDir>
#include <QTest>
#include <fstream>
#include <sstream>

#include "core/metrics.h"
#include "core/store/run_store.h"
#include "test_support.h"
#include "ui/axis_colors.h"
#include "ui/expert_load_view.h"
#include "ui/metric_chart.h"
#include "ui/monitor_model.h"
#include "ui/monitor_page.h"
#include "ui/store_worker.h"
#include "ui/theme.h"

using namespace meshwork;
using namespace meshwork::ui;

namespace {

const std::filesystem::path kData = MESHWORK_MOE_RUN_DIR;

std::vector<StepRecord> rank0_steps() {
  std::ifstream in(kData / "moe-run-rank0.jsonl");
  std::vector<StepRecord> out;
  for (std::string line; std::getline(in, line);)
    if (auto rec = parse_metrics_line(line); rec && std::holds_alternative<StepRecord>(*rec))
      out.push_back(std::get<StepRecord>(*rec));
  return out;
}

const ExpertLoad* layer_of(const StepRecord& r, int layer) {
  for (const ExpertLoad& l : r.moe->layers)
    if (l.layer == layer) return &l;
  return nullptr;
}

}  // namespace

class ExpertLoadTest : public QObject {
  Q_OBJECT
  QTemporaryDir settings_;
  QTemporaryDir dir_;

  store::RunId import(const QString& db, const std::vector<std::filesystem::path>& files) {
    auto s = store::RunStore::open(db.toStdString());
    if (!s) return 0;
    auto run = (*s)->create_run(files.front().stem().string(), {}, {});
    if (!run) return 0;
    std::vector<store::RunStore::ImportFile> in;
    for (const auto& f : files) in.push_back({f, f.filename().string()});
    if (!(*s)->ingest_files(*run, in)) return 0;
    return *run;
  }

  // Every cell of the heat map against the file's counts of `layer`.
  void expect_cells(ExpertHeatMap* map, int layer) {
    const std::vector<StepRecord> steps = rank0_steps();
    QCOMPARE(static_cast<int>(steps.size()), 30);
    QCOMPARE(map->columns(), 30);
    QCOMPARE(map->experts(), 8);
    QCOMPARE(map->map()->layer, layer);
    for (int c = 0; c < 30; ++c) {
      const ExpertLoad* l = layer_of(steps[static_cast<size_t>(c)], layer);
      QVERIFY(l);
      double sum = 0;
      for (double t : l->tokens) sum += t;
      for (int e = 0; e < 8; ++e)
        QCOMPARE(map->ratio(c, e), l->tokens[static_cast<size_t>(e)] / (sum / 8));
      QCOMPARE(map->map()->columns[static_cast<size_t>(c)].imbalance, l->imbalance);
    }
    // A cell's tooltip names its step, expert, tokens and share.
    const ExpertLoad* l5 = layer_of(steps[5], layer);
    const QString tip = map->tooltip(5, 3);
    QVERIFY2(tip.contains(QStringLiteral("step 5 · layer %1 · expert 3: %2 tokens").arg(layer).arg(l5->tokens[3], 0, 'f', 0)),
             qPrintable(tip));
    QVERIFY2(tip.contains(QStringLiteral("max/mean of the step: %1").arg(l5->imbalance, 0, 'f', 2)), qPrintable(tip));
    // The hovered point finds the cell it is in.
    const QRect r = map->cell_rect(5, 3);
    QCOMPARE(map->cell_at(r.center()), std::make_pair(5, 3));
  }

 private Q_SLOTS:
  void initTestCase() { test::isolate_settings(settings_); }

  void heatMapCellsAreTheStoredCountsOverTheStepMean() {
    const QString db = dir_.filePath("moe.db");
    const store::RunId run = import(db, {kData / "moe-run-rank0.jsonl", kData / "moe-run-rank1.jsonl"});
    QVERIFY(run > 0);
    StoreWorker worker(db);
    MonitorPage page(&worker);
    page.resize(1400, 1000);
    page.show();
    page.show_run(run);
    QTRY_VERIFY_WITH_TIMEOUT(page.model()->frame() != nullptr, 20000);
    ExpertLoadView* view = page.expert_load_view();
    QTRY_VERIFY(view->isVisible());
    QCOMPARE(page.model()->frame()->moe_layers, (std::vector<int>{0, 2, 3}));
    // The picker lists the sparse layers (1 is dense) and shows the first.
    QComboBox* picker = view->layer_picker();
    QCOMPARE(picker->count(), 3);
    QCOMPARE(picker->itemText(0), QStringLiteral("layer 0"));
    QCOMPARE(picker->itemText(2), QStringLiteral("layer 3"));
    QCOMPARE(picker->currentText(), QStringLiteral("layer 0"));
    expect_cells(view->heat_map(), 0);

    // The worst max/mean of the run and the aux loss of the last step, in words.
    const std::vector<StepRecord> steps = rank0_steps();
    double worst = 0;
    int64_t at = -1;
    for (const StepRecord& s : steps)
      if (layer_of(s, 0)->imbalance > worst) {
        worst = layer_of(s, 0)->imbalance;
        at = s.step;
      }
    const QString imbalance = view->imbalance_label()->text();
    QVERIFY2(imbalance.contains(QStringLiteral("worst %1 at step %2").arg(worst, 0, 'f', 2).arg(at)), qPrintable(imbalance));
    QVERIFY2(imbalance.contains(QStringLiteral("max/mean %1 now").arg(layer_of(steps.back(), 0)->imbalance, 0, 'f', 2)),
             qPrintable(imbalance));
    const QString aux = view->aux_loss_label()->text();
    QVERIFY2(aux.contains(QStringLiteral("aux loss %1").arg(steps.back().moe->aux_loss, 0, 'f', 4)), qPrintable(aux));

    // Colours: an expert at 4x its share or more is the expert colour; the scale is monotone.
    QCOMPARE(ExpertHeatMap::ratio_color(4.0, is_dark()), expert_color(is_dark()));
    QCOMPARE(ExpertHeatMap::ratio_color(8.0, is_dark()), expert_color(is_dark()));
    QVERIFY(ExpertHeatMap::ratio_color(1.0, is_dark()) != ExpertHeatMap::ratio_color(2.0, is_dark()));
    QVERIFY(ExpertHeatMap::ratio_color(0.25, is_dark()) != ExpertHeatMap::ratio_color(1.0, is_dark()));
    // It paints (a cell's pixel is its colour).
    const QImage shot = view->heat_map()->grab().toImage();
    const QRect cell = view->heat_map()->cell_rect(7, 2);
    const QPoint px = cell.center() * shot.devicePixelRatio();
    QCOMPARE(QColor(shot.pixel(px)).name(), view->heat_map()->cell_color(7, 2).name());
  }

  void layerPickerQueriesTheChosenLayer() {
    const QString db = dir_.filePath("moe-layers.db");
    const store::RunId run = import(db, {kData / "moe-run-rank0.jsonl", kData / "moe-run-rank1.jsonl"});
    QVERIFY(run > 0);
    StoreWorker worker(db);
    MonitorPage page(&worker);
    page.resize(1400, 1000);
    page.show();
    page.show_run(run);
    ExpertLoadView* view = page.expert_load_view();
    QTRY_VERIFY_WITH_TIMEOUT(view->isVisible(), 20000);
    QComboBox* picker = view->layer_picker();
    picker->setCurrentIndex(2);
    Q_EMIT picker->activated(2);  // as a user's choice
    QCOMPARE(page.model()->moe_layer(), 3);
    QTRY_VERIFY_WITH_TIMEOUT(page.model()->frame()->expert_load && page.model()->frame()->expert_load->layer == 3, 20000);
    QTRY_COMPARE(view->heat_map()->map()->layer, 3);
    QCOMPARE(picker->currentText(), QStringLiteral("layer 3"));
    expect_cells(view->heat_map(), 3);
  }

  void denseRunShowsNoExpertLoad() {
    const QString db = dir_.filePath("dense.db");
    const store::RunId run = import(db, {std::filesystem::path(MESHWORK_UI_TEST_DATA) / "ddp-2x1.jsonl"});
    QVERIFY(run > 0);
    StoreWorker worker(db);
    MonitorPage page(&worker);
    page.resize(1400, 1000);
    page.show();
    page.show_run(run);
    QTRY_VERIFY_WITH_TIMEOUT(page.model()->frame() != nullptr, 20000);
    QVERIFY(page.model()->frame()->moe_layers.empty());
    QVERIFY(!page.model()->frame()->expert_load);
    QVERIFY(!page.expert_load_view()->isVisible());
    QVERIFY(page.comm_chart()->isVisible());
  }
};

QTEST_MAIN(ExpertLoadTest)
#include "expert_load_test.moc"
