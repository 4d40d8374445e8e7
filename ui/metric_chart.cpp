#include "ui/metric_chart.h"

#include <QAreaSeries>
#include <QChart>
#include <QFontMetricsF>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QMouseEvent>
#include <QPainter>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "ui/chart_style.h"
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
// 1, 2 or 5 x 10^k, the nearest to `raw`.
double nice_step(double raw) {
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  return raw / mag < 1.5 ? mag : raw / mag < 3.5 ? 2 * mag : raw / mag < 7.5 ? 5 * mag : 10 * mag;
}
}  // namespace

MetricChart::MetricChart(const QString& title, QWidget* parent) : QChartView(parent), title_(title) {
  QChart* c = install_card_chart(this, Qt::AlignTop);
  c->legend()->setShowToolTips(true);
  x_ = new QValueAxis(c);
  y_ = new QValueAxis(c);
  x_->setLabelFormat("%.6g");
  y_->setLabelFormat("%.4g");
  x_->setTickCount(6);
  y_->setTickCount(5);
  c->addAxis(x_, Qt::AlignBottom);
  c->addAxis(y_, Qt::AlignLeft);
  nice_ = new QValueAxis(this);
  // Whatever changes in the scene (Qt Charts' items only: the data is not in it) redraws the frame.
  connect(scene(), &QGraphicsScene::changed, this, [this] { frame_dirty_ = true; });
  setRenderHint(QPainter::Antialiasing, true);
  setRubberBand(QChartView::HorizontalRubberBand);
  // A chart changes as a whole (axes, labels, data): repaint the viewport as one rectangle. The
  // default (the union of every changed item's rectangle) makes the painter clip to a region of
  // many rectangles, through which Qt's raster engine draws each grid line span by span.
  setViewportUpdateMode(QGraphicsView::FullViewportUpdate);
  // Tall enough for the title, the legend, a plot and a row of tick labels under it: shorter,
  // Qt Charts squeezes the x axis and elides its labels and title to "...".
  setMinimumSize(180, 220);
  set_title(title);
  apply_theme();
}

QLineSeries* MetricChart::make_proxy(const QPen& pen) {
  auto* s = new QLineSeries(chart());
  s->setPen(pen);
  return s;
}

void MetricChart::attach(QAbstractSeries* s, bool right) {
  chart()->addSeries(s);
  s->attachAxis(x_);
  if (!right) {
    s->attachAxis(y_);
    return;
  }
  if (!y_right_) {
    y_right_ = new QValueAxis(chart());
    y_right_->setLabelFormat("%.3g");
    y_right_->setTickCount(5);
    y_right_->setGridLineVisible(false);
    chart()->addAxis(y_right_, Qt::AlignRight);
    apply_theme();
  }
  s->attachAxis(y_right_);
}

int MetricChart::add_line(const QString& name, const LineStyle& style) {
  QColor color = style.color;
  color.setAlphaF(style.opacity);
  QPen pen(color, style.width, style.pen);
  pen.setCapStyle(Qt::SquareCap);
  pen.setJoinStyle(Qt::BevelJoin);
  QLineSeries* s = make_proxy(pen);
  s->setName(name);
  attach(s, style.right_axis);
  if (!style.legend)
    for (QLegendMarker* m : chart()->legend()->markers(s)) m->setVisible(false);
  PlotSeries ps;
  ps.pen = pen;
  ps.right = style.right_axis;
  auto& series = plot_.series();
  series.insert(series.begin() + static_cast<std::ptrdiff_t>(lines_.size()), std::move(ps));  // under the reference line
  lines_.push_back(Line{s, style.right_axis, false, {}});
  data_changed();
  return static_cast<int>(lines_.size()) - 1;
}

void MetricChart::set_line_color(int line, const QColor& color) {
  if (line < 0 || line >= line_count() || lines_[line].area) return;
  auto* proxy = static_cast<QLineSeries*>(lines_[line].proxy);
  QPen pen = proxy->pen();
  QColor c = color;
  c.setAlphaF(pen.color().alphaF());
  pen.setColor(c);
  proxy->setPen(pen);
  plot_.series()[static_cast<size_t>(line)].pen = pen;
  data_changed();
}

