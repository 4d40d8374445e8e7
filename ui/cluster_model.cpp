#include "ui/cluster_model.h"

#include <algorithm>

namespace meshwork::ui {

ClusterModel::ClusterModel(QObject* parent) : QAbstractListModel(parent) {}

int ClusterModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(nodes_.size());
}

QVariant ClusterModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const NodeInfo& n = nodes_[static_cast<size_t>(index.row())];
  switch (role) {
    case Qt::DisplayRole:
    case HostRole: return n.host;
    case StateRole: return static_cast<int>(n.state);
    case ErrorRole: return n.error;
    default: return {};
  }
}

QString oversubscription_text(const ClusterSummary& s) {
  if (s.oversubscribed_ranks <= s.oversubscribed_cores || s.oversubscribed_cores <= 0) return {};
  return QObject::tr("%1 ranks on %2 cores of %3: oversubscribed, the ranks take turns on the cores, so the "
                     "estimates (a core per rank) are too fast; set at most %2 ranks on it")
      .arg(s.oversubscribed_ranks)
      .arg(s.oversubscribed_cores)
      .arg(s.oversubscribed_node);
}

int ClusterModel::find(const QString& host) const { return row_of_host_.value(host, -1); }

void ClusterModel::reindex() {
  row_of_host_.clear();
  row_of_host_.reserve(static_cast<qsizetype>(nodes_.size()));
  for (size_t i = 0; i < nodes_.size(); ++i)  // the first row of a host wins, as a scan would find
    if (!row_of_host_.contains(nodes_[i].host)) row_of_host_.insert(nodes_[i].host, static_cast<int>(i));
}

int ClusterModel::add_node(const NodeInfo& node) { return add_nodes({node}).front(); }

std::vector<int> ClusterModel::add_nodes(const std::vector<NodeInfo>& nodes) {
  std::vector<int> rows(nodes.size(), -1);
  // First pass: which are new (and the rows they will get), without touching the model.
  std::vector<size_t> fresh;
  QHash<QString, int> batch;  // hosts new in this batch -> their future row
  const int first = rowCount();
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (int row = find(nodes[i].host); row >= 0) {
      rows[i] = row;
    } else if (auto it = batch.constFind(nodes[i].host); it != batch.constEnd()) {
      rows[i] = *it;
    } else {
      rows[i] = first + static_cast<int>(fresh.size());
      batch.insert(nodes[i].host, rows[i]);
      fresh.push_back(i);
    }
  }
  if (fresh.empty()) return rows;
  beginInsertRows({}, first, first + static_cast<int>(fresh.size()) - 1);
  nodes_.reserve(nodes_.size() + fresh.size());
  for (size_t i : fresh) {
    row_of_host_.insert(nodes[i].host, static_cast<int>(nodes_.size()));
    nodes_.push_back(nodes[i]);
  }
  endInsertRows();
  Q_EMIT cluster_changed();
  return rows;
}

void ClusterModel::remove_node(int row) {
  if (row < 0 || row >= rowCount()) return;
  beginRemoveRows({}, row, row);
  nodes_.erase(nodes_.begin() + row);
  reindex();
  endRemoveRows();
  Q_EMIT cluster_changed();
}

void ClusterModel::update_node(int row, const NodeInfo& node) {
  if (row < 0 || row >= rowCount()) return;
  NodeInfo& old = nodes_[static_cast<size_t>(row)];
  // Only a change of devices or slots changes the plan; progress ticks do not.
  const bool shape_changed = old.slots != node.slots || old.gpus.size() != node.gpus.size() ||
                             old.memory_bytes != node.memory_bytes ||
                             old.fast_links != node.fast_links || old.cpu_cores != node.cpu_cores ||
                             old.counted() != node.counted();  // a node that stops answering leaves the plan
  const bool renamed = old.host != node.host;
  old = node;
  if (renamed) reindex();
  Q_EMIT dataChanged(index(row), index(row));
  if (shape_changed) Q_EMIT cluster_changed();
}

void ClusterModel::set_slots(int row, int slots) {
  if (row < 0 || row >= rowCount()) return;
  NodeInfo n = node(row);
  n.slots = std::max(1, slots);
  update_node(row, n);
}

