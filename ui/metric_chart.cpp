#include "ui/metric_chart.h"

#include <QAreaSeries>
#include <QChart>
#include <QGraphicsLayout>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QMouseEvent>
#include <QPainter>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "ui/theme.h"

namespace meshwork::ui {

namespace {
QRectF unite(const QRectF& a, const QRectF& b) {
  if (a.isNull()) return b;
  if (b.isNull()) return a;
  const double x0 = std::min(a.left(), b.left()), x1 = std::max(a.right(), b.right());
  const double y0 = std::min(a.top(), b.top()), y1 = std::max(a.bottom(), b.bottom());
  return QRectF(QPointF(x0, y0), QPointF(x1, y1));
}
// A degenerate rectangle (one point, a flat line) still has a place: QRectF::isNull() would call
// it empty, so bounds are kept as explicit corners.
QRectF corners(double x0, double y0, double x1, double y1) {
  QRectF r;
  r.setCoords(x0, y0, x1, y1);
  return r.isNull() ? QRectF(QPointF(x0, y0), QSizeF(1e-300, 1e-300)) : r;
}
void fit_axis(QValueAxis* axis, double lo, double hi, bool from_zero) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return;
  if (from_zero && lo > 0) lo = 0;
  if (hi - lo < 1e-12 * std::max(1.0, std::abs(hi))) {
    const double pad = std::abs(hi) > 0 ? std::abs(hi) * 0.1 : 1.0;
    lo -= pad;
    hi += pad;
    if (from_zero && lo < 0 && hi > 0 && lo >= -pad) lo = 0;
  } else {
    const double pad = (hi - lo) * 0.05;
    if (!(from_zero && lo == 0)) lo -= pad;
    hi += pad;
  }
  axis->setRange(lo, hi);
  axis->applyNiceNumbers();
}
}  // namespace

MetricChart::MetricChart(const QString& title, QWidget* parent) : QChartView(parent), title_(title) {
  auto* c = new QChart;
  c->setAnimationOptions(QChart::NoAnimation);  // every redraw is a full repaint: never animate
  c->layout()->setContentsMargins(0, 0, 0, 0);
  c->setMargins(QMargins(6, 4, 8, 4));
  c->setBackgroundRoundness(4);
  c->legend()->setAlignment(Qt::AlignTop);
  c->legend()->setShowToolTips(true);
  x_ = new QValueAxis(c);
  y_ = new QValueAxis(c);
  x_->setLabelFormat("%.6g");
  y_->setLabelFormat("%.4g");
  x_->setTickCount(6);
  y_->setTickCount(5);
  c->addAxis(x_, Qt::AlignBottom);
  c->addAxis(y_, Qt::AlignLeft);
  setChart(c);
  setRenderHint(QPainter::Antialiasing, true);
  setRubberBand(QChartView::HorizontalRubberBand);
  setMinimumSize(180, 150);
  set_title(title);
  apply_theme();
}

QLineSeries* MetricChart::make_line(const LineStyle& style) {
  auto* s = new QLineSeries(chart());
  QColor color = style.color;
  color.setAlphaF(style.opacity);
  QPen pen(color, style.width, style.pen);
  pen.setCapStyle(Qt::SquareCap);  // round caps: an arc per segment (Qt Charts strokes segments one by one)
  s->setPen(pen);
  return s;
}

int MetricChart::add_line(const QString& name, const LineStyle& style) {
  QLineSeries* s = make_line(style);
  s->setName(name);
  chart()->addSeries(s);
  s->attachAxis(x_);
  if (style.right_axis) {
    if (!y_right_) {
      y_right_ = new QValueAxis(chart());
      y_right_->setLabelFormat("%.3g");
      y_right_->setTickCount(5);
      y_right_->setGridLineVisible(false);
      chart()->addAxis(y_right_, Qt::AlignRight);
      apply_theme();
    }
    s->attachAxis(y_right_);
  } else {
    s->attachAxis(y_);
  }
  if (!style.legend)
    for (QLegendMarker* m : chart()->legend()->markers(s)) m->setVisible(false);
  lines_.push_back(Line{s, nullptr, nullptr, style.right_axis, false, {}});
  return static_cast<int>(lines_.size()) - 1;
}

