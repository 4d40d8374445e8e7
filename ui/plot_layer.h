// The data layer of a MetricChart: every line and stacked area, drawn by Meshwork over the plot
// area that Qt Charts lays out. Qt Charts (6.4) keeps the frame (axes, ticks, title, legend
// through empty proxy series); it never sees a data point, so a redraw rebuilds no QPainterPath
// and no stroked hit-test shape, and paint strokes no segment one by one.
//
// How a series is drawn, in device pixels (hi-dpi PNGs get their own resolution):
//  - Dense stretches (consecutive points less than 2 pixels apart: the store's min/max/last
//    columns of a long run) become one vertical span per pixel column -- the union of the
//    segments' extent in that column, widened by half the pen width, its two ends antialiased by
//    their coverage -- written straight into an ARGB layer. That is the picture a stroked polyline
//    makes of such data, in O(columns + pixels), whatever the noise (QPainter needs ~150 ms for
//    one 2-pixel polyline through 2,000 min/max points of a noisy metric).
//  - Sparse segments (points >= 2 pixels apart: short runs, zoomed ranges) are stroked by
//    QPainter, a few points per drawPolyline (one long self-crossing path makes Qt's rasterizer
//    superlinear), antialiased like the rest of the chart.
//  - A translucent series (a faint raw curve, an area's fill) is drawn opaque into a scratch
//    layer and blended once with its opacity: overlaps do not darken, and Qt 6.4's raster engine
//    never hands its translucent blends of > 96 spans to its thread pool (which on a busy machine
//    cost more than the drawing).
// The layer is kept until the data, the axes' ranges, the plot area or the device change, so a
// repaint of an unchanged chart is one blit.
#pragma once

#include <QBrush>
#include <QImage>
#include <QPen>
#include <QPointF>
#include <QTransform>
#include <vector>

class QPainter;

namespace meshwork::ui {

struct PlotSeries {
  QPen pen;                    // a line's stroke; an area's outline
  QBrush brush = Qt::NoBrush;  // an area's fill
  bool area = false;           // filled between `lower` and `points` (same x, in order)
  bool right = false;          // y on the secondary (right) axis
  bool visible = true;
  bool sorted = true;          // x never decreases (lets paint skip points outside the x range)
  std::vector<QPointF> points, lower;  // data coordinates
};

// What the axes show: x, the left y and the right y (when there is one).
struct PlotRanges {
  double x0 = 0, x1 = 0, y0 = 0, y1 = 0, r0 = 0, r1 = 0;
  bool has_right = false;
  bool operator==(const PlotRanges&) const = default;
};

class PlotLayer {
 public:
  // The series, in drawing order. After changing them, call changed().
  std::vector<PlotSeries>& series() { return series_; }
  const std::vector<PlotSeries>& series() const { return series_; }
  void changed() { ++version_; }
  uint64_t version() const { return version_; }

  // Draws the series over `area` (painter coordinates: the plot area) for `ranges`.
  void paint(QPainter* painter, const QRectF& area, const PlotRanges& ranges);
  // Data -> painter coordinates, as paint maps them.
  static QPointF map(QPointF data, bool right, const QRectF& area, const PlotRanges& ranges);

  // Times the layer was drawn (not merely blitted): tests, the bench.
  int64_t rasterized() const { return rasterized_; }

 private:
  struct Key {
    uint64_t version = 0;
    QRectF area;
    QTransform device;
    PlotRanges ranges;
    bool aa = true;
    bool operator==(const Key&) const = default;
  };
  void rasterize(const Key& k, double scale, QPointF shift, QPoint origin, QSize size);

  std::vector<PlotSeries> series_;
  uint64_t version_ = 1;
  Key drawn_;
  bool have_layer_ = false;
  QImage layer_, scratch_;
  int64_t rasterized_ = 0;
};

}  // namespace meshwork::ui
