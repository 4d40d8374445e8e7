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
// A cluster described by its hardware, planned before it exists (nothing is reached; nothing can
// be launched on it): N nodes x G GPUs of a kind of core/gpu_kinds.h, or custom figures.
//
//   "cluster": {"source": {"kind": "described", "name": "64 x H100", "nodes": 64,
//                          "gpus_per_node": 8, "gpu": "h100-80gb", "gpu_memory_bytes": ...,
//                          "peak_flops_bf16": ..., "peak_flops_fp32": ...,
//                          "intra_node_bytes_per_s": ..., "inter_node_bytes_per_s": ...}}
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

// A cluster described by hardware. Every figure is stored, so a custom kind (gpu "custom") and a
// kind of the table plan alike and a file read later plans as it did when saved.
struct DescribedClusterSource {
  std::string name;  // the user's label ("64 x H100"); "" = none
  int nodes = 1;
  int gpus_per_node = 8;
  std::string gpu = "h100-80gb";  // a core/gpu_kinds.h id, or "custom"
  double gpu_memory_bytes = 0;    // per GPU
  double peak_flops_bf16 = 0;     // per GPU, dense
  double peak_flops_fp32 = 0;
  double intra_node_bytes_per_s = 0;  // per direction, one GPU
  double inter_node_bytes_per_s = 0;  // per GPU
  bool operator==(const DescribedClusterSource&) const = default;
};

using ClusterSource = std::variant<SshNodesSource, SlurmPartitionSource, DescribedClusterSource>;

inline bool is_slurm(const ClusterSource& s) { return std::holds_alternative<SlurmPartitionSource>(s); }
inline const SlurmPartitionSource* slurm_source(const ClusterSource& s) {
  return std::get_if<SlurmPartitionSource>(&s);
}
inline bool is_described(const ClusterSource& s) { return std::holds_alternative<DescribedClusterSource>(s); }
inline const DescribedClusterSource* described_source(const ClusterSource& s) {
  return std::get_if<DescribedClusterSource>(&s);
}

// The name of described node `index`: "<name> node 3" (a label, never a host).
std::string described_node_name(const DescribedClusterSource& s, int index);

// "ssh", "slurm" or "described": the kind as the JSON names it.
const char* cluster_source_kind(const ClusterSource& s);

nlohmann::json to_json(const ClusterSource& s);
// Reads {"kind":"ssh"}, {"kind":"slurm", ...} or {"kind":"described", ...}; errors name `field` and the member
// ("cluster.source.nodes").
Result<ClusterSource> cluster_source_from_json(const nlohmann::json& j, const std::string& field = "cluster.source");

// The name of job node `index` in the run config and the workbench (Slurm names the hosts only
// when the job starts): "gpu node 0", "default partition node 0". A label, never a host.
std::string slurm_node_name(const SlurmPartitionSource& s, int index);

// The source of a stored run: its run config's cluster.source, else (a run stored before the
// source existed) Slurm when the store's cluster record has a "slurm" part, else SSH nodes.
ClusterSource stored_cluster_source(const nlohmann::json& config, const nlohmann::json& cluster_record);

}  // namespace meshwork
