// Meshwork's chart widget: the one place that knows Qt Charts (deprecated from Qt 6.10 in favour of
// Qt Graphs; a later move touches this file and stacked_bars.*). It only ever receives decimated
// points (min/max/last per pixel column, from the store) and hands them over with replace(), one
// call per line, animations off: Qt Charts never thins data and append() of a list emits a signal
// per point.
//
// Zoom: drag a horizontal rubber band; the chart emits x_range_requested() and its owner
// re-queries the store at full resolution for that range. Right-click or double-click (or
// reset_zoom()) returns to the whole run.
#pragma once

#include <QChartView>
#include <QColor>
#include <QString>
#include <optional>
#include <vector>

#include "core/store/run_store.h"

class QAbstractSeries;
class QAreaSeries;
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
  // A layer of a stacked area chart: layers are stacked in the order they are added.
  int add_area(const QString& name, const QColor& color);
  void clear_series();
  int line_count() const { return static_cast<int>(lines_.size()); }

  // Replaces a line's points (already decimated). `scale` multiplies y (e.g. bytes -> GiB).
  // The points reach Qt Charts at the next rescale() (call it after a batch of updates): Qt
  // Charts recomputes a line's whole geometry (its path and a stroked hit-test shape) on every
  // replace() and again on every axis range change, so rescale() empties the changed lines, sets
  // the axes, then hands each line its points once.
  void set_points(int line, const std::vector<store::Point>& points, double scale = 1.0);
  // Stacked layers on one shared x grid: layers[i][k] is layer i's value at x[k] (applied at the
  // next rescale(), as set_points()).
  void set_stack(const std::vector<double>& x, const std::vector<std::vector<double>>& layers);
  // A horizontal reference line (e.g. device capacity); nullopt hides it.
  void set_reference(std::optional<double> y, const QString& label, const QColor& color);
  int point_count(int line) const;  // points currently shown by a line (tests)

  void set_axis_titles(const QString& x, const QString& y, const QString& y_right = {});
  void set_title(const QString& title);
  void set_note(const QString& note);  // small muted text under the title
  // Fits the axes to the data (x: the zoomed range while zoomed). Call after a batch of updates.
  void rescale();

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
  void mousePressEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;
  void mouseDoubleClickEvent(QMouseEvent* e) override;

 private:
  struct Line {
    QAbstractSeries* series = nullptr;  // QLineSeries, or QAreaSeries for a stacked layer
    QLineSeries* upper = nullptr;
    QLineSeries* lower = nullptr;
    bool right = false;
    bool area = false;
    QRectF bounds;  // of the data shown (x, y), empty when none
    bool pending = false;             // points set, not yet handed to Qt Charts
    QList<QPointF> points, lower_points;  // the pending points (areas: upper, lower)
    int shown = 0;                        // data points handed to the line (before split_tall())
  };
  void flush_pending(bool before_axes);
  // Tall segments cut into collinear pieces of at most 24 pixel rows (see the .cpp).
  QList<QPointF> split_tall(const QList<QPointF>& points, const QValueAxis* y) const;
  QLineSeries* make_line(const LineStyle& style);

  QValueAxis* x_;
  QValueAxis* y_;
  QValueAxis* y_right_ = nullptr;
  QLineSeries* reference_ = nullptr;
  std::optional<double> reference_y_;
  std::vector<Line> lines_;
  std::optional<std::pair<double, double>> zoom_;
  QString title_, note_;
};

// Exponential moving average with TensorBoard's debiasing (the first points are not pulled
// towards 0): s_k = a*s_{k-1} + (1-a)*y_k, shown as s_k / (1 - a^(k+1)). `weight` a in [0, 1).
std::vector<store::Point> smooth(const std::vector<store::Point>& points, double weight);

}  // namespace meshwork::ui
