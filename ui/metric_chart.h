// Meshwork's chart widget: the one place that knows Qt Charts (deprecated from Qt 6.10 in favour of
// Qt Graphs; a later move touches this file, plot_item.* and bar_chart.*). Qt Charts draws the
// frame -- axes, ticks, title, legend (through empty proxy series that carry each line's pen) --
// and a PlotLayer (plot_layer.h) draws the data over its plot area: Qt Charts never thins data,
// rebuilds a QPainterPath and a stroked hit-test shape per line on every replace() and range
// change, and strokes wide lines segment by segment (~200 ms per live frame on a long run).
// It only ever receives decimated points (min/max/last per pixel column, from the store).
//
// Painting: the frame is rendered from the chart's scene into a cached pixmap when the scene
// changes (an axis range, a title, the legend, a resize), and the data layer is drawn over it.
// A live frame that changes only data repaints one blit and one data layer; the frame (text,
// grid, ticks) is laid out and painted again only when it changed.
//
// Zoom: drag a horizontal rubber band; the chart emits x_range_requested() and its owner
// re-queries the store at full resolution for that range. Right-click or double-click (or
// reset_zoom()) returns to the whole run.
#pragma once

#include <QChartView>
#include <QColor>
#include <QPixmap>
#include <QString>
#include <QStringList>
#include <array>
#include <optional>
#include <vector>

#include "core/store/run_store.h"
#include "ui/plot_layer.h"

class QAbstractSeries;
class QLineSeries;
class QValueAxis;

namespace meshwork::ui {


class MetricChart : public QChartView {
  Q_OBJECT
 public:
  explicit MetricChart(const QString& title, QWidget* parent = nullptr);

  struct LineStyle {
    QColor color;
    qreal width = 1.6;
    qreal opacity = 1.0;   // raw curves behind a smoothed one are drawn faint
    Qt::PenStyle pen = Qt::SolidLine;
    bool legend = true;
    bool right_axis = false;  // plotted against the secondary y axis (e.g. MFU next to tokens/s)
  };
  int add_line(const QString& name, const LineStyle& style);
  // A line's colour in a new theme (its width, dash and opacity stay).
  void set_line_color(int line, const QColor& color);
  // Whether a line has an entry in the legend (e.g. eval loss only once there is one).
  void set_line_in_legend(int line, bool shown);
  QStringList legend_names() const;  // the names the legend shows, in order
  // A layer of a stacked area chart: layers are stacked in the order they are added.
  int add_area(const QString& name, const QColor& color);
  void clear_series();
  int line_count() const { return static_cast<int>(lines_.size()); }

  // Replaces a line's points (already decimated). `scale` multiplies y (e.g. bytes -> GiB).
  // Points equal to those shown change nothing (the chart is not drawn again). Call rescale()
  // after a batch of updates.
  void set_points(int line, const std::vector<store::Point>& points, double scale = 1.0);
  // Stacked layers on one shared x grid: layers[i][k] is layer i's value at x[k].
  void set_stack(const std::vector<double>& x, const std::vector<std::vector<double>>& layers);
  // A horizontal reference line (e.g. device capacity); nullopt hides it.
  void set_reference(std::optional<double> y, const QString& label, const QColor& color);
  // Vertical marks at x values where something changed (a re-planned run's new shape), each
  // labelled at the top of the plot, drawn over the data. Setting the marks shown changes nothing.
  struct XMark {
    double x = 0;
    QString label;
    QColor color;
    bool operator==(const XMark&) const = default;
  };
  void set_marks(std::vector<XMark> marks);
  const std::vector<XMark>& marks() const { return marks_; }
  int point_count(int line) const;  // points currently shown by a line (tests)
  // Where the chart draws a data point of `line` (widget coordinates; tests).
  QPointF map_to_widget(QPointF data, int line) const;
  const PlotLayer& plot() const { return plot_; }
  int64_t frames_rendered() const { return frames_rendered_; }  // times the frame cache was redrawn

  void set_axis_titles(const QString& x, const QString& y, const QString& y_right = {});
  void set_title(const QString& title);
  void set_note(const QString& note);  // small muted text under the title
  // Fits the axes to the data (x: the zoomed range while zoomed). Call after a batch of updates.
  void rescale();

  // A live run grows at the right: the x axis then ends at the next quarter tick past the data,
  // so it (and its labels) is laid out again every few seconds instead of on every frame.
  void set_growing(bool growing);

  bool zoomed() const { return zoom_.has_value(); }
  std::optional<std::pair<double, double>> zoom_range() const { return zoom_; }
  void set_zoom(std::optional<std::pair<double, double>> range);  // without emitting
  void reset_zoom();
  bool save_png(const QString& path);  // the chart as shown, at 2x for crisp documents
  void apply_theme();                  // colours of the current light/dark theme

 Q_SIGNALS:
  void x_range_requested(double x_min, double x_max);  // the user zoomed
  void zoom_reset();                                   // the user went back to the whole run

 protected:
  void paintEvent(QPaintEvent* e) override;
  void resizeEvent(QResizeEvent* e) override;  // the x ticks: as many as the width has room for
  void mousePressEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;
  void mouseDoubleClickEvent(QMouseEvent* e) override;

 private:
  struct Line {
    QAbstractSeries* proxy = nullptr;  // empty QLineSeries / QAreaSeries: legend entry, axes' link
    bool right = false;
    bool area = false;
    QRectF bounds;  // of the data shown (x, y), empty when none
  };
  QLineSeries* make_proxy(const QPen& pen);
  void attach(QAbstractSeries* s, bool right);
  void set_x_range(double x0, double x1);
  void fit_y(QValueAxis* axis, double lo, double hi, bool from_zero);

  QValueAxis* x_;
  QValueAxis* y_;
  QValueAxis* y_right_ = nullptr;
  PlotLayer plot_;
  PlotRanges ranges() const;
  void data_changed();  // the layer is drawn again, only this chart's plot area repainted
  QPixmap frame_;  // what Qt Charts draws, kept until the scene changes
  bool frame_dirty_ = true;
  int64_t frames_rendered_ = 0;
  QLineSeries* reference_ = nullptr;  // its legend entry; the line is plot_'s last series
  std::optional<double> reference_y_;
  std::vector<Line> lines_;
  std::optional<std::pair<double, double>> zoom_;
  // Ranges last asked of the axes (before nice numbers), so unchanged ones are not set again.
  std::optional<std::array<double, 2>> x_asked_;
  QValueAxis* nice_;  // never shown: works out a y range's nice numbers without laying a chart out
  bool growing_ = false;
  QString title_, note_;
  std::vector<XMark> marks_;
  void paint_marks(QPainter& p);
};

// Exponential moving average with TensorBoard's debiasing (the first points are not pulled
// towards 0): s_k = a*s_{k-1} + (1-a)*y_k, shown as s_k / (1 - a^(k+1)). `weight` a in [0, 1).
std::vector<store::Point> smooth(const std::vector<store::Point>& points, double weight);

}  // namespace meshwork::ui