int MetricChart::add_area(const QString& name, const QColor& color) {
  auto* upper = new QLineSeries(chart());
  auto* lower = new QLineSeries(chart());
  auto* area = new QAreaSeries(upper, lower);
  area->setName(name);
  QColor fill = color;
  fill.setAlphaF(0.85);
  area->setBrush(fill);
  area->setPen(QPen(color.darker(115), 1.0));
  chart()->addSeries(area);
  area->attachAxis(x_);
  area->attachAxis(y_);
  lines_.push_back(Line{area, upper, lower, false, true, {}});
  return static_cast<int>(lines_.size()) - 1;
}

void MetricChart::clear_series() {
  chart()->removeAllSeries();  // deletes them
  lines_.clear();
  reference_ = nullptr;
  if (y_right_) {
    chart()->removeAxis(y_right_);
    delete y_right_;
    y_right_ = nullptr;
  }
}

void MetricChart::set_points(int line, const std::vector<store::Point>& points, double scale) {
  if (line < 0 || line >= line_count() || lines_[line].area) return;
  QList<QPointF> pts;
  pts.reserve(static_cast<qsizetype>(points.size()));
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const store::Point& p : points) {
    const double y = p.y * scale;
    if (!std::isfinite(y) || !std::isfinite(p.x)) continue;  // a NaN loss has no place on a line
    pts.append(QPointF(p.x, y));
    x0 = std::min(x0, p.x);
    x1 = std::max(x1, p.x);
    y0 = std::min(y0, y);
    y1 = std::max(y1, y);
  }
  lines_[line].bounds = pts.isEmpty() ? QRectF() : corners(x0, y0, x1, y1);
  lines_[line].points = std::move(pts);
  lines_[line].pending = true;
}

// Before the axes change: changed lines hold no points (their geometry is recomputed on every
// range change, for nothing: the points are about to be replaced). After: their points, once.
void MetricChart::flush_pending(bool before_axes) {
  for (Line& l : lines_) {
    if (!l.pending) continue;
    if (before_axes) {
      if (l.area) {
        if (l.upper->count()) l.upper->clear();
        if (l.lower->count()) l.lower->clear();
      } else if (auto* s = static_cast<QLineSeries*>(l.series); s->count()) {
        s->clear();
      }
      continue;
    }
    if (l.area) {
      l.lower->replace(l.lower_points);
      l.upper->replace(l.points);
      l.lower_points.clear();
    } else {
      l.shown = static_cast<int>(l.points.size());
      static_cast<QLineSeries*>(l.series)->replace(split_tall(l.points, l.right ? y_right_ : y_));
    }
    l.points.clear();
    l.pending = false;
  }
}

// Qt Charts draws a line one drawLine() per segment, and Qt's raster engine (6.4) hands every
// blend of more than ~96 spans to its GUI thread pool and waits for it: a segment more than ~40
// pixels tall (min/max columns of a noisy metric are) costs two thread hand-overs, which on a
// busy machine made one Compare paint 0.5-1.5 s. Tall segments are cut into collinear pieces of
// at most kMaxRows pixel rows: the same picture, every blend done inline.
QList<QPointF> MetricChart::split_tall(const QList<QPointF>& points, const QValueAxis* y) const {
  constexpr double kMaxRows = 24;
  const double rows = chart()->plotArea().height() > 0 ? chart()->plotArea().height() : height();
  const double span = y ? y->max() - y->min() : 0;
  if (points.size() < 2 || !(span > 0) || !(rows > 0) || !std::isfinite(span)) return points;
  const double max_dy = span * kMaxRows / rows;
  QList<QPointF> out;
  out.reserve(points.size());
  out.append(points.front());
  for (qsizetype i = 1; i < points.size(); ++i) {
    const QPointF a = points[i - 1], b = points[i];
    const double pieces = std::ceil(std::abs(b.y() - a.y()) / max_dy);
    for (int k = 1; k < pieces && k < 4096; ++k) {
      const double t = k / pieces;
      out.append(QPointF(a.x() + t * (b.x() - a.x()), a.y() + t * (b.y() - a.y())));
    }
    out.append(b);
  }
  return out;
}

