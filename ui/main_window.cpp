#include "ui/main_window.h"


#include "ui/ecosystem_export_dialog.h"

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QSpinBox>
#include <QCloseEvent>
#include <QDockWidget>
#include <QFileDialog>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QScrollArea>
#include <QSettings>
#include <QSplitter>
#include <QStackedWidget>
#include <QStatusBar>
#include <QToolBar>
#include <QToolButton>
#include <QUrl>
#include <QVBoxLayout>

#include "core/build_info.h"
#include "core/resource_dir.h"
#include "ui/cluster_model.h"
#include "ui/compare_page.h"
#include "ui/ecosystem_export_dialog.h"
#include "ui/error_text.h"
#include "ui/launch_controller.h"
#include "ui/monitor_page.h"
#include "ui/resume_panel.h"
#include "ui/runs_model.h"
#include "ui/runs_page.h"
#include "ui/store_worker.h"
#include "ui/browser_server.h"
#include "ui/cluster_panel.h"
#include "ui/trials_panel.h"
#include "ui/calibration_model.h"
#include "ui/runtime_panel.h"
#include "core/gpu_kinds.h"
#include "ui/described_cluster_panel.h"
#include "ui/slurm_panel.h"
#include "ui/inspector.h"
#include "ui/mesh_editor.h"
#include "ui/mesh_view.h"
#include "ui/node_prober.h"
#include "ui/plan_page.h"
#include "ui/plan_state.h"
#include "ui/planner_panel.h"
#include "ui/routing_model.h"
#include "ui/notices.h"
#include "ui/theme.h"

