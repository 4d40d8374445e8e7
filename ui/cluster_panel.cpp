#include "ui/cluster_panel.h"

#include <QDialog>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QRegularExpression>
#include <QTimer>
#include <QVBoxLayout>

#include "remote/host_spec.h"
#include "ui/calibrate_controller.h"
#include "ui/calibration_model.h"
#include "ui/calibration_view.h"
#include "ui/cluster_model.h"
#include "ui/core_bridge.h"
#include "ui/launch_controller.h"
#include "ui/format.h"
#include "ui/node_card.h"
#include "ui/node_grid.h"
#include "ui/node_prober.h"
#include "ui/store_worker.h"

namespace meshwork::ui {

ClusterPanel::ClusterPanel(ClusterModel* model, NodeProber* prober, QWidget* parent)
    : QWidget(parent), model_(model), prober_(prober) {
  setObjectName("ClusterPanel");
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(20, 16, 20, 12);
  lay->setSpacing(8);
  auto* heading = new QLabel(tr("Cluster"), this);
  heading->setProperty("role", "heading");
  heading_row_ = new QHBoxLayout;
  heading_row_->addWidget(heading);
  heading_row_->addStretch(1);
  lay->addLayout(heading_row_);
  summary_ = new QLabel(this);
  summary_->setProperty("role", "muted");
  lay->addWidget(summary_);

  // The calibration row: hidden until set_calibration() gives it a store and a launcher.
  calibration_row_ = new QWidget(this);
  calibration_row_->setObjectName("CalibrationRow");
  auto* cal_lay = new QVBoxLayout(calibration_row_);
  cal_lay->setContentsMargins(0, 0, 0, 0);
  cal_lay->setSpacing(2);
  auto* cal_top = new QHBoxLayout;
  calibration_status_ = new QLabel(calibration_row_);
  calibration_status_->setObjectName("CalibrationStatus");
  calibration_status_->setWordWrap(true);
  calibrate_button_ = new QPushButton(tr("Calibrate"), calibration_row_);
  calibrate_button_->setObjectName("ClusterCalibrate");
  stop_calibration_ = new QPushButton(tr("Stop"), calibration_row_);
  stop_calibration_->setToolTip(tr("Stop the calibration run's ranks"));
  stop_calibration_->hide();
  auto* open_view = new QPushButton(tr("Calibration…"), calibration_row_);
  open_view->setObjectName("OpenCalibration");
  open_view->setToolTip(tr("The stored calibrations: matmul rates, collective fits, bandwidth by message size"));
  cal_top->addWidget(calibration_status_, 1);
  cal_top->addWidget(calibrate_button_);
  cal_top->addWidget(stop_calibration_);
  cal_top->addWidget(open_view);
  cal_lay->addLayout(cal_top);
  calibration_progress_ = new QLabel(calibration_row_);
  calibration_progress_->setObjectName("ClusterCalibrationProgress");
  calibration_progress_->setProperty("role", "muted");
  calibration_progress_->setWordWrap(true);
  calibration_progress_->hide();
  cal_lay->addWidget(calibration_progress_);
  calibration_row_->hide();
  lay->addWidget(calibration_row_);
  connect(calibrate_button_, &QPushButton::clicked, this, [this] { calibrate(); });
  connect(open_view, &QPushButton::clicked, this, &ClusterPanel::show_calibration);
  connect(stop_calibration_, &QPushButton::clicked, this, [this] {
    if (calibrator_) calibrator_->stop();
  });

  auto* add_row = new QHBoxLayout;
  host_edit_ = new QLineEdit(this);
  host_edit_->setObjectName("HostEdit");
  host_edit_->setPlaceholderText(tr("Add nodes: host, user@host:port or an ~/.ssh/config alias (several: comma-separated)"));
  host_edit_->setClearButtonEnabled(true);
  auto* add = new QPushButton(tr("Add && probe"), this);
  add->setDefault(true);
  auto* hostfile = new QPushButton(tr("From hostfile…"), this);
  hostfile->setToolTip(tr("A DeepSpeed-style hostfile: one `host slots=N` per line"));
  add_row->addWidget(host_edit_, 1);
  add_row->addWidget(add);
  add_row->addWidget(hostfile);
  lay->addLayout(add_row);
  add_error_ = new QLabel(this);
  add_error_->setObjectName("AddError");
  add_error_->setProperty("role", "error");
  add_error_->setWordWrap(true);
  add_error_->hide();
  lay->addWidget(add_error_);

  grid_ = new NodeGrid(model_, this);
  lay->addWidget(grid_, 1);

  connect(add, &QPushButton::clicked, this, [this] { add_hosts(host_edit_->text()); });
  connect(host_edit_, &QLineEdit::returnPressed, this, [this] { add_hosts(host_edit_->text()); });
  connect(hostfile, &QPushButton::clicked, this, qOverload<>(&ClusterPanel::add_hostfile));

  // The grid follows the model by itself (cards for the visible rows only); the panel keeps the
  // summary line and answers what the cards ask for.
  // The summary reads every node: once per event-loop turn, not once per probe tick.
  summary_timer_ = new QTimer(this);
  summary_timer_->setSingleShot(true);
  summary_timer_->setInterval(0);
  connect(summary_timer_, &QTimer::timeout, this, &ClusterPanel::update_summary);
  auto later = [this] { summary_timer_->start(); };
  connect(model_, &ClusterModel::modelReset, this, &ClusterPanel::update_summary);
  connect(model_, &ClusterModel::rowsInserted, this, &ClusterPanel::update_summary);
  connect(model_, &ClusterModel::rowsRemoved, this, &ClusterPanel::update_summary);
  connect(model_, &ClusterModel::dataChanged, this, later);
  connect(model_, &ClusterModel::cluster_changed, this, &ClusterPanel::update_calibration_row);
  connect(grid_, &NodeGrid::card_clicked, this, [this](const QString& host) { Q_EMIT node_selected(model_->find(host)); });
  connect(grid_, &NodeGrid::remove_requested, this, [this](const QString& host) { model_->remove_node(model_->find(host)); });
  connect(grid_, &NodeGrid::probe_requested, this, &ClusterPanel::probe);
  connect(grid_, &NodeGrid::trust_requested, this, [this](const QString& host) {
    const int r = model_->find(host);
    if (r >= 0) on_host_key(host, model_->node(r).fingerprint);
  });
  connect(grid_, &NodeGrid::slots_changed, this,
          [this](const QString& host, int ranks) { model_->set_slots(model_->find(host), ranks); });

  connect(prober_, &NodeProber::progress, this,
          [this](const QString& host, int pct, const QString& text) { mark_probing(host, pct, text); });
  connect(prober_, &NodeProber::probed, this, [this](const QString& host, const NodeInfo& info) {
    const int row = model_->find(host);
    if (row < 0) return;
    NodeInfo n = info;
    // Keep a rank count the user chose (or a loaded config set) over the probe's default.
    const NodeInfo& old = model_->node(row);
    if (old.cpu_cores > 0 || old.has_gpus()) n.slots = old.slots;
    model_->update_node(row, n);
    Q_EMIT status_message(tr("%1 probed: %2").arg(host, n.has_gpus() ? tr("%n GPU(s)", "", int(n.gpus.size()))
                                                                      : tr("CPU only, %1 cores").arg(n.cpu_cores)));
  });
  connect(prober_, &NodeProber::failed, this, [this](const QString& host, const QString& error) {
    const int row = model_->find(host);
    if (row < 0) return;
    NodeInfo n = model_->node(row);
    n.state = NodeInfo::State::failed;
    n.error = error;
    model_->update_node(row, n);
    Q_EMIT status_message(tr("%1: probe failed").arg(host));
  });
  connect(prober_, &NodeProber::host_key_unknown, this, &ClusterPanel::on_host_key);
  update_summary();
}

void ClusterPanel::add_section(QWidget* header, QWidget* body) {
  heading_row_->addWidget(header);
  auto* lay = static_cast<QVBoxLayout*>(layout());
  lay->insertWidget(lay->indexOf(calibration_row_) + 1, body);
}

void ClusterPanel::add_hosts(const QString& text) {
  const QStringList parts = text.split(QRegularExpression("[,\\s]+"), Qt::SkipEmptyParts);
  QStringList errors;
  std::vector<NodeInfo> nodes;
  for (const QString& part : parts) {
    auto spec = remote::parse_host_spec(part.toStdString());
    if (!spec) {
      errors << QString::fromStdString(spec.error().message());
      continue;
    }
    NodeInfo n;
    n.host = QString::fromStdString(spec->to_string());
    nodes.push_back(std::move(n));
  }
  model_->add_nodes(nodes);  // one insertion for all of them
  for (const NodeInfo& n : nodes) probe(n.host);
  add_error_->setText(errors.join("\n"));
  add_error_->setVisible(!errors.isEmpty());
  if (errors.isEmpty()) host_edit_->clear();
}

void ClusterPanel::add_hostfile() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open a hostfile"));
  if (!path.isEmpty()) add_hostfile(path);
}

