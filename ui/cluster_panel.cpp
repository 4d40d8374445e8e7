#include "ui/cluster_panel.h"

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
#include "ui/cluster_model.h"
#include "ui/format.h"
#include "ui/node_card.h"
#include "ui/node_grid.h"
#include "ui/node_prober.h"

namespace meshwork::ui {

ClusterPanel::ClusterPanel(ClusterModel* model, NodeProber* prober, QWidget* parent)
    : QWidget(parent), model_(model), prober_(prober) {
  setObjectName("ClusterPanel");
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(20, 16, 20, 12);
  lay->setSpacing(8);
  auto* heading = new QLabel(tr("Cluster"), this);
  heading->setProperty("role", "heading");
  lay->addWidget(heading);
  summary_ = new QLabel(this);
  summary_->setProperty("role", "muted");
  lay->addWidget(summary_);

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

void ClusterPanel::update_summary() {
  // Summary line over the cards.
  const ClusterSummary s = model_->summary();
  int gpu_nodes = 0, cpu_nodes = 0;
  for (const NodeInfo& n : model_->nodes()) {
    if (n.has_gpus()) ++gpu_nodes;
    else if (n.cpu_cores > 0) ++cpu_nodes;
  }
  QString text = tr("%1 node(s) · %2 ranks").arg(s.num_nodes).arg(s.world_size);
  if (gpu_nodes > 0 && cpu_nodes > 0)
    text += tr(" · mixed: %1 GPU and %2 CPU-only node(s), so ranks are planned as CPU ranks; "
               "remove the CPU-only nodes to plan for the GPUs").arg(gpu_nodes).arg(cpu_nodes);
  else if (s.device_memory_bytes > 0)
    text += tr(" · %1 per rank (%2)").arg(format_bytes(s.device_memory_bytes), s.device_name);
  summary_->setText(text);
}

}  // namespace meshwork::ui
