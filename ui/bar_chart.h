// Bars, for the two places a line over steps is the wrong picture: the per-rank breakdown of the
// latest step (stacked: each axis's collectives, then compute) and per-axis communication compared
// across runs (grouped). Like MetricChart, the only other file that knows Qt Charts.
#pragma once

#include <QChartView>
#include <QGraphicsTextItem>
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
  // `absent[i]`: category i has no values at all (another tool's run records no per-axis
  // times); its column says "not recorded" inside the plot, where there is room for the words,
  // rather than showing empty space that reads as zero.
  void set_data(const QStringList& categories, const std::vector<Set>& sets, const QString& unit,
                const std::vector<bool>& absent = {});
  int bar_count() const { return bars_; }  // sets x categories shown (tests)
  const QStringList& categories() const { return categories_; }
  // The "not recorded" notes shown, one per absent category, in chart coordinates (tests).
  struct AbsentNote {
    int category;
    QString text;
    QRectF rect;  // where the text is drawn
  };
  std::vector<AbsentNote> absent_notes() const;
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
  std::vector<bool> absent_;
  std::vector<std::pair<int, QGraphicsTextItem*>> absent_items_;  // owned by the chart
  void place_absent_notes();
};

}  // namespace meshwork::ui