void ClusterModel::clear() {
  beginResetModel();
  nodes_.clear();
  row_of_host_.clear();
  endResetModel();
  Q_EMIT cluster_changed();
}

void ClusterModel::show_slurm_partition(const SlurmPartitionSource& partition, int cpus_per_node,
                                        double memory_bytes_per_node) {
  source_ = partition;
  clear();
  std::vector<NodeInfo> rows;
  for (int i = 0; i < partition.nodes; ++i) {
    NodeInfo n;
    n.host = QString::fromStdString(slurm_node_name(partition, i));
    n.hostname = n.host;
    n.state = NodeInfo::State::online;
    n.slots = partition.ranks_per_node;
    n.cpu_cores = std::max(1, cpus_per_node);
    n.memory_bytes = memory_bytes_per_node;
    // The GPU memory as declared for the partition; 0 (not known) leaves the capacity unknown
    // rather than assumed (summary() skips it).
    const QString gpu = partition.gpu_type.empty() ? QStringLiteral("GPU (Slurm GRES)")
                                                   : QStringLiteral("GPU %1 (Slurm GRES)").arg(QString::fromStdString(partition.gpu_type));
    for (int g = 0; g < partition.gpus_per_node; ++g) n.gpus.push_back(GpuInfo{gpu, partition.gpu_memory_bytes});
    rows.push_back(std::move(n));
  }
  add_nodes(rows);
}

void ClusterModel::show_nodes(const std::vector<NodeConfig>& configs, const ClusterSource& source) {
  source_ = source;
  from_node_configs(configs);  // one reset of every row
}

void ClusterModel::show_described(const DescribedClusterSource& cluster, const QString& gpu_name) {
  source_ = cluster;
  clear();
  std::vector<NodeInfo> rows;
  rows.reserve(static_cast<size_t>(cluster.nodes));
  for (int i = 0; i < cluster.nodes; ++i) {
    NodeInfo n;
    n.host = QString::fromStdString(described_node_name(cluster, i));
    n.hostname = n.host;
    n.state = NodeInfo::State::online;
    n.described = true;
    n.slots = cluster.gpus_per_node;
    for (int g = 0; g < cluster.gpus_per_node; ++g) n.gpus.push_back(GpuInfo{gpu_name, cluster.gpu_memory_bytes});
    n.links = QStringLiteral("%1 GB/s per GPU within the node, %2 GB/s between nodes (described)")
                  .arg(cluster.intra_node_bytes_per_s / 1e9, 0, 'f', 0)
                  .arg(cluster.inter_node_bytes_per_s / 1e9, 0, 'f', 0);
    rows.push_back(std::move(n));
  }
  add_nodes(rows);
}

ClusterSummary ClusterModel::summary() const {
  ClusterSummary s;
  std::vector<const NodeInfo*> counted;
  counted.reserve(nodes_.size());
  for (const NodeInfo& n : nodes_) {
    if (n.counted()) counted.push_back(&n);
    else s.unreachable << n.host;
  }
  s.num_nodes = static_cast<int>(counted.size());
  if (counted.empty()) return s;
  s.ranks_per_node = std::max(1, counted.front()->slots);
  // Nodes not probed yet say nothing about devices; the probed ones decide.
  bool any_known = false, gpus = true;
  for (const NodeInfo* p : counted) {
    const NodeInfo& n = *p;
    if (!n.has_gpus() && n.cpu_cores == 0) continue;
    any_known = true;
    gpus = gpus && n.has_gpus();
  }
  gpus = gpus && any_known;
  s.device = gpus ? DeviceKind::cuda : DeviceKind::cpu;
  double min_mem = 0;
  for (const NodeInfo* p : counted) {
    const NodeInfo& n = *p;
    if (!n.has_gpus() && n.cpu_cores > 0 && n.slots > n.cpu_cores &&
        (s.oversubscribed_cores == 0 ||
         double(n.slots) / n.cpu_cores > double(s.oversubscribed_ranks) / s.oversubscribed_cores)) {
      s.oversubscribed_ranks = n.slots;
      s.oversubscribed_cores = n.cpu_cores;
      s.oversubscribed_node = n.is_local() ? QStringLiteral("this machine") : n.host;
    }
    s.world_size += std::max(1, n.slots);
    if (n.slots != s.ranks_per_node) s.uniform = false;
    s.fast_links.push_back(n.fast_links);
    // Per-rank capacity: the smallest GPU bounds every rank (all ranks hold the same shard
    // sizes); on CPU the ranks of a node share its memory.
    double per_rank = 0;
    if (gpus && !n.has_gpus()) continue;  // unknown node: its capacity is not known yet
    if (gpus) {
      per_rank = std::min_element(n.gpus.begin(), n.gpus.end(), [](auto& a, auto& b) {
                   return a.memory_bytes < b.memory_bytes;
                 })->memory_bytes;
      if (s.device_name.isEmpty()) s.device_name = n.gpus.front().name;
    } else {
      per_rank = n.memory_bytes / std::max(1, n.slots);
    }
    if (per_rank > 0 && (min_mem == 0 || per_rank < min_mem)) min_mem = per_rank;
  }
  if (!gpus) s.device_name = QStringLiteral("CPU");
  s.device_memory_bytes = min_mem;
  return s;
}