void MetricChart::set_line_in_legend(int line, bool shown) {
  if (line < 0 || line >= line_count()) return;
  for (QLegendMarker* m : chart()->legend()->markers(lines_[line].proxy))
    if (m->isVisible() != shown) m->setVisible(shown);
}

QStringList MetricChart::legend_names() const {
  QStringList out;
  for (QLegendMarker* m : chart()->legend()->markers())
    if (m->isVisible()) out << m->label();
  return out;
}

int MetricChart::add_area(const QString& name, const QColor& color) {
  auto* area = new QAreaSeries(new QLineSeries(chart()), new QLineSeries(chart()));
  area->setName(name);
  QColor fill = color;
  fill.setAlphaF(0.85);
  area->setBrush(fill);
  area->setPen(QPen(color.darker(115), 1.0));
  attach(area, false);
  PlotSeries ps;
  ps.area = true;
  ps.brush = fill;
  ps.pen = area->pen();
  auto& series = plot_.series();
  series.insert(series.begin() + static_cast<std::ptrdiff_t>(lines_.size()), std::move(ps));
  lines_.push_back(Line{area, false, true, {}});
  data_changed();
  return static_cast<int>(lines_.size()) - 1;
}

void MetricChart::clear_series() {
  chart()->removeAllSeries();  // deletes them
  lines_.clear();
  plot_.series().clear();
  data_changed();
  reference_ = nullptr;
  if (y_right_) {
    chart()->removeAxis(y_right_);
    delete y_right_;
    y_right_ = nullptr;
  }
}

void MetricChart::set_points(int line, const std::vector<store::Point>& points, double scale) {
  if (line < 0 || line >= line_count() || lines_[line].area) return;
  std::vector<QPointF> pts;
  pts.reserve(points.size());
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const store::Point& p : points) {
    const double y = p.y * scale;
    if (!std::isfinite(y) || !std::isfinite(p.x)) continue;  // a NaN loss has no place on a line
    pts.emplace_back(p.x, y);
    x0 = std::min(x0, p.x);
    x1 = std::max(x1, p.x);
    y0 = std::min(y0, y);
    y1 = std::max(y1, y);
  }
  PlotSeries& ps = plot_.series()[static_cast<size_t>(line)];
  if (pts == ps.points) return;  // the same picture: nothing to draw
  lines_[line].bounds = pts.empty() ? QRectF() : corners(x0, y0, x1, y1);
  ps.sorted = std::is_sorted(pts.begin(), pts.end(), [](const QPointF& a, const QPointF& b) { return a.x() < b.x(); });
  ps.points = std::move(pts);
  data_changed();
}

void MetricChart::set_stack(const std::vector<double>& x, const std::vector<std::vector<double>>& layers) {
  std::vector<double> base(x.size(), 0.0);
  size_t layer = 0;
  const bool sorted = std::is_sorted(x.begin(), x.end());
  bool changed = false;
  for (size_t i = 0; i < lines_.size(); ++i) {
    Line& l = lines_[i];
    if (!l.area) continue;
    std::vector<QPointF> lo, up;
    lo.reserve(x.size());
    up.reserve(x.size());
    double y1 = 0;
    for (size_t k = 0; k < x.size(); ++k) {
      const double v = layer < layers.size() && k < layers[layer].size() && std::isfinite(layers[layer][k])
                           ? std::max(0.0, layers[layer][k]) : 0.0;
      lo.emplace_back(x[k], base[k]);
      base[k] += v;
      up.emplace_back(x[k], base[k]);
      y1 = std::max(y1, base[k]);
    }
    ++layer;
    PlotSeries& ps = plot_.series()[i];
    if (up == ps.points && lo == ps.lower) continue;
    l.bounds = x.empty() ? QRectF() : corners(x.front(), 0, x.back(), y1);
    ps.lower = std::move(lo);
    ps.points = std::move(up);
    ps.sorted = sorted;
    changed = true;
  }
  if (changed) data_changed();
}

