// Where a run's nodes come from: SSH nodes the run config lists one by one (cluster.nodes, each
// reached over SSH, or "local"), or a Slurm partition, whose nodes the job is given when it
// starts. The run config's "cluster" object carries it as "source"; the launcher, the workbench's
// cluster model and the store ask it, never a node's name.
//
//   "cluster": {"source": {"kind": "slurm", "login": "login1", "partition": "gpu", "nodes": 2,
//                          "ranks_per_node": 8, "gpus_per_node": 8, "gpu_type": "h100",
//                          "gpu_memory_bytes": 85899345920},
//               "nodes": [...]}
//
// No "source" (every file written before it existed, and every SSH config): SSH nodes.
#pragma once

#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace meshwork {

// The nodes are the run config's cluster.nodes.
struct SshNodesSource {
  bool operator==(const SshNodesSource&) const = default;
};

// A Slurm partition, reached through its login node. The run config's cluster.nodes then hold
// one placeholder per job node (slurm_node_name()): Slurm picks the hosts.
struct SlurmPartitionSource {
  std::string login;      // [user@]host[:port], an ssh_config alias, or "local"
  std::string partition;  // "" = the cluster's default partition
  int nodes = 1;
  int ranks_per_node = 1;
  int gpus_per_node = 0;
  std::string gpu_type;  // the GRES type sinfo names ("h100"), "" when none
  // Per GPU, as declared for the partition (sinfo reports GPU counts and types, not their
  // memory); 0 = not known, and then nothing is assumed.
  double gpu_memory_bytes = 0;
  bool operator==(const SlurmPartitionSource&) const = default;
};

using ClusterSource = std::variant<SshNodesSource, SlurmPartitionSource>;

inline bool is_slurm(const ClusterSource& s) { return std::holds_alternative<SlurmPartitionSource>(s); }
inline const SlurmPartitionSource* slurm_source(const ClusterSource& s) {
  return std::get_if<SlurmPartitionSource>(&s);
}

// "ssh" or "slurm": the kind as the JSON names it.
const char* cluster_source_kind(const ClusterSource& s);

nlohmann::json to_json(const ClusterSource& s);
// Reads {"kind":"ssh"} or {"kind":"slurm", ...}; errors name `field` and the member
// ("cluster.source.nodes").
Result<ClusterSource> cluster_source_from_json(const nlohmann::json& j, const std::string& field = "cluster.source");

// The name of job node `index` in the run config and the workbench (Slurm names the hosts only
// when the job starts): "gpu node 0", "default partition node 0". A label, never a host.
std::string slurm_node_name(const SlurmPartitionSource& s, int index);

// The source of a stored run: its run config's cluster.source, else (a run stored before the
// source existed) Slurm when the store's cluster record has a "slurm" part, else SSH nodes.
ClusterSource stored_cluster_source(const nlohmann::json& config, const nlohmann::json& cluster_record);

}  // namespace meshwork
