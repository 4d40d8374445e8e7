// The workbench's main window: mode bar on the left, the mode's workspace in the middle, the
// inspector on the right, a toolbar with the mode's one primary action, a status bar. Owns the
// models (cluster, plan) and wires them to the views; remembers its layout in QSettings.
#pragma once

#include "core/interop/ecosystem_config.h"

#include <QMainWindow>
#include <array>
#include <vector>

#include "core/run_config.h"

#include "ui/mode_bar.h"

class QAction;
class QLabel;
class QStackedWidget;
class QDockWidget;

namespace meshwork::ui {

class ClusterModel;
class ClusterPanel;
class RuntimePanel;
class SlurmPanel;
class Inspector;
class NodeProber;
class PlanPage;
class PlanState;
class ComparePage;
class LaunchController;
class RoutingModel;
class RunsPage;
class StoreWorker;
class BrowserServer;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  // `probe_local`: probe this machine at start (off in tests that build their own cluster).
  explicit MainWindow(bool probe_local = true, QWidget* parent = nullptr);
  ~MainWindow() override;

  ClusterModel* cluster() const { return cluster_; }
  PlanState* plan() const { return plan_; }
  NodeProber* prober() const { return prober_; }
  ClusterPanel* cluster_panel() const { return cluster_panel_; }
  SlurmPanel* slurm_panel() const { return slurm_panel_; }
  RuntimePanel* runtime_panel() const { return runtime_panel_; }
  PlanPage* plan_page() const { return plan_page_; }
  Inspector* inspector() const { return inspector_; }
  QAction* launch_action() const { return primary_action(Mode::plan); }
  QAction* stop_action() const { return primary_action(Mode::runs); }
  RunsPage* runs_page() const { return runs_page_; }
  ComparePage* compare_page() const { return compare_page_; }
  LaunchController* launcher() const { return launcher_; }
  StoreWorker* store_worker() const { return store_; }
  RoutingModel* routing() const { return routing_; }  // what the planner's ep shapes assume
  // Follows again every run the store marks running and that has a launch record (after the
  // workbench was closed): read on the store worker, attached when the answer arrives.
  void attach_running();
  // Launches the plan's configuration on the cluster's nodes and opens the run's live page.
  void launch_from_plan();
  QAction* probe_action() const { return primary_action(Mode::cluster); }
  // The toolbar's one action for `mode`: probe, launch, stop, compare.
  QAction* primary_action(Mode mode) const { return primary_[static_cast<size_t>(mode)]; }
  void set_mode(Mode mode) { mode_bar_->set_mode(mode); }
  Mode mode() const { return mode_bar_->mode(); }

  bool load_config(const QString& path);  // errors go to a message box and the status bar
  bool save_config(const QString& path);
  // An Accelerate / Axolotl YAML or torchtitan TOML pre-fills model, mesh and training settings;
  // what the file held that Meshwork does not use is listed in the status bar and a message.
  bool import_ecosystem_config(const QString& path);
  // The planned shape on the current cluster, for EcosystemExportDialog; an Error while the
  // shape is not valid.
  Result<interop::ExportRequest> ecosystem_export_request() const;
  void set_dark(bool dark);
  // View -> Serve in the browser: `meshwork serve` on this store (127.0.0.1, a free port), then
  // the default browser opens it (unless set_open_browser(false): tests).
  void serve_in_browser();
  BrowserServer* browser_server() const { return browser_server_; }
  void set_open_browser(bool open) { open_browser_ = open; }

 protected:
  void closeEvent(QCloseEvent* e) override;

 private:
  void build_actions();
  void on_mode(Mode mode);
  void sync_cluster_to_plan();
  void update_launch_state();
  bool runtime_error();
  void restore_settings();
  void save_settings();
  void open_model_config();
  void open_model_directory();
  void show_shortcuts();
  void show_about();
  void wire_runs();
  void update_stop_state();

  ClusterModel* cluster_;
  PlanState* plan_;
  NodeProber* prober_;
  ModeBar* mode_bar_;
  QStackedWidget* pages_;
  ClusterPanel* cluster_panel_;
  SlurmPanel* slurm_panel_;
  RuntimePanel* runtime_panel_;
  std::vector<NodeConfig> nodes_before_slurm_;  // the SSH nodes, restored when Slurm is turned off
  void apply_slurm_to_cluster();
  PlanPage* plan_page_;
  Inspector* inspector_;
  QDockWidget* inspector_dock_;
  StoreWorker* store_;
  RoutingModel* routing_ = nullptr;
  BrowserServer* browser_server_ = nullptr;
  bool open_browser_ = true;
  LaunchController* launcher_;
  RunsPage* runs_page_;
  ComparePage* compare_page_;
  QLabel* busy_label_;
  QLabel* summary_label_;
  QLabel* mode_title_ = nullptr;
  std::array<QAction*, 4> primary_{};  // indexed by Mode; only the current mode's is shown
  QAction* dark_ = nullptr;
  QString config_path_;
};

}  // namespace meshwork::ui