void ClusterPanel::add_hostfile(const QString& path) {
  auto entries = remote::load_hostfile(path.toStdString());
  if (!entries) {
    add_error_->setText(QString::fromStdString(entries.error().message()));
    add_error_->show();
    return;
  }
  add_error_->hide();
  // One insertion for the whole file (a thousand lines are one model change, not a thousand).
  std::vector<NodeInfo> nodes;
  nodes.reserve(entries->size());
  for (const remote::HostEntry& e : *entries) {
    NodeInfo n;
    n.host = QString::fromStdString(e.spec.to_string());
    if (e.slots > 0) n.slots = e.slots;
    nodes.push_back(std::move(n));
  }
  const std::vector<int> rows = model_->add_nodes(nodes);
  // Nodes that were already there take the file's slots.
  for (size_t i = 0; i < nodes.size(); ++i)
    if ((*entries)[i].slots > 0 && model_->node(rows[i]).slots != (*entries)[i].slots)
      model_->set_slots(rows[i], (*entries)[i].slots);
  for (const NodeInfo& n : nodes) probe(n.host);
}

void ClusterPanel::probe_all() {
  for (const NodeInfo& n : model_->nodes()) probe(n.host);
}

bool ClusterPanel::mark_probing(const QString& host, int progress, const QString& text) {
  const int row = model_->find(host);
  if (row < 0) return false;
  NodeInfo n = model_->node(row);
  n.state = NodeInfo::State::probing;
  n.progress = progress;
  n.progress_text = text;
  n.error.clear();
  model_->update_node(row, n);
  return true;
}

