// The cluster the user plans for: a list of nodes (the local machine first) with what a probe
// found on each. A Qt list model so the cluster panel's cards, the inspector and the plan all read
// the same data; the model knows nothing about widgets.
#pragma once

#include <QAbstractListModel>
#include <QHash>
#include <QStringList>
#include <vector>

#include "core/cluster_source.h"
#include "core/run_config.h"

namespace meshwork::ui {

struct GpuInfo {
  QString name;             // "NVIDIA H100 80GB HBM3"
  double memory_bytes = 0;  // total device memory
};

struct NodeInfo {
  enum class State { unprobed, probing, online, failed, awaiting_key };
  QString host;          // as the user wrote it: "local", "user@host:port", an ssh_config alias
  QString hostname;      // what the node calls itself, once probed
  State state = State::unprobed;
  int progress = 0;      // 0..100 while probing
  QString progress_text; // "connecting", "nvidia-smi", ...
  QString error;         // the probe's own words, shown on the card
  QString fingerprint;   // unknown host key waiting for the user's decision (SHA256:...)
  int cpu_cores = 0;
  double memory_bytes = 0;
  std::vector<GpuInfo> gpus;
  QString links;         // "NVLink (NV18)", "PCIe", "" when single-device
  bool fast_links = true;  // false when GPUs talk over PCIe only: tp across them is slow
  QStringList ib_ports;  // "mlx5_0 port 1: 400 Gb/s, Active"
  int slots = 1;         // ranks this node runs
  bool described = false;  // a node of a cluster described by hardware: never reached
  bool is_local() const { return host == QLatin1String("local"); }
  // Counted in the plan: every node but one that did not answer (its probe failed, or its host
  // key was not trusted). A node not probed yet counts with what is known of it.
  bool counted() const { return state != State::failed && state != State::awaiting_key; }
  bool has_gpus() const { return !gpus.empty(); }
};

// What the plan needs to know about the cluster as a whole.
struct ClusterSummary {
  int num_nodes = 0;           // counted nodes only (NodeInfo::counted)
  int world_size = 0;          // sum of slots
  int ranks_per_node = 1;      // slots of the first node (placement is uniform, as torchrun's)
  bool uniform = true;         // all nodes have the same slots
  DeviceKind device = DeviceKind::cpu;
  QString device_name;         // "NVIDIA H100 80GB HBM3" or "CPU"
  double device_memory_bytes = 0;  // per rank: smallest GPU, or node memory / slots on CPU
  std::vector<bool> fast_links;    // per node
  QStringList unreachable;         // nodes left out: they did not answer (NodeInfo::counted)
  // CPU ranks beyond a node's cores: the most oversubscribed counted CPU node (ranks > cores),
  // its ranks and cores; 0 when none is.
  int oversubscribed_ranks = 0;
  int oversubscribed_cores = 0;
  QString oversubscribed_node;
};

// "4 ranks on local's 2 cores: oversubscribed (…)" or "" when no node is.
QString oversubscription_text(const ClusterSummary& s);

class ClusterModel : public QAbstractListModel {
  Q_OBJECT
 public:
  enum Role { HostRole = Qt::UserRole + 1, StateRole, ErrorRole };
  explicit ClusterModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;

  const std::vector<NodeInfo>& nodes() const { return nodes_; }
  const NodeInfo& node(int row) const { return nodes_.at(static_cast<size_t>(row)); }
  int find(const QString& host) const;  // -1 when absent; a hash lookup, not a scan

  // Adds a node unless a node with that host exists; returns its row.
  int add_node(const NodeInfo& node);
  // Adds many nodes (a hostfile, a Slurm partition) as ONE insertion: one rowsInserted and one
  // cluster_changed for the whole batch, so views and the plan update once, not once per node.
  // Hosts already present (or repeated in the batch) are skipped. Returns each node's row.
  std::vector<int> add_nodes(const std::vector<NodeInfo>& nodes);
  void remove_node(int row);
  void update_node(int row, const NodeInfo& node);
  void set_slots(int row, int slots);
  void clear();

  // Where the nodes come from: SSH nodes (probed one by one) or a Slurm partition (one row per
  // job node, from the Slurm section). Views and the launcher ask this, not the rows' names.
  const ClusterSource& source() const { return source_; }
  bool is_slurm() const { return meshwork::is_slurm(source_); }
  bool is_described() const { return meshwork::is_described(source_); }
  // A cluster described by hardware: one row per node, each with its GPUs, online (nothing is
  // probed), replacing every row.
  void show_described(const DescribedClusterSource& cluster, const QString& gpu_name);
  // The partition's job nodes as rows (one insertion), replacing every row.
  void show_slurm_partition(const SlurmPartitionSource& partition, int cpus_per_node, double memory_bytes_per_node);
  // Saved rows (a run config's nodes) and where they come from, replacing every row.
  void show_nodes(const std::vector<NodeConfig>& configs, const ClusterSource& source = SshNodesSource{});

  ClusterSummary summary() const;
  // The nodes as the run config stores them (host, slots, and what the probe found in "extra"),
  // and back: loading a config restores cards without probing again.
  std::vector<NodeConfig> to_node_configs() const;
  // The counted nodes only (NodeInfo::counted), as the plan places its ranks on them.
  std::vector<NodeConfig> counted_node_configs() const;
  void from_node_configs(const std::vector<NodeConfig>& configs);

 Q_SIGNALS:
  void cluster_changed();  // nodes added/removed or slots/devices changed

 private:
  void reindex();  // rebuilds row_of_host_ after rows moved (removal, reset)

  std::vector<NodeInfo> nodes_;
  QHash<QString, int> row_of_host_;
  ClusterSource source_;
};

}  // namespace meshwork::ui
