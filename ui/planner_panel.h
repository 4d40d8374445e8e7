// The planner table: every valid shape ranked by core's planner, sortable, with per-axis comm
// shares drawn as small bars in the axis colours. Clicking (or Enter on) a row applies its shape.
#pragma once

#include <QWidget>

class QLabel;
class QSortFilterProxyModel;
class QTableView;

namespace meshwork::ui {

class PlanState;
class PlannerModel;

class PlannerPanel : public QWidget {
  Q_OBJECT
 public:
  explicit PlannerPanel(PlanState* state, QWidget* parent = nullptr);
  QTableView* table() const { return table_; }
  PlannerModel* model() const { return model_; }
  // Applies the shape of the row shown at `view_row` (after sorting) to the plan.
  void apply_row(int view_row);

 private:
  void refresh();

  PlanState* state_;
  PlannerModel* model_;
  QSortFilterProxyModel* proxy_;
  QTableView* table_;
  QLabel* status_;
};

}  // namespace meshwork::ui
