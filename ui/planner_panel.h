// The planner table: every valid shape ranked by core's planner, sortable, with per-axis comm
// shares drawn as small bars in the axis colours. Clicking (or Enter on) a row applies its shape.
// "Try the top K" asks for the K best predicted shapes that fit to be run for a few steps each
// (trials: the Trials tab, ui/trials_panel.h). For a mixture of experts, "Routing" picks what the
// ep shapes assume: the routing a stored run of the model measured (ui/routing_model.h), or balanced.
#pragma once

#include <QWidget>

#include "core/mesh.h"

class QComboBox;
class QLabel;
class QPushButton;
class QSortFilterProxyModel;
class QSpinBox;
class QTableView;

namespace meshwork::ui {

class PlanState;
class WrappedLabel;
class PlannerModel;
class RoutingModel;

class PlannerPanel : public QWidget {
  Q_OBJECT
 public:
  explicit PlannerPanel(PlanState* state, QWidget* parent = nullptr);
  QTableView* table() const { return table_; }
  PlannerModel* model() const { return model_; }
  // Applies the shape of the row shown at `view_row` (after sorting) to the plan.
  void apply_row(int view_row);
  // Makes `shape` the plan's: what a click on a row does (the Trials tab's Apply too).
  void apply_shape(const MeshShape& shape);

  QSpinBox* trial_count() const { return trial_count_; }  // K
  QSpinBox* trial_steps() const { return trial_steps_; }  // steps per trial
  QPushButton* try_button() const { return try_; }
  // While trials run, "Try the top K" waits.
  void set_trials_running(bool running);
  QString status_text() const;  // the line over the table (counts, basis, fit, oversubscription, routing)
  // The routing the ep shapes assume (shown, and chosen with routing_choice(), for an MoE model only).
  void set_routing(RoutingModel* routing);
  QComboBox* routing_choice() const { return routing_choice_; }

 Q_SIGNALS:
  void try_requested(int k, int steps);

 private:
  void refresh();
  void update_try();
  // What the rows' numbers rest on when that needs saying: uncalibrated (and the action that
  // calibrates), why the stored runs were not fitted, oversubscribed CPU nodes.
  QString basis_notice() const;
  // The routing the ep rows assume, each ep's two imbalances as the planner used them.
  QString routing_notice() const;
  void update_routing_choice();

  PlanState* state_;
  PlannerModel* model_;
  QSortFilterProxyModel* proxy_;
  QTableView* table_;
  WrappedLabel* status_;
  QSpinBox* trial_count_;
  QSpinBox* trial_steps_;
  QPushButton* try_;
  QLabel* routing_label_;
  QComboBox* routing_choice_;
  RoutingModel* routing_ = nullptr;
  bool trials_running_ = false;
};

}  // namespace meshwork::ui
