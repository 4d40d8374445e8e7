// What the workbench's charts (MetricChart, BarChart, BandwidthChart) share: the chart frame of a
// card and the theme's colours and fonts on it.
#pragma once

#include <QList>
#include <Qt>

class QAbstractAxis;
class QChart;
class QChartView;
class QFont;
class QWidget;

namespace meshwork::ui {

// Gives `view` a new chart in a card's frame (no margins around it, rounded corners, the legend at
// `legend`) that never animates: every redraw is a full repaint. QChartView(parent) made a default
// chart of its own, which setChart() only releases (Qt's documentation: "users need to make sure
// the previous chart is deleted"): it is deleted here.
QChart* install_card_chart(QChartView* view, Qt::Alignment legend);

// The font of axis labels and titles and of legends: a little smaller than the widget's.
QFont small_chart_font(const QWidget* view);

// Puts the current theme on `view` and its chart: the card's background and border, the title and
// the legend in the text colour, each of `axes` (null ones skipped) with muted labels and titles
// in small_chart_font() and its lines in the border colour.
void apply_chart_theme(QChartView* view, const QList<QAbstractAxis*>& axes);

}  // namespace meshwork::ui
