// Bandwidth over message size, on a log x axis: the calibration view's picture of each
// collective fit (CalibrationModel::curves). Built like MetricChart (metric_chart.h): Qt Charts
// draws the frame -- a category axis whose labels sit at powers of two (4 KiB ... 16 MiB) over
// log2 of the size, the value axis, the legend through empty proxy series carrying each line's
// pen -- and a PlotLayer (plot_layer.h) draws the lines over the plot area in the same log2
// coordinates. MetricChart's x axis is linear, hence this sibling; Qt Charts still never sees a
// data point.
#pragma once

#include <QChartView>
#include <QColor>
#include <QString>
#include <vector>

#include "ui/plot_layer.h"

class QCategoryAxis;
class QLineSeries;
class QValueAxis;

namespace meshwork::ui {

class BandwidthChart : public QChartView {
  Q_OBJECT
 public:
  explicit BandwidthChart(const QString& title, QWidget* parent = nullptr);

  struct Curve {
    QString name;
    QColor color;
    Qt::PenStyle pen = Qt::SolidLine;
    std::vector<double> bytes;        // x, > 0
    std::vector<double> bytes_per_s;  // y
  };
  // Replaces every line. The y axis is in MB/s, or GB/s when the fastest point reaches 10 GB/s.
  void set_curves(const std::vector<Curve>& curves);
  int series_count() const { return static_cast<int>(plot_.series().size()); }
  // What the layer draws: x = log2(bytes), y = bytes/s / unit_scale().
  const PlotLayer& plot() const { return plot_; }
  double unit_scale() const { return unit_scale_; }  // 1e6 (MB/s) or 1e9 (GB/s)
  QString unit() const;
  QStringList legend_names() const;
  // Where a point of (bytes, bytes/s) is drawn, in widget coordinates (tests).
  QPointF map_to_widget(double bytes, double bytes_per_s) const;
  bool save_png(const QString& path);
  void apply_theme();

 protected:
  void paintEvent(QPaintEvent* e) override;

 private:
  PlotRanges ranges() const;
  void data_changed();

  QCategoryAxis* x_;
  QValueAxis* y_;
  PlotLayer plot_;
  std::vector<QLineSeries*> proxies_;
  double unit_scale_ = 1e6;
  QString title_;
};

}  // namespace meshwork::ui
