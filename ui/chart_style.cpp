#include "ui/chart_style.h"

#include <QAbstractAxis>
#include <QChart>
#include <QChartView>
#include <QGraphicsLayout>
#include <QLegend>

#include "ui/theme.h"

namespace meshwork::ui {

QChart* install_card_chart(QChartView* view, Qt::Alignment legend) {
  auto* c = new QChart;
  c->setAnimationOptions(QChart::NoAnimation);
  c->layout()->setContentsMargins(0, 0, 0, 0);
  c->setMargins(QMargins(6, 4, 8, 4));
  c->setBackgroundRoundness(4);
  c->legend()->setAlignment(legend);
  QChart* made_by_the_view = view->chart();
  view->setChart(c);
  delete made_by_the_view;
  return c;
}

QFont small_chart_font(const QWidget* view) {
  QFont small = view->font();
  small.setPointSizeF(small.pointSizeF() * 0.85);
  return small;
}

void apply_chart_theme(QChartView* view, const QList<QAbstractAxis*>& axes) {
  QChart* c = view->chart();
  const QColor text = view->palette().color(QPalette::WindowText);
  const QColor grid = border_color();
  const QFont small = small_chart_font(view);
  c->setBackgroundBrush(card_color());
  c->setBackgroundPen(QPen(grid, 1));
  c->setPlotAreaBackgroundVisible(false);
  c->setTitleBrush(text);
  c->legend()->setLabelColor(text);
  c->legend()->setFont(small);
  for (QAbstractAxis* a : axes) {
    if (!a) continue;
    a->setLabelsColor(muted_text_color());
    a->setTitleBrush(muted_text_color());
    a->setGridLineColor(grid);
    a->setLinePenColor(grid);
    a->setLabelsFont(small);
    a->setTitleFont(small);
  }
  view->setBackgroundBrush(view->palette().window());
}

}  // namespace meshwork::ui