void MetricChart::set_stack(const std::vector<double>& x, const std::vector<std::vector<double>>& layers) {
  std::vector<double> base(x.size(), 0.0);
  size_t layer = 0;
  for (Line& l : lines_) {
    if (!l.area) continue;
    QList<QPointF> lo, up;
    lo.reserve(static_cast<qsizetype>(x.size()));
    up.reserve(static_cast<qsizetype>(x.size()));
    double y1 = 0;
    for (size_t k = 0; k < x.size(); ++k) {
      const double v = layer < layers.size() && k < layers[layer].size() && std::isfinite(layers[layer][k])
                           ? std::max(0.0, layers[layer][k]) : 0.0;
      lo.append(QPointF(x[k], base[k]));
      base[k] += v;
      up.append(QPointF(x[k], base[k]));
      y1 = std::max(y1, base[k]);
    }
    l.bounds = x.empty() ? QRectF() : corners(x.front(), 0, x.back(), y1);
    l.lower_points = std::move(lo);
    l.points = std::move(up);
    l.pending = true;
    ++layer;
  }
}

void MetricChart::set_reference(std::optional<double> y, const QString& label, const QColor& color) {
  reference_y_ = y;
  if (!y) {
    if (reference_) reference_->setVisible(false);
    return;
  }
  if (!reference_) {
    reference_ = make_line(LineStyle{color, 1.4, 1.0, Qt::DashLine, true, false});
    chart()->addSeries(reference_);
    reference_->attachAxis(x_);
    reference_->attachAxis(y_);
  }
  reference_->setName(label);
  reference_->setVisible(true);
}

int MetricChart::point_count(int line) const {
  if (line < 0 || line >= line_count()) return 0;
  const Line& l = lines_[line];
  if (l.pending) return static_cast<int>(l.points.size());
  return l.area ? static_cast<int>(l.upper->count()) : l.shown;  // data points, not split_tall()'s pieces
}

void MetricChart::set_axis_titles(const QString& x, const QString& y, const QString& y_right) {
  x_->setTitleText(x);
  y_->setTitleText(y);
  if (y_right_) y_right_->setTitleText(y_right);
}

void MetricChart::set_title(const QString& title) {
  title_ = title;
  chart()->setTitle(note_.isEmpty() ? QStringLiteral("<b>%1</b>").arg(title_.toHtmlEscaped())
                                    : QStringLiteral("<b>%1</b> <span style='font-weight:normal; color:%2'>%3</span>")
                                          .arg(title_.toHtmlEscaped(), muted_text_color().name(), note_.toHtmlEscaped()));
}

void MetricChart::set_note(const QString& note) {
  if (note == note_) return;
  note_ = note;
  set_title(title_);
}

void MetricChart::rescale() {
  QRectF left, right;
  for (const Line& l : lines_) {
    if (!l.series->isVisible()) continue;
    (l.right ? right : left) = unite(l.right ? right : left, l.bounds);
  }
  const QRectF all = unite(left, right);
  flush_pending(true);
  struct Flush {  // whatever path leaves, the lines get their points
    MetricChart* c;
    ~Flush() { c->flush_pending(false); }
  } flush{this};
  if (all.isNull()) return;
  double x0 = all.left(), x1 = all.right();
  if (zoom_) std::tie(x0, x1) = *zoom_;
  if (!std::isfinite(x0) || !std::isfinite(x1)) return;
  // One point (a zero-width box of 1e-300, see corners()) or a zero-width zoom: show one unit.
  if (x1 - x0 < 1e-9 * std::max(1.0, std::abs(x0))) x1 = x0 + 1;
  // Ticks at round values (1, 2 or 5 x 10^k apart), never at 1.4 steps. Qt lays ticks out on
  // every setter, walking from the anchor in interval steps: the old interval must never meet a
  // wider new range (2e-301 apart over 5 steps is 10^301 ticks), so ticks are fixed while the
  // range changes, and the anchor sits next to the range start.
  const double raw = (x1 - x0) / 5.0, mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double nice = raw / mag < 1.5 ? mag : raw / mag < 3.5 ? 2 * mag : raw / mag < 7.5 ? 5 * mag : 10 * mag;
  x_->setTickType(QValueAxis::TicksFixed);
  x_->setRange(x0, x1);
  x_->setTickInterval(nice);
  x_->setTickAnchor(std::floor(x0 / nice) * nice);
  x_->setTickType(QValueAxis::TicksDynamic);
  if (!left.isNull()) {
    double lo = left.top(), hi = left.bottom();
    if (reference_y_ && reference_ && reference_->isVisible()) {
      hi = std::max(hi, *reference_y_);
      reference_->replace(QList<QPointF>{{x0, *reference_y_}, {x1, *reference_y_}});
    }
    // Rates, times and sizes start at zero; a loss or a learning rate is read by its shape.
    fit_axis(y_, lo, hi, lo >= 0 && lo < 0.35 * hi);
  }
  if (y_right_ && !right.isNull()) fit_axis(y_right_, right.top(), right.bottom(), right.top() >= 0);
}