namespace meshwork::ui {


MainWindow::MainWindow(bool probe_local, QWidget* parent)
    : QMainWindow(parent),
      cluster_(new ClusterModel(this)),
      plan_(new PlanState(this)),
      prober_(new NodeProber(this)),
      store_(new StoreWorker(default_store_path(), this)),
      launcher_(new LaunchController(store_->db_path(), this)) {
  setObjectName("MeshworkMainWindow");
  setWindowTitle(tr("Meshwork"));
  setUnifiedTitleAndToolBarOnMac(true);

  auto* central = new QWidget(this);
  auto* cl = new QHBoxLayout(central);
  cl->setContentsMargins(0, 0, 0, 0);
  cl->setSpacing(0);
  mode_bar_ = new ModeBar(central);
  pages_ = new QStackedWidget(central);
  cluster_panel_ = new ClusterPanel(cluster_, prober_, pages_);
  plan_page_ = new PlanPage(plan_, cluster_, pages_);
  // The Cluster mode: the nodes (SSH and this machine) and, below, a Slurm cluster.
  auto* cluster_page = new QWidget(pages_);
  auto* cluster_layout = new QVBoxLayout(cluster_page);
  cluster_layout->setContentsMargins(0, 0, 0, 0);
  slurm_panel_ = new SlurmPanel(cluster_page);
  cluster_panel_->setParent(cluster_page);
  cluster_layout->addWidget(cluster_panel_, 1);
  cluster_layout->addWidget(slurm_panel_);
  auto* described = new DescribedClusterPanel(cluster_, cluster_panel_);  // a cluster described by hardware
  cluster_panel_->add_section(described->header(), described);
  // What the nodes run meshtrain with: this machine's LibTorch, a runtime bundle, the node's torch.
  runtime_panel_ = new RuntimePanel(cluster_page);
  cluster_layout->addWidget(runtime_panel_);
  // It scrolls in a short window rather than raising the window's minimum height.
  auto* cluster_scroll = new QScrollArea(pages_);
  cluster_scroll->setWidgetResizable(true);
  cluster_scroll->setFrameShape(QFrame::NoFrame);
  cluster_scroll->setWidget(cluster_page);
  pages_->addWidget(cluster_scroll);
  pages_->addWidget(plan_page_);
  runs_page_ = new RunsPage(store_, pages_);
  compare_page_ = new ComparePage(store_, runs_page_->model(), pages_);
  pages_->addWidget(runs_page_);
  pages_->addWidget(compare_page_);
  cl->addWidget(mode_bar_);
  cl->addWidget(pages_, 1);
  setCentralWidget(central);

  inspector_ = new Inspector(this);
  inspector_dock_ = new QDockWidget(tr("Inspector"), this);
  inspector_dock_->setObjectName("InspectorDock");
  inspector_dock_->setWidget(inspector_);
  inspector_dock_->setFeatures(QDockWidget::DockWidgetClosable | QDockWidget::DockWidgetMovable);
  inspector_dock_->setMinimumWidth(250);
  addDockWidget(Qt::RightDockWidgetArea, inspector_dock_);

  busy_label_ = new QLabel(this);
  summary_label_ = new QLabel(this);
  statusBar()->addPermanentWidget(busy_label_);
  statusBar()->addPermanentWidget(summary_label_);

  build_actions();

  connect(mode_bar_, &ModeBar::mode_changed, this, &MainWindow::on_mode);
  connect(cluster_, &ClusterModel::cluster_changed, this, &MainWindow::sync_cluster_to_plan);
  connect(cluster_, &ClusterModel::dataChanged, this, [this] {
    // Names on the mesh view's node boxes follow the probe.
    if (plan_->mesh()) plan_page_->view()->update();
  });
  connect(plan_, &PlanState::changed, this, &MainWindow::update_launch_state);
  connect(plan_, &PlanState::memory_changed, this, &MainWindow::update_launch_state);
  connect(plan_, &PlanState::busy_changed, this, [this](bool busy) {
    busy_label_->setText(busy ? tr("estimating…") : QString());
  });
  connect(prober_, &NodeProber::idle, this, [this] { statusBar()->showMessage(tr("Probe finished"), 4000); });
  connect(slurm_panel_, &SlurmPanel::probe_requested, this, [this](const QString& login) {
    launcher_->set_ssh_options(prober_->ssh_options());  // the keys reviewed on the node cards
    launcher_->probe_slurm(login);
  });
  connect(launcher_, &LaunchController::slurm_probed, slurm_panel_, &SlurmPanel::set_partitions);
  connect(launcher_, &LaunchController::slurm_probe_failed, slurm_panel_,
          [this](const QString&, const QString& message) { slurm_panel_->set_error(message); });
  connect(slurm_panel_, &SlurmPanel::job_changed, this, &MainWindow::apply_slurm_to_cluster);
  connect(runtime_panel_, &RuntimePanel::changed, this, [this] {
    launcher_->set_runtime(runtime_panel_->launch_bundle(), runtime_panel_->launch_node_torch());
    update_launch_state();
  });
  connect(cluster_panel_, &ClusterPanel::status_message, this,
          [this](const QString& t) { statusBar()->showMessage(t, 5000); });
  connect(cluster_panel_, &ClusterPanel::node_selected, this, [this](int row) {
    if (row >= 0) inspector_->show_node(cluster_->node(row), row);
  });
  auto show_rank = [this](int rank) {
    if (rank < 0 || !plan_->mesh()) {
      inspector_->show_nothing();
      return;
    }
    QStringList names;
    for (const NodeInfo& n : cluster_->nodes()) names << (n.is_local() ? QStringLiteral("local") : n.host);
    inspector_->show_rank(*plan_->mesh(), rank, names);
  };
  connect(plan_page_->view(), &MeshView::selection_changed, this, show_rank);
  // A node drawn aggregated (too many ranks to point at one): the inspector shows the node.
  connect(plan_page_->view(), &MeshView::node_clicked, this, [this](int node) {
    if (node >= 0 && node < cluster_->rowCount()) inspector_->show_node(cluster_->node(node), node);
  });
  connect(plan_page_->editor(), &MeshEditor::open_model_requested, this, &MainWindow::open_model_config);
  connect(plan_page_->editor(), &MeshEditor::open_model_directory_requested, this, &MainWindow::open_model_directory);

  wire_runs();
  // Trials launch through the workbench's own launcher and store (each trial shows in Runs).
  plan_page_->trials()->set_store(store_);
  plan_page_->trials()->set_launcher(launcher_);
  // Calibrations of the cluster (read on the store worker) feed the estimates; Calibrate runs
  // through the launcher with the plan's model.
  cluster_panel_->set_calibration(store_, launcher_, [this] {
    RunConfig c = plan_->config();
    c.source = cluster_->source();
    return c;
  });
  connect(cluster_panel_->calibrations(), &CalibrationModel::changed, this, &MainWindow::sync_cluster_to_plan);
  // So do the time model's fit to the cluster's stored runs (refitted on the worker as runs end).
  connect(cluster_panel_->calibrations()->run_fits(), &RunFitModel::changed, this, &MainWindow::sync_cluster_to_plan);
  // And, for a mixture of experts, the routing a stored run of the plan's model measured (read on
  // the worker for the model the plan has; the planner's Routing picks the run or balanced).
  routing_ = new RoutingModel(store_, this);
  plan_page_->planner()->set_routing(routing_);
  connect(plan_, &PlanState::changed, this, [this] { routing_->set_model(plan_->config().model); });
  connect(routing_, &RoutingModel::changed, this, &MainWindow::sync_cluster_to_plan);

  // The local machine is the default cluster.
  NodeInfo local;
  local.host = QStringLiteral("local");
  local.slots = 2;
  cluster_->add_node(local);
  restore_settings();
  if (probe_local) cluster_panel_->probe(QStringLiteral("local"));
}

MainWindow::~MainWindow() = default;

void MainWindow::build_actions() {
  auto* tb = addToolBar(tr("Main"));
  tb->setObjectName("MainToolBar");
  tb->setMovable(false);
  tb->setToolButtonStyle(Qt::ToolButtonTextOnly);
  // Left: where you are; right: the mode's primary action.
  mode_title_ = new QLabel(tb);
  mode_title_->setObjectName("ModeTitle");
  mode_title_->setContentsMargins(12, 0, 0, 0);
  tb->addWidget(mode_title_);
  auto* spacer = new QWidget(tb);
  spacer->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
  tb->addWidget(spacer);

  auto* file = menuBar()->addMenu(tr("&File"));
  auto* open = file->addAction(tr("&Open configuration…"), this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open a run configuration"), {}, tr("JSON (*.json)"));
    if (!path.isEmpty()) load_config(path);
  });
  open->setShortcut(QKeySequence::Open);
  auto* save = file->addAction(tr("&Save configuration"), this, [this] {
    QString path = config_path_;
    if (path.isEmpty())
      path = QFileDialog::getSaveFileName(this, tr("Save the run configuration"), "meshwork-run.json", tr("JSON (*.json)"));
    if (!path.isEmpty()) save_config(path);
  });
  save->setShortcut(QKeySequence::Save);
  auto* save_as = file->addAction(tr("Save configuration &as…"), this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Save the run configuration"), "meshwork-run.json", tr("JSON (*.json)"));
    if (!path.isEmpty()) save_config(path);
  });
  save_as->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_S));  // QKeySequence::SaveAs is none on some platforms
  file->addAction(tr("&Import Accelerate / Axolotl / torchtitan config…"), this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Import a training config"), {},
                                                      tr("Training configs (*.yaml *.yml *.toml)"));
    if (!path.isEmpty()) import_ecosystem_config(path);
  });
  file->addAction(tr("&Export for Accelerate / Axolotl / torchtitan…"), QKeySequence(Qt::CTRL | Qt::Key_E), this, [this] {
    auto request = ecosystem_export_request();
    if (!request.ok()) {
      QMessageBox::warning(this, tr("Nothing to export"), error_text(request.error()));
      return;
    }
    EcosystemExportDialog dialog(*request, this);
    dialog.exec();
  });
  file->addAction(tr("Open model config.json…"), QKeySequence(Qt::CTRL | Qt::Key_M), this, &MainWindow::open_model_config);
  file->addAction(tr("Open model directory…"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_M), this,
                  &MainWindow::open_model_directory);
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

  auto* view = menuBar()->addMenu(tr("&View"));
  const char* names[] = {"&Cluster", "&Plan", "&Runs", "C&ompare"};
  for (int i = 0; i < 4; ++i)
    view->addAction(tr(names[i]), QKeySequence(Qt::CTRL | (Qt::Key_1 + i)), this,
                    [this, i] { mode_bar_->set_mode(static_cast<Mode>(i)); });
  view->addSeparator();
  view->addAction(inspector_dock_->toggleViewAction());
  inspector_dock_->toggleViewAction()->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_I));
  view->addAction(tr("Serve in the &browser…"), this, &MainWindow::serve_in_browser);
  view->addAction(tr("C&alibration…"), this, [this] { cluster_panel_->show_calibration(); });
  dark_ = view->addAction(tr("&Dark theme"));
  dark_->setCheckable(true);
  dark_->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_D));
  connect(dark_, &QAction::toggled, this, &MainWindow::set_dark);

  auto* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&Keyboard shortcuts"), QKeySequence::HelpContents, this, &MainWindow::show_shortcuts);
  help->addAction(tr("&About Meshwork"), this, &MainWindow::show_about);

  // The toolbar shows the current mode's one primary action.
  auto* probe = new QAction(tr("Probe nodes"), this);
  probe->setShortcut(QKeySequence(Qt::Key_F5));
  probe->setToolTip(tr("Probe every node again (F5)"));
  connect(probe, &QAction::triggered, cluster_panel_, [this] { cluster_panel_->probe_all(); });
  auto* launch = new QAction(tr("Launch"), this);
  launch->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Return));
  connect(launch, &QAction::triggered, this, &MainWindow::launch_from_plan);
  auto* stop = new QAction(tr("Stop run"), this);
  stop->setEnabled(false);
  stop->setToolTip(tr("Stop the run shown or selected (SIGTERM to every rank, SIGKILL after 5 s)"));
  connect(stop, &QAction::triggered, this, [this] {
    if (const store::RunId run = runs_page_->stoppable_run()) launcher_->stop(run);
  });
  auto* compare = new QAction(tr("Compare selected runs"), this);
  compare->setToolTip(tr("Compare the runs selected in Runs"));
  connect(compare, &QAction::triggered, this, [this] { compare_page_->set_runs(runs_page_->selected_runs()); });
  primary_ = {probe, launch, stop, compare};  // Mode order
  for (QAction* a : primary_) {
    tb->addAction(a);
    if (auto* b = qobject_cast<QToolButton*>(tb->widgetForAction(a))) b->setObjectName("PrimaryAction");
    addAction(a);  // shortcuts work while the action is hidden from the toolbar
  }
}

