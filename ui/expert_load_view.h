// The Monitor's "Expert load" card for a mixture of experts: which experts the router feeds, step
// by step, per sparse layer (a layer picker). A heat map of experts (rows) by steps (columns),
// each cell coloured by the expert's tokens over the step's mean (1 = its fair share; blue below,
// the expert colour above, on a log scale), a strip under it with each step's max / mean (the
// imbalance the planner's estimate assumes), a legend, and the aux loss. The cells come from the
// frame (store::ExpertLoadMap, one query on the store worker); the card never reads the store.
#pragma once

#include <QWidget>
#include <optional>
#include <vector>

#include "core/store/expert_load.h"

class QComboBox;
class QLabel;

namespace meshwork::ui {

class ExpertHeatMap;

class ExpertLoadView : public QWidget {
  Q_OBJECT
 public:
  explicit ExpertLoadView(QWidget* parent = nullptr);

  // The sparse layers of the run (the picker's entries) and the map of the chosen one (the layer
  // the picker shows is the map's). Empty layers: a dense run (the owner hides the card).
  void set_map(const std::vector<int>& layers, const std::optional<store::ExpertLoadMap>& map);
  void apply_theme();

  QComboBox* layer_picker() const { return layers_; }
  QLabel* imbalance_label() const { return imbalance_; }
  QLabel* aux_loss_label() const { return aux_; }
  ExpertHeatMap* heat_map() const { return map_; }

 Q_SIGNALS:
  void layer_chosen(int layer);

 private:
  QLabel* title_;
  QComboBox* layers_;
  QLabel* imbalance_;
  QLabel* aux_;
  ExpertHeatMap* map_;
};

// The painted part: cells, the imbalance strip, the legend. What a cell shows is readable for
// tests and tooltips (ratio(), tooltip()).
class ExpertHeatMap : public QWidget {
  Q_OBJECT
 public:
  explicit ExpertHeatMap(QWidget* parent = nullptr);
  void set_map(const std::optional<store::ExpertLoadMap>& map);
  const std::optional<store::ExpertLoadMap>& map() const { return map_; }
  int columns() const { return map_ ? static_cast<int>(map_->columns.size()) : 0; }
  int experts() const { return map_ ? map_->experts : 0; }
  // tokens / the column's mean for (column, expert): the cell's colour value.
  double ratio(int column, int expert) const;
  QColor cell_color(int column, int expert) const;
  // "steps 12–15 · expert 3: 175 tokens, 2.73 × mean · max/mean 2.78 · aux loss 2.31"
  QString tooltip(int column, int expert) const;
  // The cell under a point of the widget, or (-1, -1).
  std::pair<int, int> cell_at(QPoint p) const;
  // The rectangle of a cell (for tests and tooltips).
  QRect cell_rect(int column, int expert) const;

  // The colour of a load ratio: blue under 1, the card's neutral at 1, the expert colour above
  // (log2, clamped at 1/4 and 4).
  static QColor ratio_color(double ratio, bool dark);

 protected:
  void paintEvent(QPaintEvent* e) override;
  bool event(QEvent* e) override;

 private:
  QRect cells_area() const;
  QRect strip_area() const;
  std::optional<store::ExpertLoadMap> map_;
  std::vector<std::vector<double>> ratios_;  // per column, per expert
};

}  // namespace meshwork::ui
