// Bars, for the two places a line over steps is the wrong picture: the per-rank breakdown of the
// latest step (stacked: each axis's collectives, then compute) and per-axis communication compared
// across runs (grouped). Like MetricChart, the only other file that knows Qt Charts.
#pragma once

#include <QChartView>
#include <QColor>
#include <QStringList>
#include <vector>

namespace meshwork::ui {

class BarChart : public QChartView {
  Q_OBJECT
 public:
  enum class Kind { stacked_horizontal, grouped };
  BarChart(const QString& title, Kind kind, QWidget* parent = nullptr);

  struct Set {
    QString name;
    QColor color;
    std::vector<double> values;  // one per category
  };
  // Shows the bars. `unit` titles the value axis. The same categories and sets as shown (a live
  // page's every frame) only move the bars that changed: the chart, its axes and their labels
  // are built again only when the categories, the sets or the axis range change.
  void set_data(const QStringList& categories, const std::vector<Set>& sets, const QString& unit);
  int bar_count() const { return bars_; }  // sets x categories shown (tests)
  const QStringList& categories() const { return categories_; }
  bool save_png(const QString& path);
  void apply_theme();

 private:
  Kind kind_;
  QString title_;
  int bars_ = 0;
  QStringList categories_;
  std::vector<std::pair<QString, QColor>> sets_;
  QString unit_;
  double axis_max_ = 0;  // the value axis' maximum
};

}  // namespace meshwork::ui