void MainWindow::on_mode(Mode mode) {
  pages_->setCurrentIndex(static_cast<int>(mode));
  static const char* kTitles[] = {"<b>Cluster</b> — nodes, devices and links",
                                  "<b>Plan</b> — mesh shape, memory and the ranked shapes",
                                  "<b>Runs</b> — every run in the store, live and past",
                                  "<b>Compare</b> — runs side by side"};
  mode_title_->setText(tr(kTitles[static_cast<int>(mode)]));
  for (size_t m = 0; m < primary_.size(); ++m) primary_[m]->setVisible(m == static_cast<size_t>(mode));
  // Actions stay enabled by their own rules; invisible ones still answer their shortcut only
  // where that makes sense.
  probe_action()->setEnabled(true);
  update_launch_state();
  update_stop_state();
}

void MainWindow::wire_runs() {
  MonitorPage* monitor = runs_page_->monitor();
  connect(launcher_, &LaunchController::launch_step, monitor, &MonitorPage::on_launch_step);
  connect(launcher_, &LaunchController::launch_step, this, [this](const QString& t) { statusBar()->showMessage(t, 4000); });
  connect(launcher_, &LaunchController::deploy_progress, monitor, &MonitorPage::on_deploy);
  connect(launcher_, &LaunchController::launch_failed, this, [this, monitor](const QString& m, const QStringList& d) {
    monitor->on_launch_failed(m, d);
    monitor->resume_panel()->ask_again();  // a resume that did not launch: offer it again
    statusBar()->showMessage(launch_failure_line(m), 10000);
    update_launch_state();
  });
  connect(launcher_, &LaunchController::launched, this, [this, monitor](qint64 run) {
    monitor->set_following(true);
    runs_page_->open_run(run);
    store_->notify_runs_changed();
    statusBar()->showMessage(tr("Run %1 started").arg(run), 5000);
    update_launch_state();
    update_stop_state();
  });
  connect(launcher_, &LaunchController::follow_event, this, [this](qint64 run, const QString& level, const QString& text) {
    if (level != "info") statusBar()->showMessage(tr("Run %1: %2").arg(run).arg(text.section('\n', 0, 0)), 8000);
  });
  connect(launcher_, &LaunchController::finished, this, [this, monitor](qint64 run, const QString& state, const QString&) {
    if (monitor->run() == run) {
      monitor->set_following(false);
      monitor->model()->refresh();
    }
    store_->notify_runs_changed();
    statusBar()->showMessage(tr("Run %1: %2").arg(run).arg(state), 8000);
    update_stop_state();
  });
  connect(monitor, &MonitorPage::stop_requested, this, [this](qint64 run) { launcher_->stop(run); });
  // A failed run that lost a node: the re-plan for the survivors, and resume on one click. An
  // elastic run being followed re-plans by itself.
  ResumePanel* resume = monitor->resume_panel();
  connect(resume, &ResumePanel::check_requested, this, [this](qint64 run) {
    if (launcher_->elastic_of(run).on) return;
    launcher_->set_ssh_options(prober_->ssh_options());  // the keys reviewed on the node cards
    launcher_->plan_resume(run);
  });
  connect(launcher_, &LaunchController::resume_offered, resume, &ResumePanel::show_offer);
  connect(launcher_, &LaunchController::resume_unavailable, resume, [resume](qint64 run, const QString&) {
    resume->show_unavailable(run);
  });
  connect(resume, &ResumePanel::resume_requested, this, [this, resume](qint64 run) {
    launcher_->set_ssh_options(prober_->ssh_options());
    if (launcher_->resume(run)) {
      resume->set_resuming();
      statusBar()->showMessage(tr("Run %1: resuming on the surviving nodes").arg(run), 6000);
    } else {
      statusBar()->showMessage(tr("Run %1: cannot resume now (a launch is running, or the re-plan is gone)").arg(run), 8000);
    }
  });
  connect(monitor->model(), &MonitorModel::frame_ready, this, [this] { update_stop_state(); });
  connect(runs_page_, &RunsPage::stoppable_run_changed, this, [this] { update_stop_state(); });
  connect(runs_page_, &RunsPage::compare_requested, this, [this](const std::vector<store::RunId>& ids) {
    compare_page_->set_runs(ids);
    set_mode(Mode::compare);
  });
  connect(runs_page_, &RunsPage::status_message, this, [this](const QString& t) { statusBar()->showMessage(t, 6000); });
  connect(compare_page_, &ComparePage::status_message, this, [this](const QString& t) { statusBar()->showMessage(t, 6000); });
}

