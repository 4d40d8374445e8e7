// The Cluster and mesh views at 1,024 nodes x 8 (issue 26): the cluster view takes a hostfile of
// 1,024 nodes as one model insertion and keeps card widgets for the visible nodes only; the mesh
// view draws 1024 x 8 aggregated, names the rank under the pointer as core's mesh math does, and
// zooms and pans down to single ranks.
#include <QApplication>
#include <QFile>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTest>
#include <QWheelEvent>

#include "test_support.h"
#include "ui/axis_colors.h"
#include "ui/cluster_panel.h"
#include "ui/format.h"
#include "ui/inspector.h"
#include "ui/mesh_thumb.h"
#include "ui/mesh_view.h"
#include "ui/node_card.h"
#include "ui/node_grid.h"
#include "ui/node_prober.h"
#include "ui/plan_page.h"
#include "ui/plan_state.h"
#include "ui/theme.h"

using namespace meshwork;
using namespace meshwork::ui;

namespace {
// `count` hosts on loopback addresses, port 1: nothing listens there, so each probe fails at once
// with a reason (no network, no waiting), and every host is distinct.
QString write_hostfile(const QTemporaryDir& dir, const QString& name, int first, int count) {
  QFile f(dir.filePath(name));
  if (!f.open(QIODevice::WriteOnly)) return {};
  for (int i = first; i < first + count; ++i) f.write(QStringLiteral("127.0.%1.%2:1 slots=8\n").arg(i / 200).arg(i % 200 + 1).toUtf8());
  return f.fileName();
}
QString host_of(int i) { return QStringLiteral("127.0.%1.%2:1").arg(i / 200).arg(i % 200 + 1); }

// The expected fill of `rank`, from core's group index and the axis palette, not from the view.
QColor core_fill(const DeviceMesh& mesh, GroupKind kind, int rank) {
  const int count = mesh.world_size() / mesh.shape().group_size(kind);
  return group_shade(kind, mesh.group_index(rank, kind), count, is_dark());
}

void wheel(QWidget* w, QPointF pos, int notches) {
  QWheelEvent e(pos, w->mapToGlobal(pos), QPoint(), QPoint(0, 120 * notches), Qt::NoButton, Qt::NoModifier,
                Qt::NoScrollPhase, false);
  QApplication::sendEvent(w, &e);
}
void mouse(QWidget* w, QEvent::Type type, QPointF pos, Qt::MouseButtons buttons) {
  QMouseEvent e(type, pos, w->mapToGlobal(pos), type == QEvent::MouseMove ? Qt::NoButton : Qt::LeftButton, buttons,
                Qt::NoModifier);
  QApplication::sendEvent(w, &e);
}

// 1,024 nodes x 8 GPUs planned as dp_replicate 8 x dp_shard 128 x tp 8 (tp inside each node).
void plan_1024x8(MainWindow& w) {
  test::set_gpu_cluster(w, 1024, 8);
  RunConfig c = w.plan()->config();
  c.model = "llama-3.1-70b";
  c.mesh = MeshShape{8, -1, 1, 8};
  c.training.seq_len = 2048;
  c.training.micro_batch = 1;
  c.training.global_batch = 1024;
  c.training.precision = Precision::bf16;
  c.training.device = DeviceKind::cuda;
  w.plan()->set_config(c);
  w.set_mode(Mode::plan);
}
}  // namespace

class ScaleViewsTest : public QObject {
  Q_OBJECT
  QTemporaryDir settings_;

 private Q_SLOTS:
  void initTestCase() { test::isolate_settings(settings_); }

