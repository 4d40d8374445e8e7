#include "ui/bar_chart.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QGraphicsLayout>
#include <QGraphicsLineItem>
#include <QGraphicsScene>
#include <QHorizontalStackedBarSeries>
#include <QLegend>
#include <QPainter>
#include <QValueAxis>
#include <algorithm>

#include "ui/theme.h"

namespace meshwork::ui {

BarChart::BarChart(const QString& title, Kind kind, QWidget* parent) : QChartView(parent), kind_(kind), title_(title) {
  auto* c = new QChart;
  c->setAnimationOptions(QChart::NoAnimation);
  c->layout()->setContentsMargins(0, 0, 0, 0);
  c->setMargins(QMargins(6, 4, 8, 4));
  c->setBackgroundRoundness(4);
  c->legend()->setAlignment(Qt::AlignTop);
  setChart(c);
  setRenderHint(QPainter::Antialiasing, true);
  setMinimumSize(180, 140);
  // A chart changes as a whole (axes, labels, data): repaint the viewport as one rectangle. The
  // default (the union of every changed item's rectangle) makes the painter clip to a region of
  // many rectangles, through which Qt's raster engine draws each grid line span by span.
  setViewportUpdateMode(QGraphicsView::FullViewportUpdate);
  // Grid and axis lines (most of a repaint: Qt strokes each antialiased line pixel by pixel) paint
  // into their own cached pixmaps, redrawn when they change: a live page moves a few bars per
  // frame. Qt Charts makes new lines as it lays out: each change of the scene caches the new ones.
  // (Text items are left alone: cached, Qt Charts' labels and titles went blank.)
  connect(scene(), &QGraphicsScene::changed, this, [this] {
    for (QGraphicsItem* item : scene()->items())
      if (item->type() == QGraphicsLineItem::Type && item->cacheMode() == QGraphicsItem::NoCache)
        item->setCacheMode(QGraphicsItem::DeviceCoordinateCache);
  });
  apply_theme();
}

void BarChart::set_data(const QStringList& categories, const std::vector<Set>& sets, const QString& unit) {
  QChart* c = chart();
  double top = 0;
  {
    std::vector<double> stack(static_cast<size_t>(categories.size()), 0.0);
    for (const Set& s : sets)
      for (int i = 0; i < categories.size(); ++i) {
        const double v = i < static_cast<int>(s.values.size()) ? std::max(0.0, s.values[static_cast<size_t>(i)]) : 0.0;
        stack[static_cast<size_t>(i)] += v;
        top = std::max(top, kind_ == Kind::grouped ? v : stack[static_cast<size_t>(i)]);
      }
  }
  std::vector<std::pair<QString, QColor>> names;
  for (const Set& s : sets) names.emplace_back(s.name, s.color);
  const auto shown = c->series();
  // The same bars with new values that the value axis still fits well: move them.
  if (categories == categories_ && names == sets_ && shown.size() == 1 && top * 1.08 <= axis_max_ && top > 0.6 * axis_max_) {
    if (unit != unit_) {
      unit_ = unit;
      for (QAbstractAxis* a : c->axes())
        if (qobject_cast<QValueAxis*>(a)) a->setTitleText(unit);
    }
    const auto bar_sets = static_cast<QAbstractBarSeries*>(shown.front())->barSets();
    for (size_t k = 0; k < sets.size() && k < static_cast<size_t>(bar_sets.size()); ++k)
      for (int i = 0; i < categories.size(); ++i) {
        const double v = i < static_cast<int>(sets[k].values.size()) ? std::max(0.0, sets[k].values[static_cast<size_t>(i)]) : 0.0;
        if (bar_sets[static_cast<qsizetype>(k)]->at(i) != v) bar_sets[static_cast<qsizetype>(k)]->replace(i, v);
      }
    return;
  }
  categories_ = categories;
  sets_ = names;
  unit_ = unit;
  c->removeAllSeries();
  for (QAbstractAxis* a : c->axes()) {
    c->removeAxis(a);
    delete a;
  }
  QAbstractBarSeries* series = kind_ == Kind::grouped ? static_cast<QAbstractBarSeries*>(new QBarSeries)
                                                      : new QHorizontalStackedBarSeries;
  bars_ = 0;
  for (const Set& s : sets) {
    auto* set = new QBarSet(s.name);
    set->setColor(s.color);
    set->setBorderColor(s.color.darker(120));
    for (int i = 0; i < categories.size(); ++i) {
      const double v = i < static_cast<int>(s.values.size()) ? std::max(0.0, s.values[static_cast<size_t>(i)]) : 0.0;
      *set << v;
      ++bars_;
    }
    series->append(set);
  }
  series->setBarWidth(kind_ == Kind::grouped ? 0.8 : 0.65);
  c->addSeries(series);
  auto* cats = new QBarCategoryAxis;
  cats->append(categories);
  auto* values = new QValueAxis;
  values->setRange(0, top > 0 ? top * 1.08 : 1);
  values->applyNiceNumbers();
  axis_max_ = top > 0 ? values->max() : 0;
  values->setLabelFormat("%.3g");
  values->setTitleText(unit);
  if (kind_ == Kind::grouped) {
    c->addAxis(cats, Qt::AlignBottom);
    c->addAxis(values, Qt::AlignLeft);
  } else {
    c->addAxis(cats, Qt::AlignLeft);
    c->addAxis(values, Qt::AlignBottom);
  }
  series->attachAxis(cats);
  series->attachAxis(values);
  apply_theme();
}

bool BarChart::save_png(const QString& path) {
  return save_widget_png(this, path);
}

void BarChart::apply_theme() {
  QChart* c = chart();
  const QColor text = palette().color(QPalette::WindowText);
  c->setBackgroundBrush(card_color());
  c->setBackgroundPen(QPen(border_color(), 1));
  c->setTitleBrush(text);
  c->setTitleFont(font());
  c->setTitle(QStringLiteral("<b>%1</b>").arg(title_.toHtmlEscaped()));
  c->legend()->setLabelColor(text);
  QFont small = font();
  small.setPointSizeF(small.pointSizeF() * 0.85);
  c->legend()->setFont(small);
  for (QAbstractAxis* a : c->axes()) {
    a->setLabelsColor(muted_text_color());
    a->setTitleBrush(muted_text_color());
    a->setGridLineColor(border_color());
    a->setLinePenColor(border_color());
    a->setLabelsFont(small);
    a->setTitleFont(small);
  }
  setBackgroundBrush(palette().window());
}

}  // namespace meshwork::ui