void MainWindow::update_stop_state() {
  stop_action()->setEnabled(runs_page_->stoppable_run() != 0);
}

// With "Launch on Slurm" on, the plan is made for the partition's nodes: the cluster model holds
// one row per Slurm node (what sinfo says of the partition), and the SSH nodes come back when it
// is turned off.
void MainWindow::apply_slurm_to_cluster() {
  const bool on = slurm_panel_->enabled_for_launch();
  if (!on) {
    if (cluster_->is_slurm()) cluster_->show_nodes(nodes_before_slurm_);
    return;
  }
  if (!cluster_->is_slurm()) nodes_before_slurm_ = cluster_->to_node_configs();
  // sinfo reports GPU counts and types, not their memory: the plan gets the memory declared in
  // the Slurm section, or none (the summary says it is not known); the nodes' own nvidia-smi is
  // what meshtrain sees when the job runs.
  cluster_->show_slurm_partition(slurm_panel_->plan_source(), slurm_panel_->plan_cpus_per_node(),
                                 slurm_panel_->plan_memory_bytes_per_node());
}

void MainWindow::launch_from_plan() {
  if (!launch_action()->isEnabled() || launcher_->launching()) return;
  // The bundle file may have changed since it was chosen: read its manifest again. A choice that
  // cannot launch is shown next to the control, and nothing is launched.
  if (runtime_error()) {
    set_mode(Mode::cluster);
    statusBar()->showMessage(runtime_panel_->error_text(), 10000);
    update_launch_state();
    return;
  }
  RunConfig c = plan_->config();
  if (plan_->mesh()) c.mesh = plan_->mesh()->shape();  // "auto" resolved, as validated
  c.nodes = cluster_->to_node_configs();
  c.source = cluster_->source();
  if (c.name.empty()) {
    const std::string model = c.model.is_string() ? c.model.get<std::string>() : std::string("model");
    c.name = model + " " + c.mesh.compact();
  }
  set_mode(Mode::runs);
  runs_page_->open_run(0);
  runs_page_->monitor()->begin_launch(QString::fromStdString(c.name), static_cast<int>(std::max<size_t>(1, c.nodes.size())));
  launch_action()->setEnabled(false);
  launcher_->set_ssh_options(prober_->ssh_options());  // the keys reviewed on the node cards
  ElasticChoice elastic;
  elastic.on = plan_page_->editor()->elastic_box()->isChecked();
  elastic.max_replans = plan_page_->editor()->max_replans_box()->value();
  if (slurm_panel_->enabled_for_launch()) {
    launcher_->launch_slurm(c, slurm_panel_->login(), slurm_panel_->job(), elastic);
    return;
  }
  launcher_->launch(c, elastic);
}