std::vector<NodeConfig> ClusterModel::to_node_configs() const {
  std::vector<NodeConfig> out;
  for (const NodeInfo& n : nodes_) {
    NodeConfig c;
    c.host = n.host.toStdString();
    c.slots = n.slots;
    nlohmann::json gpus = nlohmann::json::array();
    for (const GpuInfo& g : n.gpus)
      gpus.push_back({{"name", g.name.toStdString()}, {"memory_bytes", g.memory_bytes}});
    c.extra = {{"hostname", n.hostname.toStdString()},
               {"cpu_cores", n.cpu_cores},
               {"memory_bytes", n.memory_bytes},
               {"gpus", gpus},
               {"links", n.links.toStdString()},
               {"fast_links", n.fast_links}};
    nlohmann::json ib = nlohmann::json::array();
    for (const QString& p : n.ib_ports) ib.push_back(p.toStdString());
    c.extra["ib_ports"] = ib;
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<NodeConfig> ClusterModel::counted_node_configs() const {
  std::vector<NodeConfig> all = to_node_configs();
  std::vector<NodeConfig> out;
  out.reserve(all.size());
  for (size_t i = 0; i < all.size(); ++i)
    if (nodes_[i].counted()) out.push_back(std::move(all[i]));
  return out;
}

void ClusterModel::from_node_configs(const std::vector<NodeConfig>& configs) {
  beginResetModel();
  nodes_.clear();
  for (const NodeConfig& c : configs) {
    NodeInfo n;
    n.host = QString::fromStdString(c.host);
    n.slots = std::max(1, c.slots);
    const nlohmann::json& e = c.extra;
    auto str = [&](const char* k) {
      return e.contains(k) && e[k].is_string() ? QString::fromStdString(e[k].get<std::string>())
                                               : QString();
    };
    auto num = [&](const char* k) { return e.contains(k) && e[k].is_number() ? e[k].get<double>() : 0.0; };
    n.hostname = str("hostname");
    n.cpu_cores = static_cast<int>(num("cpu_cores"));
    n.memory_bytes = num("memory_bytes");
    n.links = str("links");
    n.fast_links = !e.contains("fast_links") || !e["fast_links"].is_boolean() || e["fast_links"].get<bool>();
    if (e.contains("gpus") && e["gpus"].is_array())
      for (const auto& g : e["gpus"])
        if (g.is_object())
          n.gpus.push_back({QString::fromStdString(g.value("name", std::string("GPU"))),
                            g.value("memory_bytes", 0.0)});
    if (e.contains("ib_ports") && e["ib_ports"].is_array())
      for (const auto& p : e["ib_ports"])
        if (p.is_string()) n.ib_ports << QString::fromStdString(p.get<std::string>());
    n.described = meshwork::is_described(source_);
    // A node restored from a file with devices in it counts as known; the user can re-probe.
    n.state = (n.cpu_cores > 0 || !n.gpus.empty()) ? NodeInfo::State::online
                                                   : NodeInfo::State::unprobed;
    nodes_.push_back(std::move(n));
  }
  reindex();
  endResetModel();
  Q_EMIT cluster_changed();
}

}  // namespace meshwork::ui
