#include "ui/bandwidth_chart.h"

#include <QCategoryAxis>
#include <QChart>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QPainter>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "ui/chart_style.h"
#include "ui/theme.h"

namespace meshwork::ui {

namespace {
constexpr int kMinLog2 = 12;  // 4 KiB
constexpr int kMaxLog2 = 24;  // 16 MiB

QString size_label(int log2_bytes) {
  if (log2_bytes >= 20) return QStringLiteral("%1 MiB").arg(1 << (log2_bytes - 20));
  if (log2_bytes >= 10) return QStringLiteral("%1 KiB").arg(1 << (log2_bytes - 10));
  return QStringLiteral("%1 B").arg(1 << log2_bytes);
}
}  // namespace

BandwidthChart::BandwidthChart(const QString& title, QWidget* parent) : QChartView(parent), title_(title) {
  QChart* c = install_card_chart(this, Qt::AlignRight);
  c->legend()->setShowToolTips(true);
  c->setTitle(QStringLiteral("<b>%1</b>").arg(title.toHtmlEscaped()));
  // x: log2 of the size, labelled at every other power of two.
  x_ = new QCategoryAxis(c);
  x_->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
  for (int e = kMinLog2; e <= kMaxLog2; e += 2) x_->append(size_label(e), e);
  x_->setRange(kMinLog2, kMaxLog2);
  x_->setTitleText(tr("message size x: bytes one rank sends (log scale)"));
  y_ = new QValueAxis(c);
  y_->setLabelFormat("%.4g");
  y_->setTickCount(5);
  y_->setRange(0, 1);
  c->addAxis(x_, Qt::AlignBottom);
  c->addAxis(y_, Qt::AlignLeft);
  setRenderHint(QPainter::Antialiasing, true);
  setViewportUpdateMode(QGraphicsView::FullViewportUpdate);
  setMinimumSize(260, 200);
  apply_theme();
  y_->setTitleText(tr("x / t(x), %1").arg(unit()));
}

QString BandwidthChart::unit() const { return unit_scale_ >= 1e9 ? QStringLiteral("GB/s") : QStringLiteral("MB/s"); }

void BandwidthChart::set_curves(const std::vector<Curve>& curves) {
  for (QLineSeries* s : proxies_) {
    chart()->removeSeries(s);
    delete s;
  }
  proxies_.clear();
  plot_.series().clear();
  double top = 0;
  for (const Curve& c : curves)
    for (double v : c.bytes_per_s)
      if (std::isfinite(v)) top = std::max(top, v);
  unit_scale_ = top >= 1e10 ? 1e9 : 1e6;
  for (const Curve& c : curves) {
    QPen pen(c.color, 1.8, c.pen);
    pen.setCapStyle(Qt::RoundCap);
    pen.setJoinStyle(Qt::RoundJoin);
    auto* proxy = new QLineSeries(chart());
    proxy->setName(c.name);
    proxy->setPen(pen);
    chart()->addSeries(proxy);
    proxy->attachAxis(x_);
    proxy->attachAxis(y_);
    proxies_.push_back(proxy);
    PlotSeries ps;
    ps.pen = pen;
    for (size_t i = 0; i < c.bytes.size() && i < c.bytes_per_s.size(); ++i)
      if (c.bytes[i] > 0 && std::isfinite(c.bytes_per_s[i]))
        ps.points.emplace_back(std::log2(c.bytes[i]), c.bytes_per_s[i] / unit_scale_);
    ps.sorted = std::is_sorted(ps.points.begin(), ps.points.end(),
                               [](const QPointF& a, const QPointF& b) { return a.x() < b.x(); });
    plot_.series().push_back(std::move(ps));
  }
  y_->setRange(0, top > 0 ? top / unit_scale_ * 1.05 : 1);
  y_->applyNiceNumbers();
  y_->setTitleText(tr("x / t(x), %1").arg(unit()));
  data_changed();
}

QStringList BandwidthChart::legend_names() const {
  QStringList names;
  for (const QLineSeries* s : proxies_) names << s->name();
  return names;
}

PlotRanges BandwidthChart::ranges() const { return PlotRanges{x_->min(), x_->max(), y_->min(), y_->max(), 0, 0, false}; }

void BandwidthChart::data_changed() {
  plot_.changed();
  viewport()->update();
}

QPointF BandwidthChart::map_to_widget(double bytes, double bytes_per_s) const {
  const QPointF data(std::log2(bytes), bytes_per_s / unit_scale_);
  const QPointF scene_pos = chart()->mapToScene(PlotLayer::map(data, false, chart()->plotArea(), ranges()));
  return viewport()->mapTo(this, viewportTransform().map(scene_pos));
}

void BandwidthChart::paintEvent(QPaintEvent* e) {
  QChartView::paintEvent(e);  // the frame: axes, labels, legend (the proxies hold no points)
  QPainter p(viewport());
  p.setRenderHints(renderHints());
  p.setTransform(chart()->sceneTransform() * viewportTransform());
  plot_.paint(&p, chart()->plotArea(), ranges());
}

bool BandwidthChart::save_png(const QString& path) { return save_widget_png(this, path); }

void BandwidthChart::apply_theme() {
  apply_chart_theme(this, {x_, y_});
  plot_.changed();
  viewport()->update();
}

}  // namespace meshwork::ui