void MetricChart::set_zoom(std::optional<std::pair<double, double>> range) {
  zoom_ = range;
  rescale();
}

void MetricChart::reset_zoom() {
  zoom_.reset();
  rescale();
}

void MetricChart::mousePressEvent(QMouseEvent* e) {
  if (e->button() == Qt::RightButton) {  // QChartView would zoom out one step; we go back to all
    const bool was = zoomed();
    reset_zoom();
    if (was) Q_EMIT zoom_reset();
    e->accept();
    return;
  }
  QChartView::mousePressEvent(e);
}

void MetricChart::mouseReleaseEvent(QMouseEvent* e) {
  if (e->button() == Qt::RightButton) {
    e->accept();
    return;
  }
  const double before0 = x_->min(), before1 = x_->max();
  QChartView::mouseReleaseEvent(e);  // the rubber band zooms the axes
  if (x_->min() != before0 || x_->max() != before1) {
    zoom_ = std::make_pair(x_->min(), x_->max());
    Q_EMIT x_range_requested(x_->min(), x_->max());
  }
}

void MetricChart::mouseDoubleClickEvent(QMouseEvent* e) {
  const bool was = zoomed();
  reset_zoom();
  if (was) Q_EMIT zoom_reset();
  e->accept();
}

bool MetricChart::save_png(const QString& path) {
  return save_widget_png(this, path);
}

void MetricChart::apply_theme() {
  QChart* c = chart();
  const QColor text = palette().color(QPalette::WindowText);
  const QColor grid = border_color();
  c->setBackgroundBrush(card_color());
  c->setBackgroundPen(QPen(border_color(), 1));
  c->setPlotAreaBackgroundVisible(false);
  c->setTitleBrush(text);
  c->legend()->setLabelColor(text);
  QFont tf = font();
  tf.setPointSizeF(tf.pointSizeF() * 1.0);
  c->setTitleFont(tf);
  for (QValueAxis* a : {x_, y_, y_right_}) {
    if (!a) continue;
    a->setLabelsColor(muted_text_color());
    a->setTitleBrush(muted_text_color());
    a->setGridLineColor(grid);
    a->setLinePenColor(grid);
    a->setMinorGridLineColor(grid.lighter(110));
    QFont f = font();
    f.setPointSizeF(f.pointSizeF() * 0.85);
    a->setLabelsFont(f);
    a->setTitleFont(f);
  }
  QFont lf = font();
  lf.setPointSizeF(lf.pointSizeF() * 0.85);
  c->legend()->setFont(lf);
  setBackgroundBrush(palette().window());
  set_title(title_);
}

std::vector<store::Point> smooth(const std::vector<store::Point>& points, double weight) {
  if (weight <= 0 || points.empty()) return points;
  weight = std::min(weight, 0.999);
  std::vector<store::Point> out;
  out.reserve(points.size());
  double s = 0, debias = 1;
  for (const store::Point& p : points) {
    if (!std::isfinite(p.y)) continue;
    s = weight * s + (1 - weight) * p.y;
    debias *= weight;
    out.push_back({p.x, s / (1 - debias)});
  }
  return out;
}

}  // namespace meshwork::ui
