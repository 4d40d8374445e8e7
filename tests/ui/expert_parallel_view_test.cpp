// Expert parallel in the workbench, real widgets on the offscreen platform: the ep control offers
// the degrees core allows for the model, the mesh draws each ep group over its ranks in ep's own
// colour (the pixels under the cells are that colour), hovering outlines the rank's ep group, the
// planner's rows carry ep and applying one sets the editor; the planner's Routing takes the
// routing a stored run of the model measured (a real meshtrain run, imported into a real store)
// and each ep row gets its ep's imbalance, or balanced when chosen. Saves the screenshot for docs/.
#include <QComboBox>
#include <QDir>
#include <QRegularExpression>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>
#include <fstream>

#include "core/store/expert_load.h"
#include "core/store/run_store.h"
#include "test_support.h"
#include "ui/axis_colors.h"
#include "ui/inspector.h"
#include "ui/mesh_editor.h"
#include "ui/mesh_view.h"
#include "ui/plan_page.h"
#include "ui/plan_state.h"
#include "ui/planner_model.h"
#include "ui/planner_panel.h"
#include "ui/routing_model.h"
#include "ui/store_worker.h"
#include "ui/theme.h"

using namespace meshwork;
using namespace meshwork::ui;

namespace {
RunConfig moe_config(const MainWindow& w, int ep) {
  RunConfig c = w.plan()->config();
  c.model = "qwen3-30b-a3b";
  c.mesh = MeshShape{1, -1, 1, 1};
  c.mesh.ep = ep;
  c.training.seq_len = 4096;
  c.training.micro_batch = 1;
  c.training.global_batch = 16;
  c.training.precision = Precision::bf16;
  c.training.device = DeviceKind::cuda;
  return c;
}
}  // namespace

class ExpertParallelViewTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void epIsDrawnOverTheNodesInItsOwnColour() {
    MainWindow w(false);
    w.resize(1300, 850);
    w.show();
    test::set_gpu_cluster(w, 2, 8);
    w.plan()->set_config(moe_config(w, 4));
    MeshView* view = w.plan_page()->view();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QTRY_VERIFY(view->mesh().has_value());
    QCOMPARE(view->mesh()->shape().ep, 4);
    QCOMPARE(view->mesh()->shape()[Axis::dp_shard], 16);

    // The editor offers 1 and the degrees dividing 128 experts and dp_shard 16.
    QComboBox* ep = qobject_cast<QComboBox*>(w.plan_page()->editor()->control("ep"));
    QVERIFY(ep);
    QVERIFY(ep->isEnabled());
    QList<int> offered;
    for (int i = 0; i < ep->count(); ++i) offered << ep->itemData(i).toInt();
    QCOMPARE(offered, (QList<int>{1, 2, 4, 8, 16}));
    QCOMPARE(ep->currentData().toInt(), 4);

    // The bar under each cell is ep's colour; the next group's in a lighter tint of it.
    const QImage shot = view->grab().toImage();
    const qreal dpr = shot.devicePixelRatio();
    const QColor want = expert_color(is_dark());
    auto bar_at = [&](int rank) {
      const QRectF cell = view->cell_rect(rank);
      return shot.pixelColor(QPoint(cell.center().x() * dpr, (cell.bottom() - 3) * dpr));
    };
    for (int rank : {1, 3, 9}) QCOMPARE(bar_at(rank).rgb(), want.rgb());
    QVERIFY(bar_at(5).rgb() != want.rgb());
    QCOMPARE(bar_at(5).hue(), want.hue());
    // The inspector gives rank 5 its ep coordinate (5 mod 4) and both sparse groups: ep 4-7
    // (tokens exchanged) and efsdp 1, 5, 9, 13 (the same experts' shards, across the nodes).
    view->set_selected_rank(5);
    const QString text = w.inspector()->text();
    QVERIFY2(text.contains(QRegularExpression(QStringLiteral("ep</td><td align=right><b>1</b></td>.*of 4"))), qPrintable(text));
    QVERIFY2(text.contains(QRegularExpression(QStringLiteral("ep \\(token all-to-all\\)</b> · rank 1 in it<br>.*4, <b>5</b>, 6, 7<"))),
             qPrintable(text));
    QVERIFY2(text.contains(QRegularExpression(
                 QStringLiteral("efsdp \\(expert shards\\)</b> · rank 1 in it · .*crosses nodes.*1, <b>5</b>, 9, 13<"))),
             qPrintable(text));
    const QString out = qEnvironmentVariable("MESHWORK_SCREENSHOT_DIR");
    if (!out.isEmpty()) {
      // With the planner's rows and the memory estimate in, and rank 5's groups outlined.
      QTRY_VERIFY(w.plan_page()->planner()->model()->rowCount() > 0);
      view->set_selected_rank(5);
      QTest::qWait(200);
      QVERIFY(w.grab().save(QDir(out).filePath("mesh-expert-parallel.png")));
    }