  void clusterViewTakes1024NodesInOneBatchWithVisibleCardsOnly() {
    MainWindow w(false);
    w.resize(1500, 920);
    w.show();
    w.set_mode(Mode::cluster);
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QTemporaryDir dir;
    ClusterPanel* panel = w.cluster_panel();
    NodeGrid* grid = panel->grid();
    QSignalSpy inserted(w.cluster(), &QAbstractItemModel::rowsInserted);
    QSignalSpy changed(w.cluster(), &ClusterModel::cluster_changed);

    // 64 nodes first: enough to fill the window with cards.
    panel->add_hostfile(write_hostfile(dir, "h64", 0, 64));
    QCOMPARE(inserted.count(), 1);
    QCOMPARE(w.cluster()->rowCount(), 65);  // this machine + 64
    // The first nodes' probes fail (nothing listens on port 1) and a failed card grows by its
    // error line: counted before they end, the cards that fit depended on timing.
    QTRY_VERIFY_WITH_TIMEOUT(!w.prober()->busy(), 60000);
    QCoreApplication::processEvents();
    const int widgets_at_64 = grid->card_widget_count();
    const int live_at_64 = grid->live_card_count();
    QVERIFY2(live_at_64 >= grid->columns() && live_at_64 < 65, qPrintable(QString::number(live_at_64)));

    // 960 more in one file: one insertion, one plan update, and no more card widgets than before.
    inserted.clear();
    changed.clear();
    panel->add_hostfile(write_hostfile(dir, "h960", 64, 960));
    QCOMPARE(inserted.count(), 1);
    QCOMPARE(changed.count(), 1);
    QCOMPARE(w.cluster()->rowCount(), 1025);
    // The first 64 did not answer: they are not counted; the 960 new ones are until they fail.
    QCOMPARE(w.plan()->cluster().world_size, w.cluster()->node(0).slots + 960 * 8);
    QCoreApplication::processEvents();
    QCOMPARE(grid->card_widget_count(), widgets_at_64);
    QCOMPARE(grid->live_card_count(), live_at_64);
    QVERIFY(grid->card_widget_count() <= 2 * live_at_64 + grid->columns() + 1);
    // Every live card sits in the viewport and shows its own row's node.
    const auto [lo, hi] = grid->live_rows();
    for (int r = lo; r <= hi; ++r) {
      NodeCard* c = grid->live_card(r);
      QVERIFY(c && c->isVisible());
      QCOMPARE(c->host(), w.cluster()->node(r).host);
      QVERIFY(c->geometry().intersects(grid->viewport()->rect()));
    }

    // Every probe fails (nothing listens on port 1) and each card grows by its error line.
    QTRY_VERIFY_WITH_TIMEOUT(!w.prober()->busy(), 60000);
    QCoreApplication::processEvents();
    QCOMPARE(w.cluster()->node(1024).state, NodeInfo::State::failed);
    // Scrolled to the end: the last node (hostfile line 1024, node 1023) has a card on screen.
    grid->verticalScrollBar()->setValue(grid->verticalScrollBar()->maximum());
    QCoreApplication::processEvents();
    NodeCard* last = grid->live_card(1024);
    QVERIFY2(last, qPrintable(QStringLiteral("live rows %1-%2, scrolled to %3 of %4, viewport %5 px, %6 columns")
                                  .arg(grid->live_rows().first).arg(grid->live_rows().second)
                                  .arg(grid->verticalScrollBar()->value()).arg(grid->verticalScrollBar()->maximum())
                                  .arg(grid->viewport()->height()).arg(grid->columns())));
    QCOMPARE(last->host(), host_of(1023));
    QVERIFY(last->isVisible() && grid->viewport()->rect().contains(last->geometry()));
    QCOMPARE(grid->card_widget_count(), widgets_at_64);
    // Selecting it feeds the inspector.
    QTest::mouseClick(last, Qt::LeftButton, {}, QPoint(60, 20));
    QVERIFY2(w.inspector()->text().contains(host_of(1023)), qPrintable(w.inspector()->text()));
    // Its probe's error shows on its card, in place.
    QVERIFY(!w.cluster()->node(1024).error.isEmpty());
    QVERIFY(!last->error_text().isEmpty());
  }

  void meshViewDraws1024x8Aggregated() {
    MainWindow w(false);
    w.resize(1500, 920);
    w.show();
    plan_1024x8(w);
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    MeshView* view = w.plan_page()->view();
    QTRY_VERIFY(view->mesh().has_value());
    const DeviceMesh& mesh = *view->mesh();
    QCOMPARE(mesh.world_size(), 8192);
    QVERIFY2(view->geometry().valid(), "1024 x 8 has a layout at the workbench's size");
    view->set_group_kind(GroupKind::dp_shard);
    const QImage img = view->grab().toImage();
    QCOMPARE(view->detail(), MeshView::Detail::nodes);  // ranks too small: a tile per node
    QVERIFY(view->painted_items() >= 1024);
    // Sweep the view: wherever it names a rank, that rank is core's (node, local) there, its
    // tooltip gives core's coordinates, and the pixel drawn there is its group's colour.
    int named = 0;
    const QRectF area = view->rect();
    for (double y = area.top() + 3; y < area.bottom(); y += 7.3) {
      for (double x = area.left() + 3; x < area.right(); x += 11.7) {
        const QPointF p(x, y);
        const int r = view->rank_at(p);
        if (r < 0) continue;
        ++named;
        QVERIFY(view->node_rect(mesh.node_of(r)).contains(p));
        const QString tip = view->tooltip_at(p);
        QVERIFY2(tip.contains(QStringLiteral("rank %1</b> on node %2").arg(r).arg(mesh.node_of(r))), qPrintable(tip));
        QVERIFY2(tip.contains(format_coord_named(mesh.coord_of(r))), qPrintable(tip));
        const QRectF cell = view->cell_rect(r);
        if (cell.adjusted(1, 1, -1, -1).contains(p))
          QCOMPARE(img.pixelColor(p.toPoint()).rgb(), core_fill(mesh, GroupKind::dp_shard, r).rgb());
      }
    }
    QVERIFY2(named > 1000, qPrintable(QString::number(named)));
    // The last rank is drawn too.
    QVERIFY(QRectF(view->rect()).contains(view->cell_rect(8191)));
  }