void MainWindow::attach_running() {
  using Found = std::vector<std::pair<store::RunId, nlohmann::json>>;
  store_->post<Found>(
      this,
      [](store::RunStore* s) -> Found {
        Found found;
        if (!s) return found;
        auto runs = s->list_runs();
        if (!runs) return found;
        for (const store::RunSummary& r : *runs) {
          if (r.status != store::kStatusRunning && r.status != store::kStatusCreated) continue;
          auto info = s->get_run(r.id);
          if (!info || !info->cluster.contains("launch")) continue;
          // A Slurm run is followed with Slurm's state; the marker tells attach which.
          found.emplace_back(r.id, is_slurm(stored_cluster_source(info->config, info->cluster))
                                       ? nlohmann::json{{"slurm", true}}
                                       : info->cluster["launch"]);
        }
        return found;
      },
      [this](Found found) {
        int n = 0;
        for (const auto& [id, record] : found)
          n += (record.contains("slurm") ? launcher_->attach_slurm(id) : launcher_->attach(id, record)) ? 1 : 0;
        if (n > 0)
          statusBar()->showMessage(tr("Following %n run(s) that kept going while the workbench was closed", nullptr, n), 8000);
        store_->notify_runs_changed();
      });
}

void MainWindow::sync_cluster_to_plan() {
  const ClusterSummary s = cluster_->summary();
  ClusterFacts f;
  f.world_size = std::max(1, s.world_size);
  f.ranks_per_node = std::max(1, s.ranks_per_node);
  f.num_nodes = std::max(1, s.num_nodes);
  f.device = s.device;
  f.device_name = s.device_name.toStdString();
  f.device_memory_bytes = s.device_memory_bytes;
  f.fast_links = s.fast_links;
  f.oversubscription = oversubscription_text(s).toStdString();
  const std::vector<NodeConfig> nodes = cluster_->counted_node_configs();  // the nodes that answered
  if (const DescribedClusterSource* d = described_source(cluster_->source())) {
    f.hardware = hardware_for(*d);  // nothing measured: its own figures
  } else if (CalibrationModel* c = cluster_panel_->calibrations()) {
    f.calibration = c->for_cluster(f.device, nodes);
    c->run_fits()->set_cluster(f.device, nodes, f.calibration);  // refits when these differ
    f.fit = c->run_fits()->fit_for(f.device, nodes, f.calibration);
    f.fit_refusal = c->run_fits()->refusal_for(f.device, nodes, f.calibration);
  }
  if (routing_) f.routing = routing_->routing();
  plan_->set_cluster(f, nodes);
  summary_label_->setText(tr("%1 node(s) · %2 ranks").arg(s.num_nodes).arg(s.world_size) +
                          (s.unreachable.isEmpty() ? QString() : tr(" · %n unreachable", nullptr, int(s.unreachable.size()))));
}