void ClusterPanel::probe(const QString& host) {
  if (mark_probing(host, 2, tr("queued"))) prober_->probe(host);
}

void ClusterPanel::on_host_key(const QString& host, const QString& fingerprint) {
  const int row = model_->find(host);
  if (row < 0) return;
  NodeInfo n = model_->node(row);
  n.state = NodeInfo::State::awaiting_key;
  n.fingerprint = fingerprint;
  n.error = tr("Unknown host key %1").arg(fingerprint);
  model_->update_node(row, n);
  if (!ask_host_keys_) return;
  QMessageBox box(QMessageBox::Question, tr("Unknown host key"),
                  tr("<p>The host key of <b>%1</b> is not in your known_hosts.</p>"
                     "<p>Fingerprint:<br><tt>%2</tt></p>"
                     "<p>Compare it with the key on the node (<tt>ssh-keygen -lf "
                     "/etc/ssh/ssh_host_ed25519_key.pub</tt>) before trusting it.</p>")
                      .arg(host.toHtmlEscaped(), fingerprint.toHtmlEscaped()),
                  QMessageBox::NoButton, this);
  auto* trust = box.addButton(tr("Trust and connect"), QMessageBox::AcceptRole);
  box.addButton(tr("Don't connect"), QMessageBox::RejectRole);
  box.exec();
  if (box.clickedButton() == trust) {
    accept_host_key(host);
  } else {
    n.state = NodeInfo::State::failed;
    n.error = tr("Host key %1 not trusted; not connected").arg(fingerprint);
    model_->update_node(row, n);
  }
}

void ClusterPanel::accept_host_key(const QString& host) {
  const int row = model_->find(host);
  if (row < 0 || model_->node(row).fingerprint.isEmpty()) return;
  const QString fingerprint = model_->node(row).fingerprint;
  mark_probing(host, 5, tr("connecting with the accepted key"));
  prober_->accept_host_key(host, fingerprint);
}

NodeCard* ClusterPanel::card(const QString& host) { return grid_->reveal(model_->find(host)); }

QString ClusterPanel::add_error() const { return add_error_->isHidden() ? QString() : add_error_->text(); }

QString ClusterPanel::summary_text() const { return summary_->text(); }

