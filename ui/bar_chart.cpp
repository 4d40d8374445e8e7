#include "ui/bar_chart.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QGraphicsLineItem>
#include <QGraphicsScene>
#include <QHorizontalStackedBarSeries>
#include <QLegend>
#include <QPainter>
#include <QValueAxis>
#include <algorithm>

#include "ui/chart_style.h"
#include "ui/theme.h"

namespace meshwork::ui {

BarChart::BarChart(const QString& title, Kind kind, QWidget* parent) : QChartView(parent), kind_(kind), title_(title) {
  QChart* c = install_card_chart(this, Qt::AlignTop);
  setRenderHint(QPainter::Antialiasing, true);
  setMinimumSize(180, 200);  // shorter, Qt Charts elides the axis labels to "..."
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
  // The plot area moves when the widget resizes or the axes' labels change width.
  connect(c, &QChart::plotAreaChanged, this, [this] { place_absent_notes(); });
  apply_theme();
}

void BarChart::set_data(const QStringList& categories, const std::vector<Set>& sets, const QString& unit,
                        const std::vector<bool>& absent) {
  QChart* c = chart();
  std::vector<bool> absent_now(static_cast<size_t>(categories.size()), false);
  for (size_t i = 0; i < absent.size() && i < absent_now.size(); ++i) absent_now[i] = absent[i];
  if (absent_now != absent_) {
    absent_ = absent_now;
    for (auto& [i, item] : absent_items_) delete item;
    absent_items_.clear();
    for (size_t i = 0; i < absent_.size(); ++i) {
      if (!absent_[i]) continue;
      auto* item = new QGraphicsTextItem(c);
      item->setZValue(10);  // above the grid
      absent_items_.emplace_back(static_cast<int>(i), item);
    }
    apply_theme();
  }
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

void BarChart::place_absent_notes() {
  if (absent_items_.empty()) return;
  // A bar category axis spans -0.5 .. n - 0.5: category i owns the i-th equal slice of the plot
  // (bottom to top for horizontal bars). Each note is wrapped to its slice and centred in it.
  const QRectF plot = chart()->plotArea();
  const int n = std::max<int>(1, static_cast<int>(absent_.size()));
  for (auto& [i, item] : absent_items_) {
    QRectF slot;
    if (kind_ == Kind::grouped) {
      const double w = plot.width() / n;
      slot = QRectF(plot.left() + i * w, plot.top(), w, plot.height());
    } else {
      const double h = plot.height() / n;
      slot = QRectF(plot.left(), plot.bottom() - (i + 1) * h, plot.width(), h);
    }
    item->setTextWidth(std::max(10.0, slot.width() - 8));
    const QRectF r = item->boundingRect();
    item->setPos(slot.center().x() - r.width() / 2,
                 kind_ == Kind::grouped ? slot.bottom() - r.height() - 6 : slot.center().y() - r.height() / 2);
  }
}

std::vector<BarChart::AbsentNote> BarChart::absent_notes() const {
  std::vector<AbsentNote> out;
  for (const auto& [i, item] : absent_items_)
    out.push_back({i, item->toPlainText(), item->mapRectToParent(item->boundingRect())});
  return out;
}

bool BarChart::save_png(const QString& path) {
  return save_widget_png(this, path);
}

void BarChart::apply_theme() {
  QChart* c = chart();
  apply_chart_theme(this, c->axes());
  c->setTitleFont(font());
  c->setTitle(QStringLiteral("<b>%1</b>").arg(title_.toHtmlEscaped()));
  const QFont small = small_chart_font(this);
  for (auto& [i, item] : absent_items_) {
    item->setFont(small);
    item->setDefaultTextColor(muted_text_color());
    item->setHtml(QStringLiteral("<div align=\"center\"><i>%1</i></div>").arg(tr("not recorded")));
  }
  place_absent_notes();
}

}  // namespace meshwork::ui