void MainWindow::update_launch_state() {
  if (launcher_->launching()) {
    launch_action()->setEnabled(false);
    launch_action()->setToolTip(tr("Launching…"));
    return;
  }
  if (cluster_->is_described()) {
    launch_action()->setEnabled(false);
    launch_action()->setToolTip(tr("A described cluster has no nodes to launch on: plan and export, or go back to "
                                   "the SSH nodes (Cluster mode)"));
    return;
  }
  const bool errors = plan_->has_errors();
  const bool fits = !plan_->memory() || plan_->memory()->fits;
  const bool runtime_ok = !LaunchController::env_bundle_path().isEmpty() || runtime_panel_->error_text().isEmpty();
  launch_action()->setEnabled(!errors && fits && runtime_ok && plan_->mesh().has_value());
  launch_action()->setToolTip(errors ? tr("Fix the errors shown in the editor first")
                             : (!fits ? tr("This shape does not fit in memory")
                                : (!runtime_ok ? tr("Runtime: %1").arg(runtime_panel_->error_text())
                                               : tr("Launch this configuration (Ctrl+Return)"))));
}

void MainWindow::set_dark(bool dark) {
  if (dark_->isChecked() != dark) dark_->setChecked(dark);  // re-enters once
  if (auto* app = qobject_cast<QApplication*>(QCoreApplication::instance()))
    apply_theme(*app, dark ? Theme::dark : Theme::light);
  // Painted widgets pick the new colours on their next paint; icons and swatches are rebuilt, and
  // cards re-read their state colours.
  plan_page_->refresh_colors();
  runs_page_->monitor()->refresh_colors();
  compare_page_->refresh_colors();
  for (int row = 0; row < cluster_->rowCount(); ++row) cluster_->update_node(row, cluster_->node(row));
  for (QWidget* w : findChildren<QWidget*>()) w->update();
}

