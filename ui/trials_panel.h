// The Plan mode's Trials tab: the trial groups in the store (newest first), the chosen group's
// shapes ranked by measured tokens/s beside the planner's prediction and the memory each rank
// really peaked at, Stop while trials run, and Apply, which makes the selected row's shape the
// plan's (as clicking a planner row does). Reads the store on the store worker only.
#pragma once

#include <QWidget>
#include <optional>

#include <vector>

#include "core/mesh.h"
#include "core/run_config.h"
#include "core/store/trials.h"
#include "ui/core_bridge.h"

class QComboBox;
class QLabel;
class QPushButton;
class QTableView;

namespace meshwork::ui {

class LaunchController;
class StoreWorker;
class TrialsController;
class TrialsModel;

class TrialsPanel : public QWidget {
  Q_OBJECT
 public:
  explicit TrialsPanel(QWidget* parent = nullptr);

  // The store to read groups from and the launcher trials run through. Unset, the panel uses the
  // window's own (its StoreWorker and LaunchController children), else opens the default store
  // and launches with a launcher of its own.
  void set_store(StoreWorker* store);
  void set_launcher(LaunchController* launcher);
  StoreWorker* store();
  LaunchController* launcher();

  TrialsController* controller() const { return controller_; }
  TrialsModel* model() const { return model_; }
  QTableView* table() const { return table_; }
  QComboBox* groups() const { return groups_; }
  QPushButton* apply_button() const { return apply_; }
  QPushButton* stop_button() const { return stop_; }
  QLabel* status_label() const { return status_; }

  // Tries the first `k` fitting rows of `rows` (the planner's) for `steps` steps each, as `base`
  // with each row's shape (TrialsController). False, with the reason shown, when it cannot.
  bool try_top(const RunConfig& base, const std::vector<PlanRow>& rows, int k, int steps);
  // Reads the list of groups again and shows `trial` (0: the newest).
  void refresh(store::TrialId trial = 0);
  // Shows the group `trial` (read on the store worker).
  void show_trial(store::TrialId trial);
  store::TrialId shown_trial() const { return shown_; }
  // Applies the shape of table row `row` (Apply, double-click).
  void apply_row(int row);

 Q_SIGNALS:
  void apply_requested(const meshwork::MeshShape& shape);
  void status_message(const QString& text);

 protected:
  void showEvent(QShowEvent* e) override;

 private:
  void update_buttons();

  TrialsController* controller_;
  TrialsModel* model_;
  StoreWorker* store_ = nullptr;
  LaunchController* launcher_ = nullptr;
  QComboBox* groups_;
  QTableView* table_;
  QLabel* status_;
  QPushButton* apply_;
  QPushButton* stop_;
  store::TrialId shown_ = 0;
  int list_generation_ = 0;
};

}  // namespace meshwork::ui
