// The Cluster mode's Slurm section: a Slurm cluster named by its login node (host, user@host:port,
// an ~/.ssh/config alias, or "local" on the login node itself), its partitions as sinfo reports
// them, and the job's fields (partition, nodes, GPUs and ranks per node, account, QOS, time,
// extra sbatch options). When "Launch on Slurm" is on, the plan is made for the chosen
// partition's nodes and the Launch action submits an sbatch job instead of starting SSH nodes.
// A view: it asks (probe_requested) and is told (set_partitions); the LaunchController does the
// I/O off the GUI thread.
#pragma once

#include <QList>
#include <QVariantMap>
#include <QWidget>

#include "core/cluster_source.h"
#include "remote/slurm_script.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace meshwork::ui {

class SlurmPanel : public QWidget {
  Q_OBJECT
 public:
  explicit SlurmPanel(QWidget* parent = nullptr);

  QString login() const;
  void set_login(const QString& login);
  // The rows of LaunchController::slurm_probed.
  void set_partitions(const QString& login, const QList<QVariantMap>& partitions);
  void set_error(const QString& message);  // a probe's or sbatch's words, under the fields
  QTableWidget* partitions_table() const { return table_; }
  QString error_text() const;

  bool enabled_for_launch() const;  // "Launch on Slurm" checked and partitions known
  void set_enabled_for_launch(bool on);
  remote::SlurmJobOptions job() const;
  void set_partition(const QString& name);
  void set_nodes(int nodes);
  void set_ranks_per_node(int ranks);
  void set_time(const QString& time);
  void set_account(const QString& account);
  // What the plan should assume: nodes x ranks per node of the chosen partition (GPUs per node 0
  // for CPU partitions), or nothing when Slurm is off.
  int plan_nodes() const;
  int plan_ranks_per_node() const;
  int plan_gpus_per_node() const;
  double plan_memory_bytes_per_node() const;  // sinfo's memory of the chosen partition's nodes
  int plan_cpus_per_node() const;
  // The partition as the plan and the run config see it: the job's fields, the GRES type, and
  // the GPU memory as declared here (sinfo reports no GPU memory; 0 = not known, never assumed).
  SlurmPartitionSource plan_source() const;
  void set_gpu_memory_gib(double gib);

  Q_SLOT void request_probe();

 Q_SIGNALS:
  void probe_requested(const QString& login);
  void job_changed();  // a field changed, or Slurm was turned on/off: the plan may change

 private:
  QLineEdit* login_;
  QPushButton* probe_;
  QTableWidget* table_;
  QLabel* status_;
  QCheckBox* use_;
  QComboBox* partition_;
  QSpinBox* nodes_;
  QSpinBox* gpus_;
  QSpinBox* ranks_;
  QDoubleSpinBox* gpu_memory_;  // GiB per GPU; 0 = not known
  QLineEdit* account_;
  QLineEdit* qos_;
  QLineEdit* time_;
  QLineEdit* extra_;
  QList<QVariantMap> partitions_;
};

}  // namespace meshwork::ui