void ClusterPanel::update_summary() {
  // Summary line over the cards.
  const ClusterSummary s = model_->summary();
  int gpu_nodes = 0, cpu_nodes = 0;
  for (const NodeInfo& n : model_->nodes()) {
    if (!n.counted()) continue;
    if (n.has_gpus()) ++gpu_nodes;
    else if (n.cpu_cores > 0) ++cpu_nodes;
  }
  QString text = tr("%1 node(s) · %2 ranks").arg(s.num_nodes).arg(s.world_size);
  if (const DescribedClusterSource* d = described_source(model_->source()))
    text = tr("Described cluster%1: %2 node(s) × %3 GPUs = %4 ranks (nothing reached; plan and export only)")
               .arg(d->name.empty() ? QString() : QStringLiteral(" \u201c%1\u201d").arg(QString::fromStdString(d->name)))
               .arg(d->nodes)
               .arg(d->gpus_per_node)
               .arg(s.world_size);
  if (!s.unreachable.isEmpty()) {
    QStringList shown = s.unreachable.mid(0, 4);
    if (s.unreachable.size() > 4) shown << tr("%n more", nullptr, int(s.unreachable.size() - 4));
    text += tr(" · %n unreachable node(s) not counted: %1", nullptr, int(s.unreachable.size())).arg(shown.join(", "));
  }
  if (gpu_nodes > 0 && cpu_nodes > 0)
    text += tr(" · mixed: %1 GPU and %2 CPU-only node(s), so ranks are planned as CPU ranks; "
               "remove the CPU-only nodes to plan for the GPUs").arg(gpu_nodes).arg(cpu_nodes);
  else if (s.device_memory_bytes > 0)
    text += tr(" · %1 per rank (%2)").arg(format_bytes(s.device_memory_bytes), s.device_name);
  else if (const SlurmPartitionSource* slurm = slurm_source(model_->source()); slurm && slurm->gpus_per_node > 0)
    text += tr(" · GPU memory of partition %1 not known (sinfo does not report it): the memory estimate is "
               "not checked against it until it is declared in the Slurm section")
                .arg(slurm->partition.empty() ? tr("(default)") : QString::fromStdString(slurm->partition));
  if (const QString over = oversubscription_text(s); !over.isEmpty()) text += QStringLiteral(" · ⚠ ") + over;
  summary_->setText(text);
  update_calibration_row();  // which nodes are online changes what Calibrate would measure
}

// ---- calibration ----

void ClusterPanel::set_calibration(StoreWorker* store, LaunchController* launcher,
                                   std::function<RunConfig()> base_config) {
  if (calibrations_) return;
  store_ = store;
  launcher_ = launcher;
  base_config_ = std::move(base_config);
  calibrations_ = new CalibrationModel(store_, this);
  calibrator_ = new CalibrateController(store_->db_path(), launcher_, this);
  connect(calibrations_, &CalibrationModel::loaded, this, &ClusterPanel::update_calibration_row);
  connect(calibrator_, &CalibrateController::progress, this, &ClusterPanel::set_calibration_progress);
  connect(calibrator_, &CalibrateController::started, this, [this](qint64 run) {
    set_calibration_progress(tr("run %1 started").arg(run));
    store_->notify_runs_changed();  // the calibration run is a run of the store like any other
  });
  connect(calibrator_, &CalibrateController::calibrated, this, [this](qint64 id, const QString& summary) {
    set_calibration_progress(tr("Stored %1").arg(summary));
    Q_EMIT status_message(tr("Calibrated: %1").arg(summary));
    calibrations_->refresh(id);  // the view shows the new calibration once loaded
    store_->notify_runs_changed();
    show_calibration();
  });
  connect(calibrator_, &CalibrateController::failed, this, [this](const QString& message) {
    set_calibration_progress(tr("Calibration failed: %1").arg(message));
    Q_EMIT status_message(tr("Calibration failed"));
    store_->notify_runs_changed();
  });
  connect(calibrator_, &CalibrateController::finished, this, &ClusterPanel::update_calibration_row);
  calibration_row_->show();
  calibrations_->refresh();
  update_calibration_row();
}

std::vector<NodeConfig> ClusterPanel::calibration_nodes(QString* refusal, bool full) const {
  std::vector<NodeConfig> out;
  // The row is updated once per event-loop turn while probes run: host and ranks are all it
  // needs (the probe's facts in NodeConfig::extra only when a launch is built).
  if (model_->is_described()) {
    *refusal = tr("A described cluster has no nodes to measure: calibrate a real one");
    return {};
  }
  if (model_->is_slurm()) {
    *refusal = tr("Calibrate measures SSH nodes or this machine: for a Slurm partition run "
                  "`meshwork calibrate --slurm`, or turn \"Launch on Slurm\" off");
    return {};
  }
  const std::vector<NodeConfig> all = full ? model_->to_node_configs() : host_slots();
  for (size_t i = 0; i < all.size(); ++i) {
    const NodeInfo& n = model_->node(static_cast<int>(i));
    // Nodes not online are left out: a calibration is of the nodes it measured.
    if (n.state == NodeInfo::State::online) out.push_back(all[i]);
  }
  if (out.empty()) *refusal = tr("No node is online: probe the nodes first");
  return out;
}

