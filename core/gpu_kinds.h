// The GPU kinds a cluster can be described by before it exists (`meshwork plan --gpu KIND`, the
// workbench's hypothetical cluster): one table of each kind's memory, dense peak rates and links,
// the one place these facts live. The figures are the vendors' data sheets (dense, no sparsity;
// the intra-node link per direction per GPU; the inter-node link one NIC per GPU as the
// reference systems ship them); docs/estimator.md, "GPU kinds", gives the sources.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/cluster_source.h"
#include "core/error.h"
#include "core/time_estimate.h"

namespace meshwork {

struct GpuKind {
  std::string id;    // what --gpu takes and the run config stores: "h100-80gb"
  std::string name;  // what the workbench shows: "NVIDIA H100 80 GB (SXM)"
  double memory_bytes = 0;            // per GPU
  double peak_flops_bf16 = 0;         // per GPU, dense
  double peak_flops_fp32 = 0;         // per GPU, dense (TF32 tensor cores where there are some)
  double intra_node_bytes_per_s = 0;  // per direction, one GPU (NVLink, Infinity Fabric or PCIe)
  double inter_node_bytes_per_s = 0;  // per GPU: its NIC
  bool operator==(const GpuKind&) const = default;
};

// The known kinds, in the order the workbench lists them.
const std::vector<GpuKind>& gpu_kinds();
// The kind `id` names (case-insensitive); an Error naming `field` and the ids allowed.
Result<GpuKind> find_gpu_kind(std::string_view id, const std::string& field = "--gpu");
// "h100-80gb, h200, ...": the ids, for help and errors.
std::string gpu_kind_ids();

// core's hardware model for GPUs of this kind: the kind's peaks and links, the GPU defaults'
// efficiency, latency and overlap (HardwareModel::h100()). For an H100 80 GB it is h100() itself.
HardwareModel hardware_for(const GpuKind& kind);
// The same for a described cluster's own figures (a kind of the table, or custom ones).
HardwareModel hardware_for(const DescribedClusterSource& cluster);

// A described cluster of `nodes` x `gpus_per_node` GPUs of `kind`, with the kind's figures.
DescribedClusterSource describe_cluster(const GpuKind& kind, int nodes, int gpus_per_node, std::string name = "");

}  // namespace meshwork
