// Expert parallel in the workbench, real widgets on the offscreen platform: the ep control offers
// the degrees core allows for the model, the mesh draws each ep group over its ranks in ep's own
// colour (the pixels under the cells are that colour), hovering outlines the rank's ep group, the
// planner's rows carry ep and applying one sets the editor. Saves the screenshot for docs/.
#include <QComboBox>
#include <QDir>
#include <QRegularExpression>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTest>

#include "test_support.h"
#include "ui/axis_colors.h"
#include "ui/inspector.h"
#include "ui/mesh_editor.h"
#include "ui/mesh_view.h"
#include "ui/plan_page.h"
#include "ui/plan_state.h"
#include "ui/planner_model.h"
#include "ui/planner_panel.h"
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
