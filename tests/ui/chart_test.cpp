// MetricChart's data layer (ui/plot_layer.h) on the offscreen platform: Qt Charts draws the frame,
// Meshwork the data, so these tests look at rendered pixels. A line's pixels lie where Qt Charts
// itself maps its points (its mapToPosition() through the legend proxy, an independent
// implementation of the mapping); a dense noisy line fills each pixel column's extent and nothing
// above it; a zoomed range draws nothing outside the plot area; stacked areas fill between their
// edges; a repaint without new data draws no layer again; a 2x PNG draws at its own resolution.
#include <QApplication>
#include <QGraphicsSimpleTextItem>
#include <QGraphicsTextItem>
#include <QTemporaryDir>
#include <QTest>
#include <QValueAxis>
#include <QXYSeries>
#include <cmath>

#include "ui/bar_chart.h"
#include "ui/metric_chart.h"
#include "ui/screenshot_support.h"
#include "ui/theme.h"

using namespace meshwork;
using namespace meshwork::ui;

namespace {
const QColor kBlue("#1f4fd8");
const QColor kGreen("#119955");
const QColor kOrange("#e08a1e");

double distance(QColor a, QColor b) {
  return std::hypot(a.red() - b.red(), a.green() - b.green(), a.blue() - b.blue());
}
QColor over(QColor c, double alpha, QColor bg) {
  return QColor::fromRgbF(alpha * c.redF() + (1 - alpha) * bg.redF(), alpha * c.greenF() + (1 - alpha) * bg.greenF(),
                          alpha * c.blueF() + (1 - alpha) * bg.blueF());
}
QColor pixel(const QImage& img, QPointF p) { return img.pixelColor(static_cast<int>(std::floor(p.x())), static_cast<int>(std::floor(p.y()))); }

// A chart laid out and painted; the returned image is what the widget shows.
QImage settle(MetricChart& c) {
  c.rescale();
  for (int i = 0; i < 5; ++i) QCoreApplication::processEvents();
  return c.grab().toImage();
}

// The plot area in widget coordinates.
QRectF plot_rect(const MetricChart& c) {
  const QRectF scene = c.chart()->mapRectToScene(c.chart()->plotArea());
  const QRectF view = c.viewportTransform().mapRect(scene);
  return view.translated(c.viewport()->mapTo(&c, QPoint(0, 0)));
}
}  // namespace

class ChartTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { apply_theme(*qApp, Theme::light); }

  void sparseLineIsDrawnWhereQtChartsMapsItsPoints() {
    MetricChart c(QStringLiteral("sparse"));
    c.resize(640, 360);
    c.show();
    QVERIFY(QTest::qWaitForWindowExposed(&c));
    const int line = c.add_line(QStringLiteral("l"), MetricChart::LineStyle{kBlue, 3.0});
    std::vector<store::Point> pts;
    for (int i = 0; i <= 20; ++i) pts.push_back({static_cast<double>(i), (i % 2 ? 8.0 : 2.0) + i * 0.1});
    c.set_points(line, pts);
    const QImage img = settle(c);
    QCOMPARE(c.point_count(line), 21);
    auto* proxy = qobject_cast<QXYSeries*>(c.chart()->series().value(0));
    QVERIFY(proxy);
    for (const store::Point& p : pts) {
      const QPointF ours = c.map_to_widget({p.x, p.y}, line);
      const QPointF scene = c.chart()->mapToScene(c.chart()->mapToPosition({p.x, p.y}, proxy));
      const QPointF qt = c.viewport()->mapTo(&c, c.viewportTransform().map(scene));
      QVERIFY2(std::hypot(ours.x() - qt.x(), ours.y() - qt.y()) < 0.5,
               qPrintable(QStringLiteral("x=%1: ours (%2, %3), Qt Charts (%4, %5)").arg(p.x).arg(ours.x()).arg(ours.y()).arg(qt.x()).arg(qt.y())));
      if (p.x > 0 && p.x < 20)  // the ends lie on the plot's edge
        QVERIFY2(distance(pixel(img, ours), kBlue) < 60, qPrintable(QStringLiteral("x=%1: %2").arg(p.x).arg(pixel(img, ours).name())));
    }
    // Between two peaks, well above the valley: background.
    const QPointF gap = c.map_to_widget({1.0, 2.2}, line);
    QVERIFY2(distance(pixel(img, gap), kBlue) > 150, qPrintable(pixel(img, gap).name()));
  }

  void denseNoisyLineFillsEachColumnsExtent() {
    MetricChart c(QStringLiteral("dense"));
    c.resize(640, 360);
    c.show();
    QVERIFY(QTest::qWaitForWindowExposed(&c));
    const int line = c.add_line(QStringLiteral("l"), MetricChart::LineStyle{kBlue, 2.0});
    std::vector<store::Point> pts;
    for (int i = 0; i < 20000; ++i) pts.push_back({static_cast<double>(i), 3.0 + ((i * 7919) % 101) / 50.0});  // 3..5
    c.set_points(line, pts);
    const QImage img = settle(c);
    auto* y = qobject_cast<QValueAxis*>(c.chart()->axes(Qt::Vertical).value(0));
    QVERIFY(y && y->max() > 5 && y->min() < 3);
    for (double x : {500.0, 5000.0, 12345.0, 19000.0})
      for (double v : {3.2, 4.0, 4.8})  // every column holds points from 3 to 5: filled between
        QVERIFY2(distance(pixel(img, c.map_to_widget({x, v}, line)), kBlue) < 60, qPrintable(QStringLiteral("(%1, %2)").arg(x).arg(v)));
    // Above the data's top (plus the pen) and below its bottom: nothing.
    const double px_per_unit = plot_rect(c).height() / (y->max() - y->min());
    const double above = 5 + 4 / px_per_unit, below = 3 - 4 / px_per_unit;
    for (double x : {500.0, 12345.0}) {
      if (above < y->max()) QVERIFY(distance(pixel(img, c.map_to_widget({x, above}, line)), kBlue) > 150);
      if (below > y->min()) QVERIFY(distance(pixel(img, c.map_to_widget({x, below}, line)), kBlue) > 150);
    }
  }

  void zoomedRangeDrawsNothingOutside() {
    MetricChart c(QStringLiteral("zoom"));
    c.resize(640, 360);
    c.show();
    QVERIFY(QTest::qWaitForWindowExposed(&c));
    const int line = c.add_line(QStringLiteral("l"), MetricChart::LineStyle{kBlue, 2.0});
    std::vector<store::Point> pts;
    for (int i = 0; i <= 300; ++i) pts.push_back({static_cast<double>(i), i == 50 ? 10.0 : 1.0});
    c.set_points(line, pts);
    settle(c);
    const QImage before = c.grab().toImage();
    QVERIFY(distance(pixel(before, c.map_to_widget({50, 9}, line)), kBlue) < 60);  // the spike, unzoomed
    c.set_zoom(std::make_pair(100.0, 200.0));
    const QImage img = settle(c);
    auto* x = qobject_cast<QValueAxis*>(c.chart()->axes(Qt::Horizontal).value(0));
    QCOMPARE(x->min(), 100.0);
    QCOMPARE(x->max(), 200.0);
    const QRectF plot = plot_rect(c);
    QVERIFY(std::abs(c.map_to_widget({100, 1}, line).x() - plot.left()) < 0.5);
    QVERIFY(std::abs(c.map_to_widget({200, 1}, line).x() - plot.right()) < 0.5);
    // The spike at step 50 maps left of the plot: not a pixel of it anywhere, inside or out.
    int blue = 0;
    for (int px = 0; px < img.width(); ++px)
      for (int py = static_cast<int>(plot.top()); py < c.map_to_widget({150, 3}, line).y(); ++py)
        if (distance(img.pixelColor(px, py), kBlue) < 90) ++blue;
    QCOMPARE(blue, 0);
    QVERIFY(distance(pixel(img, c.map_to_widget({150, 1}, line)), kBlue) < 60);  // the line in range is there
  }

  void stackedAreasFillBetweenTheirEdges() {
    for (int n : {60, 12000}) {  // sparse (QPainter polygons) and dense (pixel columns)
      MetricChart c(QStringLiteral("stack"));
      c.resize(640, 360);
      c.show();
      QVERIFY(QTest::qWaitForWindowExposed(&c));
      c.add_area(QStringLiteral("a"), kGreen);
      c.add_area(QStringLiteral("b"), kOrange);
      std::vector<double> x;
      for (int i = 0; i < n; ++i) x.push_back(i);
      c.set_stack(x, {std::vector<double>(static_cast<size_t>(n), 2.0), std::vector<double>(static_cast<size_t>(n), 3.0)});
      const QImage img = settle(c);
      QCOMPARE(c.point_count(0), n);
      const double mid = n * 0.37;  // off the grid lines
      const QColor bg = card_color();
      QVERIFY2(distance(pixel(img, c.map_to_widget({mid, 1.0}, 0)), over(kGreen, 0.85, bg)) < 40,
               qPrintable(QStringLiteral("n=%1: %2").arg(n).arg(pixel(img, c.map_to_widget({mid, 1.0}, 0)).name())));
      QVERIFY2(distance(pixel(img, c.map_to_widget({mid, 3.5}, 1)), over(kOrange, 0.85, bg)) < 40,
               qPrintable(QStringLiteral("n=%1: %2").arg(n).arg(pixel(img, c.map_to_widget({mid, 3.5}, 1)).name())));
      auto* y = qobject_cast<QValueAxis*>(c.chart()->axes(Qt::Vertical).value(0));
      if (y->max() > 5.4) QVERIFY(distance(pixel(img, c.map_to_widget({mid, 5.4}, 1)), bg) < 40);  // above the stack
    }
  }

  void unchangedDataIsNotDrawnAgain() {
    MetricChart c(QStringLiteral("cache"));
    c.resize(640, 360);
    c.show();
    QVERIFY(QTest::qWaitForWindowExposed(&c));
    const int line = c.add_line(QStringLiteral("l"), MetricChart::LineStyle{kBlue, 2.0});
    std::vector<store::Point> pts;
    for (int i = 0; i < 1000; ++i) pts.push_back({static_cast<double>(i), std::sin(i * 0.05)});
    c.set_points(line, pts);
    settle(c);
    c.grab();
    const int64_t layers = c.plot().rasterized(), frames = c.frames_rendered();
    c.set_points(line, pts);  // the same points: nothing to draw
    c.grab();
    QCOMPARE(c.plot().rasterized(), layers);
    QCOMPARE(c.frames_rendered(), frames);
    pts[500].y = 0.5;  // new data within the same bounds: the layer is drawn, the frame is not
    c.set_points(line, pts);
    settle(c);
    QCOMPARE(c.plot().rasterized(), layers + 1);
    QCOMPARE(c.frames_rendered(), frames);
  }

  // A live page moves the bars of "Latest step, per rank" every frame, with the step in the value
  // axis' title; when the axis has to grow, the chart is built again and Qt Charts deletes the old
  // axis' items later, from the event loop. The screenshots' event pump must let it, or the
  // picture shows both titles ("ms at step 99" under "ms at step 129").
  void barChartRebuiltLiveShowsOneTitleAfterThePump() {
    const QStringList ranks{QStringLiteral("rank 0"), QStringLiteral("rank 1")};
    const auto sets = [](double a) {
      return std::vector<BarChart::Set>{{QStringLiteral("dp_shard"), kGreen, {a, 12}}, {QStringLiteral("compute"), kBlue, {10, 11}}};
    };
    const auto titles = [](BarChart& c) {
      QStringList out;
      for (QGraphicsItem* item : c.scene()->items()) {
        if (!item->isVisible()) continue;
        QString t;
        if (auto* text = dynamic_cast<QGraphicsTextItem*>(item)) t = text->toPlainText();
        if (auto* simple = dynamic_cast<QGraphicsSimpleTextItem*>(item)) t = simple->text();
        if (t.startsWith(QStringLiteral("ms at step"))) out << t;
      }
      return out;
    };
    BarChart live(QStringLiteral("Latest step, per rank"), BarChart::Kind::stacked_horizontal);
    live.resize(520, 260);
    live.show();
    QVERIFY(QTest::qWaitForWindowExposed(&live));
    live.set_data(ranks, sets(17), QStringLiteral("ms at step 99"));
    pump_events(30);
    live.set_data(ranks, sets(17.5), QStringLiteral("ms at step 100"));  // the same bars, moved
    pump_events(30);
    QVERIFY2(titles(live) == QStringList{QStringLiteral("ms at step 100")}, qPrintable(titles(live).join(" | ")));
    live.set_data(ranks, sets(40), QStringLiteral("ms at step 129"));  // past the axis: built again
    pump_events(30);
    QVERIFY2(titles(live) == QStringList{QStringLiteral("ms at step 129")}, qPrintable(titles(live).join(" | ")));
  }

  void hiDpiPngDrawsAtItsOwnResolution() {
    QTemporaryDir dir;
    MetricChart c(QStringLiteral("png"));
    c.resize(640, 360);
    c.show();
    QVERIFY(QTest::qWaitForWindowExposed(&c));
    const int line = c.add_line(QStringLiteral("l"), MetricChart::LineStyle{kBlue, 2.0});
    std::vector<store::Point> pts;
    for (int i = 0; i <= 40; ++i) pts.push_back({static_cast<double>(i), (i % 2 ? 8.0 : 2.0)});
    c.set_points(line, pts);
    settle(c);
    const QString path = dir.filePath("c.png");
    QVERIFY(c.save_png(path));
    const QImage png(path);
    QCOMPARE(png.width(), 2 * c.width());
    for (int i = 1; i < 40; i += 7) {
      const QPointF w = c.map_to_widget({static_cast<double>(i), i % 2 ? 8.0 : 2.0}, line) * 2;
      QVERIFY2(distance(pixel(png, w), kBlue) < 60, qPrintable(QStringLiteral("x=%1: %2").arg(i).arg(pixel(png, w).name())));
    }
  }
};

QTEST_MAIN(ChartTest)
#include "chart_test.moc"