  void meshViewZoomsToSingleRanksAndPans() {
    MainWindow w(false);
    w.resize(1500, 920);
    w.show();
    plan_1024x8(w);
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    MeshView* view = w.plan_page()->view();
    QTRY_VERIFY(view->mesh().has_value());
    const DeviceMesh& mesh = *view->mesh();
    const int target = 5003;  // node 625, local 3
    const QPointF p = view->cell_rect(target).center();
    QCOMPARE(view->rank_at(p), target);
    // Wheel notches about p until the cells are full size: p stays over the same rank.
    for (int i = 0; i < 40 && view->zoom() < view->max_zoom(); ++i) wheel(view, p, 1);
    QCOMPARE(view->detail(), MeshView::Detail::ranks);
    QVERIFY2(view->cell_rect(target).width() >= 54, "zoomed in to cells with coordinates");
    QVERIFY(view->cell_rect(target).contains(p));
    QCOMPARE(view->rank_at(p), target);
    // Only what is on screen is painted: far fewer cells than ranks.
    view->repaint();
    QVERIFY2(view->painted_items() < 400, qPrintable(QString::number(view->painted_items())));
    // Hover and click as at any size: the inspector names the rank and its tp group.
    QTest::mouseMove(view, p.toPoint());
    QTRY_COMPARE(view->hovered_rank(), target);
    QTest::mouseClick(view, Qt::LeftButton, {}, p.toPoint());
    QCOMPARE(view->selected_rank(), target);
    QVERIFY2(w.inspector()->text().contains(QStringLiteral("Rank %1").arg(target)), qPrintable(w.inspector()->text()));
    // A drag pans: what was under p is now under p + d; the drag selects nothing.
    const QPointF d(-150, -60);
    mouse(view, QEvent::MouseButtonPress, p, Qt::LeftButton);
    for (int i = 1; i <= 5; ++i) mouse(view, QEvent::MouseMove, p + d * (i / 5.0), Qt::LeftButton);
    mouse(view, QEvent::MouseButtonRelease, p + d, Qt::NoButton);
    QCOMPARE(view->rank_at(p + d), target);
    QCOMPARE(view->selected_rank(), target);
    // The next cell in reading order inside the node is the next local rank (core's order).
    const QRectF c = view->cell_rect(target);
    const MeshGeometry& g = view->geometry();
    const double step_x = (g.cell_w + g.cell_gap) * view->zoom(), step_y = (g.cell_h + g.cell_gap) * view->zoom();
    const int local = mesh.local_rank_of(target);
    const QPointF next = local % g.cell_cols + 1 < g.cell_cols ? c.center() + QPointF(step_x, 0)
                                                               : c.center() + QPointF(-step_x * (g.cell_cols - 1), step_y);
    QCOMPARE(view->rank_at(next), mesh.rank_on_node(mesh.node_of(target), local + 1));
    // Back to the whole mesh.
    view->setFocus();
    QTest::keyClick(view, Qt::Key_0);
    QCOMPARE(view->zoom(), 1.0);
    QCOMPARE(view->detail(), MeshView::Detail::nodes);
  }

  void meshThumbDrawsAnySize() {
    // Compare's thumbnail of a 1024 x 1 x 1 x 8 shape: the replicas that fit are drawn (tp groups
    // in alternating shades, from core), not 1,024 boxes of negative width.
    MeshThumb thumb(MeshShape{1024, 1, 1, 8}, "big", QColor("#3366cc"));
    thumb.resize(170, 130);
    const QImage img = thumb.grab().toImage();
    if (!qEnvironmentVariableIsEmpty("MESHWORK_THUMB_PNG")) img.save(qEnvironmentVariable("MESHWORK_THUMB_PNG"));
    const QColor even = group_shade(GroupKind::tp, 0, 2, is_dark()), odd = group_shade(GroupKind::tp, 1, 2, is_dark());
    int even_px = 0, odd_px = 0;
    for (int y = 0; y < img.height(); ++y)
      for (int x = 0; x < img.width(); ++x) {
        // Cells are a few pixels wide and antialiased at their edges: count pixels near a shade.
        const QColor c = img.pixelColor(x, y);
        auto near = [&](const QColor& a) {
          return std::abs(c.red() - a.red()) + std::abs(c.green() - a.green()) + std::abs(c.blue() - a.blue()) < 24;
        };
        even_px += near(even);
        odd_px += near(odd);
      }
    QVERIFY2(even_px > 8 && odd_px > 8, qPrintable(QStringLiteral("%1 / %2").arg(even_px).arg(odd_px)));
  }

  void smallMeshStillDrawsRanksAtFit() {
    MainWindow w(false);
    w.resize(1500, 920);
    w.show();
    test::set_gpu_cluster(w, 8, 8);
    RunConfig c = w.plan()->config();
    c.model = "llama-3.1-8b";
    c.mesh = MeshShape{1, -1, 1, 8};
    c.training.global_batch = 64;
    c.training.device = DeviceKind::cuda;
    w.plan()->set_config(c);
    w.set_mode(Mode::plan);
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    MeshView* view = w.plan_page()->view();
    QTRY_VERIFY(view->mesh().has_value());
    QCOMPARE(view->detail(), MeshView::Detail::ranks);
    QVERIFY(!view->geometry().dense);
    QVERIFY(view->cell_rect(0).width() >= 16);  // roomy: rank numbers printed
  }
};

QTEST_MAIN(ScaleViewsTest)
#include "scale_views_test.moc"