void MainWindow::serve_in_browser() {
  if (!browser_server_) {
    browser_server_ = new BrowserServer(this);
    connect(browser_server_, &BrowserServer::ready, this, [this](const QUrl& url) {
      statusBar()->showMessage(
          tr("Serving the run store at %1 (read-only, this machine only; stops with the workbench)").arg(url.toString()));
      if (open_browser_) browser_server_->open_in_browser(url);
    });
    connect(browser_server_, &BrowserServer::browser_failed, this, [this](const QString& message) {
      statusBar()->showMessage(message, 15000);
      show_notice(this, QMessageBox::Warning, tr("Serve in the browser"), message, QStringLiteral("browser_failed"));
    });
    connect(browser_server_, &BrowserServer::failed, this, [this](const QString& message) {
      statusBar()->showMessage(tr("Serving in the browser stopped: %1").arg(message), 8000);
      if (open_browser_) QMessageBox::warning(this, tr("Serve in the browser"), message);
    });
  }
  statusBar()->showMessage(tr("Starting meshwork serve…"));
  browser_server_->start(store_->db_path());
}

void MainWindow::show_shortcuts() {
  QMessageBox::information(this, tr("Keyboard shortcuts"), shortcuts_html(this));
}

// The same version and commit as `meshwork --version`, and where the documentation is on this
// machine (the package's /usr/share/doc/meshwork, or the checkout).
void MainWindow::show_about() {
  const QString docs = QString::fromStdString(docs_dir().string());
  const QString readme = QUrl::fromLocalFile(docs + "/README.md").toString();
  QMessageBox::about(this, tr("About Meshwork"),
                     tr("<h3>Meshwork %1</h3><p>commit %2</p>"
                        "<p>Configures, launches and watches N-D parallel training runs.</p>"
                        "<p>Documentation: <a href=\"%3\">%4/README.md</a> and %4/docs/</p>")
                         .arg(build_version(), build_commit(), readme, docs.toHtmlEscaped()));
}

// True (and the panel shows why) when the runtime choice cannot launch; $MESHWORK_BUNDLE wins.
bool MainWindow::runtime_error() {
  if (!LaunchController::env_bundle_path().isEmpty()) return false;
  return !runtime_panel_->validate().isEmpty();
}

void MainWindow::closeEvent(QCloseEvent* e) {
  // Runs go on without the workbench: stop following them (the next start attaches again), and
  // say so in a notice that outlives the window.
  const auto live = launcher_->followed_runs();
  launcher_->detach_all();
  if (!live.empty())
    show_notice(nullptr, QMessageBox::Information, tr("The run goes on"), runs_go_on_text(live),
                QStringLiteral("runs_go_on"));
  save_settings();
  e->accept();
}

}  // namespace meshwork::ui
