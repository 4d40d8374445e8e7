#include "ui/slurm_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>
#include <tuple>

#include "ui/panel_widgets.h"

namespace meshwork::ui {

SlurmPanel::SlurmPanel(QWidget* parent) : QWidget(parent) {
  setObjectName("SlurmPanel");
  auto* v = new QVBoxLayout(this);
  auto* title = new QLabel(tr("<b>Slurm cluster</b>"), this);
  v->addWidget(title);
  auto* row = new QHBoxLayout;
  std::tie(login_, probe_) = add_field_and_button(row, this, "SlurmLogin",
                                                  tr("login node: host, user@host:port, ssh_config alias, or local"),
                                                  tr("Read partitions"), "SlurmProbe");
  v->addLayout(row);
  table_ = new QTableWidget(0, 7, this);
  table_->setObjectName("SlurmPartitions");
  table_->setHorizontalHeaderLabels(
      {tr("Partition"), tr("Nodes"), tr("Idle"), tr("GPUs/node"), tr("CPUs/node"), tr("Memory/node"), tr("Time limit")});
  table_->verticalHeader()->hide();
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setMinimumHeight(110);
  v->addWidget(table_);
  status_ = add_wrapped_label(v, this, "SlurmStatus");

  auto* form = new QFormLayout;
  use_ = new QCheckBox(tr("Launch on Slurm (sbatch) instead of the nodes above"), this);
  use_->setObjectName("SlurmUse");
  use_->setEnabled(false);
  form->addRow(use_);
  partition_ = new QComboBox(this);
  nodes_ = new QSpinBox(this);
  nodes_->setRange(1, 100000);
  gpus_ = new QSpinBox(this);
  gpus_->setRange(0, 1024);
  ranks_ = new QSpinBox(this);
  ranks_->setRange(1, 1024);
  gpu_memory_ = new QDoubleSpinBox(this);
  gpu_memory_->setObjectName("SlurmGpuMemory");
  gpu_memory_->setRange(0, 4096);
  gpu_memory_->setDecimals(0);
  gpu_memory_->setSuffix(tr(" GiB"));
  gpu_memory_->setSpecialValueText(tr("not known (sinfo does not say)"));
  gpu_memory_->setToolTip(tr("Memory of one GPU of the partition, for the memory estimate: sinfo reports "
                             "GPU counts and types, not their memory"));
  account_ = new QLineEdit(this);
  qos_ = new QLineEdit(this);
  time_ = new QLineEdit(this);
  time_->setPlaceholderText(tr("e.g. 2:00:00 (partition default when empty)"));
  extra_ = new QLineEdit(this);
  extra_->setPlaceholderText(tr("more sbatch options, e.g. --exclusive --mem=0"));
  form->addRow(tr("Partition"), partition_);
  form->addRow(tr("Nodes"), nodes_);
  form->addRow(tr("GPUs per node"), gpus_);
  form->addRow(tr("Ranks per node"), ranks_);
  form->addRow(tr("GPU memory"), gpu_memory_);
  form->addRow(tr("Account"), account_);
  form->addRow(tr("QOS"), qos_);
  form->addRow(tr("Time limit"), time_);
  form->addRow(tr("sbatch options"), extra_);
  v->addLayout(form);

  connect(probe_, &QPushButton::clicked, this, &SlurmPanel::request_probe);
  connect(login_, &QLineEdit::returnPressed, this, &SlurmPanel::request_probe);
  connect(use_, &QCheckBox::toggled, this, &SlurmPanel::job_changed);
  connect(partition_, &QComboBox::currentIndexChanged, this, [this](int i) {
    if (i >= 0 && i < partitions_.size()) {
      const QVariantMap& p = partitions_[i];
      gpus_->setValue(p["gpus_per_node"].toInt());
      ranks_->setValue(std::max(1, p["gpus_per_node"].toInt()));
      nodes_->setMaximum(std::max(1, p["nodes"].toInt()));
      table_->selectRow(i);
    }
    Q_EMIT job_changed();
  });
  for (QSpinBox* s : {nodes_, gpus_, ranks_}) connect(s, &QSpinBox::valueChanged, this, &SlurmPanel::job_changed);
  connect(gpu_memory_, &QDoubleSpinBox::valueChanged, this, &SlurmPanel::job_changed);
}

QString SlurmPanel::login() const { return login_->text().trimmed(); }
void SlurmPanel::set_login(const QString& login) { login_->setText(login); }

void SlurmPanel::request_probe() {
  if (login().isEmpty()) {
    set_error(tr("login node: give the host of the cluster's login node (or local)"));
    return;
  }
  status_->setText(tr("Reading the partitions of %1 (sinfo)…").arg(login()));
  probe_->setEnabled(false);
  Q_EMIT probe_requested(login());
}

void SlurmPanel::set_partitions(const QString& login, const QList<QVariantMap>& partitions) {
  probe_->setEnabled(true);
  if (login != this->login()) return;  // an answer for a login node the user has since changed
  partitions_ = partitions;
  table_->setRowCount(static_cast<int>(partitions.size()));
  partition_->blockSignals(true);
  partition_->clear();
  int default_row = 0;
  for (int r = 0; r < partitions.size(); ++r) {
    const QVariantMap& p = partitions[r];
    const QString name = p["name"].toString() + (p["default"].toBool() ? QStringLiteral(" *") : QString());
    const int gpus = p["gpus_per_node"].toInt();
    const QString gpu_text = gpus == 0 ? tr("none") : QStringLiteral("%1 %2").arg(gpus).arg(p["gpu_type"].toString()).trimmed();
    const QStringList cells = {name, QString::number(p["nodes"].toInt()), QString::number(p["idle"].toInt()), gpu_text,
                               QString::number(p["cpus_per_node"].toInt()),
                               QStringLiteral("%1 GiB").arg(p["memory_mb"].toDouble() / 1024.0, 0, 'f', 1),
                               p["time_limit"].toString() + (p["up"].toBool() ? QString() : tr(" (down)"))};
    for (int c = 0; c < cells.size(); ++c) table_->setItem(r, c, new QTableWidgetItem(cells[c]));
    partition_->addItem(p["name"].toString());
    if (p["default"].toBool()) default_row = r;
  }
  table_->resizeColumnsToContents();
  partition_->blockSignals(false);
  status_->setText(tr("%n partition(s) on %1", nullptr, static_cast<int>(partitions.size())).arg(login));
  use_->setEnabled(!partitions.isEmpty());
  if (!partitions.isEmpty()) {
    partition_->setCurrentIndex(-1);
    partition_->setCurrentIndex(default_row);
  }
}

void SlurmPanel::set_error(const QString& message) {
  probe_->setEnabled(true);
  status_->setText(message);
}

QString SlurmPanel::error_text() const { return status_->text(); }

bool SlurmPanel::enabled_for_launch() const { return use_->isEnabled() && use_->isChecked(); }
void SlurmPanel::set_enabled_for_launch(bool on) { use_->setChecked(on); }

remote::SlurmJobOptions SlurmPanel::job() const {
  remote::SlurmJobOptions j;
  j.partition = partition_->currentText().toStdString();
  j.nodes = nodes_->value();
  j.gpus_per_node = gpus_->value();
  j.nproc_per_node = ranks_->value();
  j.account = account_->text().trimmed().toStdString();
  j.qos = qos_->text().trimmed().toStdString();
  j.time = time_->text().trimmed().toStdString();
  for (const QString& a : extra_->text().split(QLatin1Char(' '), Qt::SkipEmptyParts)) j.sbatch_args.push_back(a.toStdString());
  return j;
}

void SlurmPanel::set_partition(const QString& name) { partition_->setCurrentText(name); }
void SlurmPanel::set_nodes(int nodes) { nodes_->setValue(nodes); }
void SlurmPanel::set_ranks_per_node(int ranks) { ranks_->setValue(ranks); }
void SlurmPanel::set_time(const QString& time) { time_->setText(time); }
void SlurmPanel::set_account(const QString& account) { account_->setText(account); }

int SlurmPanel::plan_nodes() const { return enabled_for_launch() ? nodes_->value() : 0; }
int SlurmPanel::plan_ranks_per_node() const { return enabled_for_launch() ? ranks_->value() : 0; }
int SlurmPanel::plan_gpus_per_node() const { return enabled_for_launch() ? gpus_->value() : 0; }

double SlurmPanel::plan_memory_bytes_per_node() const {
  const int i = partition_->currentIndex();
  if (i < 0 || i >= partitions_.size()) return 0;
  return partitions_[i]["memory_mb"].toDouble() * 1024.0 * 1024.0;
}

int SlurmPanel::plan_cpus_per_node() const {
  const int i = partition_->currentIndex();
  if (i < 0 || i >= partitions_.size()) return 0;
  return partitions_[i]["cpus_per_node"].toInt();
}

SlurmPartitionSource SlurmPanel::plan_source() const {
  SlurmPartitionSource src;
  const remote::SlurmJobOptions j = job();
  src.login = login().toStdString();
  src.partition = j.partition;
  src.nodes = plan_nodes();
  src.ranks_per_node = plan_ranks_per_node();
  src.gpus_per_node = plan_gpus_per_node();
  const int i = partition_->currentIndex();
  if (i >= 0 && i < partitions_.size()) src.gpu_type = partitions_[i]["gpu_type"].toString().toStdString();
  src.gpu_memory_bytes = gpu_memory_->value() * double(1ull << 30);
  return src;
}

void SlurmPanel::set_gpu_memory_gib(double gib) { gpu_memory_->setValue(gib); }

}  // namespace meshwork::ui