std::vector<NodeConfig> ClusterPanel::host_slots() const {
  std::vector<NodeConfig> out;
  out.reserve(model_->nodes().size());
  for (const NodeInfo& n : model_->nodes()) out.push_back(NodeConfig{n.host.toStdString(), n.slots, nlohmann::json::object()});
  return out;
}

void ClusterPanel::update_calibration_row() {
  if (!calibrations_) return;
  const bool running = calibrator_->running();
  const ClusterSummary s = model_->summary();
  const std::vector<NodeConfig> nodes = host_slots();
  QString status;
  if (const store::StoredCalibration* c = calibrations_->stored_for_cluster(s.device, nodes)) {
    const bool same_ranks = c->calibration.fingerprint.node_set_id() == cluster_node_set(s.device, nodes).node_set_id();
    status = tr("<b>Calibrated</b> %1 · measured %2%3: the time estimates use its matmul rates, collective "
                "fits and split-step factors")
                 .arg(QString::fromStdString(c->calibration.fingerprint.id()).left(8),
                      QString::fromStdString(c->calibration.measured_at),
                      same_ranks ? QString() : tr(" with other rank counts"));
  } else {
    status = tr("<b>Not calibrated</b>: the time estimates use core's hardware defaults");
  }
  calibration_status_->setText(status);
  QString refusal;
  const std::vector<NodeConfig> targets = calibration_nodes(&refusal, false);
  QStringList names;
  for (size_t i = 0; i < targets.size() && i < 4; ++i)
    names << tr("%1 (%n rank(s))", nullptr, targets[i].slots).arg(QString::fromStdString(targets[i].host));
  if (targets.size() > 4) names << tr("%n more node(s)", nullptr, int(targets.size() - 4));
  const QString target = names.join(", ");
  calibrate_button_->setEnabled(!running && refusal.isEmpty());
  calibrate_button_->setText(running ? tr("Calibrating…") : tr("Calibrate"));
  calibrate_button_->setToolTip(refusal.isEmpty()
                                    ? tr("Run meshtrain calibrate on %1: matmul rates, collective fits and short "
                                         "training steps on every split, stored by cluster fingerprint")
                                          .arg(target)
                                    : refusal);
  stop_calibration_->setVisible(running);
  if (calibration_view_) {
    calibration_view_->set_calibrate_target(target, refusal);
    calibration_view_->set_progress(running, calibration_progress_->text());
  }
}

void ClusterPanel::set_calibration_progress(const QString& line) {
  calibration_progress_->setText(line);
  calibration_progress_->setVisible(!line.isEmpty());
  if (calibration_view_) calibration_view_->set_progress(calibrator_ && calibrator_->running(), line);
}

QString ClusterPanel::calibration_status() const {
  return calibration_status_ ? calibration_status_->text() : QString();
}

QString ClusterPanel::calibration_progress() const {
  return calibration_progress_ ? calibration_progress_->text() : QString();
}

bool ClusterPanel::calibrate() {
  if (!calibrator_ || calibrator_->running()) return false;
  QString refusal;
  const std::vector<NodeConfig> nodes = calibration_nodes(&refusal, true);
  if (!refusal.isEmpty()) {
    set_calibration_progress(refusal);
    return false;
  }
  RunConfig c = base_config_ ? base_config_() : RunConfig{};
  c.nodes = nodes;
  launcher_->set_ssh_options(prober_->ssh_options());  // the keys reviewed on the node cards
  set_calibration_progress(tr("starting meshtrain calibrate on %n node(s)", nullptr, int(nodes.size())));
  const bool ok = calibrator_->calibrate(c);
  update_calibration_row();
  return ok;
}

void ClusterPanel::show_calibration() {
  if (!calibrations_) return;
  if (!calibration_dialog_) {
    calibration_dialog_ = new QDialog(this);
    calibration_dialog_->setObjectName("CalibrationDialog");
    calibration_dialog_->setWindowTitle(tr("Cluster calibration"));
    auto* lay = new QVBoxLayout(calibration_dialog_);
    lay->setContentsMargins(0, 0, 0, 0);
    calibration_view_ = new CalibrationView(calibrations_, calibration_dialog_);
    lay->addWidget(calibration_view_);
    connect(calibration_view_, &CalibrationView::calibrate_requested, this, [this] { calibrate(); });
    calibration_dialog_->resize(1100, 760);
    update_calibration_row();
  }
  calibrations_->refresh();  // a `meshwork calibrate` from a terminal shows up too
  calibration_dialog_->show();
  calibration_dialog_->raise();
  calibration_dialog_->activateWindow();
}

}  // namespace meshwork::ui