void MetricChart::set_reference(std::optional<double> y, const QString& label, const QColor& color) {
  reference_y_ = y;
  auto& series = plot_.series();
  const bool have = series.size() > lines_.size();
  if (!y) {
    if (reference_ && reference_->isVisible()) reference_->setVisible(false);
    if (have && series.back().visible) {
      series.back().visible = false;
      data_changed();
    }
    return;
  }
  QPen pen(color, 1.4, Qt::DashLine);
  pen.setCapStyle(Qt::SquareCap);
  if (!reference_) {
    reference_ = make_proxy(pen);
    attach(reference_, false);
  }
  if (reference_->name() != label) reference_->setName(label);
  if (reference_->pen() != pen) reference_->setPen(pen);
  reference_->setVisible(true);
  if (!have) {
    series.push_back(PlotSeries{});
    series.back().visible = false;
  }
  PlotSeries& ps = series.back();
  if (!ps.visible || ps.pen != pen || ps.points.empty() || ps.points.front().y() != *y) {
    ps.pen = pen;
    ps.visible = true;
    ps.points = {{-1e300, *y}, {1e300, *y}};  // across whatever range is shown
    ps.sorted = false;
    data_changed();
  }
}

int MetricChart::point_count(int line) const {
  if (line < 0 || line >= line_count()) return 0;
  return static_cast<int>(plot_.series()[static_cast<size_t>(line)].points.size());
}

QPointF MetricChart::map_to_widget(QPointF data, int line) const {
  const bool right = line >= 0 && line < line_count() && lines_[static_cast<size_t>(line)].right;
  const QPointF scene_pos = chart()->mapToScene(PlotLayer::map(data, right, chart()->plotArea(), ranges()));
  return viewport()->mapTo(this, viewportTransform().map(scene_pos));
}

void MetricChart::data_changed() {
  plot_.changed();
  const QRectF area = viewportTransform().mapRect(chart()->mapRectToScene(chart()->plotArea()));
  viewport()->update(area.toAlignedRect().adjusted(-2, -2, 2, 2));
}

PlotRanges MetricChart::ranges() const {
  PlotRanges r{x_->min(), x_->max(), y_->min(), y_->max(), 0, 0, y_right_ != nullptr};
  if (y_right_) r.r0 = y_right_->min(), r.r1 = y_right_->max();
  return r;
}

void MetricChart::paintEvent(QPaintEvent*) {
  QPainter p(viewport());
  const qreal dpr = p.device()->devicePixelRatio();
  const QSize size = viewport()->size();
  if (frame_dirty_ || frame_.size() != size * dpr || frame_.devicePixelRatio() != dpr) {
    frame_ = QPixmap(size * dpr);
    frame_.setDevicePixelRatio(dpr);
    frame_.fill(backgroundBrush().color());
    QPainter fp(&frame_);
    fp.setRenderHints(renderHints());
    scene()->render(&fp, QRectF(QPointF(0, 0), QSizeF(size)), mapToScene(viewport()->rect()).boundingRect());
    frame_dirty_ = false;
    ++frames_rendered_;
  }
  p.drawPixmap(0, 0, frame_);
  p.setRenderHints(renderHints());
  p.setTransform(chart()->sceneTransform() * viewportTransform());
  plot_.paint(&p, chart()->plotArea(), ranges());
  paint_marks(p);
}

void MetricChart::set_marks(std::vector<XMark> marks) {
  if (marks == marks_) return;
  marks_ = std::move(marks);
  viewport()->update();
}

