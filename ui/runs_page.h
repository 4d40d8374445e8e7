// Runs mode: every run in the store as a sortable, filterable table (rename in place or with F2,
// delete with confirmation, export a run's points as CSV, import a recorded metrics file), and
// a run's own page (monitor_page.h) when one is opened or launched.
#pragma once

#include <QList>
#include <QUrl>
#include <QWidget>
#include <vector>

#include "core/store/run_store.h"

class QCheckBox;
class QLineEdit;
class QPushButton;
class QSortFilterProxyModel;
class QStackedWidget;
class QTableView;
class QLabel;
class QScrollArea;

namespace meshwork::ui {

class MonitorPage;
class RunsModel;
class StoreWorker;

class RunsPage : public QWidget {
  Q_OBJECT
 public:
  RunsPage(StoreWorker* worker, QWidget* parent = nullptr);

  RunsModel* model() const { return model_; }
  QSortFilterProxyModel* proxy() const { return proxy_; }
  QTableView* table() const { return table_; }
  QLineEdit* filter() const { return filter_; }
  MonitorPage* monitor() const { return monitor_; }

  void open_run(store::RunId id);  // shows the run's page
  void show_list();
  bool showing_run() const;
  std::vector<store::RunId> selected_runs() const;
  // The run the toolbar's Stop acts on: the run shown when it is live, else the one live run
  // selected in the table; 0 when there is none.
  store::RunId stoppable_run() const;
  void select_runs(const std::vector<store::RunId>& ids);

  // Actions (also on the buttons); tests call them with the answers a dialog would give.
  void delete_selected(bool confirm = true);
  void rename_selected();
  void export_selected(const QString& path = {});
  // `path`: a metrics, event or trainer_state file, or a run directory (a TensorBoard log
  // folder: every file below it, as `meshwork runs import DIR`). Empty: asks for a file.
  void import_metrics(const QString& path = {}, bool follow = false);
  void import_folder();  // asks for a run directory (and whether to follow it)
  // Files and directories dropped on the page, each imported as a run (local ones only);
  // followed while written when "Follow dropped runs" is checked.
  void import_dropped(const QList<QUrl>& urls);
  QCheckBox* follow_drops() const { return follow_drops_; }

 Q_SIGNALS:
  void compare_requested(const std::vector<meshwork::store::RunId>& runs);
  void status_message(const QString& text);
  void stoppable_run_changed();  // the selection, the page shown or a run's status changed

 private:
  void update_buttons();
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;

  StoreWorker* worker_;
  RunsModel* model_;
  QSortFilterProxyModel* proxy_;
  QStackedWidget* stack_;
  QTableView* table_;
  QLineEdit* filter_;
  QLabel* count_;
  QPushButton* open_;
  QPushButton* compare_;
  QPushButton* rename_;
  QPushButton* delete_;
  QPushButton* export_;
  QCheckBox* follow_drops_;
  QScrollArea* monitor_scroll_;
  MonitorPage* monitor_;
};

}  // namespace meshwork::ui
