// The Cluster mode's hypothetical cluster: a cluster described by its hardware (N nodes x G GPUs
// of a kind of core/gpu_kinds.h, or custom memory, peak TFLOPS and links), planned before it
// exists. "Plan for it" puts it in the cluster model (ClusterModel::show_described: nothing is
// probed, reached or launched) and keeps it in the saved list beside the SSH nodes and the Slurm
// section, so it is picked again later; the run config carries it as cluster.source "described",
// so a saved configuration plans on it again and File > Export works with no node reachable.
#pragma once

#include <QWidget>
#include <vector>

#include "core/cluster_source.h"
#include "core/run_config.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QToolButton;

namespace meshwork::ui {

class ClusterModel;

class DescribedClusterPanel : public QWidget {
  Q_OBJECT
 public:
  explicit DescribedClusterPanel(ClusterModel* model, QWidget* parent = nullptr);

  // The fields. set_kind("custom") unlocks the figures; a known kind fills them from core's table.
  void set_name(const QString& name);
  void set_nodes(int nodes);
  void set_gpus_per_node(int gpus);
  bool set_kind(const QString& id);  // false: no such kind
  void set_custom(double memory_gib, double bf16_tflops, double fp32_tflops, double intra_gb_s, double inter_gb_s);
  // The cluster the fields describe.
  DescribedClusterSource source() const;

  // Plans for the described cluster (replacing the SSH nodes, which Back brings back) and saves
  // it in the list.
  Q_SLOT void plan_for_it();
  // The SSH nodes the cluster had before.
  Q_SLOT void back_to_nodes();
  // The saved clusters' labels, and using one of them (fields and plan); false when absent.
  QStringList saved() const;
  bool use_saved(const QString& label);
  Q_SLOT void delete_saved();
  static QString label_of(const DescribedClusterSource& s);
  // The toggle and the saved list, for the Cluster heading's line (ClusterPanel::add_section).
  QWidget* header() const { return header_; }

 private:
  void fill_from_kind();
  void load_saved();
  void store_saved() const;
  void update_state();

  ClusterModel* model_;
  std::vector<DescribedClusterSource> saved_;
  std::vector<NodeConfig> nodes_before_;
  ClusterSource source_before_;
  QWidget* header_;
  QToolButton* toggle_;
  QWidget* body_;
  QComboBox* saved_combo_;
  QPushButton* delete_;
  QLineEdit* name_;
  QSpinBox* nodes_;
  QSpinBox* gpus_;
  QComboBox* kind_;
  QDoubleSpinBox* memory_gib_;
  QDoubleSpinBox* bf16_;
  QDoubleSpinBox* fp32_;
  QDoubleSpinBox* intra_;
  QDoubleSpinBox* inter_;
  QPushButton* plan_;
  QPushButton* back_;
  QLabel* state_;
};

}  // namespace meshwork::ui