void MetricChart::paint_marks(QPainter& p) {
  if (marks_.empty()) return;
  const QRectF area = chart()->plotArea();
  const PlotRanges r = ranges();
  if (r.x1 <= r.x0) return;
  p.save();
  p.setClipRect(area.adjusted(-1, -1, 1, 1));
  const QFont font = small_chart_font(this);
  p.setFont(font);
  const QFontMetricsF fm(font);
  for (const XMark& m : marks_) {
    if (m.x < r.x0 || m.x > r.x1) continue;
    const double x = PlotLayer::map(QPointF(m.x, r.y0), false, area, r).x();
    QPen pen(m.color, 1.5, Qt::DashLine);
    p.setPen(pen);
    p.drawLine(QPointF(x, area.top()), QPointF(x, area.bottom()));
    // The label reads to the right of its line, or to the left when the line is near the end.
    const double w = fm.horizontalAdvance(m.label);
    const double tx = x + 4 + w <= area.right() ? x + 4 : x - 4 - w;
    p.drawText(QPointF(tx, area.top() + fm.ascent() + 2), m.label);
  }
  p.restore();
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
    if (!l.proxy->isVisible()) continue;
    (l.right ? right : left) = unite(l.right ? right : left, l.bounds);
  }
  const QRectF all = unite(left, right);
  if (all.isNull()) return;
  double x0 = all.left(), x1 = all.right();
  if (zoom_) std::tie(x0, x1) = *zoom_;
  if (!std::isfinite(x0) || !std::isfinite(x1)) return;
  // One point (a zero-width box of 1e-300, see corners()) or a zero-width zoom: show one unit.
  if (x1 - x0 < 1e-9 * std::max(1.0, std::abs(x0))) x1 = x0 + 1;
  if (growing_ && !zoom_) {
    const double q = nice_step((x1 - x0) / 5.0) / 4;
    x1 = std::max(x1, std::ceil(x1 / q) * q);
  }
  set_x_range(x0, x1);
  if (!left.isNull()) {
    double lo = left.top(), hi = left.bottom();
    if (reference_y_ && reference_ && reference_->isVisible()) hi = std::max(hi, *reference_y_);
    // Rates, times and sizes start at zero; a loss or a learning rate is read by its shape.
    fit_y(y_, lo, hi, lo >= 0 && lo < 0.35 * hi);
  }
  if (y_right_ && !right.isNull()) fit_y(y_right_, right.top(), right.bottom(), right.top() >= 0);
}

// The nice range is worked out on an axis no chart shows; the real one is set only when that
// differs from what it shows (every setter lays the chart and its labels out again).
void MetricChart::fit_y(QValueAxis* axis, double lo, double hi, bool from_zero) {
  nice_->setTickCount(5);
  fit_axis(nice_, lo, hi, from_zero);
  if (axis->min() == nice_->min() && axis->max() == nice_->max() && axis->tickCount() == nice_->tickCount()) return;
  axis->setRange(nice_->min(), nice_->max());
  axis->setTickCount(nice_->tickCount());
}

void MetricChart::set_growing(bool growing) {
  if (growing == growing_) return;
  growing_ = growing;
  x_asked_.reset();
}

// Ticks at round values (1, 2 or 5 x 10^k apart), never at 1.4 steps. Qt lays ticks out on
// every setter, walking from the anchor in interval steps: the old interval must never meet a
// wider new range (2e-301 apart over 5 steps is 10^301 ticks), so ticks are fixed while the
// range changes, and the anchor sits next to the range start.
void MetricChart::set_x_range(double x0, double x1) {
  if (x_asked_ == std::array<double, 2>{x0, x1} && x_->min() == x0 && x_->max() == x1) return;
  x_asked_ = std::array<double, 2>{x0, x1};
  // Qt Charts gives each x label an equal share of the axis and elides what does not fit ("1..."
  // for 1000): about 80 px a tick, at most 5 intervals.
  const int intervals = std::clamp((width() - 80) / 80, 1, 5);
  const double nice = nice_step((x1 - x0) / intervals);
  const double anchor = std::floor(x0 / nice) * nice;
  if (x_->tickInterval() == nice && x_->tickAnchor() == anchor && x_->tickType() == QValueAxis::TicksDynamic) {
    x_->setRange(x0, x1);  // the same ticks: one layout
    return;
  }
  x_->setTickType(QValueAxis::TicksFixed);
  x_->setRange(x0, x1);
  x_->setTickInterval(nice);
  x_->setTickAnchor(anchor);
  x_->setTickType(QValueAxis::TicksDynamic);
}

void MetricChart::resizeEvent(QResizeEvent* e) {
  QChartView::resizeEvent(e);
  if (x_asked_) {  // the same range, ticks for the new width
    const auto [x0, x1] = *x_asked_;
    x_asked_.reset();
    set_x_range(x0, x1);
  }
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
  apply_chart_theme(this, {x_, y_, y_right_});
  chart()->setTitleFont(font());
  for (QValueAxis* a : {x_, y_, y_right_})
    if (a) a->setMinorGridLineColor(border_color().lighter(110));
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