    // Choosing ep 8 in the editor: the mesh follows.
    const int i = ep->findData(8);
    QVERIFY(i >= 0);
    ep->setCurrentIndex(i);
    Q_EMIT ep->activated(i);
    QCOMPARE(w.plan()->config().mesh.ep, 8);
    QTRY_COMPARE(view->mesh()->shape().ep, 8);
  }

  // tests/store/data/moe-run: 8 experts, sparse layers 0, 2 and 3 (layer 1 dense), 30 steps.
  void plannerTakesTheRoutingAStoredRunOfTheModelMeasured() {
    QTemporaryDir home;
    test::isolate_settings(home);
    const QString db = home.filePath(QStringLiteral("runs.db"));
    qputenv("MESHWORK_DB", db.toLocal8Bit());
    const std::filesystem::path data = MESHWORK_MOE_RUN_DIR;
    store::RunId run = 0;
    {
      auto s = store::RunStore::open(db.toStdString());
      QVERIFY(s.ok());
      run = *(*s)->create_run("moe-run", {}, {});
      QVERIFY((*s)->ingest_files(run, {{data / "moe-run-rank0.jsonl", "rank0"}, {data / "moe-run-rank1.jsonl", "rank1"}}).ok());
    }
    const std::filesystem::path config = std::filesystem::path(home.path().toStdString()) / "config.json";
    std::ofstream(config) << R"({"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"],
      "hidden_size": 48, "intermediate_size": 96, "moe_intermediate_size": 24, "num_hidden_layers": 4,
      "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 8, "vocab_size": 250,
      "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": false,
      "num_experts": 8, "num_experts_per_tok": 2, "norm_topk_prob": true, "decoder_sparse_step": 1,
      "mlp_only_layers": [1], "router_aux_loss_coef": 0.001})";
    // What the store holds, read here on its own: each ep's two imbalances.
    auto measured = [&] {
      auto s = store::RunStore::open(db.toStdString());
      return *store::measured_routing(**s, run);
    }();

    MainWindow w(false);
    w.resize(1300, 850);
    w.show();
    test::set_gpu_cluster(w, 1, 8);
    RunConfig c = moe_config(w, 1);
    c.model = config.string();
    c.training.seq_len = 32;
    c.training.micro_batch = 2;
    w.plan()->set_config(c);
    PlannerPanel* planner = w.plan_page()->planner();
    QComboBox* choice = planner->routing_choice();

    // The run is offered and taken by default; every ep row carries its ep's measured imbalance.
    QTRY_VERIFY(w.routing()->routing() != nullptr);
    QVERIFY(choice->isVisible());
    QCOMPARE(choice->count(), 2);
    QCOMPARE(choice->itemData(0).toLongLong(), RoutingModel::kBalanced);
    QCOMPARE(choice->itemData(1).toLongLong(), run);
    QCOMPARE(choice->currentIndex(), 1);
    QVERIFY2(choice->currentText().contains(QStringLiteral("moe-run")), qPrintable(choice->currentText()));
    auto ep_rows = [&] {
      std::vector<PlanEntry> out;
      for (const PlanRow& r : w.plan()->plan())
        if (r.entry.shape.ep > 1) out.push_back(r.entry);
      return out;
    };
    QTRY_VERIFY(!ep_rows().empty() && ep_rows().front().step_imbalance > 1.0);
    std::map<int, int64_t> measured_total;  // per shape key, to compare with balanced below
    auto key = [](const MeshShape& m) { return m[Axis::dp_replicate] * 1000 + m[Axis::dp_shard] * 100 + m[Axis::tp] * 10 + m.ep; };
    for (const PlanEntry& e : ep_rows()) {
      QCOMPARE(e.step_imbalance, measured.step_imbalance(e.shape.ep));
      QCOMPARE(e.memory_imbalance, measured.memory_imbalance(e.shape.ep));
      QVERIFY(e.memory_imbalance > 1.0);
      measured_total[key(e.shape)] = e.memory.total();
    }
    const QString status = planner->status_text();
    QVERIFY2(status.contains(QStringLiteral("Routing as run %1 (moe-run) measured it (30 steps)").arg(run)), qPrintable(status));
    QVERIFY2(status.contains(QStringLiteral("ep 2: ×%1 step, ×%2 memory")
                                 .arg(measured.step_imbalance(2), 0, 'f', 2)
                                 .arg(measured.memory_imbalance(2), 0, 'f', 2)),
             qPrintable(status));
    if (const QString out = qEnvironmentVariable("MESHWORK_SCREENSHOT_DIR"); !out.isEmpty()) {
      w.resize(1400, 1100);
      w.plan_page()->lower_tabs()->setCurrentIndex(0);  // Planner
      QTest::qWait(200);
      QVERIFY(w.grab().save(QDir(out).filePath("planner-routing.png")));
    }

    // Balanced, as a user picks it: every ep row back to 1 and its memory lower.
    choice->setFocus();
    QTest::keyClick(choice, Qt::Key_Up);
    QCOMPARE(w.routing()->choice(), RoutingModel::kBalanced);
    QTRY_VERIFY(w.routing()->routing() == nullptr);
    QTRY_VERIFY(!ep_rows().empty() && ep_rows().front().step_imbalance == 1.0);
    for (const PlanEntry& e : ep_rows()) {
      QCOMPARE(e.memory_imbalance, 1.0);
      QVERIFY(e.memory.total() < measured_total.at(key(e.shape)));
    }
    QTRY_VERIFY2(planner->status_text().contains(QStringLiteral("Routing taken as balanced")), qPrintable(planner->status_text()));

    // A dense model has no routing to choose.
    c.model = "llama-3.1-8b";
    w.plan()->set_config(c);
    QTRY_VERIFY(!choice->isVisible());
    qunsetenv("MESHWORK_DB");
  }

  void denseModelOffersEpOneOnly() {
    MainWindow w(false);
    w.show();
    test::set_gpu_cluster(w, 1, 8);
    RunConfig c = moe_config(w, 1);
    c.model = "llama-3.1-8b";
    w.plan()->set_config(c);
    QComboBox* ep = qobject_cast<QComboBox*>(w.plan_page()->editor()->control("ep"));
    QTRY_VERIFY(w.plan_page()->view()->mesh().has_value());
    QCOMPARE(ep->count(), 1);
    QVERIFY(!ep->isEnabled());
  }

  void plannerRowsShowEpAndApplyIt() {
    MainWindow w(false);
    w.resize(1300, 850);
    w.show();
    test::set_gpu_cluster(w, 2, 8);
    w.plan()->set_config(moe_config(w, 1));
    PlannerPanel* planner = w.plan_page()->planner();
    QTRY_VERIFY(planner->model()->rowCount() > 3);
    QTableView* table = planner->table();
    auto* proxy = qobject_cast<QSortFilterProxyModel*>(table->model());
    int row = -1;
    MeshShape target;
    for (int r = 0; r < table->model()->rowCount(); ++r) {
      target = planner->model()->row_at(proxy->mapToSource(table->model()->index(r, 0)).row()).entry.shape;
      if (target.ep > 1) {
        row = r;
        break;
      }
    }
    QVERIFY(row >= 0);
    const QString text = table->model()->index(row, PlannerModel::Shape).data().toString();
    QVERIFY2(text.contains(QStringLiteral("ep %1").arg(target.ep)), qPrintable(text));
    table->scrollTo(table->model()->index(row, 1));
    QTest::mouseClick(table->viewport(), Qt::LeftButton, {}, table->visualRect(table->model()->index(row, 1)).center());
    QCOMPARE(w.plan()->config().mesh, target);
    QCOMPARE(w.plan_page()->view()->mesh()->shape().ep, target.ep);
  }
};

QTEST_MAIN(ExpertParallelViewTest)
#include "expert_parallel_view_test.moc"
